/* rollout/rollout.c: the rollout controller (see rollout.h).
 *
 * Locks: `ctl` serializes transitions (start, advance, complete, revert);
 * `lock` guards the fields targets are read from and is a leaf: nothing
 * else is locked while it is held, so rollout_target may be called under
 * the store's, the hub's or the nodes' locks. A transition that moves
 * targets changes them first and moves the store's history floor after,
 * so a push computed for an old target still finds its history. */
#include "rollout/rollout.h"
#include "core/core.h"
#include "core/events.h"
#include "core/freeze_state.h"
#include "core/guardcheck.h"
#include "core/hub.h"
#include "core/overrides.h"
#include "core/pushcache.h"
#include "core/sealed.h"
#include "core/store.h"
#include "core/validate.h"
#include "log.h"
#include "persist/persist.h"
#include "persist/records_json.h"
#include "persist/rollout_rec.h"
#include "resource.h"
#include "rollout/gate.h"
#include "rollout/order.h"
#include "strmap.h"
#include "util.h"
#include "xmalloc.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REASON_MAX 1024

struct member {
	bool sent, acked;            /* acked: healthy where it says */
	bool nacked, unhealthy;      /* its answer to the new version (the console's bars) */
};

struct rollout {
	struct core *p;
	struct gate *gate;           /* NULL: none configured */
	pthread_mutex_t ctl;
	pthread_mutex_t lock;
	bool staged;
	bool shared;                 /* replicas: one controller, elected */
	_Atomic bool leading;        /* this replica is the controller (set under ctl) */
	unsigned stages[ROLLOUT_MAX_STAGES];
	size_t nstages;
	int64_t bake_ms, ack_timeout_ms;
	uint64_t floor;              /* the store keeps history back to here (under ctl) */
	/* under lock */
	uint64_t released;           /* every node outside a rollout gets this */
	bool have_run;
	struct ro_run run;           /* the current or last rollout */
	struct strmap idx;           /* member id -> index (keys: run.members) */
	struct member *m;
	size_t acked_reached;        /* acked among members[0..reached) */
	int64_t wait_from;           /* ack timeouts count from here (ms) */
	int64_t start_after;         /* no new rollout before (ms): nodes reconnect */
	uint64_t wait_said;          /* a wait for nodes was logged, for this version (0: none) */
	_Atomic int hold;            /* an emergency revert commits: no transition meanwhile */
	char *failure;               /* set by an ACK, acted on by the next step */
	uint64_t started, completed, rolled_back, aborted;
	_Atomic uint64_t gen;        /* moves with every transition: relays follow */
};

int rollout_parse_stages(const char *s, unsigned *out, size_t *n, char *err, size_t errlen)
{
	*n = 0;
	const char *p = s ? s : "";
	unsigned last = 0;
	while (*p) {
		char *end;
		if (*p < '0' || *p > '9')
			goto bad;
		unsigned long v = strtoul(p, &end, 10);
		if (v < 1 || v > 100 || v <= last || *n == ROLLOUT_MAX_STAGES)
			goto bad;
		out[(*n)++] = (unsigned)v;
		last = (unsigned)v;
		p = end;
		if (*p == ',') {
			if (!*++p)
				goto bad;   /* "1,10,100,": a trailing comma */
		} else if (*p) {
			goto bad;
		}
	}
	if (*n == 0 || last != 100)
		goto bad;
	return 0;
bad:
	snprintf(err, errlen, "stages: '%.64s' must be increasing percentages 1..100 ending at 100, "
		 "at most %d (like 1,10,100)", s ? s : "", ROLLOUT_MAX_STAGES);
	return -1;
}

bool rollout_staged(const struct rollout *r)
{
	return r->staged;
}

static void controller_name(struct rollout *r, char *out, size_t cap);
static bool lead_now(struct rollout *r);

/* ---- targets and records (under lock) ------------------------------------ */

static bool in_progress(const struct rollout *r)
{
	return r->have_run && r->run.state == RO_IN_PROGRESS;
}

static long member_of(const struct rollout *r, const char *node)
{
	intptr_t i;
	return strmap_get(&r->idx, node, &i) ? (long)i : -1;
}

uint64_t rollout_target(struct rollout *r, const char *node)
{
	if (!r || !r->staged)
		return VERSION_LATEST;
	pthread_mutex_lock(&r->lock);
	uint64_t t = r->released;
	if (in_progress(r)) {
		long i = member_of(r, node);
		t = i >= 0 && (size_t)i < r->run.reached ? r->run.to : r->run.from;
	}
	pthread_mutex_unlock(&r->lock);
	return t;
}

bool rollout_common_target(struct rollout *r, uint64_t *target)
{
	*target = VERSION_LATEST;
	if (!r || !r->staged)
		return true;
	pthread_mutex_lock(&r->lock);
	bool common = !in_progress(r);
	*target = r->released;
	pthread_mutex_unlock(&r->lock);
	return common;
}

void rollout_sent(struct rollout *r, const char *node, uint64_t version, bool has_content)
{
	if (!r || !r->staged)
		return;
	pthread_mutex_lock(&r->lock);
	if (r->have_run) {
		struct ro_run *run = &r->run;
		long i = member_of(r, node);
		if (run->state == RO_IN_PROGRESS) {
			if (version == run->to)
				run->msgs++;
			if (i >= 0 && version >= run->to && !r->m[i].sent) {
				r->m[i].sent = true;
				run->touched++;
			}
		} else if (run->revert && version == run->revert) {
			if (has_content)
				run->revert_msgs++;
			else
				run->bump_msgs++;
		}
	}
	pthread_mutex_unlock(&r->lock);
}

bool rollout_acked(struct rollout *r, const struct ack_msg *a)
{
	if (!r || !r->staged)
		return false;
	bool step = false, member = false;
	pthread_mutex_lock(&r->lock);
	long i = in_progress(r) ? member_of(r, a->node) : -1;
	if (i >= 0 && a->version >= r->run.to) {
		member = true;
		if (a->nack || a->healthy == 0) {
			r->m[i].nacked |= a->nack;
			r->m[i].unhealthy |= !a->nack;
			if (!r->failure) {
				char buf[REASON_MAX];
				if (a->nack)
					snprintf(buf, sizeof(buf), "node %s: NACK of version %llu: %s", a->node,
						 (unsigned long long)a->version, a->error ? a->error : "");
				else
					snprintf(buf, sizeof(buf), "node %s: unhealthy after version %llu", a->node,
						 (unsigned long long)a->version);
				r->failure = xstrdup(buf);
			}
			step = true;
		} else if (!r->m[i].acked) {
			r->m[i].acked = true;
			if ((size_t)i < r->run.reached) {
				r->acked_reached++;
				step = r->acked_reached == r->run.reached;
			}
		}
	}
	pthread_mutex_unlock(&r->lock);
	if (step)
		rollout_step(r);
	return member;
}

/* ---- transitions (under ctl) ---------------------------------------------- */

/* Records run (and released). Transitions record their new state before
 * they make it live, so a restart never resumes behind what nodes got. */
static int persist_run(struct rollout *r, const struct ro_run *run, uint64_t released)
{
	char err[512];
	int rc = r->p->persist->ops->rollout_save(r->p->persist, run, released, err, sizeof(err));
	if (rc == PERSIST_FENCED)
		log_warn("rollout %llu: not recorded: %s; the elected controller goes on", (unsigned long long)run->id,
			 err);
	else if (rc < 0)
		log_error("rollout %llu: cannot record its state: %s (it goes on; a restart may resume an older state)",
			  (unsigned long long)run->id, err);
	return rc;
}

static void persist(struct rollout *r)
{
	pthread_mutex_lock(&r->lock);
	/* a copy of the scalars; members are stable while ctl is held */
	struct ro_run copy = r->run;
	uint64_t released = r->released;
	pthread_mutex_unlock(&r->lock);
	persist_run(r, &copy, released);
}

/* Under lock: the oldest version the store must keep history from while
 * no rollout is in progress: the released one, or the baseline of the
 * last rollout when that was reverted. */
static uint64_t floor_to_keep(const struct rollout *r)
{
	uint64_t keep = r->released;
	if (r->have_run && (r->run.state == RO_ROLLED_BACK || r->run.state == RO_ABORTED) &&
	    r->run.revert == r->released && r->run.from < keep)
		keep = r->run.from;
	return keep;
}

static void set_floor(struct rollout *r, uint64_t floor)
{
	char err[512];
	if (floor == r->floor)
		return;
	store_write_lock(r->p->store);
	if (store_set_pin(r->p->store, true, floor, err, sizeof(err)) < 0)
		log_warn("store: cannot trim rollout history: %s (will retry)", err);
	else
		r->floor = floor;
	store_write_unlock(r->p->store);
}

static void wake_nodes(struct rollout *r)
{
	atomic_fetch_add(&r->gen, 1);
	store_rdlock(r->p->store);
	uint64_t newest = store_version(r->p->store);
	store_rdunlock(r->p->store);
	if (r->p->hub)
		hub_notify(r->p->hub, newest);
	if (r->p->events) {
		struct buf b = BUF_INIT;
		if (rollout_current_json(r, &b) == 0 && b.data)
			events_rollout(r->p->events, b.data);
		buf_release(&b);
	}
}

/* Under lock: frees the run's members and index. */
static void drop_members(struct rollout *r)
{
	strmap_release(&r->idx);
	strmap_init(&r->idx);
	free(r->m);
	r->m = NULL;
	r->acked_reached = 0;
}

/* Under lock: indexes run.members; m (taken) holds their flags from the
 * node records (member_flags), or NULL: none sent or ACKed yet. */
static void index_members(struct rollout *r, struct member *m, size_t acked_reached)
{
	struct ro_run *run = &r->run;
	r->m = m ? m : xcalloc(run->nmembers ? run->nmembers : 1, sizeof(*r->m));
	r->acked_reached = m ? acked_reached : 0;
	for (size_t i = 0; i < run->nmembers; i++)
		strmap_put(&r->idx, run->members[i], (intptr_t)i);
}

/* The members' flags from the node records, for a resumed rollout or one
 * a new controller takes over (without r->lock: the nodes' lock is
 * taken). *failure (when not NULL) gets the first NACK or unhealthy ACK
 * of run->to that the records hold. */
static struct member *member_flags(struct rollout *r, struct ro_run *run, size_t *acked_reached, char **failure)
{
	struct member *m = xcalloc(run->nmembers ? run->nmembers : 1, sizeof(*m));
	*acked_reached = 0;
	run->touched = 0;
	for (size_t i = 0; i < run->nmembers; i++) {
		uint64_t sent = 0, acked = 0;
		int healthy = -1;
		char nerr[300];
		if (failure && !*failure && nodes_nacked(r->p->nodes, run->members[i], run->to, nerr, sizeof(nerr)))
			*failure = xasprintf("node %s: NACK of version %llu: %s", run->members[i],
					     (unsigned long long)run->to, nerr);
		if (!nodes_versions(r->p->nodes, run->members[i], &sent, &acked, &healthy))
			continue;
		m[i].sent = sent >= run->to;
		m[i].acked = acked >= run->to && healthy != 0;
		m[i].unhealthy = acked >= run->to && healthy == 0;
		m[i].nacked = nodes_nacked(r->p->nodes, run->members[i], run->to, nerr, sizeof(nerr));
		if (failure && !*failure && acked >= run->to && healthy == 0)
			*failure = xasprintf("node %s: unhealthy after version %llu", run->members[i],
					     (unsigned long long)acked);
		run->touched += m[i].sent;
		if (i < run->reached && m[i].acked)
			(*acked_reached)++;
	}
	/* each touched node had at least one push of `to` (a kill -9 may
	 * have lost the counts since the last save) */
	if (run->msgs < run->touched)
		run->msgs = run->touched;
	return m;
}

static void start(struct rollout *r, uint64_t from, uint64_t to)
{
	char **ids, **labels;
	size_t n = nodes_connected_list(r->p->nodes, &ids, &labels);
	struct ro_node *rn = xcalloc(n ? n : 1, sizeof(*rn));
	size_t *order = xcalloc(n ? n : 1, sizeof(*order));
	for (size_t i = 0; i < n; i++)
		rn[i] = (struct ro_node){ ids[i], labels[i] };
	rollout_order(rn, n, order);

	struct ro_run run = { 0 };
	run.state = RO_IN_PROGRESS;
	run.from = from;
	run.to = to;
	run.reason = xstrdup("");
	run.members = xcalloc(n ? n : 1, sizeof(char *));
	for (size_t i = 0; i < n; i++) {
		run.members[i] = ids[order[i]];
		ids[order[i]] = NULL;
	}
	run.nmembers = n;
	run.started_at = run.stage_at = wall_ms();
	run.reached = rollout_stage_size(n, r->stages[0]);
	free(rn);
	free(order);
	nodes_list_free(ids, labels, n);

	pthread_mutex_lock(&r->lock);
	uint64_t id = r->have_run ? r->run.id + 1 : 1;
	pthread_mutex_unlock(&r->lock);
	run.id = id;
	if (persist_run(r, &run, from) == PERSIST_FENCED) {
		ro_run_release(&run);
		return;
	}

	pthread_mutex_lock(&r->lock);
	drop_members(r);
	ro_run_release(&r->run);
	r->run = run;
	r->have_run = true;
	r->wait_from = now_ms();
	free(r->failure);
	r->failure = NULL;
	r->started++;
	index_members(r, NULL, 0);
	pthread_mutex_unlock(&r->lock);
	gate_set_running(r->gate, true);

	log_info("rollout %llu: version %llu -> %llu to %zu nodes, stages %u%% (%zu nodes) first", (unsigned long long)id,
		 (unsigned long long)from, (unsigned long long)to, n, r->stages[0], run.reached);
	wake_nodes(r);
}

static void complete(struct rollout *r)
{
	pthread_mutex_lock(&r->lock);
	struct ro_run copy = r->run;
	pthread_mutex_unlock(&r->lock);
	copy.state = RO_COMPLETED;
	copy.finished_at = wall_ms();
	if (persist_run(r, &copy, copy.to) == PERSIST_FENCED)
		return;

	pthread_mutex_lock(&r->lock);
	r->run.state = RO_COMPLETED;
	r->run.finished_at = copy.finished_at;
	r->released = r->run.to;
	r->completed++;
	pthread_mutex_unlock(&r->lock);
	log_info("rollout %llu: version %llu reached every node", (unsigned long long)copy.id,
		 (unsigned long long)copy.to);
	wake_nodes(r);
}

/* Under lock: the next stage that holds more nodes than reached now;
 * false when the last one is reached. (From the current stage on: after
 * --stages changed across a restart, the current one may hold more.) */
static bool next_stage(const struct rollout *r, size_t *stage, size_t *reached)
{
	const struct ro_run *run = &r->run;
	for (size_t st = run->stage; st < r->nstages; st++) {
		size_t k = rollout_stage_size(run->nmembers, r->stages[st]);
		if (k > run->reached) {
			*stage = st;
			*reached = k;
			return true;
		}
	}
	return false;
}

/* Moves the run to the next stage: recorded first, then live. */
static void advance(struct rollout *r, size_t stage, size_t reached)
{
	pthread_mutex_lock(&r->lock);
	struct ro_run copy = r->run;
	uint64_t released = r->released;
	pthread_mutex_unlock(&r->lock);
	copy.stage = stage;
	copy.reached = reached;
	copy.stage_at = wall_ms();
	if (persist_run(r, &copy, released) == PERSIST_FENCED)
		return;

	pthread_mutex_lock(&r->lock);
	struct ro_run *run = &r->run;
	for (size_t i = run->reached; i < reached; i++)
		r->acked_reached += r->m[i].acked;
	run->stage = stage;
	run->reached = reached;
	run->stage_at = copy.stage_at;
	r->wait_from = now_ms();
	pthread_mutex_unlock(&r->lock);
	log_info("rollout %llu: stage %u%% (%zu of %zu nodes)", (unsigned long long)copy.id, r->stages[stage], reached,
		 copy.nmembers);
	wake_nodes(r);
}

/* The references of an old body, which the store tracks per resource.
 * The body passed these checks when it was written. */
static void old_refs(struct store_change *c)
{
	char err[256];
	cJSON *doc = cJSON_ParseWithLength(c->body, c->body_len);
	if (!doc || resource_validate(c->name, doc, RES_V_STORED, &c->refs, err, sizeof(err)) < 0)
		log_warn("rollout: the reverted body of %s no longer passes the checks (%s); restored as it was",
			 c->name, doc ? err : "not JSON");
	cJSON_Delete(doc);
}

/* The changes that put every name changed in (from, to] back to its state
 * at from -- or, with everything, every name changed after from. Bodies
 * are copies. Hold the store's write lock. */
static size_t revert_changes(struct store *s, uint64_t from, uint64_t to, bool everything, struct store_change **out)
{
	size_t n = 0, cap = 0;
	struct store_change *ch = NULL;
	store_rdlock(s);
	for (const struct store_entry *e = store_newest(s); e && e->version > from; e = e->prev) {
		if (!everything && e->version > to)
			continue;   /* written after the rollout's version: the next rollout's */
		size_t len;
		uint64_t v;
		const char *body = store_stored_at(e, from, &len, &v);   /* a sealed secret's wraps too */
		if (!body && !e->body)
			continue;   /* absent then and now */
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			ch = xrealloc(ch, cap * sizeof(*ch));
		}
		/* the name is copied too: the commit may drop entries */
		ch[n] = (struct store_change){ .name = xstrdup(e->name), .body = body ? xstrndup(body, len) : NULL,
					       .body_len = body ? len : 0 };
		if (body)
			old_refs(&ch[n]);
		n++;
	}
	store_rdunlock(s);
	*out = ch;
	return n;
}

static void free_changes(struct store_change *ch, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free((char *)ch[i].name);
		free(ch[i].body);
	}
	free(ch);
}

/* The rows a revert writes in its own commit's transaction, so a crash
 * leaves either both the revert and its record or neither. */
struct revert_rows {
	struct ro_run *done;      /* the reverted run, its final state */
	struct ro_run *next;      /* the run carrying on with later writes, or NULL */
};

static int write_rows(void *ctx, struct persist_txn *tx, uint64_t version, char *err, size_t errlen)
{
	struct revert_rows *rr = ctx;
	rr->done->revert = version;
	if (rr->next)
		rr->next->to = version;
	/* released: the revert itself, or (later writes ride along) still
	 * the baseline, which the next run moves on from */
	uint64_t released = rr->next ? rr->done->from : version;
	if (persist_txn_rollout(tx, rr->done, released, err, errlen) < 0)
		return -1;
	return rr->next ? persist_txn_rollout(tx, rr->next, released, err, errlen) : 0;
}

static int revert(struct rollout *r, enum ro_state final, const char *reason, char *err, size_t errlen)
{
	struct core *p = r->p;
	/* the run's members and scalars are stable while ctl is held */
	pthread_mutex_lock(&r->lock);
	struct ro_run done = r->run;
	pthread_mutex_unlock(&r->lock);
	struct ro_run next = { 0 };
	char note[700] = "";

	store_write_lock(p->store);
	uint64_t before = store_version(p->store);
	bool pending = before > done.to;
	struct store_change *ch;
	size_t n = revert_changes(p->store, done.from, done.to, false, &ch);
	char verr[512];
	if (validate_candidate(p->store, ch, n, p->cfg.max_resources, verr, sizeof(verr)) < 0) {
		/* a later write leans on the reverted content: revert it too */
		free_changes(ch, n);
		n = revert_changes(p->store, done.from, done.to, true, &ch);
		snprintf(note, sizeof(note), "; writes after version %llu were reverted too (%s)",
			 (unsigned long long)done.to, verr);
		pending = false;
	}
	done.state = final;
	done.finished_at = wall_ms();
	done.reason = xasprintf("%s%s", reason, note);
	if (pending) {
		/* versions written after the rollout's are in the revert: the
		 * nodes that had the bad change get it at once, the rest follow
		 * in stages as a rollout of its own */
		next.id = done.id + 1;
		next.state = RO_IN_PROGRESS;
		next.stage = done.stage;
		next.reached = done.reached;
		next.from = done.from;
		next.parent = done.id;
		next.reason = xstrdup("");
		next.members = done.members;   /* shared until it is installed */
		next.nmembers = done.nmembers;
		next.started_at = next.stage_at = wall_ms();
	}
	/* sealed secrets: an older envelope back is no replay; the stored
	 * form (the superseded list) kept as for any write. Its checks never
	 * stop a revert: one refused is logged, and committed as it was */
	char serr[600];
	if (n && sealed_check(p->sealed, p->store, p->nodes, ch, n, true, serr, sizeof(serr)) < 0)
		log_warn("rollout %llu: the revert puts back %s", (unsigned long long)done.id, serr);
	struct revert_rows rows = { &done, pending ? &next : NULL };
	uint64_t rv = 0;
	bool changed = false;
	/* the version log: the rollout made it, and the versions it undoes
	 * are marked reverted by it */
	char author[64], message[1024];
	snprintf(author, sizeof(author), "rollout %llu", (unsigned long long)done.id);
	snprintf(message, sizeof(message), "revert of version %llu (rollout %llu %s): %s",
		 (unsigned long long)done.to, (unsigned long long)done.id, ro_state_name(final), done.reason);
	/* guards: a revert is never refused; one that crosses a guard is its
	 * own override (core/guardcheck.c), for the nodes that took the version */
	uint64_t next_v = store_version(p->store) + 1;
	char *ovr = n ? guardcheck_revert(p->store, p->overrides, next_v, ch, n, "rollout revert") : NULL;
	struct store_meta meta = { author, message, done.from, pending ? done.to : before, ovr, false };
	int rc = n ? store_commit_meta(p->store, ch, n, write_rows, &rows, &meta, &rv, &changed, err, errlen) : 0;
	if (ovr && (rc < 0 || !changed || rv != next_v))
		overrides_forget(p->overrides, next_v);
	free(ovr);
	if (!changed) {
		/* nothing to put back (the content is the baseline's already) */
		rv = store_version(p->store);
		done.revert = rv;
		next.to = rv;
	}
	store_write_unlock(p->store);
	free_changes(ch, n);
	if (rc < 0) {
		log_error("rollout %llu: cannot commit the revert: %s (will retry)", (unsigned long long)done.id, err);
		free(done.reason);
		free(next.reason);
		return -1;
	}
	if (changed) {
		atomic_fetch_add(&p->ctr.writes, 1);
		log_info("store: version %llu (revert of %zu changes)", (unsigned long long)rv, n);
	}

	pthread_mutex_lock(&r->lock);
	struct ro_run *run = &r->run;
	run->state = final;
	run->finished_at = done.finished_at;
	run->revert = rv;
	free(run->reason);
	run->reason = done.reason;
	/* NACKs of this run that came in while it was being reverted must
	 * not stop the next one */
	free(r->failure);
	r->failure = NULL;
	if (final == RO_ROLLED_BACK)
		r->rolled_back++;
	else
		r->aborted++;
	if (!pending)
		r->released = rv;
	uint64_t touched = run->touched;
	pthread_mutex_unlock(&r->lock);

	log_warn("rollout %llu: %s: version %llu reverted as version %llu (%llu node%s had it)",
		 (unsigned long long)done.id, ro_state_name(final), (unsigned long long)done.to,
		 (unsigned long long)rv, (unsigned long long)touched, touched == 1 ? "" : "s");
	log_warn("rollout %llu: reason: %s", (unsigned long long)done.id, reason);
	if (!changed)
		persist(r);
	if (pending) {
		pthread_mutex_lock(&r->lock);
		/* the new run takes the members; the old record keeps copies */
		char **copy = xcalloc(run->nmembers ? run->nmembers : 1, sizeof(char *));
		for (size_t i = 0; i < run->nmembers; i++)
			copy[i] = xstrdup(run->members[i]);
		run->members = copy;
		drop_members(r);
		ro_run_release(&r->run);
		r->run = next;
		r->wait_from = now_ms();
		r->started++;
		index_members(r, NULL, 0);
		pthread_mutex_unlock(&r->lock);
		log_info("rollout %llu: version %llu (the revert with later writes) goes on from stage %u%%",
			 (unsigned long long)next.id, (unsigned long long)rv, r->stages[next.stage]);
		if (!changed)
			persist(r);
	}
	wake_nodes(r);
	return 0;
}

/* Keeps reason (taken; may be NULL) as the failure the next step acts
 * on, unless one is kept already. */
static void keep_failure(struct rollout *r, char *reason)
{
	if (!reason)
		return;
	pthread_mutex_lock(&r->lock);
	if (!r->failure) {
		r->failure = reason;
		reason = NULL;
	}
	pthread_mutex_unlock(&r->lock);
	free(reason);
}

enum action { ACT_NONE, ACT_START, ACT_ADVANCE, ACT_COMPLETE, ACT_REVERT };

/* Under ctl: the traffic gates' verdict on the stage in progress
 * (GATE_PASS when none is configured or nothing runs). A gate crossed
 * sets the failure as a NACK does, which the step then reverts. */
static enum gate_verdict judge(struct rollout *r)
{
	struct gate *g = r->gate;
	if (!g)
		return GATE_PASS;
	struct gate_stage_view v = { 0 };
	bool *acked = NULL;
	pthread_mutex_lock(&r->lock);
	bool judging = in_progress(r) && !r->failure && r->run.nmembers > 0;
	if (judging) {
		const struct ro_run *run = &r->run;
		v.run = run->id;
		v.stage = run->stage;
		v.percent = run->stage < r->nstages ? r->stages[run->stage] : 100;
		v.started = (double)run->stage_at / 1000.0;
		v.from = run->from;
		v.to = run->to;
		v.reached = run->members;   /* stable while ctl is held */
		v.nreached = run->reached;
		acked = xcalloc(run->reached ? run->reached : 1, sizeof(*acked));
		for (size_t i = 0; i < run->reached; i++)
			acked[i] = r->m[i].acked;
		v.acked = acked;
		v.baked = r->acked_reached == run->reached && wall_ms() - run->stage_at >= r->bake_ms;
	}
	pthread_mutex_unlock(&r->lock);
	if (!judging)
		return GATE_PASS;
	char *reason = NULL;
	enum gate_verdict verdict = gate_judge(g, &v, &reason);
	free(acked);
	keep_failure(r, reason);
	return verdict;
}

/* Under ctl (members stable): which reached members the node records say
 * are held for the run's version -- asked only once the ack timeout has
 * passed with members unacked, and not under our lock (nodes before
 * rollout). NULL: nothing to ask (or none reached). A held member waits
 * for a writer to seal to it: it never fails the stage. */
static bool *held_members(struct rollout *r)
{
	pthread_mutex_lock(&r->lock);
	bool ask = in_progress(r) && r->m && r->run.reached && r->acked_reached != r->run.reached &&
		   now_ms() - r->wait_from > r->ack_timeout_ms;
	size_t reached = r->run.reached;
	uint64_t to = r->run.to;
	bool *unacked = NULL;
	if (ask) {
		unacked = xcalloc(reached, sizeof(*unacked));
		for (size_t i = 0; i < reached; i++)
			unacked[i] = !r->m[i].acked;
	}
	pthread_mutex_unlock(&r->lock);
	if (!ask)
		return NULL;
	bool *held = xcalloc(reached, sizeof(*held));
	for (size_t i = 0; i < reached; i++) {
		char why[NODE_ERROR_MAX];
		held[i] = unacked[i] && nodes_held(r->p->nodes, r->run.members[i], to, why, sizeof(why));
	}
	free(unacked);
	return held;
}

void rollout_step(struct rollout *r)
{
	if (!r || !r->staged)
		return;
	char err[512];
	pthread_mutex_lock(&r->ctl);
	pthread_mutex_lock(&r->lock);
	bool running = in_progress(r);
	pthread_mutex_unlock(&r->lock);
	gate_set_running(r->gate, running);   /* nodes report while a rollout runs */
	if (!lead_now(r)) {
		pthread_mutex_unlock(&r->ctl);
		return;   /* another replica is the controller: its records come */
	}
	for (int rounds = 0; rounds < 4; rounds++) {
		enum action act = ACT_NONE;
		char *reason = NULL;
		uint64_t from = 0, to = 0;
		size_t next_st = 0, next_reached = 0;

		store_rdlock(r->p->store);
		uint64_t newest = store_version(r->p->store);
		store_rdunlock(r->p->store);
		enum gate_verdict verdict = judge(r);
		bool *held = held_members(r);
		/* a new version waiting for the nodes to reconnect: the nodes
		 * known and back (asked before our lock: nodes first) */
		struct nodes_stats ns = { 0 };
		pthread_mutex_lock(&r->lock);
		bool waits = !in_progress(r) && newest > r->released && (r->start_after > now_ms() || r->wait_said);
		pthread_mutex_unlock(&r->lock);
		if (waits)
			nodes_stats(r->p->nodes, &ns);

		pthread_mutex_lock(&r->lock);
		if (in_progress(r)) {
			struct ro_run *run = &r->run;
			int64_t now = now_ms();
			if (r->failure) {
				act = ACT_REVERT;
				reason = r->failure;
				r->failure = NULL;
			} else if (run->nmembers == 0) {
				act = ACT_COMPLETE;   /* no node to wait for */
			} else if (r->acked_reached == run->reached) {
				if (wall_ms() - run->stage_at >= r->bake_ms)
					act = run->reached == run->nmembers ? ACT_COMPLETE : ACT_ADVANCE;
			} else if (now - r->wait_from > r->ack_timeout_ms && held) {
				/* a held member stays pending: only the others time out
				 * (held NULL: the timeout passed since it was asked: next step) */
				for (size_t i = 0; i < run->reached; i++) {
					if (!r->m[i].acked && !(held && held[i])) {
						reason = xasprintf("node %s: no ACK of version %llu within %llds", run->members[i],
								   (unsigned long long)run->to,
								   (long long)(r->ack_timeout_ms / 1000));
						break;
					}
				}
				if (reason)
					act = ACT_REVERT;
			}
			free(held);
			held = NULL;
			/* the gates judged the bake a moment ago: not yet over then;
			 * or held, unjudged (members that do not count traffic) */
			if ((act == ACT_ADVANCE || act == ACT_COMPLETE) && run->nmembers &&
			    (verdict == GATE_JUDGING || verdict == GATE_UNJUDGED))
				act = ACT_NONE;
			if (act == ACT_ADVANCE && !next_stage(r, &next_st, &next_reached))
				act = ACT_COMPLETE;
		} else if (newest > r->released) {
			/* not right after a start: the nodes known reconnect first
			 * (until every one is back, or the wait is over) */
			int64_t left = r->start_after - now_ms();
			if (waits && left > 0 && ns.connected < ns.nodes) {
				if (!r->wait_said)   /* once a wait: its end names the version it ends for */
					log_info("rollout of version %llu waits for nodes to reconnect: %zu of %zu back, up to "
						 "%lld s more", (unsigned long long)newest, ns.connected, ns.nodes,
						 (long long)((left + 999) / 1000));
				r->wait_said = newest;
			} else {
				if (r->wait_said)
					log_info("rollout of version %llu: the wait for nodes is over: %zu of %zu back%s",
						 (unsigned long long)newest, ns.connected, ns.nodes,
						 ns.connected < ns.nodes ? " (the rest join when they reconnect)" : "");
				r->wait_said = 0;
				r->start_after = 0;
				act = ACT_START;
				from = r->released;
				to = newest;
			}
		}
		pthread_mutex_unlock(&r->lock);
		free(held);
		/* an emergency revert is committing: it decides what nodes get */
		if (atomic_load(&r->hold) > 0) {
			/* a failure is kept for after it (which drops it when it supersedes) */
			keep_failure(r, reason);
			reason = NULL;
			act = ACT_NONE;
		}
		/* a freeze holds the rollout where it is: no next stage, no
		 * completion (it releases the version to every node), no new
		 * rollout until it ends (a revert still runs); asked of the
		 * store, so one another replica just set holds at once */
		if ((act == ACT_ADVANCE || act == ACT_COMPLETE || act == ACT_START) && freeze_state_blocks(r->p->freeze))
			act = ACT_NONE;

		if (act == ACT_NONE)
			break;
		if (act == ACT_ADVANCE) {
			advance(r, next_st, next_reached);
		} else if (act == ACT_COMPLETE) {
			complete(r);
		} else if (act == ACT_START) {
			set_floor(r, from);
			start(r, from, to);
		} else if (act == ACT_REVERT) {
			int rc = revert(r, RO_ROLLED_BACK, reason ? reason : "failed", err, sizeof(err));
			if (rc < 0) {
				/* keep the reason for the next try */
				keep_failure(r, reason);
				break;
			}
			free(reason);
		}
	}
	/* nothing in flight: keep no history older than what nodes get (and,
	 * after a revert, the rollout's baseline: the nodes still there get
	 * the revert as a version-only push) */
	pthread_mutex_lock(&r->lock);
	bool idle = !in_progress(r);
	uint64_t keep = floor_to_keep(r);
	pthread_mutex_unlock(&r->lock);
	if (idle)
		set_floor(r, keep);
	pthread_mutex_unlock(&r->ctl);
}

void rollout_save(struct rollout *r)
{
	if (!r || !r->staged)
		return;
	pthread_mutex_lock(&r->ctl);
	pthread_mutex_lock(&r->lock);
	bool have = r->have_run;
	pthread_mutex_unlock(&r->lock);
	if (have && (!r->shared || atomic_load(&r->leading)))
		persist(r);   /* the message counters move without a transition */
	pthread_mutex_unlock(&r->ctl);
}

int rollout_abort(struct rollout *r, int *status, char *err, size_t errlen)
{
	if (!r || !r->staged) {
		*status = 409;
		snprintf(err, errlen, "no rollout: the plane runs with --rollout immediate");
		return -1;
	}
	pthread_mutex_lock(&r->ctl);
	pthread_mutex_lock(&r->lock);
	bool running = in_progress(r);
	pthread_mutex_unlock(&r->lock);
	int rc = -1;
	if (running && !lead_now(r)) {
		char holder[128];
		controller_name(r, holder, sizeof(holder));
		*status = 409;
		snprintf(err, errlen, "this replica is not the rollout controller; abort on the controller (%s)",
			 holder[0] ? holder : "being elected");
	} else if (!running) {
		*status = 409;
		snprintf(err, errlen, "no rollout in progress");
	} else if (atomic_load(&r->hold) > 0) {
		*status = 409;
		snprintf(err, errlen, "an emergency revert (revert --now) is committing, and supersedes the rollout in "
			 "progress: see rollout status");
	} else if (revert(r, RO_ABORTED, "aborted by the operator", err, errlen) < 0) {
		*status = 500;
	} else {
		rc = 0;
	}
	pthread_mutex_unlock(&r->ctl);
	return rc;
}

/* ---- reporting ------------------------------------------------------------ */

/* The controller's replica as last seen ("" when unknown). */
static void controller_name(struct rollout *r, char *out, size_t cap)
{
	struct persist *ps = r->p->persist;
	uint64_t terms;
	size_t replicas;
	*out = 0;
	if (ps->ops->controller)
		ps->ops->controller(ps, out, cap, &terms, &replicas);
}

/* Under lock: per stage, its members and their answers to the new version
 * (what the console draws as bars): "stage_counts":[{"members","acked"
 * (healthy),"unhealthy","nacked","pending"}], pending counted in reached
 * stages only. */
static void stage_counts(const struct rollout *r, struct buf *out)
{
	const struct ro_run *run = &r->run;
	size_t from = 0;
	buf_puts(out, ",\"stage_counts\":[");
	for (size_t s = 0; s < r->nstages; s++) {
		size_t to = rollout_stage_size(run->nmembers, r->stages[s]);
		if (to < from)
			to = from;
		size_t acked = 0, unhealthy = 0, nacked = 0;
		for (size_t i = from; i < to; i++) {
			acked += r->m[i].acked;
			unhealthy += !r->m[i].acked && r->m[i].unhealthy;
			nacked += !r->m[i].acked && !r->m[i].unhealthy && r->m[i].nacked;
		}
		bool reached = to <= run->reached || run->state == RO_COMPLETED;
		size_t pending = reached ? to - from - acked - unhealthy - nacked : 0;
		buf_printf(out, "%s{\"members\":%zu,\"reached\":%s,\"acked\":%zu,\"unhealthy\":%zu,\"nacked\":%zu,"
			   "\"pending\":%zu}", s ? "," : "", to - from, reached ? "true" : "false", acked, unhealthy,
			   nacked, pending);
		from = to;
	}
	buf_putc(out, ']');
}

static void run_json(const struct rollout *r, const struct ro_run *run, bool live, struct buf *out)
{
	unsigned pct = run->stage < r->nstages ? r->stages[run->stage] : 100;
	buf_printf(out, "{\"id\":%llu,\"state\":\"%s\",\"stage\":%u,\"stage_index\":%zu,\"stages\":[",
		   (unsigned long long)run->id, ro_state_name(run->state), pct, run->stage + 1);
	for (size_t i = 0; i < r->nstages; i++)
		buf_printf(out, "%s%u", i ? "," : "", r->stages[i]);
	buf_printf(out, "],\"from_version\":%llu,\"to_version\":%llu,\"revert_version\":%llu,\"parent\":%llu,"
		   "\"touched\":%zu,\"members\":%zu,\"reached\":%zu",
		   (unsigned long long)run->from, (unsigned long long)run->to, (unsigned long long)run->revert,
		   (unsigned long long)run->parent, run->touched, run->nmembers ? run->nmembers : run->member_count,
		   run->reached);
	if (live)
		buf_printf(out, ",\"acked\":%zu", r->acked_reached);
	if (live && run == &r->run && r->m)
		stage_counts(r, out);
	buf_puts(out, ",\"reason\":");
	if (run->reason && *run->reason)
		buf_json_string(out, run->reason);
	else
		buf_puts(out, "null");
	buf_printf(out, ",\"started_at\":%.3f,\"stage_started_at\":%.3f,\"finished_at\":", run->started_at / 1000.0,
		   run->stage_at / 1000.0);
	if (run->finished_at)
		buf_printf(out, "%.3f", run->finished_at / 1000.0);
	else
		buf_puts(out, "null");
	buf_printf(out, ",\"bake\":%g,\"messages\":%llu,\"revert_messages\":%llu,\"version_only_messages\":%llu}",
		   r->bake_ms / 1000.0, (unsigned long long)run->msgs, (unsigned long long)run->revert_msgs,
		   (unsigned long long)run->bump_msgs);
}

int rollout_current_json(struct rollout *r, struct buf *out)
{
	if (!r)
		return -1;
	char holder[128] = "";
	if (r->shared)
		controller_name(r, holder, sizeof(holder));
	pthread_mutex_lock(&r->lock);
	int rc = -1;
	uint64_t id = r->run.id;
	bool live = in_progress(r);
	/* the members still pending, to ask the node records which are held
	 * (not under our lock: nodes before rollout) */
	char **pending = NULL;
	size_t npending = 0;
	uint64_t to = r->run.to;
	if (live && r->m) {
		pending = xcalloc(r->run.nmembers ? r->run.nmembers : 1, sizeof(*pending));
		for (size_t i = 0; i < r->run.nmembers && i < r->run.reached; i++)
			if (!r->m[i].acked && !r->m[i].nacked && !r->m[i].unhealthy)
				pending[npending++] = xstrdup(r->run.members[i]);
	}
	if (r->have_run) {
		run_json(r, &r->run, true, out);
		if (r->shared && out->len && out->data[out->len - 1] == '}') {
			/* which replica runs the rollouts, and whether it is this one */
			out->len--;
			buf_puts(out, ",\"controller\":");
			buf_json_string(out, holder);
			buf_printf(out, ",\"controller_here\":%s}", atomic_load(&r->leading) ? "true" : "false");
		}
		rc = 0;
	}
	pthread_mutex_unlock(&r->lock);
	if (rc == 0 && pending && out->len && out->data[out->len - 1] == '}') {
		/* members held (no wrap for a sealed secret yet): pending, and why */
		out->len--;
		buf_puts(out, ",\"held\":[");
		size_t k = 0;
		for (size_t i = 0; i < npending; i++) {
			char why[NODE_ERROR_MAX];
			if (!nodes_held(r->p->nodes, pending[i], to, why, sizeof(why)))
				continue;
			buf_puts(out, k++ ? ",{\"node\":" : "{\"node\":");
			buf_json_string(out, pending[i]);
			char *reason = xasprintf("held: %s", why);
			buf_puts(out, ",\"reason\":");
			buf_json_string(out, reason);
			free(reason);
			buf_putc(out, '}');
		}
		buf_puts(out, "]}");
	}
	for (size_t i = 0; i < npending; i++)
		free(pending[i]);
	free(pending);
	if (rc == 0 && r->gate && out->len && out->data[out->len - 1] == '}') {
		/* the gates' comparison (their own lock: not under ours) */
		out->len--;
		gate_json(r->gate, id, live, out);
		buf_putc(out, '}');
	}
	char why[FREEZE_MESSAGE_MAX + FREEZE_BY_MAX + 64];
	if (rc == 0 && live && out->len && out->data[out->len - 1] == '}' &&
	    freeze_state_holds(r->p->freeze, why, sizeof(why))) {
		out->len--;   /* "frozen": why a freeze holds it */
		buf_puts(out, ",\"frozen\":");
		buf_json_string(out, why);
		buf_putc(out, '}');
	}
	return rc;
}

int rollout_history_json(struct rollout *r, size_t limit, struct buf *out, char *err, size_t errlen)
{
	struct ro_run *runs;
	size_t n;
	if (r->p->persist->ops->rollout_load(r->p->persist, limit, false, &runs, &n, err, errlen) < 0)
		return -1;
	pthread_mutex_lock(&r->lock);
	buf_putc(out, '[');
	for (size_t i = 0; i < n; i++) {
		if (i)
			buf_putc(out, ',');
		bool live = r->have_run && runs[i].id == r->run.id;
		/* the live record counts messages the database has not yet */
		run_json(r, live ? &r->run : &runs[i], live, out);
	}
	buf_putc(out, ']');
	pthread_mutex_unlock(&r->lock);
	for (size_t i = 0; i < n; i++)
		ro_run_release(&runs[i]);
	free(runs);
	return 0;
}

void rollout_metrics(struct rollout *r, struct buf *out)
{
	pthread_mutex_lock(&r->lock);
	const struct ro_run *run = &r->run;
	buf_puts(out, "# HELP tether_rollout_state The current or last rollout: 0 none, 1 in progress, 2 completed, "
		      "3 rolled back, 4 aborted.\n# TYPE tether_rollout_state gauge\n");
	buf_printf(out, "tether_rollout_state %d\n", r->have_run ? (int)run->state : 0);
	buf_puts(out, "# HELP tether_rollout_stage_percent The stage the current or last rollout reached.\n"
		      "# TYPE tether_rollout_stage_percent gauge\n");
	buf_printf(out, "tether_rollout_stage_percent %u\n",
		   r->have_run && run->stage < r->nstages ? r->stages[run->stage] : 0);
	buf_puts(out, "# HELP tether_rollout_id The id of the current or last rollout.\n# TYPE tether_rollout_id gauge\n");
	buf_printf(out, "tether_rollout_id %llu\n", r->have_run ? (unsigned long long)run->id : 0ULL);
	buf_puts(out, "# HELP tether_rollout_touched Nodes the current or last rollout sent its version.\n"
		      "# TYPE tether_rollout_touched gauge\n");
	buf_printf(out, "tether_rollout_touched %zu\n", r->have_run ? run->touched : 0);
	buf_puts(out, "# HELP tether_released_version The version every node outside a rollout gets.\n"
		      "# TYPE tether_released_version gauge\n");
	buf_printf(out, "tether_released_version %llu\n", (unsigned long long)r->released);
	buf_puts(out, "# HELP tether_rollouts_total Rollouts since the plane started, by how they ended.\n"
		      "# TYPE tether_rollouts_total counter\n");
	buf_printf(out, "tether_rollouts_total{result=\"started\"} %llu\n", (unsigned long long)r->started);
	buf_printf(out, "tether_rollouts_total{result=\"completed\"} %llu\n", (unsigned long long)r->completed);
	buf_printf(out, "tether_rollouts_total{result=\"rolled_back\"} %llu\n", (unsigned long long)r->rolled_back);
	buf_printf(out, "tether_rollouts_total{result=\"aborted\"} %llu\n", (unsigned long long)r->aborted);
	pthread_mutex_unlock(&r->lock);
	if (r->shared && r->staged) {
		char holder[128];
		uint64_t terms = 0;
		size_t replicas = 0;
		struct persist *ps = r->p->persist;
		ps->ops->controller(ps, holder, sizeof(holder), &terms, &replicas);
		buf_puts(out, "# HELP tether_rollout_controller 1 when this replica is the elected rollout controller.\n"
			      "# TYPE tether_rollout_controller gauge\n");
		buf_printf(out, "tether_rollout_controller %d\n", atomic_load(&r->leading) ? 1 : 0);
		buf_puts(out, "# HELP tether_rollout_controller_terms_total Times this replica became the controller.\n"
			      "# TYPE tether_rollout_controller_terms_total counter\n");
		buf_printf(out, "tether_rollout_controller_terms_total %llu\n", (unsigned long long)terms);
		buf_puts(out, "# HELP tether_replicas_up Replicas whose etcd lease lives, as this one sees them.\n"
			      "# TYPE tether_replicas_up gauge\n");
		buf_printf(out, "tether_replicas_up %zu\n", replicas);
	}
	gate_metrics(r->gate, out);
}

/* ---- start-up, and replicas --------------------------------------------------- */

/* The newest rollout record (members too) and the released version, as
 * the store keeps them. */
static int load_last(struct rollout *r, struct ro_run *run, bool *have, uint64_t *released, char *err, size_t errlen)
{
	struct persist *ps = r->p->persist;
	struct ro_run *runs;
	size_t n;
	memset(run, 0, sizeof(*run));
	*have = false;
	if (ps->ops->rollout_load(ps, 1, true, &runs, &n, err, errlen) < 0)
		return -1;
	if (n) {
		*run = runs[0];
		*have = true;
	}
	free(runs);
	store_rdlock(r->p->store);
	uint64_t newest = store_version(r->p->store);
	store_rdunlock(r->p->store);
	int got = ps->ops->released(ps, released);
	if (got < 0) {
		snprintf(err, errlen, "the store: cannot read the released version");
		ro_run_release(run);
		*have = false;
		return -1;
	}
	/* first start under staged (or the store went back): all of it is out */
	if (!got || *released > newest)
		*released = newest;
	return 0;
}

/* Makes run (taken) the current one, with released and the members'
 * flags m (taken; NULL: none yet). */
static void install(struct rollout *r, struct ro_run *run, bool have, uint64_t released, struct member *m,
		    size_t acked_reached)
{
	pthread_mutex_lock(&r->lock);
	drop_members(r);
	ro_run_release(&r->run);
	r->run = *run;
	r->have_run = have;
	r->released = released;
	free(r->failure);
	r->failure = NULL;
	if (have)
		index_members(r, m, acked_reached);
	else
		free(m);
	r->wait_from = now_ms();
	pthread_mutex_unlock(&r->lock);
}

/* A replica that is not the controller keeps, in memory, the history the
 * targets it serves need (the controller records the pin). */
static void follow_floor(struct rollout *r)
{
	pthread_mutex_lock(&r->lock);
	uint64_t keep = in_progress(r) ? r->released : floor_to_keep(r);
	pthread_mutex_unlock(&r->lock);
	store_write_lock(r->p->store);
	store_set_pin_local(r->p->store, true, keep);
	store_write_unlock(r->p->store);
	r->floor = keep;
}

/* A replica that is not the controller: the state as the records say. */
static int follow_records(struct rollout *r, char *err, size_t errlen)
{
	struct ro_run run;
	bool have;
	uint64_t released;
	if (load_last(r, &run, &have, &released, err, errlen) < 0)
		return -1;
	install(r, &run, have, released, NULL, 0);
	follow_floor(r);
	return 0;
}

/* The controller's start: the last rollout from the store, checked
 * against the store and the --stages in force, resumed where the store
 * says it was (the node records tell which members have it), the history
 * pinned back to its baseline. At start, or on becoming the controller. */
static int resume(struct rollout *r, char *err, size_t errlen)
{
	struct core *p = r->p;
	struct ro_run run;
	bool have;
	uint64_t released;
	if (load_last(r, &run, &have, &released, err, errlen) < 0)
		return -1;
	bool running = have && run.state == RO_IN_PROGRESS;
	store_rdlock(p->store);
	uint64_t newest = store_version(p->store);
	store_rdunlock(p->store);
	/* the store keeps history back to the released version only while
	 * staged: after a spell of --rollout immediate it has none, and all
	 * that is stored counts as released */
	uint64_t floor = 0;
	store_write_lock(p->store);
	bool keep = store_pinned(p->store, &floor);
	store_write_unlock(p->store);
	bool history = keep && floor <= released;
	if (running && (run.stage >= r->nstages ||
			rollout_stage_size(run.nmembers, r->stages[run.stage]) != run.reached)) {
		/* --stages changed across the restart: the nodes reached keep
		 * the new version, and the run goes on from the last stage of
		 * the new list that they fill (never all at once) */
		size_t st = 0;
		for (size_t i = 0; i < r->nstages; i++)
			if (rollout_stage_size(run.nmembers, r->stages[i]) <= run.reached)
				st = i;
		log_warn("rollout %llu: --stages changed: %zu of %zu nodes reached, resuming at stage %u%%",
			 (unsigned long long)run.id, run.reached, run.nmembers, r->stages[st]);
		run.stage = st;
	}
	if (running && (!history || run.from < floor || run.to > newest || run.from > run.to)) {
		log_warn("rollout %llu: cannot resume (versions %llu..%llu, store at %llu, history from %llu, "
			 "%zu stages): ended; every node gets version %llu", (unsigned long long)run.id,
			 (unsigned long long)run.from, (unsigned long long)run.to, (unsigned long long)newest,
			 (unsigned long long)floor, r->nstages, (unsigned long long)newest);
		run.state = RO_ABORTED;
		run.finished_at = wall_ms();
		free(run.reason);
		run.reason = xstrdup("ended at a restart: the store no longer fits it");
		history = false;
		running = false;
	}
	if (!history)
		released = newest;
	struct member *m = NULL;
	size_t acked_reached = 0;
	char *failure = NULL;
	if (running) {
		released = run.from;
		m = member_flags(r, &run, &acked_reached, &failure);
	}
	install(r, &run, have, released, m, acked_reached);
	pthread_mutex_lock(&r->lock);
	r->failure = failure;
	pthread_mutex_unlock(&r->lock);
	if (running)
		log_info("rollout %llu: resumed at stage %u%% (%zu of %zu nodes), version %llu -> %llu; %zu ACKed",
			 (unsigned long long)run.id, r->stages[run.stage], run.reached, run.nmembers,
			 (unsigned long long)run.from, (unsigned long long)run.to, acked_reached);
	/* history must reach back to the baseline before anything commits */
	pthread_mutex_lock(&r->lock);
	uint64_t pin = running ? r->released : floor_to_keep(r);
	uint64_t rel = r->released;
	pthread_mutex_unlock(&r->lock);
	if (pin < floor || !history)
		pin = rel;   /* trimmed already: what is left */
	store_write_lock(p->store);
	int rc = store_set_pin(p->store, true, pin, err, errlen);
	store_write_unlock(p->store);
	if (rc < 0)
		return -1;
	r->floor = pin;
	if (have)
		persist(r);
	else if (p->persist->ops->set_released(p->persist, rel, err, errlen) < 0)
		return -1;
	return 0;
}

/* Under ctl: whether this replica is the rollout controller now. On
 * becoming it, it resumes from the store; on losing it, it goes back to
 * following the records. */
static bool lead_now(struct rollout *r)
{
	if (!r->shared)
		return true;
	struct persist *ps = r->p->persist;
	bool lead = ps->ops->lead(ps), was = atomic_load(&r->leading);
	char err[512];
	if (lead && !was) {
		if (resume(r, err, sizeof(err)) < 0) {
			log_warn("rollout controller: cannot take over yet: %s (will retry)", err);
			return false;
		}
		pthread_mutex_lock(&r->lock);
		/* idle: the nodes of a replica that just died reconnect first */
		if (!in_progress(r))
			r->start_after = now_ms() + (int64_t)(r->p->cfg.heartbeat * 3000);
		pthread_mutex_unlock(&r->lock);
		atomic_store(&r->leading, true);
		log_info("rollout controller: this replica took over");
	} else if (!lead && was) {
		atomic_store(&r->leading, false);
		if (follow_records(r, err, sizeof(err)) < 0)
			log_warn("rollout: cannot reload the rollout records: %s", err);
		wake_nodes(r);
	}
	return lead;
}

void rollout_follow(struct rollout *r, struct ro_run *run, bool has_released, uint64_t released)
{
	if (!r || !r->staged || atomic_load(&r->leading)) {
		/* the controller wrote it: it is ours already */
		if (run)
			ro_run_release(run);
		free(run);
		return;
	}
	pthread_mutex_lock(&r->lock);
	if (has_released)
		r->released = released;
	if (run && r->have_run && run->id == r->run.id && run->nmembers == r->run.nmembers) {
		/* the same run moved on: its scalars; the members stay */
		struct ro_run *cur = &r->run;
		char **members = cur->members;
		char *reason = cur->reason;
		size_t touched = cur->touched;
		*cur = *run;
		cur->members = members;
		cur->reason = run->reason;
		cur->touched = touched > run->touched ? touched : run->touched;
		run->reason = reason;
		for (size_t i = 0; i < run->nmembers; i++)
			free(run->members[i]);
		free(run->members);
		free(run->reason);
	} else if (run && (!r->have_run || run->id > r->run.id)) {
		drop_members(r);
		ro_run_release(&r->run);
		r->run = *run;
		r->have_run = true;
		index_members(r, NULL, 0);
	} else if (run) {
		ro_run_release(run);   /* older than what we have */
	}
	pthread_mutex_unlock(&r->lock);
	free(run);
	follow_floor(r);
	wake_nodes(r);
}

bool rollout_leads(struct rollout *r)
{
	return r && atomic_load(&r->leading);
}

void rollout_record(struct rollout *r, const struct persist_node *n)
{
	if (!r || !r->staged || (r->shared && !atomic_load(&r->leading)))
		return;
	bool step = false;
	pthread_mutex_lock(&r->lock);
	long i = in_progress(r) ? member_of(r, n->id) : -1;
	if (i >= 0) {
		uint64_t to = r->run.to;
		if (n->sent_version >= to && !r->m[i].sent) {
			r->m[i].sent = true;
			r->run.touched++;
		}
		if ((n->has_nack && n->nack_version >= to) || (n->acked_version >= to && n->healthy == 0)) {
			r->m[i].nacked |= n->has_nack && n->nack_version >= to;
			r->m[i].unhealthy |= !(n->has_nack && n->nack_version >= to);
			if (!r->failure) {
				if (n->has_nack && n->nack_version >= to)
					r->failure = xasprintf("node %s: NACK of version %llu: %s", n->id,
							       (unsigned long long)n->nack_version,
							       n->nack_error ? n->nack_error : "");
				else
					r->failure = xasprintf("node %s: unhealthy after version %llu", n->id,
							       (unsigned long long)n->acked_version);
			}
			step = true;
		} else if (n->acked_version >= to && !r->m[i].acked) {
			r->m[i].acked = true;
			if ((size_t)i < r->run.reached) {
				r->acked_reached++;
				step = r->acked_reached == r->run.reached;
			}
		}
	}
	pthread_mutex_unlock(&r->lock);
	if (step && r->p->hub)
		hub_wake_keeper(r->p->hub);   /* not on the watch's thread: a revert commits */
}

uint64_t rollout_gen(struct rollout *r)
{
	return r ? atomic_load(&r->gen) : 0;
}

void rollout_relay_json(struct rollout *r, uint64_t newest, struct buf *out)
{
	pthread_mutex_lock(&r->lock);
	/* under --rollout immediate everything is released as it commits */
	uint64_t released = r->staged ? r->released : newest;
	cJSON *run = r->have_run ? record_run_to_json(&r->run) : NULL;
	pthread_mutex_unlock(&r->lock);
	buf_printf(out, "{\"released\":\"%llu\",\"run\":", (unsigned long long)released);
	if (run) {
		char *text = cJSON_PrintUnformatted(run);
		buf_puts(out, text);
		free(text);
		cJSON_Delete(run);
	} else {
		buf_puts(out, "null");
	}
	buf_putc(out, '}');
}

uint64_t rollout_released_now(struct rollout *r, uint64_t newest)
{
	pthread_mutex_lock(&r->lock);
	uint64_t released = r->staged ? r->released : newest;
	pthread_mutex_unlock(&r->lock);
	return released;
}

struct rollout *rollout_open(struct core *p, struct gate *gate, const struct rollout_options *o, char *err,
			     size_t errlen)
{
	struct rollout *r = xcalloc(1, sizeof(*r));
	r->p = p;
	r->gate = gate;
	pthread_mutex_init(&r->ctl, NULL);
	pthread_mutex_init(&r->lock, NULL);
	strmap_init(&r->idx);
	r->staged = strcmp(o->mode, "staged") == 0;
	r->shared = p->persist->ops->lead != NULL;
	r->bake_ms = (int64_t)(o->bake * 1000);
	/* a rollout started before the known nodes are back would have no
	 * members and reach them all at once: give them three heartbeats (a
	 * poller's window) to reconnect */
	struct nodes_stats ns;
	nodes_stats(p->nodes, &ns);
	if (ns.nodes > 0)
		r->start_after = now_ms() + (int64_t)(p->cfg.heartbeat * 3000);
	r->ack_timeout_ms = (int64_t)(o->ack_timeout * 1000);
	if (rollout_parse_stages(o->stages, r->stages, &r->nstages, err, errlen) < 0)
		goto fail;

	if (!r->staged) {
		struct ro_run run;
		bool have;
		uint64_t released;
		if (load_last(r, &run, &have, &released, err, errlen) < 0)
			goto fail;
		store_rdlock(p->store);
		uint64_t newest = store_version(p->store);
		store_rdunlock(p->store);
		bool ended = have && run.state == RO_IN_PROGRESS;
		if (ended) {
			run.state = RO_ABORTED;
			run.finished_at = wall_ms();
			free(run.reason);
			run.reason = xstrdup("ended when the plane restarted with --rollout immediate: every node "
					     "gets the newest version");
		}
		install(r, &run, have, ended ? newest : released, NULL, 0);
		if (ended)
			persist(r);
		store_write_lock(p->store);
		int rc = store_set_pin(p->store, false, 0, err, errlen);
		store_write_unlock(p->store);
		if (rc < 0)
			goto fail;
		return r;
	}
	/* replicas: each follows the records until the election makes it
	 * the controller (rollout_step), which then resumes */
	if (r->shared ? follow_records(r, err, errlen) : resume(r, err, errlen))
		goto fail;
	return r;
fail:
	rollout_free(r);
	return NULL;
}

void rollout_free(struct rollout *r)
{
	if (!r)
		return;
	drop_members(r);
	strmap_release(&r->idx);
	ro_run_release(&r->run);
	free(r->failure);
	pthread_mutex_destroy(&r->ctl);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

/* ---- what a write waits for, and emergency reverts -------------------------- */

/* Whether a new version waits for the known nodes to reconnect (after a
 * start, or a replica's take-over), and for what. Takes no lock on entry;
 * nodes before ours. */
static bool waiting_now(struct rollout *r, struct rollout_wait *w)
{
	if (!r || !r->staged)
		return false;
	store_rdlock(r->p->store);
	uint64_t newest = store_version(r->p->store);
	store_rdunlock(r->p->store);
	pthread_mutex_lock(&r->lock);
	int64_t left = r->start_after - now_ms();
	bool waits = !in_progress(r) && newest > r->released && left > 0;
	pthread_mutex_unlock(&r->lock);
	if (!waits || (r->shared && !atomic_load(&r->leading)))
		return false;
	struct nodes_stats ns;
	nodes_stats(r->p->nodes, &ns);
	if (ns.connected >= ns.nodes)
		return false;   /* every one is back: the next step starts it */
	w->version = newest;
	w->back = ns.connected;
	w->expected = ns.nodes;
	w->until = (double)(wall_ms() + left) / 1000.0;
	w->left = (double)left / 1000.0;
	return true;
}

bool rollout_waiting(struct rollout *r, struct rollout_wait *w)
{
	return waiting_now(r, w);
}

void rollout_waiting_json(struct rollout *r, struct buf *out)
{
	struct rollout_wait w;
	if (!waiting_now(r, &w))
		return;
	buf_printf(out, ",\"waiting\":{\"for\":\"nodes\",\"version\":%llu,\"back\":%zu,\"expected\":%zu,\"until\":%.3f}",
		   (unsigned long long)w.version, w.back, w.expected, w.until);
}

bool rollout_queue(struct rollout *r, uint64_t *after, uint64_t *newest)
{
	if (!r || !r->staged)
		return false;
	store_rdlock(r->p->store);
	*newest = store_version(r->p->store);
	store_rdunlock(r->p->store);
	pthread_mutex_lock(&r->lock);
	*after = in_progress(r) ? r->run.to : r->released;
	pthread_mutex_unlock(&r->lock);
	return *newest > *after;
}

void rollout_write_note(struct rollout *r, uint64_t version, struct buf *out)
{
	if (!r || !r->staged)
		return;
	struct rollout_wait w;
	bool waits = waiting_now(r, &w);
	pthread_mutex_lock(&r->lock);
	const struct ro_run *run = &r->run;
	if (in_progress(r) && run->to == version)
		buf_printf(out, ",\"rollout\":{\"state\":\"started\",\"id\":%llu,\"stages\":%zu}",
			   (unsigned long long)run->id, r->nstages);
	else if (in_progress(r) && version > run->to)
		buf_printf(out, ",\"rollout\":{\"state\":\"queued\",\"behind\":%llu,\"behind_version\":%llu,\"stage\":%zu,"
			   "\"stages\":%zu,\"queue\":%llu}", (unsigned long long)run->id, (unsigned long long)run->to,
			   run->stage + 1, r->nstages, (unsigned long long)(version - run->to));
	else if (waits && version > r->released)
		buf_printf(out, ",\"rollout\":{\"state\":\"waiting\",\"for\":\"nodes\",\"back\":%zu,\"expected\":%zu,"
			   "\"until\":%.3f,\"queue\":%llu}", w.back, w.expected, w.until,
			   (unsigned long long)(version - r->released));
	pthread_mutex_unlock(&r->lock);
}

bool rollout_baseline(struct rollout *r, uint64_t *version, uint64_t *id)
{
	if (!r || !r->staged)
		return false;
	pthread_mutex_lock(&r->lock);
	bool have = r->have_run;
	if (have) {
		*version = r->run.from;
		*id = r->run.id;
	}
	pthread_mutex_unlock(&r->lock);
	return have;
}

/* An emergency revert in progress: the rollout as it was when it began
 * (a copy: the revert's commit records it while the rollout holds). */
struct rollout_emergency {
	bool have, running;
	struct ro_run run;           /* deep copy (have) */
};

static void copy_run(struct ro_run *to, const struct ro_run *from)
{
	*to = *from;
	to->reason = xstrdup(from->reason ? from->reason : "");
	to->members = xcalloc(from->nmembers ? from->nmembers : 1, sizeof(char *));
	for (size_t i = 0; i < from->nmembers; i++)
		to->members[i] = xstrdup(from->members[i]);
}

int rollout_emergency_begin(struct rollout *r, struct rollout_emergency **e, int *status, char *err,
			    size_t errlen)
{
	*e = NULL;
	if (!r || !r->staged)
		return 0;   /* --rollout immediate: every version goes to every node at once anyway */
	pthread_mutex_lock(&r->ctl);
	int rc = 0;
	if (!lead_now(r)) {
		char holder[128];
		controller_name(r, holder, sizeof(holder));
		*status = 409;
		snprintf(err, errlen, "revert --now: this replica is not the rollout controller; send it to the "
			 "controller (%s)", holder[0] ? holder : "being elected");
		rc = -1;
	} else {
		atomic_fetch_add(&r->hold, 1);
		struct rollout_emergency *em = xcalloc(1, sizeof(*em));
		pthread_mutex_lock(&r->lock);   /* members stable while ctl is held */
		em->have = r->have_run;
		em->running = in_progress(r);
		if (em->have)
			copy_run(&em->run, &r->run);
		pthread_mutex_unlock(&r->lock);
		*e = em;
	}
	pthread_mutex_unlock(&r->ctl);
	return rc;
}

static char *superseded_reason(uint64_t version)
{
	return xasprintf("superseded by the emergency revert, version %llu, sent to every node at once",
			 (unsigned long long)version);
}

int rollout_emergency_rows(void *ctx, struct persist_txn *tx, uint64_t version, char *err, size_t errlen)
{
	struct rollout_emergency *e = ctx;
	if (!e || !e->have)
		return 0;   /* no rollout yet: a restart counts every version as released */
	struct ro_run run = e->run;   /* scalars; members and reason borrowed */
	char *reason = NULL;
	if (e->running) {
		run.state = RO_ABORTED;
		run.finished_at = wall_ms();
		run.revert = version;
		run.reason = reason = superseded_reason(version);
	}
	/* on etcd, fenced: only while this replica is the controller */
	int rc = persist_txn_rollout(tx, &run, version, err, errlen);
	free(reason);
	return rc;
}

void rollout_emergency_end(struct rollout *r, struct rollout_emergency *e, uint64_t version, struct buf *note)
{
	if (!r || !r->staged || !e) {
		if (note && version)
			buf_puts(note, ",\"rollout\":{\"state\":\"emergency\",\"superseded\":null}");
		return;
	}
	pthread_mutex_lock(&r->ctl);
	uint64_t superseded = version && e->running ? e->run.id : 0;
	if (version && lead_now(r)) {
		/* recorded with the commit (rollout_emergency_rows): made live */
		pthread_mutex_lock(&r->lock);
		if (e->running && in_progress(r) && r->run.id == e->run.id) {
			r->run.state = RO_ABORTED;
			r->run.finished_at = wall_ms();
			r->run.revert = version;
			free(r->run.reason);
			r->run.reason = superseded_reason(version);
			r->aborted++;
		}
		if (version > r->released)
			r->released = version;
		free(r->failure);   /* a NACK of the superseded version stops nothing now */
		r->failure = NULL;
		r->start_after = 0;
		r->wait_said = 0;
		pthread_mutex_unlock(&r->lock);
	} else if (version) {
		/* the controller moved on since the commit: the records it
		 * resumes from say what the commit made (released, superseded) */
		log_info("revert --now: version %llu: this replica stopped being the rollout controller since; the "
			 "new controller resumes from the records", (unsigned long long)version);
	}
	if (version) {
		if (superseded)
			log_warn("rollout %llu: superseded: the emergency revert, version %llu, goes to every node at once",
				 (unsigned long long)superseded, (unsigned long long)version);
		else
			log_warn("rollout: the emergency revert, version %llu, goes to every node at once",
				 (unsigned long long)version);
		if (note) {
			buf_puts(note, ",\"rollout\":{\"state\":\"emergency\",\"superseded\":");
			if (superseded)
				buf_printf(note, "%llu}", (unsigned long long)superseded);
			else
				buf_puts(note, "null}");
		}
	}
	atomic_fetch_sub(&r->hold, 1);
	pthread_mutex_unlock(&r->ctl);
	if (e->have)
		ro_run_release(&e->run);
	free(e);
	if (version)
		wake_nodes(r);
	rollout_step(r);   /* what was held meanwhile (writes after it go out staged) */
}
