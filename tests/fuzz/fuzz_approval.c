/* fuzz_approval.c: libFuzzer target for common/approval.c. Two fixed test
 * keys approve (their seeds are test material, so the target can sign).
 * Each input is used three ways:
 *
 *   1. as a token: approval_verify accepts it or says why and leaves
 *      nothing allocated; what verifies has kid = id(pk), and signing its
 *      fields again by the same key (when it is a test key) verifies to
 *      the same fields.
 *   2. as a payload, signed here by key 1 (so the decoder's every check is
 *      reachable without forging a signature): it verifies only when it
 *      names key 1's pk.
 *   3. as tokens, one a line, counted for (version 1, sub "", a fixed
 *      digest) by a node that trusts key 1 and key 2: the count is at most
 *      2 and at most the lines, and the reasons are a bounded string. */
#include "approval.h"
#include "fuzz.h"
#include "keys.h"
#include "lthash.h"

#include <sodium.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define B64URL sodium_base64_VARIANT_URLSAFE_NO_PADDING
#define DOMAIN "tether-approval-v1\n"

static const char SEED1[] = "tether fuzz approval test key 1.";
static const char SEED2[] = "tether fuzz approval test key 2.";
static struct signing_key key1, key2;
static struct trust trust;

static void make_key(const char *seed, struct signing_key *k)
{
	crypto_sign_seed_keypair(k->pk, k->sk, (const unsigned char *)seed);
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
	make_key(SEED1, &key1);
	make_key(SEED2, &key2);
	done = true;
}

static int verify(const char *tok, size_t len, struct approval *ap)
{
	char err[512] = "";
	int rc = approval_verify(tok, len, ap, err, sizeof(err));
	if (rc == 0) {
		char kid[KEY_ID_LEN + 1];
		keys_id(ap->pk, kid);
		if (!ap->sub || strcmp(kid, ap->kid) != 0)
			abort();
		return 0;
	}
	if (rc != -1 || !err[0] || ap->sub)
		abort();
	return rc;
}

static void check_resign(const struct approval *ap)
{
	const struct signing_key *k = memcmp(ap->pk, key1.pk, 32) == 0 ? &key1
				      : memcmp(ap->pk, key2.pk, 32) == 0 ? &key2 : NULL;
	if (!k)
		return;
	struct approval copy = *ap, again;
	char *tok = approval_sign(&copy, k);
	if (verify(tok, strlen(tok), &again) != 0 || again.version != ap->version ||
	    strcmp(again.sub, ap->sub) != 0 || memcmp(again.digest, ap->digest, LTHASH_DIGEST_BYTES) != 0)
		abort();
	approval_release(&again);
	free(tok);
}

static void as_token(const char *tok, size_t len)
{
	struct approval ap;
	if (verify(tok, len, &ap) == 0) {
		check_resign(&ap);
		approval_release(&ap);
	}
}

static void as_payload(const uint8_t *data, size_t size)
{
	if (size > APPROVAL_MAX)
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
	struct approval ap;
	if (verify(tok, n, &ap) == 0) {
		if (memcmp(ap.pk, key1.pk, 32) != 0)
			abort();   /* key 1's signature verified under another pk */
		check_resign(&ap);
		approval_release(&ap);
	}
	free(tok);
}

static void as_count(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		abort();
	memcpy(text, data, size);
	text[size] = '\0';
	const char *toks[APPROVALS_MAX + 4];
	size_t n = 0;
	for (char *line = text, *next; line && n < sizeof(toks) / sizeof(toks[0]); line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		toks[n++] = line;
	}
	unsigned char d[LTHASH_DIGEST_BYTES];
	memset(d, 0, sizeof(d));
	char why[300];
	memset(why, 'x', sizeof(why));
	size_t got = approval_count(toks, n, &trust, "fuzz", 1, "", d, why, sizeof(why));
	if (got > 2 || got > n || strlen(why) >= sizeof(why))
		abort();
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	init();
	as_token((const char *)data, size);
	as_payload(data, size);
	as_count(data, size);
	return 0;
}
