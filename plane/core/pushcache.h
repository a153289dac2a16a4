/* core/pushcache.h: encoded pushes shared by every node that needs the same one.
 * After a write, all nodes at the previous version need the same delta:
 * it is computed and encoded once, then referenced by each stream (the
 * per-node nonce is written separately, in front). Keyed by (base, target
 * version, subscription); least recently used entries go first. */
#ifndef TETHER_PUSHCACHE_H
#define TETHER_PUSHCACHE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/delta.h"
#include "core/store.h"
#include "lthash.h"

struct push_blob {
	atomic_int refs;
	uint64_t version, base;
	bool full;
	size_t nup, nrm;
	char *raw;            /* the push JSON after its nonce member */
	size_t raw_len;
	/* gzip-stream fragment of raw + "\n\n", made on first use */
	atomic_bool gz_ready;
	char *gz;
	size_t gz_len;
	uint32_t gz_crc;      /* CRC-32 of raw + "\n\n" */
	/* the digest of the state at version through the subscription (what
	 * the push's statement signs), when digests are on */
	bool has_digest;
	unsigned char digest[LTHASH_DIGEST_BYTES];
};

/* A node's target version, or VERSION_LATEST for the store's newest.
 * Called with the store's read lock held, so a target and the history it
 * needs cannot move apart. */
#define VERSION_LATEST UINT64_MAX
typedef uint64_t (*target_fn)(void *ctx, const char *node);

struct pushcache *pushcache_new(struct store *s, size_t max_entries, size_t max_bytes);
void pushcache_free(struct pushcache *pc);
/* Sets how a node's target is found (none: every node gets the newest). */
void pushcache_set_target(struct pushcache *pc, target_fn fn, void *ctx);
/* Makes every new push carry the digest of the state it brings a node to
 * (computed under the same read lock as the push). */
struct digests;
void pushcache_set_digests(struct pushcache *pc, struct digests *d);

/* Returns a referenced push bringing a node at `have` to the store's
 * current version. Release with push_blob_unref. */
struct push_blob *pushcache_get(struct pushcache *pc, uint64_t have, const struct sub *sub);
/* The same to node's target version. */
struct push_blob *pushcache_get_for(struct pushcache *pc, uint64_t have, const char *node, const struct sub *sub);
/* Makes sure blob->gz is there (computed once, under the cache's lock). */
void pushcache_gzip(struct pushcache *pc, struct push_blob *blob);
void push_blob_unref(struct push_blob *b);

struct pushcache_stats {
	uint64_t hits, misses;
	size_t entries, bytes;
};
void pushcache_stats(struct pushcache *pc, struct pushcache_stats *st);

#endif
