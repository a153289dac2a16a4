/* wraps.c: the node's wraps of its sealed secrets' data keys, in memory
 * and in STATE_DIR/wraps.json (see wraps.h). */
#include "wraps.h"
#include "json.h"
#include "resource.h"
#include "util.h"
#include "xmalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void wraps_init(struct wraps *w)
{
	memset(w, 0, sizeof(*w));
	strmap_init(&w->by_name);
}

static void entry_free(struct wrap_entry *e)
{
	free(e->key);
	free(e->name);
	free(e);
}

/* The map's key of (name, id): names hold no newline. malloc'd. */
static char *key_of(const char *name, const char *id)
{
	return xasprintf("%s\n%s", name, id);
}

void wraps_release(struct wraps *w)
{
	for (size_t i = 0; i < w->by_name.cap; i++)
		if (w->by_name.slots[i].key)
			entry_free((struct wrap_entry *)w->by_name.slots[i].val);
	strmap_release(&w->by_name);
	memset(w, 0, sizeof(*w));
}

const struct wrap_entry *wraps_get(const struct wraps *w, const char *name, const char *id)
{
	intptr_t v;
	char *k = key_of(name, id);
	bool got = strmap_get(&w->by_name, k, &v);
	free(k);
	return got ? (const struct wrap_entry *)v : NULL;
}

void wraps_put(struct wraps *w, const char *name, const char *id, const char *kid, const char *wrap)
{
	intptr_t v;
	struct wrap_entry *e;
	char *k = key_of(name, id);
	if (strmap_get(&w->by_name, k, &v)) {
		free(k);
		e = (struct wrap_entry *)v;
		if (!strcmp(e->kid, kid) && !strcmp(e->wrap, wrap))
			return;
	} else {
		e = xcalloc(1, sizeof(*e));
		e->key = k;
		e->name = xstrdup(name);
		strmap_put(&w->by_name, e->key, (intptr_t)e);
		w->n++;
	}
	snprintf(e->id, sizeof(e->id), "%s", id);
	snprintf(e->kid, sizeof(e->kid), "%s", kid);
	snprintf(e->wrap, sizeof(e->wrap), "%s", wrap);
	w->dirty = true;
}

void wraps_del(struct wraps *w, const char *name, const char *id)
{
	intptr_t v;
	char *k = key_of(name, id);
	bool got = strmap_get(&w->by_name, k, &v);
	free(k);
	if (!got)
		return;
	struct wrap_entry *e = (struct wrap_entry *)v;
	strmap_del(&w->by_name, e->key);
	entry_free(e);
	w->n--;
	w->dirty = true;
}

void wraps_each(const struct wraps *w, void (*fn)(void *ctx, const struct wrap_entry *e), void *ctx)
{
	for (size_t i = 0; i < w->by_name.cap; i++)
		if (w->by_name.slots[i].key)
			fn(ctx, (const struct wrap_entry *)w->by_name.slots[i].val);
}

void wraps_prune(struct wraps *w, bool (*keep)(void *ctx, const struct wrap_entry *e), void *ctx)
{
	/* collected first: a deletion shifts the map's slots */
	struct wrap_entry **drop = xcalloc(w->n ? w->n : 1, sizeof(*drop));
	size_t nd = 0;
	for (size_t i = 0; i < w->by_name.cap; i++) {
		struct wrap_entry *e = (struct wrap_entry *)w->by_name.slots[i].val;
		if (w->by_name.slots[i].key && !keep(ctx, e))
			drop[nd++] = e;
	}
	for (size_t i = 0; i < nd; i++) {
		strmap_del(&w->by_name, drop[i]->key);
		entry_free(drop[i]);
		w->n--;
		w->dirty = true;
	}
	free(drop);
}

static bool lower_hex(const char *s, size_t len)
{
	if (strlen(s) != len)
		return false;
	for (; *s; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
			return false;
	return true;
}

/* Standard base64 with padding of 80 bytes: 107 characters and "=". */
static bool wrap_b64(const char *s)
{
	if (strlen(s) != WRAPS_B64_LEN || s[WRAPS_B64_LEN - 1] != '=')
		return false;
	for (size_t i = 0; i < WRAPS_B64_LEN - 1; i++) {
		char c = s[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
		      c == '/'))
			return false;
	}
	return true;
}

static int fail(char *err, size_t errlen, const char *what)
{
	snprintf(err, errlen, "%s", what);
	return -1;
}

/* One entry x of name: checked (0), or -1 with err. */
static int check_entry(const char *name, const cJSON *x, const char *top, char *err, size_t errlen)
{
	const char *id = json_get_string(x, "id"), *wrap = json_get_string(x, "wrap");
	const char *ekid = cJSON_GetObjectItemCaseSensitive(x, "kid") ? json_get_string(x, "kid") : top;
	if (!cJSON_IsObject(x) || !id || !lower_hex(id, ENVELOPE_ID_LEN)) {
		snprintf(err, errlen, "wraps.%s.id: missing, or not an envelope id (32 hex digits)", name);
		return -1;
	}
	if (!wrap || !wrap_b64(wrap)) {
		snprintf(err, errlen, "wraps.%s.wrap: missing, or not the base64 of %d bytes", name,
			 ENVELOPE_WRAP_BYTES);
		return -1;
	}
	if (!ekid || !lower_hex(ekid, KEY_ID_LEN)) {
		snprintf(err, errlen, "wraps.%s.kid: not a key id (16 hex digits)", name);
		return -1;
	}
	const cJSON *f;
	cJSON_ArrayForEach(f, x)
	{
		if (strcmp(f->string, "id") && strcmp(f->string, "wrap") && strcmp(f->string, "kid")) {
			snprintf(err, errlen, "wraps.%s: unknown field '%.64s'", name, f->string);
			return -1;
		}
	}
	return 0;
}

static void put_entry(struct wraps *w, const char *name, const cJSON *x, const char *top)
{
	const char *ekid = cJSON_GetObjectItemCaseSensitive(x, "kid") ? json_get_string(x, "kid") : top;
	wraps_put(w, name, json_get_string(x, "id"), ekid, json_get_string(x, "wrap"));
}

int wraps_parse(const char *text, size_t len, const char *kid, struct wraps *w, char *err, size_t errlen)
{
	char e2[256];
	struct json_limits lim = { WRAPS_TEXT_MAX, 6 };
	cJSON *doc = json_decode(text, len, &lim, e2, sizeof(e2));
	if (!doc) {
		snprintf(err, errlen, "not JSON: %s", e2);
		return -1;
	}
	int rc = -1;
	const char *top = json_get_string(doc, "kid");
	const cJSON *wr = cJSON_GetObjectItemCaseSensitive(doc, "wraps");
	if (!cJSON_IsObject(doc) || !top || !lower_hex(top, KEY_ID_LEN)) {
		fail(err, errlen, "kid: missing, or not a key id (16 hex digits)");
		goto out;
	}
	if (kid && strcmp(top, kid) != 0) {
		snprintf(err, errlen, "kid: %s, not the key asked for (%s)", top, kid);
		goto out;
	}
	if (!cJSON_IsObject(wr)) {
		fail(err, errlen, "wraps: missing, or not an object");
		goto out;
	}
	size_t n = 0;
	const cJSON *x;
	cJSON_ArrayForEach(x, wr)
	{
		const char *name = x->string;
		char ferr[256];
		if (resource_fullname_check(name, ferr, sizeof(ferr)) < 0 || resource_type_of(name) != RES_SECRET) {
			snprintf(err, errlen, "wraps: '%.*s' is not a secret's name", RES_FULLNAME_MAX, name);
			goto out;
		}
		/* a name's entries: one object, or (a file holding the
		 * committed envelope's and a candidate's) an array of them */
		if (cJSON_IsArray(x)) {
			int k = cJSON_GetArraySize(x);
			if (k < 1 || k > WRAPS_PER_NAME_MAX) {
				snprintf(err, errlen, "wraps.%s: 1 to %d entries", name, WRAPS_PER_NAME_MAX);
				goto out;
			}
			const cJSON *y;
			cJSON_ArrayForEach(y, x)
			{
				if (++n > ENVELOPE_WRAPS_MAX) {
					fail(err, errlen, "wraps: too many entries");
					goto out;
				}
				if (check_entry(name, y, top, err, errlen) < 0)
					goto out;
			}
			continue;
		}
		if (++n > ENVELOPE_WRAPS_MAX) {
			fail(err, errlen, "wraps: too many entries");
			goto out;
		}
		if (check_entry(name, x, top, err, errlen) < 0)
			goto out;
	}
	cJSON_ArrayForEach(x, wr)
	{
		if (cJSON_IsArray(x)) {
			const cJSON *y;
			cJSON_ArrayForEach(y, x)
				put_entry(w, x->string, y, top);
		} else {
			put_entry(w, x->string, x, top);
		}
	}
	rc = 0;
out:
	cJSON_Delete(doc);
	return rc;
}

static int cmp_entry(const void *a, const void *b)
{
	const struct wrap_entry *x = *(const struct wrap_entry *const *)a, *y = *(const struct wrap_entry *const *)b;
	int c = strcmp(x->name, y->name);
	return c ? c : strcmp(x->id, y->id);
}

static void entry_text(const struct wrap_entry *e, const char *kid, struct buf *out)
{
	buf_printf(out, "{\"id\":\"%s\"", e->id);
	if (strcmp(e->kid, kid) != 0)
		buf_printf(out, ",\"kid\":\"%s\"", e->kid);
	buf_printf(out, ",\"wrap\":\"%s\"}", e->wrap);
}

void wraps_text(const struct wraps *w, const char *kid, struct buf *out)
{
	const struct wrap_entry **v = xcalloc(w->n ? w->n : 1, sizeof(*v));
	size_t n = 0;
	for (size_t i = 0; i < w->by_name.cap; i++)
		if (w->by_name.slots[i].key)
			v[n++] = (const struct wrap_entry *)w->by_name.slots[i].val;
	qsort(v, n, sizeof(*v), cmp_entry);
	buf_reset(out);
	buf_printf(out, "{\"kid\":\"%s\",\"wraps\":{", kid);
	for (size_t i = 0; i < n;) {
		size_t j = i + 1;   /* v[i..j): one name's entries */
		while (j < n && strcmp(v[j]->name, v[i]->name) == 0)
			j++;
		if (i)
			buf_putc(out, ',');
		buf_json_string(out, v[i]->name);
		buf_putc(out, ':');
		if (j - i > 1)
			buf_putc(out, '[');
		for (size_t k = i; k < j; k++) {
			if (k > i)
				buf_putc(out, ',');
			entry_text(v[k], kid, out);
		}
		if (j - i > 1)
			buf_putc(out, ']');
		i = j;
	}
	buf_puts(out, "}}\n");
	free(v);
}

int wraps_load(const char *state_dir, struct wraps *w, char *err, size_t errlen)
{
	char *path = xasprintf("%s/%s", state_dir, WRAPS_FILE);
	size_t len;
	char *text = read_file_limited(path, WRAPS_TEXT_MAX, &len);
	int rc = 0;
	if (!text) {
		if (errno != ENOENT) {
			snprintf(err, errlen, "cannot read '%s': %s", path, strerror(errno));
			rc = -1;
		}
		goto out;
	}
	char e2[512];
	if (wraps_parse(text, len, NULL, w, e2, sizeof(e2)) < 0) {
		snprintf(err, errlen, "%s: %s", path, e2);
		rc = -1;
		goto out;
	}
	w->dirty = false;
out:
	free(text);
	free(path);
	return rc;
}

int wraps_save(const char *state_dir, struct wraps *w, const char *kid, char *err, size_t errlen)
{
	char *path = xasprintf("%s/%s", state_dir, WRAPS_FILE);
	struct buf b = BUF_INIT;
	wraps_text(w, kid, &b);
	int rc = -1;
	if (write_file_replace(path, b.data, b.len, 0600, true) < 0) {
		snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
		goto out;
	}
	/* the rename durable too */
	int dfd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fsync(dfd) < 0) {
		snprintf(err, errlen, "cannot fsync '%s': %s", state_dir, strerror(errno));
		if (dfd >= 0)
			close(dfd);
		goto out;
	}
	close(dfd);
	w->dirty = false;
	rc = 0;
out:
	buf_release(&b);
	free(path);
	return rc;
}
