/* statement.c: signing and verifying statements (see statement.h). */
#include "statement.h"
#include "buf.h"
#include "json.h"
#include "xmalloc.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIG_DOMAIN "tether-statement-v1\n"
#define B64URL sodium_base64_VARIANT_URLSAFE_NO_PADDING
#define PAYLOAD_MAX 6144

void statement_release(struct statement *st)
{
	free(st->sub);
	st->sub = NULL;
}

static void signed_message(const char *payload, size_t len, struct buf *m)
{
	buf_reset(m);
	buf_puts(m, SIG_DOMAIN);
	buf_append(m, payload, len);
}

char *statement_sign(struct statement *st, const struct signing_key *k)
{
	char hex[2 * LTHASH_DIGEST_BYTES + 1];
	struct buf payload = BUF_INIT, msg = BUF_INIT, out = BUF_INIT;
	memcpy(st->kid, k->kid, sizeof(st->kid));
	lthash_digest_hex(st->digest, hex);
	buf_printf(&payload, "{\"digest\":\"%s\",\"expires\":%lld,\"issued\":%lld,\"kid\":\"%s\",", hex,
		   (long long)st->expires, (long long)st->issued, st->kid);
	if (st->overridden)   /* absent when none: the old statement's bytes */
		buf_printf(&payload, "\"overridden\":%llu,", (unsigned long long)st->overridden);
	buf_puts(&payload, "\"sub\":");
	buf_json_string(&payload, st->sub ? st->sub : "");
	buf_printf(&payload, ",\"v\":1,\"version\":%llu}", (unsigned long long)st->version);

	unsigned char sig[crypto_sign_BYTES];
	signed_message(payload.data, payload.len, &msg);
	crypto_sign_detached(sig, NULL, (const unsigned char *)msg.data, msg.len, k->sk);

	size_t plen = sodium_base64_ENCODED_LEN(payload.len, B64URL);
	size_t slen = sodium_base64_ENCODED_LEN(sizeof(sig), B64URL);
	buf_reserve(&out, plen + slen + 2);
	sodium_bin2base64(out.data, plen, (const unsigned char *)payload.data, payload.len, B64URL);
	out.len = strlen(out.data);
	out.data[out.len++] = '.';
	sodium_bin2base64(out.data + out.len, slen, sig, sizeof(sig), B64URL);
	out.len += strlen(out.data + out.len);
	buf_release(&payload);
	buf_release(&msg);
	return buf_detach(&out, NULL);
}

#define B64URL_ALPHABET "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

/* Decodes base64url (no padding) of s[0..len) into out (cap bytes). Only
 * the alphabet's characters: libsodium 1.0.18 reads bytes >= 0x80 as '_',
 * and a token must have one text. */
static int b64url(const char *s, size_t len, unsigned char *out, size_t cap, size_t *got)
{
	const char *end = NULL;
	for (size_t i = 0; i < len; i++)
		if (!s[i] || !strchr(B64URL_ALPHABET, s[i]))
			return -1;
	if (sodium_base642bin(out, cap, s, len, NULL, got, &end, B64URL) != 0)
		return -1;
	return end == s + len ? 0 : -1;
}

static bool get_int(const cJSON *o, const char *key, int64_t *out)
{
	uint64_t v;
	if (!json_get_u64(cJSON_GetObjectItemCaseSensitive(o, key), &v))
		return false;
	*out = (int64_t)v;
	return true;
}

/* Splits and decodes a token; parses the payload into st. payload and
 * plen get the decoded payload bytes (for the signature), sig the
 * signature. */
static int decode(const char *token, size_t len, struct statement *st, unsigned char *payload, size_t *plen,
		  unsigned char sig[crypto_sign_BYTES], char *err, size_t errlen)
{
	memset(st, 0, sizeof(*st));
	if (len > STATEMENT_MAX) {
		snprintf(err, errlen, "statement: longer than %d bytes", STATEMENT_MAX);
		return -1;
	}
	if (memchr(token, '\0', len)) {
		snprintf(err, errlen, "statement: holds a NUL byte");
		return -1;
	}
	const char *dot = memchr(token, '.', len);
	if (!dot || memchr(dot + 1, '.', len - (size_t)(dot - token) - 1)) {
		snprintf(err, errlen, "statement: not PAYLOAD.SIGNATURE");
		return -1;
	}
	size_t sl = 0;
	if (b64url(token, (size_t)(dot - token), payload, PAYLOAD_MAX, plen) < 0 ||
	    b64url(dot + 1, len - (size_t)(dot - token) - 1, sig, crypto_sign_BYTES, &sl) < 0 ||
	    sl != crypto_sign_BYTES) {
		snprintf(err, errlen, "statement: not base64url PAYLOAD.SIGNATURE (64-byte signature)");
		return -1;
	}
	char inner[256];
	struct json_limits lim = { PAYLOAD_MAX, 2 };
	cJSON *o = json_decode((const char *)payload, *plen, &lim, inner, sizeof(inner));
	if (!o) {
		snprintf(err, errlen, "statement: payload: %s", inner);
		return -1;
	}
	int rc = -1;
	const char *digest = json_get_string(o, "digest"), *kid = json_get_string(o, "kid");
	const char *sub = json_get_string(o, "sub");
	int64_t v = 0;
	if (!cJSON_IsObject(o) || !get_int(o, "v", &v) || v != 1) {
		snprintf(err, errlen, "statement: payload is not a version 1 statement");
		goto out;
	}
	if (!json_get_u64(cJSON_GetObjectItemCaseSensitive(o, "version"), &st->version) ||
	    !get_int(o, "issued", &st->issued) || !get_int(o, "expires", &st->expires)) {
		snprintf(err, errlen, "statement: version, issued and expires must be non-negative integers");
		goto out;
	}
	const cJSON *ov = cJSON_GetObjectItemCaseSensitive(o, "overridden");
	if (ov && (!json_get_u64(ov, &st->overridden) || st->overridden == 0 || st->overridden > st->version)) {
		snprintf(err, errlen, "statement: overridden must be an integer in 1..version");
		goto out;
	}
	if (!digest || lthash_digest_parse(digest, st->digest) < 0) {
		snprintf(err, errlen, "statement: digest must be 64 lower-case hex digits");
		goto out;
	}
	if (!kid || strlen(kid) != KEY_ID_LEN || strspn(kid, "0123456789abcdef") != KEY_ID_LEN) {
		snprintf(err, errlen, "statement: kid must be %d lower-case hex digits", KEY_ID_LEN);
		goto out;
	}
	if (!sub || strlen(sub) > STATEMENT_SUB_MAX) {
		snprintf(err, errlen, "statement: sub must be a string of at most %d bytes", STATEMENT_SUB_MAX);
		goto out;
	}
	memcpy(st->kid, kid, KEY_ID_LEN + 1);
	st->sub = xstrdup(sub);
	rc = 0;
out:
	cJSON_Delete(o);
	return rc;
}

int statement_verify(const char *token, size_t len, const struct trust *t, struct statement *st, char *err,
		     size_t errlen)
{
	unsigned char payload[PAYLOAD_MAX], sig[crypto_sign_BYTES];
	size_t plen = 0;
	if (decode(token, len, st, payload, &plen, sig, err, errlen) < 0)
		return STATEMENT_MALFORMED;
	const struct trusted_key *k = keys_find(t, st->kid);
	if (!k) {
		snprintf(err, errlen, "statement signed by an unknown key '%s'", st->kid);
		statement_release(st);
		return STATEMENT_UNKNOWN_KEY;
	}
	struct buf msg = BUF_INIT;
	signed_message((const char *)payload, plen, &msg);
	int ok = crypto_sign_verify_detached(sig, (const unsigned char *)msg.data, msg.len, k->pk);
	buf_release(&msg);
	if (ok != 0) {
		snprintf(err, errlen, "statement: bad signature (key '%s')", st->kid);
		statement_release(st);
		return STATEMENT_BAD_SIGNATURE;
	}
	return 0;
}

int statement_peek(const char *token, size_t len, struct statement *st)
{
	unsigned char payload[PAYLOAD_MAX], sig[crypto_sign_BYTES];
	size_t plen = 0;
	char err[64];
	return decode(token, len, st, payload, &plen, sig, err, sizeof(err));
}
