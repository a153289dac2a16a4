/* test_envelope.c: unit tests of common/envelope.c and the sealed form in
 * common/resource.c: seal / wrap / unwrap / open round trips (node and
 * recovery), a wrong key, a wrap moved between envelopes (the key
 * commitment), ciphertext moved between secrets or names (the AAD), every
 * field's refusals (truncated, odd and non-alphabet base64, wrong types,
 * unknown and missing fields), the stored form's wraps and superseded, the
 * push body's canonical bytes, and resource_validate of both forms. */
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
	assert_null(strstr(err, "SECRETKEYBYTES"));
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
	/* the ciphertext does not hold the plaintext */
	assert_null(memmem(e.ct, e.ct_len, "SECRETKEYBYTES", 14));
	assert_null(strstr(s.stored, "SECRETKEYBYTES"));

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
	assert_non_null(strstr(err, "recovery key id"));
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

	/* the whole of s's envelope served as secret/b: the name is bound */
	decode_ok(s.sealed, &e);
	assert_null(envelope_open(&e, "secret/b", s.dk, NULL, err, sizeof(err)));
	assert_string_equal(err, "does not decrypt: changed, or another secret's");
	/* and its id too: s's ciphertext under another id */
	char saved = e.id[0];
	e.id[0] = saved == 'a' ? 'b' : 'a';
	assert_null(envelope_open(&e, "secret/a", s.dk, NULL, err, sizeof(err)));
	e.id[0] = saved;
	/* one flipped byte of the ciphertext */
	e.ct[3] ^= 0x20;
	assert_null(envelope_open(&e, "secret/a", s.dk, NULL, err, sizeof(err)));
	e.ct[3] ^= 0x20;
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

/* ---- the stored form -------------------------------------------------------- */

static int check_stored_text(const char *text, char *err, size_t errlen)
{
	cJSON *doc = cJSON_Parse(text);
	if (!doc)
		fail_msg("test text does not parse: %s", text);
	int rc = envelope_check_stored(doc, err, errlen);
	cJSON_Delete(doc);
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

	/* not sealed: NULL */
	static const char *const plain[] = { "{\"cert\":\"a\",\"key\":\"b\"}", "[]", "not json", "", "\"sealed\"",
					     "{\"sealed\":1,\"sealed\":2}", NULL };
	for (int i = 0; plain[i]; i++)
		assert_null(envelope_push_body(plain[i], strlen(plain[i]), &len));
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
		cmocka_unit_test(test_stored_form),
		cmocka_unit_test(test_push_body),
		cmocka_unit_test(test_resource_validate),
	};
	return cmocka_run_group_tests(tests, group_setup, NULL);
}
