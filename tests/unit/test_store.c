/* test_store.c: unit tests of plane/store.c, store_sqlite.c and db.c in a
 * temporary data directory: versions, tombstones, the horizon, reopening. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "db.h"
#include "log.h"
#include "store.h"
#include "util.h"
#include "validate.h"

#define CLUSTER "{\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":80}]}"
#define CLUSTER2 "{\"endpoints\":[{\"address\":\"10.0.0.2\",\"port\":81}],\"lb\":\"random\"}"
#define LISTENER "{\"port\":8080}"

struct fixture {
	char dir[64];
	struct db *db;
	struct store *s;
	struct store_opts opts;
};

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int open_store(struct fixture *f)
{
	char err[256];
	f->db = db_open(f->dir, err, sizeof(err));
	if (!f->db) {
		fprintf(stderr, "db_open: %s\n", err);
		return -1;
	}
	f->s = store_open(f->db, &f->opts, err, sizeof(err));
	if (!f->s) {
		fprintf(stderr, "store_open: %s\n", err);
		return -1;
	}
	return 0;
}

static void close_store(struct fixture *f)
{
	store_free(f->s);
	db_close(f->db);
	f->s = NULL;
	f->db = NULL;
}

static void reopen(struct fixture *f)
{
	close_store(f);
	assert_int_equal(open_store(f), 0);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/tether-store-XXXXXX");
	if (!mkdtemp(f->dir)) {
		free(f);
		return -1;
	}
	f->opts.tombstone_keep = 1000;
	f->opts.tombstone_max_age = 0;
	f->opts.max_resources = 0;
	*state = f;
	return open_store(f);
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	close_store(f);
	int rc = nftw(f->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return rc;
}

/* ---- helpers ---------------------------------------------------------- */

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

static void rm(struct store_change *c, const char *name)
{
	memset(c, 0, sizeof(*c));
	c->name = name;
}

/* Commits changes; frees what the store did not take. */
static uint64_t commit(struct fixture *f, struct store_change *c, size_t n, bool *changed)
{
	uint64_t v = 0;
	bool ch = false;
	char err[256] = "";
	store_write_lock(f->s);
	int rc = store_commit(f->s, c, n, &v, &ch, err, sizeof(err));
	store_write_unlock(f->s);
	for (size_t i = 0; i < n; i++) {
		free(c[i].body);
		c[i].body = NULL;
	}
	if (rc < 0)
		fail_msg("store_commit: %s", err);
	if (changed)
		*changed = ch;
	return v;
}

static uint64_t put1(struct fixture *f, const char *name, const char *json)
{
	struct store_change c;
	up(&c, name, json);
	return commit(f, &c, 1, NULL);
}

static uint64_t del1(struct fixture *f, const char *name)
{
	struct store_change c;
	rm(&c, name);
	return commit(f, &c, 1, NULL);
}

/* The change list, oldest first: "name@version" with '-' for tombstones. */
static char *change_order(struct store *s)
{
	struct buf b = BUF_INIT;
	buf_puts(&b, "");
	for (const struct store_entry *e = store_oldest(s); e; e = e->next) {
		if (e != store_oldest(s))
			buf_putc(&b, ',');
		buf_printf(&b, "%s%s@%llu", e->body ? "" : "-", e->name, (unsigned long long)e->version);
	}
	return buf_detach(&b, NULL);
}

static void expect_order(struct store *s, const char *want)
{
	char *got = change_order(s);
	assert_string_equal(got, want);
	free(got);
}

/* The tombstone list through tnext, starting at the oldest tombstone. */
static char *tombstone_order(struct store *s)
{
	const struct store_entry *t = store_oldest(s);
	while (t && t->body)
		t = t->next;
	while (t && t->tprev)
		t = t->tprev;
	struct buf b = BUF_INIT;
	buf_puts(&b, "");
	for (; t; t = t->tnext) {
		assert_null(t->body);
		buf_printf(&b, "%s%s@%llu", b.len ? "," : "", t->name, (unsigned long long)t->version);
	}
	return buf_detach(&b, NULL);
}

static uint32_t referrers(struct store *s, const char *name)
{
	const struct store_entry *e = store_get(s, name);
	assert_non_null(e);
	return e->referrers;
}

static const char *route_body(char *out, size_t cap, const char *listener, const char *cluster)
{
	snprintf(out, cap, "{\"listener\":\"%s\",\"cluster\":\"%s\"}", listener, cluster);
	return out;
}

/* ---- tests ----------------------------------------------------------- */

static void test_empty_store(void **state)
{
	struct fixture *f = *state;
	assert_int_equal(store_version(f->s), 0);
	assert_int_equal(store_horizon(f->s), 0);
	assert_int_equal(store_count(f->s), 0);
	assert_int_equal(store_tombstone_count(f->s), 0);
	assert_null(store_oldest(f->s));
	assert_null(store_newest(f->s));
	assert_null(store_get(f->s, "cluster/a"));
	assert_int_equal(store_options(f->s)->tombstone_keep, 1000);
}

static void test_commit_is_one_version(void **state)
{
	struct fixture *f = *state;
	struct store_change c[3];
	up(&c[0], "cluster/a", CLUSTER);
	up(&c[1], "cluster/b", CLUSTER);
	up(&c[2], "listener/l", LISTENER);
	bool changed = false;
	uint64_t v = 0;
	char err[256];
	store_write_lock(f->s);
	assert_int_equal(store_commit(f->s, c, 3, &v, &changed, err, sizeof(err)), 0);
	store_write_unlock(f->s);
	assert_true(changed);
	assert_int_equal(v, 1);
	/* the store took every body */
	assert_null(c[0].body);
	assert_null(c[1].body);
	assert_null(c[2].body);
	assert_int_equal(store_version(f->s), 1);
	assert_int_equal(store_count(f->s), 3);
	const struct store_entry *e = store_get(f->s, "cluster/a");
	assert_non_null(e);
	assert_string_equal(e->body, "{\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":80}]}");
	assert_int_equal(e->body_len, strlen(e->body));
	assert_int_equal(e->version, 1);
	assert_int_equal(e->rank, 1);
	assert_int_equal(store_get(f->s, "listener/l")->rank, 2);

	/* upserts and removes together: one more version */
	up(&c[0], "cluster/c", CLUSTER);
	rm(&c[1], "cluster/a");
	up(&c[2], "cluster/b", CLUSTER2);
	v = commit(f, c, 3, &changed);
	assert_true(changed);
	assert_int_equal(v, 2);
	assert_int_equal(store_version(f->s), 2);
	assert_int_equal(store_count(f->s), 3);
	assert_int_equal(store_tombstone_count(f->s), 1);
	e = store_get(f->s, "cluster/a");
	assert_non_null(e);
	assert_null(e->body);
	assert_int_equal(e->body_len, 0);
	assert_int_equal(e->version, 2);
	int64_t now = wall_seconds();
	assert_true(e->deleted_at >= now - 60 && e->deleted_at <= now);
	assert_int_equal(store_get(f->s, "cluster/b")->version, 2);
	assert_int_equal(store_get(f->s, "listener/l")->version, 1);
	expect_order(f->s, "listener/l@1,cluster/c@2,-cluster/a@2,cluster/b@2");
	assert_string_equal(store_newest(f->s)->name, "cluster/b");
	assert_ptr_equal(store_newest(f->s)->next, NULL);
	assert_ptr_equal(store_oldest(f->s)->prev, NULL);
}

static void test_noop_write_makes_no_version(void **state)
{
	struct fixture *f = *state;
	put1(f, "cluster/a", CLUSTER);
	put1(f, "cluster/b", CLUSTER);
	/* the same bytes (after canonicalization) again */
	struct store_change c[2];
	up(&c[0], "cluster/a", "{ \"endpoints\" : [ { \"port\" : 80, \"address\" : \"10.0.0.1\" } ] }");
	bool changed = true;
	uint64_t v = 99;
	char err[256];
	store_write_lock(f->s);
	assert_int_equal(store_commit(f->s, c, 1, &v, &changed, err, sizeof(err)), 0);
	store_write_unlock(f->s);
	assert_false(changed);
	assert_int_equal(v, 2);
	assert_non_null(c[0].body);   /* dropped: still the caller's */
	free(c[0].body);
	assert_int_equal(store_version(f->s), 2);
	assert_int_equal(store_get(f->s, "cluster/a")->version, 1);

	/* a write with one identical and one changed body moves only the changed one */
	up(&c[0], "cluster/a", CLUSTER);
	up(&c[1], "cluster/b", CLUSTER2);
	store_write_lock(f->s);
	assert_int_equal(store_commit(f->s, c, 2, &v, &changed, err, sizeof(err)), 0);
	store_write_unlock(f->s);
	assert_true(changed);
	assert_int_equal(v, 3);
	assert_non_null(c[0].body);
	assert_null(c[1].body);
	free(c[0].body);
	assert_int_equal(store_get(f->s, "cluster/a")->version, 1);
	assert_int_equal(store_get(f->s, "cluster/b")->version, 3);
	expect_order(f->s, "cluster/a@1,cluster/b@3");

	/* nothing survives a reopen as a phantom version */
	reopen(f);
	assert_int_equal(store_version(f->s), 3);
}

static void test_remove_of_absent_dropped(void **state)
{
	struct fixture *f = *state;
	bool changed = true;
	struct store_change c;
	rm(&c, "cluster/nope");
	assert_int_equal(commit(f, &c, 1, &changed), 0);
	assert_false(changed);
	assert_int_equal(store_version(f->s), 0);
	assert_int_equal(store_tombstone_count(f->s), 0);
	assert_null(store_get(f->s, "cluster/nope"));

	put1(f, "cluster/a", CLUSTER);
	del1(f, "cluster/a");
	assert_int_equal(store_version(f->s), 2);
	/* removing a tombstone again is no change either */
	rm(&c, "cluster/a");
	assert_int_equal(commit(f, &c, 1, &changed), 2);
	assert_false(changed);
	assert_int_equal(store_get(f->s, "cluster/a")->version, 2);
	assert_int_equal(store_tombstone_count(f->s), 1);
	/* an empty write makes nothing */
	assert_int_equal(commit(f, NULL, 0, &changed), 2);
	assert_false(changed);
}

static void test_tombstones_in_change_order(void **state)
{
	struct fixture *f = *state;
	struct store_change c[4];
	up(&c[0], "cluster/a", CLUSTER);
	up(&c[1], "cluster/b", CLUSTER);
	up(&c[2], "cluster/c", CLUSTER);
	up(&c[3], "cluster/d", CLUSTER);
	commit(f, c, 4, NULL);
	del1(f, "cluster/c");   /* 2 */
	del1(f, "cluster/a");   /* 3 */
	put1(f, "cluster/d", CLUSTER2);   /* 4 */
	del1(f, "cluster/b");   /* 5 */
	assert_int_equal(store_tombstone_count(f->s), 3);
	char *t = tombstone_order(f->s);
	assert_string_equal(t, "cluster/c@2,cluster/a@3,cluster/b@5");
	free(t);
	expect_order(f->s, "-cluster/c@2,-cluster/a@3,cluster/d@4,-cluster/b@5");
	/* the same order after a reopen */
	reopen(f);
	t = tombstone_order(f->s);
	assert_string_equal(t, "cluster/c@2,cluster/a@3,cluster/b@5");
	free(t);
	expect_order(f->s, "-cluster/c@2,-cluster/a@3,cluster/d@4,-cluster/b@5");
}

static void test_tombstone_keep_raises_horizon(void **state)
{
	struct fixture *f = *state;
	f->opts.tombstone_keep = 2;
	reopen(f);
	struct store_change c[4];
	up(&c[0], "cluster/a", CLUSTER);
	up(&c[1], "cluster/b", CLUSTER);
	up(&c[2], "cluster/c", CLUSTER);
	up(&c[3], "cluster/d", CLUSTER);
	commit(f, c, 4, NULL);          /* 1 */
	del1(f, "cluster/a");           /* 2 */
	del1(f, "cluster/b");           /* 3 */
	assert_int_equal(store_tombstone_count(f->s), 2);
	assert_int_equal(store_horizon(f->s), 0);
	del1(f, "cluster/c");           /* 4: the oldest tombstone goes */
	assert_int_equal(store_tombstone_count(f->s), 2);
	assert_int_equal(store_horizon(f->s), 2);
	assert_null(store_get(f->s, "cluster/a"));
	char *t = tombstone_order(f->s);
	assert_string_equal(t, "cluster/b@3,cluster/c@4");
	free(t);
	expect_order(f->s, "cluster/d@1,-cluster/b@3,-cluster/c@4");
	/* an upsert does not prune */
	put1(f, "cluster/e", CLUSTER);  /* 5 */
	assert_int_equal(store_horizon(f->s), 2);
	assert_int_equal(store_tombstone_count(f->s), 2);
	del1(f, "cluster/d");           /* 6 */
	assert_int_equal(store_horizon(f->s), 3);
	/* pruned on disk in the same transaction */
	reopen(f);
	assert_int_equal(store_horizon(f->s), 3);
	assert_int_equal(store_tombstone_count(f->s), 2);
	assert_null(store_get(f->s, "cluster/b"));
	expect_order(f->s, "-cluster/c@4,cluster/e@5,-cluster/d@6");
}

static void test_revive_is_not_pruned(void **state)
{
	struct fixture *f = *state;
	f->opts.tombstone_keep = 2;
	reopen(f);
	struct store_change c[4];
	up(&c[0], "cluster/a", CLUSTER);
	up(&c[1], "cluster/b", CLUSTER);
	up(&c[2], "cluster/c", CLUSTER);
	up(&c[3], "cluster/x", CLUSTER);
	commit(f, c, 4, NULL);          /* 1 */
	del1(f, "cluster/a");           /* 2 */
	del1(f, "cluster/x");           /* 3 */
	assert_int_equal(store_tombstone_count(f->s), 2);
	/* one write revives a and removes b and c: three tombstones would be
	 * left without pruning; the oldest, a, is revived, so x goes */
	up(&c[0], "cluster/a", CLUSTER2);
	rm(&c[1], "cluster/b");
	rm(&c[2], "cluster/c");
	assert_int_equal(commit(f, c, 3, NULL), 4);
	assert_int_equal(store_tombstone_count(f->s), 2);
	assert_int_equal(store_count(f->s), 1);
	assert_int_equal(store_horizon(f->s), 3);
	assert_null(store_get(f->s, "cluster/x"));
	const struct store_entry *e = store_get(f->s, "cluster/a");
	assert_non_null(e);
	assert_string_equal(e->body, "{\"endpoints\":[{\"address\":\"10.0.0.2\",\"port\":81}],\"lb\":\"random\"}");
	expect_order(f->s, "cluster/a@4,-cluster/b@4,-cluster/c@4");
	reopen(f);
	assert_int_equal(store_horizon(f->s), 3);
	expect_order(f->s, "cluster/a@4,-cluster/b@4,-cluster/c@4");
}

static void test_prune_aged(void **state)
{
	struct fixture *f = *state;
	f->opts.tombstone_max_age = 100;
	reopen(f);
	struct store_change c[3];
	up(&c[0], "cluster/a", CLUSTER);
	up(&c[1], "cluster/b", CLUSTER);
	up(&c[2], "cluster/c", CLUSTER);
	commit(f, c, 3, NULL);          /* 1 */
	del1(f, "cluster/a");           /* 2 */
	del1(f, "cluster/b");           /* 3 */
	int64_t deleted = store_get(f->s, "cluster/b")->deleted_at;
	char err[256];
	store_write_lock(f->s);
	/* young tombstones stay */
	assert_int_equal(store_prune_aged(f->s, deleted + 99, err, sizeof(err)), 0);
	assert_int_equal(store_tombstone_count(f->s), 2);
	assert_int_equal(store_horizon(f->s), 0);
	/* old ones go, and the horizon rises to the newest dropped */
	assert_int_equal(store_prune_aged(f->s, deleted + 200, err, sizeof(err)), 0);
	store_write_unlock(f->s);
	assert_int_equal(store_tombstone_count(f->s), 0);
	assert_int_equal(store_horizon(f->s), 3);
	assert_int_equal(store_version(f->s), 3);   /* pruning is no new version */
	assert_null(store_get(f->s, "cluster/a"));
	assert_null(store_get(f->s, "cluster/b"));
	expect_order(f->s, "cluster/c@1");
	reopen(f);
	assert_int_equal(store_horizon(f->s), 3);
	assert_int_equal(store_tombstone_count(f->s), 0);
	assert_int_equal(store_version(f->s), 3);
}

static void test_prune_aged_off_when_zero(void **state)
{
	struct fixture *f = *state;
	put1(f, "cluster/a", CLUSTER);
	del1(f, "cluster/a");
	char err[256];
	store_write_lock(f->s);
	assert_int_equal(store_prune_aged(f->s, wall_seconds() + 1000000000, err, sizeof(err)), 0);
	store_write_unlock(f->s);
	assert_int_equal(store_tombstone_count(f->s), 1);
	assert_int_equal(store_horizon(f->s), 0);
}

static void test_revive_tombstone(void **state)
{
	struct fixture *f = *state;
	put1(f, "cluster/a", CLUSTER);  /* 1 */
	put1(f, "cluster/b", CLUSTER);  /* 2 */
	del1(f, "cluster/a");           /* 3 */
	assert_int_equal(store_count(f->s), 1);
	assert_int_equal(put1(f, "cluster/a", CLUSTER), 4);
	assert_int_equal(store_count(f->s), 2);
	assert_int_equal(store_tombstone_count(f->s), 0);
	const struct store_entry *e = store_get(f->s, "cluster/a");
	assert_non_null(e->body);
	assert_int_equal(e->version, 4);
	assert_int_equal(e->deleted_at, 0);
	assert_null(e->tprev);
	assert_null(e->tnext);
	expect_order(f->s, "cluster/b@2,cluster/a@4");
	char *t = tombstone_order(f->s);
	assert_string_equal(t, "");
	free(t);
	/* the tombstone row is gone from disk too */
	reopen(f);
	assert_int_equal(store_tombstone_count(f->s), 0);
	assert_int_equal(store_count(f->s), 2);
	expect_order(f->s, "cluster/b@2,cluster/a@4");
}

static void test_reopen_same_state(void **state)
{
	struct fixture *f = *state;
	f->opts.tombstone_keep = 1;
	reopen(f);
	struct store_change c[3];
	up(&c[0], "cluster/a", CLUSTER);
	up(&c[1], "listener/l", LISTENER);
	up(&c[2], "secret/s", "{\"cert\":\"-----BEGIN C\",\"key\":\"-----BEGIN K\"}");
	commit(f, c, 3, NULL);          /* 1 */
	put1(f, "cluster/b", CLUSTER2); /* 2 */
	del1(f, "cluster/a");           /* 3 */
	del1(f, "secret/s");            /* 4: a pruned, horizon 3 */
	put1(f, "file/f", "{\"path\":\"a/b\",\"content\":\"x\\ny\",\"mode\":\"0600\",\"future\":1}");  /* 5 */

	char *before = change_order(f->s);
	char *body_f = strdup(store_get(f->s, "file/f")->body);
	assert_int_equal(store_version(f->s), 5);
	assert_int_equal(store_horizon(f->s), 3);
	int64_t deleted = store_get(f->s, "secret/s")->deleted_at;

	reopen(f);
	assert_int_equal(store_version(f->s), 5);
	assert_int_equal(store_horizon(f->s), 3);
	assert_int_equal(store_count(f->s), 3);
	assert_int_equal(store_tombstone_count(f->s), 1);
	char *after = change_order(f->s);
	assert_string_equal(after, before);
	assert_string_equal(after, "listener/l@1,cluster/b@2,-secret/s@4,file/f@5");
	const struct store_entry *e = store_get(f->s, "file/f");
	assert_string_equal(e->body, body_f);
	assert_int_equal(e->body_len, strlen(body_f));
	assert_int_equal(e->rank, 4);
	assert_int_equal(store_get(f->s, "secret/s")->deleted_at, deleted);
	assert_string_equal(store_get(f->s, "cluster/b")->body,
			    "{\"endpoints\":[{\"address\":\"10.0.0.2\",\"port\":81}],\"lb\":\"random\"}");
	/* and the version keeps counting from there */
	assert_int_equal(put1(f, "cluster/c", CLUSTER), 6);
	free(before);
	free(after);
	free(body_f);
}

static void test_db_open_in_use(void **state)
{
	struct fixture *f = *state;
	char err[256] = "";
	struct db *second = db_open(f->dir, err, sizeof(err));
	assert_null(second);
	assert_non_null(strstr(err, "in use"));
	assert_non_null(strstr(err, f->dir));
	/* the first one still works */
	assert_int_equal(put1(f, "cluster/a", CLUSTER), 1);
	/* after closing, the directory opens again */
	reopen(f);
	assert_int_equal(store_version(f->s), 1);
}

static void test_db_open_creates_dir_and_refuses_bad_path(void **state)
{
	struct fixture *f = *state;
	char sub[128], err[256] = "";
	snprintf(sub, sizeof(sub), "%s/sub", f->dir);
	struct db *db = db_open(sub, err, sizeof(err));
	assert_non_null(db);
	long long v = 0;
	assert_int_equal(db_meta_get(db, "schema", &v), 1);
	assert_int_equal(v, 1);
	assert_int_equal(db_meta_get(db, "nothing", &v), 0);
	db_close(db);
	snprintf(sub, sizeof(sub), "%s/sub/tether.db/x", f->dir);   /* under a file */
	assert_null(db_open(sub, err, sizeof(err)));
	assert_non_null(strstr(err, "cannot create data directory"));
}

static void test_referrers_counts(void **state)
{
	struct fixture *f = *state;
	struct store_change c[4];
	char b1[64], b3[64];
	const char *r1 = route_body(b1, sizeof(b1), "l", "c"), *r2 = r1, *r3 = route_body(b3, sizeof(b3), "l", "d");
	up(&c[0], "cluster/c", CLUSTER);
	up(&c[1], "cluster/d", CLUSTER);
	up(&c[2], "listener/l", LISTENER);
	commit(f, c, 3, NULL);
	up(&c[0], "route/r1", r1);
	up(&c[1], "route/r2", r2);
	commit(f, c, 2, NULL);
	assert_int_equal(referrers(f->s, "cluster/c"), 2);
	assert_int_equal(referrers(f->s, "listener/l"), 2);
	assert_int_equal(referrers(f->s, "cluster/d"), 0);
	const struct store_entry *e = store_get(f->s, "route/r1");
	assert_int_equal(e->nrefs, 2);
	assert_string_equal(e->refs[0], "listener/l");
	assert_string_equal(e->refs[1], "cluster/c");
	/* retarget r1: the counts move */
	put1(f, "route/r1", r3);
	assert_int_equal(referrers(f->s, "cluster/c"), 1);
	assert_int_equal(referrers(f->s, "cluster/d"), 1);
	assert_int_equal(referrers(f->s, "listener/l"), 2);
	/* an identical re-put changes nothing */
	put1(f, "route/r1", r3);
	assert_int_equal(referrers(f->s, "cluster/d"), 1);
	/* removing a referrer */
	del1(f, "route/r2");
	assert_int_equal(referrers(f->s, "cluster/c"), 0);
	assert_int_equal(referrers(f->s, "listener/l"), 1);
	/* removing the referrer and the referenced together */
	rm(&c[0], "cluster/d");
	rm(&c[1], "route/r1");
	commit(f, c, 2, NULL);
	assert_int_equal(referrers(f->s, "listener/l"), 0);
}

static void test_referrers_route_before_cluster_in_one_write(void **state)
{
	struct fixture *f = *state;
	/* the referrer comes first in the write: the counts must not depend on it */
	char rb[64];
	const char *r = route_body(rb, sizeof(rb), "l", "c");
	struct store_change c[3];
	up(&c[0], "route/r", r);
	up(&c[1], "listener/l", LISTENER);
	up(&c[2], "cluster/c", CLUSTER);
	commit(f, c, 3, NULL);
	assert_int_equal(referrers(f->s, "listener/l"), 1);
	assert_int_equal(referrers(f->s, "cluster/c"), 1);
}

static void test_referrers_after_reopen(void **state)
{
	struct fixture *f = *state;
	char rb[64];
	const char *r = route_body(rb, sizeof(rb), "l", "c");
	put1(f, "cluster/c", CLUSTER);    /* 1 */
	put1(f, "listener/l", LISTENER);  /* 2 */
	put1(f, "route/r", r);            /* 3 */
	put1(f, "cluster/c", CLUSTER2);   /* 4: the referenced is now newer than its referrer */
	assert_int_equal(referrers(f->s, "cluster/c"), 1);
	assert_int_equal(referrers(f->s, "listener/l"), 1);
	reopen(f);
	assert_int_equal(referrers(f->s, "cluster/c"), 1);
	assert_int_equal(referrers(f->s, "listener/l"), 1);
	const struct store_entry *e = store_get(f->s, "route/r");
	assert_int_equal(e->nrefs, 2);
}

int main(void)
{
	log_init("test_store", LOG_LVL_WARN);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_empty_store, setup, teardown),
		cmocka_unit_test_setup_teardown(test_commit_is_one_version, setup, teardown),
		cmocka_unit_test_setup_teardown(test_noop_write_makes_no_version, setup, teardown),
		cmocka_unit_test_setup_teardown(test_remove_of_absent_dropped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tombstones_in_change_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tombstone_keep_raises_horizon, setup, teardown),
		cmocka_unit_test_setup_teardown(test_revive_is_not_pruned, setup, teardown),
		cmocka_unit_test_setup_teardown(test_prune_aged, setup, teardown),
		cmocka_unit_test_setup_teardown(test_prune_aged_off_when_zero, setup, teardown),
		cmocka_unit_test_setup_teardown(test_revive_tombstone, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reopen_same_state, setup, teardown),
		cmocka_unit_test_setup_teardown(test_db_open_in_use, setup, teardown),
		cmocka_unit_test_setup_teardown(test_db_open_creates_dir_and_refuses_bad_path, setup, teardown),
		cmocka_unit_test_setup_teardown(test_referrers_counts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_referrers_route_before_cluster_in_one_write, setup, teardown),
		cmocka_unit_test_setup_teardown(test_referrers_after_reopen, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
