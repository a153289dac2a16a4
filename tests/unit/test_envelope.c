/* test_envelope.c: unit tests of common/envelope.c and the sealed form in
 * common/resource.c: seal / wrap / unwrap / open round trips (node and
 * recovery), a wrong key, a wrap moved between envelopes (the key
 * commitment), ciphertext moved between secrets or names (the AAD), every
 * field's refusals (truncated, odd and non-alphabet base64, wrong types,
 * unknown and missing fields), the stored form's wraps (duplicates, the
 * cap) and superseded, the push body's canonical bytes and its refusals
 * (envelope_push_body_checked), the key commitment checked by
 * envelope_open itself, the recovery key id computed by envelope_seal,
 * peer-given keys shown sanitized in errors, no plaintext in any error,
 * and resource_validate of both forms (and its RES_V_* flags). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "envelope.h"
#include "json.h"
#include "keys.h"
#include "resource.h"
#include "util.h"

static const char BODY[] = "{\"cert\":\"-----BEGIN CERTIFICATE-----\\nMIIB\\n-----END CERTIFICATE-----\\n\","
			   "\"key\":\"-----BEGIN PRIVATE KEY-----\\nSECRETKEYBYTES\\n-----END PRIVATE KEY-----\\n\"}";

/* A recovery key and two nodes' X25519 pairs. */
static struct {
	unsigned char rpk[32], rsk[32];
	char rkid[KEY_ID_LEN + 1];
	unsigned char apk[32], ask[32], bpk[32], bsk[32];
	char akid[KEY_ID_LEN + 1], bkid[KEY_ID_LEN + 1];
} K;

static int group_setup(void **state)
{
	(void)state;
	if (sodium_init() < 0)
		return -1;
	crypto_box_keypair(K.rpk, K.rsk);
	keys_id(K.rpk, K.rkid);
	crypto_box_keypair(K.apk, K.ask);
	crypto_box_keypair(K.bpk, K.bsk);
	keys_id(K.apk, K.akid);
	keys_id(K.bpk, K.bkid);
	return 0;
}

/* A sealed secret: its "sealed" object and stored text with wraps for
 * node a (and b when both). */
struct sealed {
	cJSON *sealed;
	unsigned char dk[ENVELOPE_DK_BYTES];
	char *wrap_a, *wrap_b;
	char *stored;
};

static void seal(struct sealed *s, const char *name, const char *body)
{
	char err[256] = "";
	memset(s, 0, sizeof(*s));
	s->sealed = envelope_seal(name, (const unsigned char *)body, strlen(body), K.rpk, K.rkid, s->dk, err,
				  sizeof(err));
	if (!s->sealed)
		fail_msg("seal %s: %s", name, err);
	s->wrap_a = envelope_wrap(s->dk, K.apk);
	s->wrap_b = envelope_wrap(s->dk, K.bpk);
	assert_non_null(s->wrap_a);
	assert_non_null(s->wrap_b);
	cJSON *doc = cJSON_CreateObject();
	cJSON_AddItemToObject(doc, "sealed", cJSON_Duplicate(s->sealed, true));
	cJSON *w = cJSON_AddObjectToObject(doc, "wraps");
	cJSON_AddStringToObject(w, K.akid, s->wrap_a);
	cJSON_AddStringToObject(w, K.bkid, s->wrap_b);
	s->stored = cJSON_PrintUnformatted(doc);
	cJSON_Delete(doc);
}

static void unseal(struct sealed *s)
{
	cJSON_Delete(s->sealed);
	free(s->wrap_a);
	free(s->wrap_b);
	free(s->stored);
	sodium_memzero(s->dk, sizeof(s->dk));
}

static void decode_ok(const cJSON *sealed, struct envelope *e)
{
	char err[256] = "";
	if (envelope_decode(sealed, e, err, sizeof(err)) < 0)
		fail_msg("decode: %s", err);
}

/* The sealed object of s with field set to a string value (or removed
 * when value is NULL); decoded: the error must start with want. */
static void expect_field_err(const cJSON *sealed, const char *field, const char *value, const char *want)
{
	cJSON *c = cJSON_Duplicate(sealed, true);
	cJSON_DeleteItemFromObjectCaseSensitive(c, field);
	if (value)
		cJSON_AddStringToObject(c, field, value);
	struct envelope e;
	char err[256] = "";
	if (envelope_decode(c, &e, err, sizeof(err)) == 0)
		fail_msg("%s='%s' accepted", field, value ? value : "(none)");
	if (strncmp(err, want, strlen(want)) != 0)
		fail_msg("%s='%s': error '%s', want '%s...'", field, value ? value : "(none)", err, want);
	assert_null(e.ct);
	cJSON_Delete(c);
}

/* ---- round trips ----------------------------------------------------------- */

static void test_round_trip(void **state)
{
	(void)state;
	struct sealed s;
	seal(&s, "secret/web", BODY);
	struct envelope e;
	decode_ok(s.sealed, &e);
	assert_string_equal(e.rk, K.rkid);
	assert_int_equal(strlen(e.id), ENVELOPE_ID_LEN);
	assert_int_equal(e.ct_len, strlen(BODY) + crypto_aead_xchacha20poly1305_ietf_ABYTES);

	/* node a, node b and the recovery key each get the data key back */
	unsigned char dk[ENVELOPE_DK_BYTES];
	char err[256] = "";
	const unsigned char *pks[2] = { K.apk, K.bpk }, *sks[2] = { K.ask, K.bsk };
	const char *wraps[2] = { s.wrap_a, s.wrap_b };
	for (int i = 0; i < 3; i++) {
		int rc = i < 2 ? envelope_unwrap(&e, wraps[i], strlen(wraps[i]), pks[i], sks[i], dk, err, sizeof(err))
			       : envelope_unwrap_recovery(&e, K.rpk, K.rsk, dk, err, sizeof(err));
		if (rc < 0)
			fail_msg("unwrap %d: %s", i, err);
		assert_memory_equal(dk, s.dk, sizeof(dk));
		size_t len = 0;
		char *plain = envelope_open(&e, "secret/web", dk, &len, err, sizeof(err));
		if (!plain)
			fail_msg("open %d: %s", i, err);
		assert_int_equal(len, strlen(BODY));
		assert_string_equal(plain, BODY);
		envelope_wipe(plain);
	}
	envelope_release(&e);
	assert_null(e.ct);

	/* two seals of the same body differ in every random part */
	struct sealed t;
	seal(&t, "secret/web", BODY);
	for (const char *const *f = (const char *const[]){ "id", "recovery", "kc", "nonce", "ct", NULL }; *f; f++)
		assert_string_not_equal(json_get_string(s.sealed, *f), json_get_string(t.sealed, *f));
	unseal(&t);
	unseal(&s);
	envelope_wipe(NULL);
}

static void test_empty_and_largest_body(void **state)
{
	(void)state;
	char *big = malloc(ENVELOPE_BODY_MAX + 2);
	assert_non_null(big);
	memset(big, 'x', ENVELOPE_BODY_MAX + 1);
	big[ENVELOPE_BODY_MAX + 1] = '\0';
	unsigned char dk[ENVELOPE_DK_BYTES];
	char err[256] = "";
	/* one byte over: refused, naming the secret and the size */
	assert_null(envelope_seal("secret/big", (unsigned char *)big, ENVELOPE_BODY_MAX + 1, K.rpk, K.rkid, dk, err,
				  sizeof(err)));
	assert_non_null(strstr(err, "secret/big"));
	assert_non_null(strstr(err, "262145"));
	/* exactly the largest: seals, decodes and opens */
	big[ENVELOPE_BODY_MAX] = '\0';
	struct sealed s;
	seal(&s, "secret/big", big);
	struct envelope e;
	decode_ok(s.sealed, &e);
	size_t len = 0;
	char *plain = envelope_open(&e, "secret/big", s.dk, &len, err, sizeof(err));
	assert_non_null(plain);
	assert_int_equal(len, ENVELOPE_BODY_MAX);
	assert_int_equal(memcmp(plain, big, len), 0);
	envelope_wipe(plain);
	envelope_release(&e);
	unseal(&s);
	/* and an empty body */
	seal(&s, "secret/empty", "");
	decode_ok(s.sealed, &e);
	plain = envelope_open(&e, "secret/empty", s.dk, &len, err, sizeof(err));
	assert_non_null(plain);
	assert_int_equal(len, 0);
	assert_string_equal(plain, "");
	envelope_wipe(plain);
	envelope_release(&e);
	unseal(&s);
	free(big);
}

static void test_names_must_be_full(void **state)
{
	(void)state;
	unsigned char dk[ENVELOPE_DK_BYTES];
	char err[256] = "";
	static const char *const bad[] = { "web", "cluster/web", "secret/", "secret/a b", "secret/..", NULL };
	for (int i = 0; bad[i]; i++) {
		err[0] = '\0';
		if (envelope_seal(bad[i], (const unsigned char *)"x", 1, K.rpk, K.rkid, dk, err, sizeof(err)))
			fail_msg("sealed for name '%s'", bad[i]);
		assert_non_null(strstr(err, "secret/NAME"));
	}
	/* a recovery key id that is not one */
	assert_null(envelope_seal("secret/a", (const unsigned char *)"x", 1, K.rpk, "XYZ", dk, err, sizeof(err)));
	assert_non_null(strstr(err, "recovery key id does not match the key"));
	/* a name with control characters is shown escaped */
	assert_null(envelope_seal("secret/a\nb\x1b", (const unsigned char *)"x", 1, K.rpk, NULL, dk, err,
				  sizeof(err)));
	assert_non_null(strstr(err, "('secret/a\\x0ab\\x1b' is not)"));
	/* opening under a short name is refused the same way */
	struct sealed s;
	seal(&s, "secret/web", BODY);
	struct envelope e;
	decode_ok(s.sealed, &e);
	assert_null(envelope_open(&e, "web", s.dk, NULL, err, sizeof(err)));
	assert_non_null(strstr(err, "secret/NAME"));
	envelope_release(&e);
	unseal(&s);
}

/* ---- what must fail ------------------------------------------------------- */

static void test_wrong_node_key(void **state)
{
	(void)state;
	struct sealed s;
	seal(&s, "secret/web", BODY);
	struct envelope e;
	decode_ok(s.sealed, &e);
	unsigned char dk[ENVELOPE_DK_BYTES];
	char err[256] = "";
	/* b's key on a's wrap */
	assert_int_equal(envelope_unwrap(&e, s.wrap_a, strlen(s.wrap_a), K.bpk, K.bsk, dk, err, sizeof(err)), -1);
	assert_string_equal(err, "does not open with this key");
	/* a node's key on the recovery wrap */
	assert_int_equal(envelope_unwrap_recovery(&e, K.apk, K.ask, dk, err, sizeof(err)), -1);
	assert_string_equal(err, "does not open with this key");
	/* a wrap that is not base64 of 80 bytes */
	assert_int_equal(envelope_unwrap(&e, "AAAA", 4, K.apk, K.ask, dk, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "80 bytes"));
	assert_int_equal(envelope_unwrap(&e, s.wrap_a, strlen(s.wrap_a) - 4, K.apk, K.ask, dk, err, sizeof(err)), -1);
	assert_int_equal(envelope_unwrap(&e, NULL, 0, K.apk, K.ask, dk, err, sizeof(err)), -1);
	/* one flipped byte of the wrap */
	unsigned char raw[ENVELOPE_WRAP_BYTES];
	assert_int_equal(keys_b64_exact(s.wrap_a, strlen(s.wrap_a), raw, sizeof(raw)), 0);
	raw[40] ^= 1;
	char *flipped = keys_b64_encode(raw, sizeof(raw));
	assert_int_equal(envelope_unwrap(&e, flipped, strlen(flipped), K.apk, K.ask, dk, err, sizeof(err)), -1);
	assert_string_equal(err, "does not open with this key");
	free(flipped);
	envelope_release(&e);
	unseal(&s);
}

static void test_wrap_swapped_between_envelopes(void **state)
{
	(void)state;
	struct sealed s, t;
	seal(&s, "secret/web", BODY);
	seal(&t, "secret/web", BODY);
	struct envelope e;
	decode_ok(s.sealed, &e);
	unsigned char dk[ENVELOPE_DK_BYTES];
	char err[256] = "";
	/* t's wrap opens with a's key, to t's data key: the commitment of s refuses it */
	assert_int_equal(envelope_unwrap(&e, t.wrap_a, strlen(t.wrap_a), K.apk, K.ask, dk, err, sizeof(err)), -1);
	assert_string_equal(err, "opens to another data key (not this envelope's)");
	/* the data key is not left behind */
	unsigned char zero[ENVELOPE_DK_BYTES] = { 0 };
	assert_memory_equal(dk, zero, sizeof(dk));
	/* the recovery wrap of t put into s: the same */
	cJSON *c = cJSON_Duplicate(s.sealed, true);
	cJSON_ReplaceItemInObjectCaseSensitive(c, "recovery", cJSON_CreateString(json_get_string(t.sealed, "recovery")));
	struct envelope e2;
	decode_ok(c, &e2);
	assert_int_equal(envelope_unwrap_recovery(&e2, K.rpk, K.rsk, dk, err, sizeof(err)), -1);
	assert_string_equal(err, "opens to another data key (not this envelope's)");
	envelope_release(&e2);
	cJSON_Delete(c);
	envelope_release(&e);
	unseal(&s);
	unseal(&t);
}

static void test_ciphertext_swapped(void **state)
{
	(void)state;
	struct sealed s, t;
	seal(&s, "secret/a", BODY);
	seal(&t, "secret/b", "{\"cert\":\"other\",\"key\":\"other\"}");
	char err[256] = "";
	/* s's ct and nonce moved into t: t's data key does not decrypt them */
	cJSON *c = cJSON_Duplicate(t.sealed, true);
	cJSON_ReplaceItemInObjectCaseSensitive(c, "ct", cJSON_CreateString(json_get_string(s.sealed, "ct")));
	cJSON_ReplaceItemInObjectCaseSensitive(c, "nonce", cJSON_CreateString(json_get_string(s.sealed, "nonce")));
	struct envelope e;
	decode_ok(c, &e);
	assert_null(envelope_open(&e, "secret/b", t.dk, NULL, err, sizeof(err)));
	assert_string_equal(err, "does not decrypt: changed, or another secret's");
	envelope_release(&e);
	cJSON_Delete(c);
	static const char aead[] = "does not decrypt: changed, or another secret's";

	/* the whole of s's envelope served as secret/b: the name is bound */
	decode_ok(s.sealed, &e);
	assert_null(envelope_open(&e, "secret/b", s.dk, NULL, err, sizeof(err)));
	assert_string_equal(err, "does not decrypt: changed, or another secret's");
	/* and its id too: s's ciphertext under another id */
	char saved = e.id[0];
	e.id[0] = saved == 'a' ? 'b' : 'a';
	err[0] = '\0';
	assert_null(envelope_open(&e, "secret/a", s.dk, NULL, err, sizeof(err)));
	assert_string_equal(err, aead);
	e.id[0] = saved;
	/* one flipped byte of the ciphertext, of the nonce */
	e.ct[3] ^= 0x20;
	err[0] = '\0';
	assert_null(envelope_open(&e, "secret/a", s.dk, NULL, err, sizeof(err)));
	assert_string_equal(err, aead);
	e.ct[3] ^= 0x20;
	e.nonce[0] ^= 1;
	err[0] = '\0';
	assert_null(envelope_open(&e, "secret/a", s.dk, NULL, err, sizeof(err)));
	assert_string_equal(err, aead);
	e.nonce[0] ^= 1;
	char *plain = envelope_open(&e, "secret/a", s.dk, NULL, err, sizeof(err));
	assert_non_null(plain);
	envelope_wipe(plain);
	envelope_release(&e);
	unseal(&s);
	unseal(&t);
}

static void test_field_refusals(void **state)
{
	(void)state;
	struct sealed s;
	seal(&s, "secret/web", BODY);
	const char *kc = json_get_string(s.sealed, "kc");
	char *buf = malloc(strlen(kc) + 8);
	assert_non_null(buf);

	/* each base64 field: truncated, missing padding, an extra byte, white
	 * space, a byte over 0x80, nonzero trailing bits, another type */
	static const char *const b64_fields[] = { "recovery", "kc", "nonce", NULL };
	for (int i = 0; b64_fields[i]; i++) {
		const char *f = b64_fields[i];
		const char *v = json_get_string(s.sealed, f);
		char want[64];
		snprintf(want, sizeof(want), "sealed.%s: must be ", f);
		size_t n = strlen(v);
		char *w = malloc(n + 8);
		assert_non_null(w);
		snprintf(w, n + 8, "%.*s", (int)(n - 4), v);             /* truncated by a quantum */
		expect_field_err(s.sealed, f, w, want);
		snprintf(w, n + 8, "%.*s", (int)(n - 1), v);             /* padding cut */
		expect_field_err(s.sealed, f, w, want);
		snprintf(w, n + 8, "AAAA%s", v);                          /* 3 bytes too many */
		expect_field_err(s.sealed, f, w, want);
		snprintf(w, n + 8, " %s", v);                             /* white space */
		expect_field_err(s.sealed, f, w, want);
		snprintf(w, n + 8, "%s", v);
		w[2] = (char)0xc3;                                        /* not the alphabet */
		expect_field_err(s.sealed, f, w, want);
		snprintf(w, n + 8, "%s", v);
		w[1] = '-';                                               /* base64url's */
		expect_field_err(s.sealed, f, w, want);
		expect_field_err(s.sealed, f, NULL, "sealed.");
		free(w);
	}
	/* nonzero trailing bits: kc is 32 bytes, "...X=" with X's low bits set */
	snprintf(buf, strlen(kc) + 8, "%s", kc);
	size_t kl = strlen(buf);
	assert_int_equal(buf[kl - 1], '=');
	buf[kl - 2] = buf[kl - 2] == 'B' ? 'C' : 'B';    /* B = 000001, C = 000010: low 2 bits nonzero */
	expect_field_err(s.sealed, "kc", buf, "sealed.kc: must be 32 bytes");
	/* ct: empty, shorter than its tag, odd base64 */
	expect_field_err(s.sealed, "ct", "", "sealed.ct: must be 16 to");
	expect_field_err(s.sealed, "ct", "AAAAAAAAAAAAAAAAAAAA", "sealed.ct: must be 16 to");
	expect_field_err(s.sealed, "ct", "AAAAAAAAAAAAAAAAAAAAAAA", "sealed.ct: must be 16 to");
	expect_field_err(s.sealed, "ct", "AAAAAAAAAAAAAAAAAAAAAAA*", "sealed.ct: must be 16 to");
	expect_field_err(s.sealed, "ct", NULL, "sealed.ct: missing");
	/* id and rk */
	expect_field_err(s.sealed, "id", "0123456789abcdef0123456789abcde", "sealed.id: must be 32 lowercase hex");
	expect_field_err(s.sealed, "id", "0123456789ABCDEF0123456789abcdef", "sealed.id: must be 32 lowercase hex");
	expect_field_err(s.sealed, "id", NULL, "sealed.id: missing");
	expect_field_err(s.sealed, "rk", "0123", "sealed.rk: must be a recovery key id");
	expect_field_err(s.sealed, "rk", NULL, "sealed.rk: missing");
	/* v */
	expect_field_err(s.sealed, "v", "1", "sealed.v: must be 1");
	cJSON *c = cJSON_Duplicate(s.sealed, true);
	cJSON_ReplaceItemInObjectCaseSensitive(c, "v", cJSON_CreateNumber(2));
	struct envelope e;
	char err[256];
	assert_int_equal(envelope_decode(c, &e, err, sizeof(err)), -1);
	assert_string_equal(err, "sealed.v: must be 1 (an envelope of another version: upgrade tether)");
	cJSON_Delete(c);
	expect_field_err(s.sealed, "v", NULL, "sealed.v: missing");
	/* an unknown field, a twice given one, not an object */
	c = cJSON_Duplicate(s.sealed, true);
	cJSON_AddStringToObject(c, "extra", "x");
	assert_int_equal(envelope_decode(c, &e, err, sizeof(err)), -1);
	assert_string_equal(err, "sealed: unknown field 'extra'");
	cJSON_Delete(c);
	c = cJSON_Duplicate(s.sealed, true);
	cJSON_AddStringToObject(c, "ct", json_get_string(s.sealed, "ct"));   /* cJSON keeps both */
	assert_int_equal(envelope_decode(c, &e, err, sizeof(err)), -1);
	assert_string_equal(err, "sealed.ct: given twice");
	assert_null(e.ct);
	cJSON_Delete(c);
	c = cJSON_CreateString("x");
	assert_int_equal(envelope_decode(c, &e, err, sizeof(err)), -1);
	assert_string_equal(err, "sealed: must be an object");
	assert_int_equal(envelope_decode(NULL, &e, err, sizeof(err)), -1);
	cJSON_Delete(c);
	free(buf);
	unseal(&s);
}

/* envelope_open checks the key commitment itself: a data key that came
 * some other way than envelope_unwrap (kept from another envelope, or
 * given with a changed kc) is refused before decrypting. */
static void test_open_checks_commitment(void **state)
{
	(void)state;
	struct sealed s, t;
	seal(&s, "secret/web", BODY);
	seal(&t, "secret/web", BODY);
	struct envelope e;
	decode_ok(s.sealed, &e);
	char err[256] = "";
	/* t's data key on s */
	assert_null(envelope_open(&e, "secret/web", t.dk, NULL, err, sizeof(err)));
	assert_string_equal(err, "opens to another data key (not this envelope's)");
	/* the right data key, but kc changed: s's ciphertext would decrypt,
	 * yet the envelope no longer commits to that key */
	e.kc[0] ^= 1;
	err[0] = '\0';
	char *plain = envelope_open(&e, "secret/web", s.dk, NULL, err, sizeof(err));
	if (plain) {
		envelope_wipe(plain);
		fail_msg("opened with a kc that is not the data key's");
	}
	assert_string_equal(err, "opens to another data key (not this envelope's)");
	e.kc[0] ^= 1;
	plain = envelope_open(&e, "secret/web", s.dk, NULL, err, sizeof(err));
	assert_non_null(plain);
	envelope_wipe(plain);
	envelope_release(&e);
	unseal(&s);
	unseal(&t);
}

/* envelope_seal computes sealed.rk from the recovery key: an id given
 * beside the key must be the key's. */
static void test_seal_recovery_kid(void **state)
{
	(void)state;
	unsigned char dk[ENVELOPE_DK_BYTES];
	char err[256] = "";
	/* a well-formed id of another key (node a's) */
	cJSON *s = envelope_seal("secret/a", (const unsigned char *)"x", 1, K.rpk, K.akid, dk, err, sizeof(err));
	if (s) {
		cJSON_Delete(s);
		fail_msg("sealed with a recovery key id that is not the key's");
	}
	assert_non_null(strstr(err, "secret/a: the recovery key id does not match the key"));
	/* the key's own id, or none: rk is the key's */
	for (int i = 0; i < 2; i++) {
		s = envelope_seal("secret/a", (const unsigned char *)"x", 1, K.rpk, i ? NULL : K.rkid, dk, err,
				  sizeof(err));
		if (!s)
			fail_msg("seal: %s", err);
		assert_string_equal(json_get_string(s, "rk"), K.rkid);
		cJSON_Delete(s);
	}
	sodium_memzero(dk, sizeof(dk));
}

/* A plaintext that is itself a sealed body (a file export wrote) is not
 * sealed again. */
static void test_seal_refuses_sealed_plaintext(void **state)
{
	(void)state;
	struct sealed s;
	seal(&s, "secret/web", BODY);
	char *push = envelope_push_body(s.stored, strlen(s.stored), NULL);
	assert_non_null(push);
	const char *const bodies[] = { s.stored, push, " \n{\"sealed\":1}", "{\"sealed\":\"SECRETKEYBYTES\"}",
				       "{\"cert\":\"x\",\"sealed\":{}}", NULL };
	unsigned char dk[ENVELOPE_DK_BYTES];
	for (int i = 0; bodies[i]; i++) {
		char err[256] = "";
		cJSON *c = envelope_seal("secret/x", (const unsigned char *)bodies[i], strlen(bodies[i]), K.rpk, K.rkid,
					 dk, err, sizeof(err));
		if (c) {
			cJSON_Delete(c);
			fail_msg("sealed a sealed body: %s", bodies[i]);
		}
		assert_non_null(strstr(err, "secret/x: the plaintext is itself a sealed secret's body"));
		assert_null(strstr(err, "SECRETKEYBYTES"));
	}
	/* a plaintext that only mentions "sealed" is fine */
	const char *const fine[] = { "{\"cert\":\"sealed\",\"key\":\"x\"}", "[{\"sealed\":1}]", "sealed",
				     "{\"x\":{\"sealed\":1}}", "{", NULL };
	for (int i = 0; fine[i]; i++) {
		char err[256] = "";
		cJSON *c = envelope_seal("secret/x", (const unsigned char *)fine[i], strlen(fine[i]), K.rpk, K.rkid, dk,
					 err, sizeof(err));
		if (!c)
			fail_msg("refused '%s': %s", fine[i], err);
		cJSON_Delete(c);
	}
	sodium_memzero(dk, sizeof(dk));
	free(push);
	unseal(&s);
}

/* No error of seal, unwrap or open holds any part of the plaintext. */
static void test_errors_hold_no_plaintext(void **state)
{
	(void)state;
	static const char mark[] = "SECRETKEYBYTES";
	struct sealed s, t;
	seal(&s, "secret/web", BODY);
	seal(&t, "secret/web", BODY);
	struct envelope e;
	decode_ok(s.sealed, &e);
	char err[512];
	unsigned char dk[ENVELOPE_DK_BYTES];
	/* each failing call; its error must be set and free of the mark */
	for (int i = 0; i < 8; i++) {
		memset(err, 0, sizeof(err));
		bool failed = false;
		char *p = NULL;
		switch (i) {
		case 0: p = envelope_open(&e, "secret/other", s.dk, NULL, err, sizeof(err)); break;
		case 1: p = envelope_open(&e, "secret/web", t.dk, NULL, err, sizeof(err)); break;
		case 2:
			e.ct[0] ^= 1;
			p = envelope_open(&e, "secret/web", s.dk, NULL, err, sizeof(err));
			e.ct[0] ^= 1;
			break;
		case 3: p = envelope_open(&e, "web", s.dk, NULL, err, sizeof(err)); break;
		case 4:
			failed = envelope_unwrap(&e, t.wrap_a, strlen(t.wrap_a), K.apk, K.ask, dk, err, sizeof(err)) < 0;
			break;
		case 5: failed = envelope_unwrap_recovery(&e, K.apk, K.ask, dk, err, sizeof(err)) < 0; break;
		case 6: {
			/* a body over the size cap, the mark in it */
			size_t n = ENVELOPE_BODY_MAX + 1;
			char *big = malloc(n);
			assert_non_null(big);
			for (size_t j = 0; j < n; j++)
				big[j] = mark[j % (sizeof(mark) - 1)];
			cJSON *c = envelope_seal("secret/big", (unsigned char *)big, n, K.rpk, K.rkid, dk, err,
						 sizeof(err));
			failed = c == NULL;
			cJSON_Delete(c);
			free(big);
			break;
		}
		default: {
			const char *body = "{\"sealed\":{\"SECRETKEYBYTES\":\"SECRETKEYBYTES\"}}";
			cJSON *c = envelope_seal("secret/web", (const unsigned char *)body, strlen(body), K.rpk, K.rkid,
						 dk, err, sizeof(err));
			failed = c == NULL;
			cJSON_Delete(c);
			break;
		}
		}
		if (i < 4)
			failed = p == NULL;
		envelope_wipe(p);
		if (!failed)
			fail_msg("case %d did not fail", i);
		if (!err[0])
			fail_msg("case %d: no error", i);
		if (strstr(err, mark) || strstr(err, "BEGIN"))
			fail_msg("case %d: the error holds plaintext: %s", i, err);
	}
	envelope_release(&e);
	unseal(&s);
	unseal(&t);
}

/* ---- the stored form -------------------------------------------------------- */

/* Checks text as the plane's paths may parse it: cJSON_Parse (which keeps
 * duplicate keys) and, when it takes the text, json_decode: the answer
 * must not depend on the parser. */
static int check_stored_text(const char *text, char *err, size_t errlen)
{
	cJSON *doc = cJSON_Parse(text);
	if (!doc)
		fail_msg("test text does not parse: %s", text);
	int rc = envelope_check_stored(doc, err, errlen);
	cJSON_Delete(doc);
	char jerr[256], err2[256];
	struct json_limits lim = { 0, 0 };
	doc = json_decode(text, strlen(text), &lim, jerr, sizeof(jerr));
	if (doc) {
		int rc2 = envelope_check_stored(doc, err2, sizeof(err2));
		cJSON_Delete(doc);
		if (rc2 != rc || (rc < 0 && strcmp(err, err2) != 0))
			fail_msg("json_decode's tree answers %d (%s), cJSON_Parse's %d (%s)", rc2, rc2 ? err2 : "",
				 rc, rc ? err : "");
	}
	return rc;
}

/* The stored text of s with "wraps" / "superseded" given as JSON text (NULL: left out). */
static char *stored_with(const struct sealed *s, const char *wraps, const char *superseded, const char *extra)
{
	char *sealed = cJSON_PrintUnformatted(s->sealed);
	struct buf b = BUF_INIT;
	buf_printf(&b, "{\"sealed\":%s", sealed);
	if (wraps)
		buf_printf(&b, ",\"wraps\":%s", wraps);
	if (superseded)
		buf_printf(&b, ",\"superseded\":%s", superseded);
	if (extra)
		buf_printf(&b, ",%s", extra);
	buf_puts(&b, "}");
	free(sealed);
	return buf_detach(&b, NULL);
}

static void expect_stored(const struct sealed *s, const char *wraps, const char *superseded, const char *extra,
			  const char *want)
{
	char *text = stored_with(s, wraps, superseded, extra);
	char err[256] = "";
	int rc = check_stored_text(text, err, sizeof(err));
	if (!want && rc < 0)
		fail_msg("refused %s: %s", text, err);
	if (want && rc == 0)
		fail_msg("accepted %s, want %s", text, want);
	if (want && strcmp(err, want) != 0)
		fail_msg("error '%s', want '%s'", err, want);
	free(text);
}

static void test_stored_form(void **state)
{
	(void)state;
	struct sealed s;
	seal(&s, "secret/web", BODY);
	char err[256] = "";
	if (check_stored_text(s.stored, err, sizeof(err)) < 0)
		fail_msg("stored refused: %s", err);
	char w[256];
	snprintf(w, sizeof(w), "{\"%s\":\"%s\"}", K.akid, s.wrap_a);
	expect_stored(&s, "{}", NULL, NULL, NULL);
	expect_stored(&s, w, "[]", NULL, NULL);
	expect_stored(&s, w, "[\"0123456789abcdef0123456789abcdef\",\"fedcba9876543210fedcba9876543210\"]", NULL, NULL);
	/* refusals, each naming its field */
	expect_stored(&s, NULL, NULL, NULL, "wraps: missing (an object of node key id -> wrap, {} for none)");
	expect_stored(&s, "[]", NULL, NULL, "wraps: must be an object of node key id -> wrap");
	expect_stored(&s, "{\"ABCDEF0123456789\":\"x\"}", NULL, NULL,
		      "wraps: 'ABCDEF0123456789' is not a node key id (16 lowercase hex digits)");
	expect_stored(&s, "{\"abc\":\"x\"}", NULL, NULL, "wraps: 'abc' is not a node key id (16 lowercase hex digits)");
	/* a peer's keys are shown escaped, and cut */
	expect_stored(&s, "{\"a\\nb\\u001b[2J\\\\\":\"x\"}", NULL, NULL,
		      "wraps: 'a\\x0ab\\x1b[2J\\x5c' is not a node key id (16 lowercase hex digits)");
	expect_stored(&s, "{}", NULL, "\"\\u0007\":1",
		      "unknown field '\\x07' beside 'sealed' (a sealed secret holds only sealed, wraps and superseded)");
	char longkey[160], longwant[256];
	memset(longkey, 'k', 100);
	snprintf(longkey + 100, sizeof(longkey) - 100, "\":1");
	memmove(longkey + 1, longkey, strlen(longkey) + 1);
	longkey[0] = '"';
	snprintf(longwant, sizeof(longwant), "unknown field '%.64s...' beside 'sealed' (a sealed secret holds only "
		 "sealed, wraps and superseded)", longkey + 1);
	expect_stored(&s, "{}", NULL, longkey, longwant);
	/* the same node key id twice: whichever a reader takes, another one
	 * takes the other (cJSON_Parse keeps both; json_decode refuses it) */
	char dup[512], dupwant[128];
	snprintf(dup, sizeof(dup), "{\"%s\":\"%s\",\"%s\":\"%s\",\"%s\":\"%s\"}", K.akid, s.wrap_a, K.bkid,
		 s.wrap_b, K.akid, s.wrap_b);
	snprintf(dupwant, sizeof(dupwant), "wraps.%s: given twice (one wrap per node key)", K.akid);
	expect_stored(&s, dup, NULL, NULL, dupwant);
	snprintf(dup, sizeof(dup), "{\"%s\":\"%s\",\"%s\":\"%s\"}", K.akid, s.wrap_a, K.akid, s.wrap_a);
	expect_stored(&s, dup, NULL, NULL, dupwant);
	char bad[256], want[128];
	snprintf(bad, sizeof(bad), "{\"%s\":\"%.*s\"}", K.akid, (int)strlen(s.wrap_a) - 4, s.wrap_a);
	snprintf(want, sizeof(want), "wraps.%s: must be 80 bytes of standard base64 (with padding)", K.akid);
	expect_stored(&s, bad, NULL, NULL, want);
	snprintf(bad, sizeof(bad), "{\"%s\":7}", K.akid);
	expect_stored(&s, bad, NULL, NULL, want);
	expect_stored(&s, "{}", "{}", NULL, "superseded: must be an array of envelope ids");
	expect_stored(&s, "{}", "[\"0123\"]", NULL, "superseded[0]: must be an envelope id (32 lowercase hex digits)");
	expect_stored(&s, "{}", "[\"0123456789abcdef0123456789abcdef\",1]", NULL,
		      "superseded[1]: must be an envelope id (32 lowercase hex digits)");
	expect_stored(&s, "{}", NULL, "\"cert\":\"x\"",
		      "unknown field 'cert' beside 'sealed' (a sealed secret holds only sealed, wraps and superseded)");
	assert_int_equal(check_stored_text("{\"wraps\":{}}", err, sizeof(err)), -1);
	assert_string_equal(err, "sealed: missing");
	assert_int_equal(check_stored_text("{\"sealed\":{},\"wraps\":{}}", err, sizeof(err)), -1);
	assert_string_equal(err, "sealed.v: missing");
	assert_int_equal(check_stored_text("[]", err, sizeof(err)), -1);

	/* the caps: superseded past its maximum */
	struct buf b = BUF_INIT;
	buf_puts(&b, "[");
	for (int i = 0; i <= ENVELOPE_SUPERSEDED_MAX; i++)
		buf_printf(&b, "%s\"%032x\"", i ? "," : "", i);
	buf_puts(&b, "]");
	char *many = buf_detach(&b, NULL);
	expect_stored(&s, "{}", many, NULL, "superseded: more than 1000 ids");
	/* exactly the maximum is fine */
	char *comma = strrchr(many, ',');
	comma[0] = ']';
	comma[1] = '\0';
	expect_stored(&s, "{}", many, NULL, NULL);
	free(many);
	unseal(&s);
}

/* wraps: exactly ENVELOPE_WRAPS_MAX is fine, one more is refused. */
static void test_wraps_max(void **state)
{
	(void)state;
	struct sealed s;
	seal(&s, "secret/web", BODY);
	cJSON *doc = cJSON_CreateObject();
	cJSON_AddItemToObject(doc, "sealed", cJSON_Duplicate(s.sealed, true));
	cJSON *w = cJSON_AddObjectToObject(doc, "wraps");
	char kid[KEY_ID_LEN + 1];
	for (unsigned i = 0; i < ENVELOPE_WRAPS_MAX; i++) {
		snprintf(kid, sizeof(kid), "%016x", i);
		cJSON_AddItemToObject(w, kid, cJSON_CreateString(s.wrap_a));
	}
	char err[256] = "";
	if (envelope_check_stored(doc, err, sizeof(err)) < 0)
		fail_msg("%d wraps refused: %s", ENVELOPE_WRAPS_MAX, err);
	snprintf(kid, sizeof(kid), "%016x", ENVELOPE_WRAPS_MAX);
	cJSON_AddItemToObject(w, kid, cJSON_CreateString(s.wrap_a));
	assert_int_equal(envelope_check_stored(doc, err, sizeof(err)), -1);
	assert_string_equal(err, "wraps: more than 100000");
	cJSON_Delete(doc);
	unseal(&s);
}

/* ---- the push body ---------------------------------------------------------- */

static void test_push_body(void **state)
{
	(void)state;
	struct sealed s;
	seal(&s, "secret/web", BODY);
	size_t len = 0;
	char *push = envelope_push_body(s.stored, strlen(s.stored), &len);
	assert_non_null(push);
	assert_int_equal(len, strlen(push));
	/* only "sealed", its keys sorted, no spaces */
	cJSON *doc = cJSON_Parse(push);
	assert_non_null(doc);
	assert_int_equal(cJSON_GetArraySize(doc), 1);
	assert_non_null(cJSON_GetObjectItemCaseSensitive(doc, "sealed"));
	assert_null(strstr(push, "wraps"));
	assert_null(strchr(push, ' '));
	assert_true(strncmp(push, "{\"sealed\":{\"ct\":\"", 17) == 0);
	const char *order[] = { "\"ct\"", "\"id\"", "\"kc\"", "\"nonce\"", "\"recovery\"", "\"rk\"", "\"v\"" };
	for (int i = 1; i < 7; i++)
		assert_true(strstr(push, order[i - 1]) < strstr(push, order[i]));
	cJSON_Delete(doc);

	/* the same bytes from the same body written in another order, with
	 * spaces, with superseded, and from the push body itself */
	cJSON *sealed = cJSON_Duplicate(s.sealed, true);
	cJSON *rev = cJSON_CreateObject();
	cJSON *it;
	while ((it = cJSON_DetachItemViaPointer(sealed, cJSON_GetArrayItem(sealed, cJSON_GetArraySize(sealed) - 1))))
		cJSON_AddItemToObject(rev, it->string, it);
	cJSON_Delete(sealed);
	char *rev_text = cJSON_Print(rev);   /* formatted: spaces and new lines */
	cJSON_Delete(rev);
	struct buf b = BUF_INIT;
	buf_printf(&b, "{ \"superseded\": [\"0123456789abcdef0123456789abcdef\"],\n \"wraps\": {\"%s\": \"%s\"},\n"
		       " \"sealed\": %s }", K.bkid, s.wrap_b, rev_text);
	char *other = buf_detach(&b, NULL);
	free(rev_text);
	size_t len2 = 0;
	char *push2 = envelope_push_body(other, strlen(other), &len2);
	assert_non_null(push2);
	assert_int_equal(len2, len);
	assert_string_equal(push2, push);
	char *push3 = envelope_push_body(push, len, NULL);
	assert_non_null(push3);
	assert_string_equal(push3, push);
	free(push2);
	free(push3);
	free(other);
	free(push);

	/* not sealed: NULL, and 0 from the checked form */
	static const char *const plain[] = { "{\"cert\":\"a\",\"key\":\"b\"}", "[]", "not json", "", "\"sealed\"",
					     "{\"x\":{\"sealed\":1}}", "[{\"sealed\":1}]", "{\"cert\":1,\"cert\":2}",
					     "{\"sealed\":", NULL };
	char err[256], *out;
	for (int i = 0; plain[i]; i++) {
		assert_null(envelope_push_body(plain[i], strlen(plain[i]), &len));
		out = (char *)"x";
		if (envelope_push_body_checked(plain[i], strlen(plain[i]), &out, &len, err, sizeof(err)) != 0)
			fail_msg("'%s' is not sealed", plain[i]);
		assert_null(out);
	}
	/* the stored text and the push body: 1, the same bytes */
	assert_int_equal(envelope_push_body_checked(s.stored, strlen(s.stored), &out, &len, err, sizeof(err)), 1);
	assert_non_null(out);
	assert_int_equal(len, strlen(out));
	push = envelope_push_body(s.stored, strlen(s.stored), NULL);
	assert_string_equal(out, push);
	free(push);
	free(out);
	unseal(&s);
}

/* A body that is sealed but not valid is not "not sealed": -1 with the
 * field named, and envelope_push_body gives NULL (never the body). */
static void expect_push_refused(const char *text, const char *want)
{
	char err[256] = "", *out = (char *)"x";
	size_t len = 7;
	int rc = envelope_push_body_checked(text, strlen(text), &out, &len, err, sizeof(err));
	if (rc != -1)
		fail_msg("'%.200s': %d, want -1 (%s)", text, rc, want);
	assert_null(out);
	assert_int_equal(len, 0);
	if (strncmp(err, want, strlen(want)) != 0)
		fail_msg("'%.200s': error '%s', want '%s...'", text, err, want);
	char *p = envelope_push_body(text, strlen(text), NULL);
	if (p) {
		free(p);
		fail_msg("'%.200s': envelope_push_body gave a push body", text);
	}
}

static void test_push_body_refusals(void **state)
{
	(void)state;
	struct sealed s;
	seal(&s, "secret/web", BODY);
	expect_push_refused("{\"sealed\":1}", "sealed: must be an object");
	expect_push_refused("{\"sealed\":{\"x\":1}}", "sealed: unknown field 'x'");
	expect_push_refused("{\"sealed\":{\"v\":1}}", "sealed.id: missing");
	expect_push_refused("{\"sealed\":null,\"wraps\":{}}", "sealed: must be an object");
	/* text json_decode refuses, but which reads as sealed */
	expect_push_refused("{\"sealed\":1,\"sealed\":2}", "a sealed secret's body is not valid JSON: duplicate key");
	char *t = stored_with(&s, "{}", NULL, "\"sealed\":{}");
	expect_push_refused(t, "a sealed secret's body is not valid JSON: duplicate key 'sealed'");
	free(t);
	/* a stored form that is not one: no wraps, bad wraps, extra members */
	t = stored_with(&s, NULL, "[]", NULL);
	expect_push_refused(t, "wraps: missing");
	free(t);
	t = stored_with(&s, "{\"0123456789abcdef\":\"AAAA\"}", NULL, NULL);
	expect_push_refused(t, "wraps.0123456789abcdef: must be 80 bytes");
	free(t);
	t = stored_with(&s, "{}", NULL, "\"cert\":\"x\"");
	expect_push_refused(t, "unknown field 'cert' beside 'sealed'");
	free(t);
	t = stored_with(&s, "{}", "[1]", NULL);
	expect_push_refused(t, "superseded[0]: must be an envelope id");
	free(t);
	unseal(&s);
}

/* ---- resource_validate --------------------------------------------------------- */

static int validate(const char *name, const char *text, char *err, size_t errlen)
{
	cJSON *doc = cJSON_Parse(text);
	if (!doc)
		fail_msg("test text does not parse: %s", text);
	int rc = resource_validate(name, doc, 0, NULL, err, errlen);
	cJSON_Delete(doc);
	return rc;
}

static void test_resource_validate(void **state)
{
	(void)state;
	struct sealed s;
	seal(&s, "secret/web", BODY);
	char err[256] = "";
	/* the stored form, the push form, and plaintext as before */
	if (validate("secret/web", s.stored, err, sizeof(err)) < 0)
		fail_msg("stored: %s", err);
	char *push = envelope_push_body(s.stored, strlen(s.stored), NULL);
	if (validate("secret/web", push, err, sizeof(err)) < 0)
		fail_msg("push: %s", err);
	free(push);
	assert_int_equal(validate("secret/web", "{\"cert\":\"-----BEGIN X\",\"key\":\"-----BEGIN Y\"}", err,
				  sizeof(err)), 0);
	/* refusals name the resource and the field */
	char *t = stored_with(&s, NULL, "[]", NULL);
	assert_int_equal(validate("secret/web", t, err, sizeof(err)), -1);
	assert_string_equal(err, "secret/web: wraps: missing (an object of node key id -> wrap, {} for none)");
	free(t);
	t = stored_with(&s, "{}", NULL, "\"cert\":\"-----BEGIN X\"");
	assert_int_equal(validate("secret/web", t, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "secret/web: unknown field 'cert'"));
	free(t);
	assert_int_equal(validate("secret/web", "{\"sealed\":{\"v\":1}}", err, sizeof(err)), -1);
	assert_string_equal(err, "secret/web: sealed.id: missing");
	assert_int_equal(validate("secret/web", "{\"sealed\":\"x\"}", err, sizeof(err)), -1);
	assert_string_equal(err, "secret/web: sealed: must be an object");
	unseal(&s);
}

static int validate_flags(const char *name, const char *text, unsigned flags, char *err, size_t errlen)
{
	struct json_limits lim = { 0, 0 };
	char jerr[256];
	cJSON *doc = json_decode(text, strlen(text), &lim, jerr, sizeof(jerr));
	if (!doc)
		fail_msg("test text does not decode: %s: %s", jerr, text);
	err[0] = '\0';
	int rc = resource_validate(name, doc, flags, NULL, err, errlen);
	cJSON_Delete(doc);
	return rc;
}

/* RES_V_PLAINTEXT (an opened body) refuses any sealed form; RES_V_STORED
 * (a write) refuses the push form: a sealed write carries its wraps. */
static void test_resource_validate_flags(void **state)
{
	(void)state;
	struct sealed s;
	seal(&s, "secret/web", BODY);
	char *push = envelope_push_body(s.stored, strlen(s.stored), NULL);
	char *no_wraps = stored_with(&s, NULL, "[]", NULL);
	char err[256];
	static const char plain[] = "{\"cert\":\"-----BEGIN X\",\"key\":\"-----BEGIN Y\"}";
	const char *const sealed_forms[] = { s.stored, push, no_wraps, "{\"sealed\":1}", NULL };
	for (int i = 0; sealed_forms[i]; i++) {
		assert_int_equal(validate_flags("secret/web", sealed_forms[i], RES_V_PLAINTEXT, err, sizeof(err)), -1);
		assert_string_equal(err, "secret/web: sealed: an opened secret must be plaintext");
		assert_int_equal(validate_flags("secret/web", sealed_forms[i], RES_V_PLAINTEXT | RES_STRICT, err,
						sizeof(err)), -1);
		assert_string_equal(err, "secret/web: sealed: an opened secret must be plaintext");
	}
	assert_int_equal(validate_flags("secret/web", plain, RES_V_PLAINTEXT | RES_STRICT, err, sizeof(err)), 0);
	assert_int_equal(validate_flags("secret/web", plain, RES_V_STORED, err, sizeof(err)), 0);
	/* the stored form is a write's; the push form and one without wraps are not */
	assert_int_equal(validate_flags("secret/web", s.stored, RES_V_STORED, err, sizeof(err)), 0);
	static const char nowraps[] =
		"secret/web: wraps: missing: a sealed secret's write carries its wraps ({} for none)";
	assert_int_equal(validate_flags("secret/web", push, RES_V_STORED, err, sizeof(err)), -1);
	assert_string_equal(err, nowraps);
	assert_int_equal(validate_flags("secret/web", no_wraps, RES_V_STORED, err, sizeof(err)), -1);
	assert_string_equal(err, nowraps);
	/* without the flag the push form stays valid (what nodes receive) */
	assert_int_equal(validate_flags("secret/web", push, 0, err, sizeof(err)), 0);
	/* other types do not care */
	assert_int_equal(validate_flags("cluster/c", "{\"endpoints\":[]}", RES_V_PLAINTEXT | RES_V_STORED, err,
					sizeof(err)), 0);
	free(no_wraps);
	free(push);
	unseal(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_empty_and_largest_body),
		cmocka_unit_test(test_names_must_be_full),
		cmocka_unit_test(test_wrong_node_key),
		cmocka_unit_test(test_wrap_swapped_between_envelopes),
		cmocka_unit_test(test_ciphertext_swapped),
		cmocka_unit_test(test_field_refusals),
		cmocka_unit_test(test_open_checks_commitment),
		cmocka_unit_test(test_seal_recovery_kid),
		cmocka_unit_test(test_seal_refuses_sealed_plaintext),
		cmocka_unit_test(test_errors_hold_no_plaintext),
		cmocka_unit_test(test_stored_form),
		cmocka_unit_test(test_wraps_max),
		cmocka_unit_test(test_push_body),
		cmocka_unit_test(test_push_body_refusals),
		cmocka_unit_test(test_resource_validate),
		cmocka_unit_test(test_resource_validate_flags),
	};
	return cmocka_run_group_tests(tests, group_setup, NULL);
}
