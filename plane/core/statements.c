/* core/statements.c: signed statements, once per (version, subscription),
 * re-signed to stay fresh (see statements.h). */
#include "core/statements.h"
#include "core/digests.h"
#include "core/overrides.h"
#include "core/store.h"
#include "keys.h"
#include "log.h"
#include "statement.h"
#include "util.h"
#include "xmalloc.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_MAX 1024

struct entry {
	uint64_t version;
	char *canon;
	unsigned char digest[LTHASH_DIGEST_BYTES];
	char *token;                 /* NULL until signed */
	int64_t issued;
	bool fetching;               /* a relay: one thread asks upstream */
	char kid[KEY_ID_LEN + 1];
	struct entry *prev, *next;   /* most recent first */
};

struct statements {
	struct store *store;
	struct digests *digests;
	struct overrides *overrides;   /* NULL: no override is ever stated */
	int64_t ttl, refresh;
	pthread_mutex_t lock;
	bool enabled;
	struct signing_key key;
	struct entry *head, *tail;
	size_t n;
	uint64_t signed_total;
	/* a relay: statements come from upstream, never signed here */
	statements_fetch_fn fetch;
	void *fetch_ctx;
	bool relay_seen;             /* the upstream signs: it sent one */
	int64_t retry_after;         /* a fetch failed: not again before (wall s) */
	uint64_t fetched;
};

struct statements *statements_new(struct store *s, struct digests *d, int64_t ttl_s, int64_t refresh_s)
{
	struct statements *st = xcalloc(1, sizeof(*st));
	st->store = s;
	st->digests = d;
	st->ttl = ttl_s;
	st->refresh = refresh_s < 1 ? 1 : refresh_s;
	pthread_mutex_init(&st->lock, NULL);
	return st;
}

static void entry_free(struct entry *e)
{
	free(e->canon);
	free(e->token);
	free(e);
}

void statements_free(struct statements *st)
{
	if (!st)
		return;
	while (st->head) {
		struct entry *e = st->head;
		st->head = e->next;
		entry_free(e);
	}
	keys_forget(&st->key);
	pthread_mutex_destroy(&st->lock);
	free(st);
}

int statements_load_key(struct statements *st, const char *path, char *err, size_t errlen)
{
	struct signing_key k;
	if (!path) {
		pthread_mutex_lock(&st->lock);
		st->enabled = false;
		keys_forget(&st->key);
		pthread_mutex_unlock(&st->lock);
		return 0;
	}
	if (keys_load_secret(path, &k, err, errlen) < 0)
		return -1;
	pthread_mutex_lock(&st->lock);
	bool changed = !st->enabled || strcmp(st->key.kid, k.kid) != 0;
	st->key = k;
	st->enabled = true;
	pthread_mutex_unlock(&st->lock);
	keys_forget(&k);
	if (changed)
		log_info("signing: statements are signed with key %s", st->key.kid);
	return 0;
}

void statements_set_overrides(struct statements *st, struct overrides *o)
{
	st->overrides = o;
}

bool statements_enabled(struct statements *st)
{
	pthread_mutex_lock(&st->lock);
	bool on = st->enabled;
	pthread_mutex_unlock(&st->lock);
	return on;
}

void statements_kid(struct statements *st, char *out, size_t cap)
{
	pthread_mutex_lock(&st->lock);
	snprintf(out, cap, "%s", st->enabled ? st->key.kid : "");
	pthread_mutex_unlock(&st->lock);
}

static void unlink_entry(struct statements *st, struct entry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		st->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		st->tail = e->prev;
	e->prev = e->next = NULL;
}

static void push_front(struct statements *st, struct entry *e)
{
	e->next = st->head;
	if (st->head)
		st->head->prev = e;
	else
		st->tail = e;
	st->head = e;
}

static struct entry *find_entry(struct statements *st, uint64_t version, const char *canon)
{
	struct entry *e = st->head;
	while (e && (e->version != version || strcmp(e->canon, canon) != 0))
		e = e->next;
	return e;
}

/* Under lock: the entry of (version, canon), made when absent. */
static struct entry *get_entry(struct statements *st, uint64_t version, const char *canon)
{
	struct entry *e = find_entry(st, version, canon);
	if (e) {
		unlink_entry(st, e);
		push_front(st, e);
		return e;
	}
	e = xcalloc(1, sizeof(*e));
	e->version = version;
	e->canon = xstrdup(canon);
	push_front(st, e);
	if (++st->n > CACHE_MAX) {
		struct entry *last = st->tail;
		if (last != e) {
			unlink_entry(st, last);
			entry_free(last);
			st->n--;
		}
	}
	return e;
}

void statements_set_source(struct statements *st, statements_fetch_fn fetch, void *ctx)
{
	pthread_mutex_lock(&st->lock);
	st->fetch = fetch;
	st->fetch_ctx = ctx;
	pthread_mutex_unlock(&st->lock);
}

bool statements_expected(struct statements *st)
{
	pthread_mutex_lock(&st->lock);
	bool on = st->enabled || (st->fetch && st->relay_seen);
	pthread_mutex_unlock(&st->lock);
	return on;
}

void statements_retry_now(struct statements *st)
{
	pthread_mutex_lock(&st->lock);
	st->retry_after = 0;
	pthread_mutex_unlock(&st->lock);
}

void statements_put(struct statements *st, uint64_t version, const char *sub_canon, const char *token)
{
	pthread_mutex_lock(&st->lock);
	struct entry *e = get_entry(st, version, sub_canon);
	free(e->token);
	e->token = xstrdup(token);
	e->issued = wall_seconds();
	st->relay_seen = true;
	pthread_mutex_unlock(&st->lock);
}

/* A relay's statement: cached while fresh, else asked of the upstream by
 * one thread at a time (the others take the cached one meanwhile). */
static char *relay_get(struct statements *st, uint64_t version, const char *canon)
{
	int64_t now = wall_seconds();
	char *out = NULL;
	pthread_mutex_lock(&st->lock);
	struct entry *e = get_entry(st, version, canon);
	bool fresh = e->token && now - e->issued < st->refresh && now >= e->issued;
	if (fresh || !st->relay_seen || e->fetching || now < st->retry_after) {
		out = e->token ? xstrdup(e->token) : NULL;
		pthread_mutex_unlock(&st->lock);
		return out;
	}
	e->fetching = true;
	statements_fetch_fn fetch = st->fetch;
	void *ctx = st->fetch_ctx;
	pthread_mutex_unlock(&st->lock);
	char err[256];
	char *tok = fetch(ctx, version, canon, err, sizeof(err));
	pthread_mutex_lock(&st->lock);
	e = get_entry(st, version, canon);
	e->fetching = false;
	if (tok) {
		free(e->token);
		e->token = tok;
		e->issued = wall_seconds();
		st->fetched++;
	} else {
		st->retry_after = wall_seconds() + 5;
	}
	out = e->token ? xstrdup(e->token) : NULL;
	pthread_mutex_unlock(&st->lock);
	if (!tok)
		log_warn("relay: %s", err);
	return out;
}

/* The signer's statement: cached while fresh, else signed here. */
static char *sign_get(struct statements *st, uint64_t version, const struct sub *sub, const unsigned char *digest)
{
	const char *canon = sub && sub->canon ? sub->canon : "";
	int64_t now = wall_seconds();
	char *out = NULL;

	pthread_mutex_lock(&st->lock);
	if (!st->enabled) {
		pthread_mutex_unlock(&st->lock);
		return NULL;
	}
	struct entry *e = st->head;
	while (e && (e->version != version || strcmp(e->canon, canon) != 0))
		e = e->next;
	if (e && e->token && now - e->issued < st->refresh && now >= e->issued &&
	    strcmp(e->kid, st->key.kid) == 0) {
		unlink_entry(st, e);
		push_front(st, e);
		out = xstrdup(e->token);
		pthread_mutex_unlock(&st->lock);
		return out;
	}
	unsigned char d[LTHASH_DIGEST_BYTES];
	bool have = false;
	if (e) {
		memcpy(d, e->digest, sizeof(d));   /* a version's state never changes */
		have = true;
	} else if (digest) {
		memcpy(d, digest, sizeof(d));
		have = true;
	}
	pthread_mutex_unlock(&st->lock);

	if (!have) {
		store_rdlock(st->store);
		int rc = digests_at(st->digests, version, sub, d);
		store_rdunlock(st->store);
		if (rc < 0)
			return NULL;
	}

	pthread_mutex_lock(&st->lock);
	if (!st->enabled) {
		pthread_mutex_unlock(&st->lock);
		return NULL;
	}
	/* look again: another thread may have signed it meanwhile */
	e = st->head;
	while (e && (e->version != version || strcmp(e->canon, canon) != 0))
		e = e->next;
	if (!e) {
		e = xcalloc(1, sizeof(*e));
		e->version = version;
		e->canon = xstrdup(canon);
		memcpy(e->digest, d, sizeof(d));
		push_front(st, e);
		if (++st->n > CACHE_MAX) {
			struct entry *last = st->tail;
			unlink_entry(st, last);
			entry_free(last);
			st->n--;
		}
	} else {
		unlink_entry(st, e);
		push_front(st, e);
	}
	if (!e->token || now - e->issued >= st->refresh || now < e->issued || strcmp(e->kid, st->key.kid) != 0) {
		struct statement s = {
			.version = version, .sub = (char *)canon, .issued = now, .expires = now + st->ttl,
			.overridden = overrides_at(st->overrides, version),
		};
		memcpy(s.digest, e->digest, sizeof(s.digest));
		free(e->token);
		e->token = statement_sign(&s, &st->key);
		e->issued = now;
		memcpy(e->kid, st->key.kid, sizeof(e->kid));
		st->signed_total++;
	}
	out = xstrdup(e->token);
	pthread_mutex_unlock(&st->lock);
	return out;
}

char *statements_get(struct statements *st, uint64_t version, const struct sub *sub,
		     const unsigned char *digest)
{
	if (st->fetch)
		return relay_get(st, version, sub && sub->canon ? sub->canon : "");
	return sign_get(st, version, sub, digest);
}

void statements_stats(struct statements *st, struct statements_stats *out)
{
	pthread_mutex_lock(&st->lock);
	out->signed_total = st->signed_total;
	out->cached = st->n;
	out->fetched = st->fetched;
	pthread_mutex_unlock(&st->lock);
}
