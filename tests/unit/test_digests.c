/* test_digests.c: unit tests of plane/core/digests.c over a store in a
 * temporary directory. Every digest digests_at gives is checked against
 * one recomputed from scratch: with lthash_seed over the (name, body) of
 * the store's live entries for the newest version, and over a model of
 * every committed change for older ones (under the store's history pin).
 * Random series of upserts, removes, revivals and batches; several
 * subscriptions, some first asked for late; the pin raised and dropped;
 * tombstones pruned; the store reopened; more subscriptions than trackers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "persist/persist.h"
#include "core/digests.h"
#include "log.h"
#include "lthash.h"
#include "core/store.h"
#include "sub.h"
#include "tmpdir.h"
#include "core/validate.h"

/* ---- the model: every committed state of every name -------------------------- */

#define NNAMES 14
#define MAX_EVENTS 4096

static const char *const NAMES[NNAMES] = {
	"cluster/c0", "cluster/c1", "cluster/c2", "cluster/c3", "cluster/c10", "cluster/web",
	"listener/l0", "listener/l1", "listener/l2",
	"cluster/c4", "cluster/c5", "listener/l10", "cluster/x", "listener/web",
};

struct event {
	uint64_t version;
	int name;
	char *body;    /* canonical; NULL: removed */
};

struct model {
	struct event ev[MAX_EVENTS];
	size_t n;
};

/* name's body at version x, NULL when absent */
static const char *model_at(const struct model *m, int name, uint64_t x)
{
	const char *body = NULL;
	for (size_t i = 0; i < m->n; i++)
		if (m->ev[i].name == name && m->ev[i].version <= x)
			body = m->ev[i].body;
	return body;
}

static void model_release(struct model *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->ev[i].body);
	m->n = 0;
}

/* ---- fixture --------------------------------------------------------------------- */

#define NSUBS 8
static const char *const SUBS[NSUBS] = {
	"",                                     /* everything */
	"cluster/",
	"listener/",
	"cluster/c1,listener/l2",               /* cluster/c1 matches c10 too */
	"cluster/c",
	"zzz/",                                 /* nothing */
	"listener/l0,cluster/c0,cluster/c5",    /* not sorted: its canonical form is */
	"cluster/web,listener/web,,",
};

struct fixture {
	char dir[64];
	struct persist *db;
	struct store *s;
	struct digests *d;
	struct store_opts opts;
	struct sub subs[NSUBS];
	struct model m;
	uint64_t rng;
};

static int open_all(struct fixture *f)
{
	char err[256];
	f->db = persist_sqlite_open(f->dir, err, sizeof(err));
	if (!f->db)
		return -1;
	f->s = store_open(f->db, &f->opts, err, sizeof(err));
	if (!f->s)
		return -1;
	f->d = digests_new(f->s);
	/* the tests below walk as often as they like; test_walk_limit checks
	 * the limit itself */
	digests_set_walk_limit(f->d, 1e9, 1e9);
	return 0;
}

static void close_all(struct fixture *f)
{
	digests_free(f->d);
	store_free(f->s);
	persist_close(f->db);
	f->d = NULL;
	f->s = NULL;
	f->db = NULL;
}

static void reopen(struct fixture *f)
{
	close_all(f);
	assert_int_equal(open_all(f), 0);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	if (test_tmpdir_make(f->dir, sizeof(f->dir), "digests") < 0) {
		free(f);
		return -1;
	}
	f->opts.tombstone_keep = 1000;
	f->rng = 0x2545f4914f6cdd1dull;
	char err[128];
	for (int i = 0; i < NSUBS; i++)
		if (sub_parse(SUBS[i], &f->subs[i], err, sizeof(err)) < 0)
			return -1;
	*state = f;
	return open_all(f);
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	close_all(f);
	for (int i = 0; i < NSUBS; i++)
		sub_release(&f->subs[i]);
	model_release(&f->m);
	int rc = test_tmpdir_remove(f->dir);
	free(f);
	return rc;
}

/* ---- helpers ---------------------------------------------------------------------- */

static uint64_t rnd(struct fixture *f)
{
	uint64_t x = f->rng;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	f->rng = x;
	return x * 2685821657736338717ull;
}

static void body_for(int name, int val, char *out, size_t cap)
{
	if (strncmp(NAMES[name], "cluster/", 8) == 0)
		snprintf(out, cap, "{\"endpoints\":[{\"address\":\"10.0.0.%d\",\"port\":%d}]}", 1 + val % 3,
			 80 + val);
	else
		snprintf(out, cap, "{\"port\":%d}", 8000 + val);
}

static void up(struct store_change *c, const char *name, const char *json)
{
	cJSON *body = cJSON_Parse(json);
	if (!body)
		fail_msg("test body does not parse: %s", json);
	char err[256];
	int rc = validate_upsert(name, body, c, err, sizeof(err));
	cJSON_Delete(body);
	if (rc < 0)
		fail_msg("validate_upsert %s: %s", name, err);
}

/* Commits n changes of names idx[] (val < 0: remove) and records them in
 * the model at the version made. Returns the store's version after it. */
static uint64_t commit(struct fixture *f, const int *idx, const int *val, size_t n)
{
	struct store_change c[NNAMES];
	char *canon[NNAMES];
	assert_true(n <= NNAMES);
	for (size_t i = 0; i < n; i++) {
		if (val[i] < 0) {
			memset(&c[i], 0, sizeof(c[i]));
			c[i].name = NAMES[idx[i]];
			canon[i] = NULL;
		} else {
			char body[128];
			body_for(idx[i], val[i], body, sizeof(body));
			up(&c[i], NAMES[idx[i]], body);
			canon[i] = strndup(c[i].body, c[i].body_len);
			assert_non_null(canon[i]);
		}
	}
	uint64_t v = 0;
	bool changed = false;
	char err[256] = "";
	store_write_lock(f->s);
	int rc = store_commit(f->s, c, n, &v, &changed, err, sizeof(err));
	store_write_unlock(f->s);
	for (size_t i = 0; i < n; i++) {
		free(c[i].body);
		c[i].body = NULL;
	}
	if (rc < 0)
		fail_msg("store_commit: %s", err);
	/* dropped changes (an identical body, a removal of nothing) leave the
	 * state as it was, so recording them changes nothing either */
	for (size_t i = 0; i < n; i++) {
		assert_true(f->m.n < MAX_EVENTS);
		f->m.ev[f->m.n++] = (struct event){ v, idx[i], canon[i] };
	}
	return v;
}

static uint64_t put1(struct fixture *f, int name, int val)
{
	return commit(f, &name, &val, 1);
}

static uint64_t del1(struct fixture *f, int name)
{
	int val = -1;
	return commit(f, &name, &val, 1);
}

/* A random batch of 1..4 distinct names; removes one time in three. */
static uint64_t random_commit(struct fixture *f)
{
	int idx[4], val[4];
	size_t n = 1 + rnd(f) % 4;
	for (size_t i = 0; i < n; i++) {
		bool dup;
		do {
			idx[i] = (int)(rnd(f) % NNAMES);
			dup = false;
			for (size_t j = 0; j < i; j++)
				dup = dup || idx[j] == idx[i];
		} while (dup);
		uint64_t r = rnd(f);
		val[i] = r % 3 == 0 ? -1 : (int)((r >> 8) % 5);
	}
	return commit(f, idx, val, n);
}

/* The digest of the model's state at x seen through sub. */
static void model_digest(const struct fixture *f, uint64_t x, const struct sub *sub, unsigned char out[32])
{
	struct lthash h;
	lthash_init(&h);
	for (int i = 0; i < NNAMES; i++) {
		const char *body = model_at(&f->m, i, x);
		if (body && sub_match(sub, NAMES[i])) {
			unsigned char seed[LTHASH_SEED_BYTES];
			lthash_seed(NAMES[i], body, strlen(body), seed);
			lthash_add(&h, seed);
		}
	}
	lthash_digest(&h, out);
}

/* The digest of the store's live entries seen through sub (read lock held). */
static void store_digest(struct fixture *f, const struct sub *sub, unsigned char out[32])
{
	struct lthash h;
	lthash_init(&h);
	for (const struct store_entry *e = store_oldest(f->s); e; e = e->next) {
		if (e->body && sub_match(sub, e->name)) {
			unsigned char seed[LTHASH_SEED_BYTES];
			lthash_seed(e->name, e->body, e->body_len, seed);
			lthash_add(&h, seed);
		}
	}
	lthash_digest(&h, out);
}

static int at(struct fixture *f, uint64_t x, const struct sub *sub, unsigned char out[32])
{
	memset(out, 0xee, 32);
	store_rdlock(f->s);
	int rc = digests_at(f->d, x, sub, out);
	store_rdunlock(f->s);
	return rc;
}

static const char *sub_text(const struct sub *sub)
{
	return sub ? sub->canon : "(null)";
}

/* digests_at(x, sub) is the model's digest at x. */
static void expect_model(struct fixture *f, uint64_t x, const struct sub *sub)
{
	unsigned char got[32], want[32];
	if (at(f, x, sub, got) != 0)
		fail_msg("digests_at(%llu, '%s') failed (store at %llu)", (unsigned long long)x, sub_text(sub),
			 (unsigned long long)store_version(f->s));
	model_digest(f, x, sub, want);
	if (!lthash_digest_equal(got, want)) {
		char g[65], w[65];
		lthash_digest_hex(got, g);
		lthash_digest_hex(want, w);
		fail_msg("digests_at(%llu, '%s') = %s, the state at %llu has %s (store at %llu)",
			 (unsigned long long)x,
			 sub_text(sub), g, (unsigned long long)x, w, (unsigned long long)store_version(f->s));
	}
}

/* digests_at(newest, sub) is the digest of the live entries, and the model's. */
static void expect_newest(struct fixture *f, const struct sub *sub)
{
	unsigned char got[32], want[32];
	store_rdlock(f->s);
	uint64_t v = store_version(f->s);
	assert_int_equal(digests_at(f->d, v, sub, got), 0);
	store_digest(f, sub, want);
	store_rdunlock(f->s);
	if (!lthash_digest_equal(got, want))
		fail_msg("newest (%llu) digest of '%s' is not the live entries'", (unsigned long long)v,
			 sub_text(sub));
	expect_model(f, v, sub);
}

static void expect_fails(struct fixture *f, uint64_t x, const struct sub *sub)
{
	unsigned char got[32];
	int rc = at(f, x, sub, got);
	if (rc != -1)
		fail_msg("digests_at(%llu, '%s') = %d, want -1 (store at %llu)", (unsigned long long)x,
			 sub_text(sub), rc,
			 (unsigned long long)store_version(f->s));
}

static void set_pin(struct fixture *f, bool keep, uint64_t floor)
{
	char err[256] = "";
	store_write_lock(f->s);
	int rc = store_set_pin(f->s, keep, floor, err, sizeof(err));
	store_write_unlock(f->s);
	if (rc < 0)
		fail_msg("store_set_pin: %s", err);
}

/* ---- tests ------------------------------------------------------------------------- */

static void test_empty_store(void **state)
{
	struct fixture *f = *state;
	unsigned char got[32], want[32];
	struct lthash h;
	lthash_init(&h);
	lthash_digest(&h, want);
	assert_int_equal(at(f, 0, NULL, got), 0);
	assert_memory_equal(got, want, 32);
	for (int i = 0; i < NSUBS; i++) {
		assert_int_equal(at(f, 0, &f->subs[i], got), 0);
		assert_memory_equal(got, want, 32);
	}
	/* a version the store does not have yet */
	expect_fails(f, 1, NULL);
	expect_fails(f, UINT64_MAX, &f->subs[1]);
}

static void test_newest_follows_commits(void **state)
{
	struct fixture *f = *state;
	/* a known series first */
	put1(f, 0, 1);                     /* 1 */
	put1(f, 6, 2);                     /* 2 */
	for (int i = 0; i < NSUBS; i++)
		expect_newest(f, &f->subs[i]);
	expect_newest(f, NULL);
	put1(f, 0, 2);                     /* 3: replaced */
	del1(f, 6);                        /* 4: removed */
	put1(f, 6, 2);                     /* 5: revived with the same body */
	int idx[3] = { 1, 4, 7 }, val[3] = { 0, 0, 3 };
	assert_int_equal(commit(f, idx, val, 3), 6);   /* a batch */
	int idx2[3] = { 1, 4, 0 }, val2[3] = { -1, 1, -1 };
	assert_int_equal(commit(f, idx2, val2, 3), 7); /* a batch with removes */
	/* identical: no version */
	assert_int_equal(put1(f, 4, 1), 7);
	assert_int_equal(del1(f, 0), 7);
	for (int i = 0; i < NSUBS; i++)
		expect_newest(f, &f->subs[i]);
	struct digests_stats st;
	digests_stats(f->d, &st);
	uint64_t walks = st.walks;
	assert_int_equal(st.trackers, NSUBS);   /* NULL and "" are one tracker */

	/* a random series; half the subscriptions are first asked late */
	for (int step = 1; step <= 200; step++) {
		random_commit(f);
		for (int i = 0; i < NSUBS; i++)
			if (i < NSUBS / 2 || step > 40 * (i - NSUBS / 2 + 1))
				expect_newest(f, &f->subs[i]);
		if (step % 25 == 0)
			expect_newest(f, NULL);
	}
	/* the trackers followed the commits: no subscription was walked again */
	digests_stats(f->d, &st);
	assert_int_equal(st.walks, walks);
	assert_int_equal(st.trackers, NSUBS);
	assert_true(store_version(f->s) > 150);
	/* the subscription's canonical form is the key: another spelling of
	 * the same prefixes is the same digest, with no new walk */
	struct sub alt;
	char err[64];
	assert_int_equal(sub_parse("cluster/c5,cluster/c0,listener/l0", &alt, err, sizeof(err)), 0);
	assert_string_equal(alt.canon, f->subs[6].canon);
	unsigned char a[32], b[32];
	assert_int_equal(at(f, store_version(f->s), &alt, a), 0);
	assert_int_equal(at(f, store_version(f->s), &f->subs[6], b), 0);
	assert_memory_equal(a, b, 32);
	digests_stats(f->d, &st);
	assert_int_equal(st.walks, walks);
	sub_release(&alt);
}

static void test_subscriptions_differ(void **state)
{
	struct fixture *f = *state;
	for (int i = 0; i < NNAMES; i++)
		put1(f, i, i % 5);
	unsigned char d[NSUBS][32];
	uint64_t v = store_version(f->s);
	for (int i = 0; i < NSUBS; i++)
		assert_int_equal(at(f, v, &f->subs[i], d[i]), 0);
	for (int i = 0; i < NSUBS; i++)
		for (int j = i + 1; j < NSUBS; j++)
			if (lthash_digest_equal(d[i], d[j]))
				fail_msg("'%s' and '%s' have one digest", SUBS[i], SUBS[j]);
	/* nothing matched: the empty digest */
	struct lthash h;
	unsigned char empty[32];
	lthash_init(&h);
	lthash_digest(&h, empty);
	assert_memory_equal(d[5], empty, 32);
	/* a change outside a subscription leaves its digest alone */
	unsigned char before[32], after[32];
	assert_int_equal(at(f, v, &f->subs[2], before), 0);   /* listener/ */
	v = put1(f, 0, 4);                                      /* cluster/c0 */
	assert_int_equal(at(f, v, &f->subs[2], after), 0);
	assert_memory_equal(before, after, 32);
	assert_int_equal(at(f, v, &f->subs[1], after), 0);     /* cluster/ moved */
	assert_memory_not_equal(d[1], after, 32);
}

/* Under the pin every version from the floor up is the state at it. */
static void test_pinned_older_versions(void **state)
{
	struct fixture *f = *state;
	for (int i = 0; i < 12; i++)
		random_commit(f);
	uint64_t floor = store_version(f->s);
	/* not pinned: only the newest */
	expect_fails(f, floor - 1, NULL);
	expect_fails(f, floor - 1, &f->subs[1]);
	set_pin(f, true, floor);
	for (int i = 0; i < 80; i++)
		random_commit(f);
	/* a revival and a delete-then-recreate inside the pinned range */
	del1(f, 2);
	put1(f, 2, 4);
	del1(f, 2);
	put1(f, 2, 0);
	uint64_t newest = store_version(f->s);
	assert_true(newest > floor + 60);

	/* every version, every subscription, oldest first */
	for (uint64_t x = floor; x <= newest; x++) {
		expect_model(f, x, NULL);
		for (int i = 0; i < NSUBS; i++)
			expect_model(f, x, &f->subs[i]);
	}
	/* again newest first (cached ones and derived ones agree) */
	for (uint64_t x = newest + 1; x-- > floor;)
		for (int i = 0; i < NSUBS; i++)
			expect_model(f, x, &f->subs[i]);
	struct digests_stats st;
	digests_stats(f->d, &st);
	assert_true(st.derived > 0);

	/* below the floor, above the newest */
	struct sub fresh;
	char err[64];
	assert_int_equal(sub_parse("listener/l1", &fresh, err, sizeof(err)), 0);
	expect_fails(f, floor - 1, &fresh);
	expect_fails(f, 0, &fresh);
	expect_fails(f, newest + 1, &fresh);
	expect_fails(f, newest + 1, NULL);
	expect_model(f, floor, &fresh);

	/* more commits: older versions stay right, newest moves on */
	for (int i = 0; i < 10; i++)
		random_commit(f);
	for (uint64_t x = floor; x <= store_version(f->s); x += 7)
		for (int i = 0; i < NSUBS; i++)
			expect_model(f, x, &f->subs[i]);
	sub_release(&fresh);
}

/* The floor raised (history trimmed) and dropped: what is still kept is
 * right; what is not is -1 (asked with subscriptions never asked before,
 * so no cached answer hides it). */
static void test_floor_moves(void **state)
{
	struct fixture *f = *state;
	random_commit(f);
	uint64_t floor = store_version(f->s);
	set_pin(f, true, floor);
	for (int i = 0; i < 60; i++)
		random_commit(f);
	uint64_t newest = store_version(f->s), mid = floor + (newest - floor) / 2;

	set_pin(f, true, mid);
	char err[64];
	struct sub a, b;
	assert_int_equal(sub_parse("cluster/c2,listener/", &a, err, sizeof(err)), 0);
	assert_int_equal(sub_parse("cluster/c3,listener/", &b, err, sizeof(err)), 0);
	for (uint64_t x = mid; x <= newest; x++) {
		expect_model(f, x, &a);
		expect_model(f, x, &f->subs[0]);
	}
	expect_fails(f, mid - 1, &a);
	expect_fails(f, floor, &a);
	/* commits after the trim are kept from mid on */
	for (int i = 0; i < 15; i++)
		random_commit(f);
	for (uint64_t x = mid; x <= store_version(f->s); x++)
		expect_model(f, x, &b);

	/* unpinned: only the newest is known */
	set_pin(f, false, 0);
	struct sub c;
	assert_int_equal(sub_parse("listener/l0,cluster/c1", &c, err, sizeof(err)), 0);
	expect_fails(f, store_version(f->s) - 1, &c);
	expect_fails(f, mid, &c);
	expect_newest(f, &c);
	random_commit(f);
	random_commit(f);
	expect_newest(f, &c);
	expect_newest(f, &a);
	sub_release(&a);
	sub_release(&b);
	sub_release(&c);
}

/* The history comes back from the database: a new digests over the
 * reopened store derives the same older digests. */
static void test_pinned_after_reopen(void **state)
{
	struct fixture *f = *state;
	for (int i = 0; i < 5; i++)
		random_commit(f);
	uint64_t floor = store_version(f->s);
	set_pin(f, true, floor);
	for (int i = 0; i < 40; i++)
		random_commit(f);
	uint64_t newest = store_version(f->s);
	unsigned char before[64][32];
	assert_true(newest - floor < 64);
	for (uint64_t x = floor; x <= newest; x++)
		assert_int_equal(at(f, x, &f->subs[3], before[x - floor]), 0);
	reopen(f);
	assert_int_equal(store_version(f->s), newest);
	for (uint64_t x = floor; x <= newest; x++) {
		unsigned char got[32];
		assert_int_equal(at(f, x, &f->subs[3], got), 0);
		assert_memory_equal(got, before[x - floor], 32);
		for (int i = 0; i < NSUBS; i++)
			expect_model(f, x, &f->subs[i]);
	}
	expect_fails(f, floor - 1, &f->subs[2]);
}

/* Tombstones over the limit go, except those a pinned version needs. */
static void test_tombstones_pruned_while_pinned(void **state)
{
	struct fixture *f = *state;
	f->opts.tombstone_keep = 2;
	reopen(f);
	for (int i = 0; i < NNAMES; i++)
		put1(f, i, 1);
	for (int i = 0; i < 6; i++)
		del1(f, i);                     /* tombstones with no history: pruned */
	assert_int_equal(store_tombstone_count(f->s), 2);
	uint64_t floor = store_version(f->s);
	set_pin(f, true, floor);
	for (int i = 6; i < NNAMES; i++)
		del1(f, i);
	for (int i = 0; i < 60; i++)
		random_commit(f);
	for (int i = 0; i < NNAMES; i += 2)
		del1(f, i);
	uint64_t newest = store_version(f->s);
	for (uint64_t x = floor; x <= newest; x++)
		for (int i = 0; i < NSUBS; i++)
			expect_model(f, x, &f->subs[i]);
	/* the floor raised to the newest: the history goes, tombstones can be
	 * pruned again, and the newest is still right */
	set_pin(f, true, newest);
	for (int i = 0; i < 20; i++)
		random_commit(f);
	for (uint64_t x = newest; x <= store_version(f->s); x++)
		for (int i = 0; i < NSUBS; i++)
			expect_model(f, x, &f->subs[i]);
}

/* More subscriptions than trackers: the least recently used goes and is
 * walked again when asked; every answer stays right. */
static void test_many_subscriptions(void **state)
{
	struct fixture *f = *state;
	enum { N = 80 };
	struct sub subs[N];
	char err[64];
	for (int i = 0; i < N; i++) {
		char text[64];
		snprintf(text, sizeof(text), "%s,zz%d/", NAMES[i % NNAMES], i);
		assert_int_equal(sub_parse(text, &subs[i], err, sizeof(err)), 0);
	}
	random_commit(f);
	set_pin(f, true, store_version(f->s));
	for (int round = 0; round < 6; round++) {
		for (int k = 0; k < 5; k++)
			random_commit(f);
		for (int i = 0; i < N; i++)
			expect_newest(f, &subs[i]);
		/* and an older version of some */
		for (int i = round; i < N; i += 7)
			expect_model(f, store_version(f->s) - 3, &subs[i]);
	}
	struct digests_stats st;
	digests_stats(f->d, &st);
	assert_true(st.trackers <= 64);
	assert_true(st.walks > N);
	for (int i = 0; i < N; i++)
		sub_release(&subs[i]);
}

/* A pin set with a floor below the store's version while no history was
 * kept (a floor in the past): the states between the floor and the
 * version at pin time were never kept, so digests_at cannot know them.
 * digests.h: "-1 when x cannot be derived (older than the history
 * kept ...)". It must not answer with a digest of another state (the
 * plane would sign it). */
static void test_floor_in_the_past(void **state)
{
	struct fixture *f = *state;
	put1(f, 0, 1);                     /* 1 */
	put1(f, 6, 1);                     /* 2 */
	put1(f, 0, 2);                     /* 3: c0 changed after 2 */
	del1(f, 6);                        /* 4: l0 removed after 2 */
	put1(f, 1, 1);                     /* 5 */
	set_pin(f, true, 2);               /* history from now on only */
	put1(f, 7, 3);                     /* 6 */
	expect_model(f, 6, NULL);
	expect_model(f, 5, NULL);          /* the pin-time version: known */
	/* versions 2..4: their states were not kept */
	for (uint64_t x = 2; x < 5; x++) {
		unsigned char got[32], want[32];
		int rc = at(f, x, NULL, got);
		model_digest(f, x, NULL, want);
		if (rc == 0 && !lthash_digest_equal(got, want))
			fail_msg("digests_at(%llu) answers 0 with the digest of another state (the pin was set at "
				 "version 5 with floor 2; versions 2..4 were never kept)", (unsigned long long)x);
	}
}

/* A flood of new subscriptions is walked at the limit's pace: past the
 * burst, a new one answers -1 (no statement) until the bucket refills;
 * subscriptions already tracked keep answering. */
static void test_walk_limit(void **state)
{
	struct fixture *f = *state;
	put1(f, 0, 1);
	digests_set_walk_limit(f->d, 2, 0);
	struct sub subs[3];
	char err[64];
	const char *texts[3] = { "cluster/", "route/", "file/" };
	unsigned char d[32];
	for (int i = 0; i < 3; i++)
		assert_int_equal(sub_parse(texts[i], &subs[i], err, sizeof(err)), 0);
	assert_int_equal(at(f, store_version(f->s), &subs[0], d), 0);
	assert_int_equal(at(f, store_version(f->s), &subs[1], d), 0);
	assert_int_equal(at(f, store_version(f->s), &subs[2], d), -1);
	assert_int_equal(at(f, store_version(f->s), &subs[0], d), 0);
	struct digests_stats st;
	digests_stats(f->d, &st);
	assert_int_equal(st.walks_refused, 1);
	digests_set_walk_limit(f->d, 1, 0);
	assert_int_equal(at(f, store_version(f->s), &subs[2], d), 0);
	for (int i = 0; i < 3; i++)
		sub_release(&subs[i]);
}

int main(void)
{
	log_set_level(LOG_LVL_WARN);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_empty_store, setup, teardown),
		cmocka_unit_test_setup_teardown(test_newest_follows_commits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_subscriptions_differ, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pinned_older_versions, setup, teardown),
		cmocka_unit_test_setup_teardown(test_floor_moves, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pinned_after_reopen, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tombstones_pruned_while_pinned, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_subscriptions, setup, teardown),
		cmocka_unit_test_setup_teardown(test_floor_in_the_past, setup, teardown),
		cmocka_unit_test_setup_teardown(test_walk_limit, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
