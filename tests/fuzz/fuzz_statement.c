/* fuzz_statement.c: libFuzzer target for common/statement.c and
 * keys_parse_trust (common/keys.c). Two fixed test keys are trusted (their
 * public keys are below; the seeds that make them are test material, so
 * the target can sign too). Each input is used three ways:
 *
 *   1. as a token: statement_verify and statement_peek. A refusal is one
 *      of the three codes, says why and leaves nothing allocated; peek
 *      fails exactly when verify says malformed; an unknown key is one
 *      the trust does not list and a bad signature one it does. A token
 *      that verifies peeks to the same fields, and signing those fields
 *      again gives a token that verifies to them too -- the very same
 *      token when the payload bytes are the same (Ed25519 is
 *      deterministic, base64url without padding has one spelling).
 *   2. as a payload, signed here by trusted key 1 (so the decoder's every
 *      check is reachable without forging a signature): it verifies, or is
 *      malformed, or names another key; never a bad signature unless its
 *      kid is key 2's. What verifies signs again to the same fields.
 *   3. as a trust file: keys_parse_trust never crashes; what it accepts
 *      holds 1..TRUST_MAX distinct keys whose ids are their keys' ids. */
#include "fuzz.h"
#include "keys.h"
#include "lthash.h"
#include "statement.h"

#include <sodium.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define B64URL sodium_base64_VARIANT_URLSAFE_NO_PADDING
#define DOMAIN "tether-statement-v1\n"

/* The trusted test keys: crypto_sign_seed_keypair of these seeds. */
static const char SEED1[] = "tether fuzz statement test key 1";
static const char SEED2[] = "tether fuzz statement test key 2";
static const unsigned char PK1[32] = {
	0xb0, 0xca, 0xf3, 0xa5, 0x5c, 0x03, 0x49, 0x59, 0x68, 0xac, 0x8d, 0x94, 0x88, 0xfb, 0x3b, 0x32,
	0x59, 0x2e, 0xa3, 0xc8, 0x35, 0xe5, 0xf8, 0x00, 0x95, 0xcb, 0x52, 0xab, 0xfc, 0xb0, 0xf6, 0x1a,
};
static const unsigned char PK2[32] = {
	0x9c, 0x0c, 0x1d, 0xdf, 0x40, 0xe4, 0xea, 0x14, 0xd2, 0x52, 0xd0, 0xba, 0x67, 0xd6, 0xe5, 0xd3,
	0x8a, 0xc7, 0xcb, 0x70, 0x36, 0xba, 0xc8, 0x90, 0x2a, 0x43, 0x46, 0xd4, 0x6c, 0x59, 0x37, 0x8c,
};

static struct signing_key key1, key2;
static struct trust trust;

static void make_key(const char *seed, const unsigned char *pk, struct signing_key *k)
{
	crypto_sign_seed_keypair(k->pk, k->sk, (const unsigned char *)seed);
	if (memcmp(k->pk, pk, 32) != 0)
		abort();   /* the embedded public key is not the seed's */
	keys_id(k->pk, k->kid);
	struct trusted_key *t = &trust.key[trust.n++];
	memcpy(t->pk, k->pk, 32);
	memcpy(t->kid, k->kid, sizeof(t->kid));
}

static void init(void)
{
	static bool done;
	if (done)
		return;
	if (sodium_init() < 0)
		abort();
	make_key(SEED1, PK1, &key1);
	make_key(SEED2, PK2, &key2);
	done = true;
}

static bool is_hex(const char *s, size_t n)
{
	return strlen(s) == n && strspn(s, "0123456789abcdef") == n;
}

static bool same_fields(const struct statement *a, const struct statement *b)
{
	return a->version == b->version && a->issued == b->issued && a->expires == b->expires &&
	       a->overridden == b->overridden &&
	       strcmp(a->kid, b->kid) == 0 && memcmp(a->digest, b->digest, LTHASH_DIGEST_BYTES) == 0 &&
	       a->sub && b->sub && strcmp(a->sub, b->sub) == 0;
}

/* statement_verify with the checks every answer must pass. */
static int verify(const char *tok, size_t len, struct statement *st)
{
	char err[512] = "";
	memset(st, 0, sizeof(*st));
	int rc = statement_verify(tok, len, &trust, st, err, sizeof(err));
	if (rc == 0) {
		if (!st->sub || !is_hex(st->kid, KEY_ID_LEN) || strlen(st->sub) > STATEMENT_SUB_MAX)
			abort();
		if (!keys_find(&trust, st->kid))
			abort();
		return 0;
	}
	if (rc != STATEMENT_MALFORMED && rc != STATEMENT_UNKNOWN_KEY && rc != STATEMENT_BAD_SIGNATURE)
		abort();
	if (!err[0] || st->sub)
		abort();   /* a refusal says why and leaves nothing to release */
	return rc;
}

/* Peek must agree with verify about the form, and about the key. */
static void check_peek(const char *tok, size_t len, int vrc, const struct statement *vst)
{
	struct statement pst;
	memset(&pst, 0, sizeof(pst));
	int prc = statement_peek(tok, len, &pst);
	if ((prc != 0) != (vrc == STATEMENT_MALFORMED))
		abort();
	if (prc != 0) {
		if (pst.sub)
			abort();
		return;
	}
	if (vrc == 0 && !same_fields(&pst, vst))
		abort();
	if (vrc == STATEMENT_UNKNOWN_KEY && keys_find(&trust, pst.kid))
		abort();
	if (vrc == STATEMENT_BAD_SIGNATURE && !keys_find(&trust, pst.kid))
		abort();
	statement_release(&pst);
}

/* A verified statement signed again by its key: verifies to the same
 * fields; when the payload bytes are the input's, the token is the input. */
static void check_resign(const char *tok, size_t len, struct statement *st)
{
	const struct signing_key *k = strcmp(st->kid, key1.kid) == 0 ? &key1 : &key2;
	if (strcmp(st->kid, k->kid) != 0)
		abort();
	struct statement copy = *st;
	char *again = statement_sign(&copy, k);
	struct statement st2;
	if (verify(again, strlen(again), &st2) != 0 || !same_fields(st, &st2))
		abort();
	statement_release(&st2);
	const char *dot = memchr(tok, '.', len), *dot2 = strchr(again, '.');
	if (!dot || !dot2)
		abort();
	size_t plen = (size_t)(dot - tok);
	if (plen == (size_t)(dot2 - again) && memcmp(tok, again, plen) == 0) {
		if (strlen(again) != len || memcmp(again, tok, len) != 0)
			abort();
	}
	free(again);
}

/* 1: the input is a token. */
static void as_token(const char *tok, size_t len)
{
	struct statement st;
	int rc = verify(tok, len, &st);
	check_peek(tok, len, rc, &st);
	if (rc == 0) {
		check_resign(tok, len, &st);
		statement_release(&st);
	}
}

/* 2: the input is a payload, signed here by key 1. */
static void as_payload(const uint8_t *data, size_t size)
{
	if (size > STATEMENT_MAX)
		return;
	unsigned char sig[crypto_sign_BYTES];
	unsigned char *msg = malloc(sizeof(DOMAIN) - 1 + size + 1);
	if (!msg)
		abort();
	memcpy(msg, DOMAIN, sizeof(DOMAIN) - 1);
	if (size)
		memcpy(msg + sizeof(DOMAIN) - 1, data, size);
	crypto_sign_detached(sig, NULL, msg, sizeof(DOMAIN) - 1 + size, key1.sk);
	free(msg);
	size_t pl = sodium_base64_ENCODED_LEN(size, B64URL), sl = sodium_base64_ENCODED_LEN(sizeof(sig), B64URL);
	char *tok = malloc(pl + sl + 1);
	if (!tok)
		abort();
	sodium_bin2base64(tok, pl, data, size, B64URL);
	size_t n = strlen(tok);
	tok[n++] = '.';
	sodium_bin2base64(tok + n, sl, sig, sizeof(sig), B64URL);
	n += strlen(tok + n);

	struct statement st;
	int rc = verify(tok, n, &st);
	check_peek(tok, n, rc, &st);
	if (rc == 0) {
		if (strcmp(st.kid, key1.kid) != 0)
			abort();   /* a signature by key 1 verified as another key's */
		check_resign(tok, n, &st);
		statement_release(&st);
	} else if (rc == STATEMENT_BAD_SIGNATURE) {
		/* the signature is key 1's over these bytes: only a payload that
		 * names key 2 can fail it */
		struct statement pst;
		if (statement_peek(tok, n, &pst) != 0)
			abort();
		if (strcmp(pst.kid, key2.kid) != 0)
			abort();
		statement_release(&pst);
	}
	free(tok);
}

/* 3: the input is a trust file. */
static void as_trust(const uint8_t *data, size_t size)
{
	struct trust t;
	char err[512] = "";
	if (keys_parse_trust((const char *)data, size, "fuzz", &t, err, sizeof(err)) < 0) {
		if (strncmp(err, "fuzz", 4) != 0)
			abort();   /* a refusal names the file (and the line) */
		return;
	}
	if (t.n < 1 || t.n > TRUST_MAX)
		abort();
	for (size_t i = 0; i < t.n; i++) {
		char kid[KEY_ID_LEN + 1];
		keys_id(t.key[i].pk, kid);
		if (strcmp(kid, t.key[i].kid) != 0 || !is_hex(kid, KEY_ID_LEN))
			abort();
		if (keys_find(&t, kid) != &t.key[i])
			abort();   /* listed twice */
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	init();
	as_token((const char *)data, size);
	as_payload(data, size);
	as_trust(data, size);
	return 0;
}
