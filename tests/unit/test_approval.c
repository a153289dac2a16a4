/* test_approval.c: unit tests of common/approval.c: the approval token
 * (sign / verify round trip, a change of any byte, a kid that is not its
 * pk's, malformed and oversized tokens, payloads signed by hand that break
 * the format) and a node's count (keys not in its file, one key twice, a
 * replay from another version, another subscription or state, enough). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "approval.h"
#include "buf.h"
#include "keys.h"
#include "lthash.h"

#define B64URL sodium_base64_VARIANT_URLSAFE_NO_PADDING
#define DOMAIN "tether-approval-v1\n"

static struct signing_key A, B, C;   /* A and B approve; C is unknown to the node */
static struct trust AB;               /* the node's --approvers: A and B */

static void make(struct signing_key *k, char seedbyte)
{
	unsigned char seed[32];
	memset(seed, seedbyte, sizeof(seed));
	crypto_sign_seed_keypair(k->pk, k->sk, seed);
	keys_id(k->pk, k->kid);
}

static int setup(void **state)
{
	(void)state;
	if (sodium_init() < 0)
		return -1;
	make(&A, 'a');
	make(&B, 'b');
	make(&C, 'c');
	AB.n = 2;
	memcpy(AB.key[0].pk, A.pk, 32);
	memcpy(AB.key[0].kid, A.kid, sizeof(A.kid));
	memcpy(AB.key[1].pk, B.pk, 32);
	memcpy(AB.key[1].kid, B.kid, sizeof(B.kid));
	return 0;
}

static void digest_of(char c, unsigned char d[LTHASH_DIGEST_BYTES])
{
	memset(d, c, LTHASH_DIGEST_BYTES);
}

static char *sign(const struct signing_key *k, uint64_t version, const char *sub, char dc)
{
	struct approval ap = { .version = version, .sub = (char *)sub };
	digest_of(dc, ap.digest);
	return approval_sign(&ap, k);
}

/* A token made by hand from a payload text, signed by k. */
static char *by_hand(const char *payload, const struct signing_key *k)
{
	struct buf m = BUF_INIT;
	buf_puts(&m, DOMAIN);
	buf_puts(&m, payload);
	unsigned char sig[crypto_sign_BYTES];
	crypto_sign_detached(sig, NULL, (const unsigned char *)m.data, m.len, k->sk);
	buf_release(&m);
	size_t n = strlen(payload);
	size_t pl = sodium_base64_ENCODED_LEN(n, B64URL), sl = sodium_base64_ENCODED_LEN(sizeof(sig), B64URL);
	char *tok = malloc(pl + sl + 1);
	sodium_bin2base64(tok, pl, (const unsigned char *)payload, n, B64URL);
	size_t at = strlen(tok);
	tok[at++] = '.';
	sodium_bin2base64(tok + at, sl, sig, sizeof(sig), B64URL);
	return tok;
}

static char *pk64(const struct signing_key *k)
{
	return keys_b64_encode(k->pk, 32);
}

static void test_round_trip(void **state)
{
	(void)state;
	char *tok = sign(&A, 8, "cluster/,route/", 'x');
	struct approval ap;
	char err[256];
	assert_int_equal(approval_verify(tok, strlen(tok), &ap, err, sizeof(err)), 0);
	assert_int_equal(ap.version, 8);
	assert_string_equal(ap.sub, "cluster/,route/");
	assert_string_equal(ap.kid, A.kid);
	assert_memory_equal(ap.pk, A.pk, 32);
	unsigned char d[LTHASH_DIGEST_BYTES];
	digest_of('x', d);
	assert_memory_equal(ap.digest, d, sizeof(d));
	approval_release(&ap);
	/* deterministic: the same claims, the same token */
	char *again = sign(&A, 8, "cluster/,route/", 'x');
	assert_string_equal(tok, again);
	free(again);
	free(tok);
}

static void test_every_byte_matters(void **state)
{
	(void)state;
	char *tok = sign(&B, 3, "", 'y');
	size_t n = strlen(tok);
	struct approval ap;
	char err[256];
	for (size_t i = 0; i < n; i++) {
		char saved = tok[i];
		tok[i] = saved == 'A' ? 'B' : 'A';
		int rc = approval_verify(tok, n, &ap, err, sizeof(err));
		if (rc == 0) {
			/* only a spelling base64url forbids could decode alike: never */
			approval_release(&ap);
			fail_msg("byte %zu changed and the token still verifies", i);
		}
		assert_true(err[0] != '\0');
		tok[i] = saved;
	}
	assert_int_equal(approval_verify(tok, n, &ap, err, sizeof(err)), 0);
	approval_release(&ap);
	free(tok);
}

static void test_kid_must_be_pks(void **state)
{
	(void)state;
	/* C signs, claims A's kid with its own pk: the kid does not match */
	char *pc = pk64(&C);
	char payload[512];
	snprintf(payload, sizeof(payload),
		 "{\"digest\":\"%064d\",\"kid\":\"%s\",\"pk\":\"%s\",\"sub\":\"\",\"v\":1,\"version\":5}", 0, A.kid, pc);
	char *tok = by_hand(payload, &C);
	struct approval ap;
	char err[256];
	assert_int_equal(approval_verify(tok, strlen(tok), &ap, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "is not the id of its pk"));
	free(tok);
	/* C signs with A's pk and kid: the signature is not A's */
	char *pa = pk64(&A);
	snprintf(payload, sizeof(payload),
		 "{\"digest\":\"%064d\",\"kid\":\"%s\",\"pk\":\"%s\",\"sub\":\"\",\"v\":1,\"version\":5}", 0, A.kid, pa);
	tok = by_hand(payload, &C);
	assert_int_equal(approval_verify(tok, strlen(tok), &ap, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "bad signature"));
	free(tok);
	/* the same payload signed by A verifies */
	tok = by_hand(payload, &A);
	assert_int_equal(approval_verify(tok, strlen(tok), &ap, err, sizeof(err)), 0);
	approval_release(&ap);
	free(tok);
	free(pa);
	free(pc);
}

static void test_bad_payloads(void **state)
{
	(void)state;
	char *pa = pk64(&A);
	static const char z64[] = "0000000000000000000000000000000000000000000000000000000000000000";
	struct {
		const char *digest, *tail;
	} cases[] = {
		{ z64, "\"sub\":\"\",\"v\":2,\"version\":5" },
		{ z64, "\"sub\":\"\",\"v\":1,\"version\":-5" },
		{ z64 + 1, "\"sub\":\"\",\"v\":1,\"version\":5" },
		{ z64, "\"sub\":7,\"v\":1,\"version\":5" },
		{ z64, "\"v\":1,\"version\":5" },
		{ z64, "\"sub\":\"\",\"v\":1,\"version\":5,\"version\":6" },
		{ "ABCD", "\"sub\":\"\",\"v\":1,\"version\":5" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char payload[512];
		snprintf(payload, sizeof(payload), "{\"digest\":\"%s\",\"kid\":\"%s\",\"pk\":\"%s\",%s}", cases[i].digest,
			 A.kid, pa, cases[i].tail);
		char *tok = by_hand(payload, &A);
		struct approval ap;
		char err[256] = "";
		if (approval_verify(tok, strlen(tok), &ap, err, sizeof(err)) == 0) {
			approval_release(&ap);
			fail_msg("payload %zu verified: %s", i, payload);
		}
		assert_non_null(strstr(err, "approval"));
		free(tok);
	}
	{
		char *tok = by_hand("[1,2,3]", &A);
		struct approval ap;
		char err[256] = "";
		assert_int_equal(approval_verify(tok, strlen(tok), &ap, err, sizeof(err)), -1);
		free(tok);
	}
	/* a pk that is not 32 bytes */
	char payload[512];
	snprintf(payload, sizeof(payload),
		 "{\"digest\":\"%064d\",\"kid\":\"%s\",\"pk\":\"AAAA\",\"sub\":\"\",\"v\":1,\"version\":5}", 0, A.kid);
	char *tok = by_hand(payload, &A);
	struct approval ap;
	char err[256];
	assert_int_equal(approval_verify(tok, strlen(tok), &ap, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "pk"));
	free(tok);
	free(pa);
}

static void test_malformed(void **state)
{
	(void)state;
	struct approval ap;
	char err[256];
	const char *bad[] = { "", ".", "abc", "a.b.c", "YQ.YQ", "%%%.%%%" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(approval_verify(bad[i], strlen(bad[i]), &ap, err, sizeof(err)), -1);
	char *big = malloc(APPROVAL_MAX + 2);
	memset(big, 'A', APPROVAL_MAX + 1);
	big[APPROVAL_MAX + 1] = '\0';
	assert_int_equal(approval_verify(big, APPROVAL_MAX + 1, &ap, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "longer than"));
	free(big);
	char *tok = sign(&A, 1, "", 'z');
	size_t n = strlen(tok);
	tok[3] = '\0';   /* a NUL inside the length given */
	assert_int_equal(approval_verify(tok, n, &ap, err, sizeof(err)), -1);
	free(tok);
}

static void test_count(void **state)
{
	(void)state;
	unsigned char d[LTHASH_DIGEST_BYTES];
	digest_of('s', d);
	char why[1024];
	char *a8 = sign(&A, 8, "cluster/", 's'), *b8 = sign(&B, 8, "cluster/", 's');
	char *c8 = sign(&C, 8, "cluster/", 's'), *b7 = sign(&B, 7, "cluster/", 's');
	char *bsub = sign(&B, 8, "route/", 's'), *bdig = sign(&B, 8, "cluster/", 't');

	const char *both[] = { a8, b8 };
	assert_int_equal(approval_count(both, 2, &AB, "approvers", 8, "cluster/", d, why, sizeof(why)), 2);
	assert_string_equal(why, "");

	/* the plane's key alone: nothing to count */
	assert_int_equal(approval_count(NULL, 0, &AB, "approvers", 8, "cluster/", d, why, sizeof(why)), 0);

	/* an unknown key */
	const char *unknown[] = { a8, c8 };
	assert_int_equal(approval_count(unknown, 2, &AB, "/etc/tether/approvers", 8, "cluster/", d, why,
					sizeof(why)), 1);
	assert_non_null(strstr(why, "is not in /etc/tether/approvers"));
	char c8kid[9];
	snprintf(c8kid, sizeof(c8kid), "%.8s", C.kid);
	assert_non_null(strstr(why, c8kid));

	/* one key twice */
	const char *twice[] = { a8, a8 };
	assert_int_equal(approval_count(twice, 2, &AB, "approvers", 8, "cluster/", d, why, sizeof(why)), 1);
	assert_non_null(strstr(why, "counted once"));

	/* replayed from version 7 */
	const char *replay[] = { a8, b7 };
	assert_int_equal(approval_count(replay, 2, &AB, "approvers", 8, "cluster/", d, why, sizeof(why)), 1);
	assert_non_null(strstr(why, "signed version 7, not 8"));

	/* another subscription, another state */
	const char *other[] = { bsub, bdig };
	assert_int_equal(approval_count(other, 2, &AB, "approvers", 8, "cluster/", d, why, sizeof(why)), 0);
	assert_non_null(strstr(why, "subscription 'route/'"));
	assert_non_null(strstr(why, "digest differs"));

	/* a key whose kid is in the file but with another pk cannot exist
	 * (kid = id(pk)); a broken token is named by its place */
	const char *broken[] = { "nope" };
	assert_int_equal(approval_count(broken, 1, &AB, "approvers", 8, "cluster/", d, why, sizeof(why)), 0);
	assert_non_null(strstr(why, "approvals[0]"));

	/* a short why is cut, never overrun */
	char tiny[8];
	assert_int_equal(approval_count(replay, 2, &AB, "approvers", 8, "cluster/", d, tiny, sizeof(tiny)), 1);
	assert_true(strlen(tiny) < sizeof(tiny));

	free(a8);
	free(b8);
	free(c8);
	free(b7);
	free(bsub);
	free(bdig);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_every_byte_matters),
		cmocka_unit_test(test_kid_must_be_pks),
		cmocka_unit_test(test_bad_payloads),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_count),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
