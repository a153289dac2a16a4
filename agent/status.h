/* status.h: STATE_DIR/status.json, rewritten atomically (temp file, fsync,
 * rename) after every change of the agent's state, for tetherctl status,
 * monitoring and people. */
#ifndef TETHER_STATUS_H
#define TETHER_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* deferred: an apply is held while the consumer's old workers drain
 * (agent/guard.c).
 * stale: with --trust, no valid signed statement vouches for what runs
 * any more (expired, or older than --max-staleness), or the plane dialled
 * now says it is stale (cut off from its source); it keeps serving. */
enum agent_state { ST_BOOTING, ST_OFFLINE, ST_SYNCING, ST_SYNCED, ST_DEGRADED, ST_STALE, ST_DEFERRED };

struct status {
	const char *node;
	uint64_t version;
	enum agent_state state;
	const char *last_error;      /* "" when none */
	int64_t last_sync;           /* wall seconds of the last apply or confirmed sync; 0 never */
	const char *plane;           /* the plane dialled now */
	const char *const *planes;   /* every plane --plane lists, in order */
	size_t nplanes;
	const char *transport;
	const char *consumer;
	uint64_t plane_version;      /* the newest version the plane announced */
	size_t resources;
	size_t state_bytes;          /* names and bodies of the applied state */
	uint64_t applied, rejected;  /* pushes */
	int64_t started;
	/* with --trust: the statement of what runs (0/NULL without) */
	bool trusted;
	bool stale;                  /* no valid statement vouches for what runs */
	uint64_t verified_version;   /* the high-water mark: lower is a rollback */
	const char *key_id;          /* the key that signed what runs */
	uint64_t approvals;          /* --approvals K (0: none), of the keys in approvers */
	const char *approvers;
	/* the plane dialled now says it is stale: since (wall seconds, 0
	 * unknown), why ("" or NULL when it is not) */
	bool plane_stale;
	int64_t plane_stale_since;
	const char *plane_stale_why;
};

const char *status_state_name(enum agent_state s);
/* Writes dir/status.json. Returns 0, or -1 with err. */
int status_write(const char *dir, const struct status *st, char *err, size_t errlen);

#endif
