/* core/delta.c: the delta computer (see delta.h). */
#include "core/delta.h"
#include "xmalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_upsert(const void *a, const void *b)
{
	const struct delta_item *x = a, *y = b;
	if (x->rank != y->rank)
		return x->rank - y->rank;
	return strcmp(x->name, y->name);
}

static int cmp_removal(const void *a, const void *b)
{
	const struct delta_item *x = a, *y = b;
	if (x->rank != y->rank)
		return y->rank - x->rank;   /* referrers go first */
	return strcmp(x->name, y->name);
}

static void push_item(struct delta_item **arr, size_t *n, size_t *cap, const struct store_entry *e,
		      const char *body, size_t len, uint64_t version)
{
	if (*n == *cap) {
		*cap = *cap ? *cap * 2 : 16;
		*arr = xrealloc(*arr, *cap * sizeof(**arr));
	}
	(*arr)[(*n)++] = (struct delta_item){ e->name, body, len, version, e->rank };
}

void delta_collect(struct store *s, uint64_t have, const struct sub *sub, struct delta *d)
{
	delta_collect_at(s, have, store_version(s), sub, d);
}

void delta_collect_at(struct store *s, uint64_t have, uint64_t x, const struct sub *sub, struct delta *d)
{
	size_t upcap = 0, rmcap = 0;
	/* the state at `have` is known when the history reaches back to it */
	bool have_known = have >= store_history_floor(s);
	memset(d, 0, sizeof(*d));
	d->version = x;
	d->full = have == 0 || have < store_horizon(s) || have > x;
	d->base = d->full ? 0 : have;

	if (d->full) {
		for (const struct store_entry *e = store_oldest(s); e; e = e->next) {
			size_t len;
			uint64_t v;
			const char *body = store_body_at(e, x, &len, &v);
			if (body && sub_match(sub, e->name))
				push_item(&d->up, &d->nup, &upcap, e, body, len, v);
		}
	} else {
		/* newest first, down to the node's version: only the gap is read
		 * (a state at x newer than `have` is at most as old as the
		 * entry's last change) */
		for (const struct store_entry *e = store_newest(s); e && e->version > have; e = e->prev) {
			if (!sub_match(sub, e->name))
				continue;
			size_t len, hlen;
			uint64_t v, hv;
			const char *body = store_body_at(e, x, &len, &v);
			if (v <= have)
				continue;   /* no change in (have, x] */
			if (have_known) {
				const char *old = store_body_at(e, have, &hlen, &hv);
				if ((!old && !body) || (old && body && hlen == len && memcmp(old, body, len) == 0))
					continue;   /* changed and changed back: the node holds it */
			}
			if (body)
				push_item(&d->up, &d->nup, &upcap, e, body, len, v);
			else
				push_item(&d->rm, &d->nrm, &rmcap, e, NULL, 0, v);
		}
	}
	if (d->nup > 1)
		qsort(d->up, d->nup, sizeof(*d->up), cmp_upsert);
	if (d->nrm > 1)
		qsort(d->rm, d->nrm, sizeof(*d->rm), cmp_removal);
}

void delta_release(struct delta *d)
{
	free(d->up);
	free(d->rm);
	memset(d, 0, sizeof(*d));
}

void delta_encode_tail(const struct delta *d, struct buf *out)
{
	size_t est = 96;
	for (size_t i = 0; i < d->nup; i++)
		est += d->up[i].body_len + strlen(d->up[i].name) + 48;
	for (size_t i = 0; i < d->nrm; i++)
		est += strlen(d->rm[i].name) + 4;
	buf_reserve(out, est);

	buf_printf(out, "\"version\":%llu,\"base\":%llu,\"full\":%s,\"upserts\":[",
		   (unsigned long long)d->version, (unsigned long long)d->base, d->full ? "true" : "false");
	for (size_t i = 0; i < d->nup; i++) {
		const struct delta_item *e = &d->up[i];
		if (i)
			buf_putc(out, ',');
		buf_puts(out, "{\"name\":");
		buf_json_string(out, e->name);
		buf_printf(out, ",\"version\":%llu,\"body\":", (unsigned long long)e->version);
		buf_append(out, e->body, e->body_len);
		buf_putc(out, '}');
	}
	buf_puts(out, "],\"removed\":[");
	for (size_t i = 0; i < d->nrm; i++) {
		if (i)
			buf_putc(out, ',');
		buf_json_string(out, d->rm[i].name);
	}
	buf_puts(out, "]}");
}
