/* delta.h: the delta computer: what a node at version `have` is missing.
 * A delta carries every resource changed after `have` with its body and
 * every tombstone after it; a snapshot (have 0, below the tombstone
 * horizon, or ahead of the store) carries every live resource. Upserts come
 * in make-before-break order (secret, cluster, listener, route, file),
 * removals last, referrers first. Cost: O(changed log changed). */
#ifndef TETHER_DELTA_H
#define TETHER_DELTA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "store.h"

/* A subscription: name prefixes; none means everything. */
struct sub {
	size_t n;
	char **prefix;
	char *canon;     /* the prefixes sorted and comma-joined: a cache key */
};

/* Parses "cluster/,route/web-" (commas; empty parts ignored). Returns 0, or
 * -1 with err for a prefix with characters no name can hold. */
int sub_parse(const char *s, struct sub *out, char *err, size_t errlen);
void sub_release(struct sub *s);
bool sub_match(const struct sub *s, const char *name);

struct delta {
	uint64_t version;     /* the store version the push brings the node to */
	uint64_t base;        /* the version it applies on; 0 for a snapshot */
	bool full;
	const struct store_entry **up;
	size_t nup;
	const struct store_entry **rm;
	size_t nrm;
};

/* Collects the push for a node at `have`. Hold the store's read lock while
 * collecting and encoding: the entries are borrowed. */
void delta_collect(struct store *s, uint64_t have, const struct sub *sub, struct delta *d);
void delta_release(struct delta *d);

/* Appends the push's JSON after its nonce member:
 * "version":V,"base":B,"full":F,"upserts":[...],"removed":[...]}
 * so a push is `{"nonce":"N",` followed by this tail. */
void delta_encode_tail(const struct delta *d, struct buf *out);

#endif
