/* state/push.h: decoding of a push message (docs/protocol.md) with bounds:
 * size, nesting, duplicate keys (json_decode), then the shape: version,
 * base, full, nonce, statement, overridden, upserts [{name, version, body}], removed
 * [name]; "stale" (what the plane says of itself) is handed on as it is.
 * Unknown top-level fields are ignored. */
#ifndef TETHER_PUSH_H
#define TETHER_PUSH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "json.h"
#include "keys.h"
#include "lthash.h"

#define PUSH_NONCE_MAX 48

struct push_upsert {
	const char *name;     /* borrowed from doc */
	uint64_t version;
	cJSON *body;          /* borrowed from doc */
};

/* What --trust learned from a push's statement when it verified it, so
 * that nothing parses it twice. */
struct push_verified {
	bool ok;
	uint64_t version;
	unsigned char digest[LTHASH_DIGEST_BYTES];
	char kid[KEY_ID_LEN + 1];
	int64_t issued, expires;
	uint64_t overridden;     /* the statement's "overridden" (0: none) */
};

struct push {
	uint64_t version, base;
	bool full;
	char nonce[PUSH_NONCE_MAX];
	const char *statement;   /* the plane's signed statement (borrowed from doc), or NULL */
	uint64_t overridden;     /* the unsigned "overridden" (guards.h): 0 when absent */
	const cJSON *stale;      /* the plane's "stale" member (borrowed from doc; unchecked: fresh.c
				  * reads it), or NULL */
	struct push_verified verified;   /* filled by trust_check_push */
	struct push_upsert *up;
	size_t nup;
	const char **removed;
	size_t nrm;
	cJSON *doc;           /* owns every borrowed pointer */
};

/* Returns 0, or -1 with err naming what is wrong; after a failure only
 * p->version and p->nonce may be set (empty nonce: unknown), so the push can
 * still be NACKed. */
int push_decode(const char *text, size_t len, const struct json_limits *lim, struct push *p,
		char *err, size_t errlen);
void push_release(struct push *p);

#endif
