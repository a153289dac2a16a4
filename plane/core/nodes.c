/* core/nodes.c: per-node records, nonce-matched ACK handling, write-behind
 * persistence (see nodes.h). */
#include "core/nodes.h"
#include "core/approvals.h"
#include "core/nodekeys.h"
#include "log.h"
#include "resource.h"
#include "strmap.h"
#include "sub.h"
#include "traffic.h"
#include "util.h"
#include "xmalloc.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct node_rec {
	/* first, together: what the per-second scans of every record read
	 * (connected, lagging, nodes_check_lag), so that a scan touches a
	 * record's first cache lines only */
	char *id;
	int streams;                 /* open streams now, here */
	bool via_streaming;          /* the relay nearest it holds its stream */
	bool dirty;
	bool dirty_more;             /* more than its ACK part changed since it was written */
	bool has_nack;
	char transport[8];
	char *via;                   /* behind relays: their names, nearest first, comma-joined; NULL: direct */
	int64_t poll_seen_ms;        /* monotonic time of the last poll */
	int64_t behind_since_ms;     /* monotonic; 0 while at its target */
	uint64_t acked_version;
	uint64_t sent_version;
	char *holder;                /* another replica that says it streams to it; NULL: none */
	char *labels;                /* canonical JSON object */
	int64_t first_seen, last_seen;   /* wall seconds */
	char sent_nonce[NONCE_MAX];
	int64_t sent_at;
	int64_t acked_at;
	int healthy;                 /* -1 unknown */
	uint64_t nack_version;
	char nack_nonce[NONCE_MAX];
	char *nack_error;
	int64_t nack_at;
	uint64_t acks, nacks, stale;
	/* NACKs of pushes that failed the node's verification (since start) */
	uint64_t verify_failures, vf_version;
	char *vf_error;
	int64_t vf_at;
	char *sub;                   /* its subscription, canonical ("": every name), from its last stream or
				      * poll (persisted); NULL: never known */
	/* its last traffic report (traffic-aware gates), as JSON, and its
	 * sums for /metrics; memory only */
	char *traffic;
	uint64_t t_requests, t_errors;
	double t_p99;
	uint64_t t_version;
	double t_until;
	int counts;                  /* its last ACK said it counts traffic (1), not (0), or nothing (-1) */
	bool traffic_out;            /* the report goes with the next record written: to
				      * the other replicas, or up through the relay */
	char *key_reg;               /* a relay's: a registration to pass up ('k' line) */
	uint64_t held_version, helds;   /* its last held NACK (held_at 0: none), and how many */
	char *held_reason;
	int64_t held_at;
	/* last, the large parts most records leave empty */
	char t_gen[TRAFFIC_GEN_LEN]; /* which report it is (traffic_replayed) */
	char *counts_reason;         /* ... why it does not count traffic (at most
				      * GATE_COUNTS_REASON_MAX - 1 bytes); NULL: "" */
	struct nodekey_state key;    /* its key for sealed secrets, and the revoked ones (owns
				      * strings: a copy is nodekeys_state_copy's) */
};

/* A replica's name as a record's holder keeps it: at most HOLDER_MAX - 1 bytes. */
#define HOLDER_MAX 128

struct nodes {
	struct persist *p;           /* borrowed: the backend */
	struct approvals *approvals; /* borrowed: /v1/nodes shows what a node requires (NULL: none) */
	pthread_mutex_t lock;
	/* one flush at a time (taken before lock): a flush that finds
	 * nothing dirty because another took the records waits until
	 * they are written, so its caller may say "on disk" */
	pthread_mutex_t flush_lock;
	struct strmap by_id;
	struct node_rec **all;
	size_t len, cap, max;
	struct node_rec **dirty;
	size_t ndirty, dirtycap;
	int64_t poll_window_ms;
	uint64_t acks, nacks, stale, verify_failures, helds;
	nodes_target_fn target;
	void *target_ctx;
	bool (*relay_up)(void *ctx, const char *relay);
	void *relay_ctx;
	bool own_only;               /* a relay: /v1/nodes lists the nodes it serves itself */
	bool approve_relay_keys;     /* --approve-relay-keys: a first key through a relay waits */
	int64_t lag_alert_ms;
	struct strmap held;          /* relay -> the version it last said it holds */
	/* the sealing targets' snapshot (nodes_keys_hold): rebuilt when
	 * keys_gen moved, i.e. a key, its pending flag or a subscription */
	uint64_t keys_gen;
	struct nodes_keys *keys_snap;
	/* every node's revoked key ids (a key revoked on one node is taken
	 * on none): remade when revoked_gen moved (a revocation, a record
	 * loaded or merged) */
	struct strmap revoked_all;
	uint64_t revoked_gen, revoked_built;
	bool revoked_ready;
};

void nodes_set_target(struct nodes *n, nodes_target_fn fn, void *ctx, double lag_alert_s)
{
	pthread_mutex_lock(&n->lock);
	n->target = fn;
	n->target_ctx = ctx;
	n->lag_alert_ms = (int64_t)(lag_alert_s * 1000);
	pthread_mutex_unlock(&n->lock);
}

/* Call with n->lock held. */
static uint64_t target_of(const struct nodes *n, const struct node_rec *r, uint64_t plane_version)
{
	uint64_t t = n->target ? n->target(n->target_ctx, r->id) : UINT64_MAX;
	return t == UINT64_MAX || t > plane_version ? plane_version : t;
}

static bool lagging(const struct nodes *n, const struct node_rec *r, int64_t mono)
{
	return r->behind_since_ms && mono - r->behind_since_ms >= n->lag_alert_ms;
}

size_t nodes_check_lag(struct nodes *n, uint64_t plane_version)
{
	int64_t mono = now_ms();
	size_t count = 0;
	pthread_mutex_lock(&n->lock);
	for (size_t i = 0; i < n->len; i++) {
		struct node_rec *r = n->all[i];
		bool behind = r->acked_version < target_of(n, r, plane_version);
		if (!behind) {
			r->behind_since_ms = 0;
		} else {
			if (!r->behind_since_ms)
				r->behind_since_ms = mono;
			count += lagging(n, r, mono);
		}
	}
	pthread_mutex_unlock(&n->lock);
	return count;
}

static bool connected(const struct nodes *n, const struct node_rec *r, int64_t mono);

size_t nodes_connected_list(struct nodes *n, char ***ids, char ***labels)
{
	int64_t mono = now_ms();
	pthread_mutex_lock(&n->lock);
	*ids = xcalloc(n->len ? n->len : 1, sizeof(char *));
	*labels = xcalloc(n->len ? n->len : 1, sizeof(char *));
	size_t k = 0;
	for (size_t i = 0; i < n->len; i++) {
		if (!connected(n, n->all[i], mono))
			continue;
		(*ids)[k] = xstrdup(n->all[i]->id);
		(*labels)[k] = xstrdup(n->all[i]->labels);
		k++;
	}
	pthread_mutex_unlock(&n->lock);
	return k;
}

void nodes_list_free(char **ids, char **labels, size_t count)
{
	for (size_t i = 0; i < count; i++) {
		free(ids[i]);
		free(labels[i]);
	}
	free(ids);
	free(labels);
}

bool nodes_versions(struct nodes *n, const char *id, uint64_t *sent, uint64_t *acked, int *healthy)
{
	pthread_mutex_lock(&n->lock);
	intptr_t v;
	const struct node_rec *r = strmap_get(&n->by_id, id, &v) ? (const struct node_rec *)v : NULL;
	if (r) {
		*sent = r->sent_version;
		*acked = r->acked_version;
		*healthy = r->healthy;
	}
	pthread_mutex_unlock(&n->lock);
	return r != NULL;
}

bool nodes_id_valid(const char *id)
{
	return id && resource_name_valid(id);
}

void nodes_poll_nonce(char *out, size_t cap, uint64_t version, uint64_t base)
{
	snprintf(out, cap, "p%llu-%llu", (unsigned long long)version, (unsigned long long)base);
}

/* To be written: only its ACK part changed (mark_acked), or more. */
static void mark_acked(struct nodes *n, struct node_rec *r)
{
	if (r->dirty)
		return;
	r->dirty = true;
	if (n->ndirty == n->dirtycap) {
		n->dirtycap = n->dirtycap ? n->dirtycap * 2 : 64;
		n->dirty = xrealloc(n->dirty, n->dirtycap * sizeof(*n->dirty));
	}
	n->dirty[n->ndirty++] = r;
}

static void mark_dirty(struct nodes *n, struct node_rec *r)
{
	r->dirty_more = true;
	mark_acked(n, r);
}

static struct node_rec *lookup(struct nodes *n, const char *id)
{
	intptr_t v;
	return strmap_get(&n->by_id, id, &v) ? (struct node_rec *)v : NULL;
}

static struct node_rec *add(struct nodes *n, const char *id)
{
	struct node_rec *r = xcalloc(1, sizeof(*r));
	r->id = xstrdup(id);
	r->labels = xstrdup("{}");
	r->healthy = -1;
	r->counts = -1;
	if (n->len == n->cap) {
		n->cap = n->cap ? n->cap * 2 : 64;
		n->all = xrealloc(n->all, n->cap * sizeof(*n->all));
	}
	n->all[n->len++] = r;
	*strmap_ref(&n->by_id, r->id) = (intptr_t)r;
	return r;
}

static void rec_free(struct node_rec *r)
{
	free(r->id);
	free(r->labels);
	free(r->nack_error);
	free(r->vf_error);
	free(r->holder);
	free(r->via);
	free(r->sub);
	free(r->traffic);
	free(r->counts_reason);
	nodekeys_state_release(&r->key);
	free(r->key_reg);
	free(r->held_reason);
	free(r);
}

static void copy_str(char *dst, size_t cap, const char *src)
{
	snprintf(dst, cap, "%s", src ? src : "");
}

static const char *str_of(const char *s)
{
	return s ? s : "";
}

bool nodes_nacked(struct nodes *n, const char *id, uint64_t min, char *err, size_t errlen)
{
	pthread_mutex_lock(&n->lock);
	intptr_t v;
	const struct node_rec *r = strmap_get(&n->by_id, id, &v) ? (const struct node_rec *)v : NULL;
	bool nacked = r && r->has_nack && r->nack_version >= min;
	if (nacked)
		snprintf(err, errlen, "%s", r->nack_error ? r->nack_error : "");
	pthread_mutex_unlock(&n->lock);
	return nacked;
}

bool nodes_held(struct nodes *n, const char *id, uint64_t min, char *why, size_t whylen)
{
	pthread_mutex_lock(&n->lock);
	const struct node_rec *r = lookup(n, id);
	bool held = r && r->held_at && r->held_version >= min && r->acked_version < r->held_version;
	if (held)
		snprintf(why, whylen, "%s", r->held_reason ? r->held_reason : "");
	pthread_mutex_unlock(&n->lock);
	return held;
}

static const char *self_replica(const struct nodes *n)
{
	return n->p->ops->replica ? n->p->ops->replica(n->p) : NULL;
}

/* Where another replica says the node streams: each replica speaks for
 * itself only, so its "not any more" clears only its own claim. */
static void take_holder(struct nodes *n, struct node_rec *r, const struct persist_node *pn)
{
	const char *self = self_replica(n);
	if (!self || !pn->replica || !pn->replica[0] || strcmp(pn->replica, self) == 0)
		return;
	if (pn->streaming)
		xstr_set(&r->holder, pn->replica, HOLDER_MAX);
	else if (r->holder && strcmp(r->holder, pn->replica) == 0)
		xstr_set(&r->holder, NULL, HOLDER_MAX);
}

/* Under lock: pn's key for sealed secrets, from a replica's record (never
 * a relay's): the revoked ids join r's (a revocation anywhere holds
 * everywhere), a live key not revoked here is taken when pn's
 * registration is newer than r's high-water mark (or r never had one),
 * and the mark is the higher of the two. true when r changed. */
static bool take_key(struct node_rec *r, const struct persist_node *pn)
{
	bool changed = nodekeys_take_revoked(&r->key, pn->revoked);
	bool newer = pn->key_at > r->key.key_at;
	/* a key whose id is its own (a damaged or hostile record is not
	 * taken into the live set) */
	if (pn->key && pn->key[0] && pn->key_id && nodekeys_key_valid(pn->key, pn->key_id) &&
	    !nodekeys_listed(nodekeys_revoked(&r->key), pn->key_id) &&
	    (newer || (!r->key.key[0] && !r->key.key_at)) && strcmp(pn->key, r->key.key) != 0) {
		snprintf(r->key.key, sizeof(r->key.key), "%s", pn->key);
		snprintf(r->key.kid, sizeof(r->key.kid), "%s", pn->key_id);
		nodekeys_set_via(&r->key, pn->key_via);
		r->key.pending = pn->key_pending;
		changed = true;
	} else if (r->key.pending && !pn->key_pending && pn->key && strcmp(pn->key, r->key.key) == 0) {
		/* approved at another replica (an approval is never undone) */
		r->key.pending = false;
		changed = true;
	}
	/* the registrations' high-water mark: the highest any replica took */
	if (newer) {
		r->key.key_at = pn->key_at;
		changed = true;
	}
	return changed;
}

/* Under lock: pn's held NACK when newer than r's, and none once r acked
 * its version or a later one. */
static void take_held(struct node_rec *r, const struct persist_node *pn)
{
	if (pn->held_at > r->held_at && pn->held_version > r->acked_version) {
		r->held_version = pn->held_version;
		free(r->held_reason);
		r->held_reason = xstrdup(pn->held_reason ? pn->held_reason : "");
		r->held_at = pn->held_at;
	}
	if (r->held_at && r->acked_version >= r->held_version) {
		r->held_at = 0;
		free(r->held_reason);
		r->held_reason = NULL;
	}
}

/* Under lock: a held NACK of version (why: the node's error). */
static void set_held(struct nodes *n, struct node_rec *r, uint64_t version, const char *why, int64_t now)
{
	r->held_version = version;
	free(r->held_reason);
	r->held_reason = xstrndup(why ? why : "", why ? strnlen(why, NODE_ERROR_MAX) : 0);
	r->held_at = now;
	r->helds++;
	n->helds++;
}

/* Under lock: an ACK of the held version or a later one ends the hold. */
static void clear_held(struct node_rec *r)
{
	if (r->held_at && r->acked_version >= r->held_version) {
		r->held_at = 0;
		free(r->held_reason);
		r->held_reason = NULL;
	}
}

/* Under lock: whether it counts its traffic, as the record says (0: it
 * does not say: kept). */
static void take_counts(struct node_rec *r, const struct persist_node *pn)
{
	if (!pn->counts)
		return;
	r->counts = pn->counts > 0;
	xstr_set(&r->counts_reason, pn->counts > 0 || !pn->counts_reason ? "" : pn->counts_reason,
		GATE_COUNTS_REASON_MAX);
}

/* Under lock: a new record r takes pn whole. */
static void load_into(struct nodes *n, struct node_rec *r, const struct persist_node *pn)
{
	free(r->labels);
	r->labels = xstrdup(pn->labels);
	r->first_seen = pn->first_seen;
	r->last_seen = pn->last_seen;
	copy_str(r->transport, sizeof(r->transport), pn->transport);
	r->sent_version = pn->sent_version;
	copy_str(r->sent_nonce, sizeof(r->sent_nonce), pn->sent_nonce);
	r->sent_at = pn->sent_at;
	r->acked_version = pn->acked_version;
	r->acked_at = pn->acked_at;
	r->healthy = pn->healthy;
	if (pn->has_nack) {
		r->has_nack = true;
		r->nack_version = pn->nack_version;
		copy_str(r->nack_nonce, sizeof(r->nack_nonce), pn->nack_nonce);
		r->nack_error = xstrdup(pn->nack_error ? pn->nack_error : "");
		r->nack_at = pn->nack_at;
	}
	r->acks = pn->acks;
	r->nacks = pn->nacks;
	r->stale = pn->stale;
	if (pn->via && pn->via[0])
		r->via = xstrdup(pn->via);
	if (pn->sub) {
		free(r->sub);
		r->sub = xstrdup(pn->sub);
		n->keys_gen++;
	}
	take_key(r, pn);
	n->keys_gen++;
	n->revoked_gen++;
	take_held(r, pn);
	take_holder(n, r, pn);
	take_counts(r, pn);
}

static int load_one(void *ctx, const struct persist_node *pn)
{
	struct nodes *n = ctx;
	if (!lookup(n, pn->id))
		load_into(n, add(n, pn->id), pn);
	return 0;
}

/* Under lock: the parts of pn newer than what r holds. */
static void merge_into(struct nodes *n, struct node_rec *r, const struct persist_node *pn)
{
	/* each part from whichever replica saw it last; nothing is marked
	 * dirty, so a merge never writes back (no ping-pong between replicas) */
	if (pn->last_seen > r->last_seen) {
		r->last_seen = pn->last_seen;
		if (strcmp(pn->labels, r->labels) != 0) {
			free(r->labels);
			r->labels = xstrdup(pn->labels);
		}
		copy_str(r->transport, sizeof(r->transport), pn->transport);
	}
	/* the subscription of its last connection, as whoever saw that says */
	if (pn->sub && (!r->sub || (pn->last_seen >= r->last_seen && strcmp(pn->sub, r->sub) != 0))) {
		free(r->sub);
		r->sub = xstrdup(pn->sub);
		n->keys_gen++;
	}
	if (pn->first_seen && (!r->first_seen || pn->first_seen < r->first_seen))
		r->first_seen = pn->first_seen;
	/* times are wall seconds: within one second the higher version is
	 * the later (versions only go up) */
	if (pn->sent_at > r->sent_at || (pn->sent_at == r->sent_at && pn->sent_version > r->sent_version)) {
		r->sent_version = pn->sent_version;
		copy_str(r->sent_nonce, sizeof(r->sent_nonce), pn->sent_nonce);
		r->sent_at = pn->sent_at;
	}
	if (pn->acked_at > r->acked_at || (pn->acked_at == r->acked_at && pn->acked_version > r->acked_version)) {
		r->acked_version = pn->acked_version;
		r->acked_at = pn->acked_at;
		r->healthy = pn->healthy;
	}
	if (pn->has_nack && (!r->has_nack || pn->nack_at > r->nack_at ||
			     (pn->nack_at == r->nack_at && pn->nack_version > r->nack_version))) {
		r->has_nack = true;
		r->nack_version = pn->nack_version;
		copy_str(r->nack_nonce, sizeof(r->nack_nonce), pn->nack_nonce);
		free(r->nack_error);
		r->nack_error = xstrdup(pn->nack_error ? pn->nack_error : "");
		r->nack_at = pn->nack_at;
	}
	if (pn->acks > r->acks)
		r->acks = pn->acks;
	if (pn->nacks > r->nacks)
		r->nacks = pn->nacks;
	if (pn->stale > r->stale)
		r->stale = pn->stale;
	/* behind relays, as the replica that heard them says (it also says
	 * whether it holds the relay's stream: the holder, above) */
	if (pn->via && pn->via[0] && (!r->via || strcmp(r->via, pn->via) != 0)) {
		free(r->via);
		r->via = xstrdup(pn->via);
	}
	if (pn->verify_failures > r->verify_failures) {
		n->verify_failures += pn->verify_failures - r->verify_failures;
		r->verify_failures = pn->verify_failures;
		r->vf_version = pn->vf_version;
		free(r->vf_error);
		r->vf_error = xstrdup(pn->vf_error ? pn->vf_error : "");
		r->vf_at = pn->vf_at;
	}
}

/* Under lock: id's record, or a new one (NULL: the table is full). */
static struct node_rec *lookup_or_add(struct nodes *n, const char *id, bool *added)
{
	struct node_rec *r = lookup(n, id);
	*added = r == NULL;
	if (r || n->len >= n->max)
		return r;
	return add(n, id);
}

int nodes_merge(struct nodes *n, const struct persist_node *pn)
{
	pthread_mutex_lock(&n->lock);
	bool added;
	struct node_rec *r = lookup_or_add(n, pn->id, &added);
	if (!r || added) {
		if (r) {
			load_into(n, r, pn);
			n->keys_gen++;
		}
		pthread_mutex_unlock(&n->lock);
		return r ? 0 : -1;
	}
	merge_into(n, r, pn);
	if (take_key(r, pn)) {
		n->keys_gen++;
		n->revoked_gen++;
	}
	take_held(r, pn);
	take_holder(n, r, pn);
	take_counts(r, pn);
	/* a node polling another replica: its window counts here too */
	int64_t ago = wall_seconds() - pn->last_seen;
	if (strcmp(pn->transport, "poll") == 0 && pn->replica && pn->replica[0] && ago >= 0 &&
	    ago * 1000 < n->poll_window_ms) {
		int64_t seen = now_ms() - ago * 1000;
		if (seen > r->poll_seen_ms)
			r->poll_seen_ms = seen;
	}
	pthread_mutex_unlock(&n->lock);
	return 0;
}

static int relay_claim(const struct nodes *n, const struct node_rec *r, const char *node, const char *relay,
		       bool streaming, char *err, size_t errlen);

int nodes_relayed(struct nodes *n, const struct persist_node *pn, const char *relay, char *err, size_t errlen)
{
	pthread_mutex_lock(&n->lock);
	/* the 'c' line's rules: a node streaming from this plane (or from
	 * another relay that is up) is not moved by a relay's word */
	if (relay_claim(n, lookup(n, pn->id), pn->id, relay, pn->streaming, err, errlen) < 0) {
		pthread_mutex_unlock(&n->lock);
		return -1;
	}
	bool added;
	struct node_rec *r = lookup_or_add(n, pn->id, &added);
	if (!r) {
		snprintf(err, errlen, "node '%s': the registry is full (--max-nodes %zu)", pn->id, n->max);
		pthread_mutex_unlock(&n->lock);
		return -1;
	}
	if (added)
		log_info("nodes: new node '%s' behind relay %s", pn->id, relay);
	merge_into(n, r, pn);
	char *via = pn->via && pn->via[0] ? xasprintf("%s,%s", relay, pn->via) : xstrdup(relay);
	free(r->via);
	r->via = via;
	r->via_streaming = pn->streaming;
	/* on to the store (and, on a relay, further up) */
	mark_dirty(n, r);
	pthread_mutex_unlock(&n->lock);
	return 0;
}

#define RELAYS_MAX 10000

/* Whether the relay nearest this plane on r's path is relay. */
static bool behind(const struct node_rec *r, const char *relay)
{
	if (!r->via)
		return false;
	size_t k = strcspn(r->via, ",");
	return strlen(relay) == k && memcmp(r->via, relay, k) == 0;
}

static void where(const struct node_rec *r, char *out, size_t cap)
{
	if (!r)
		snprintf(out, cap, "unknown here");
	else if (r->via)
		snprintf(out, cap, "behind relay %.*s", (int)strcspn(r->via, ","), r->via);
	else
		snprintf(out, cap, "not behind a relay");
}

void nodes_relay_held(struct nodes *n, const char *relay, uint64_t held)
{
	pthread_mutex_lock(&n->lock);
	intptr_t cur;
	if (strmap_get(&n->held, relay, &cur))
		*strmap_ref(&n->held, relay) = (intptr_t)held;
	else if (n->held.len < RELAYS_MAX)   /* names are the relays' word: bounded */
		strmap_put(&n->held, xstrdup(relay), (intptr_t)held);
	pthread_mutex_unlock(&n->lock);
}

static bool relay_near_up(const struct nodes *n, const char *via);

/* Under lock: whether relay's word about node (r: its record, NULL none)
 * -- that it is behind relay, streaming there or not -- may move it
 * there; the 'c' line's rules, and POST /v1/relay/nodes's. */
static int relay_claim(const struct nodes *n, const struct node_rec *r, const char *node, const char *relay,
		       bool streaming, char *err, size_t errlen)
{
	if (r && !behind(r, relay) && !streaming &&
	    (r->streams > 0 || (r->via && r->via_streaming && n->relay_up && relay_near_up(n, r->via)))) {
		/* the node streams from another relay that is up, or from
		 * this plane: a word from the one it left is old news */
		char w[260];
		where(r, w, sizeof(w));
		snprintf(err, errlen, "node '%s' is %s: relay %s's word that it is not streaming there is not taken",
			 node, w, relay);
		return -1;
	}
	if (r && r->streams > 0 && streaming) {
		/* a node with a stream open here is this plane's: no relay
		 * takes it over by its word (a real failover closes the
		 * stream here first) */
		snprintf(err, errlen, "node '%s' streams from this plane: relay %s's word that it streams there is not taken",
			 node, relay);
		return -1;
	}
	return 0;
}

/* Under lock: a 'c' line (the node's connection through relay). */
static int relay_conn(struct nodes *n, struct node_rec *r, const char *relay, const struct node_change *c,
		      int64_t now, char *err, size_t errlen)
{
	if (relay_claim(n, r, c->node, relay, c->streaming, err, errlen) < 0)
		return -1;
	if (!r) {
		if (n->len >= n->max) {
			snprintf(err, errlen, "node '%s': the registry is full (--max-nodes %zu)", c->node, n->max);
			return -1;
		}
		r = add(n, c->node);
		r->first_seen = c->first_seen ? c->first_seen : now;
		log_info("nodes: new node '%s' behind relay %s", c->node, relay);
	}
	if (c->first_seen && (!r->first_seen || c->first_seen < r->first_seen))
		r->first_seen = c->first_seen;
	r->last_seen = now;
	if (strcmp(r->labels, c->labels) != 0) {
		free(r->labels);
		r->labels = xstrdup(c->labels);
	}
	copy_str(r->transport, sizeof(r->transport), c->transport);
	if (c->sub && (!r->sub || strcmp(r->sub, c->sub) != 0)) {
		free(r->sub);
		r->sub = xstrdup(c->sub);
		n->keys_gen++;
	}
	char *via = c->via[0] ? xasprintf("%s,%s", relay, c->via) : xstrdup(relay);
	if (r->via && strcmp(r->via, via) == 0) {
		free(via);
	} else {
		free(r->via);
		r->via = via;
	}
	r->via_streaming = c->streaming;
	mark_dirty(n, r);
	return 0;
}

/* A relay's count of a node's ACKs, NACKs, stale ACKs or verification
 * failures, into the node's (*seen) and the plane's total: it counts since
 * the relay (or the node's stream to it) started, so a lower one restarted
 * and is all new. */
static void take_count(uint64_t *total, uint64_t *seen, uint64_t count)
{
	if (count > *seen)
		*total += count - *seen;
	else if (count < *seen)
		*total += count;
	*seen = count;
}

int nodes_relay_change(struct nodes *n, const char *relay, const struct node_change *c, char *err, size_t errlen)
{
	int64_t now = wall_seconds();
	pthread_mutex_lock(&n->lock);
	struct node_rec *r = lookup(n, c->node);
	int rc = 0;
	if (c->kind == NC_CONN) {
		rc = relay_conn(n, r, relay, c, now, err, errlen);
		goto out;
	}
	if (!r || !behind(r, relay)) {
		char w[260];
		where(r, w, sizeof(w));
		snprintf(err, errlen, "node '%s' is %s, not behind relay %s: its '%c' line is not taken (a 'c' line "
			 "of the node first)", c->node, w, relay, c->kind);
		rc = -1;
		goto out;
	}
	r->last_seen = now;
	/* what the node answered shows that it had the version */
	if ((c->kind == NC_ACK || c->kind == NC_NACK || c->kind == NC_HELD) && c->version > r->sent_version) {
		r->sent_version = c->version;
		r->sent_nonce[0] = '\0';   /* the relay's, not ours */
		r->sent_at = now;
	}
	switch (c->kind) {
	case NC_ACK:
		if (c->version > r->acked_version)
			r->acked_version = c->version;
		r->acked_at = now;
		if (c->healthy >= 0)
			r->healthy = c->healthy;
		take_count(&n->acks, &r->acks, c->count);
		clear_held(r);
		break;
	case NC_HELD:
		set_held(n, r, c->version, c->error, now);
		break;
	case NC_NACK:
		r->has_nack = true;
		r->nack_version = c->version;
		copy_str(r->nack_nonce, sizeof(r->nack_nonce), c->nonce);
		free(r->nack_error);
		r->nack_error = xstrdup(c->error ? c->error : "");
		r->nack_at = now;
		if (c->healthy >= 0)
			r->healthy = c->healthy;
		take_count(&n->nacks, &r->nacks, c->count);
		break;
	case NC_STALE:
		take_count(&n->stale, &r->stale, c->count);
		break;
	case NC_COUNTS:
		/* (recorded for /v1/nodes and passed on up a chain of relays) */
		r->counts = c->count ? 1 : 0;
		xstr_set(&r->counts_reason, c->count || !c->error ? "" : c->error, GATE_COUNTS_REASON_MAX);
		break;
	case NC_VERIFY:
		/* the count is the relay's, since it (or the node's stream to
		 * it) started: lower after a relay's restart or a failover, so
		 * the details are taken whenever they differ, not only when the
		 * count grew; the count shown is the sender's */
		if (c->count > r->verify_failures || c->version != r->vf_version ||
		    strcmp(c->error ? c->error : "", r->vf_error ? r->vf_error : "") != 0) {
			take_count(&n->verify_failures, &r->verify_failures, c->count);
			r->vf_version = c->version;
			free(r->vf_error);
			r->vf_error = xstrdup(c->error ? c->error : "");
			r->vf_at = now;
		}
		break;
	default:
		goto out;   /* a traffic report: nodes_set_traffic takes it */
	}
	if (c->kind == NC_ACK)
		mark_acked(n, r);   /* the backend may write just that part */
	else
		mark_dirty(n, r);
out:
	pthread_mutex_unlock(&n->lock);
	return rc;
}

void nodes_set_relay_up(struct nodes *n, bool (*fn)(void *ctx, const char *relay), void *ctx, bool own_only)
{
	pthread_mutex_lock(&n->lock);
	n->relay_up = fn;
	n->relay_ctx = ctx;
	n->own_only = own_only;
	pthread_mutex_unlock(&n->lock);
}

void nodes_set_approvals(struct nodes *n, struct approvals *a)
{
	pthread_mutex_lock(&n->lock);
	n->approvals = a;
	pthread_mutex_unlock(&n->lock);
}

void nodes_set_approve_relay_keys(struct nodes *n, bool on)
{
	pthread_mutex_lock(&n->lock);
	n->approve_relay_keys = on;
	pthread_mutex_unlock(&n->lock);
}

void nodes_resync(struct nodes *n)
{
	pthread_mutex_lock(&n->lock);
	for (size_t i = 0; i < n->len; i++)
		mark_dirty(n, n->all[i]);
	pthread_mutex_unlock(&n->lock);
}

struct nodes *nodes_open(struct persist *p, size_t max_nodes, int64_t poll_window_ms, char *err, size_t errlen)
{
	struct nodes *n = xcalloc(1, sizeof(*n));
	n->p = p;
	n->max = max_nodes;
	n->poll_window_ms = poll_window_ms;
	n->lag_alert_ms = 60000;
	pthread_mutex_init(&n->lock, NULL);
	pthread_mutex_init(&n->flush_lock, NULL);
	strmap_init(&n->by_id);
	strmap_init(&n->held);
	if (p->ops->nodes_load(p, load_one, n, err, errlen) < 0) {
		nodes_free(n);
		return NULL;
	}
	log_info("nodes: %zu known", n->len);
	return n;
}

void nodes_free(struct nodes *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->len; i++)
		rec_free(n->all[i]);
	free(n->all);
	free(n->dirty);
	if (n->keys_snap && --n->keys_snap->refs == 0) {
		nodes_keys_release(n->keys_snap);
		free(n->keys_snap);
	}
	strmap_release(&n->by_id);
	for (size_t i = 0; i < n->held.cap; i++)
		free((char *)n->held.slots[i].key);
	strmap_release(&n->held);
	for (size_t i = 0; n->revoked_all.slots && i < n->revoked_all.cap; i++)
		free((char *)n->revoked_all.slots[i].key);
	strmap_release(&n->revoked_all);
	pthread_mutex_destroy(&n->lock);
	pthread_mutex_destroy(&n->flush_lock);
	free(n);
}

int nodes_seen(struct nodes *n, const char *id, const char *labels, const char *transport)
{
	pthread_mutex_lock(&n->lock);
	struct node_rec *r = lookup(n, id);
	int64_t now = wall_seconds();
	if (!r) {
		if (n->len >= n->max) {
			pthread_mutex_unlock(&n->lock);
			return -1;
		}
		r = add(n, id);
		r->first_seen = now;
		log_info("nodes: new node '%s'", id);
	}
	r->last_seen = now;
	if (labels && strcmp(labels, r->labels) != 0) {
		free(r->labels);
		r->labels = xstrdup(labels);
	}
	if (transport) {
		copy_str(r->transport, sizeof(r->transport), transport);
		if (strcmp(transport, "poll") == 0)
			r->poll_seen_ms = now_ms();
	}
	mark_dirty(n, r);
	pthread_mutex_unlock(&n->lock);
	return 0;
}

void nodes_set_sub(struct nodes *n, const char *id, const char *canon)
{
	pthread_mutex_lock(&n->lock);
	struct node_rec *r = lookup(n, id);
	if (r && (!r->sub || strcmp(r->sub, canon) != 0)) {
		free(r->sub);
		r->sub = xstrdup(canon);
		n->keys_gen++;
		mark_dirty(n, r);
	}
	pthread_mutex_unlock(&n->lock);
}

void nodes_set_counts(struct nodes *n, const char *id, bool counts, const char *reason)
{
	pthread_mutex_lock(&n->lock);
	struct node_rec *r = lookup(n, id);
	if (r) {
		const char *why = counts || !reason ? "" : reason;
		bool changed = r->counts != (int)counts ||
			       strncmp(str_of(r->counts_reason), why, GATE_COUNTS_REASON_MAX - 1) != 0;
		r->counts = counts;
		xstr_set(&r->counts_reason, why, GATE_COUNTS_REASON_MAX);
		/* a relay passes it up (a 'u' line), a replica to the others
		 * (the controller's gates); SQLite does not store it */
		if (changed && (n->p->ops->upstream || n->p->ops->replica))
			mark_dirty(n, r);
	}
	pthread_mutex_unlock(&n->lock);
}

int nodes_set_traffic(struct nodes *n, const char *id, const struct traffic *t, bool pass_on)
{
	struct buf j = BUF_INIT;
	traffic_to_json(t, &j);
	struct traffic_route all;
	traffic_sum_routes(t, &all);
	pthread_mutex_lock(&n->lock);
	struct node_rec *r = lookup(n, id);
	if (r && r->traffic && traffic_replayed(t, r->t_gen, r->t_version, r->t_until, r->t_requests)) {
		pthread_mutex_unlock(&n->lock);
		buf_release(&j);
		return 1;   /* older than the one shown: not taken */
	}
	if (r) {
		free(r->traffic);
		r->traffic = buf_detach(&j, NULL);
		copy_str(r->t_gen, sizeof(r->t_gen), t->gen);
		r->t_version = t->version;
		r->t_until = t->until;
		r->t_requests = all.requests;
		r->t_errors = all.errors;
		r->t_p99 = traffic_quantile(all.hist, 0.99);
		if (pass_on && (self_replica(n) || n->p->ops->upstream)) {
			r->traffic_out = true;
			mark_dirty(n, r);
		}
	}
	pthread_mutex_unlock(&n->lock);
	buf_release(&j);
	return r ? 0 : -1;
}

void nodes_stream_open(struct nodes *n, const char *id)
{
	pthread_mutex_lock(&n->lock);
	struct node_rec *r = lookup(n, id);
	if (r) {
		r->streams++;
		if (self_replica(n))
			mark_dirty(n, r);   /* the other replicas learn it streams here */
	}
	pthread_mutex_unlock(&n->lock);
}

void nodes_stream_close(struct nodes *n, const char *id)
{
	pthread_mutex_lock(&n->lock);
	struct node_rec *r = lookup(n, id);
	if (r && r->streams > 0) {
		r->streams--;
		r->last_seen = wall_seconds();
		mark_dirty(n, r);
	}
	pthread_mutex_unlock(&n->lock);
}

void nodes_sent(struct nodes *n, const char *id, uint64_t version, const char *nonce)
{
	pthread_mutex_lock(&n->lock);
	struct node_rec *r = lookup(n, id);
	if (r) {
		r->sent_version = version;
		copy_str(r->sent_nonce, sizeof(r->sent_nonce), nonce);
		r->sent_at = wall_seconds();
		mark_dirty(n, r);
	}
	pthread_mutex_unlock(&n->lock);
}

/* A poll nonce names its own version: a response an HTTP cache served
 * without asking the plane still matches when it is newer than what the
 * plane last sent. */
static bool poll_nonce_newer(const struct node_rec *r, const char *nonce, uint64_t version,
			     uint64_t plane_version)
{
	char expect[NONCE_MAX];
	if (nonce[0] != 'p' || version <= r->sent_version || version > plane_version)
		return false;
	const char *dash = strchr(nonce, '-');
	uint64_t base;
	if (!dash || parse_u64(dash + 1, &base) < 0)
		return false;
	nodes_poll_nonce(expect, sizeof(expect), version, base);
	return strcmp(expect, nonce) == 0;
}

int nodes_ack(struct nodes *n, const struct ack_msg *m, uint64_t plane_version, enum ack_result *res)
{
	pthread_mutex_lock(&n->lock);
	struct node_rec *r = lookup(n, m->node);
	if (!r) {
		pthread_mutex_unlock(&n->lock);
		return -1;
	}
	int64_t now = wall_seconds();
	r->last_seen = now;
	mark_dirty(n, r);
	if (m->nack && m->verify) {
		r->verify_failures++;
		n->verify_failures++;
		r->vf_version = m->version;
		free(r->vf_error);
		r->vf_error = xstrndup(m->error ? m->error : "", m->error ? strnlen(m->error, NODE_ERROR_MAX) : 0);
		r->vf_at = now;
	}
	bool latest = r->sent_nonce[0] && strcmp(m->nonce, r->sent_nonce) == 0;
	if (!latest && poll_nonce_newer(r, m->nonce, m->version, plane_version)) {
		r->sent_version = m->version;
		copy_str(r->sent_nonce, sizeof(r->sent_nonce), m->nonce);
		latest = true;
	}
	if (!latest) {
		r->stale++;
		n->stale++;
		*res = ACK_STALE;
	} else if (m->version != r->sent_version) {
		*res = ACK_MISMATCH;
	} else if (m->nack && m->held) {
		/* not a NACK: the node waits for a wrap (no count, no gate) */
		set_held(n, r, m->version, m->error, now);
		if (m->healthy >= 0)
			r->healthy = m->healthy;
		*res = ACK_ACCEPTED;
	} else if (m->nack) {
		r->has_nack = true;
		r->nack_version = m->version;
		copy_str(r->nack_nonce, sizeof(r->nack_nonce), m->nonce);
		free(r->nack_error);
		r->nack_error = xstrndup(m->error ? m->error : "", m->error ? strnlen(m->error, NODE_ERROR_MAX) : 0);
		r->nack_at = now;
		r->nacks++;
		n->nacks++;
		if (m->healthy >= 0)
			r->healthy = m->healthy;
		*res = ACK_ACCEPTED;
	} else {
		if (m->version > r->acked_version)
			r->acked_version = m->version;
		r->acked_at = now;
		r->acks++;
		n->acks++;
		clear_held(r);
		if (m->healthy >= 0)
			r->healthy = m->healthy;
		*res = ACK_ACCEPTED;
	}
	pthread_mutex_unlock(&n->lock);
	return 0;
}

/* Whether the relay nearest this plane on the node's path holds its stream
 * here (it speaks for the relays behind it). */
static bool relay_near_up(const struct nodes *n, const char *via)
{
	char first[RES_NAME_MAX + 1];
	size_t k = strcspn(via, ",");
	if (k >= sizeof(first))
		return false;
	memcpy(first, via, k);
	first[k] = '\0';
	return n->relay_up(n->relay_ctx, first);
}

static bool connected(const struct nodes *n, const struct node_rec *r, int64_t mono)
{
	return r->streams > 0 ||
	       (strcmp(r->transport, "poll") == 0 && r->poll_seen_ms && mono - r->poll_seen_ms <= n->poll_window_ms) ||
	       (r->holder && n->p->ops->replica_up && n->p->ops->replica_up(n->p, r->holder)) ||
	       (r->via && r->via_streaming && n->relay_up && relay_near_up(n, r->via));
}

/* What a node was sent: behind a relay that streams to it, at least its
 * target as far as the relay holds it (the relay said which version it
 * holds; the versions and nonces it sends its nodes stay there). */
static uint64_t sent_of(const struct nodes *n, const struct node_rec *r, uint64_t target)
{
	intptr_t held;
	size_t k;
	char first[RES_NAME_MAX + 1];
	if (!r->via || !r->via_streaming || (k = strcspn(r->via, ",")) >= sizeof(first))
		return r->sent_version;
	memcpy(first, r->via, k);
	first[k] = '\0';
	if (!strmap_get(&n->held, first, &held))
		return r->sent_version;
	uint64_t derived = (uint64_t)held < target ? (uint64_t)held : target;
	return derived > r->sent_version ? derived : r->sent_version;
}

static void rec_json(const struct nodes *n, const struct node_rec *r, uint64_t plane_version,
		     int64_t mono, struct buf *out)
{
	buf_puts(out, "{\"node\":");
	buf_json_string(out, r->id);
	buf_puts(out, ",\"labels\":");
	buf_puts(out, r->labels);
	buf_printf(out, ",\"connected\":%s,\"transport\":", connected(n, r, mono) ? "true" : "false");
	buf_json_string(out, r->transport);
	/* the relays between this plane and the node, nearest first */
	buf_puts(out, ",\"via\":[");
	for (const char *v = r->via; v && *v;) {
		size_t k = strcspn(v, ",");
		if (v != r->via)
			buf_putc(out, ',');
		char *one = xstrndup(v, k);
		buf_json_string(out, one);
		free(one);
		v += k + (v[k] == ',');
	}
	buf_putc(out, ']');
	buf_puts(out, ",\"sub\":");
	if (r->sub)
		buf_json_string(out, r->sub);
	else
		buf_puts(out, "null");
	if (n->approvals)   /* approvals=K: "approvals":K,"approved_version":V */
		approvals_node_json(n->approvals, r->id, out);
	uint64_t target = target_of(n, r, plane_version);
	buf_printf(out, ",\"sent_version\":%llu,\"sent_nonce\":", (unsigned long long)sent_of(n, r, target));
	buf_json_string(out, r->sent_nonce);
	uint64_t lag = target > r->acked_version ? target - r->acked_version : 0;
	buf_printf(out, ",\"target_version\":%llu,\"acked_version\":%llu,\"lag\":%llu,\"lagging\":%s",
		   (unsigned long long)target, (unsigned long long)r->acked_version, (unsigned long long)lag,
		   lagging(n, r, mono) ? "true" : "false");
	if (r->behind_since_ms && lag)
		buf_printf(out, ",\"behind_seconds\":%lld", (long long)((mono - r->behind_since_ms) / 1000));
	buf_printf(out, ",\"healthy\":%s", r->healthy < 0 ? "null" : r->healthy ? "true" : "false");
	buf_puts(out, ",\"traffic\":");
	buf_puts(out, r->traffic ? r->traffic : "null");
	/* whether it counts traffic (traffic-aware gates), as its ACKs say */
	buf_printf(out, ",\"counts\":%s", r->counts < 0 ? "null" : r->counts ? "true" : "false");
	if (r->counts == 0) {
		buf_puts(out, ",\"counts_reason\":");
		buf_json_string(out, str_of(r->counts_reason));
	}
	if (r->has_nack) {
		buf_printf(out, ",\"last_nack\":{\"version\":%llu,\"nonce\":", (unsigned long long)r->nack_version);
		buf_json_string(out, r->nack_nonce);
		buf_puts(out, ",\"error\":");
		buf_json_string(out, r->nack_error ? r->nack_error : "");
		buf_printf(out, ",\"time\":%lld}", (long long)r->nack_at);
	} else {
		buf_puts(out, ",\"last_nack\":null");
	}
	if (r->held_at) {
		buf_printf(out, ",\"held\":{\"version\":%llu,\"reason\":", (unsigned long long)r->held_version);
		buf_json_string(out, r->held_reason ? r->held_reason : "");
		buf_printf(out, ",\"time\":%lld}", (long long)r->held_at);
	} else {
		buf_puts(out, ",\"held\":null");
	}
	/* a pending key (--approve-relay-keys) is not live: key_pending names it */
	buf_puts(out, ",\"key_id\":");
	if (r->key.key[0] && !r->key.pending)
		buf_json_string(out, r->key.kid);
	else
		buf_puts(out, "null");
	buf_puts(out, ",\"key_pending\":");
	if (r->key.key[0] && r->key.pending)
		buf_json_string(out, r->key.kid);
	else
		buf_puts(out, "null");
	buf_puts(out, ",\"key_revoked\":[");
	const char *revoked = nodekeys_revoked(&r->key);
	for (const char *v = revoked; *v;) {
		size_t k = strcspn(v, ",");
		char one[KEY_ID_LEN + 1];
		snprintf(one, sizeof(one), "%.*s", (int)(k < KEY_ID_LEN ? k : KEY_ID_LEN), v);
		if (v != revoked)
			buf_putc(out, ',');
		buf_json_string(out, one);
		v += k + (v[k] == ',');
	}
	buf_putc(out, ']');
	/* where the live key came from: "" direct, else the relays */
	buf_puts(out, ",\"key_via\":");
	if (r->key.key[0])
		buf_json_string(out, nodekeys_via(&r->key));
	else
		buf_puts(out, "null");
	buf_printf(out, ",\"verify_failures\":%llu", (unsigned long long)r->verify_failures);
	if (r->vf_error) {
		buf_printf(out, ",\"last_verify_failure\":{\"version\":%llu,\"error\":", (unsigned long long)r->vf_version);
		buf_json_string(out, r->vf_error);
		buf_printf(out, ",\"time\":%lld}", (long long)r->vf_at);
	} else {
		buf_puts(out, ",\"last_verify_failure\":null");
	}
	buf_printf(out, ",\"first_seen\":%lld,\"last_seen\":%lld,\"acked_at\":%lld,\"acks\":%llu,"
		   "\"nacks\":%llu,\"stale_acks\":%llu}",
		   (long long)r->first_seen, (long long)r->last_seen, (long long)r->acked_at,
		   (unsigned long long)r->acks, (unsigned long long)r->nacks, (unsigned long long)r->stale);
}

static int cmp_rec(const void *a, const void *b)
{
	return strcmp((*(struct node_rec *const *)a)->id, (*(struct node_rec *const *)b)->id);
}

void nodes_to_json(struct nodes *n, uint64_t plane_version, struct buf *out)
{
	int64_t mono = now_ms();
	pthread_mutex_lock(&n->lock);
	struct node_rec **sorted = xmalloc((n->len ? n->len : 1) * sizeof(*sorted));
	if (n->len) {
		/* n->all is NULL until the first node: memcpy(NULL, 0) is UB */
		memcpy(sorted, n->all, n->len * sizeof(*sorted));
		qsort(sorted, n->len, sizeof(*sorted), cmp_rec);
	}
	buf_putc(out, '[');
	bool first = true;
	for (size_t i = 0; i < n->len; i++) {
		if (n->own_only && sorted[i]->via)
			continue;   /* a relay lists the nodes it serves itself */
		if (!first)
			buf_putc(out, ',');
		first = false;
		rec_json(n, sorted[i], plane_version, mono, out);
	}
	buf_putc(out, ']');
	free(sorted);
	pthread_mutex_unlock(&n->lock);
}

int nodes_one_to_json(struct nodes *n, const char *id, uint64_t plane_version, struct buf *out)
{
	pthread_mutex_lock(&n->lock);
	struct node_rec *r = lookup(n, id);
	if (r)
		rec_json(n, r, plane_version, now_ms(), out);
	pthread_mutex_unlock(&n->lock);
	return r ? 0 : -1;
}

void nodes_stats(struct nodes *n, struct nodes_stats *st)
{
	int64_t mono = now_ms();
	pthread_mutex_lock(&n->lock);
	st->nodes = n->len;
	st->connected = 0;
	for (size_t i = 0; i < n->len; i++)
		st->connected += connected(n, n->all[i], mono);
	st->lagging = 0;
	for (size_t i = 0; i < n->len; i++)
		st->lagging += lagging(n, n->all[i], mono);
	st->acks = n->acks;
	st->nacks = n->nacks;
	st->stale = n->stale;
	st->verify_failures = n->verify_failures;
	pthread_mutex_unlock(&n->lock);
}

void nodes_metrics(struct nodes *n, uint64_t plane_version, struct buf *out)
{
	int64_t mono = now_ms();
	pthread_mutex_lock(&n->lock);
	buf_puts(out, "# HELP tether_node_lag Versions between the node's target and its acked version.\n"
		      "# TYPE tether_node_lag gauge\n");
	for (size_t i = 0; i < n->len; i++) {
		const struct node_rec *r = n->all[i];
		uint64_t t = target_of(n, r, plane_version);
		buf_printf(out, "tether_node_lag{node=\"%s\"} %llu\n", r->id,
			   (unsigned long long)(t > r->acked_version ? t - r->acked_version : 0));
	}
	buf_puts(out, "# HELP tether_node_target_version The version each node should run.\n"
		      "# TYPE tether_node_target_version gauge\n");
	for (size_t i = 0; i < n->len; i++)
		buf_printf(out, "tether_node_target_version{node=\"%s\"} %llu\n", n->all[i]->id,
			   (unsigned long long)target_of(n, n->all[i], plane_version));
	buf_puts(out, "# HELP tether_node_lagging 1 when the node has trailed its target longer than --lag-alert.\n"
		      "# TYPE tether_node_lagging gauge\n");
	for (size_t i = 0; i < n->len; i++)
		buf_printf(out, "tether_node_lagging{node=\"%s\"} %d\n", n->all[i]->id, lagging(n, n->all[i], mono) ? 1 : 0);
	buf_puts(out, "# HELP tether_node_stale_acks_total ACKs and NACKs each node sent with a nonce that was not the latest.\n"
		      "# TYPE tether_node_stale_acks_total counter\n");
	for (size_t i = 0; i < n->len; i++)
		buf_printf(out, "tether_node_stale_acks_total{node=\"%s\"} %llu\n", n->all[i]->id,
			   (unsigned long long)n->all[i]->stale);
	buf_puts(out, "# HELP tether_node_acked_version The version each node last acked.\n"
		      "# TYPE tether_node_acked_version gauge\n");
	for (size_t i = 0; i < n->len; i++)
		buf_printf(out, "tether_node_acked_version{node=\"%s\"} %llu\n", n->all[i]->id,
			   (unsigned long long)n->all[i]->acked_version);
	buf_puts(out, "# HELP tether_node_verify_failures_total Pushes each node refused because they failed its "
		      "verification (signature, rollback, digest), since the plane started.\n"
		      "# TYPE tether_node_verify_failures_total counter\n");
	for (size_t i = 0; i < n->len; i++)
		buf_printf(out, "tether_node_verify_failures_total{node=\"%s\"} %llu\n", n->all[i]->id,
			   (unsigned long long)n->all[i]->verify_failures);
	buf_puts(out, "# HELP tether_node_traffic_requests Requests the node's live generation served, as it last "
		      "reported (traffic-aware gates).\n"
		      "# TYPE tether_node_traffic_requests gauge\n");
	for (size_t i = 0; i < n->len; i++)
		if (n->all[i]->traffic)
			buf_printf(out, "tether_node_traffic_requests{node=\"%s\"} %llu\n", n->all[i]->id,
				   (unsigned long long)n->all[i]->t_requests);
	buf_puts(out, "# HELP tether_node_traffic_errors 5xx answers of the node's live generation, as it last reported.\n"
		      "# TYPE tether_node_traffic_errors gauge\n");
	for (size_t i = 0; i < n->len; i++)
		if (n->all[i]->traffic)
			buf_printf(out, "tether_node_traffic_errors{node=\"%s\"} %llu\n", n->all[i]->id,
				   (unsigned long long)n->all[i]->t_errors);
	buf_puts(out, "# HELP tether_node_traffic_latency_p99_ms The p99 latency of the node's live generation over "
		      "every route, as it last reported.\n"
		      "# TYPE tether_node_traffic_latency_p99_ms gauge\n");
	for (size_t i = 0; i < n->len; i++)
		if (n->all[i]->traffic)
			buf_printf(out, "tether_node_traffic_latency_p99_ms{node=\"%s\"} %.3f\n", n->all[i]->id,
				   n->all[i]->t_p99);
	buf_puts(out, "# HELP tether_held_total Held NACKs each node sent (no wrap for a sealed secret it would "
		      "receive: it waits for a writer to seal to its key; not NACKs).\n"
		      "# TYPE tether_held_total counter\n");
	for (size_t i = 0; i < n->len; i++)
		buf_printf(out, "tether_held_total{node=\"%s\"} %llu\n", n->all[i]->id,
			   (unsigned long long)n->all[i]->helds);
	buf_puts(out, "# HELP tether_node_nacks_total NACKs each node sent.\n"
		      "# TYPE tether_node_nacks_total counter\n");
	for (size_t i = 0; i < n->len; i++)
		buf_printf(out, "tether_node_nacks_total{node=\"%s\"} %llu\n", n->all[i]->id,
			   (unsigned long long)n->all[i]->nacks);
	pthread_mutex_unlock(&n->lock);
}

/* What nodes_flush takes of a dirty record under the lock: the fields the
 * backend writes, never the whole record (a key's state is copied only
 * when the node has one; every pointer is a copy of its own). */
struct rec_copy {
	char *id, *labels, *nack_error, *via, *vf_error, *sub, *traffic, *key_reg, *held_reason, *counts_reason;
	char transport[8], sent_nonce[NONCE_MAX], nack_nonce[NONCE_MAX];
	struct nodekey_state *key;   /* NULL: nothing of a key on the node */
};

/* Under lock: whether r holds anything of a key (nodekey_state zeroed
 * otherwise, as a new record's is). */
static bool has_key_state(const struct nodekey_state *k)
{
	return k->key[0] || k->kid[0] || k->key_at || nodekeys_via(k)[0] || nodekeys_revoked(k)[0] || k->pending;
}

int nodes_flush(struct nodes *n, char *err, size_t errlen)
{
	pthread_mutex_lock(&n->flush_lock);
	pthread_mutex_lock(&n->lock);
	size_t cnt = n->ndirty;
	if (!cnt) {
		pthread_mutex_unlock(&n->lock);
		/* a relay says up the version it holds also when no node
		 * changed (it sends nothing when that did not move either) */
		int rc = n->p->ops->upstream ? n->p->ops->nodes_save(n->p, NULL, 0, err, errlen) : 0;
		pthread_mutex_unlock(&n->flush_lock);
		return rc;
	}
	struct rec_copy *copies = xcalloc(cnt, sizeof(*copies));
	struct persist_node *recs = xcalloc(cnt, sizeof(*recs));
	bool *again = xcalloc(cnt, sizeof(*again));
	bool *key_sent = xcalloc(cnt, sizeof(*key_sent));
	const char *self = self_replica(n);
	for (size_t i = 0; i < cnt; i++) {
		struct node_rec *r = n->dirty[i];
		struct rec_copy *c = &copies[i];
		c->id = xstrdup(r->id);
		c->labels = xstrdup(r->labels);
		c->nack_error = r->nack_error ? xstrdup(r->nack_error) : NULL;
		c->via = r->via ? xstrdup(r->via) : NULL;
		c->vf_error = r->vf_error ? xstrdup(r->vf_error) : NULL;
		c->sub = r->sub ? xstrdup(r->sub) : NULL;
		c->traffic = r->traffic_out && r->traffic ? xstrdup(r->traffic) : NULL;
		c->key_reg = r->key_reg;   /* goes up once */
		r->key_reg = NULL;
		c->held_reason = r->held_reason ? xstrdup(r->held_reason) : NULL;
		c->counts_reason = r->counts_reason ? xstrdup(r->counts_reason) : NULL;
		memcpy(c->transport, r->transport, sizeof(c->transport));
		memcpy(c->sent_nonce, r->sent_nonce, sizeof(c->sent_nonce));
		memcpy(c->nack_nonce, r->nack_nonce, sizeof(c->nack_nonce));
		if (has_key_state(&r->key)) {
			c->key = xcalloc(1, sizeof(*c->key));
			nodekeys_state_copy(c->key, &r->key);
		}
		const struct nodekey_state *k = c->key;
		recs[i] = (struct persist_node){
			.id = c->id, .labels = c->labels, .transport = c->transport,
			.first_seen = r->first_seen, .last_seen = r->last_seen, .sent_version = r->sent_version,
			.sent_nonce = c->sent_nonce, .sent_at = r->sent_at, .acked_version = r->acked_version,
			.acked_at = r->acked_at, .healthy = r->healthy, .has_nack = r->has_nack,
			.nack_version = r->nack_version, .nack_nonce = c->nack_nonce, .nack_error = c->nack_error,
			.nack_at = r->nack_at, .acks = r->acks, .nacks = r->nacks, .stale = r->stale,
			.replica = self, .streaming = r->streams > 0 || (c->via && r->via_streaming),
			.via = c->via, .verify_failures = r->verify_failures, .vf_version = r->vf_version,
			.vf_error = c->vf_error, .vf_at = r->vf_at, .sub = c->sub,
			.traffic = c->traffic, .acks_only = !r->dirty_more, .again = &again[i],
			.key = k ? k->key : "", .key_id = k ? k->kid : "", .key_at = k ? k->key_at : 0,
			.revoked = k ? nodekeys_revoked(k) : "", .key_via = k ? nodekeys_via(k) : "", .key_pending = k && k->pending,
			.key_reg = c->key_reg, .key_sent = &key_sent[i], .held_version = r->held_version,
			.held_reason = c->held_reason, .held_at = r->held_at,
			.counts = r->counts < 0 ? 0 : r->counts ? 1 : -1,
			.counts_reason = c->counts_reason ? c->counts_reason : "",
		};
		r->traffic_out = false;
		r->dirty = r->dirty_more = false;
	}
	n->ndirty = 0;
	pthread_mutex_unlock(&n->lock);

	int rc = n->p->ops->nodes_save(n->p, recs, cnt, err, errlen);
	free(recs);
	bool any = rc < 0;
	for (size_t i = 0; i < cnt && !any; i++)
		any = again[i] || (copies[i].key_reg && !key_sent[i] && n->p->ops->upstream);
	if (any) {
		/* keep them dirty so the next flush tries again (all of them
		 * after a failure; else those the upstream refused) */
		pthread_mutex_lock(&n->lock);
		for (size_t i = 0; i < cnt; i++) {
			bool reg_back = copies[i].key_reg && !key_sent[i];
			struct node_rec *r = rc < 0 || again[i] || reg_back ? lookup(n, copies[i].id) : NULL;
			if (r) {
				mark_dirty(n, r);
				r->traffic_out |= copies[i].traffic != NULL;
				/* a registration the upstream answered (took
				 * or refused) is not sent again; one that did
				 * not get there is, unless a newer one came */
				if ((rc < 0 || reg_back) && !r->key_reg) {
					r->key_reg = copies[i].key_reg;
					copies[i].key_reg = NULL;
				}
			}
		}
		pthread_mutex_unlock(&n->lock);
	}
	free(again);
	free(key_sent);
	for (size_t i = 0; i < cnt; i++) {
		free(copies[i].id);
		if (copies[i].key)
			nodekeys_state_release(copies[i].key);
		free(copies[i].labels);
		free(copies[i].nack_error);
		free(copies[i].via);
		free(copies[i].vf_error);
		free(copies[i].sub);
		free(copies[i].traffic);
		free(copies[i].key_reg);
		free(copies[i].held_reason);
		free(copies[i].counts_reason);
		free(copies[i].key);
	}
	free(copies);
	pthread_mutex_unlock(&n->flush_lock);
	return rc;
}

/* ---- keys for sealed secrets ------------------------------------------------- */

/* Under lock: whether kid is revoked on any node. */
static bool revoked_anywhere(struct nodes *n, const char *kid)
{
	if (n->revoked_built != n->revoked_gen || !n->revoked_ready) {
		for (size_t i = 0; n->revoked_all.slots && i < n->revoked_all.cap; i++)
			free((char *)n->revoked_all.slots[i].key);
		strmap_release(&n->revoked_all);
		strmap_init(&n->revoked_all);
		for (size_t i = 0; i < n->len; i++) {
			for (const char *v = nodekeys_revoked(&n->all[i]->key); *v;) {
				size_t k = strcspn(v, ",");
				char *one = xstrndup(v, k);
				intptr_t x;
				if (strmap_get(&n->revoked_all, one, &x))
					free(one);
				else
					strmap_put(&n->revoked_all, one, 1);
				v += k + (v[k] == ',');
			}
		}
		n->revoked_built = n->revoked_gen;
		n->revoked_ready = true;
	}
	intptr_t x;
	return strmap_get(&n->revoked_all, kid, &x);
}

/* Rule 1: text parses, its signatures check, and it is id's. */
static int reg_parse(const char *id, const char *text, size_t len, struct nodekey_reg *reg, char *err, size_t errlen)
{
	char why[300];
	if (nodekey_reg_parse(text, len, reg, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "node %s: key registration: %s", id, why);
		return -1;
	}
	if (strcmp(reg->node, id) != 0) {
		snprintf(err, errlen, "node %s: key registration: node: names another node; a node registers its own "
			 "key (POST /v1/nodes/%s/key)", id, id);
		return -1;
	}
	return 0;
}

/* Under lock: id's record for a registration. Through a relay (a 'k'
 * line): only a node the relay holds -- its record behind the relay, put
 * there by the relay's 'c' line (which has the stream checks), and no
 * stream open to it here or at another replica; a relay's line never
 * makes a record. Directly: one that registers before its first stream
 * or poll gets a record now (its subscription unknown: no secret reaches
 * it until it is). NULL with *http and err: the registry is full, or the
 * node is not the relay's. */
static struct node_rec *key_rec(struct nodes *n, const char *id, const char *relay, unsigned *http, char *err,
				size_t errlen)
{
	struct node_rec *r = lookup(n, id);
	if (relay && (!r || !behind(r, relay) || r->streams > 0 || r->holder)) {
		char w[260];
		if (r && r->streams > 0)
			snprintf(w, sizeof(w), "streaming from this plane");
		else if (r && r->holder)
			snprintf(w, sizeof(w), "streaming from replica %s", r->holder);
		else
			where(r, w, sizeof(w));
		*http = 403;
		snprintf(err, errlen, "node '%s' is %s, not behind relay %s: its 'k' line is not taken (a 'c' line of "
			 "the node first)", id, w, relay);
		return NULL;
	}
	if (r)
		return r;
	if (n->len >= n->max) {
		*http = 503;
		snprintf(err, errlen, "node '%s': the registry is full (--max-nodes %zu): its key is not taken", id, n->max);
		return NULL;
	}
	r = add(n, id);
	r->first_seen = r->last_seen = wall_seconds();
	log_info("nodes: new node '%s' (its key registration came first)", id);
	return r;
}

int nodes_key_register(struct nodes *n, const char *id, const char *text, size_t len, const char *relay,
		       struct nodes_key_answer *ans, char *err, size_t errlen)
{
	struct nodekey_reg reg;
	memset(ans, 0, sizeof(*ans));
	ans->http = 400;
	if (reg_parse(id, text, len, &reg, err, errlen) < 0)
		return -1;
	snprintf(ans->kid, sizeof(ans->kid), "%s", reg.kid);
	pthread_mutex_lock(&n->lock);
	struct node_rec *r = key_rec(n, id, relay, &ans->http, err, errlen);
	if (!r) {
		pthread_mutex_unlock(&n->lock);
		return -1;
	}
	/* rule 2 for every node: a key revoked on one is taken on none (a
	 * copied node.key, or a stolen one registered elsewhere) */
	if (revoked_anywhere(n, reg.kid) && !nodekeys_listed(nodekeys_revoked(&r->key), reg.kid)) {
		ans->http = 403;
		snprintf(err, errlen, "node %s: key %s was revoked (on another node: was node.key copied between "
			 "hosts?); make a new one: tetherd --rotate-key", id, reg.kid);
		pthread_mutex_unlock(&n->lock);
		return -1;
	}
	/* a key a relay sent that waits for approval is no key of the node's
	 * own asking: the node's own registration of it approves it, of
	 * another key replaces it (rule 3, not rule 5) */
	bool was_pending = r->key.key[0] && r->key.pending;
	bool own_pending = was_pending && !relay && strcmp(r->key.kid, reg.kid) == 0;
	struct nodekey_state before;   /* a deep copy: the judge may free r->key's strings */
	nodekeys_state_copy(&before, &r->key);
	if (was_pending && !relay && !own_pending) {
		r->key.key[0] = r->key.kid[0] = '\0';
		nodekeys_set_via(&r->key, NULL);
		r->key.pending = false;
	}
	/* a key through relays: they are the node's path (r->via) */
	enum nodekey_verdict v = nodekeys_judge(&r->key, id, &reg, wall_seconds(), relay ? r->via : NULL,
						&ans->changed, err, errlen);
	ans->http = nodekeys_http(v);
	ans->status = nodekeys_status(v);
	if (v == NK_STALE)
		ans->stale_mark = r->key.key_at;
	if (ans->http != 200) {
		nodekeys_state_release(&r->key);
		r->key = before;   /* nothing of a refusal (before's strings go to r) */
		ans->changed = false;
	} else if (v == NK_REGISTERED && relay && n->approve_relay_keys) {
		r->key.pending = true;   /* a first key through a relay: an admin approves it */
		ans->status = "pending";
	} else if (v == NK_REGISTERED && was_pending) {
		ans->status = "replaced";   /* the node's own key, not the relay's */
	} else if (own_pending && v == NK_UNCHANGED) {
		r->key.pending = false;
		ans->changed = true;
		ans->status = "approved";
		v = NK_REGISTERED;   /* an event */
	}
	if (ans->http == 200)
		nodekeys_state_release(&before);
	if (ans->changed) {
		mark_dirty(n, r);
		if (v != NK_UNCHANGED)
			n->keys_gen++;   /* (a newer time alone moves no target) */
	}
	if (v == NK_UNCHANGED)
		ans->changed = false;   /* a newer time only: no event */
	pthread_mutex_unlock(&n->lock);
	if (ans->http != 200)
		return -1;
	if (v != NK_UNCHANGED)
		log_info("nodes: node %s: key %s %s%s%s", id, reg.kid, ans->status, relay ? " through relay " : "",
			 relay ? relay : "");
	return 0;
}

int nodes_key_forward(struct nodes *n, const char *id, const char *text, size_t len, const char *relay,
		      unsigned *http, char *err, size_t errlen)
{
	struct nodekey_reg reg;
	*http = 400;
	if (reg_parse(id, text, len, &reg, err, errlen) < 0)
		return -1;
	if (reg.at > wall_seconds() + NODEKEYS_SKEW_MAX) {
		snprintf(err, errlen, "node %s: key registration: at: more than %d s ahead of the plane's clock: check "
			 "the node's clock", id, NODEKEYS_SKEW_MAX);
		return -1;
	}
	pthread_mutex_lock(&n->lock);
	struct node_rec *r = key_rec(n, id, relay, http, err, errlen);
	if (r) {
		free(r->key_reg);
		r->key_reg = xstrndup(text, len);
		mark_dirty(n, r);
	}
	pthread_mutex_unlock(&n->lock);
	if (!r)
		return -1;
	*http = 202;
	return 0;
}

unsigned nodes_key_approve(struct nodes *n, const char *id, const char *kid, char *err, size_t errlen)
{
	pthread_mutex_lock(&n->lock);
	struct node_rec *r = lookup(n, id);
	unsigned http = 200;
	if (!r) {
		http = 404;
		snprintf(err, errlen, "no node '%s'", id);
	} else if (!r->key.key[0] || !r->key.pending) {
		http = 409;
		snprintf(err, errlen, "node %s has no key waiting for approval%s%s", id,
			 r->key.key[0] ? "; its key is live: " : "", r->key.key[0] ? r->key.kid : "");
	} else if (strcmp(r->key.kid, kid) != 0) {
		http = 409;
		snprintf(err, errlen, "node %s: the key waiting for approval is %s, not %s: check the key id the node "
			 "logged (tetherd says \"node key KID\") and approve that one, or revoke it: tetherctl secrets "
			 "revoke %s", id, r->key.kid, kid, id);
	} else {
		r->key.pending = false;
		mark_dirty(n, r);
		n->keys_gen++;
	}
	pthread_mutex_unlock(&n->lock);
	return http;
}

int nodes_key_revoke(struct nodes *n, const char *id, char kid[KEY_ID_LEN + 1])
{
	pthread_mutex_lock(&n->lock);
	struct node_rec *r = lookup(n, id);
	int rc = -1;
	if (r) {
		snprintf(kid, KEY_ID_LEN + 1, "%s", r->key.kid);
		rc = nodekeys_revoke(&r->key) ? 0 : 1;
		if (rc == 0) {
			mark_dirty(n, r);
			n->keys_gen++;
			n->revoked_gen++;
		}
	}
	pthread_mutex_unlock(&n->lock);
	return rc;
}

size_t nodes_key_revoke_everywhere(struct nodes *n, const char *kid, char ***ids)
{
	*ids = NULL;
	size_t cnt = 0;
	pthread_mutex_lock(&n->lock);
	for (size_t i = 0; i < n->len; i++) {
		struct node_rec *r = n->all[i];
		if (!r->key.key[0] || strcmp(r->key.kid, kid) != 0 || !nodekeys_revoke(&r->key))
			continue;
		*ids = xrealloc(*ids, (cnt + 1) * sizeof(**ids));
		(*ids)[cnt++] = xstrdup(r->id);
		mark_dirty(n, r);
	}
	if (cnt) {
		n->keys_gen++;
		n->revoked_gen++;
	}
	pthread_mutex_unlock(&n->lock);
	return cnt;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void nodes_keys_get(struct nodes *n, struct nodes_keys *out)
{
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&n->lock);
	out->gen = n->keys_gen;
	size_t cap = 0, pcap = 0, rcap = 0;
	for (size_t i = 0; i < n->len; i++) {
		const struct node_rec *r = n->all[i];
		if (r->key.key[0] && r->key.pending) {
			/* waits for an admin: listed apart, no sealing target */
			if (out->npending == pcap) {
				pcap = pcap ? pcap * 2 : 4;
				out->pending = xrealloc(out->pending, pcap * sizeof(*out->pending));
			}
			struct nodes_key *k = &out->pending[out->npending++];
			k->node = xstrdup(r->id);
			k->key = xstrdup(r->key.key);
			k->sub = r->sub ? xstrdup(r->sub) : NULL;
			k->via = xstrdup(nodekeys_via(&r->key));
			snprintf(k->kid, sizeof(k->kid), "%s", r->key.kid);
		} else if (r->key.key[0]) {
			if (out->nlive == cap) {
				cap = cap ? cap * 2 : 16;
				out->live = xrealloc(out->live, cap * sizeof(*out->live));
			}
			struct nodes_key *k = &out->live[out->nlive++];
			k->node = xstrdup(r->id);
			k->key = xstrdup(r->key.key);
			k->sub = r->sub ? xstrdup(r->sub) : NULL;
			k->via = xstrdup(nodekeys_via(&r->key));
			snprintf(k->kid, sizeof(k->kid), "%s", r->key.kid);
		}
		for (const char *v = nodekeys_revoked(&r->key); *v;) {
			size_t k = strcspn(v, ",");
			if (out->nrevoked == rcap) {
				rcap = rcap ? rcap * 2 : 16;
				out->revoked = xrealloc(out->revoked, rcap * sizeof(*out->revoked));
			}
			out->revoked[out->nrevoked++] = xstrndup(v, k);
			v += k + (v[k] == ',');
		}
	}
	pthread_mutex_unlock(&n->lock);
	if (out->nrevoked)
		qsort(out->revoked, out->nrevoked, sizeof(*out->revoked), cmp_str);
}

void nodes_keys_index(struct nodes_keys *k)
{
	k->subs = xcalloc(k->nlive ? k->nlive : 1, sizeof(*k->subs));
	size_t kept = 0;
	for (size_t i = 0; i < k->nlive; i++) {
		struct nodes_key *key = &k->live[i];
		char e[128];
		if (key->sub && sub_parse(key->sub, &k->subs[kept], e, sizeof(e)) == 0) {
			if (kept != i)
				k->live[kept] = *key;
			kept++;
			continue;
		}
		free(key->node);
		free(key->key);
		free(key->sub);
		free(key->via);
	}
	k->nlive = kept;
}

const struct nodes_keys *nodes_keys_hold(struct nodes *n)
{
	pthread_mutex_lock(&n->lock);
	struct nodes_keys *s = n->keys_snap;
	if (s && s->gen == n->keys_gen) {
		s->refs++;
		pthread_mutex_unlock(&n->lock);
		return s;
	}
	pthread_mutex_unlock(&n->lock);
	/* the copy takes the lock once; the parsing is outside it */
	s = xcalloc(1, sizeof(*s));
	nodes_keys_get(n, s);
	nodes_keys_index(s);
	s->refs = 2;   /* the caller's and the cache's */
	struct nodes_keys *old = NULL;
	pthread_mutex_lock(&n->lock);
	old = n->keys_snap;
	n->keys_snap = s;
	if (old && --old->refs > 0)
		old = NULL;   /* still held: its last holder frees it */
	pthread_mutex_unlock(&n->lock);
	if (old) {
		nodes_keys_release(old);
		free(old);
	}
	return s;
}

void nodes_keys_drop(struct nodes *n, const struct nodes_keys *k)
{
	if (!k)
		return;
	struct nodes_keys *s = (struct nodes_keys *)k;
	pthread_mutex_lock(&n->lock);
	bool last = --s->refs == 0;
	pthread_mutex_unlock(&n->lock);
	if (last) {
		nodes_keys_release(s);
		free(s);
	}
}

bool nodes_keys_revoked(const struct nodes_keys *k, const char *kid)
{
	return k->nrevoked && bsearch(&kid, k->revoked, k->nrevoked, sizeof(*k->revoked), cmp_str) != NULL;
}

void nodes_keys_release(struct nodes_keys *k)
{
	for (size_t i = 0; i < k->nlive; i++) {
		free(k->live[i].node);
		free(k->live[i].key);
		free(k->live[i].sub);
		free(k->live[i].via);
	}
	free(k->live);
	for (size_t i = 0; i < k->npending; i++) {
		free(k->pending[i].node);
		free(k->pending[i].key);
		free(k->pending[i].sub);
		free(k->pending[i].via);
	}
	free(k->pending);
	for (size_t i = 0; k->subs && i < k->nlive; i++)
		sub_release(&k->subs[i]);
	free(k->subs);
	for (size_t i = 0; i < k->nrevoked; i++)
		free(k->revoked[i]);
	free(k->revoked);
	memset(k, 0, sizeof(*k));
}
