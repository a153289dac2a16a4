/* signed_token.h: the wire form statements (statement.h) and approvals
 * (approval.h) share: BASE64URL(payload) "." BASE64URL(Ed25519 signature
 * over DOMAIN followed by the payload bytes), payload a flat JSON object.
 * One copy of the signing, the strict splitting and decoding (bounded, the
 * base64url alphabet only, one spelling) and the check. */
#ifndef TETHER_SIGNED_TOKEN_H
#define TETHER_SIGNED_TOKEN_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "keys.h"

/* The largest payload a token of at most 8192 bytes decodes to. */
#define SIGNED_TOKEN_PAYLOAD_MAX 6144
#define SIGNED_TOKEN_SIG_BYTES 64

/* The token of payload[0..len) signed by k under domain (malloc'd). */
char *signed_token_make(const char *domain, const char *payload, size_t len, const struct signing_key *k);

/* Splits token[0..len) (at most max bytes) into its decoded payload
 * (payload, SIGNED_TOKEN_PAYLOAD_MAX bytes; *plen) and signature, and
 * parses the payload (a JSON object, nesting 2). what names the token in
 * err ("statement", "approval"). Returns the parsed payload (the caller
 * deletes it), or NULL with err. */
cJSON *signed_token_open(const char *what, const char *token, size_t len, size_t max, unsigned char *payload,
			 size_t *plen, unsigned char sig[SIGNED_TOKEN_SIG_BYTES], char *err, size_t errlen);

/* Whether sig is pk's signature over domain followed by payload. */
bool signed_token_check(const char *domain, const unsigned char *payload, size_t plen,
			const unsigned char sig[SIGNED_TOKEN_SIG_BYTES], const unsigned char pk[32]);

#endif
