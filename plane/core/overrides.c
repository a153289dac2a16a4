/* core/overrides.c: the overridden versions (see overrides.h): a sorted
 * array, newest last; a lookup is a binary search. Only versions the
 * version log still names are loaded at start, so it stays as small as
 * the log (--history-keep). */
#include "core/overrides.h"
#include "log.h"
#include "statement.h"
#include "xmalloc.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct overrides {
	pthread_mutex_t lock;
	uint64_t *v;
	unsigned *marks;   /* per version: the notes not forgotten (a writer's tentative one, and
			    * another replica's real one for the same number, are two) */
	size_t n, cap;
};

struct overrides *overrides_new(void)
{
	struct overrides *o = xcalloc(1, sizeof(*o));
	pthread_mutex_init(&o->lock, NULL);
	return o;
}

void overrides_free(struct overrides *o)
{
	if (!o)
		return;
	pthread_mutex_destroy(&o->lock);
	free(o->v);
	free(o->marks);
	free(o);
}

/* The index of the first element > v. */
static size_t upper(const struct overrides *o, uint64_t v)
{
	size_t lo = 0, hi = o->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (o->v[mid] <= v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

void overrides_note(struct overrides *o, uint64_t v)
{
	if (!o || !v)
		return;
	pthread_mutex_lock(&o->lock);
	size_t at = upper(o, v);
	if (at > 0 && o->v[at - 1] == v) {
		o->marks[at - 1]++;
	} else {
		if (o->n == o->cap) {
			o->cap = o->cap ? o->cap * 2 : 16;
			o->v = xrealloc(o->v, o->cap * sizeof(*o->v));
			o->marks = xrealloc(o->marks, o->cap * sizeof(*o->marks));
		}
		memmove(o->v + at + 1, o->v + at, (o->n - at) * sizeof(*o->v));
		memmove(o->marks + at + 1, o->marks + at, (o->n - at) * sizeof(*o->marks));
		o->v[at] = v;
		o->marks[at] = 1;
		o->n++;
	}
	pthread_mutex_unlock(&o->lock);
}

void overrides_forget(struct overrides *o, uint64_t v)
{
	if (!o)
		return;
	pthread_mutex_lock(&o->lock);
	size_t at = upper(o, v);
	if (at > 0 && o->v[at - 1] == v && --o->marks[at - 1] == 0) {
		memmove(o->v + at - 1, o->v + at, (o->n - at) * sizeof(*o->v));
		memmove(o->marks + at - 1, o->marks + at, (o->n - at) * sizeof(*o->marks));
		o->n--;
	}
	pthread_mutex_unlock(&o->lock);
}

uint64_t overrides_at(struct overrides *o, uint64_t v)
{
	if (!o)
		return 0;
	pthread_mutex_lock(&o->lock);
	size_t at = upper(o, v);
	uint64_t r = at ? o->v[at - 1] : 0;
	pthread_mutex_unlock(&o->lock);
	return r;
}

void overrides_relay_member(struct overrides *o, uint64_t lo, uint64_t hi, struct buf *out)
{
	if (!o)
		return;
	pthread_mutex_lock(&o->lock);
	size_t first = upper(o, lo), end = upper(o, hi);
	for (size_t i = first; i < end; i++)
		buf_printf(out, "%s\"%llu\"", i == first ? ",\"overridden\":[" : ",", (unsigned long long)o->v[i]);
	if (end > first)
		buf_putc(out, ']');
	pthread_mutex_unlock(&o->lock);
}

static int load_cb(void *ctx, const struct persist_version *v)
{
	if (v->override)
		overrides_note(ctx, v->version);
	return 0;
}

int overrides_load(struct overrides *o, struct persist *p, size_t limit, char *err, size_t errlen)
{
	if (!p->ops->log_list)
		return 0;   /* no version log (a relay: its statements are the upstream's) */
	return p->ops->log_list(p, NULL, limit, load_cb, o, err, errlen);
}

void overrides_push_field(struct overrides *o, uint64_t version, const char *stmt, struct buf *out)
{
	uint64_t v = overrides_at(o, version);
	if (!v && stmt) {
		/* a relay keeps no log: the upstream's signed word */
		struct statement st;
		if (statement_peek(stmt, strlen(stmt), &st) == 0) {
			if (st.version == version)
				v = st.overridden;
			statement_release(&st);
		}
	}
	if (v)
		buf_printf(out, "\"overridden\":%llu,", (unsigned long long)v);
}
