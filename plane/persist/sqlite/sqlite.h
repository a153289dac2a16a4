/* persist/sqlite/sqlite.h: the embedded backend's parts (persist/sqlite/sqlite.c wires
 * them into struct persist_ops): one SQLite database in --data DIR, its
 * connection shared by the store (persist/sqlite/store.c), the rollout records
 * (persist/sqlite/rollout.c), the node records (persist/sqlite/nodes.c) and the token records
 * (persist/sqlite/tokens.c). Internal to the backend. */
#ifndef TETHER_PERSIST_SQLITE_H
#define TETHER_PERSIST_SQLITE_H

#include "persist/persist.h"
#include "persist/sqlite/db.h"

struct db *persist_sqlite_db(struct persist *p);

int nodes_sqlite_load(struct persist *p, persist_node_cb cb, void *ctx, char *err, size_t errlen);
int nodes_sqlite_save(struct persist *p, const struct persist_node *recs, size_t n, char *err, size_t errlen);

int tokens_sqlite_schema(struct db *db, char *err, size_t errlen);
int tokens_sqlite_load(struct persist *p, persist_token_cb cb, void *ctx, char *err, size_t errlen);
int tokens_sqlite_add(struct persist *p, const struct persist_token *t, char *err, size_t errlen);
int approvals_sqlite_load(struct persist *p, persist_approval_cb cb, void *ctx, char *err, size_t errlen);
int approvals_sqlite_add(struct persist *p, const struct persist_approval *a, char *err, size_t errlen);
int approvals_sqlite_trim(struct persist *p, uint64_t below, char *err, size_t errlen);
int tokens_sqlite_revoke(struct persist *p, const char *id, int64_t when, char *err, size_t errlen);
int tokens_sqlite_delete(struct persist *p, const char *id, char *err, size_t errlen);

/* the TLS session-ticket keys (persist/sqlite/ticket_keys.c) */
int ticket_keys_sqlite_schema(struct db *db, char *err, size_t errlen);
int ticket_keys_sqlite_load(struct persist *p, struct persist_ticket_keys *k, uint64_t *rev, char *err,
			    size_t errlen);
int ticket_keys_sqlite_swap(struct persist *p, const struct persist_ticket_keys *k, uint64_t *rev, char *err,
			    size_t errlen);

/* the freeze window (persist/sqlite/freeze.c) */
int freeze_sqlite_load(struct persist *p, char **json, char *err, size_t errlen);
int freeze_sqlite_save(struct persist *p, const char *json, char *err, size_t errlen);

#endif
