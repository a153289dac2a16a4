/* approval.c: signing, verifying and counting approval tokens (see
 * approval.h). */
#include "approval.h"
#include "buf.h"
#include "json.h"
#include "signed_token.h"
#include "statement.h"
#include "xmalloc.h"

#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIG_DOMAIN "tether-approval-v1\n"
#define PAYLOAD_MAX SIGNED_TOKEN_PAYLOAD_MAX

void approval_release(struct approval *ap)
{
	free(ap->sub);
	ap->sub = NULL;
}

char *approval_sign(struct approval *ap, const struct signing_key *k)
{
	char hex[2 * LTHASH_DIGEST_BYTES + 1];
	char pk64[sodium_base64_ENCODED_LEN(32, sodium_base64_VARIANT_ORIGINAL)];
	struct buf payload = BUF_INIT;
	memcpy(ap->kid, k->kid, sizeof(ap->kid));
	memcpy(ap->pk, k->pk, sizeof(ap->pk));
	lthash_digest_hex(ap->digest, hex);
	sodium_bin2base64(pk64, sizeof(pk64), ap->pk, sizeof(ap->pk), sodium_base64_VARIANT_ORIGINAL);
	buf_printf(&payload, "{\"digest\":\"%s\",\"kid\":\"%s\",\"pk\":\"%s\",\"sub\":", hex, ap->kid, pk64);
	buf_json_string(&payload, ap->sub ? ap->sub : "");
	buf_printf(&payload, ",\"v\":1,\"version\":%llu}", (unsigned long long)ap->version);

	char *tok = signed_token_make(SIG_DOMAIN, payload.data, payload.len, k);
	buf_release(&payload);
	return tok;
}

/* Splits and decodes a token and parses its payload into ap. */
static int decode(const char *token, size_t len, struct approval *ap, unsigned char *payload, size_t *plen,
		  unsigned char sig[crypto_sign_BYTES], char *err, size_t errlen)
{
	memset(ap, 0, sizeof(*ap));
	cJSON *o = signed_token_open("approval", token, len, APPROVAL_MAX, payload, plen, sig, err, errlen);
	if (!o)
		return -1;
	int rc = -1;
	const char *digest = json_get_string(o, "digest"), *kid = json_get_string(o, "kid");
	const char *sub = json_get_string(o, "sub"), *pk = json_get_string(o, "pk");
	uint64_t v = 0;
	if (!cJSON_IsObject(o) || !json_get_u64(cJSON_GetObjectItemCaseSensitive(o, "v"), &v) || v != 1) {
		snprintf(err, errlen, "approval: payload is not a version 1 approval");
		goto out;
	}
	if (!json_get_u64(cJSON_GetObjectItemCaseSensitive(o, "version"), &ap->version)) {
		snprintf(err, errlen, "approval: version must be a non-negative integer");
		goto out;
	}
	if (!digest || lthash_digest_parse(digest, ap->digest) < 0) {
		snprintf(err, errlen, "approval: digest must be 64 lower-case hex digits");
		goto out;
	}
	if (!kid || strlen(kid) != KEY_ID_LEN || strspn(kid, "0123456789abcdef") != KEY_ID_LEN) {
		snprintf(err, errlen, "approval: kid must be %d lower-case hex digits", KEY_ID_LEN);
		goto out;
	}
	if (!pk || keys_b64_exact(pk, strlen(pk), ap->pk, sizeof(ap->pk)) < 0) {
		snprintf(err, errlen, "approval: pk must be the base64 of a 32-byte public key");
		goto out;
	}
	if (!sub || strlen(sub) > STATEMENT_SUB_MAX) {
		snprintf(err, errlen, "approval: sub must be a string of at most %d bytes (as a statement's)",
			 STATEMENT_SUB_MAX);
		goto out;
	}
	char id[KEY_ID_LEN + 1];
	keys_id(ap->pk, id);
	if (strcmp(id, kid) != 0) {
		snprintf(err, errlen, "approval: kid '%s' is not the id of its pk (%s)", kid, id);
		goto out;
	}
	memcpy(ap->kid, kid, KEY_ID_LEN + 1);
	ap->sub = xstrdup(sub);
	rc = 0;
out:
	cJSON_Delete(o);
	return rc;
}

int approval_verify(const char *token, size_t len, struct approval *ap, char *err, size_t errlen)
{
	unsigned char payload[PAYLOAD_MAX], sig[crypto_sign_BYTES];
	size_t plen = 0;
	if (decode(token, len, ap, payload, &plen, sig, err, errlen) < 0)
		return -1;
	if (!signed_token_check(SIG_DOMAIN, payload, plen, sig, ap->pk)) {
		snprintf(err, errlen, "approval: bad signature (key %s)", ap->kid);
		approval_release(ap);
		return -1;
	}
	return 0;
}

/* Appends one note to why (comma-separated, never past whylen). */
static void note(char *why, size_t whylen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(char *why, size_t whylen, const char *fmt, ...)
{
	size_t used = strlen(why);
	if (whylen == 0 || used + 1 >= whylen)
		return;
	if (used) {
		snprintf(why + used, whylen - used, "; ");
		used = strlen(why);
	}
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why + used, whylen - used, fmt, ap);
	va_end(ap);
}

size_t approval_count(const char *const *tokens, size_t n, const struct trust *approvers, const char *approvers_name,
		      uint64_t version, const char *sub, const unsigned char digest[LTHASH_DIGEST_BYTES], char *why,
		      size_t whylen)
{
	char counted[APPROVALS_MAX][KEY_ID_LEN + 1];
	size_t ncounted = 0;
	if (whylen)
		why[0] = '\0';
	if (n > APPROVALS_MAX) {
		note(why, whylen, "%zu approvals beyond the first %d ignored", n - APPROVALS_MAX, APPROVALS_MAX);
		n = APPROVALS_MAX;
	}
	for (size_t i = 0; i < n; i++) {
		struct approval ap;
		char err[256];
		if (approval_verify(tokens[i], strlen(tokens[i]), &ap, err, sizeof(err)) < 0) {
			note(why, whylen, "approvals[%zu]: %s", i, err);
			continue;
		}
		/* the key must be in the file, by its public key (a kid alone
		 * could be claimed by anyone) */
		const struct trusted_key *k = keys_find(approvers, ap.kid);
		bool dup = false;
		for (size_t j = 0; j < ncounted; j++)
			dup = dup || strcmp(counted[j], ap.kid) == 0;
		if (!k || sodium_memcmp(k->pk, ap.pk, sizeof(ap.pk)) != 0)
			note(why, whylen, "approver %.8s... is not in %s", ap.kid, approvers_name);
		else if (ap.version != version)
			note(why, whylen, "%.8s... signed version %llu, not %llu", ap.kid, (unsigned long long)ap.version,
			     (unsigned long long)version);
		else if (strcmp(ap.sub, sub) != 0)
			note(why, whylen, "%.8s... signed subscription '%.100s', not '%.100s'", ap.kid, ap.sub, sub);
		else if (!lthash_digest_equal(ap.digest, digest))
			note(why, whylen, "%.8s... signed another state of version %llu (digest differs)", ap.kid,
			     (unsigned long long)version);
		else if (dup)
			note(why, whylen, "%.8s... counted once", ap.kid);
		else
			memcpy(counted[ncounted++], ap.kid, KEY_ID_LEN + 1);
		approval_release(&ap);
	}
	return ncounted;
}
