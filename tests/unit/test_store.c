/* test_store.c: unit tests of plane/core/store.c, persist/sqlite/store.c and db.c in a
 * temporary data directory: versions, tombstones, the horizon, reopening,
 * and the history a staged rollout pins (store_set_pin, store_body_at). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "persist/sqlite/sqlite.h"
#include "log.h"
#include "core/store.h"
#include "tmpdir.h"
#include "util.h"
#include "core/validate.h"

#define CLUSTER "{\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":80}]}"
#define CLUSTER2 "{\"endpoints\":[{\"address\":\"10.0.0.2\",\"port\":81}],\"lb\":\"random\"}"
#define LISTENER "{\"port\":8080}"

struct fixture {
	char dir[64];
	struct persist *db;
	struct store *s;
	struct store_opts opts;
};

static int open_store(struct fixture *f)
{
	char err[256];
	f->db = persist_sqlite_open(f->dir, err, sizeof(err));
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
	persist_close(f->db);
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
	if (test_tmpdir_make(f->dir, sizeof(f->dir), "store") < 0) {
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
	int rc = test_tmpdir_remove(f->dir);
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
	struct persist *second = persist_sqlite_open(f->dir, err, sizeof(err));
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
	struct persist *p = persist_sqlite_open(sub, err, sizeof(err));
	assert_non_null(p);
	long long v = 0;
	assert_int_equal(db_meta_get(persist_sqlite_db(p), "schema", &v), 1);
	assert_int_equal(v, 8);   /* 2: the version log; 3: nodes.sub; 4: node keys, held NACKs; 5: key_via; 6: key_pending;
				   * 7: vlog.override, the freeze window, approvals; 8: vlog.emergency */
	assert_int_equal(db_meta_get(persist_sqlite_db(p), "nothing", &v), 0);
	persist_close(p);
	snprintf(sub, sizeof(sub), "%s/sub/tether.db/x", f->dir);   /* under a file */
	assert_null(persist_sqlite_open(sub, err, sizeof(err)));
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

/* ---- history (staged rollouts) ---------------------------------------- */

static void set_pin(struct fixture *f, bool keep, uint64_t floor)
{
	char err[256] = "";
	store_write_lock(f->s);
	int rc = store_set_pin(f->s, keep, floor, err, sizeof(err));
	store_write_unlock(f->s);
	if (rc < 0)
		fail_msg("store_set_pin: %s", err);
}

/* A cluster body told apart by its port. */
static const char *cport(char *out, size_t cap, int port)
{
	snprintf(out, cap, "{\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":%d}]}", port);
	return out;
}

static uint64_t putp(struct fixture *f, const char *name, int port)
{
	char b[96];
	return put1(f, name, cport(b, sizeof(b), port));
}

/* name's state at x: "P<port>@<version>", "-@<version>" absent (removed),
 * "none" when there is no entry. */
static char *state_at(struct fixture *f, const char *name, uint64_t x)
{
	struct buf b = BUF_INIT;
	store_rdlock(f->s);
	const struct store_entry *e = store_get(f->s, name);
	if (!e) {
		buf_puts(&b, "none");
	} else {
		size_t len = 12345;
		uint64_t v = 12345;
		const char *body = store_body_at(e, x, &len, &v);
		if (body) {
			assert_int_equal(len, strlen(body));
			const char *p = strstr(body, "\"port\":");
			assert_non_null(p);
			buf_printf(&b, "P%d@%llu", atoi(p + 7), (unsigned long long)v);
		} else {
			assert_int_equal(len, 0);
			buf_printf(&b, "-@%llu", (unsigned long long)v);
		}
	}
	store_rdunlock(f->s);
	return buf_detach(&b, NULL);
}

static void expect_at(struct fixture *f, const char *name, uint64_t x, const char *want)
{
	char *got = state_at(f, name, x);
	if (strcmp(got, want) != 0)
		fail_msg("%s at %llu: got %s, want %s", name, (unsigned long long)x, got, want);
	free(got);
}

/* name's kept states, newest first: "3,2-,1" ('-': deleted at that version). */
static char *hist_of(struct fixture *f, const char *name)
{
	struct buf b = BUF_INIT;
	buf_puts(&b, "");
	store_rdlock(f->s);
	const struct store_entry *e = store_get(f->s, name);
	assert_non_null(e);
	uint64_t last = UINT64_MAX;
	for (const struct store_hist *h = e->hist; h; h = h->next) {
		assert_true(h->version < last);   /* newest first, strictly */
		assert_true(h->version < e->version);
		last = h->version;
		buf_printf(&b, "%s%llu%s", b.len ? "," : "", (unsigned long long)h->version, h->body ? "" : "-");
		if (h->body)
			assert_int_equal(h->body_len, strlen(h->body));
	}
	store_rdunlock(f->s);
	return buf_detach(&b, NULL);
}

static void expect_hist(struct fixture *f, const char *name, const char *want)
{
	char *got = hist_of(f, name);
	if (strcmp(got, want) != 0)
		fail_msg("history of %s: got '%s', want '%s'", name, got, want);
	free(got);
}

static void expect_pin(struct fixture *f, bool keep, uint64_t floor)
{
	uint64_t fl = 12345;
	store_rdlock(f->s);
	bool k = store_pinned(f->s, &fl);
	store_rdunlock(f->s);
	assert_int_equal(k, keep);
	assert_int_equal(fl, floor);
}

/* a: upserts, removal, re-creation; b: removed; c: created after the pin;
 * d: untouched. Versions 1..7, pinned at 1. */
static void history_scenario(struct fixture *f)
{
	struct store_change c[2];
	char b1[96], b2[96];
	up(&c[0], "cluster/a", cport(b1, sizeof(b1), 1));
	up(&c[1], "cluster/b", cport(b2, sizeof(b2), 1));
	assert_int_equal(commit(f, c, 2, NULL), 1);
	assert_int_equal(putp(f, "cluster/d", 1), 2);
	set_pin(f, true, 1);
	assert_int_equal(putp(f, "cluster/a", 3), 3);
	assert_int_equal(putp(f, "cluster/a", 4), 4);
	assert_int_equal(del1(f, "cluster/a"), 5);
	assert_int_equal(putp(f, "cluster/a", 6), 6);
	assert_int_equal(del1(f, "cluster/b"), 7);
	assert_int_equal(putp(f, "cluster/c", 8), 8);
}

static const struct {
	const char *name;
	const char *at[10];   /* state at x = 0..9 */
} history_want[] = {
	{ "cluster/a", { "-@0", "P1@1", "P1@1", "P3@3", "P4@4", "-@5", "P6@6", "P6@6", "P6@6", "P6@6" } },
	{ "cluster/b", { "-@0", "P1@1", "P1@1", "P1@1", "P1@1", "P1@1", "P1@1", "-@7", "-@7", "-@7" } },
	{ "cluster/c", { "-@0", "-@0", "-@0", "-@0", "-@0", "-@0", "-@0", "-@0", "P8@8", "P8@8" } },
	{ "cluster/d", { "-@0", "-@0", "P1@2", "P1@2", "P1@2", "P1@2", "P1@2", "P1@2", "P1@2", "P1@2" } },
};

static void expect_history_scenario(struct fixture *f)
{
	for (size_t i = 0; i < sizeof(history_want) / sizeof(history_want[0]); i++) {
		for (uint64_t x = 1; x < 10; x++)   /* every x >= the floor */
			expect_at(f, history_want[i].name, x, history_want[i].at[x]);
		expect_at(f, history_want[i].name, UINT64_MAX, history_want[i].at[9]);
	}
	expect_hist(f, "cluster/a", "5-,4,3,1");
	expect_hist(f, "cluster/b", "1");
	expect_hist(f, "cluster/c", "");
	expect_hist(f, "cluster/d", "");
}

/* Approvals' hold (store_set_hold): history kept from its floor whatever
 * the rollout's pin says, the two floors combined (the lower wins), and
 * dropped when the hold ends and no pin keeps it. */
static void test_history_held_for_approvals(void **state)
{
	struct fixture *f = *state;
	assert_int_equal(putp(f, "cluster/a", 1), 1);
	uint64_t floor;
	store_rdlock(f->s);
	floor = store_history_floor(f->s);
	store_rdunlock(f->s);
	assert_int_equal(floor, 1);   /* nothing kept: the newest */
	store_set_hold(f->s, true, 1);
	assert_int_equal(putp(f, "cluster/a", 2), 2);
	assert_int_equal(putp(f, "cluster/a", 3), 3);
	expect_hist(f, "cluster/a", "2,1");
	expect_at(f, "cluster/a", 1, "P1@1");
	expect_at(f, "cluster/a", 2, "P2@2");
	store_rdlock(f->s);
	floor = store_history_floor(f->s);
	store_rdunlock(f->s);
	assert_int_equal(floor, 1);
	/* the rollout's pin is not taken: it stays off */
	expect_pin(f, false, 0);
	/* a rollout pins at 2 and then unpins: the hold's floor (1) stays */
	set_pin(f, true, 2);
	expect_hist(f, "cluster/a", "2,1");
	set_pin(f, false, 0);
	expect_hist(f, "cluster/a", "2,1");
	/* the hold moves up: what no version >= 2 needs goes */
	store_set_hold(f->s, true, 2);
	expect_hist(f, "cluster/a", "2");
	expect_at(f, "cluster/a", 2, "P2@2");
	/* the hold ends: nothing is kept */
	store_set_hold(f->s, false, 0);
	expect_hist(f, "cluster/a", "");
	assert_int_equal(putp(f, "cluster/a", 4), 4);
	expect_hist(f, "cluster/a", "");
	store_rdlock(f->s);
	floor = store_history_floor(f->s);
	store_rdunlock(f->s);
	assert_int_equal(floor, 4);
}

static void test_history_kept_when_pinned(void **state)
{
	struct fixture *f = *state;
	expect_pin(f, false, 0);
	history_scenario(f);
	expect_pin(f, true, 1);
	expect_history_scenario(f);
	/* the current state is unchanged by the history */
	const struct store_entry *e = store_get(f->s, "cluster/a");
	assert_int_equal(e->version, 6);
	assert_non_null(e->body);
	assert_null(store_get(f->s, "cluster/b")->body);
	assert_int_equal(store_count(f->s), 3);
	assert_int_equal(store_tombstone_count(f->s), 1);
	expect_order(f->s, "cluster/d@2,cluster/a@6,-cluster/b@7,cluster/c@8");
	/* an identical write keeps nothing and makes no version */
	bool changed = true;
	struct store_change c;
	char b[96];
	up(&c, "cluster/a", cport(b, sizeof(b), 6));
	assert_int_equal(commit(f, &c, 1, &changed), 8);
	assert_false(changed);
	expect_hist(f, "cluster/a", "5-,4,3,1");
}

static void test_history_floor_above_last_change(void **state)
{
	struct fixture *f = *state;
	/* pinned at 3 while a was last changed at 1: the state at 3 is the
	 * one made at 1 */
	putp(f, "cluster/a", 1);    /* 1 */
	putp(f, "cluster/x", 2);    /* 2 */
	putp(f, "cluster/x", 3);    /* 3 */
	set_pin(f, true, 3);
	putp(f, "cluster/a", 4);    /* 4 */
	del1(f, "cluster/x");       /* 5 */
	expect_at(f, "cluster/a", 3, "P1@1");
	expect_at(f, "cluster/a", 4, "P4@4");
	expect_at(f, "cluster/x", 3, "P3@3");
	expect_at(f, "cluster/x", 4, "P3@3");
	expect_at(f, "cluster/x", 5, "-@5");
	/* x's state at 2 was not needed and never kept */
	expect_hist(f, "cluster/x", "3");
}

static void test_history_not_kept_when_unpinned(void **state)
{
	struct fixture *f = *state;
	history_scenario(f);
	/* the scenario pins; start over unpinned */
	set_pin(f, false, 0);
	expect_pin(f, false, 0);
	expect_hist(f, "cluster/a", "");
	expect_hist(f, "cluster/b", "");
	putp(f, "cluster/a", 9);    /* 9 */
	del1(f, "cluster/d");       /* 10 */
	putp(f, "cluster/b", 11);   /* 11: re-created */
	expect_hist(f, "cluster/a", "");
	expect_hist(f, "cluster/b", "");
	expect_hist(f, "cluster/d", "");
	/* without history only the current state is known */
	expect_at(f, "cluster/a", 8, "-@0");
	expect_at(f, "cluster/a", 9, "P9@9");
	expect_at(f, "cluster/d", 9, "-@0");
	expect_at(f, "cluster/d", 10, "-@10");
	expect_at(f, "cluster/b", 10, "-@0");
	reopen(f);
	expect_pin(f, false, 0);
	expect_hist(f, "cluster/a", "");
	expect_hist(f, "cluster/b", "");
	expect_hist(f, "cluster/d", "");
	expect_hist(f, "cluster/c", "");

	/* a store never pinned keeps nothing either */
	put1(f, "cluster/n", CLUSTER);  /* 12 */
	put1(f, "cluster/n", CLUSTER2); /* 13 */
	del1(f, "cluster/n");           /* 14 */
	expect_hist(f, "cluster/n", "");
	expect_at(f, "cluster/n", 12, "-@0");
}

static void test_history_set_pin_trims(void **state)
{
	struct fixture *f = *state;
	history_scenario(f);
	putp(f, "cluster/b", 9);    /* 9: b re-created */
	expect_hist(f, "cluster/b", "7-,1");
	/* floor 4: a keeps 5- (newer) and 4 (the newest at or below);
	 * b keeps 7- and 1 (its state at 4) */
	set_pin(f, true, 4);
	expect_pin(f, true, 4);
	expect_hist(f, "cluster/a", "5-,4");
	expect_hist(f, "cluster/b", "7-,1");
	for (uint64_t x = 4; x < 10; x++) {
		expect_at(f, "cluster/a", x, history_want[0].at[x]);
		expect_at(f, "cluster/c", x, history_want[2].at[x]);
		expect_at(f, "cluster/d", x, history_want[3].at[x]);
	}
	expect_at(f, "cluster/b", 4, "P1@1");
	expect_at(f, "cluster/b", 8, "-@7");
	expect_at(f, "cluster/b", 9, "P9@9");
	/* the same after a reopen: trimmed on disk too */
	reopen(f);
	expect_pin(f, true, 4);
	expect_hist(f, "cluster/a", "5-,4");
	expect_hist(f, "cluster/b", "7-,1");
	expect_hist(f, "cluster/c", "");

	/* floor 5: a keeps only 5- (its state at 5 and 6 is the current one
	 * from 6 on, 5- before) */
	set_pin(f, true, 5);
	expect_hist(f, "cluster/a", "5-");
	expect_at(f, "cluster/a", 5, "-@5");
	expect_at(f, "cluster/a", 6, "P6@6");
	/* floor 7: a's last change (6) is at or below it: no history;
	 * b's state at 7 is its removal */
	set_pin(f, true, 7);
	expect_hist(f, "cluster/a", "");
	expect_hist(f, "cluster/b", "7-");
	expect_at(f, "cluster/a", 7, "P6@6");
	expect_at(f, "cluster/b", 7, "-@7");
	expect_at(f, "cluster/b", 8, "-@7");
	reopen(f);
	expect_pin(f, true, 7);
	expect_hist(f, "cluster/a", "");
	expect_hist(f, "cluster/b", "7-");
	/* floor at the newest: nothing left */
	set_pin(f, true, 9);
	expect_hist(f, "cluster/b", "");
	reopen(f);
	expect_hist(f, "cluster/b", "");
	expect_pin(f, true, 9);
	/* and keeping goes on from there */
	putp(f, "cluster/b", 10);   /* 10 */
	expect_hist(f, "cluster/b", "9");
	expect_at(f, "cluster/b", 9, "P9@9");
}

static void test_history_survives_reopen(void **state)
{
	struct fixture *f = *state;
	history_scenario(f);
	reopen(f);
	expect_pin(f, true, 1);
	expect_history_scenario(f);
	expect_order(f->s, "cluster/d@2,cluster/a@6,-cluster/b@7,cluster/c@8");
	/* still keeping after the reopen */
	putp(f, "cluster/c", 9);    /* 9 */
	putp(f, "cluster/d", 10);   /* 10 */
	expect_hist(f, "cluster/c", "8");
	expect_hist(f, "cluster/d", "2");
	reopen(f);
	expect_at(f, "cluster/c", 8, "P8@8");
	expect_at(f, "cluster/c", 7, "-@0");
	expect_at(f, "cluster/c", 9, "P9@9");
	expect_at(f, "cluster/d", 9, "P1@2");
	expect_at(f, "cluster/d", 10, "P10@10");
	expect_at(f, "cluster/a", 4, "P4@4");
	expect_hist(f, "cluster/a", "5-,4,3,1");
	/* unpinning is durable too */
	set_pin(f, false, 0);
	reopen(f);
	expect_pin(f, false, 0);
	expect_hist(f, "cluster/a", "");
	expect_hist(f, "cluster/c", "");
	expect_at(f, "cluster/a", 4, "-@0");
}

static void test_history_tombstone_not_pruned(void **state)
{
	struct fixture *f = *state;
	f->opts.tombstone_keep = 1;
	f->opts.tombstone_max_age = 100;
	reopen(f);
	struct store_change c[4];
	up(&c[0], "cluster/a", CLUSTER);
	up(&c[1], "cluster/b", CLUSTER);
	up(&c[2], "cluster/c", CLUSTER);
	up(&c[3], "cluster/z", CLUSTER);
	commit(f, c, 4, NULL);          /* 1 */
	del1(f, "cluster/c");           /* 2: a tombstone with no history */
	set_pin(f, true, 2);
	del1(f, "cluster/a");           /* 3: c's tombstone goes (keep 1), a has history */
	assert_null(store_get(f->s, "cluster/c"));
	assert_int_equal(store_horizon(f->s), 2);
	del1(f, "cluster/b");           /* 4: over the limit, but a's tombstone stays */
	assert_int_equal(store_tombstone_count(f->s), 2);
	assert_int_equal(store_horizon(f->s), 2);
	assert_non_null(store_get(f->s, "cluster/a"));
	expect_hist(f, "cluster/a", "1");
	expect_at(f, "cluster/a", 2, "P80@1");
	expect_at(f, "cluster/a", 3, "-@3");
	del1(f, "cluster/z");           /* 5 */
	assert_int_equal(store_tombstone_count(f->s), 3);
	char *t = tombstone_order(f->s);
	assert_string_equal(t, "cluster/a@3,cluster/b@4,cluster/z@5");
	free(t);
	/* nor by age */
	int64_t deleted = store_get(f->s, "cluster/z")->deleted_at;
	char err[256];
	store_write_lock(f->s);
	assert_int_equal(store_prune_aged(f->s, deleted + 1000, err, sizeof(err)), 0);
	store_write_unlock(f->s);
	assert_int_equal(store_tombstone_count(f->s), 3);
	assert_int_equal(store_horizon(f->s), 2);
	expect_at(f, "cluster/b", 3, "P80@1");
	/* nor after a reopen (the history comes back from disk) */
	reopen(f);
	assert_int_equal(store_tombstone_count(f->s), 3);
	expect_hist(f, "cluster/a", "1");
	put1(f, "cluster/y", CLUSTER);  /* 6 */
	del1(f, "cluster/y");           /* 7 */
	assert_int_equal(store_tombstone_count(f->s), 4);
	expect_at(f, "cluster/y", 6, "P80@6");
	expect_at(f, "cluster/z", 4, "P80@1");
	/* once unpinned the history goes and the limit applies again */
	set_pin(f, false, 0);
	put1(f, "cluster/w", CLUSTER);  /* 8 */
	del1(f, "cluster/w");           /* 9 */
	assert_int_equal(store_tombstone_count(f->s), 1);
	assert_int_equal(store_horizon(f->s), 7);
	t = tombstone_order(f->s);
	assert_string_equal(t, "cluster/w@9");
	free(t);
	reopen(f);
	assert_int_equal(store_tombstone_count(f->s), 1);
	assert_null(store_get(f->s, "cluster/a"));
}

static void test_attach_history(void **state)
{
	struct fixture *f = *state;
	putp(f, "cluster/a", 1);    /* 1 */
	putp(f, "cluster/b", 2);    /* 2 */
	putp(f, "cluster/a", 3);    /* 3 */
	putp(f, "cluster/a", 7);    /* 4 */
	char b[96];
	const char *p3 = cport(b, sizeof(b), 3);
	store_write_lock(f->s);
	assert_int_equal(store_attach_history(f->s, "cluster/nope", 1, p3, strlen(p3)), -1);
	/* appended in order, newest first: the loader gives them so */
	assert_int_equal(store_attach_history(f->s, "cluster/a", 3, p3, strlen(p3)), 0);
	assert_int_equal(store_attach_history(f->s, "cluster/a", 2, NULL, 0), 0);
	const char *p1 = cport(b, sizeof(b), 1);
	assert_int_equal(store_attach_history(f->s, "cluster/a", 1, p1, strlen(p1)), 0);
	store_write_unlock(f->s);
	expect_hist(f, "cluster/a", "3,2-,1");
	expect_at(f, "cluster/a", 0, "-@0");
	expect_at(f, "cluster/a", 1, "P1@1");
	expect_at(f, "cluster/a", 2, "-@2");
	expect_at(f, "cluster/a", 3, "P3@3");
	expect_at(f, "cluster/a", 4, "P7@4");
	/* the body is a copy: the caller's buffer may change */
	memset(b, 'x', sizeof(b) - 1);
	expect_at(f, "cluster/a", 1, "P1@1");
	expect_hist(f, "cluster/b", "");
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
		cmocka_unit_test_setup_teardown(test_history_kept_when_pinned, setup, teardown),
		cmocka_unit_test_setup_teardown(test_history_held_for_approvals, setup, teardown),
		cmocka_unit_test_setup_teardown(test_history_floor_above_last_change, setup, teardown),
		cmocka_unit_test_setup_teardown(test_history_not_kept_when_unpinned, setup, teardown),
		cmocka_unit_test_setup_teardown(test_history_set_pin_trims, setup, teardown),
		cmocka_unit_test_setup_teardown(test_history_survives_reopen, setup, teardown),
		cmocka_unit_test_setup_teardown(test_history_tombstone_not_pruned, setup, teardown),
		cmocka_unit_test_setup_teardown(test_attach_history, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
