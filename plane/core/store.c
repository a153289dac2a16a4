/* core/store.c: the in-memory index of resources and tombstones, kept in change
 * order, and the commit path that persists first and swaps second (see
 * store.h). */
#include "core/store.h"
#include "buf.h"
#include "core/wrapindex.h"
#include "envelope.h"
#include "json.h"
#include "log.h"
#include "pathindex.h"
#include "persist/persist.h"
#include "strmap.h"
#include "util.h"
#include "xmalloc.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct store {
	struct persist *p;           /* borrowed: the backend */
	struct store_opts opts;
	pthread_rwlock_t rw;         /* the index */
	pthread_mutex_t writer;      /* one writer at a time, validation included */
	bool held;                   /* store_hold: rw is write-locked across applies */
	uint64_t version;
	uint64_t horizon;            /* tombstones at or below it were dropped */
	size_t live;                 /* live resources */
	size_t tombs;                /* tombstones */
	struct store_entry **buckets;
	size_t nbuckets;
	size_t nentries;
	struct store_entry *head, *tail;     /* change order */
	struct store_entry *thead, *ttail;   /* tombstone order */
	struct pathindex paths;              /* live files' output paths */
	bool keep;                           /* a rollout may need older states */
	uint64_t pin;                        /* ... of versions >= pin */
	uint64_t keep_since;                 /* the version keeping began at (nothing older was kept) */
	bool hold;                           /* approvals may need older states (store_set_hold) */
	uint64_t hold_floor;                 /* ... of versions >= hold_floor (in memory only) */
	store_observer observer;             /* told of every commit's elements */
	void *observer_ctx;
};

/* ---- hash index ------------------------------------------------------ */

static struct store_entry *find(const struct store *s, const char *name)
{
	if (!s->nbuckets)
		return NULL;
	struct store_entry *e = s->buckets[strmap_hash(name) & (s->nbuckets - 1)];
	for (; e; e = e->hnext)
		if (strcmp(e->name, name) == 0)
			return e;
	return NULL;
}

static void rehash(struct store *s, size_t nb)
{
	struct store_entry **b = xcalloc(nb, sizeof(*b));
	for (size_t i = 0; i < s->nbuckets; i++) {
		struct store_entry *e = s->buckets[i], *next;
		for (; e; e = next) {
			next = e->hnext;
			size_t k = strmap_hash(e->name) & (nb - 1);
			e->hnext = b[k];
			b[k] = e;
		}
	}
	free(s->buckets);
	s->buckets = b;
	s->nbuckets = nb;
}

static void hash_insert(struct store *s, struct store_entry *e)
{
	if (s->nentries + 1 > s->nbuckets)
		rehash(s, s->nbuckets ? s->nbuckets * 2 : 1024);
	size_t k = strmap_hash(e->name) & (s->nbuckets - 1);
	e->hnext = s->buckets[k];
	s->buckets[k] = e;
	s->nentries++;
}

static void hash_remove(struct store *s, struct store_entry *e)
{
	struct store_entry **pp = &s->buckets[strmap_hash(e->name) & (s->nbuckets - 1)];
	for (; *pp; pp = &(*pp)->hnext) {
		if (*pp == e) {
			*pp = e->hnext;
			s->nentries--;
			return;
		}
	}
}

/* ---- lists ----------------------------------------------------------- */

static void list_unlink(struct store *s, struct store_entry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else if (s->head == e)
		s->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else if (s->tail == e)
		s->tail = e->prev;
	e->prev = e->next = NULL;
}

static void list_append(struct store *s, struct store_entry *e)
{
	e->next = NULL;
	e->prev = s->tail;
	if (s->tail)
		s->tail->next = e;
	else
		s->head = e;
	s->tail = e;
}

static void tomb_unlink(struct store *s, struct store_entry *e)
{
	if (e->tprev)
		e->tprev->tnext = e->tnext;
	else if (s->thead == e)
		s->thead = e->tnext;
	if (e->tnext)
		e->tnext->tprev = e->tprev;
	else if (s->ttail == e)
		s->ttail = e->tprev;
	e->tprev = e->tnext = NULL;
}

static void tomb_append(struct store *s, struct store_entry *e)
{
	e->tnext = NULL;
	e->tprev = s->ttail;
	if (s->ttail)
		s->ttail->tnext = e;
	else
		s->thead = e;
	s->ttail = e;
}

/* ---- references ------------------------------------------------------ */

static void refs_free(struct store_entry *e)
{
	for (int i = 0; i < e->nrefs; i++)
		free(e->refs[i]);
	free(e->refs);
	e->refs = NULL;
	e->nrefs = 0;
}

static void refs_adjust(struct store *s, struct store_entry *e, int delta)
{
	for (int i = 0; i < e->nrefs; i++) {
		struct store_entry *t = find(s, e->refs[i]);
		if (t)
			t->referrers = (uint32_t)((int64_t)t->referrers + delta);
	}
}

static void refs_set(struct store_entry *e, const struct res_refs *r)
{
	refs_free(e);
	if (!r || r->n == 0)
		return;
	e->refs = xmalloc((size_t)r->n * sizeof(char *));
	for (int i = 0; i < r->n; i++)
		e->refs[i] = xstrdup(r->name[i]);
	e->nrefs = r->n;
}

static void path_set(struct store *s, struct store_entry *e)
{
	if (e->file_path) {
		pathindex_remove(&s->paths, e->file_path);
		free(e->file_path);
		e->file_path = NULL;
	}
	if (e->body) {
		e->file_path = resource_file_path(e->name, e->body, e->body_len);
		if (e->file_path)
			pathindex_add(&s->paths, e->file_path, e->name);
	}
}

static void hist_free(struct store_hist *h)
{
	while (h) {
		struct store_hist *next = h->next;
		free(h->body);
		free(h->stored);
		free(h);
		h = next;
	}
}

/* Whether history is kept (a rollout's pin or approvals' hold), and the
 * oldest version it must serve. */
static bool keeps(const struct store *s)
{
	return s->keep || s->hold;
}

static uint64_t keep_floor(const struct store *s)
{
	if (s->keep && s->hold)
		return s->pin < s->hold_floor ? s->pin : s->hold_floor;
	return s->keep ? s->pin : s->hold_floor;
}

/* Keeps e's current state in its history (the body moves there) before a
 * change replaces it, when some pinned version may still need it. */
static void keep_state(struct store *s, struct store_entry *e)
{
	if (!keeps(s) || e->version == 0)
		return;
	struct store_hist *h = xcalloc(1, sizeof(*h));
	h->version = e->version;
	h->body = e->body;
	h->body_len = e->body_len;
	h->stored = e->stored;
	h->stored_len = e->stored_len;
	memcpy(h->elem, e->elem, sizeof(h->elem));
	h->next = e->hist;
	e->hist = h;
	e->body = NULL;
	e->body_len = 0;
	e->stored = NULL;
	e->stored_len = 0;
	wrapindex_free(e->wraps);   /* only the live state is asked */
	e->wraps = NULL;
}

/* What nodes get in place of a sealed secret whose stored body is damaged
 * (sealed but invalid: from etcd or a relay's feed, never a write's): a
 * body every node refuses (a NACK naming the secret; it keeps its last
 * good state), so nothing of the stored text -- its wraps, or whatever a
 * damaged store put beside them -- leaves the plane. */
#define PUSH_DAMAGED "{\"sealed\":null}"

/* A sealed secret's push body (malloc'd, *plen set) of a stored body, or
 * NULL: the body is what nodes get as it is. Every secret's body is
 * asked (a "sealed" spelled with escapes is still one). */
static char *push_form(const char *name, const char *body, size_t len, size_t *plen)
{
	if (strncmp(name, "secret/", 7) != 0)
		return NULL;
	char *out = NULL, err[300];
	int rc = envelope_push_body_checked(body, len, &out, plen, err, sizeof(err));
	if (rc >= 0)
		return out;
	log_error("store: %s: the stored sealed body is damaged (%s): nodes are sent %s in its place, which they "
		  "refuse; write it again (tetherctl put %s --seal)", name, err, PUSH_DAMAGED, name);
	*plen = strlen(PUSH_DAMAGED);
	return xstrdup(PUSH_DAMAGED);
}

const char *store_gone_ids(const struct store_entry *e)
{
	return e->body ? NULL : e->gone_ids;
}

/* A sealed secret's stored body's envelope ids: its superseded list and
 * its own id, comma-joined (NULL: none). */
static char *ids_of(const char *stored, size_t len)
{
	cJSON *doc = cJSON_ParseWithLength(stored, len);
	struct buf b = BUF_INIT;
	const cJSON *it;
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(doc, "superseded"))
		if (cJSON_IsString(it) && !strchr(it->valuestring, ','))
			buf_printf(&b, "%s%s", b.len ? "," : "", it->valuestring);
	const char *id = json_get_string(cJSON_GetObjectItemCaseSensitive(doc, "sealed"), "id");
	if (id && !strchr(id, ','))
		buf_printf(&b, "%s%s", b.len ? "," : "", id);
	cJSON_Delete(doc);
	return b.len ? buf_detach(&b, NULL) : NULL;
}

const char *store_envelope_id(const struct store_entry *e)
{
	return e->body ? wrapindex_id(e->wraps) : NULL;
}

const char *store_wrap(const struct store_entry *e, const char *kid)
{
	return e->body ? wrapindex_get(e->wraps, kid) : NULL;
}

const char *store_stored(const struct store_entry *e, size_t *len)
{
	*len = e->stored ? e->stored_len : e->body_len;
	return e->stored ? e->stored : e->body;
}

const char *store_stored_at(const struct store_entry *e, uint64_t x, size_t *len, uint64_t *version)
{
	if (e->version <= x) {
		*version = e->version;
		return store_stored(e, len);
	}
	for (const struct store_hist *h = e->hist; h; h = h->next) {
		if (h->version <= x) {
			*len = h->stored ? h->stored_len : h->body_len;
			*version = h->version;
			return h->stored ? h->stored : h->body;
		}
	}
	*len = 0;
	*version = 0;
	return NULL;
}

const unsigned char *store_elem_at(const struct store_entry *e, uint64_t x)
{
	if (e->version <= x)
		return e->body ? e->elem : NULL;
	for (const struct store_hist *h = e->hist; h; h = h->next)
		if (h->version <= x)
			return h->body ? h->elem : NULL;
	return NULL;
}

const char *store_body_at(const struct store_entry *e, uint64_t x, size_t *len, uint64_t *version)
{
	if (e->version <= x) {
		*len = e->body_len;
		*version = e->version;
		return e->body;
	}
	for (const struct store_hist *h = e->hist; h; h = h->next) {
		if (h->version <= x) {
			*len = h->body_len;
			*version = h->version;
			return h->body;
		}
	}
	*len = 0;
	*version = 0;
	return NULL;
}

static void entry_free(struct store_entry *e)
{
	hist_free(e->hist);
	free(e->file_path);
	refs_free(e);
	free(e->name);
	free(e->body);
	free(e->stored);
	wrapindex_free(e->wraps);
	free(e->gone_ids);
	free(e);
}

/* ---- in-memory apply --------------------------------------------------- */

/* Makes e live with body (taken: its stored form) at version; elem is its
 * digest element, of its push form (NULL: computed here). The new references are not counted here: the
 * caller counts them (refs_adjust +1) once every entry of the write exists,
 * since a referrer may come before what it references. */
static void apply_upsert(struct store *s, const char *name, char *body, size_t len,
			 const struct res_refs *refs, uint64_t version, const unsigned char *elem)
{
	struct store_entry *e = find(s, name);
	if (!e) {
		e = xcalloc(1, sizeof(*e));
		e->name = xstrdup(name);
		e->rank = resource_rank(name);
		hash_insert(s, e);
		s->live++;
	} else {
		bool was_live = e->body != NULL;
		list_unlink(s, e);
		if (was_live)
			refs_adjust(s, e, -1);
		keep_state(s, e);   /* may move the body into the history */
		if (was_live) {
			free(e->body);
			free(e->stored);
			e->stored = NULL;
			wrapindex_free(e->wraps);
			e->wraps = NULL;
		} else {
			tomb_unlink(s, e);
			s->tombs--;
			s->live++;
			free(e->gone_ids);   /* the writer's check had them */
			e->gone_ids = NULL;
		}
	}
	size_t plen;
	char *push = push_form(name, body, len, &plen);
	if (push) {
		/* nodes get the push form; the stored one stays beside it,
		 * its wraps indexed by key id */
		e->stored = body;
		e->stored_len = len;
		e->wraps = strcmp(push, PUSH_DAMAGED) == 0 ? NULL : wrapindex_make(body, len);
		body = push;
		len = plen;
	}
	e->body = body;
	e->body_len = len;
	if (elem)
		memcpy(e->elem, elem, sizeof(e->elem));
	else
		lthash_seed(name, body, len, e->elem);
	e->version = version;
	e->deleted_at = 0;
	path_set(s, e);
	refs_set(e, refs);
	list_append(s, e);
}

static void apply_remove(struct store *s, const char *name, uint64_t version, int64_t now)
{
	struct store_entry *e = find(s, name);
	if (!e || !e->body)
		return;
	list_unlink(s, e);
	refs_adjust(s, e, -1);
	refs_free(e);
	/* a sealed secret's envelope ids outlive it: written again, an old
	 * envelope is still a replay */
	free(e->gone_ids);
	e->gone_ids = e->stored ? ids_of(e->stored, e->stored_len) : NULL;
	keep_state(s, e);
	free(e->body);
	free(e->stored);
	wrapindex_free(e->wraps);
	e->wraps = NULL;
	e->body = NULL;
	e->body_len = 0;
	e->stored = NULL;
	e->stored_len = 0;
	path_set(s, e);
	e->version = version;
	e->deleted_at = now;
	list_append(s, e);
	tomb_append(s, e);
	s->live--;
	s->tombs++;
}

static void drop_tombstone(struct store *s, struct store_entry *e)
{
	if (e->version > s->horizon)
		s->horizon = e->version;
	tomb_unlink(s, e);
	list_unlink(s, e);
	hash_remove(s, e);
	s->tombs--;
	entry_free(e);
}

/* ---- loading ----------------------------------------------------------- */

/* The backend's history rows (persist_history_cb). */
static int load_history_row(void *ctx, const char *name, uint64_t version, const char *body, size_t len)
{
	return store_attach_history(ctx, name, version, body, len);
}

static int load_row(void *ctx, const char *name, const char *body, size_t len,
		    uint64_t version, int64_t deleted_at)
{
	struct store *s = ctx;
	if (find(s, name))
		return -1;   /* a name both live and tombstoned: a corrupt database */
	if (body) {
		char err[256];
		struct res_refs refs;
		cJSON *v = json_decode(body, len, NULL, err, sizeof(err));
		if (!v) {
			log_error("store: stored body of '%s' does not parse: %s", name, err);
			return -1;
		}
		if (resource_validate(name, v, RES_V_STORED, &refs, err, sizeof(err)) < 0) {
			/* keep serving it: it was valid when written, and a newer
			 * plane may have written it */
			log_warn("store: stored '%s' no longer validates: %s", name, err);
		}
		cJSON_Delete(v);
		apply_upsert(s, name, xstrndup(body, len), len, &refs, version, NULL);
	} else {
		struct store_entry *e = xcalloc(1, sizeof(*e));
		e->name = xstrdup(name);
		e->rank = resource_rank(name);
		e->version = version;
		e->deleted_at = deleted_at;
		hash_insert(s, e);
		list_append(s, e);
		tomb_append(s, e);
		s->tombs++;
	}
	return 0;
}

struct store *store_open(struct persist *p, const struct store_opts *opts, char *err, size_t errlen)
{
	struct store *s = xcalloc(1, sizeof(*s));
	s->p = p;
	s->opts = *opts;
	pthread_rwlock_init(&s->rw, NULL);
	pthread_mutex_init(&s->writer, NULL);
	pathindex_init(&s->paths);
	if (p->ops->load(p, load_row, s, &s->version, &s->horizon, err, errlen) < 0 ||
	    p->ops->load_history(p, load_history_row, s, &s->keep, &s->pin, err, errlen) < 0) {
		store_free(s);
		return NULL;
	}
	s->keep_since = s->pin;   /* what was kept before the restart is on disk */
	/* rows come in version order: a referrer may load before a newer
	 * version of what it references, so count references at the end */
	for (struct store_entry *e = s->head; e; e = e->next)
		if (e->body)
			refs_adjust(s, e, +1);
	log_info("store: version %llu, %zu resources, %zu tombstones, horizon %llu",
		 (unsigned long long)s->version, s->live, s->tombs, (unsigned long long)s->horizon);
	return s;
}

void store_free(struct store *s)
{
	if (!s)
		return;
	struct store_entry *e = s->head, *next;
	for (; e; e = next) {
		next = e->next;
		entry_free(e);
	}
	free(s->buckets);
	pathindex_release(&s->paths);
	pthread_rwlock_destroy(&s->rw);
	pthread_mutex_destroy(&s->writer);
	free(s);
}

void store_rdlock(struct store *s) { pthread_rwlock_rdlock(&s->rw); }
void store_rdunlock(struct store *s) { pthread_rwlock_unlock(&s->rw); }
void store_write_lock(struct store *s) { pthread_mutex_lock(&s->writer); }
void store_write_unlock(struct store *s) { pthread_mutex_unlock(&s->writer); }

void store_hold(struct store *s, bool on)
{
	if (on == s->held)
		return;
	if (on)
		pthread_rwlock_wrlock(&s->rw);
	s->held = on;
	if (!on)
		pthread_rwlock_unlock(&s->rw);
}

uint64_t store_version(struct store *s) { return s->version; }
uint64_t store_horizon(struct store *s) { return s->horizon; }
size_t store_count(struct store *s) { return s->live; }
size_t store_tombstone_count(struct store *s) { return s->tombs; }
const struct store_entry *store_get(struct store *s, const char *name) { return find(s, name); }
const struct store_entry *store_newest(struct store *s) { return s->tail; }
const struct store_entry *store_oldest(struct store *s) { return s->head; }
const struct store_opts *store_options(struct store *s) { return &s->opts; }
void store_set_observer(struct store *s, store_observer fn, void *ctx)
{
	pthread_rwlock_wrlock(&s->rw);
	s->observer = fn;
	s->observer_ctx = ctx;
	pthread_rwlock_unlock(&s->rw);
}
bool store_pinned(struct store *s, uint64_t *floor)
{
	*floor = s->pin;
	return s->keep;
}
uint64_t store_history_floor(struct store *s)
{
	if (!keeps(s))
		return s->version;
	uint64_t floor = keep_floor(s);
	return floor > s->keep_since ? floor : s->keep_since;
}
const char *store_file_at(struct store *s, const char *path) { return pathindex_file_at(&s->paths, path); }
uint32_t store_files_under(struct store *s, const char *dir) { return pathindex_files_under(&s->paths, dir); }

/* ---- commit ------------------------------------------------------------ */

int store_commit(struct store *s, struct store_change *changes, size_t n,
		 uint64_t *version, bool *changed, char *err, size_t errlen)
{
	return store_commit_hooked(s, changes, n, NULL, NULL, version, changed, err, errlen);
}

int store_commit_hooked(struct store *s, struct store_change *changes, size_t n, persist_hook hook, void *ctx,
			uint64_t *version, bool *changed, char *err, size_t errlen)
{
	return store_commit_meta(s, changes, n, hook, ctx, NULL, version, changed, err, errlen);
}

int store_commit_meta(struct store *s, struct store_change *changes, size_t n, persist_hook hook, void *ctx,
		      const struct store_meta *meta, uint64_t *version, bool *changed, char *err, size_t errlen)
{
	struct store_change *eff = xmalloc((n ? n : 1) * sizeof(*eff));
	bool *taken = xcalloc(n ? n : 1, sizeof(*taken));
	struct strmap revive;    /* tombstones this commit brings back */
	size_t neff = 0, new_tombs = 0, revived = 0;
	strmap_init(&revive);
	int64_t now = wall_seconds();

	for (size_t i = 0; i < n; i++) {
		const struct store_entry *e = find(s, changes[i].name);
		if (changes[i].body) {
			size_t slen;
			const char *cur = e && e->body ? store_stored(e, &slen) : NULL;
			if (cur && slen == changes[i].body_len && memcmp(cur, changes[i].body, slen) == 0)
				continue;   /* identical desired state: no new version */
			if (e && !e->body) {
				revived++;
				*strmap_ref(&revive, e->name) = 1;
			}
		} else {
			if (!e || !e->body)
				continue;
			new_tombs++;
		}
		eff[neff++] = changes[i];
		taken[i] = true;
	}
	*changed = neff > 0;
	if (!neff) {
		*version = s->version;
		strmap_release(&revive);
		free(taken);
		free(eff);
		return 0;
	}

	/* tombstones past the count limit go in the same transaction */
	size_t tombs_after = s->tombs + new_tombs - revived;
	size_t npruned = 0;
	const char **pruned = NULL;
	uint64_t horizon = s->horizon;
	if (tombs_after > s->opts.tombstone_keep) {
		size_t excess = tombs_after - s->opts.tombstone_keep;
		pruned = xmalloc(excess * sizeof(*pruned));
		for (struct store_entry *t = s->thead; t && npruned < excess; t = t->tnext) {
			if (strmap_get(&revive, t->name, NULL) || t->hist)
				continue;   /* revived by this very commit, or a rollout needs it */
			pruned[npruned++] = t->name;
			if (t->version > horizon)
				horizon = t->version;
		}
	}

	/* states a pinned version may still need go to the history table in
	 * the same transaction */
	struct persist_state *kept = xmalloc((neff ? neff : 1) * sizeof(*kept));
	size_t nkept = 0;
	for (size_t i = 0; s->keep && i < neff; i++) {
		const struct store_entry *e = find(s, eff[i].name);
		size_t slen = 0;
		const char *st = e && e->body ? store_stored(e, &slen) : NULL;
		if (e && e->version)
			kept[nkept++] = (struct persist_state){ e->name, st, slen, e->version, e->deleted_at };
	}
	struct persist_change *pch = xmalloc(neff * sizeof(*pch));
	for (size_t i = 0; i < neff; i++)
		pch[i] = (struct persist_change){ eff[i].name, eff[i].body, eff[i].body_len };
	/* the digest elements: the new ones hashed outside the index lock,
	 * the old ones copied before the swap overwrites them */
	struct store_delta *deltas = xcalloc(neff, sizeof(*deltas));
	unsigned char (*olds)[LTHASH_SEED_BYTES] = xmalloc(neff * LTHASH_SEED_BYTES);
	const char **before = xcalloc(neff, sizeof(*before));   /* the version log's "before" */
	size_t *before_len = xcalloc(neff, sizeof(*before_len));
	for (size_t i = 0; i < neff; i++) {
		const struct store_entry *e = find(s, eff[i].name);
		deltas[i].name = eff[i].name;
		if (e && e->body) {
			before[i] = store_stored(e, &before_len[i]);
			memcpy(olds[i], e->elem, LTHASH_SEED_BYTES);
			deltas[i].old_elem = olds[i];
		}
		if (eff[i].body) {
			/* the digest covers what nodes get: a sealed secret's push form */
			size_t plen;
			char *push = push_form(eff[i].name, eff[i].body, eff[i].body_len, &plen);
			lthash_seed(eff[i].name, push ? push : eff[i].body, push ? plen : eff[i].body_len, eff[i].elem);
			free(push);
			deltas[i].new_elem = eff[i].elem;
		}
	}
	struct persist_commit txn = {
		.version = s->version + 1, .horizon = horizon, .now = now,
		.changes = pch, .nchanges = neff, .pruned = pruned, .npruned = npruned,
		.kept = kept, .nkept = nkept, .hook = hook, .hook_ctx = ctx,
		.author = meta && meta->author ? meta->author : "plane",
		.message = meta && meta->message ? meta->message : "",
		.before = before, .before_len = before_len,
		.reverts_from = meta ? meta->reverts_from : 0, .reverts_to = meta ? meta->reverts_to : 0,
		.override = meta ? meta->override : NULL, .emergency = meta && meta->emergency,
		.log_keep = s->opts.history_keep, .log_max_age = s->opts.history_max_age,
	};
	strmap_release(&revive);
	int rc = s->p->ops->commit(s->p, &txn, err, errlen);
	free(pch);
	free(kept);
	free(before);
	free(before_len);
	if (rc < 0) {
		free(deltas);
		free(olds);
		free(pruned);
		free(taken);
		free(eff);
		return rc;   /* -1, PERSIST_UNAVAILABLE or PERSIST_CONFLICT */
	}

	pthread_rwlock_wrlock(&s->rw);
	for (size_t i = 0; i < npruned; i++)
		drop_tombstone(s, find(s, pruned[i]));
	for (size_t i = 0; i < neff; i++) {
		if (eff[i].body)
			apply_upsert(s, eff[i].name, eff[i].body, eff[i].body_len, &eff[i].refs, txn.version,
				     eff[i].elem);
		else
			apply_remove(s, eff[i].name, txn.version, now);
	}
	/* every entry of the write exists now: count the new references */
	for (size_t i = 0; i < neff; i++)
		if (eff[i].body)
			refs_adjust(s, find(s, eff[i].name), +1);
	s->version = txn.version;
	s->horizon = horizon;
	if (s->observer)
		s->observer(s->observer_ctx, deltas, neff, txn.version);
	pthread_rwlock_unlock(&s->rw);
	free(deltas);
	free(olds);

	/* the store owns the committed bodies now */
	for (size_t i = 0; i < n; i++)
		if (taken[i])
			changes[i].body = NULL;
	*version = txn.version;
	free(pruned);
	free(taken);
	free(eff);
	return 0;
}

int store_apply_remote(struct store *s, struct persist_remote *ch, size_t n, char **pruned, size_t npruned,
		       uint64_t version, uint64_t horizon, uint64_t *applied)
{
	*applied = s->version;
	/* our own commits come back through the watch too: already here */
	size_t first = 0;
	while (first < n && ch[first].version <= s->version)
		first++;
	bool newer = version > s->version;
	if (first == n && !npruned && !newer && horizon <= s->horizon)
		return 0;
	size_t m = n - first;
	struct store_delta *deltas = xcalloc(m ? m : 1, sizeof(*deltas));
	unsigned char (*olds)[LTHASH_SEED_BYTES] = xmalloc((m ? m : 1) * LTHASH_SEED_BYTES);
	unsigned char (*news)[LTHASH_SEED_BYTES] = xmalloc((m ? m : 1) * LTHASH_SEED_BYTES);
	struct res_refs *refs = xcalloc(m ? m : 1, sizeof(*refs));
	for (size_t i = 0; i < m; i++) {
		struct persist_remote *c = &ch[first + i];
		const struct store_entry *e = find(s, c->name);
		deltas[i].name = c->name;
		if (e && e->body) {
			memcpy(olds[i], e->elem, LTHASH_SEED_BYTES);
			deltas[i].old_elem = olds[i];
		}
		if (c->body) {
			char verr[256];
			cJSON *v = json_decode(c->body, c->body_len, NULL, verr, sizeof(verr));
			/* another replica validated it: a body that does not
			 * parse here is a newer plane's or a damaged key; its
			 * references are unknown, and it is served as it is */
			if (!v || resource_validate(c->name, v, RES_V_STORED, &refs[i], verr, sizeof(verr)) < 0)
				log_warn("store: '%s' from another replica does not validate here: %s", c->name, verr);
			cJSON_Delete(v);
			size_t plen;
			char *push = push_form(c->name, c->body, c->body_len, &plen);
			lthash_seed(c->name, push ? push : c->body, push ? plen : c->body_len, news[i]);
			free(push);
			deltas[i].new_elem = news[i];
		}
	}
	if (!s->held)
		pthread_rwlock_wrlock(&s->rw);
	for (size_t i = 0; i < npruned; i++) {
		struct store_entry *e = find(s, pruned[i]);
		if (e && !e->body)
			drop_tombstone(s, e);
	}
	for (size_t i = 0; i < m; i++) {
		struct persist_remote *c = &ch[first + i];
		if (c->body) {
			apply_upsert(s, c->name, c->body, c->body_len, &refs[i], c->version, news[i]);
			c->body = NULL;   /* the store's now */
		} else {
			apply_remove(s, c->name, c->version, c->deleted_at);
		}
	}
	for (size_t i = 0; i < m; i++)
		if (ch[first + i].name && deltas[i].new_elem)
			refs_adjust(s, find(s, ch[first + i].name), +1);
	if (newer)
		s->version = version;
	if (horizon > s->horizon)
		s->horizon = horizon;
	if (s->observer && m)
		s->observer(s->observer_ctx, deltas, m, s->version);
	if (!s->held)
		pthread_rwlock_unlock(&s->rw);
	*applied = s->version;
	free(deltas);
	free(olds);
	free(news);
	free(refs);
	return 0;
}

void store_wait_version(struct store *s, uint64_t v, int timeout_ms)
{
	int64_t deadline = now_ms() + timeout_ms;
	for (;;) {
		store_rdlock(s);
		uint64_t have = s->version;
		store_rdunlock(s);
		if (have >= v || now_ms() >= deadline)
			return;
		struct timespec ts = { 0, 5000000 };
		nanosleep(&ts, NULL);
	}
}

int store_prune_aged(struct store *s, int64_t now, char *err, size_t errlen)
{
	if (s->opts.tombstone_max_age <= 0)
		return 0;
	size_t npruned = 0, cap = 0;
	const char **pruned = NULL;
	uint64_t horizon = s->horizon;
	for (struct store_entry *t = s->thead; t; t = t->tnext) {
		if (now - t->deleted_at < s->opts.tombstone_max_age)
			break;
		if (t->hist)
			continue;   /* a rollout still needs what it was */
		if (npruned == cap) {
			cap = cap ? cap * 2 : 64;
			pruned = xrealloc(pruned, cap * sizeof(*pruned));
		}
		pruned[npruned++] = t->name;
		if (t->version > horizon)
			horizon = t->version;
	}
	if (!npruned)
		return 0;
	struct persist_commit txn = {
		.version = s->version, .horizon = horizon, .now = now,
		.pruned = pruned, .npruned = npruned,
	};
	if (s->p->ops->commit(s->p, &txn, err, errlen) < 0) {
		free(pruned);
		return -1;
	}
	pthread_rwlock_wrlock(&s->rw);
	for (size_t i = 0; i < npruned; i++)
		drop_tombstone(s, find(s, pruned[i]));
	pthread_rwlock_unlock(&s->rw);
	log_info("store: dropped %zu tombstones older than %llds; horizon now %llu", npruned,
		 (long long)s->opts.tombstone_max_age, (unsigned long long)horizon);
	free(pruned);
	return 0;
}

int store_trim_log(struct store *s, int64_t now, char *err, size_t errlen)
{
	if (!s->p->ops->log_trim || !s->opts.history_keep || s->opts.history_max_age <= 0)
		return 0;
	return s->p->ops->log_trim(s->p, now, s->opts.history_max_age, err, errlen);
}

/* Drops the history of e that no version >= floor needs: it keeps every
 * state newer than floor and the newest one at or below it. */
static void trim_hist(struct store_entry *e, bool keep, uint64_t floor)
{
	if (!keep || e->version <= floor) {
		hist_free(e->hist);
		e->hist = NULL;
		return;
	}
	struct store_hist **pp = &e->hist;
	while (*pp && (*pp)->version > floor)
		pp = &(*pp)->next;
	if (*pp) {
		hist_free((*pp)->next);
		(*pp)->next = NULL;
	}
}

int store_set_pin(struct store *s, bool keep, uint64_t floor, char *err, size_t errlen)
{
	if (s->p->ops->trim_history(s->p, keep, floor, err, errlen) < 0)
		return -1;
	store_set_pin_local(s, keep, floor);
	return 0;
}

void store_set_pin_local(struct store *s, bool keep, uint64_t floor)
{
	pthread_rwlock_wrlock(&s->rw);
	/* a floor below the version keeping starts at does not bring back
	 * what was not kept: the states are known from here on */
	if (keep && !keeps(s))
		s->keep_since = s->version;
	s->keep = keep;
	s->pin = floor;
	for (struct store_entry *e = s->head; e; e = e->next)
		if (e->hist)
			trim_hist(e, keeps(s), keep_floor(s));
	pthread_rwlock_unlock(&s->rw);
}

void store_set_hold(struct store *s, bool on, uint64_t floor)
{
	pthread_mutex_lock(&s->writer);
	pthread_rwlock_wrlock(&s->rw);
	if (on != s->hold || floor != s->hold_floor) {
		if (on && !keeps(s))
			s->keep_since = s->version;
		s->hold = on;
		s->hold_floor = floor;
		for (struct store_entry *e = s->head; e; e = e->next)
			if (e->hist)
				trim_hist(e, keeps(s), keep_floor(s));
	}
	pthread_rwlock_unlock(&s->rw);
	pthread_mutex_unlock(&s->writer);
}

/* Loading: a history row of an entry (rows come newest first per name). */
int store_attach_history(struct store *s, const char *name, uint64_t version, const char *body, size_t len)
{
	struct store_entry *e = find(s, name);
	if (!e)
		return -1;
	struct store_hist *h = xcalloc(1, sizeof(*h));
	h->version = version;
	h->body = body ? xstrndup(body, len) : NULL;
	h->body_len = body ? len : 0;
	size_t plen;
	char *push = body ? push_form(name, body, len, &plen) : NULL;
	if (push) {
		h->stored = h->body;
		h->stored_len = h->body_len;
		h->body = push;
		h->body_len = plen;
	}
	if (body)
		lthash_seed(name, h->body, h->body_len, h->elem);
	struct store_hist **pp = &e->hist;
	while (*pp)
		pp = &(*pp)->next;
	*pp = h;
	return 0;
}
