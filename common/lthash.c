/* lthash.c: LtHash16_1024 over resources (see lthash.h). libsodium gives
 * BLAKE2b (crypto_generichash) and the ChaCha20 keystream. */
#include "lthash.h"

#include <sodium.h>
#include <string.h>

#define ELEM_DOMAIN "tether-lthash-elem-v1"
#define DIGEST_DOMAIN "tether-lthash-digest-v1"

void lthash_init(struct lthash *h)
{
	memset(h, 0, sizeof(*h));
}

void lthash_seed(const char *name, const char *body, size_t len, unsigned char seed[LTHASH_SEED_BYTES])
{
	unsigned char bh[32], nl[4];
	size_t n = strlen(name);
	crypto_generichash(bh, sizeof(bh), (const unsigned char *)body, len, NULL, 0);
	for (int i = 0; i < 4; i++)
		nl[i] = (unsigned char)(n >> (8 * i));
	crypto_generichash_state st;
	crypto_generichash_init(&st, NULL, 0, LTHASH_SEED_BYTES);
	crypto_generichash_update(&st, (const unsigned char *)ELEM_DOMAIN, sizeof(ELEM_DOMAIN));
	crypto_generichash_update(&st, nl, sizeof(nl));
	crypto_generichash_update(&st, (const unsigned char *)name, n);
	crypto_generichash_update(&st, bh, sizeof(bh));
	crypto_generichash_final(&st, seed, LTHASH_SEED_BYTES);
}

/* The element's 1024 lanes: the ChaCha20 keystream under its seed. */
static void expand(const unsigned char seed[LTHASH_SEED_BYTES], uint16_t lanes[LTHASH_LANES])
{
	static const unsigned char nonce[crypto_stream_chacha20_ietf_NONCEBYTES];
	unsigned char raw[2 * LTHASH_LANES];
	crypto_stream_chacha20_ietf(raw, sizeof(raw), nonce, seed);
	for (size_t i = 0; i < LTHASH_LANES; i++)
		lanes[i] = (uint16_t)(raw[2 * i] | raw[2 * i + 1] << 8);
}

void lthash_add(struct lthash *h, const unsigned char seed[LTHASH_SEED_BYTES])
{
	uint16_t v[LTHASH_LANES];
	expand(seed, v);
	for (size_t i = 0; i < LTHASH_LANES; i++)
		h->lane[i] = (uint16_t)(h->lane[i] + v[i]);
}

void lthash_sub(struct lthash *h, const unsigned char seed[LTHASH_SEED_BYTES])
{
	uint16_t v[LTHASH_LANES];
	expand(seed, v);
	for (size_t i = 0; i < LTHASH_LANES; i++)
		h->lane[i] = (uint16_t)(h->lane[i] - v[i]);
}

void lthash_digest(const struct lthash *h, unsigned char out[LTHASH_DIGEST_BYTES])
{
	unsigned char raw[2 * LTHASH_LANES];
	for (size_t i = 0; i < LTHASH_LANES; i++) {
		raw[2 * i] = (unsigned char)(h->lane[i] & 0xff);
		raw[2 * i + 1] = (unsigned char)(h->lane[i] >> 8);
	}
	crypto_generichash_state st;
	crypto_generichash_init(&st, NULL, 0, LTHASH_DIGEST_BYTES);
	crypto_generichash_update(&st, (const unsigned char *)DIGEST_DOMAIN, sizeof(DIGEST_DOMAIN));
	crypto_generichash_update(&st, raw, sizeof(raw));
	crypto_generichash_final(&st, out, LTHASH_DIGEST_BYTES);
}

bool lthash_digest_equal(const unsigned char a[LTHASH_DIGEST_BYTES], const unsigned char b[LTHASH_DIGEST_BYTES])
{
	return sodium_memcmp(a, b, LTHASH_DIGEST_BYTES) == 0;
}

void lthash_digest_hex(const unsigned char d[LTHASH_DIGEST_BYTES], char out[2 * LTHASH_DIGEST_BYTES + 1])
{
	sodium_bin2hex(out, 2 * LTHASH_DIGEST_BYTES + 1, d, LTHASH_DIGEST_BYTES);
}

int lthash_digest_parse(const char *s, unsigned char out[LTHASH_DIGEST_BYTES])
{
	size_t n = strlen(s), got = 0;
	const char *end = NULL;
	if (n != 2 * LTHASH_DIGEST_BYTES)
		return -1;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		/* lower case only: one text per digest */
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return -1;
	}
	if (sodium_hex2bin(out, LTHASH_DIGEST_BYTES, s, n, NULL, &got, &end) != 0 || got != LTHASH_DIGEST_BYTES)
		return -1;
	return 0;
}
