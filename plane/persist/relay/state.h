/* persist/relay/state.h: what a relay stream sends as state: every state of every
 * name that changed after the relay's version (or, for a snapshot, every
 * state the store holds), history included, so the relay can serve the
 * per-node targets of a rollout exactly as this plane would. */
#ifndef TETHER_RELAY_STATE_H
#define TETHER_RELAY_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "persist/persist.h"

struct store;

/* Appends the state event's data to out, all but its end:
 *   {"version","base","full","horizon","released",
 *    "changes":[{"name","version","body"}|{"name","version","deleted_at"}]
 * changes ascending by version; the caller adds ,"statement":"..." (of
 * *version, known only now, and signed without the store's lock) and the
 * closing brace. Takes the store's read lock. *version gets the version it
 * brings the relay to, *full whether it is a snapshot (the relay replaces
 * what it holds). released: the released version (rollout_released_now:
 * 0 is a version too, on a fresh staged store). */
void relay_state_encode(struct store *s, uint64_t have, uint64_t released, struct buf *out, uint64_t *version,
			bool *full);

/* A state event as a relay reads it: changes ascending by version (a name
 * at most once per version), each body canonical JSON of an object. */
struct relay_state {
	uint64_t version, horizon, released;
	bool full, has_released;
	char *statement;             /* NULL: none */
	struct persist_remote *ch;
	size_t n;
};

/* Parses and checks a state event's data (the upstream is authenticated,
 * but a lying or broken one gets a clear error, not a half-applied
 * state). Returns 0, or -1 with err and nothing allocated. */
int relay_state_decode(const char *data, size_t len, struct relay_state *out, char *err, size_t errlen);
void relay_state_release(struct relay_state *st);

#endif
