/* test_lthash.c: unit tests of common/lthash.c: the set digest's algebra
 * (order independence, add then sub, the empty set), pinned known answers
 * (a format change must fail here), an independent implementation of the
 * construction docs/protocol.md ("The digest") describes, hex parsing and
 * printing, and the property the plane and the agent rely on: a digest
 * kept incrementally over a random series of upserts and removes equals the
 * digest recomputed from scratch. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lthash.h"

#define HEXLEN (2 * LTHASH_DIGEST_BYTES + 1)

/* ---- helpers ------------------------------------------------------------------ */

static void seed_of(const char *name, const char *body, unsigned char seed[LTHASH_SEED_BYTES])
{
	lthash_seed(name, body, strlen(body), seed);
}

static void add_el(struct lthash *h, const char *name, const char *body)
{
	unsigned char seed[LTHASH_SEED_BYTES];
	seed_of(name, body, seed);
	lthash_add(h, seed);
}

static void sub_el(struct lthash *h, const char *name, const char *body)
{
	unsigned char seed[LTHASH_SEED_BYTES];
	seed_of(name, body, seed);
	lthash_sub(h, seed);
}

static void hex_of(const struct lthash *h, char out[HEXLEN])
{
	unsigned char d[LTHASH_DIGEST_BYTES];
	lthash_digest(h, d);
	lthash_digest_hex(d, out);
}

static void assert_lanes_equal(const struct lthash *a, const struct lthash *b)
{
	for (size_t i = 0; i < LTHASH_LANES; i++)
		if (a->lane[i] != b->lane[i])
			fail_msg("lane %zu: %u against %u", i, a->lane[i], b->lane[i]);
}

static bool all_zero(const struct lthash *h)
{
	for (size_t i = 0; i < LTHASH_LANES; i++)
		if (h->lane[i])
			return false;
	return true;
}

/* xorshift64*: a fixed, reproducible sequence */
static uint64_t rnd(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 2685821657736338717ull;
}

/* ---- the construction, written again from docs/protocol.md ----------------- */

static void ref_seed(const char *name, const char *body, size_t len, unsigned char seed[32])
{
	static const char dom[] = "tether-lthash-elem-v1";   /* and its NUL */
	unsigned char bh[32], nl[4];
	size_t n = strlen(name);
	crypto_generichash_blake2b(bh, 32, (const unsigned char *)body, len, NULL, 0);
	nl[0] = (unsigned char)n;
	nl[1] = (unsigned char)(n >> 8);
	nl[2] = (unsigned char)(n >> 16);
	nl[3] = (unsigned char)(n >> 24);
	size_t mlen = sizeof(dom) + 4 + n + 32;
	unsigned char *m = malloc(mlen);
	assert_non_null(m);
	memcpy(m, dom, sizeof(dom));
	memcpy(m + sizeof(dom), nl, 4);
	memcpy(m + sizeof(dom) + 4, name, n);
	memcpy(m + sizeof(dom) + 4 + n, bh, 32);
	crypto_generichash_blake2b(seed, 32, m, mlen, NULL, 0);
	free(m);
}

/* lanes of a set given as (name, body) pairs */
static void ref_lanes(const char *const *pairs, size_t npairs, uint16_t lanes[1024])
{
	memset(lanes, 0, 1024 * sizeof(uint16_t));
	for (size_t k = 0; k < npairs; k++) {
		unsigned char seed[32], ks[2048];
		unsigned char nonce[crypto_stream_chacha20_ietf_NONCEBYTES] = { 0 };
		ref_seed(pairs[2 * k], pairs[2 * k + 1], strlen(pairs[2 * k + 1]), seed);
		crypto_stream_chacha20_ietf(ks, sizeof(ks), nonce, seed);
		for (size_t i = 0; i < 1024; i++)
			lanes[i] = (uint16_t)(lanes[i] + (ks[2 * i] | ks[2 * i + 1] << 8));
	}
}

static void ref_digest(const uint16_t lanes[1024], unsigned char out[32])
{
	static const char dom[] = "tether-lthash-digest-v1";   /* and its NUL */
	unsigned char m[sizeof(dom) + 2048];
	memcpy(m, dom, sizeof(dom));
	for (size_t i = 0; i < 1024; i++) {
		m[sizeof(dom) + 2 * i] = (unsigned char)(lanes[i] & 0xff);
		m[sizeof(dom) + 2 * i + 1] = (unsigned char)(lanes[i] >> 8);
	}
	crypto_generichash_blake2b(out, 32, m, sizeof(m), NULL, 0);
}

/* ---- tests ------------------------------------------------------------------- */

static const char *const SET[] = {
	"cluster/a", "{\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":80}]}",
	"cluster/b", "{\"endpoints\":[{\"address\":\"10.0.0.2\",\"port\":81}]}",
	"listener/l", "{\"port\":443}",
	"route/r", "{\"cluster\":\"a\",\"listener\":\"l\"}",
	"file/f", "{\"content\":\"hello\",\"path\":\"conf/f.conf\"}",
};
#define NSET (sizeof(SET) / sizeof(SET[0]) / 2)

static void test_empty_set(void **state)
{
	(void)state;
	struct lthash h;
	memset(&h, 0xa5, sizeof(h));
	lthash_init(&h);
	assert_true(all_zero(&h));
	char hex[HEXLEN];
	hex_of(&h, hex);
	/* pinned: the digest of the empty state (a node subscribed to nothing
	 * that exists gets statements with this digest): BLAKE2b-256 of the
	 * domain and 2048 zero bytes */
	assert_string_equal(hex, "d3f6a1bee83573b34127ce8abbdb807eb5f65f0c7f2a4acbf1175f1e4bf95ef6");
	/* and it is what the construction gives for zero lanes */
	uint16_t lanes[1024];
	unsigned char d[32], want[32];
	ref_lanes(NULL, 0, lanes);
	ref_digest(lanes, want);
	lthash_digest(&h, d);
	assert_memory_equal(d, want, 32);
}

static void test_order_independent(void **state)
{
	(void)state;
	struct lthash fwd, back, mixed;
	lthash_init(&fwd);
	lthash_init(&back);
	lthash_init(&mixed);
	for (size_t i = 0; i < NSET; i++)
		add_el(&fwd, SET[2 * i], SET[2 * i + 1]);
	for (size_t i = NSET; i-- > 0;)
		add_el(&back, SET[2 * i], SET[2 * i + 1]);
	static const size_t order[NSET] = { 2, 4, 0, 3, 1 };
	for (size_t i = 0; i < NSET; i++)
		add_el(&mixed, SET[2 * order[i]], SET[2 * order[i] + 1]);
	assert_lanes_equal(&fwd, &back);
	assert_lanes_equal(&fwd, &mixed);
	unsigned char a[32], b[32];
	lthash_digest(&fwd, a);
	lthash_digest(&mixed, b);
	assert_true(lthash_digest_equal(a, b));
	/* a subset is another digest */
	struct lthash less;
	lthash_init(&less);
	for (size_t i = 1; i < NSET; i++)
		add_el(&less, SET[2 * i], SET[2 * i + 1]);
	lthash_digest(&less, b);
	assert_false(lthash_digest_equal(a, b));
}

static void test_add_then_sub(void **state)
{
	(void)state;
	struct lthash h, before;
	lthash_init(&h);
	add_el(&h, SET[0], SET[1]);
	add_el(&h, SET[2], SET[3]);
	before = h;
	/* an element in and out again: nothing happened */
	add_el(&h, SET[4], SET[5]);
	assert_memory_not_equal(&h, &before, sizeof(h));
	sub_el(&h, SET[4], SET[5]);
	assert_lanes_equal(&h, &before);
	/* the other way round too: out first (lanes wrap mod 2^16), then in */
	sub_el(&h, SET[6], SET[7]);
	add_el(&h, SET[6], SET[7]);
	assert_lanes_equal(&h, &before);
	/* removing everything gives the empty set */
	sub_el(&h, SET[2], SET[3]);
	sub_el(&h, SET[0], SET[1]);
	assert_true(all_zero(&h));
	/* replacing a body is sub old + add new, whatever the order */
	struct lthash x, y;
	lthash_init(&x);
	lthash_init(&y);
	add_el(&x, "cluster/a", "{\"v\":1}");
	sub_el(&x, "cluster/a", "{\"v\":1}");
	add_el(&x, "cluster/a", "{\"v\":2}");
	add_el(&y, "cluster/a", "{\"v\":2}");
	assert_lanes_equal(&x, &y);
}

static void test_elements_distinct(void **state)
{
	(void)state;
	unsigned char a[32], b[32];
	/* the name's length is encoded: moving bytes between name and body,
	 * or changing either, is another element */
	lthash_seed("cluster/ab", "c", 1, a);
	lthash_seed("cluster/a", "bc", 2, b);
	assert_memory_not_equal(a, b, 32);
	lthash_seed("cluster/a", "{}", 2, a);
	lthash_seed("cluster/b", "{}", 2, b);
	assert_memory_not_equal(a, b, 32);
	lthash_seed("cluster/a", "{} ", 3, b);
	assert_memory_not_equal(a, b, 32);
	/* only len bytes of the body count */
	lthash_seed("cluster/a", "{}XYZ", 2, b);
	assert_memory_equal(a, b, 32);
	/* the same element twice is not the empty set (the multiset caveat:
	 * names are unique in a state, so the store never does this) */
	struct lthash h;
	lthash_init(&h);
	lthash_add(&h, a);
	lthash_add(&h, a);
	assert_false(all_zero(&h));
}

static void test_known_answers(void **state)
{
	(void)state;
	/* pinned (computed once, independently, from docs/protocol.md with
	 * Python's hashlib.blake2b and the ChaCha20 of pyca/cryptography, and
	 * equal to this implementation's): any change of the element encoding,
	 * the expansion or the digest makes every statement a plane signed
	 * unverifiable by agents of another build */
	unsigned char seed[32];
	char hex[HEXLEN];
	lthash_seed(SET[0], SET[1], strlen(SET[1]), seed);
	sodium_bin2hex(hex, sizeof(hex), seed, 32);
	assert_string_equal(hex, "296b48073688078aac23319e9f8447233ea67ac7da2e911c3347212b7ec34cc9");

	lthash_seed("", "", 0, seed);
	sodium_bin2hex(hex, sizeof(hex), seed, 32);
	assert_string_equal(hex, "57057751fd0028b39e4b77a250b05aa2155c32a48e7c257f449c70afedebd334");

	struct lthash h;
	lthash_init(&h);
	lthash_seed(SET[0], SET[1], strlen(SET[1]), seed);
	lthash_add(&h, seed);
	/* a few lanes of one element: the ChaCha20 keystream, little-endian */
	char lanes[128];
	snprintf(lanes, sizeof(lanes), "%04x %04x %04x %04x", h.lane[0], h.lane[1], h.lane[511], h.lane[1023]);
	assert_string_equal(lanes, "50fb ab6f 72d1 e162");
	hex_of(&h, hex);
	assert_string_equal(hex, "ded08e32ad036ccdb1fd851b92aafce409ef56c2b1968042ab446557f430e99b");

	lthash_init(&h);
	for (size_t i = 0; i < NSET; i++)
		add_el(&h, SET[2 * i], SET[2 * i + 1]);
	hex_of(&h, hex);
	assert_string_equal(hex, "be6d478c157561f44c27d55b00acb553fa540977cdbe145bddc07f92021936ae");
}

static void test_matches_protocol_text(void **state)
{
	(void)state;
	/* an independent implementation of docs/protocol.md agrees, element
	 * seeds, lanes and digest */
	for (size_t i = 0; i < NSET; i++) {
		unsigned char a[32], b[32];
		lthash_seed(SET[2 * i], SET[2 * i + 1], strlen(SET[2 * i + 1]), a);
		ref_seed(SET[2 * i], SET[2 * i + 1], strlen(SET[2 * i + 1]), b);
		assert_memory_equal(a, b, 32);
	}
	struct lthash h;
	lthash_init(&h);
	for (size_t i = 0; i < NSET; i++)
		add_el(&h, SET[2 * i], SET[2 * i + 1]);
	uint16_t lanes[1024];
	ref_lanes(SET, NSET, lanes);
	for (size_t i = 0; i < 1024; i++)
		assert_int_equal(h.lane[i], lanes[i]);
	unsigned char d[32], want[32];
	lthash_digest(&h, d);
	ref_digest(lanes, want);
	assert_memory_equal(d, want, 32);
}

static void test_hex(void **state)
{
	(void)state;
	unsigned char d[32], back[32];
	for (int i = 0; i < 32; i++)
		d[i] = (unsigned char)(i * 37 + 5);
	char hex[HEXLEN];
	memset(hex, 'x', sizeof(hex));
	lthash_digest_hex(d, hex);
	assert_int_equal(strlen(hex), 64);
	assert_int_equal(strspn(hex, "0123456789abcdef"), 64);
	assert_string_equal(hex, "052a4f7499bee3082d52779cc1e60b30557a9fc4e90e33587da2c7ec11365b80");
	assert_int_equal(lthash_digest_parse(hex, back), 0);
	assert_memory_equal(d, back, 32);

	/* one text per digest: upper case is refused */
	char up[HEXLEN];
	memcpy(up, hex, sizeof(up));
	up[1] = 'A';
	assert_int_equal(lthash_digest_parse(up, back), -1);
	for (size_t i = 0; i < 64; i++)
		up[i] = (char)(up[i] >= 'a' && up[i] <= 'f' ? up[i] - 'a' + 'A' : up[i]);
	assert_int_equal(lthash_digest_parse(up, back), -1);

	/* wrong lengths */
	char s[80];
	memcpy(s, hex, 63);
	s[63] = '\0';
	assert_int_equal(lthash_digest_parse(s, back), -1);
	snprintf(s, sizeof(s), "%s0", hex);
	assert_int_equal(lthash_digest_parse(s, back), -1);
	snprintf(s, sizeof(s), "%s00", hex);
	assert_int_equal(lthash_digest_parse(s, back), -1);
	assert_int_equal(lthash_digest_parse("", back), -1);
	assert_int_equal(lthash_digest_parse("00", back), -1);

	/* other characters, wherever they are */
	static const char bad[] = { 'g', 'G', ' ', ':', '-', 'x', '\n', '/', '@', '`', '{', (char)0xc3 };
	for (size_t pos = 0; pos < 64; pos += 9) {
		for (size_t k = 0; k < sizeof(bad); k++) {
			memcpy(s, hex, sizeof(hex));
			s[pos] = bad[k];
			assert_int_equal(lthash_digest_parse(s, back), -1);
		}
	}
	/* a NUL inside is a short string */
	memcpy(s, hex, sizeof(hex));
	s[40] = '\0';
	assert_int_equal(lthash_digest_parse(s, back), -1);
	/* the all-zero and all-ff digests */
	memset(d, 0, 32);
	lthash_digest_hex(d, hex);
	assert_string_equal(hex, "0000000000000000000000000000000000000000000000000000000000000000");
	memset(d, 0xff, 32);
	lthash_digest_hex(d, hex);
	assert_string_equal(hex, "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff");
	assert_int_equal(lthash_digest_parse(hex, back), 0);
	assert_memory_equal(back, d, 32);
}

static void test_digest_equal(void **state)
{
	(void)state;
	unsigned char a[32], b[32];
	memset(a, 7, 32);
	memcpy(b, a, 32);
	assert_true(lthash_digest_equal(a, b));
	for (int i = 0; i < 32; i += 31) {
		b[i] ^= 0x80;
		assert_false(lthash_digest_equal(a, b));
		b[i] ^= 0x80;
	}
}

/* The property: a digest kept in O(changed) over a random series of
 * upserts and removes (the plane's commit observer, the agent's candidate
 * check) equals the digest of the state recomputed from scratch. */
#define NNAMES 24
#define STEPS 600

static void test_incremental_equals_scratch(void **state)
{
	(void)state;
	static const char *const types[] = { "cluster", "listener", "route", "secret", "file" };
	char names[NNAMES][32];
	char *bodies[NNAMES] = { NULL };     /* the model: NULL absent */
	for (int i = 0; i < NNAMES; i++)
		snprintf(names[i], sizeof(names[i]), "%s/n%d", types[i % 5], i);
	struct lthash inc;
	lthash_init(&inc);
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	int upserts = 0, removes = 0, same = 0;
	for (int step = 0; step < STEPS; step++) {
		/* a batch of 1..4 changes, like one commit */
		int nb = 1 + (int)(rnd(&seed) % 4);
		for (int k = 0; k < nb; k++) {
			int i = (int)(rnd(&seed) % NNAMES);
			uint64_t r = rnd(&seed);
			unsigned char seedb[LTHASH_SEED_BYTES];
			if (r % 3 == 0) {
				if (bodies[i]) {
					seed_of(names[i], bodies[i], seedb);
					lthash_sub(&inc, seedb);
					free(bodies[i]);
					bodies[i] = NULL;
				}
				removes++;
				continue;
			}
			char body[96];
			/* a small value space, so identical re-upserts happen */
			snprintf(body, sizeof(body), "{\"port\":%u,\"w\":\"%.*s\"}", (unsigned)(r >> 8) % 3,
				 (int)((r >> 16) % 3), "xxxxxxxxxxxxxxxxxxxx");
			if (bodies[i] && strcmp(bodies[i], body) == 0) {
				same++;   /* no change: nothing to do */
				continue;
			}
			if (bodies[i]) {
				seed_of(names[i], bodies[i], seedb);
				lthash_sub(&inc, seedb);
				free(bodies[i]);
			}
			bodies[i] = strdup(body);
			assert_non_null(bodies[i]);
			seed_of(names[i], bodies[i], seedb);
			lthash_add(&inc, seedb);
			upserts++;
		}
		struct lthash scratch;
		lthash_init(&scratch);
		/* from scratch, in another order than the changes came */
		for (int i = NNAMES - 1; i >= 0; i--)
			if (bodies[i])
				add_el(&scratch, names[i], bodies[i]);
		assert_lanes_equal(&inc, &scratch);
		unsigned char a[32], b[32];
		lthash_digest(&inc, a);
		lthash_digest(&scratch, b);
		assert_true(lthash_digest_equal(a, b));
	}
	/* the series did what it is for */
	assert_true(upserts > 300);
	assert_true(removes > 100);
	assert_true(same > 10);
	for (int i = 0; i < NNAMES; i++) {
		if (bodies[i])
			sub_el(&inc, names[i], bodies[i]);
		free(bodies[i]);
	}
	assert_true(all_zero(&inc));
}

int main(void)
{
	if (sodium_init() < 0)
		return 1;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty_set),
		cmocka_unit_test(test_order_independent),
		cmocka_unit_test(test_add_then_sub),
		cmocka_unit_test(test_elements_distinct),
		cmocka_unit_test(test_known_answers),
		cmocka_unit_test(test_matches_protocol_text),
		cmocka_unit_test(test_hex),
		cmocka_unit_test(test_digest_equal),
		cmocka_unit_test(test_incremental_equals_scratch),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
