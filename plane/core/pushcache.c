/* core/pushcache.c: shared encoded pushes, least recently used eviction (see
 * pushcache.h). */
#include "core/pushcache.h"
#include "core/digests.h"
#include "gz.h"
#include "log.h"
#include "xmalloc.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct pc_entry {
	uint64_t have, version;
	char *sub;
	struct push_blob *blob;
	struct pc_entry *prev, *next;   /* most recent first */
};

struct pushcache {
	struct store *store;
	target_fn target;
	void *target_ctx;
	struct digests *digests;
	pthread_mutex_t lock;
	struct pc_entry *head, *tail;
	size_t entries, bytes, max_entries, max_bytes;
	uint64_t hits, misses;
};

struct pushcache *pushcache_new(struct store *s, size_t max_entries, size_t max_bytes)
{
	struct pushcache *pc = xcalloc(1, sizeof(*pc));
	pc->store = s;
	pc->max_entries = max_entries;
	pc->max_bytes = max_bytes;
	pthread_mutex_init(&pc->lock, NULL);
	return pc;
}

void pushcache_set_target(struct pushcache *pc, target_fn fn, void *ctx)
{
	pc->target = fn;
	pc->target_ctx = ctx;
}

void pushcache_set_digests(struct pushcache *pc, struct digests *d)
{
	pc->digests = d;
}

void push_blob_unref(struct push_blob *b)
{
	if (b && atomic_fetch_sub(&b->refs, 1) == 1) {
		free(b->raw);
		free(b->gz);
		free(b);
	}
}

static void unlink_entry(struct pushcache *pc, struct pc_entry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		pc->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		pc->tail = e->prev;
	e->prev = e->next = NULL;
}

static void push_front(struct pushcache *pc, struct pc_entry *e)
{
	e->prev = NULL;
	e->next = pc->head;
	if (pc->head)
		pc->head->prev = e;
	else
		pc->tail = e;
	pc->head = e;
}

static void drop_entry(struct pushcache *pc, struct pc_entry *e)
{
	unlink_entry(pc, e);
	pc->entries--;
	pc->bytes -= e->blob->raw_len + e->blob->gz_len;
	push_blob_unref(e->blob);
	free(e->sub);
	free(e);
}

void pushcache_free(struct pushcache *pc)
{
	if (!pc)
		return;
	while (pc->head)
		drop_entry(pc, pc->head);
	pthread_mutex_destroy(&pc->lock);
	free(pc);
}

static struct pc_entry *find(struct pushcache *pc, uint64_t have, uint64_t version, const char *sub)
{
	for (struct pc_entry *e = pc->head; e; e = e->next)
		if (e->have == have && e->version == version && strcmp(e->sub, sub) == 0)
			return e;
	return NULL;
}

struct push_blob *pushcache_get(struct pushcache *pc, uint64_t have, const struct sub *sub)
{
	return pushcache_get_for(pc, have, NULL, sub);
}

struct push_blob *pushcache_get_for(struct pushcache *pc, uint64_t have, const char *node, const struct sub *sub)
{
	const char *subkey = sub && sub->canon ? sub->canon : "";
	struct push_blob *blob;

	store_rdlock(pc->store);
	uint64_t version = store_version(pc->store);
	if (node && pc->target) {
		uint64_t t = pc->target(pc->target_ctx, node);
		if (t < version)
			version = t;
	}
	bool full = have == 0 || have < store_horizon(pc->store) || have > version;
	uint64_t key = full ? 0 : have;

	pthread_mutex_lock(&pc->lock);
	struct pc_entry *e = find(pc, key, version, subkey);
	if (e) {
		unlink_entry(pc, e);
		push_front(pc, e);
		atomic_fetch_add(&e->blob->refs, 1);
		pc->hits++;
		blob = e->blob;
		pthread_mutex_unlock(&pc->lock);
		store_rdunlock(pc->store);
		return blob;
	}
	pc->misses++;
	pthread_mutex_unlock(&pc->lock);

	/* encode outside the cache lock; the store's read lock keeps the
	 * entries alive and the version still */
	struct delta d;
	struct buf b = BUF_INIT;
	delta_collect_at(pc->store, have, version, sub, &d);
	delta_encode_tail(&d, &b);
	blob = xcalloc(1, sizeof(*blob));
	atomic_init(&blob->refs, 2);   /* the cache's and the caller's */
	blob->version = d.version;
	blob->base = d.base;
	blob->full = d.full;
	blob->nup = d.nup;
	blob->nrm = d.nrm;
	blob->raw = buf_detach(&b, &blob->raw_len);
	delta_release(&d);
	if (pc->digests)
		blob->has_digest = digests_at(pc->digests, version, sub, blob->digest) == 0;
	store_rdunlock(pc->store);

	pthread_mutex_lock(&pc->lock);
	e = find(pc, key, version, subkey);
	if (e) {
		/* another thread got there first: use theirs */
		atomic_fetch_add(&e->blob->refs, 1);
		pthread_mutex_unlock(&pc->lock);
		atomic_store(&blob->refs, 1);
		push_blob_unref(blob);
		return e->blob;
	}
	e = xcalloc(1, sizeof(*e));
	e->have = key;
	e->version = version;
	e->sub = xstrdup(subkey);
	e->blob = blob;
	push_front(pc, e);
	pc->entries++;
	pc->bytes += blob->raw_len;
	while (pc->tail && pc->tail != e && (pc->entries > pc->max_entries || pc->bytes > pc->max_bytes))
		drop_entry(pc, pc->tail);
	pthread_mutex_unlock(&pc->lock);
	return blob;
}

void pushcache_gzip(struct pushcache *pc, struct push_blob *blob)
{
	if (atomic_load(&blob->gz_ready))
		return;
	pthread_mutex_lock(&pc->lock);
	if (!atomic_load(&blob->gz_ready)) {
		struct buf raw = BUF_INIT, gz = BUF_INIT;
		buf_append(&raw, blob->raw, blob->raw_len);
		buf_puts(&raw, "\n\n");
		if (gz_stream_fragment(raw.data, raw.len, &gz) < 0) {
			/* zlib refused: send the bytes stored, still valid gzip */
			buf_reset(&gz);
			gz_stream_stored(raw.data, raw.len, &gz);
		}
		blob->gz_crc = gz_crc32(0, raw.data, raw.len);
		blob->gz = buf_detach(&gz, &blob->gz_len);
		buf_release(&raw);
		/* count it if the blob is still cached */
		for (struct pc_entry *e = pc->head; e; e = e->next)
			if (e->blob == blob)
				pc->bytes += blob->gz_len;
		atomic_store(&blob->gz_ready, true);
	}
	pthread_mutex_unlock(&pc->lock);
}

void pushcache_stats(struct pushcache *pc, struct pushcache_stats *st)
{
	pthread_mutex_lock(&pc->lock);
	st->hits = pc->hits;
	st->misses = pc->misses;
	st->entries = pc->entries;
	st->bytes = pc->bytes;
	pthread_mutex_unlock(&pc->lock);
}
