/* core/freshness.c: the plane's word on whether what it serves is current
 * (see freshness.h). */
#include "core/freshness.h"
#include "log.h"
#include "persist/persist.h"
#include "util.h"
#include "xmalloc.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct freshness {
	pthread_mutex_t lock;
	struct fresh_view v;
	uint64_t episodes;
};

struct freshness *freshness_new(void)
{
	struct freshness *f = xcalloc(1, sizeof(*f));
	pthread_mutex_init(&f->lock, NULL);
	return f;
}

void freshness_free(struct freshness *f)
{
	if (!f)
		return;
	pthread_mutex_destroy(&f->lock);
	free(f);
}

static void ask(struct persist *p, struct fresh_view *n, int64_t *recheck_ms)
{
	memset(n, 0, sizeof(*n));
	*recheck_ms = 0;
	if (p->ops->stale)
		n->stale = p->ops->stale(p, &n->since, n->why, sizeof(n->why), recheck_ms);
}

void freshness_ask(struct persist *p, struct fresh_view *v)
{
	int64_t recheck;
	ask(p, v, &recheck);
}

bool freshness_update(struct freshness *f, struct persist *p, int64_t *recheck_ms)
{
	struct fresh_view n;
	ask(p, &n, recheck_ms);
	pthread_mutex_lock(&f->lock);
	bool changed = n.stale != f->v.stale;
	if (changed && n.stale)
		f->episodes++;
	int64_t since = f->v.since;
	if (!changed && n.stale)
		n = f->v;   /* one episode, one start and one reason: nodes rewrite what they show when it changes */
	f->v = n;
	pthread_mutex_unlock(&f->lock);
	if (changed && n.stale)
		log_warn("stale: this plane cannot vouch that it is current: %s; serving what it holds, refusing "
			 "writes, and telling its nodes (they move to a plane that is current)", n.why);
	else if (changed)
		log_info("stale no more: this plane is current again (it was stale for %llds)",
			 (long long)(wall_seconds() - since));
	return changed;
}

void freshness_get(struct freshness *f, struct fresh_view *v)
{
	pthread_mutex_lock(&f->lock);
	*v = f->v;
	pthread_mutex_unlock(&f->lock);
}

bool freshness_stale(struct freshness *f)
{
	pthread_mutex_lock(&f->lock);
	bool s = f->v.stale;
	pthread_mutex_unlock(&f->lock);
	return s;
}

static void member(const struct fresh_view *v, bool brief, struct buf *b)
{
	if (!v->stale)
		return;
	buf_printf(b, ",\"stale\":{\"since\":%lld,\"why\":", (long long)v->since);
	char why[sizeof(v->why)];
	snprintf(why, sizeof(why), "%s", v->why);
	/* the reason's first clause; what follows " (" names addresses and
	 * errors, for those who may read more */
	char *detail = brief ? strstr(why, " (") : NULL;
	if (detail)
		*detail = '\0';
	buf_json_string(b, why);
	buf_putc(b, '}');
}

void freshness_member(struct freshness *f, struct buf *b)
{
	struct fresh_view v;
	freshness_get(f, &v);
	member(&v, false, b);
}

void freshness_member_brief(struct freshness *f, struct buf *b)
{
	struct fresh_view v;
	freshness_get(f, &v);
	member(&v, true, b);
}

bool freshness_header(struct freshness *f, char *out, size_t cap)
{
	struct fresh_view v;
	freshness_get(f, &v);
	if (!v.stale)
		return false;
	/* a header holds no line break; the reason is ours, but say it safely */
	for (char *c = v.why; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = ' ';
	snprintf(out, cap, "%lld %s", (long long)v.since, v.why);
	return true;
}

uint64_t freshness_episodes(struct freshness *f)
{
	pthread_mutex_lock(&f->lock);
	uint64_t e = f->episodes;
	pthread_mutex_unlock(&f->lock);
	return e;
}
