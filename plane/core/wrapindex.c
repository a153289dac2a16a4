/* core/wrapindex.c: a sealed secret's wraps by key id (see wrapindex.h):
 * one sorted array, the strings in one block. */
#include "core/wrapindex.h"
#include "buf.h"
#include "json.h"
#include "xmalloc.h"

#include <stdlib.h>
#include <string.h>

struct wrap_at {
	const char *kid, *wrap;      /* into text */
};

struct wrapindex {
	char *text;                  /* the id, then each kid and wrap, NUL-ended */
	const char *id;
	struct wrap_at *w;           /* sorted by kid */
	size_t n;
};

static int cmp_kid(const void *a, const void *b)
{
	return strcmp(((const struct wrap_at *)a)->kid, ((const struct wrap_at *)b)->kid);
}

struct wrapindex *wrapindex_make(const char *stored, size_t len)
{
	cJSON *doc = cJSON_ParseWithLength(stored, len);
	const char *id = json_get_string(cJSON_GetObjectItemCaseSensitive(doc, "sealed"), "id");
	if (!id) {
		cJSON_Delete(doc);
		return NULL;
	}
	const cJSON *wraps = cJSON_GetObjectItemCaseSensitive(doc, "wraps"), *it;
	/* offsets first (the block may move while it grows), pointers after */
	struct buf b = BUF_INIT;
	buf_append(&b, id, strlen(id) + 1);
	size_t n = 0, cap = 0;
	size_t (*off)[2] = NULL;
	if (!cJSON_IsObject(wraps))
		wraps = NULL;
	cJSON_ArrayForEach(it, wraps) {
		if (!it->string || !cJSON_IsString(it))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 8;
			off = xrealloc(off, cap * sizeof(*off));
		}
		off[n][0] = b.len;
		buf_append(&b, it->string, strlen(it->string) + 1);
		off[n][1] = b.len;
		buf_append(&b, it->valuestring, strlen(it->valuestring) + 1);
		n++;
	}
	cJSON_Delete(doc);
	struct wrapindex *ix = xcalloc(1, sizeof(*ix));
	ix->text = buf_detach(&b, NULL);
	ix->id = ix->text;
	ix->n = n;
	ix->w = xcalloc(n ? n : 1, sizeof(*ix->w));
	for (size_t i = 0; i < n; i++)
		ix->w[i] = (struct wrap_at){ ix->text + off[i][0], ix->text + off[i][1] };
	free(off);
	qsort(ix->w, n, sizeof(*ix->w), cmp_kid);
	return ix;
}

void wrapindex_free(struct wrapindex *ix)
{
	if (!ix)
		return;
	free(ix->text);
	free(ix->w);
	free(ix);
}

const char *wrapindex_id(const struct wrapindex *ix)
{
	return ix ? ix->id : NULL;
}

const char *wrapindex_get(const struct wrapindex *ix, const char *kid)
{
	if (!ix || !kid)
		return NULL;
	struct wrap_at key = { kid, NULL };
	const struct wrap_at *w = bsearch(&key, ix->w, ix->n, sizeof(*ix->w), cmp_kid);
	return w ? w->wrap : NULL;
}
