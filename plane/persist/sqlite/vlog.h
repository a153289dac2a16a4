/* persist/sqlite/vlog.h: the version log in SQLite (tables vlog, vlog_changes):
 * written inside a store commit's transaction, read for the history API
 * (persist.h's log_* ops). */
#ifndef TETHER_VLOG_SQLITE_H
#define TETHER_VLOG_SQLITE_H

#include "persist/persist.h"
#include "persist/sqlite/db.h"

/* Inside the commit's transaction, db lock held: the version's record,
 * its changes, the rollout's revert marks, and the trim to retention. */
int vlog_sqlite_write(struct db *db, const struct persist_commit *c, char *err, size_t errlen);

/* The age trim without a commit: the versions recorded before now -
 * max_age go, in a transaction of their own (none when nothing aged);
 * takes the db lock. */
int vlog_sqlite_trim_aged(struct db *db, int64_t now, int64_t max_age, char *err, size_t errlen);

int vlog_sqlite_floor(struct db *db, uint64_t *floor, char *err, size_t errlen);
int vlog_sqlite_list(struct db *db, const char *name, size_t limit, persist_version_cb cb, void *ctx, char *err,
		     size_t errlen);
int vlog_sqlite_get(struct db *db, uint64_t version, persist_version_cb vcb, persist_vchange_cb ccb, void *ctx,
		    char *err, size_t errlen);
int vlog_sqlite_after(struct db *db, uint64_t v, uint64_t upto, const char *name, persist_vchange_cb cb,
		      void *ctx, char *err, size_t errlen);

#endif
