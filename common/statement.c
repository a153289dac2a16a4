/* statement.c: signing and verifying statements (see statement.h). */
#include "statement.h"
#include "buf.h"
#include "json.h"
#include "signed_token.h"
#include "xmalloc.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIG_DOMAIN "tether-statement-v1\n"
#define PAYLOAD_MAX SIGNED_TOKEN_PAYLOAD_MAX

void statement_release(struct statement *st)
{
	free(st->sub);
	st->sub = NULL;
}

char *statement_sign(struct statement *st, const struct signing_key *k)
{
	char hex[2 * LTHASH_DIGEST_BYTES + 1];
	struct buf payload = BUF_INIT;
	memcpy(st->kid, k->kid, sizeof(st->kid));
	lthash_digest_hex(st->digest, hex);
	buf_printf(&payload, "{\"digest\":\"%s\",\"expires\":%lld,\"issued\":%lld,\"kid\":\"%s\",", hex,
		   (long long)st->expires, (long long)st->issued, st->kid);
	if (st->overridden)   /* absent when none: the old statement's bytes */
		buf_printf(&payload, "\"overridden\":%llu,", (unsigned long long)st->overridden);
	buf_puts(&payload, "\"sub\":");
	buf_json_string(&payload, st->sub ? st->sub : "");
	buf_printf(&payload, ",\"v\":1,\"version\":%llu}", (unsigned long long)st->version);

	char *tok = signed_token_make(SIG_DOMAIN, payload.data, payload.len, k);
	buf_release(&payload);
	return tok;
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
	cJSON *o = signed_token_open("statement", token, len, STATEMENT_MAX, payload, plen, sig, err, errlen);
	if (!o)
		return -1;
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
	if (!signed_token_check(SIG_DOMAIN, payload, plen, sig, k->pk)) {
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
