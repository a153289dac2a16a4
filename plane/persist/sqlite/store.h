/* persist/sqlite/store.h: the SQLite backend's resources, tombstones and history
 * (persist/sqlite/sqlite.c wires it into struct persist_ops).
 * Each commit is one transaction with PRAGMA synchronous=FULL: durable
 * before the caller answers. */
#ifndef TETHER_STORE_SQLITE_H
#define TETHER_STORE_SQLITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "persist/persist.h"
#include "persist/sqlite/db.h"

/* Calls cb for every resource (body != NULL) and tombstone (body NULL) in
 * ascending version order; reads the global version and the tombstone
 * horizon. Returns 0, or -1 with err. */
int store_sqlite_load(struct db *db, persist_resource_cb cb, void *ctx, uint64_t *version,
		      uint64_t *horizon, char *err, size_t errlen);

/* One commit in one transaction; c->hook runs inside it with tx. */
int store_sqlite_commit(struct db *db, const struct persist_commit *c, struct persist_txn *tx, char *err,
			size_t errlen);

/* Hands each history row to cb, and reads the pin from meta. */
int store_sqlite_load_history(struct db *db, persist_history_cb cb, void *ctx, bool *keep, uint64_t *pin, char *err,
			      size_t errlen);
/* Drops history rows no version >= floor needs (all of them when !keep),
 * and records the pin. */
int store_sqlite_trim_history(struct db *db, bool keep, uint64_t floor, char *err, size_t errlen);

#endif
