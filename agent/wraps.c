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
	free(e->name);
	free(e);
}

void wraps_release(struct wraps *w)
{
	for (size_t i = 0; i < w->by_name.cap; i++)
		if (w->by_name.slots[i].key)
			entry_free((struct wrap_entry *)w->by_name.slots[i].val);
	strmap_release(&w->by_name);
	memset(w, 0, sizeof(*w));
}

const struct wrap_entry *wraps_get(const struct wraps *w, const char *name)
{
	intptr_t v;
	return strmap_get(&w->by_name, name, &v) ? (const struct wrap_entry *)v : NULL;
}

void wraps_put(struct wraps *w, const char *name, const char *id, const char *kid, const char *wrap)
{
	intptr_t v;
	struct wrap_entry *e;
	if (strmap_get(&w->by_name, name, &v)) {
		e = (struct wrap_entry *)v;
		if (!strcmp(e->id, id) && !strcmp(e->kid, kid) && !strcmp(e->wrap, wrap))
			return;
	} else {
		e = xcalloc(1, sizeof(*e));
		e->name = xstrdup(name);
		strmap_put(&w->by_name, e->name, (intptr_t)e);
		w->n++;
	}
	snprintf(e->id, sizeof(e->id), "%s", id);
	snprintf(e->kid, sizeof(e->kid), "%s", kid);
	snprintf(e->wrap, sizeof(e->wrap), "%s", wrap);
	w->dirty = true;
}

void wraps_del(struct wraps *w, const char *name)
{
	intptr_t v;
	if (!strmap_get(&w->by_name, name, &v))
		return;
	struct wrap_entry *e = (struct wrap_entry *)v;
	strmap_del(&w->by_name, name);
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
		strmap_del(&w->by_name, drop[i]->name);
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
		if (++n > ENVELOPE_WRAPS_MAX) {
			fail(err, errlen, "wraps: too many entries");
			goto out;
		}
		const char *name = x->string;
		char ferr[256];
		if (resource_fullname_check(name, ferr, sizeof(ferr)) < 0 || resource_type_of(name) != RES_SECRET) {
			snprintf(err, errlen, "wraps: '%.*s' is not a secret's name", RES_FULLNAME_MAX, name);
			goto out;
		}
		const char *id = json_get_string(x, "id"), *wrap = json_get_string(x, "wrap");
		const char *ekid = cJSON_GetObjectItemCaseSensitive(x, "kid") ? json_get_string(x, "kid") : top;
		if (!cJSON_IsObject(x) || !id || !lower_hex(id, ENVELOPE_ID_LEN)) {
			snprintf(err, errlen, "wraps.%s.id: missing, or not an envelope id (32 hex digits)", name);
			goto out;
		}
		if (!wrap || !wrap_b64(wrap)) {
			snprintf(err, errlen, "wraps.%s.wrap: missing, or not the base64 of %d bytes", name,
				 ENVELOPE_WRAP_BYTES);
			goto out;
		}
		if (!ekid || !lower_hex(ekid, KEY_ID_LEN)) {
			snprintf(err, errlen, "wraps.%s.kid: not a key id (16 hex digits)", name);
			goto out;
		}
		cJSON *f;
		cJSON_ArrayForEach(f, x)
		{
			if (strcmp(f->string, "id") && strcmp(f->string, "wrap") && strcmp(f->string, "kid")) {
				snprintf(err, errlen, "wraps.%s: unknown field '%.64s'", name, f->string);
				goto out;
			}
		}
	}
	cJSON_ArrayForEach(x, wr)
	{
		const char *ekid = cJSON_GetObjectItemCaseSensitive(x, "kid") ? json_get_string(x, "kid") : top;
		wraps_put(w, x->string, json_get_string(x, "id"), ekid, json_get_string(x, "wrap"));
	}
	rc = 0;
out:
	cJSON_Delete(doc);
	return rc;
}

static int cmp_entry(const void *a, const void *b)
{
	return strcmp((*(const struct wrap_entry *const *)a)->name, (*(const struct wrap_entry *const *)b)->name);
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
	for (size_t i = 0; i < n; i++) {
		if (i)
			buf_putc(out, ',');
		buf_json_string(out, v[i]->name);
		buf_printf(out, ":{\"id\":\"%s\"", v[i]->id);
		if (strcmp(v[i]->kid, kid) != 0)
			buf_printf(out, ",\"kid\":\"%s\"", v[i]->kid);
		buf_printf(out, ",\"wrap\":\"%s\"}", v[i]->wrap);
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
