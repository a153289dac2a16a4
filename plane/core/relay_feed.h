/* core/relay_feed.h: the state event a relay's stream carries (docs/protocol.md,
 * "Relays"), written from the store; persist/relay/state.h reads it. */
#ifndef TETHER_RELAY_FEED_H
#define TETHER_RELAY_FEED_H

#include <stdbool.h>
#include <stdint.h>

#include "buf.h"

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
void relay_feed_encode(struct store *s, uint64_t have, uint64_t released, struct buf *out, uint64_t *version,
		       bool *full);

#endif
