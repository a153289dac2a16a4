/* persist/rollout_rec.h: a staged rollout's record, as every persistence backend
 * keeps it (persist.h): its state, stage, members and counters. */
#ifndef TETHER_ROLLOUT_REC_H
#define TETHER_ROLLOUT_REC_H

#include <stddef.h>
#include <stdint.h>

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

#endif
