/* core/delta.h: the delta computer: what a node at version `have` is missing
 * to reach version x (the store's newest, or a node's rollout target, an
 * older version the store keeps history for). A delta carries every
 * resource whose state at x changed after `have`, with its body, and every
 * one absent at x that was removed after `have`; a snapshot (have 0, below
 * the tombstone horizon, or ahead of x) carries every resource live at x.
 * Upserts come in make-before-break order (secret, cluster, listener,
 * route, file), removals last, referrers first. Cost: O(changed log
 * changed), where changed counts every change after `have`. */
#ifndef TETHER_DELTA_H
#define TETHER_DELTA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "core/store.h"
#include "sub.h"


/* One resource in a push: its state as of the push's version. */
struct delta_item {
	const char *name;
	const char *body;     /* borrowed from the store; NULL for a removal */
	size_t body_len;
	uint64_t version;     /* the version that made this state */
	int rank;
};

struct delta {
	uint64_t version;     /* the store version the push brings the node to */
	uint64_t base;        /* the version it applies on; 0 for a snapshot */
	bool full;
	struct delta_item *up;
	size_t nup;
	struct delta_item *rm;
	size_t nrm;
};

/* Collects the push for a node at `have` to the store's newest version.
 * Hold the store's read lock while collecting and encoding: the bodies are
 * borrowed. */
void delta_collect(struct store *s, uint64_t have, const struct sub *sub, struct delta *d);
/* The same to version x, which must be the newest or at least the store's
 * history floor (store_pinned). Where the store keeps `have`'s states too,
 * resources whose state at x equals their state at `have` are left out (a
 * revert to what a node already holds sends it nothing but the version). */
void delta_collect_at(struct store *s, uint64_t have, uint64_t x, const struct sub *sub, struct delta *d);
void delta_release(struct delta *d);

/* Appends the push's JSON after its nonce member:
 * "version":V,"base":B,"full":F,"upserts":[...],"removed":[...]}
 * so a push is `{"nonce":"N",` followed by this tail. */
void delta_encode_tail(const struct delta *d, struct buf *out);

#endif
