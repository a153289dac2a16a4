/* lthash.h: the homomorphic digest of a state (a set of resources), after
 * Facebook's LtHash (folly/crypto/LtHash.h): 1024 lanes of 16 bits, added
 * lane-wise mod 2^16. The digest of a set is the sum of its elements'
 * expansions, so a state changed by a delta is re-digested in O(changed):
 * subtract what left, add what came. Plane and agent share this file, so
 * both ends compute the same bytes.
 *
 * An element is one resource: (name, canonical body), encoded without
 * ambiguity as BLAKE2b-256("tether-lthash-elem-v1" | len(name) | name |
 * BLAKE2b-256(body)) -- the element's 32-byte seed -- expanded to 2048
 * bytes with the ChaCha20 keystream under that seed. Names are unique in a
 * state, so the multiset caveat of LtHash never arises. */
#ifndef TETHER_LTHASH_H
#define TETHER_LTHASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LTHASH_LANES 1024
#define LTHASH_SEED_BYTES 32
#define LTHASH_DIGEST_BYTES 32

struct lthash {
	uint16_t lane[LTHASH_LANES];
};

/* The empty set. */
void lthash_init(struct lthash *h);
/* The seed of one element (name, body[0..len)). */
void lthash_seed(const char *name, const char *body, size_t len, unsigned char seed[LTHASH_SEED_BYTES]);
/* Adds or removes the element of a seed. */
void lthash_add(struct lthash *h, const unsigned char seed[LTHASH_SEED_BYTES]);
void lthash_sub(struct lthash *h, const unsigned char seed[LTHASH_SEED_BYTES]);
/* The short digest that statements carry: BLAKE2b-256 over the lanes
 * (little-endian), domain-separated. */
void lthash_digest(const struct lthash *h, unsigned char out[LTHASH_DIGEST_BYTES]);
/* Constant-time comparison of two digests. */
bool lthash_digest_equal(const unsigned char a[LTHASH_DIGEST_BYTES], const unsigned char b[LTHASH_DIGEST_BYTES]);

/* Hex of a digest (64 characters and a NUL), and back (-1 when s is not
 * exactly 64 hex digits). */
void lthash_digest_hex(const unsigned char d[LTHASH_DIGEST_BYTES], char out[2 * LTHASH_DIGEST_BYTES + 1]);
int lthash_digest_parse(const char *s, unsigned char out[LTHASH_DIGEST_BYTES]);

#endif
