/* core/relay_feed.c: the state event a relay's stream carries, written
 * from the store: every state of every name that changed after the relay's
 * version, history included (see relay_feed.h; persist/relay/state.c reads
 * it on the relay). */
#include "core/relay_feed.h"
#include "core/store.h"
#include "json.h"
#include "xmalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct item {
	const char *name;
	const char *body;            /* NULL: removed */
	size_t len;
	uint64_t version;
	int64_t deleted_at;
};

struct items {
	struct item *v;
	size_t n, cap;
};

static void add(struct items *it, const char *name, const char *body, size_t len, uint64_t version,
		int64_t deleted_at)
{
	if (it->n == it->cap) {
		it->cap = it->cap ? it->cap * 2 : 64;
		it->v = xrealloc(it->v, it->cap * sizeof(*it->v));
	}
	it->v[it->n++] = (struct item){ name, body, len, version, deleted_at };
}

/* e's states after `after`: the current one and the history's. */
static void states(struct items *it, const struct store_entry *e, uint64_t after)
{
	/* stored bodies: a relay keeps a sealed secret's wraps (GET
	 * /v1/wraps) and makes its push form itself, as this plane does */
	size_t len;
	const char *body = e->body ? store_stored(e, &len) : NULL;
	if (e->version > after)
		add(it, e->name, body, body ? len : 0, e->version, e->body ? 0 : e->deleted_at);
	for (const struct store_hist *h = e->hist; h && h->version > after; h = h->next)
		add(it, e->name, h->stored ? h->stored : h->body, h->stored ? h->stored_len : h->body_len, h->version,
		    0);
}

static int cmp_item(const void *a, const void *b)
{
	const struct item *x = a, *y = b;
	if (x->version != y->version)
		return x->version < y->version ? -1 : 1;
	return strcmp(x->name, y->name);
}

void relay_feed_encode(struct store *s, uint64_t have, uint64_t released, struct buf *out, uint64_t *version,
			bool *full)
{
	struct items it = { 0 };
	store_rdlock(s);
	uint64_t newest = store_version(s), horizon = store_horizon(s);
	*full = have == 0 || have < horizon || have > newest;
	if (*full) {
		for (const struct store_entry *e = store_oldest(s); e; e = e->next)
			states(&it, e, 0);
	} else {
		for (const struct store_entry *e = store_newest(s); e && e->version > have; e = e->prev)
			states(&it, e, have);
	}
	if (it.n > 1)
		qsort(it.v, it.n, sizeof(*it.v), cmp_item);
	size_t est = 160;
	for (size_t i = 0; i < it.n; i++)
		est += it.v[i].len + strlen(it.v[i].name) + 64;
	buf_reserve(out, out->len + est);
	buf_printf(out, "{\"version\":\"%llu\",\"base\":\"%llu\",\"full\":%s,\"horizon\":\"%llu\",\"released\":\"%llu\"",
		   (unsigned long long)newest, (unsigned long long)(*full ? 0 : have), *full ? "true" : "false",
		   (unsigned long long)horizon, (unsigned long long)released);
	buf_puts(out, ",\"changes\":[");
	for (size_t i = 0; i < it.n; i++) {
		const struct item *x = &it.v[i];
		if (i)
			buf_putc(out, ',');
		buf_puts(out, "{\"name\":");
		buf_json_string(out, x->name);
		buf_printf(out, ",\"version\":\"%llu\"", (unsigned long long)x->version);
		if (x->body) {
			buf_puts(out, ",\"body\":");
			buf_append(out, x->body, x->len);
		} else {
			buf_printf(out, ",\"deleted_at\":\"%lld\"", (long long)x->deleted_at);
		}
		buf_putc(out, '}');
	}
	buf_putc(out, ']');   /* the caller adds the statement and closes */
	store_rdunlock(s);
	free(it.v);
	*version = newest;
}
