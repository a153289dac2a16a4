/* fuzz_json.c: libFuzzer target for json_decode and the canonical encoder:
 * no input may crash the decoder, every refusal carries a message, the
 * raw text's check (json_syntax_check) passes only what cJSON parses with
 * every string whole and is what json_decode refuses by, the canonical
 * text decodes to the same values (numbers exactly: the plane keeps
 * unknown fields and must not round them), and it is a fixed point
 * (decode(encode(v)) encodes to the same bytes), which the plane's cache
 * keys and ETags rely on. */
#include "fuzz.h"
#include "json.h"
#include "json_syntax.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_JSON_MAX_BYTES (1024 * 1024)
#define FUZZ_JSON_MAX_DEPTH 32

static void die(const char *what, const char *a, const char *b)
{
	fprintf(stderr, "fuzz_json: %s\n  first:  %.512s\n  second: %.512s\n", what, a ? a : "(null)",
		b ? b : "(null)");
	abort();
}

/* json_get_u64 must say yes for the integers 0..2^53-1, no for anything
 * else but 2^53 itself (a text above 2^53 may read as 2^53, so refusing it
 * is allowed), and give back the same value. */
static void check_u64(const cJSON *v)
{
	uint64_t u = 0;
	bool ok = json_get_u64(v, &u);
	if (!cJSON_IsNumber(v)) {
		if (ok)
			die("json_get_u64 accepted a non-number", NULL, NULL);
		return;
	}
	double d = v->valuedouble;
	bool want = d >= 0 && d < 9007199254740992.0 && (double)(uint64_t)d == d;
	if (ok != want && d != 9007199254740992.0)
		die(ok ? "json_get_u64 accepted a non-integer or out-of-range number"
		       : "json_get_u64 refused an integer in 0..2^53-1", NULL, NULL);
	if (ok && (double)u != d)
		die("json_get_u64 changed the value", NULL, NULL);
}

/* Walks the tree: members of an object are looked up by their own key. */
static void walk(const cJSON *v)
{
	int i = 0;
	for (const cJSON *c = v->child; c; c = c->next, i++) {
		check_u64(c);
		/* a lookup is O(members): a few per object keep the harness linear */
		if (cJSON_IsObject(v) && i < 8) {
			const char *s = json_get_string(v, c->string);
			if (cJSON_IsString(c) ? s != c->valuestring : s != NULL)
				die("json_get_string did not find the member it walked past", c->string, s);
		}
		walk(c);
	}
}

/* Same structure, keys, strings and numbers (bit for bit but for NaN). A
 * number that overflowed to infinity may come back as null: cJSON has no
 * other way to print it. */
static bool same_value(const cJSON *a, const cJSON *b)
{
	if ((a->string == NULL) != (b->string == NULL) || (a->string && strcmp(a->string, b->string)))
		return false;
	if (cJSON_IsNumber(a) && !isfinite(a->valuedouble))
		return cJSON_IsNull(b);
	if ((a->type & 0xff) != (b->type & 0xff))
		return false;
	if (cJSON_IsNumber(a))
		return a->valuedouble == b->valuedouble && signbit(a->valuedouble) == signbit(b->valuedouble);
	if (cJSON_IsString(a))
		return strcmp(a->valuestring, b->valuestring) == 0;
	const cJSON *x = a->child, *y = b->child;
	for (; x && y; x = x->next, y = y->next)
		if (!same_value(x, y))
			return false;
	return x == NULL && y == NULL;
}

/* The bytes the strings of a text (checked by json_syntax_check) decode
 * to, keys and values, counted from the raw text by a second, simpler
 * reader: each escape is one byte but \u, which is its code point's
 * UTF-8 length (a surrogate pair 4). */
static size_t raw_string_bytes(const char *t, size_t len)
{
	size_t total = 0;
	bool in_str = false;
	for (size_t i = 0; i < len; i++) {
		if (!in_str) {
			in_str = t[i] == '"';
			continue;
		}
		if (t[i] == '"') {
			in_str = false;
		} else if (t[i] != '\\') {
			total++;
		} else if (t[i + 1] != 'u') {
			total++;
			i++;
		} else {
			unsigned long cp = strtoul((char[]){ t[i + 2], t[i + 3], t[i + 4], t[i + 5], 0 }, NULL, 16);
			if (cp >= 0xd800 && cp <= 0xdbff) {
				total += 4;   /* with the low surrogate after it */
				i += 6;
			} else {
				total += cp < 0x80 ? 1 : cp < 0x800 ? 2 : 3;
			}
			i += 5;
		}
	}
	return total;
}

/* The same count over a decoded tree. */
static size_t tree_string_bytes(const cJSON *v)
{
	size_t total = v->string ? strlen(v->string) : 0;
	if (cJSON_IsString(v))
		total += strlen(v->valuestring);
	for (const cJSON *c = v->child; c; c = c->next)
		total += tree_string_bytes(c);
	return total;
}

/* json_syntax_check, the raw text's check json_decode runs first, is
 * never looser than cJSON: what it passes cJSON parses, with every string
 * whole (cJSON would cut one at a bad \u escape); what it refuses
 * json_decode refuses with its very message. */
static void check_syntax(const uint8_t *data, size_t size, const cJSON *decoded, const char *decode_err)
{
	char err[256] = "";
	const char *text = (const char *)data;
	if (json_syntax_check(text, size, FUZZ_JSON_MAX_DEPTH, err, sizeof(err)) < 0) {
		if (!err[0])
			die("json_syntax_check refused without a message", NULL, NULL);
		if (decoded)
			die("json_decode accepted what json_syntax_check refused", err, NULL);
		if (size <= FUZZ_JSON_MAX_BYTES && strcmp(err, decode_err) != 0)
			die("json_decode refused with another message than json_syntax_check", err, decode_err);
		return;
	}
	char *copy = malloc(size + 1);
	if (!copy)
		abort();
	memcpy(copy, data, size);
	copy[size] = '\0';
	cJSON *v = cJSON_ParseWithOpts(copy, NULL, 1);
	if (!v)
		die("json_syntax_check passed a text cJSON refuses", copy, NULL);
	if (tree_string_bytes(v) != raw_string_bytes(copy, size))
		die("a string was cut short or grew in decoding", copy, NULL);
	if (!decoded && size <= FUZZ_JSON_MAX_BYTES && strncmp(decode_err, "duplicate key", 13) != 0 &&
	    strncmp(decode_err, "number out of range", 19) != 0)
		die("json_decode refused a text json_syntax_check passed, for another reason than a duplicate key "
		    "or a number out of range", copy, decode_err);
	cJSON_Delete(v);
	free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct json_limits lim = { FUZZ_JSON_MAX_BYTES, FUZZ_JSON_MAX_DEPTH };
	char err[256] = "";

	cJSON *v = json_decode((const char *)data, size, &lim, err, sizeof(err));
	if (!v && !err[0])
		die("json_decode failed without a message", NULL, NULL);
	check_syntax(data, size, v, err);
	if (!v)
		return 0;
	check_u64(v);
	walk(v);

	char *first = json_encode_canonical(v);
	char *again = json_encode_canonical(v);
	if (strcmp(first, again) != 0)
		die("encoding the same tree twice gave different bytes", first, again);
	free(again);

	/* the canonical text may be longer than the input (control characters
	 * become \u00XX), so only the depth limit applies to it */
	struct json_limits relim = { 0, FUZZ_JSON_MAX_DEPTH };
	err[0] = '\0';
	cJSON *w = json_decode(first, strlen(first), &relim, err, sizeof(err));
	if (!w)
		die("the canonical text does not decode", first, err);
	if (!same_value(v, w)) {
		char *shown = cJSON_PrintUnformatted(w);
		die("the canonical text decodes to other values", first, shown);
	}
	char *second = json_encode_canonical(w);
	if (strcmp(first, second) != 0)
		die("the canonical text re-encodes to other bytes", first, second);

	free(second);
	cJSON_Delete(w);
	free(first);
	cJSON_Delete(v);
	return 0;
}
