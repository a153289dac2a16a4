/* json.c: bounded JSON decoding and canonical encoding (see json.h). */
#include "json.h"
#include "buf.h"
#include "json_syntax.h"
#include "util.h"
#include "xmalloc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int key_cmp(const void *a, const void *b)
{
	const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
	return strcmp(x->string, y->string);
}

/* Appends a path component for error messages: ".key" or "[i]". */
static void path_push_key(char *path, size_t cap, const char *key)
{
	size_t n = strlen(path);
	if (n < cap)
		snprintf(path + n, cap - n, "%s%s", n ? "." : "", key);
}

static void path_push_index(char *path, size_t cap, int i)
{
	size_t n = strlen(path);
	if (n < cap)
		snprintf(path + n, cap - n, "[%d]", i);
}

/* The error of check_dups: key (may be NULL) and path are the peer's, so
 * shown through str_show; apart, so the buffers are not in every frame of
 * the recursion. */
static __attribute__((noinline)) void dups_error(char *err, size_t errlen, const char *what, const char *key,
						 const char *path)
{
	char show[STR_SHOW_BUF], where[STR_SHOW_BUF];
	if (key)
		snprintf(err, errlen, "%s '%s'%s%s", what, str_show(key, show), *path ? " in " : "",
			 str_show(path, where));
	else
		snprintf(err, errlen, "%s%s%s", what, *path ? " at " : "", str_show(path, where));
}

/* Refuses duplicate keys and numbers out of a double's range (cJSON reads
 * 1e999 as infinity, which would print back as null). */
static int check_dups(const cJSON *v, char *path, size_t cap, char *err, size_t errlen)
{
	size_t saved = strlen(path);
	if (cJSON_IsNumber(v) && !isfinite(v->valuedouble)) {
		dups_error(err, errlen, "number out of range", NULL, path);
		return -1;
	}
	if (cJSON_IsObject(v)) {
		size_t n = 0;
		for (const cJSON *c = v->child; c; c = c->next)
			n++;
		if (n > 1) {
			const cJSON **keys = xmalloc(n * sizeof(*keys));
			size_t i = 0;
			for (const cJSON *c = v->child; c; c = c->next)
				keys[i++] = c;
			qsort(keys, n, sizeof(*keys), key_cmp);
			for (i = 1; i < n; i++) {
				if (strcmp(keys[i - 1]->string, keys[i]->string) == 0) {
					dups_error(err, errlen, "duplicate key", keys[i]->string, path);
					free(keys);
					return -1;
				}
			}
			free(keys);
		}
		for (const cJSON *c = v->child; c; c = c->next) {
			path_push_key(path, cap, c->string);
			int r = check_dups(c, path, cap, err, errlen);
			path[saved] = '\0';
			if (r < 0)
				return -1;
		}
	} else if (cJSON_IsArray(v)) {
		int i = 0;
		for (const cJSON *c = v->child; c; c = c->next, i++) {
			path_push_index(path, cap, i);
			int r = check_dups(c, path, cap, err, errlen);
			path[saved] = '\0';
			if (r < 0)
				return -1;
		}
	}
	return 0;
}

cJSON *json_decode(const char *text, size_t len, const struct json_limits *lim,
		   char *err, size_t errlen)
{
	size_t max_bytes = lim ? lim->max_bytes : 0;
	int max_depth = lim && lim->max_depth > 0 ? lim->max_depth : JSON_DEFAULT_MAX_DEPTH;

	if (max_bytes && len > max_bytes) {
		snprintf(err, errlen, "JSON text of %zu bytes exceeds the limit of %zu", len, max_bytes);
		return NULL;
	}
	if (json_syntax_check(text, len, max_depth, err, errlen) < 0)
		return NULL;
	/* cJSON reads until a NUL: hand it a terminated copy so it can never
	 * run past the end (CVE-2023-53154 class) */
	char *copy = xstrndup(text, len);
	const char *end = NULL;
	cJSON *v = cJSON_ParseWithOpts(copy, &end, 1);
	if (!v) {
		size_t pos = end && end >= copy ? (size_t)(end - copy) : 0;
		if (pos > len)
			pos = len;
		char at[JSON_WHERE_BUF];
		json_syntax_where(text, len, pos, at, sizeof(at));
		snprintf(err, errlen, "malformed JSON at %s", at);
		free(copy);
		return NULL;
	}
	free(copy);
	char path[256] = "";
	if (check_dups(v, path, sizeof(path), err, errlen) < 0) {
		cJSON_Delete(v);
		return NULL;
	}
	return v;
}

void json_sort_keys(cJSON *v)
{
	if (!v)
		return;
	if (cJSON_IsObject(v) && v->child) {
		size_t n = 0;
		for (cJSON *c = v->child; c; c = c->next)
			n++;
		if (n > 1) {
			cJSON **items = xmalloc(n * sizeof(*items));
			size_t i = 0;
			for (cJSON *c = v->child; c; c = c->next)
				items[i++] = c;
			qsort(items, n, sizeof(*items), key_cmp);
			/* relink: cJSON keeps child->prev pointing at the last item */
			for (i = 0; i < n; i++) {
				items[i]->prev = i ? items[i - 1] : items[n - 1];
				items[i]->next = i + 1 < n ? items[i + 1] : NULL;
			}
			v->child = items[0];
			free(items);
		}
	}
	for (cJSON *c = v->child; c; c = c->next)
		json_sort_keys(c);
}

/* cJSON prints a number with 15 significant digits whenever that reads
 * back within an epsilon of it, which changes values (9007199254740993
 * prints as 9.00719925474099e+15, DBL_MAX as 1.79769313486232e+308 which
 * reads back as infinity). For the print, each finite number becomes a raw
 * item holding the shortest text that reads back exactly (decoded trees
 * hold no raw items of their own). */
static void numbers_to_raw(cJSON *v, bool to_raw)
{
	if (to_raw && cJSON_IsNumber(v) && isfinite(v->valuedouble)) {
		char text[32];
		for (int prec = 15; prec <= 17; prec++) {
			snprintf(text, sizeof(text), "%.*g", prec, v->valuedouble);
			if (strtod(text, NULL) == v->valuedouble)
				break;
		}
		v->valuestring = xstrdup(text);
		v->type = (v->type & ~0xff) | cJSON_Raw;
	} else if (!to_raw && cJSON_IsRaw(v)) {
		free(v->valuestring);
		v->valuestring = NULL;
		v->type = (v->type & ~0xff) | cJSON_Number;
	}
	for (cJSON *c = v->child; c; c = c->next)
		numbers_to_raw(c, to_raw);
}

char *json_encode_canonical(cJSON *v)
{
	json_sort_keys(v);
	numbers_to_raw(v, true);
	char *s = cJSON_PrintUnformatted(v);
	numbers_to_raw(v, false);
	if (!s) {
		fprintf(stderr, "fatal: out of memory encoding JSON\n");
		abort();
	}
	return s;
}

size_t json_encode_canonical_buf(cJSON *v, struct buf *out)
{
	json_sort_keys(v);
	numbers_to_raw(v, true);
	buf_reset(out);
	buf_reserve(out, 256);
	/* cJSON may need a few bytes more than it prints: grow until it fits */
	while (!cJSON_PrintPreallocated(v, out->data, (int)(out->cap > INT32_MAX ? INT32_MAX : out->cap), 0))
		buf_reserve(out, out->cap);
	numbers_to_raw(v, false);
	out->len = strlen(out->data);
	return out->len;
}

bool json_get_u64(const cJSON *v, uint64_t *out)
{
	if (!cJSON_IsNumber(v))
		return false;
	double d = v->valuedouble;
	if (!(d >= 0) || d >= 9007199254740992.0 || floor(d) != d)
		return false;
	*out = (uint64_t)d;
	return true;
}

const char *json_get_string(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}
