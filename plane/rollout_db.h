/* rollout_db.h: a staged rollout's record, and its rows in the store's
 * database: every rollout is kept (the history), the newest one is resumed
 * at start, and the released version (what every node outside a rollout
 * gets) lives in the meta table. */
#ifndef TETHER_ROLLOUT_DB_H
#define TETHER_ROLLOUT_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "db.h"

enum ro_state {
	RO_IN_PROGRESS = 1,
	RO_COMPLETED = 2,
	RO_ROLLED_BACK = 3,
	RO_ABORTED = 4,
};

struct ro_run {
	uint64_t id;
	enum ro_state state;
	size_t stage;              /* index into the stages */
	size_t reached;            /* members[0..reached) get to_version */
	uint64_t from, to;         /* baseline and new version */
	uint64_t revert;           /* the version that reverted it; 0 none */
	uint64_t parent;           /* the rollout whose revert this one carries on */
	size_t touched;            /* members sent to_version */
	char *reason;              /* why it stopped ("" while it runs) */
	char **members;            /* node ids in rollout order */
	size_t nmembers;
	size_t member_count;       /* loaded without members: how many */
	int64_t started_at, stage_at, finished_at;   /* wall clock, ms */
	uint64_t msgs;             /* pushes of to_version */
	uint64_t revert_msgs;      /* pushes of the revert to nodes that had it */
	uint64_t bump_msgs;        /* pushes of the revert to the others: version only */
};

const char *ro_state_name(enum ro_state s);
void ro_run_release(struct ro_run *r);

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
