/* core/digests.c: per-subscription state digests, kept current by every commit
 * and derived for older versions on demand (see digests.h). */
#include "core/digests.h"
#include "log.h"
#include "util.h"
#include "xmalloc.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define TRACKERS_MAX 64
#define OLD_MAX 64
/* new subscriptions walked at most this often (a token bucket): each is a
 * walk of the whole store under its read lock, and any node may name one */
#define WALKS_BURST 64.0
#define WALKS_PER_SECOND 8.0

struct tracker {
	struct sub sub;              /* its own copy; sub.canon is the key */
	struct lthash h;             /* at the store's newest version */
	int64_t used_ms;
	struct tracker *next;
};

struct old_digest {
	uint64_t version;
	char *canon;                 /* NULL: free slot */
	unsigned char d[LTHASH_DIGEST_BYTES];
};

struct digests {
	struct store *store;
	pthread_mutex_t lock;        /* trackers, the cache, the counters */
	struct tracker *trackers;
	size_t ntrackers;
	struct old_digest old[OLD_MAX];
	size_t next_old;
	uint64_t walks, derived, walks_refused;
	double walk_tokens, walk_burst, walk_rate;
	int64_t walk_refill_ms;
};

static void tracker_free(struct tracker *t)
{
	sub_release(&t->sub);
	free(t);
}

/* Called by the store's commit, index write-locked: no digests_at runs. */
static void observe(void *ctx, const struct store_delta *dl, size_t n, uint64_t version)
{
	struct digests *d = ctx;
	(void)version;
	pthread_mutex_lock(&d->lock);
	for (struct tracker *t = d->trackers; t; t = t->next) {
		for (size_t i = 0; i < n; i++) {
			if (!sub_match(&t->sub, dl[i].name))
				continue;
			if (dl[i].old_elem)
				lthash_sub(&t->h, dl[i].old_elem);
			if (dl[i].new_elem)
				lthash_add(&t->h, dl[i].new_elem);
		}
	}
	pthread_mutex_unlock(&d->lock);
}

struct digests *digests_new(struct store *s)
{
	struct digests *d = xcalloc(1, sizeof(*d));
	d->store = s;
	d->walk_tokens = d->walk_burst = WALKS_BURST;
	d->walk_rate = WALKS_PER_SECOND;
	d->walk_refill_ms = now_ms();
	pthread_mutex_init(&d->lock, NULL);
	store_set_observer(s, observe, d);
	return d;
}

void digests_free(struct digests *d)
{
	if (!d)
		return;
	store_set_observer(d->store, NULL, NULL);
	while (d->trackers) {
		struct tracker *t = d->trackers;
		d->trackers = t->next;
		tracker_free(t);
	}
	for (size_t i = 0; i < OLD_MAX; i++)
		free(d->old[i].canon);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

static struct tracker *find(struct digests *d, const char *canon)
{
	for (struct tracker *t = d->trackers; t; t = t->next)
		if (strcmp(t->sub.canon, canon) == 0)
			return t;
	return NULL;
}

/* A tracker for canon at the newest version: one walk over the store
 * (read lock held by the caller, so nothing commits meanwhile). */
static struct tracker *tracker_build(struct digests *d, const char *canon)
{
	struct tracker *t = xcalloc(1, sizeof(*t));
	char err[128];
	if (sub_parse(canon, &t->sub, err, sizeof(err)) < 0) {
		free(t);
		return NULL;
	}
	lthash_init(&t->h);
	for (const struct store_entry *e = store_oldest(d->store); e; e = e->next)
		if (e->body && sub_match(&t->sub, e->name))
			lthash_add(&t->h, e->elem);
	return t;
}

/* Copies the newest digest of canon into h, building its tracker first
 * when it has none (the least recently used goes past TRACKERS_MAX). */
static int newest(struct digests *d, const char *canon, struct lthash *h)
{
	pthread_mutex_lock(&d->lock);
	struct tracker *t = find(d, canon);
	if (t) {
		t->used_ms = now_ms();
		*h = t->h;
		pthread_mutex_unlock(&d->lock);
		return 0;
	}
	int64_t now = now_ms();
	d->walk_tokens += (double)(now - d->walk_refill_ms) * d->walk_rate / 1000.0;
	if (d->walk_tokens > d->walk_burst)
		d->walk_tokens = d->walk_burst;
	d->walk_refill_ms = now;
	if (d->walk_tokens < 1.0) {
		/* a flood of new subscriptions: no digest now (the statement is
		 * left out; the node asks again) */
		d->walks_refused++;
		pthread_mutex_unlock(&d->lock);
		return -1;
	}
	d->walk_tokens -= 1.0;
	d->walks++;
	pthread_mutex_unlock(&d->lock);

	/* the walk outside our lock; the store's read lock keeps it still */
	struct tracker *nt = tracker_build(d, canon);
	if (!nt)
		return -1;
	*h = nt->h;
	pthread_mutex_lock(&d->lock);
	if (find(d, canon)) {
		tracker_free(nt);   /* another thread built it meanwhile */
	} else {
		nt->used_ms = now_ms();
		nt->next = d->trackers;
		d->trackers = nt;
		if (++d->ntrackers > TRACKERS_MAX) {
			struct tracker **pp = &d->trackers, **lru = NULL;
			for (; *pp; pp = &(*pp)->next)
				if (*pp != nt && (!lru || (*pp)->used_ms < (*lru)->used_ms))
					lru = pp;
			if (lru) {
				struct tracker *gone = *lru;
				*lru = gone->next;
				tracker_free(gone);
				d->ntrackers--;
			}
		}
	}
	pthread_mutex_unlock(&d->lock);
	return 0;
}

int digests_at(struct digests *d, uint64_t x, const struct sub *sub, unsigned char out[LTHASH_DIGEST_BYTES])
{
	const char *canon = sub && sub->canon ? sub->canon : "";
	uint64_t v = store_version(d->store);
	if (x > v)
		return -1;
	if (x < v) {
		pthread_mutex_lock(&d->lock);
		for (size_t i = 0; i < OLD_MAX; i++) {
			if (d->old[i].canon && d->old[i].version == x && strcmp(d->old[i].canon, canon) == 0) {
				memcpy(out, d->old[i].d, LTHASH_DIGEST_BYTES);
				pthread_mutex_unlock(&d->lock);
				return 0;
			}
		}
		pthread_mutex_unlock(&d->lock);
		/* the states at x are known only down to the history floor */
		if (x < store_history_floor(d->store))
			return -1;
	}
	struct lthash h;
	if (newest(d, canon, &h) < 0)
		return -1;
	if (x == v) {
		lthash_digest(&h, out);
		return 0;
	}
	/* walk back over what changed after x: what it is now out, what it
	 * was at x in */
	for (const struct store_entry *e = store_newest(d->store); e && e->version > x; e = e->prev) {
		if (!sub_match(sub, e->name))
			continue;
		const unsigned char *then = store_elem_at(e, x);
		if (e->body)
			lthash_sub(&h, e->elem);
		if (then)
			lthash_add(&h, then);
	}
	lthash_digest(&h, out);
	pthread_mutex_lock(&d->lock);
	struct old_digest *o = &d->old[d->next_old];
	d->next_old = (d->next_old + 1) % OLD_MAX;
	free(o->canon);
	o->canon = xstrdup(canon);
	o->version = x;
	memcpy(o->d, out, LTHASH_DIGEST_BYTES);
	d->derived++;
	pthread_mutex_unlock(&d->lock);
	return 0;
}

void digests_set_walk_limit(struct digests *d, double burst, double per_second)
{
	pthread_mutex_lock(&d->lock);
	d->walk_tokens = d->walk_burst = burst;
	d->walk_rate = per_second;
	pthread_mutex_unlock(&d->lock);
}

void digests_stats(struct digests *d, struct digests_stats *st)
{
	pthread_mutex_lock(&d->lock);
	st->trackers = d->ntrackers;
	st->walks = d->walks;
	st->derived = d->derived;
	st->walks_refused = d->walks_refused;
	pthread_mutex_unlock(&d->lock);
}
