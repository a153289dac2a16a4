/* persist/sqlite/rollout.h: the SQLite backend's rollout rows (rollout_rec.h is the
 * record): every rollout is kept (the history), the newest one is resumed
 * at start, and the released version (what every node outside a rollout
 * gets) lives in the meta table. */
#ifndef TETHER_ROLLOUT_DB_H
#define TETHER_ROLLOUT_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "persist/rollout_rec.h"
#include "persist/sqlite/db.h"


/* Writes the run (insert or replace) and the released version, durably,
 * in one transaction. */
int rollout_db_save(struct db *db, const struct ro_run *run, uint64_t released, char *err, size_t errlen);
/* The same inside a transaction the caller holds (with db->lock). */
int rollout_db_write(struct db *db, const struct ro_run *run, uint64_t released, char *err, size_t errlen);
/* Loads up to max runs, newest first, into runs (caller frees each with
 * ro_run_release and the array with free); members only for the newest
 * when with_members. */
int rollout_db_load(struct db *db, size_t max, bool with_members, struct ro_run **runs, size_t *n, char *err,
		    size_t errlen);
/* The released version: 1 with *v, 0 when never recorded, -1 on error. */
int rollout_db_released(struct db *db, uint64_t *v);
int rollout_db_set_released(struct db *db, uint64_t v, char *err, size_t errlen);

#endif
