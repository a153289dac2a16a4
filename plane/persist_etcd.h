/* persist_etcd.h: the etcd backend's parts (persist_etcd.c wires them into
 * struct persist_ops); internal to the backend. Keys under the prefix:
 *   version            the global version (decimal)
 *   horizon            the tombstone horizon (decimal)
 *   res/NAME           "L VERSION\nBODY" (live) or "T VERSION DELETED_AT\n"
 *   hist/VERSION/NAME  an older state a rollout's baseline needs (same form)
 *   pin                "KEEP FLOOR" (history kept from FLOOR)
 *   rollout/ID         a rollout record (JSON), released (decimal)
 *   nodes/ID           a node record (JSON)
 *   tokens/ID          a token record (JSON: the hash, never the token) */
#ifndef TETHER_PERSIST_ETCD_H
#define TETHER_PERSIST_ETCD_H

#include "etcd_client.h"
#include "persist.h"

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
/* Appends a put of key=value to a txn's success list. */
void persist_etcd_txn_put(cJSON *ops, const char *key, const char *value, size_t len);

/* The records: rollouts, nodes and tokens (persist_etcd_records.c). */
int etcd_rollout_save(struct persist *p, const struct ro_run *run, uint64_t released, char *err, size_t errlen);
void etcd_rollout_ops(struct persist *p, cJSON *ops, const struct ro_run *run, uint64_t released);
int etcd_rollout_load(struct persist *p, size_t max, bool with_members, struct ro_run **runs, size_t *n, char *err,
		      size_t errlen);
int etcd_released(struct persist *p, uint64_t *v);
int etcd_set_released(struct persist *p, uint64_t v, char *err, size_t errlen);
int etcd_nodes_load(struct persist *p, persist_node_cb cb, void *ctx, char *err, size_t errlen);
int etcd_nodes_save(struct persist *p, const struct persist_node *recs, size_t n, char *err, size_t errlen);
/* A node or token record's JSON, decoded (strings borrowed from o);
 * -1 when it lacks its id. */
int etcd_node_from_json(const cJSON *o, struct persist_node *n);
int etcd_token_from_json(const cJSON *o, struct persist_token *t);
int etcd_tokens_load(struct persist *p, persist_token_cb cb, void *ctx, char *err, size_t errlen);
int etcd_token_add(struct persist *p, const struct persist_token *t, char *err, size_t errlen);
int etcd_token_revoke(struct persist *p, const char *id, int64_t when, char *err, size_t errlen);

#endif
