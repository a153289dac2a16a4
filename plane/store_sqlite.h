/* store_sqlite.h: persistence of the store in the plane's SQLite database.
 * Each commit is one transaction with PRAGMA synchronous=FULL: durable
 * before the caller answers. */
#ifndef TETHER_STORE_SQLITE_H
#define TETHER_STORE_SQLITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "db.h"
#include "store.h"

typedef int (*store_load_cb)(void *ctx, const char *name, const char *body, size_t body_len,
			     uint64_t version, int64_t deleted_at);

/* Calls cb for every resource (body != NULL) and tombstone (body NULL) in
 * ascending version order; reads the global version and the tombstone
 * horizon. Returns 0, or -1 with err. */
int store_sqlite_load(struct db *db, store_load_cb cb, void *ctx, uint64_t *version,
		      uint64_t *horizon, char *err, size_t errlen);

/* What one commit writes. */
struct store_txn {
	uint64_t version;                  /* the new global version */
	uint64_t horizon;                  /* the tombstone horizon after this commit */
	int64_t now;                       /* deletion time for new tombstones */
	const struct store_change *changes;
	size_t nchanges;
	const char *const *pruned;         /* tombstones dropped by this commit */
	size_t npruned;
	const struct store_entry *const *kept;  /* states moving to the history */
	size_t nkept;
	store_hook hook;                   /* more writes in the transaction */
	void *hook_ctx;
};

int store_sqlite_commit(struct db *db, const struct store_txn *txn, char *err, size_t errlen);

/* Loads the history rows into s and the pin from meta. */
int store_sqlite_load_history(struct db *db, struct store *s, bool *keep, uint64_t *pin, char *err, size_t errlen);
/* Drops history rows no version >= floor needs (all of them when !keep),
 * and records the pin. */
int store_sqlite_trim_history(struct db *db, bool keep, uint64_t floor, char *err, size_t errlen);

#endif
