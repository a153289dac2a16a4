/* json.h: JSON decoding with the project's limits, and canonical encoding.
 * Every JSON text from the network goes through json_decode: size cap,
 * then json_syntax_check on the raw text (RFC 8259's grammar, valid UTF-8,
 * no NUL bytes, \u escapes with 4 hex digits and paired surrogates, no
 * \u0000, nesting cap checked before cJSON recurses), then no duplicate
 * keys (cJSON keeps the first, other parsers the last: refuse both). */
#ifndef TETHER_JSON_H
#define TETHER_JSON_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#define JSON_DEFAULT_MAX_DEPTH 32

struct json_limits {
	size_t max_bytes;  /* 0: no limit */
	int max_depth;     /* 0: JSON_DEFAULT_MAX_DEPTH */
};

/* Parses text[0..len). Returns a new cJSON tree (caller frees with
 * cJSON_Delete) or NULL with a message in err. */
cJSON *json_decode(const char *text, size_t len, const struct json_limits *lim,
		   char *err, size_t errlen);

/* Sorts every object's members by key, recursively, so equal values print
 * as equal bytes. */
void json_sort_keys(cJSON *v);
/* Returns a new allocated compact text of v with keys sorted (v is
 * re-ordered in place). */
char *json_encode_canonical(cJSON *v);

struct buf;
/* Same, into out (reset first): no allocation per call once out is big
 * enough. Returns the length. */
size_t json_encode_canonical_buf(cJSON *v, struct buf *out);

/* Reads an unsigned integer that is exactly representable (0..2^53-1):
 * 2^53 itself is refused, since 2^53+1 parses to the same double. */
bool json_get_u64(const cJSON *v, uint64_t *out);
/* Typed member lookups; NULL when absent or of another type. */
const char *json_get_string(const cJSON *obj, const char *key);

#endif
