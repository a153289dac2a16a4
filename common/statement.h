/* statement.h: the signed statement the plane attaches to every push and
 * heartbeat, and that nodes verify (docs/protocol.md, "Signed state").
 *
 * A statement says: "the state at `version`, as a node subscribed to `sub`
 * sees it, has digest `digest` (lthash.h); issued at `issued`, good until
 * `expires`; signed by key `kid`". It names no node and no base version,
 * so one signature serves every node of a subscription and any relay may
 * forward it untouched while it computes deltas itself.
 *
 * Wire form, one token (also usable as an HTTP header value):
 *   BASE64URL(payload) "." BASE64URL(Ed25519 signature)
 * payload is compact JSON with sorted keys:
 *   {"digest":"<64 hex>","expires":T,"issued":T,"kid":"<16 hex>","overridden":O,"sub":"...","v":1,
 *    "version":N}
 * "overridden" (optional; absent in statements before guards): the newest
 * version <= version whose write carried an override of the guards
 * (guards.h): a node lets a guard violation through only when it is newer
 * than the version it holds. Absent: no override.
 * The signature covers "tether-statement-v1\n" followed by the payload
 * bytes exactly as sent: nothing is re-serialized before verifying. */
#ifndef TETHER_STATEMENT_H
#define TETHER_STATEMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "keys.h"
#include "lthash.h"

/* The largest token accepted (bounded before anything is decoded). */
#define STATEMENT_MAX 8192
/* The longest subscription a statement carries. */
#define STATEMENT_SUB_MAX 4096

struct statement {
	uint64_t version;
	char *sub;                         /* canonical subscription; "" for all */
	unsigned char digest[LTHASH_DIGEST_BYTES];
	int64_t issued, expires;           /* seconds since the epoch */
	char kid[KEY_ID_LEN + 1];
	uint64_t overridden;               /* 0: none (the field absent) */
};

/* Signs st (its kid is set from k). Returns a new allocated token. */
char *statement_sign(struct statement *st, const struct signing_key *k);

/* Checks a token's form and its signature by a key of t. On success fills
 * st (release with statement_release) and returns 0; otherwise one of the
 * negative codes below, with err saying what is wrong. Nothing about
 * freshness, version or digest: the caller judges those. */
#define STATEMENT_MALFORMED (-1)
#define STATEMENT_UNKNOWN_KEY (-2)
#define STATEMENT_BAD_SIGNATURE (-3)
int statement_verify(const char *token, size_t len, const struct trust *t, struct statement *st, char *err,
		     size_t errlen);

/* Decodes a token's payload without checking the signature (for display
 * only: status, logs). Returns 0 or -1. */
int statement_peek(const char *token, size_t len, struct statement *st);

void statement_release(struct statement *st);

#endif
