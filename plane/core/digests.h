/* core/digests.h: the state digest (lthash.h) of every version a node may be
 * sent, as a node of a given subscription sees it: what statements sign.
 *
 * For each subscription in use a tracker holds the digest of the store's
 * newest version; every commit updates each tracker in O(changed) (the
 * store calls digests_observe with the write lock held, so a tracker and
 * the store's version never disagree). A new subscription costs one walk
 * of the store. An older version (a rollout's baseline, which the store
 * keeps history for) is derived from the newest by walking back over what
 * changed since: O(changed since), and cached. */
#ifndef TETHER_DIGESTS_H
#define TETHER_DIGESTS_H

#include <stdint.h>

#include "core/delta.h"
#include "core/store.h"
#include "lthash.h"

struct digests *digests_new(struct store *s);
void digests_free(struct digests *d);

/* The digest of the state at version x seen through sub (NULL: all).
 * Hold the store's read lock. x is the store's newest version or one at
 * or above its history floor. Returns 0, or -1 when x cannot be derived
 * (older than the history kept, or newer than the store). */
int digests_at(struct digests *d, uint64_t x, const struct sub *sub, unsigned char out[LTHASH_DIGEST_BYTES]);

/* How many new subscriptions may be walked at once (burst) and then a
 * second (default 64 and 8); past that digests_at answers -1. */
void digests_set_walk_limit(struct digests *d, double burst, double per_second);

struct digests_stats {
	uint64_t trackers, walks, derived;   /* in use; full walks; older versions derived */
	uint64_t walks_refused;              /* walks put off: too many new subscriptions at once */
};
void digests_stats(struct digests *d, struct digests_stats *st);

#endif
