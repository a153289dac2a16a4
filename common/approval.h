/* approval.h: approval tokens -- one approver's signature on the state a
 * node is to hold -- and the count a node makes of them (docs/protocol.md,
 * "Approvals"). Shared by tetherctl (signs), the plane (verifies, keeps,
 * pushes) and tetherd (counts).
 *
 * A token names the same claims as the plane's statement (statement.h),
 * without times: "the state at `version`, as a node subscribed to `sub`
 * sees it, has digest `digest`; approved by the key `pk` (id `kid`)".
 *
 * Wire form, one token:
 *   BASE64URL(payload) "." BASE64URL(Ed25519 signature)
 * payload is compact JSON with sorted keys:
 *   {"digest":"<64 hex>","kid":"<16 hex>","pk":"<base64 32 bytes>","sub":"...","v":1,"version":N}
 * The signature covers "tether-approval-v1\n" followed by the payload bytes
 * exactly as sent. The pk lets the plane verify and count distinct keys
 * without a list; a node counts only keys of its --approvers file. */
#ifndef TETHER_APPROVAL_H
#define TETHER_APPROVAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "keys.h"
#include "lthash.h"

/* The largest token accepted (bounded before anything is decoded). */
#define APPROVAL_MAX 8192
/* The most tokens a push, a POST or a count takes. */
#define APPROVALS_MAX 32

struct approval {
	uint64_t version;
	char *sub;                         /* canonical subscription; "" for all */
	unsigned char digest[LTHASH_DIGEST_BYTES];
	unsigned char pk[32];
	char kid[KEY_ID_LEN + 1];
};

/* Signs ap's claims with k (ap's pk and kid are set from k). Returns a new
 * allocated token. */
char *approval_sign(struct approval *ap, const struct signing_key *k);

/* Checks a token's form, that kid is the id of pk, and its signature by
 * pk. On success fills ap (release with approval_release) and returns 0;
 * otherwise -1 with err saying what is wrong (never a key's secret). Nothing
 * about which keys count, nor the claims: the caller judges those. */
int approval_verify(const char *token, size_t len, struct approval *ap, char *err, size_t errlen);

void approval_release(struct approval *ap);

/* A node's count: how many distinct keys of approvers signed exactly
 * (version, sub, digest) among tokens[0..n). Each token not counted adds a
 * note to why ("approver 1a2b... is not in FILE", "3c4d... signed version
 * 7, not 8", "5e6f... counted once", ...; approvers_name names FILE),
 * comma-separated, truncated to whylen. Returns the count. */
size_t approval_count(const char *const *tokens, size_t n, const struct trust *approvers, const char *approvers_name,
		      uint64_t version, const char *sub, const unsigned char digest[LTHASH_DIGEST_BYTES], char *why,
		      size_t whylen);

#endif
