/* signed_token.c: the signed token form statements and approvals share
 * (see signed_token.h). */
#include "signed_token.h"
#include "buf.h"
#include "json.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>

#define B64URL sodium_base64_VARIANT_URLSAFE_NO_PADDING
#define B64URL_ALPHABET "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

_Static_assert(SIGNED_TOKEN_SIG_BYTES == crypto_sign_BYTES, "an Ed25519 signature");

static void signed_message(const char *domain, const char *payload, size_t len, struct buf *m)
{
	buf_reset(m);
	buf_puts(m, domain);
	buf_append(m, payload, len);
}

char *signed_token_make(const char *domain, const char *payload, size_t len, const struct signing_key *k)
{
	struct buf msg = BUF_INIT, out = BUF_INIT;
	unsigned char sig[crypto_sign_BYTES];
	signed_message(domain, payload, len, &msg);
	crypto_sign_detached(sig, NULL, (const unsigned char *)msg.data, msg.len, k->sk);
	buf_release(&msg);

	size_t plen = sodium_base64_ENCODED_LEN(len, B64URL);
	size_t slen = sodium_base64_ENCODED_LEN(sizeof(sig), B64URL);
	buf_reserve(&out, plen + slen + 2);
	sodium_bin2base64(out.data, plen, (const unsigned char *)payload, len, B64URL);
	out.len = strlen(out.data);
	out.data[out.len++] = '.';
	sodium_bin2base64(out.data + out.len, slen, sig, sizeof(sig), B64URL);
	out.len += strlen(out.data + out.len);
	return buf_detach(&out, NULL);
}

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

cJSON *signed_token_open(const char *what, const char *token, size_t len, size_t max, unsigned char *payload,
			 size_t *plen, unsigned char sig[SIGNED_TOKEN_SIG_BYTES], char *err, size_t errlen)
{
	if (len > max) {
		snprintf(err, errlen, "%s: longer than %zu bytes", what, max);
		return NULL;
	}
	if (memchr(token, '\0', len)) {
		snprintf(err, errlen, "%s: holds a NUL byte", what);
		return NULL;
	}
	const char *dot = memchr(token, '.', len);
	if (!dot || memchr(dot + 1, '.', len - (size_t)(dot - token) - 1)) {
		snprintf(err, errlen, "%s: not PAYLOAD.SIGNATURE", what);
		return NULL;
	}
	size_t sl = 0;
	if (b64url(token, (size_t)(dot - token), payload, SIGNED_TOKEN_PAYLOAD_MAX, plen) < 0 ||
	    b64url(dot + 1, len - (size_t)(dot - token) - 1, sig, crypto_sign_BYTES, &sl) < 0 ||
	    sl != crypto_sign_BYTES) {
		snprintf(err, errlen, "%s: not base64url PAYLOAD.SIGNATURE (64-byte signature)", what);
		return NULL;
	}
	char inner[256];
	struct json_limits lim = { SIGNED_TOKEN_PAYLOAD_MAX, 2 };
	cJSON *o = json_decode((const char *)payload, *plen, &lim, inner, sizeof(inner));
	if (!o) {
		snprintf(err, errlen, "%s: payload: %s", what, inner);
		return NULL;
	}
	return o;
}

bool signed_token_check(const char *domain, const unsigned char *payload, size_t plen,
			const unsigned char sig[SIGNED_TOKEN_SIG_BYTES], const unsigned char pk[32])
{
	struct buf msg = BUF_INIT;
	signed_message(domain, (const char *)payload, plen, &msg);
	int ok = crypto_sign_verify_detached(sig, (const unsigned char *)msg.data, msg.len, pk);
	buf_release(&msg);
	return ok == 0;
}
