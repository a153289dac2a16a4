/* persist/relay/state.h: a relay stream's state event as the relay reads it:
 * every state of every name that changed after the relay's version (or,
 * for a snapshot, every state the store holds), history included, so the
 * relay can serve the per-node targets of a rollout exactly as the
 * upstream would. core/relay_feed.h writes it. */
#ifndef TETHER_RELAY_STATE_H
#define TETHER_RELAY_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "persist/persist.h"

/* A state event as a relay reads it: changes ascending by version (a name
 * at most once per version), each body canonical JSON of an object. */
struct relay_state {
	uint64_t version, horizon, released;
	bool full, has_released;
	char *statement;             /* NULL: none */
	uint64_t *overridden;        /* versions in it whose write overrode a guard */
	size_t noverridden;
	struct persist_remote *ch;
	size_t n;
};

/* Parses and checks a state event's data (the upstream is authenticated,
 * but a lying or broken one gets a clear error, not a half-applied
 * state). Returns 0, or -1 with err and nothing allocated. */
int relay_state_decode(const char *data, size_t len, struct relay_state *out, char *err, size_t errlen);
void relay_state_release(struct relay_state *st);

#endif
