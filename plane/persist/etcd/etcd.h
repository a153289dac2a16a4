/* persist/etcd/etcd.h: the etcd backend's parts (persist/etcd/etcd.c wires them into
 * struct persist_ops); internal to the backend. Keys under the prefix:
 *   version            the global version (decimal)
 *   horizon            the tombstone horizon (decimal)
 *   res/NAME           "L VERSION\nBODY" (live) or "T VERSION DELETED_AT\n"
 *   hist/VERSION/NAME  an older state a rollout's baseline needs (same form)
 *   pin                "KEEP FLOOR" (history kept from FLOOR)
 *   txn/VERSION        "REPLICA/SEQ": which attempt committed VERSION (the
 *                      last 1,000), so a txn sent again is stored once
 *   rollout/ID         a rollout record (JSON), released (decimal)
 *   nodes/ID           a node record (JSON)
 *   tokens/ID          a token record (JSON: the hash, never the token)
 *   vlog/VERSION, vrev/TO, vlog_floor   the version log (persist/etcd/vlog.c)
 *   replicas/ID        a replica that is up (on its lease)
 *   controller         the rollout controller's replica id (on its lease)
 *   ticket_keys        the TLS session-ticket keys (persist/ticket_keys.h)
 *   freeze             the freeze window's record (JSON, freeze.h; absent: none) */
#ifndef TETHER_PERSIST_ETCD_H
#define TETHER_PERSIST_ETCD_H

#include "persist/etcd/client.h"
#include "persist/persist.h"

struct persist_etcd;
struct etcd *persist_etcd_client(struct persist *p);
const char *persist_etcd_prefix(struct persist *p);

/* One key under the prefix (new allocated). */
char *persist_etcd_key(struct persist *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Puts key=value (values of len bytes) as one request; 0, -1 or
 * ETCD_UNAVAILABLE (-2) with err. */
int persist_etcd_put(struct persist *p, const char *key, const char *value, size_t len, char *err, size_t errlen);
/* Reads one key: 1 found (*value new allocated, *len), 0 absent. */
int persist_etcd_get(struct persist *p, const char *key, char **value, size_t *len, char *err, size_t errlen);
/* Appends a put of key=value to a txn's success list; a delete of key (to
 * range_end_b64, or the one key when NULL). */
void persist_etcd_txn_put(cJSON *ops, const char *key, const char *value, size_t len);
void persist_etcd_txn_delete(cJSON *ops, const char *key, const char *range_end_b64);
/* Deletes the history keys no version >= floor needs: per name, every
 * state older than its newest one at or below floor (persist/etcd/hist.c). */
int etcd_history_trim(struct persist *p, uint64_t floor, char *err, size_t errlen);

/* The version log (persist/etcd/vlog.c): a commit's record, revert mark
 * and trim added to its txn; the floor created at load when absent; the
 * age trim without a commit; and the log_* ops. Keys vlog/VERSION,
 * vrev/TO, vlog_floor. */
struct etcd_vlog_cache;     /* what the log knows between commits (one a backend) */
struct etcd_vlog_cache *etcd_vlog_cache_new(void);
void etcd_vlog_cache_free(struct etcd_vlog_cache *vc);
struct etcd_vlog_cache *persist_etcd_vlog_cache(struct persist *p);
/* A commit's trim, computed before its txn is built (etcd_vlog_plan may
 * read etcd: 0, -1 or ETCD_UNAVAILABLE with err); etcd_vlog_ops adds the
 * record and the trim to the txn (when it moves the floor: a compare of
 * vlog_floor with plan->was, and a range of it appended to fail, which
 * etcd_vlog_floor_is reads back at index at); and etcd_vlog_landed once
 * the txn is answered (ok false: it did not land, or is not known to). */
struct etcd_vlog_plan {
	uint64_t was;       /* the floor it is computed on */
	uint64_t age;       /* versions <= age were recorded before now - max age (0: none) */
	int64_t oldest;     /* no record kept is older than this (INT64_MIN: unknown) */
	uint64_t floor;     /* set by etcd_vlog_ops: the floor the txn writes (0: none) */
};
int etcd_vlog_plan(struct persist *p, const struct persist_commit *c, struct etcd_vlog_plan *plan, char *err,
		   size_t errlen);
void etcd_vlog_ops(struct persist *p, cJSON *cmp, cJSON *ops, cJSON *fail, const struct persist_commit *c,
		   struct etcd_vlog_plan *plan);
bool etcd_vlog_floor_is(const cJSON *resp, size_t at, uint64_t was);
void etcd_vlog_landed(struct persist *p, const struct etcd_vlog_plan *plan, bool ok);
/* The follower saw vlog_floor's value (another replica moved it). */
void etcd_vlog_seen_floor(struct persist *p, const char *value, size_t len);
/* log_trim: the versions recorded before now - max_age go, in a txn
 * comparing the floor (another writer's move first: nothing, 0). */
int etcd_vlog_trim(struct persist *p, int64_t now, int64_t max_age, char *err, size_t errlen);
int etcd_vlog_start(struct persist *p, uint64_t version, char *err, size_t errlen);
int etcd_vlog_floor(struct persist *p, uint64_t *floor, char *err, size_t errlen);
int etcd_vlog_list(struct persist *p, const char *name, size_t limit, persist_version_cb cb, void *ctx, char *err,
		   size_t errlen);
int etcd_vlog_get(struct persist *p, uint64_t version, persist_version_cb vcb, persist_vchange_cb ccb, void *ctx,
		  char *err, size_t errlen);
int etcd_vlog_after(struct persist *p, uint64_t v, uint64_t upto, const char *name, persist_vchange_cb cb,
		    void *ctx, char *err, size_t errlen);

/* Adds to a txn's compares that this replica is the rollout controller
 * (when an election runs); PERSIST_FENCED with err when it is not. And:
 * a fenced txn failed on that compare (the replica steps down). */
int persist_etcd_fence(struct persist *p, cJSON *cmp, char *err, size_t errlen);
void persist_etcd_fenced_out(struct persist *p);

/* The records: rollouts, nodes and tokens (persist/etcd/records.c). */
int etcd_rollout_save(struct persist *p, const struct ro_run *run, uint64_t released, char *err, size_t errlen);
void etcd_rollout_ops(struct persist *p, cJSON *ops, const struct ro_run *run, uint64_t released);
int etcd_rollout_load(struct persist *p, size_t max, bool with_members, struct ro_run **runs, size_t *n, char *err,
		      size_t errlen);
int etcd_released(struct persist *p, uint64_t *v);
int etcd_set_released(struct persist *p, uint64_t v, char *err, size_t errlen);
int etcd_nodes_load(struct persist *p, persist_node_cb cb, void *ctx, char *err, size_t errlen);
int etcd_nodes_save(struct persist *p, const struct persist_node *recs, size_t n, char *err, size_t errlen);
int etcd_tokens_load(struct persist *p, persist_token_cb cb, void *ctx, char *err, size_t errlen);
int etcd_approvals_load(struct persist *p, persist_approval_cb cb, void *ctx, char *err, size_t errlen);
int etcd_approval_add(struct persist *p, const struct persist_approval *a, char *err, size_t errlen);
int etcd_approvals_trim(struct persist *p, uint64_t below, char *err, size_t errlen);
int etcd_token_add(struct persist *p, const struct persist_token *t, char *err, size_t errlen);
int etcd_token_revoke(struct persist *p, const char *id, int64_t when, char *err, size_t errlen);
int etcd_token_delete(struct persist *p, const char *id, char *err, size_t errlen);

/* The TLS session-ticket keys (persist/etcd/ticket_keys.c). */
int etcd_ticket_keys_load(struct persist *p, struct persist_ticket_keys *k, uint64_t *rev, char *err,
			  size_t errlen);
int etcd_ticket_keys_swap(struct persist *p, const struct persist_ticket_keys *k, uint64_t *rev, char *err,
			  size_t errlen);

/* The freeze window (persist/etcd/freeze.c). */
int etcd_freeze_load(struct persist *p, char **json, char *err, size_t errlen);
int etcd_freeze_save(struct persist *p, const char *json, char *err, size_t errlen);

/* This replica's lease (persist/etcd/lease.c): its key under replicas/, the
 * rollout controller's election, and the set of replicas up. */
struct etcd_lease;
struct etcd_lease *etcd_lease_start(struct etcd *e, const char *prefix, const char *id, double ttl_s, char *err,
				    size_t errlen);
/* Revokes the lease (the replica's keys go at once) and frees. */
void etcd_lease_stop(struct etcd_lease *l);
/* Runs for controller from now on; true while this replica is it. */
bool etcd_lease_lead(struct etcd_lease *l);
/* A fenced write failed: this replica is not the controller. */
void etcd_lease_deposed(struct etcd_lease *l);
/* Adds to a txn's compares: the controller key is still this replica's.
 * false: an election runs and this replica does not lead (nothing added). */
bool etcd_lease_fence(struct etcd_lease *l, cJSON *cmp);
const char *etcd_lease_id(const struct etcd_lease *l);
/* When etcd said this replica's lease expired (monotonic ms; 0 while it
 * holds one): its key is gone, the other replicas count its nodes gone. */
int64_t etcd_lease_lost(struct etcd_lease *l);
/* Whether replica id is up (its key exists); the watch reports changes. */
bool etcd_lease_up(struct etcd_lease *l, const char *id);
void etcd_lease_replica_event(struct etcd_lease *l, const char *id, bool up);
/* Reads the set of replicas up afresh (when the watch starts, and after a
 * compaction, which may have hidden a replica's end). */
int etcd_lease_refresh(struct etcd_lease *l, char *err, size_t errlen);
/* The controller as last seen, times this replica led, replicas up. */
void etcd_lease_status(struct etcd_lease *l, char *holder, size_t cap, uint64_t *terms, size_t *replicas);
/* The backend's lease (NULL before follow starts it). */
struct etcd_lease *persist_etcd_lease(struct persist *p);

#endif
