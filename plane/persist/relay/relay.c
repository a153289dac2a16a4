/* persist/relay/relay.c: a relay's backend (--upstream): the state, rollout
 * records and tokens of its upstream, followed over the relay stream
 * (persist/relay/link.h) and kept in memory; node records go up in batches.
 * Nothing is written here: writes belong to the origin, and a relay never
 * leads a rollout (it serves the targets the upstream's records say).
 *
 * The stream's events (docs/protocol.md, "Relays"):
 *   tokens     {"tokens":[record...]}             every token record
 *   rollout    {"released":R,"run":record|null}   the newest rollout
 *   state      {"version","base","full","horizon","released","statement","overridden",
 *               "changes":[{"name","version","body"}|{"name","version",
 *               "deleted_at"}...]}  every state of a name after base, by
 *               version, so the history a rollout's targets need is here
 *   heartbeat  {"version","time","interval","statement","report"}
 *   approvals  {"approvals":[{"version","sub","kid","token"}...]}  every
 *              approval the upstream keeps, when they change
 * Until follow() the events wait in a queue (the plane starts with the
 * first state in hand); then they are handed over as they come. */
#include "json.h"
#include "log.h"
#include "persist/node_changes.h"
#include "persist/persist.h"
#include "persist/records_json.h"
#include "persist/relay/link.h"
#include "persist/relay/state.h"
#include "persist/rollout_rec.h"
#include "strmap.h"
#include "util.h"
#include "xmalloc.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FIRST_STATE_WAIT_MS 15000
#define CALL_TIMEOUT_MS 5000
#define MAX_EVENT_BYTES (256u << 20)
#define NODES_BATCH 50000            /* node changes a POST (the upstream takes 100,000) */
#define NODES_BATCH_BYTES (4u << 20) /* and about its bytes: under the upstream's 16 MiB */

/* What the upstream last heard of a node (persist/node_changes.h): the
 * next save sends what differs. */
struct up_heard {
	uint64_t conn;               /* a hash of the connection's parts */
	uint64_t acked_version, acks;
	int healthy;
	uint64_t nack_version, nacks, stale, vf;
	int64_t held_at;             /* its held NACK's time (0: none) */
	int counts;                  /* whether it counts traffic (persist_node.counts) ... */
	uint64_t counts_why;         /* ... and a hash of why not */
	/* the upstream refused the node's last changes: nothing of it is
	 * heard (known false), and it goes again whole at retry_at (monotonic
	 * ms), backing off with each refusal in a row */
	bool known;
	unsigned refusals;
	int64_t retry_at;
};

/* a refused node goes again after 1 s, 2 s, 4 s, ... at most a minute */
#define REFUSED_RETRY_MS 1000
#define REFUSED_RETRY_MAX_MS 60000

struct queued {
	char *type, *data;
	size_t len;
	struct queued *next;
};

struct persist_relay {
	struct persist base;
	struct relay_link *link;
	char *id;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	/* under lock */
	bool following;
	struct queued *qhead, *qtail;
	bool have_state, have_tokens;
	cJSON *tokens;               /* the first tokens event, for tokens_load */
	struct ro_run run;           /* the newest rollout record */
	bool have_run, have_released;
	uint64_t released;
	uint64_t version;            /* what the store holds (the resume point) */
	struct persist_follow f;
	/* the follower's thread only (the link's, or follow()'s caller) */
	struct strmap view;          /* name -> version * 2 + live: what the store holds */
	uint64_t horizon;
	bool applied_once;
	atomic_uint report_s;        /* the report interval the upstream's last heartbeat asked for (0: none) */
	/* the nodes' saver's only (nodes_flush, one at a time): what the
	 * upstream heard of each node (id -> struct up_heard *), forgotten
	 * when the link reaches an upstream (heard_reset) */
	struct strmap heard_up;
	atomic_bool heard_reset;
	uint64_t held_up;            /* the version held the upstream last heard of */
	/* under lock: the upstream's own word that it is stale (its last
	 * heartbeat's "stale"; cleared by one without), whether the stream
	 * open now brought a heartbeat yet, and the last judgment (kept
	 * through a reconnect until a heartbeat says otherwise) */
	bool up_stale;
	int64_t up_since;
	char up_why[200];
	bool heard;
	bool judged_stale;
	int64_t judged_since;
	char judged_why[300];
};

/* A relay whose stream from its upstream has been down this long (one of
 * the origin's heartbeats to relays) is stale; a reconnect within it is
 * not news. */
#define STALE_GRACE_MS 2000
/* A relay moves off a stale upstream to the next of --upstream at most
 * this often. */
#define MOVE_HOLD_MS 30000

static void heard_forget(struct persist_relay *x);

static struct persist_relay *X(struct persist *p)
{
	return (struct persist_relay *)p;
}

/* ---- applying what the upstream says ------------------------------------- */

static void view_set(struct persist_relay *x, const char *name, uint64_t version, bool live)
{
	intptr_t v = (intptr_t)(version * 2 + (live ? 1 : 0)), cur;
	if (strmap_get(&x->view, name, &cur))
		*strmap_ref(&x->view, name) = v;   /* present: the map keeps its own key */
	else
		strmap_put(&x->view, xstrdup(name), v);
}

static void remotes_free(struct persist_remote *ch, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(ch[i].name);
		free(ch[i].body);
	}
	free(ch);
}

/* The tombstones at or below the horizon: the upstream dropped them. */
static size_t pruned_below(struct persist_relay *x, uint64_t horizon, char ***out)
{
	size_t n = 0, cap = 0;
	char **names = NULL;
	for (size_t i = 0; i < x->view.cap; i++) {
		const struct strmap_slot *s = &x->view.slots[i];
		if (!s->key || (s->val & 1) || (uint64_t)s->val / 2 > horizon)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			names = xrealloc(names, cap * sizeof(*names));
		}
		names[n++] = xstrdup(s->key);
	}
	*out = names;
	return n;
}

static int apply_state(struct persist_relay *x, const char *data, size_t len)
{
	struct relay_state rs;
	char err[512];
	if (relay_state_decode(data, len, &rs, err, sizeof(err)) < 0) {
		log_warn("relay: a state from the upstream is refused: %s", err);
		return -1;
	}
	/* a snapshot replaces: what it lacks is gone */
	struct persist_remote *gone = NULL;
	size_t ngone = 0;
	if (rs.full && x->applied_once) {
		struct strmap in;
		strmap_init(&in);
		for (size_t i = 0; i < rs.n; i++)
			strmap_put(&in, rs.ch[i].name, 1);
		for (size_t i = 0; i < x->view.cap; i++) {
			const struct strmap_slot *s = &x->view.slots[i];
			intptr_t dummy;
			if (s->key && (s->val & 1) && !strmap_get(&in, s->key, &dummy)) {
				gone = xrealloc(gone, (ngone + 1) * sizeof(*gone));
				gone[ngone++] = (struct persist_remote){ .name = xstrdup(s->key), .version = rs.version,
									 .deleted_at = wall_seconds() };
			}
		}
		strmap_release(&in);
	}
	/* one version at a time: the store takes each name once per call;
	 * nodes are sent only the last (the upstream's version), never a
	 * step between */
	int rc = 0;
	size_t i = 0;
	/* the overridden versions it brings, known before the versions are:
	 * the pushes of them say so to nodes without --trust */
	for (size_t k = 0; k < rs.noverridden && x->f.overridden; k++)
		x->f.overridden(x->f.ctx, rs.overridden[k]);
	if (x->f.catchup)
		x->f.catchup(x->f.ctx, true, true);
	while (i < rs.n && rc == 0) {
		size_t j = i;
		while (j < rs.n && rs.ch[j].version == rs.ch[i].version)
			j++;
		for (size_t m = i; m < j; m++)
			view_set(x, rs.ch[m].name, rs.ch[m].version, rs.ch[m].body != NULL);
		rc = x->f.store(x->f.ctx, rs.ch + i, j - i, NULL, 0, rs.ch[i].version, 0);
		i = j;
	}
	for (size_t m = 0; m < ngone; m++)
		view_set(x, gone[m].name, rs.version, false);
	char **pruned = NULL;
	size_t npruned = rs.horizon > x->horizon ? pruned_below(x, rs.horizon, &pruned) : 0;
	if (rc == 0)
		rc = x->f.store(x->f.ctx, gone, ngone, pruned, npruned, rs.version, rs.horizon);
	if (x->f.catchup)
		x->f.catchup(x->f.ctx, false, rc == 0);
	for (size_t m = 0; m < npruned; m++) {
		free((char *)strmap_del(&x->view, pruned[m]));
		free(pruned[m]);
	}
	free(pruned);
	if (rs.horizon > x->horizon)
		x->horizon = rs.horizon;
	remotes_free(gone, ngone);
	if (rc == 0) {
		x->applied_once = true;
		pthread_mutex_lock(&x->lock);
		x->version = rs.version;
		pthread_mutex_unlock(&x->lock);
	}
	/* under an immediate upstream the released version moves with it */
	if (rs.has_released) {
		pthread_mutex_lock(&x->lock);
		bool moved = !x->have_released || rs.released != x->released;
		x->released = rs.released;
		x->have_released = true;
		pthread_mutex_unlock(&x->lock);
		if (moved && x->f.rollout)
			x->f.rollout(x->f.ctx, NULL, true, rs.released);
	}
	if (rs.statement && x->f.statement)
		x->f.statement(x->f.ctx, rs.version, "", rs.statement);
	relay_state_release(&rs);
	return rc;
}

static int apply_rollout(struct persist_relay *x, const cJSON *o)
{
	const cJSON *rj = cJSON_GetObjectItemCaseSensitive(o, "run");
	struct ro_run run;
	bool have = false;
	if (cJSON_IsObject(rj)) {
		if (record_run_from_json(rj, true, &run) < 0) {
			log_warn("relay: a malformed rollout record from the upstream");
			return -1;
		}
		have = true;
	}
	uint64_t rel = record_u64(o, "released");
	pthread_mutex_lock(&x->lock);
	if (have) {
		ro_run_release(&x->run);
		/* a copy for rollout_load; the follower takes the other */
		x->run = run;
		x->run.reason = xstrdup(run.reason ? run.reason : "");
		x->run.members = xcalloc(run.nmembers + 1, sizeof(char *));
		for (size_t i = 0; i < run.nmembers; i++)
			x->run.members[i] = xstrdup(run.members[i]);
		x->have_run = true;
	}
	x->released = rel;
	x->have_released = true;
	pthread_mutex_unlock(&x->lock);
	if (!x->f.rollout) {
		if (have)
			ro_run_release(&run);
		return 0;
	}
	struct ro_run *taken = NULL;
	if (have) {
		taken = xmalloc(sizeof(*taken));
		*taken = run;
	}
	x->f.rollout(x->f.ctx, taken, true, rel);
	return 0;
}

static int apply_tokens(struct persist_relay *x, const cJSON *o)
{
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(o, "tokens"), *t;
	if (!cJSON_IsArray(arr))
		return -1;
	if (!x->f.token)
		return 0;
	cJSON_ArrayForEach(t, arr) {
		struct persist_token pt;
		if (record_token_from_json(t, &pt) == 0)
			x->f.token(x->f.ctx, &pt);
	}
	return 0;
}

static int apply_approvals(struct persist_relay *x, const cJSON *o)
{
	struct persist_approval *list;
	size_t n;
	if (record_approvals_from_json(o, &list, &n) < 0)
		return -1;
	if (x->f.approvals)   /* its nodes verify every token: a bad one only fails to count */
		x->f.approvals(x->f.ctx, list, n);
	free(list);
	return 0;
}

static int apply_heartbeat(struct persist_relay *x, const cJSON *o)
{
	const cJSON *iv = cJSON_GetObjectItemCaseSensitive(o, "interval");
	if (cJSON_IsNumber(iv) && iv->valuedouble > 0 && iv->valuedouble <= 3600)
		relay_link_set_interval(x->link, iv->valuedouble);
	uint64_t v = record_u64(o, "version");
	const char *stmt = record_str(o, "statement");
	/* a gated rollout runs upstream: our nodes report, and we pass it on */
	uint64_t every = record_u64(o, "report");
	atomic_store(&x->report_s, every <= 3600 ? (unsigned)every : 0);
	/* the upstream is stale itself (cut off from etcd, or a relay cut off
	 * from its own upstream): so are we, unless another upstream is not */
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "stale");
	bool stale = cJSON_IsObject(st);
	pthread_mutex_lock(&x->lock);
	uint64_t have = x->version;
	bool was = x->up_stale;
	x->up_stale = stale;
	x->heard = true;
	if (stale) {
		uint64_t since = record_u64(st, "since");   /* a lying upstream's is clamped */
		x->up_since = since > (uint64_t)wall_seconds() ? wall_seconds() : (int64_t)since;
		/* its words go to logs and to our nodes: printable, bounded */
		snprintf(x->up_why, sizeof(x->up_why), "%.190s", record_str(st, "why"));
		for (char *c = x->up_why; *c; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f)
				*c = '?';
	}
	char why[sizeof(x->up_why)];
	snprintf(why, sizeof(why), "%s", x->up_why);
	pthread_mutex_unlock(&x->lock);
	if (stale && !was) {
		char url[512] = "";
		relay_link_up(x->link, url, sizeof(url));
		log_warn("relay: the upstream %s is stale (%s)", url, why);
	}
	if (stale && relay_link_move(x->link, MOVE_HOLD_MS))
		log_warn("relay: moving to the next upstream: this one is stale");
	/* a fresh statement of the state we hold */
	if (stmt[0] && v == have && x->f.statement)
		x->f.statement(x->f.ctx, v, "", stmt);
	if (v < have)
		log_debug("relay: the upstream is at version %llu, behind our %llu: waiting for it",
			  (unsigned long long)v, (unsigned long long)have);
	return 0;
}

/* One event, on the follower's side. */
static int deliver(struct persist_relay *x, const char *type, const char *data, size_t len)
{
	if (strcmp(type, "state") == 0)
		return apply_state(x, data, len);
	cJSON *o = cJSON_ParseWithLength(data, len);
	int rc = 0;
	if (!cJSON_IsObject(o)) {
		log_warn("relay: a '%s' event from the upstream is not a JSON object", type);
		rc = -1;
	} else if (strcmp(type, "rollout") == 0) {
		rc = apply_rollout(x, o);
	} else if (strcmp(type, "tokens") == 0) {
		rc = apply_tokens(x, o);
	} else if (strcmp(type, "heartbeat") == 0) {
		rc = apply_heartbeat(x, o);
	} else if (strcmp(type, "approvals") == 0) {
		rc = apply_approvals(x, o);
	}   /* other events: a newer upstream's, ignored */
	cJSON_Delete(o);
	return rc;
}

/* ---- the link's callbacks ------------------------------------------------ */

static uint64_t link_resume(void *ctx)
{
	struct persist_relay *x = ctx;
	pthread_mutex_lock(&x->lock);
	uint64_t v = x->following ? x->version : 0;
	pthread_mutex_unlock(&x->lock);
	return v;
}

static void enqueue(struct persist_relay *x, const char *type, const char *data, size_t len)
{
	struct queued *q = xcalloc(1, sizeof(*q));
	q->type = xstrdup(type);
	q->data = xstrndup(data, len);
	q->len = len;
	if (x->qtail)
		x->qtail->next = q;
	else
		x->qhead = q;
	x->qtail = q;
}

static int link_event(void *ctx, const char *type, const char *data, size_t len)
{
	struct persist_relay *x = ctx;
	pthread_mutex_lock(&x->lock);
	if (!x->following) {
		/* before the plane follows: the first state (and what came
		 * with it) is what it starts from */
		if (strcmp(type, "tokens") == 0 && !x->have_tokens) {
			x->tokens = cJSON_ParseWithLength(data, len);
			x->have_tokens = x->tokens != NULL;
		} else if (strcmp(type, "rollout") == 0) {
			cJSON *o = cJSON_ParseWithLength(data, len);
			const cJSON *rj = cJSON_GetObjectItemCaseSensitive(o, "run");
			struct ro_run run;
			if (cJSON_IsObject(rj) && record_run_from_json(rj, true, &run) == 0) {
				ro_run_release(&x->run);
				x->run = run;
				x->have_run = true;
			}
			if (o) {
				x->released = record_u64(o, "released");
				x->have_released = true;
			}
			cJSON_Delete(o);
		}
		enqueue(x, type, data, len);
		if (strcmp(type, "state") == 0)
			x->have_state = true;
		pthread_cond_broadcast(&x->cond);
		pthread_mutex_unlock(&x->lock);
		return 0;
	}
	pthread_mutex_unlock(&x->lock);
	return deliver(x, type, data, len);
}

static void link_health(void *ctx, bool up, const char *url, const char *why)
{
	struct persist_relay *x = ctx;
	if (up) {
		pthread_mutex_lock(&x->lock);
		bool following = x->following;
		pthread_mutex_unlock(&x->lock);
		/* a new upstream (or the old one back) hears every node again */
		atomic_store(&x->heard_reset, true);
		if (following && x->f.resync)
			x->f.resync(x->f.ctx);
	} else {
		/* the next stream's heartbeats say whether its upstream is
		 * stale; until one does, the last judgment stands */
		pthread_mutex_lock(&x->lock);
		x->heard = false;
		pthread_mutex_unlock(&x->lock);
		log_warn("relay: lost upstream %s (%s); serving the state we hold", url, why ? why : "");
	}
}

/* ---- the backend ops ------------------------------------------------------ */

static void rl_close(struct persist *p)
{
	struct persist_relay *x = X(p);
	relay_link_free(x->link);
	while (x->qhead) {
		struct queued *q = x->qhead;
		x->qhead = q->next;
		free(q->type);
		free(q->data);
		free(q);
	}
	cJSON_Delete(x->tokens);
	ro_run_release(&x->run);
	for (size_t i = 0; i < x->view.cap; i++)
		free((char *)x->view.slots[i].key);
	strmap_release(&x->view);
	heard_forget(x);
	strmap_release(&x->heard_up);
	pthread_mutex_destroy(&x->lock);
	pthread_cond_destroy(&x->cond);
	free(x->id);
	free(x);
}

/* The store starts empty: follow() hands it the first state. */
static int rl_load(struct persist *p, persist_resource_cb cb, void *ctx, uint64_t *version, uint64_t *horizon,
		   char *err, size_t errlen)
{
	(void)p, (void)cb, (void)ctx, (void)err, (void)errlen;
	*version = 0;
	*horizon = 0;
	return 0;
}

static int rl_load_history(struct persist *p, persist_history_cb cb, void *ctx, bool *keep, uint64_t *pin,
			   char *err, size_t errlen)
{
	(void)p, (void)cb, (void)ctx, (void)err, (void)errlen;
	*keep = true;   /* the rollout records set the floor */
	*pin = 0;
	return 0;
}

static int rl_refused(struct persist *p, char *err, size_t errlen)
{
	char url[512];
	relay_link_up(X(p)->link, url, sizeof(url));
	snprintf(err, errlen, "this plane is a relay of %s: write to the origin", url);
	return -1;
}

static int rl_commit(struct persist *p, const struct persist_commit *c, char *err, size_t errlen)
{
	(void)c;
	return rl_refused(p, err, errlen);
}

static int rl_trim_history(struct persist *p, bool keep, uint64_t floor, char *err, size_t errlen)
{
	(void)p, (void)keep, (void)floor, (void)err, (void)errlen;
	return 0;   /* memory only: the store trims itself */
}

static int rl_rollout_save(struct persist *p, const struct ro_run *run, uint64_t released, char *err, size_t errlen)
{
	(void)p, (void)run, (void)released;
	snprintf(err, errlen, "a relay records no rollout");
	return PERSIST_FENCED;
}

static int rl_txn_rollout(struct persist_txn *tx, const struct ro_run *run, uint64_t released, char *err,
			  size_t errlen)
{
	return rl_rollout_save(tx->p, run, released, err, errlen);
}

static int rl_rollout_load(struct persist *p, size_t max, bool with_members, struct ro_run **runs, size_t *n,
			   char *err, size_t errlen)
{
	(void)err, (void)errlen;
	struct persist_relay *x = X(p);
	*runs = NULL;
	*n = 0;
	pthread_mutex_lock(&x->lock);
	if (x->have_run && max > 0) {
		struct ro_run *r = xcalloc(1, sizeof(*r));
		*r = x->run;
		r->reason = xstrdup(x->run.reason ? x->run.reason : "");
		r->members = NULL;
		r->nmembers = 0;
		if (with_members) {
			r->members = xcalloc(x->run.nmembers + 1, sizeof(char *));
			for (size_t i = 0; i < x->run.nmembers; i++)
				r->members[i] = xstrdup(x->run.members[i]);
			r->nmembers = x->run.nmembers;
		} else {
			r->member_count = x->run.nmembers;
		}
		*runs = r;
		*n = 1;
	}
	pthread_mutex_unlock(&x->lock);
	return 0;
}

static int rl_released(struct persist *p, uint64_t *v)
{
	struct persist_relay *x = X(p);
	pthread_mutex_lock(&x->lock);
	int got = x->have_released ? 1 : 0;
	*v = x->released;
	pthread_mutex_unlock(&x->lock);
	return got;
}

static int rl_set_released(struct persist *p, uint64_t v, char *err, size_t errlen)
{
	return rl_rollout_save(p, NULL, v, err, errlen);
}

static int rl_nodes_load(struct persist *p, persist_node_cb cb, void *ctx, char *err, size_t errlen)
{
	(void)p, (void)cb, (void)ctx, (void)err, (void)errlen;
	return 0;   /* the nodes report again */
}

/* A batch of node changes, up (persist/node_changes.h): 0, taken; 1, refused
 * whole for what it holds (400, 413, 422: said, and not to be sent again);
 * PERSIST_UNAVAILABLE, to be tried again. */
static int post_batch(struct persist_relay *x, const struct buf *body, size_t n, struct strmap *refused_ids,
		      cJSON **answer, char *err, size_t errlen)
{
	struct buf out = BUF_INIT;
	long st = relay_link_call(x->link, "POST", "/v1/relay/changes", body->data, body->len, CALL_TIMEOUT_MS,
				  &out, err, errlen);
	if (st != 200 && st >= 0)
		snprintf(err, errlen, "the upstream refused %zu node changes (%ld): %.*s", n, st,
			 (int)(out.len > 300 ? 300 : out.len), out.data ? out.data : "");
	if (st == 200) {
		/* some refused alone (a node another relay holds): said, and
		 * the nodes named go again later, backing off (heard_set) */
		cJSON *o = cJSON_ParseWithLength(out.data ? out.data : "", out.len);
		uint64_t refused = record_u64(o, "refused");
		if (refused)
			log_warn("relay: the upstream refused %llu of %zu node changes; the first: %.300s",
				 (unsigned long long)refused, n, record_str(o, "first_refusal"));
		/* the nodes it names go again later (heard_set) */
		const cJSON *ids = cJSON_GetObjectItemCaseSensitive(o, "refused_nodes"), *it;
		cJSON_ArrayForEach(it, ids)
			if (cJSON_IsString(it))
				strmap_put(refused_ids, it->valuestring, 1);
		*answer = o;
	}
	buf_release(&out);
	if (st == 400 || st == 413 || st == 422) {
		/* the batch itself is refused: sent again it would be refused
		 * again, and hold up every change after it. Said, and dropped
		 * (as heard: a node's next change goes up as usual). */
		log_warn("relay: %s; dropped", err);
		return 1;
	}
	return st == 200 ? 0 : PERSIST_UNAVAILABLE;
}

static uint64_t fnv(uint64_t h, const void *data, size_t len)
{
	const unsigned char *p = data;
	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 1099511628211ULL;
	return h;
}

static uint64_t fnv_str(uint64_t h, const char *s)
{
	/* NULL and "" differ; the NUL ends each string */
	if (!s)
		return fnv(h, "\x01", 1);
	return fnv(h, s, strlen(s) + 1);
}

/* What the upstream heard of a record's connection (labels, subscription,
 * transport, first seen, relays beyond, streaming), as one hash. */
static uint64_t conn_hash(const struct persist_node *r)
{
	uint64_t h = 14695981039346656037ULL;
	unsigned char st = r->streaming ? 1 : 0;
	h = fnv(h, &st, 1);
	h = fnv(h, &r->first_seen, sizeof(r->first_seen));
	h = fnv_str(h, r->transport);
	h = fnv_str(h, r->via && r->via[0] ? r->via : "");
	h = fnv_str(h, r->sub);
	return fnv_str(h, r->labels);
}

static struct up_heard heard_of(const struct persist_node *r)
{
	return (struct up_heard){
		.conn = conn_hash(r), .acked_version = r->acked_version, .acks = r->acks, .healthy = r->healthy,
		.nack_version = r->has_nack ? r->nack_version : 0, .nacks = r->nacks, .stale = r->stale,
		.vf = r->verify_failures, .held_at = r->held_at, .counts = r->counts,
		.counts_why = fnv_str(14695981039346656037ULL, r->counts_reason), .known = true,
	};
}

/* One line; a change too big for the upstream's decoder is left out,
 * said, rather than have the whole batch refused again and again. */
static void put(struct buf *out, const struct node_change *c, size_t *k)
{
	if (node_changes_put(out, c) == 0)
		(*k)++;
	else
		log_warn("relay: node %s: its '%c' change is larger than the upstream takes; not sent", c->node,
			 c->kind);
}

/* The lines of what r changed since the upstream last heard of it (h:
 * NULL, never). Returns how many. */
static size_t changes_of(const struct persist_node *r, const struct up_heard *h, struct buf *out)
{
	struct up_heard now = heard_of(r);
	size_t k = 0;
	if (h && !h->known)
		h = NULL;
	struct node_change c = { .node = r->id, .healthy = r->healthy };
	if (!h || h->conn != now.conn) {
		c.kind = NC_CONN;
		c.streaming = r->streaming;
		c.transport = r->transport ? r->transport : "";
		c.first_seen = r->first_seen;
		c.via = r->via ? r->via : "";
		c.sub = r->sub;
		c.labels = r->labels;
		put(out, &c, &k);
	}
	if (r->acked_version && (!h || h->acked_version != now.acked_version || h->acks != now.acks ||
				 h->healthy != now.healthy)) {
		c.kind = NC_ACK;
		c.version = r->acked_version;
		c.count = r->acks;
		put(out, &c, &k);
	}
	if (r->has_nack && (!h || h->nack_version != now.nack_version || h->nacks != now.nacks)) {
		c.kind = NC_NACK;
		c.version = r->nack_version;
		c.count = r->nacks;
		c.nonce = r->nack_nonce;
		c.error = r->nack_error;
		put(out, &c, &k);
	}
	if (r->stale && (!h || h->stale != now.stale)) {
		c.kind = NC_STALE;
		c.count = r->stale;
		put(out, &c, &k);
	}
	if (r->verify_failures && (!h || h->vf != now.vf)) {
		c.kind = NC_VERIFY;
		c.count = r->verify_failures;
		c.version = r->vf_version;
		c.error = r->vf_error;
		put(out, &c, &k);
	}
	if (r->traffic) {
		c.kind = NC_TRAFFIC;
		c.report = r->traffic;
		put(out, &c, &k);
	}
	if (r->held_at && (!h || h->held_at != now.held_at)) {
		c.kind = NC_HELD;
		c.version = r->held_version;
		c.nonce = "";
		c.error = r->held_reason;
		put(out, &c, &k);
	}
	if (r->counts && (!h || h->counts != now.counts || h->counts_why != now.counts_why)) {
		/* whether it counts traffic (the origin's gates: unjudged) */
		c.kind = NC_COUNTS;
		c.count = r->counts > 0;
		c.error = r->counts_reason;
		put(out, &c, &k);
	}
	if (r->key_reg) {
		/* a node's key registration: the upstream judges it (sent
		 * once; the node registers again at its next connection) */
		c.kind = NC_KEY;
		c.reg = r->key_reg;
		c.reg_len = strlen(r->key_reg);
		put(out, &c, &k);
	}
	return k;
}

static void heard_forget(struct persist_relay *x)
{
	for (size_t i = 0; i < x->heard_up.cap; i++)
		if (x->heard_up.slots[i].key) {
			free((char *)x->heard_up.slots[i].key);
			free((void *)x->heard_up.slots[i].val);
		}
	strmap_release(&x->heard_up);
	strmap_init(&x->heard_up);
}

/* Records [from, to) went up: the upstream has heard them, but for those
 * it refused (in refused) and those held back (again set already). */
static void heard_set(struct persist_relay *x, const struct persist_node *recs, size_t from, size_t to,
		      const struct strmap *refused)
{
	for (size_t i = from; i < to; i++) {
		intptr_t v;
		struct up_heard *h;
		if (recs[i].again && *recs[i].again)
			continue;   /* held back: not sent */
		if (recs[i].key_reg && recs[i].key_sent)
			*recs[i].key_sent = true;
		if (strmap_get(&x->heard_up, recs[i].id, &v)) {
			h = (struct up_heard *)v;
		} else {
			h = xcalloc(1, sizeof(*h));
			strmap_put(&x->heard_up, xstrdup(recs[i].id), (intptr_t)h);
		}
		if (refused && strmap_get(refused, recs[i].id, &v)) {
			unsigned k = h->known ? 0 : h->refusals;
			if (k < 31)
				k++;
			int64_t wait = REFUSED_RETRY_MS << (k - 1 < 6 ? k - 1 : 6);
			*h = (struct up_heard){ .known = false, .refusals = k,
						.retry_at = now_ms() + (wait < REFUSED_RETRY_MAX_MS ? wait : REFUSED_RETRY_MAX_MS) };
			if (recs[i].again)
				*recs[i].again = true;
			continue;
		}
		*h = heard_of(&recs[i]);
	}
}

/* What the records changed that the upstream needs, up in batches of at
 * most NODES_BATCH changes and NODES_BATCH_BYTES. A record whose only
 * change is the push this relay sent (version, nonce) sends nothing. */
static int rl_nodes_save(struct persist *p, const struct persist_node *recs, size_t n, char *err, size_t errlen)
{
	struct persist_relay *x = X(p);
	if (atomic_exchange(&x->heard_reset, false)) {
		heard_forget(x);
		x->held_up = 0;
	}
	pthread_mutex_lock(&x->lock);
	uint64_t held = x->version;
	pthread_mutex_unlock(&x->lock);
	struct buf body = BUF_INIT;
	size_t in = 0, from = 0;
	int rc = 0;
	int64_t now = now_ms();
	node_changes_begin(&body, x->id, held);
	for (size_t i = 0; i <= n && rc == 0; i++) {
		if (i < n) {
			intptr_t v;
			const struct up_heard *h =
				strmap_get(&x->heard_up, recs[i].id, &v) ? (const struct up_heard *)v : NULL;
			if (h && !h->known && h->refusals && now < h->retry_at && recs[i].again) {
				*recs[i].again = true;   /* refused lately: held back, dirty */
				continue;
			}
			in += changes_of(&recs[i], h, &body);
		}
		/* the last batch goes also without a change when the version
		 * held moved: the origin derives its nodes' sent_version from it */
		bool last = i == n && (in || held != x->held_up);
		if (last || in >= NODES_BATCH || body.len >= NODES_BATCH_BYTES) {
			node_changes_end(&body, in);
			struct strmap refused;
			strmap_init(&refused);
			cJSON *answer = NULL;
			rc = post_batch(x, &body, in, &refused, &answer, err, errlen);
			if (rc == 1)
				rc = 0;
			if (rc == 0) {
				heard_set(x, recs, from, i < n ? i + 1 : n, &refused);
				x->held_up = held;
			}
			strmap_release(&refused);
			cJSON_Delete(answer);
			buf_reset(&body);
			node_changes_begin(&body, x->id, held);
			in = 0;
			from = i + 1;
		}
	}
	buf_release(&body);
	return rc;
}

static int rl_tokens_load(struct persist *p, persist_token_cb cb, void *ctx, char *err, size_t errlen)
{
	(void)err, (void)errlen;
	struct persist_relay *x = X(p);
	pthread_mutex_lock(&x->lock);
	const cJSON *arr = x->tokens ? cJSON_GetObjectItemCaseSensitive(x->tokens, "tokens") : NULL, *t;
	cJSON_ArrayForEach(t, arr) {
		struct persist_token pt;
		if (record_token_from_json(t, &pt) == 0)
			cb(ctx, &pt);
	}
	pthread_mutex_unlock(&x->lock);
	return 0;
}

static int rl_token_add(struct persist *p, const struct persist_token *t, char *err, size_t errlen)
{
	(void)t;
	return rl_refused(p, err, errlen);
}

static int rl_token_revoke(struct persist *p, const char *id, int64_t when, char *err, size_t errlen)
{
	(void)id, (void)when;
	return rl_refused(p, err, errlen);
}

/* Hands the queue over in order, then lets the link deliver directly. */
static int rl_follow(struct persist *p, const struct persist_follow *f, char *err, size_t errlen)
{
	struct persist_relay *x = X(p);
	bool first = true;   /* the first state is what the plane starts from */
	x->f = *f;
	for (;;) {
		pthread_mutex_lock(&x->lock);
		struct queued *q = x->qhead;
		x->qhead = x->qtail = NULL;
		if (!q)
			x->following = true;
		pthread_mutex_unlock(&x->lock);
		if (!q)
			break;
		while (q) {
			struct queued *next = q->next;
			bool state = strcmp(q->type, "state") == 0;
			if (deliver(x, q->type, q->data, q->len) < 0) {
				log_warn("relay: a queued '%s' event could not be applied", q->type);
				/* what follows builds on it: drop it, start over */
				for (struct queued *r = next; r; r = next) {
					next = r->next;
					free(r->type);
					free(r->data);
					free(r);
				}
				next = NULL;
				if (state && first) {
					free(q->type);
					free(q->data);
					free(q);
					snprintf(err, errlen, "relay: the upstream's first state could not be applied");
					return -1;
				}
				relay_link_reopen(x->link);
			}
			else if (state && first)
				first = false;
			free(q->type);
			free(q->data);
			free(q);
			q = next;
		}
	}
	return 0;
}

static void rl_unfollow(struct persist *p)
{
	relay_link_stop(X(p)->link);
}

static void rl_stats(struct persist *p, struct persist_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->shared = true;
	st->writable = true;   /* writes are refused for what they are, not for quorum */
	st->upstream_down = !relay_link_up(X(p)->link, NULL, 0);
	st->report_s = st->upstream_down ? 0 : atomic_load(&X(p)->report_s);
}

static bool rl_stale(struct persist *p, int64_t *since, char *why, size_t cap, int64_t *recheck_ms)
{
	struct persist_relay *x = X(p);
	char down_why[256];
	int64_t now = now_ms(), down = relay_link_down_since(x->link, down_why, sizeof(down_why));
	*recheck_ms = now + 500;   /* the link and the next heartbeat may say otherwise */
	pthread_mutex_lock(&x->lock);
	bool stale;
	if (down && (now - down >= STALE_GRACE_MS || x->judged_stale)) {
		/* gone past the grace, or gone while stale already: a move to
		 * the next upstream or a reconnect is no sign of being current */
		stale = true;
		*since = wall_seconds() - (now - down) / 1000;
		snprintf(why, cap, "this relay cannot follow its upstream (%s)", down_why);
	} else if (down || !x->heard) {
		/* a moment without the stream, or a stream that has not said yet
		 * whether its upstream is stale: the last judgment stands */
		stale = x->judged_stale;
		if (stale) {
			*since = x->judged_since;
			snprintf(why, cap, "%s", x->judged_why);
		}
		if (down && !stale)
			*recheck_ms = down + STALE_GRACE_MS + 1;
	} else {
		stale = x->up_stale;
		if (stale) {
			*since = x->up_since;
			snprintf(why, cap, "its upstream is stale: %s", x->up_why);
		}
	}
	x->judged_stale = stale;
	if (stale) {
		x->judged_since = *since;
		snprintf(x->judged_why, sizeof(x->judged_why), "%.*s", (int)(sizeof(x->judged_why) - 1), why);
	}
	pthread_mutex_unlock(&x->lock);
	return stale;
}

static const char *rl_replica(struct persist *p)
{
	return X(p)->id;
}

static bool rl_lead(struct persist *p)
{
	(void)p;
	return false;
}

static void rl_controller(struct persist *p, char *holder, size_t cap, uint64_t *terms, size_t *replicas)
{
	char url[512] = "";
	relay_link_up(X(p)->link, url, sizeof(url));
	snprintf(holder, cap, "upstream %s", url);
	*terms = 0;
	*replicas = 0;
}

static const char *rl_upstream(struct persist *p, char *url, size_t cap, bool *up)
{
	struct persist_relay *x = X(p);
	bool u = relay_link_up(x->link, url, cap);
	if (up)
		*up = u;
	return url;
}

static char *rl_statement(struct persist *p, uint64_t version, const char *sub, char *err, size_t errlen)
{
	struct persist_relay *x = X(p);
	char *esc = curl_easy_escape(NULL, sub, 0);
	char *path = xasprintf("/v1/relay/statement?version=%llu&sub=%s", (unsigned long long)version, esc);
	curl_free(esc);
	struct buf out = BUF_INIT;
	long st = relay_link_call(x->link, "GET", path, NULL, 0, 2000, &out, err, errlen);
	free(path);
	char *tok = NULL;
	if (st == 200) {
		cJSON *o = cJSON_ParseWithLength(out.data ? out.data : "", out.len);
		const char *s = record_str(o, "statement");
		if (s[0])
			tok = xstrdup(s);
		cJSON_Delete(o);
	}
	if (!tok && st >= 0)
		snprintf(err, errlen, "the upstream has no statement of version %llu (%ld)",
			 (unsigned long long)version, st);
	buf_release(&out);
	return tok;
}

static const struct persist_ops persist_relay_ops = {
	.name = "relay",
	.close = rl_close,
	.load = rl_load,
	.load_history = rl_load_history,
	.commit = rl_commit,
	.trim_history = rl_trim_history,
	.rollout_save = rl_rollout_save,
	.txn_rollout = rl_txn_rollout,
	.rollout_load = rl_rollout_load,
	.released = rl_released,
	.set_released = rl_set_released,
	.nodes_load = rl_nodes_load,
	.nodes_save = rl_nodes_save,
	.tokens_load = rl_tokens_load,
	.token_add = rl_token_add,
	.token_revoke = rl_token_revoke,
	.follow = rl_follow,
	.unfollow = rl_unfollow,
	.stats = rl_stats,
	.stale = rl_stale,
	.replica = rl_replica,
	.lead = rl_lead,
	.controller = rl_controller,
	.upstream = rl_upstream,
	.statement = rl_statement,
};

struct persist *persist_relay_open(const struct persist_relay_options *cfg, char *err, size_t errlen)
{
	struct persist_relay *x = xcalloc(1, sizeof(*x));
	x->base.ops = &persist_relay_ops;
	pthread_mutex_init(&x->lock, NULL);
	pthread_cond_init(&x->cond, NULL);
	strmap_init(&x->view);
	strmap_init(&x->heard_up);
	if (cfg->relay_id) {
		x->id = xstrdup(cfg->relay_id);
	} else {
		char host[128] = "localhost";
		if (gethostname(host, sizeof(host) - 1) < 0)
			snprintf(host, sizeof(host), "localhost");
		x->id = xstrdup(host);
	}
	struct relay_link_opts o = {
		.urls = cfg->upstream, .relay_id = x->id, .token_file = cfg->token_file,
		.ca_file = cfg->ca, .cert = cfg->cert, .key = cfg->key,
		.max_event = MAX_EVENT_BYTES,
	};
	struct relay_link_cbs cbs = { .ctx = x, .resume = link_resume, .event = link_event, .health = link_health };
	if (!(x->link = relay_link_start(&o, &cbs, err, errlen))) {
		rl_close(&x->base);
		return NULL;
	}
	/* the upstream's state in hand, or say why at start */
	int64_t deadline = now_ms() + FIRST_STATE_WAIT_MS;
	pthread_mutex_lock(&x->lock);
	while (!x->have_state && now_ms() < deadline)
		cond_wait_ms(&x->cond, &x->lock, 200);
	bool got = x->have_state;
	pthread_mutex_unlock(&x->lock);
	if (!got) {
		char url[512];
		relay_link_up(x->link, url, sizeof(url));
		snprintf(err, errlen, "relay: no state from the upstream (%s) within %ds; see the log for why", url,
			 FIRST_STATE_WAIT_MS / 1000);
		rl_close(&x->base);
		return NULL;
	}
	log_info("relay: this plane is relay %s of %s", x->id, cfg->upstream);
	return &x->base;
}
