/* test_delta.c: unit tests of plane/core/delta.c over a store in a temporary
 * directory: the gap, snapshots, make-before-break order, subscriptions,
 * and deltas to an older target version over the store's history
 * (delta_collect_at). */
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
#include "core/delta.h"
#include "log.h"
#include "core/store.h"
#include "tmpdir.h"
#include "core/validate.h"

#define CLUSTER "{\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":80}]}"
#define LISTENER "{\"port\":8080,\"tls\":{\"secret\":\"s\"}}"
#define SECRET "{\"cert\":\"-----BEGIN C\",\"key\":\"-----BEGIN K\"}"
#define ROUTE "{\"listener\":\"l\",\"cluster\":\"a\",\"host\":\"*\",\"path\":\"/\"}"
#define FILEBODY "{\"path\":\"x.conf\",\"content\":\"x\"}"

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
	if (!f->db)
		return -1;
	f->s = store_open(f->db, &f->opts, err, sizeof(err));
	return f->s ? 0 : -1;
}

static void reopen(struct fixture *f)
{
	store_free(f->s);
	persist_close(f->db);
	assert_int_equal(open_store(f), 0);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	if (test_tmpdir_make(f->dir, sizeof(f->dir), "delta") < 0) {
		free(f);
		return -1;
	}
	f->opts.tombstone_keep = 1000;
	*state = f;
	return open_store(f);
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	store_free(f->s);
	persist_close(f->db);
	int rc = test_tmpdir_remove(f->dir);
	free(f);
	return rc;
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

static void rm(struct store_change *c, const char *name)
{
	memset(c, 0, sizeof(*c));
	c->name = name;
}

static uint64_t commit(struct fixture *f, struct store_change *c, size_t n)
{
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
	return v;
}

static uint64_t put1(struct fixture *f, const char *name, const char *json)
{
	struct store_change c;
	up(&c, name, json);
	return commit(f, &c, 1);
}

static uint64_t del1(struct fixture *f, const char *name)
{
	struct store_change c;
	rm(&c, name);
	return commit(f, &c, 1);
}

static void cluster_port(char *out, size_t cap, int port)
{
	snprintf(out, cap, "{\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":%d}]}", port);
}

/* "up:a,b rm:c" with each upsert's version: "up:a@3,b@3 rm:c" */
static char *describe(const struct delta *d)
{
	struct buf b = BUF_INIT;
	buf_puts(&b, "up:");
	for (size_t i = 0; i < d->nup; i++)
		buf_printf(&b, "%s%s@%llu", i ? "," : "", d->up[i].name, (unsigned long long)d->up[i].version);
	buf_puts(&b, " rm:");
	for (size_t i = 0; i < d->nrm; i++)
		buf_printf(&b, "%s%s", i ? "," : "", d->rm[i].name);
	return buf_detach(&b, NULL);
}

static void expect_delta(struct fixture *f, uint64_t have, const struct sub *sub, bool full, uint64_t base,
			 const char *want)
{
	struct delta d;
	store_rdlock(f->s);
	delta_collect(f->s, have, sub, &d);
	char *got = describe(&d);
	store_rdunlock(f->s);
	assert_int_equal(d.version, store_version(f->s));
	if (d.full != full)
		fail_msg("have %llu: full is %d, want %d (%s)", (unsigned long long)have, d.full, full, got);
	assert_int_equal(d.base, base);
	assert_string_equal(got, want);
	free(got);
	delta_release(&d);
}

/* ---- order ----------------------------------------------------------- */

static void test_make_before_break_order(void **state)
{
	struct fixture *f = *state;
	struct store_change c[8];
	/* written in the worst order: referrers first, names reversed */
	up(&c[0], "file/f", FILEBODY);
	up(&c[1], "route/r", ROUTE);
	up(&c[2], "listener/l", LISTENER);
	up(&c[3], "cluster/b", CLUSTER);
	up(&c[4], "cluster/a", CLUSTER);
	up(&c[5], "secret/s", SECRET);
	up(&c[6], "route/a", ROUTE);
	up(&c[7], "file/a", FILEBODY);
	assert_int_equal(commit(f, c, 8), 1);
	const char *want = "up:secret/s@1,cluster/a@1,cluster/b@1,listener/l@1,route/a@1,route/r@1,file/a@1,file/f@1 rm:";
	expect_delta(f, 0, NULL, true, 0, want);
	/* across several versions too */
	put1(f, "cluster/c", CLUSTER);   /* 2 */
	put1(f, "secret/t", SECRET);     /* 3 */
	put1(f, "file/b", FILEBODY);     /* 4 */
	put1(f, "listener/m", LISTENER); /* 5 */
	expect_delta(f, 1, NULL, false, 1, "up:secret/t@3,cluster/c@2,listener/m@5,file/b@4 rm:");
}

static void test_removals_last_referrers_first(void **state)
{
	struct fixture *f = *state;
	struct store_change c[7];
	up(&c[0], "secret/s", SECRET);
	up(&c[1], "cluster/a", CLUSTER);
	up(&c[2], "cluster/b", CLUSTER);
	up(&c[3], "listener/l", LISTENER);
	up(&c[4], "route/r", ROUTE);
	up(&c[5], "route/q", ROUTE);
	up(&c[6], "file/f", FILEBODY);
	commit(f, c, 7);                 /* 1 */
	/* removed in make-before-break order, plus a new cluster */
	rm(&c[0], "secret/s");
	rm(&c[1], "cluster/a");
	rm(&c[2], "listener/l");
	rm(&c[3], "route/r");
	rm(&c[4], "route/q");
	rm(&c[5], "file/f");
	up(&c[6], "cluster/z", CLUSTER);
	commit(f, c, 7);                 /* 2 */
	expect_delta(f, 1, NULL, false, 1, "up:cluster/z@2 rm:file/f,route/q,route/r,listener/l,cluster/a,secret/s");

	/* the encoded push has upserts, then removed in that order */
	struct delta d;
	struct buf b = BUF_INIT;
	store_rdlock(f->s);
	delta_collect(f->s, 1, NULL, &d);
	delta_encode_tail(&d, &b);
	store_rdunlock(f->s);
	delta_release(&d);
	const char *tail = "\"removed\":[\"file/f\",\"route/q\",\"route/r\",\"listener/l\",\"cluster/a\",\"secret/s\"]}";
	assert_true(b.len > strlen(tail));
	assert_string_equal(b.data + b.len - strlen(tail), tail);
	assert_true(strstr(b.data, "\"upserts\"") < strstr(b.data, "\"removed\""));
	buf_release(&b);
}

/* ---- the gap --------------------------------------------------------- */

static void test_delta_is_exactly_the_gap(void **state)
{
	struct fixture *f = *state;
	char body[128];
	struct store_change c[3];
	up(&c[0], "cluster/a", CLUSTER);
	up(&c[1], "cluster/b", CLUSTER);
	up(&c[2], "cluster/c", CLUSTER);
	commit(f, c, 3);                                  /* 1 */
	cluster_port(body, sizeof(body), 81);
	put1(f, "cluster/a", body);                       /* 2 */
	cluster_port(body, sizeof(body), 82);
	up(&c[0], "cluster/a", body);
	up(&c[1], "cluster/b", body);
	commit(f, c, 2);                                  /* 3 */
	put1(f, "cluster/d", CLUSTER);                    /* 4 */

	/* several versions of a coalesce to one entry with the newest body */
	struct delta d;
	store_rdlock(f->s);
	delta_collect(f->s, 1, NULL, &d);
	assert_int_equal(d.nup, 3);
	assert_int_equal(d.nrm, 0);
	assert_string_equal(d.up[0].name, "cluster/a");
	assert_int_equal(d.up[0].version, 3);
	assert_string_equal(d.up[0].body, "{\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":82}]}");
	store_rdunlock(f->s);
	delta_release(&d);

	expect_delta(f, 1, NULL, false, 1, "up:cluster/a@3,cluster/b@3,cluster/d@4 rm:");
	expect_delta(f, 2, NULL, false, 2, "up:cluster/a@3,cluster/b@3,cluster/d@4 rm:");
	expect_delta(f, 3, NULL, false, 3, "up:cluster/d@4 rm:");
	/* up to date: an empty delta, not a snapshot */
	expect_delta(f, 4, NULL, false, 4, "up: rm:");
}

static void test_tombstones_after_v(void **state)
{
	struct fixture *f = *state;
	struct store_change c[3];
	up(&c[0], "cluster/a", CLUSTER);
	up(&c[1], "cluster/b", CLUSTER);
	up(&c[2], "cluster/c", CLUSTER);
	commit(f, c, 3);                 /* 1 */
	del1(f, "cluster/b");            /* 2 */
	del1(f, "cluster/a");            /* 3 */
	put1(f, "cluster/e", CLUSTER);   /* 4 */
	expect_delta(f, 1, NULL, false, 1, "up:cluster/e@4 rm:cluster/a,cluster/b");
	expect_delta(f, 2, NULL, false, 2, "up:cluster/e@4 rm:cluster/a");
	expect_delta(f, 3, NULL, false, 3, "up:cluster/e@4 rm:");
	/* removed then revived after v: an upsert, no removal */
	put1(f, "cluster/b", CLUSTER);   /* 5 */
	expect_delta(f, 1, NULL, false, 1, "up:cluster/b@5,cluster/e@4 rm:cluster/a");
	/* created and removed after v: a removal the node can ignore */
	put1(f, "cluster/t", CLUSTER);   /* 6 */
	del1(f, "cluster/t");            /* 7 */
	expect_delta(f, 5, NULL, false, 5, "up: rm:cluster/t");
}

static void test_snapshot_at_zero_has_live_only(void **state)
{
	struct fixture *f = *state;
	put1(f, "cluster/a", CLUSTER);   /* 1 */
	put1(f, "cluster/b", CLUSTER);   /* 2 */
	del1(f, "cluster/a");            /* 3 */
	put1(f, "cluster/c", CLUSTER);   /* 4 */
	expect_delta(f, 0, NULL, true, 0, "up:cluster/b@2,cluster/c@4 rm:");
}

static void test_empty_store_snapshot(void **state)
{
	struct fixture *f = *state;
	expect_delta(f, 0, NULL, true, 0, "up: rm:");
	struct delta d;
	struct buf b = BUF_INIT;
	store_rdlock(f->s);
	delta_collect(f->s, 0, NULL, &d);
	delta_encode_tail(&d, &b);
	store_rdunlock(f->s);
	assert_string_equal(b.data, "\"version\":0,\"base\":0,\"full\":true,\"upserts\":[],\"removed\":[]}");
	buf_release(&b);
	delta_release(&d);
}

static void test_below_horizon_gets_snapshot(void **state)
{
	struct fixture *f = *state;
	f->opts.tombstone_keep = 1;
	reopen(f);
	struct store_change c[3];
	up(&c[0], "cluster/a", CLUSTER);
	up(&c[1], "cluster/b", CLUSTER);
	up(&c[2], "cluster/c", CLUSTER);
	commit(f, c, 3);                 /* 1 */
	del1(f, "cluster/a");            /* 2 */
	del1(f, "cluster/b");            /* 3: the tombstone of a is dropped */
	assert_int_equal(store_horizon(f->s), 2);
	/* a node at 1 would miss the removal of a: snapshot of the live */
	expect_delta(f, 1, NULL, true, 0, "up:cluster/c@1 rm:");
	/* at the horizon the delta is still complete */
	expect_delta(f, 2, NULL, false, 2, "up: rm:cluster/b");
	expect_delta(f, 3, NULL, false, 3, "up: rm:");
}

static void test_ahead_of_store_gets_snapshot(void **state)
{
	struct fixture *f = *state;
	put1(f, "cluster/a", CLUSTER);   /* 1 */
	put1(f, "cluster/b", CLUSTER);   /* 2 */
	/* a node from a store that was reset: it claims a version we never made */
	expect_delta(f, 3, NULL, true, 0, "up:cluster/a@1,cluster/b@2 rm:");
	expect_delta(f, UINT64_MAX, NULL, true, 0, "up:cluster/a@1,cluster/b@2 rm:");
}

/* ---- subscriptions --------------------------------------------------- */

static void test_sub_parse(void **state)
{
	(void)state;
	struct sub s;
	char err[256] = "";
	assert_int_equal(sub_parse("route/web-,cluster/", &s, err, sizeof(err)), 0);
	assert_int_equal(s.n, 2);
	assert_string_equal(s.canon, "cluster/,route/web-");
	assert_string_equal(s.prefix[0], "cluster/");
	assert_string_equal(s.prefix[1], "route/web-");
	assert_true(sub_match(&s, "cluster/a"));
	assert_true(sub_match(&s, "route/web-1"));
	assert_false(sub_match(&s, "route/api"));
	assert_false(sub_match(&s, "route/web"));
	assert_false(sub_match(&s, "listener/cluster/"));
	sub_release(&s);
	assert_null(s.canon);
	assert_int_equal(s.n, 0);

	/* the same set written differently has the same cache key */
	struct sub t;
	assert_int_equal(sub_parse(",,cluster/,,route/web-,", &t, err, sizeof(err)), 0);
	assert_int_equal(t.n, 2);
	assert_string_equal(t.canon, "cluster/,route/web-");
	sub_release(&t);

	assert_int_equal(sub_parse("", &s, err, sizeof(err)), 0);
	assert_int_equal(s.n, 0);
	assert_string_equal(s.canon, "");
	assert_true(sub_match(&s, "anything/x"));
	sub_release(&s);
	assert_int_equal(sub_parse(NULL, &s, err, sizeof(err)), 0);
	assert_int_equal(s.n, 0);
	sub_release(&s);
	assert_true(sub_match(NULL, "cluster/a"));
}

static void test_sub_parse_refuses_bad_characters(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"cluster/ x", "cluster/*", "route/web-,a\"b", "x\ny", "a;b", "caf\xc3\xa9", "a{b}", "a b,c",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct sub s;
		char err[256] = "";
		if (sub_parse(bad[i], &s, err, sizeof(err)) != -1)
			fail_msg("sub '%s' accepted", bad[i]);
		assert_non_null(strstr(err, "holds a character no name has"));
		assert_null(s.prefix);
		assert_null(s.canon);
		assert_int_equal(s.n, 0);
	}
	struct sub s;
	char err[256] = "";
	assert_int_equal(sub_parse("cluster/ x", &s, err, sizeof(err)), -1);
	assert_string_equal(err, "sub: prefix 'cluster/ x' holds a character no name has");
	/* a prefix longer than any name */
	char big[300];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(sub_parse(big, &s, err, sizeof(err)), -1);
	assert_string_equal(err, "sub: prefix longer than 220 bytes");
}

static void test_delta_with_subscription(void **state)
{
	struct fixture *f = *state;
	struct store_change c[5];
	up(&c[0], "cluster/a", CLUSTER);
	up(&c[1], "cluster/b", CLUSTER);
	up(&c[2], "route/web-1", ROUTE);
	up(&c[3], "route/api", ROUTE);
	up(&c[4], "secret/s", SECRET);
	commit(f, c, 5);                 /* 1 */
	rm(&c[0], "route/web-1");
	rm(&c[1], "route/api");
	up(&c[2], "cluster/b", "{\"endpoints\":[]}");
	up(&c[3], "secret/s", "{\"cert\":\"-----BEGIN X\",\"key\":\"-----BEGIN Y\"}");
	commit(f, c, 4);                 /* 2 */
	struct sub s;
	char err[128];
	assert_int_equal(sub_parse("cluster/,route/web-", &s, err, sizeof(err)), 0);
	expect_delta(f, 0, &s, true, 0, "up:cluster/a@1,cluster/b@2 rm:");
	expect_delta(f, 1, &s, false, 1, "up:cluster/b@2 rm:route/web-1");
	expect_delta(f, 1, NULL, false, 1, "up:secret/s@2,cluster/b@2 rm:route/api,route/web-1");
	sub_release(&s);
}

/* ---- encoding -------------------------------------------------------- */

static void test_encode_tail_is_json(void **state)
{
	struct fixture *f = *state;
	struct store_change c[3];
	up(&c[0], "cluster/a", "{\"lb\":\"random\",\"endpoints\":[{\"port\":9001,\"address\":\"127.0.0.1\",\"weight\":3}],\"x\":\"\\\"q\\\"\"}");
	up(&c[1], "cluster/b", CLUSTER);
	up(&c[2], "file/f", "{\"path\":\"a\",\"content\":\"line1\\nline2\\u00e9\\t\\\\\"}");
	commit(f, c, 3);                 /* 1 */
	del1(f, "cluster/b");            /* 2 */
	put1(f, "cluster/z", CLUSTER);   /* 3 */

	struct delta d;
	struct buf b = BUF_INIT;
	buf_puts(&b, "{\"nonce\":\"x\",");
	store_rdlock(f->s);
	delta_collect(f->s, 0, NULL, &d);
	delta_encode_tail(&d, &b);
	store_rdunlock(f->s);
	delta_release(&d);

	cJSON *v = cJSON_Parse(b.data);
	if (!v)
		fail_msg("push does not parse: %s", b.data);
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(v, "nonce")->valuestring, "x");
	assert_int_equal(cJSON_GetObjectItemCaseSensitive(v, "version")->valuedouble, 3);
	assert_int_equal(cJSON_GetObjectItemCaseSensitive(v, "base")->valuedouble, 0);
	assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(v, "full")));
	const cJSON *ups = cJSON_GetObjectItemCaseSensitive(v, "upserts");
	assert_int_equal(cJSON_GetArraySize(ups), 3);
	const cJSON *u0 = cJSON_GetArrayItem(ups, 0);
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(u0, "name")->valuestring, "cluster/a");
	assert_int_equal(cJSON_GetObjectItemCaseSensitive(u0, "version")->valuedouble, 1);
	const cJSON *body = cJSON_GetObjectItemCaseSensitive(u0, "body");
	assert_true(cJSON_IsObject(body));
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(body, "lb")->valuestring, "random");
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(body, "x")->valuestring, "\"q\"");
	const cJSON *ep = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(body, "endpoints"), 0);
	assert_int_equal(cJSON_GetObjectItemCaseSensitive(ep, "port")->valuedouble, 9001);
	assert_int_equal(cJSON_GetObjectItemCaseSensitive(ep, "weight")->valuedouble, 3);
	const cJSON *u1 = cJSON_GetArrayItem(ups, 1);
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(u1, "name")->valuestring, "cluster/z");
	assert_int_equal(cJSON_GetObjectItemCaseSensitive(u1, "version")->valuedouble, 3);
	const cJSON *u2 = cJSON_GetArrayItem(ups, 2);
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(u2, "name")->valuestring, "file/f");
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(u2, "body"), "content")->valuestring,
			    "line1\nline2\xc3\xa9\t\\");
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(v, "removed")), 0);
	cJSON_Delete(v);

	/* a delta: base, full false, removed names */
	buf_reset(&b);
	buf_puts(&b, "{\"nonce\":\"x\",");
	store_rdlock(f->s);
	delta_collect(f->s, 1, NULL, &d);
	delta_encode_tail(&d, &b);
	store_rdunlock(f->s);
	delta_release(&d);
	v = cJSON_Parse(b.data);
	assert_non_null(v);
	assert_int_equal(cJSON_GetObjectItemCaseSensitive(v, "version")->valuedouble, 3);
	assert_int_equal(cJSON_GetObjectItemCaseSensitive(v, "base")->valuedouble, 1);
	assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(v, "full")));
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(v, "upserts")), 1);
	const cJSON *removed = cJSON_GetObjectItemCaseSensitive(v, "removed");
	assert_int_equal(cJSON_GetArraySize(removed), 1);
	assert_string_equal(cJSON_GetArrayItem(removed, 0)->valuestring, "cluster/b");
	cJSON_Delete(v);
	buf_release(&b);
}

/* ---- the seed case --------------------------------------------------- */

static void test_thousand_clusters_one_changed(void **state)
{
	struct fixture *f = *state;
	enum { N = 1000 };
	struct store_change *c = calloc(N, sizeof(*c));
	char (*names)[32] = calloc(N, sizeof(*names));
	assert_non_null(c);
	assert_non_null(names);
	char body[128];
	for (int i = 0; i < N; i++) {
		snprintf(names[i], sizeof(names[i]), "cluster/c%04d", i);
		cluster_port(body, sizeof(body), 1000 + i);
		up(&c[i], names[i], body);
	}
	assert_int_equal(commit(f, c, N), 1);
	cluster_port(body, sizeof(body), 9);
	assert_int_equal(put1(f, "cluster/c0500", body), 2);

	struct delta d;
	store_rdlock(f->s);
	delta_collect(f->s, 1, NULL, &d);
	assert_false(d.full);
	assert_int_equal(d.base, 1);
	assert_int_equal(d.version, 2);
	assert_int_equal(d.nup, 1);
	assert_int_equal(d.nrm, 0);
	assert_string_equal(d.up[0].name, "cluster/c0500");
	assert_string_equal(d.up[0].body, "{\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":9}]}");
	delta_release(&d);

	delta_collect(f->s, 0, NULL, &d);
	assert_true(d.full);
	assert_int_equal(d.nup, 1000);
	assert_int_equal(d.nrm, 0);
	for (size_t i = 1; i < d.nup; i++)
		assert_true(strcmp(d.up[i - 1].name, d.up[i].name) < 0);
	assert_string_equal(d.up[0].name, "cluster/c0000");
	assert_string_equal(d.up[999].name, "cluster/c0999");
	delta_release(&d);
	store_rdunlock(f->s);
	free(c);
	free(names);
}

/* ---- deltas to an older version (staged rollouts) --------------------- */

static void set_pin(struct fixture *f, bool keep, uint64_t floor)
{
	char err[256] = "";
	store_write_lock(f->s);
	int rc = store_set_pin(f->s, keep, floor, err, sizeof(err));
	store_write_unlock(f->s);
	if (rc < 0)
		fail_msg("store_set_pin: %s", err);
}

static uint64_t putp(struct fixture *f, const char *name, int port)
{
	char body[128];
	cluster_port(body, sizeof(body), port);
	return put1(f, name, body);
}

/* "up:a@2=81,b@3=82 rm:c": each upsert's version and the port in its body. */
static char *describe_bodies(const struct delta *d)
{
	struct buf b = BUF_INIT;
	buf_puts(&b, "up:");
	for (size_t i = 0; i < d->nup; i++) {
		const struct delta_item *u = &d->up[i];
		assert_non_null(u->body);
		assert_int_equal(u->body_len, strlen(u->body));
		const char *p = strstr(u->body, "\"port\":");
		buf_printf(&b, "%s%s@%llu=%d", i ? "," : "", u->name, (unsigned long long)u->version,
			   p ? atoi(p + 7) : -1);
	}
	buf_puts(&b, " rm:");
	for (size_t i = 0; i < d->nrm; i++) {
		assert_null(d->rm[i].body);
		buf_printf(&b, "%s%s", i ? "," : "", d->rm[i].name);
	}
	return buf_detach(&b, NULL);
}

static void expect_at(struct fixture *f, uint64_t have, uint64_t x, const struct sub *sub, bool full,
		      const char *want)
{
	struct delta d;
	store_rdlock(f->s);
	delta_collect_at(f->s, have, x, sub, &d);
	char *got = describe_bodies(&d);
	store_rdunlock(f->s);
	if (strcmp(got, want) != 0)
		fail_msg("have %llu to %llu: got '%s', want '%s'", (unsigned long long)have, (unsigned long long)x,
			 got, want);
	assert_int_equal(d.version, x);
	if (d.full != full)
		fail_msg("have %llu to %llu: full is %d, want %d", (unsigned long long)have, (unsigned long long)x,
			 d.full, full);
	assert_int_equal(d.base, full ? 0 : have);
	free(got);
	delta_release(&d);
}

/* Versions 1..5, pinned at 1:
 *   1: a=80 b=80 c=80 r=80
 *   2: a=81 c=90
 *   3: b=82, c removed, e=83 created, r removed
 *   4: a=84
 *   5: e=85, r re-created =95 */
static void older_scenario(struct fixture *f)
{
	struct store_change c[4];
	up(&c[0], "cluster/a", CLUSTER);
	up(&c[1], "cluster/b", CLUSTER);
	up(&c[2], "cluster/c", CLUSTER);
	up(&c[3], "cluster/r", CLUSTER);
	assert_int_equal(commit(f, c, 4), 1);
	set_pin(f, true, 1);
	char b1[128], b2[128];
	cluster_port(b1, sizeof(b1), 81);
	cluster_port(b2, sizeof(b2), 90);
	up(&c[0], "cluster/a", b1);
	up(&c[1], "cluster/c", b2);
	assert_int_equal(commit(f, c, 2), 2);
	cluster_port(b1, sizeof(b1), 82);
	cluster_port(b2, sizeof(b2), 83);
	up(&c[0], "cluster/b", b1);
	rm(&c[1], "cluster/c");
	up(&c[2], "cluster/e", b2);
	rm(&c[3], "cluster/r");
	assert_int_equal(commit(f, c, 4), 3);
	assert_int_equal(putp(f, "cluster/a", 84), 4);
	cluster_port(b1, sizeof(b1), 85);
	cluster_port(b2, sizeof(b2), 95);
	up(&c[0], "cluster/e", b1);
	up(&c[1], "cluster/r", b2);
	assert_int_equal(commit(f, c, 2), 5);
}

static void test_collect_at_older_target(void **state)
{
	struct fixture *f = *state;
	older_scenario(f);
	/* to 2: a at its body of 2; c (removed at 3) still upserted with its
	 * body of 2; b changed only after 2, e created after 2: absent */
	expect_at(f, 1, 2, NULL, false, "up:cluster/a@2=81,cluster/c@2=90 rm:");
	/* to 3 */
	expect_at(f, 1, 3, NULL, false, "up:cluster/a@2=81,cluster/b@3=82,cluster/e@3=83 rm:cluster/c,cluster/r");
	expect_at(f, 2, 3, NULL, false, "up:cluster/b@3=82,cluster/e@3=83 rm:cluster/c,cluster/r");
	/* to 4 */
	expect_at(f, 3, 4, NULL, false, "up:cluster/a@4=84 rm:");
	expect_at(f, 2, 4, NULL, false, "up:cluster/a@4=84,cluster/b@3=82,cluster/e@3=83 rm:cluster/c,cluster/r");
	/* at the target already: nothing */
	expect_at(f, 2, 2, NULL, false, "up: rm:");
	expect_at(f, 1, 1, NULL, false, "up: rm:");
	/* to the newest: the same as delta_collect */
	expect_at(f, 1, 5, NULL, false,
		  "up:cluster/a@4=84,cluster/b@3=82,cluster/e@5=85,cluster/r@5=95 rm:cluster/c");
	expect_at(f, 4, 5, NULL, false, "up:cluster/e@5=85,cluster/r@5=95 rm:");
	expect_delta(f, 4, NULL, false, 4, "up:cluster/e@5,cluster/r@5 rm:");
	/* with a subscription */
	struct sub s;
	char err[128];
	assert_int_equal(sub_parse("cluster/c,cluster/e", &s, err, sizeof(err)), 0);
	expect_at(f, 1, 2, &s, false, "up:cluster/c@2=90 rm:");
	expect_at(f, 1, 3, &s, false, "up:cluster/e@3=83 rm:cluster/c");
	sub_release(&s);
}

static void test_collect_at_snapshot(void **state)
{
	struct fixture *f = *state;
	older_scenario(f);
	/* exactly the resources live at x, with their bodies at x */
	expect_at(f, 0, 1, NULL, true, "up:cluster/a@1=80,cluster/b@1=80,cluster/c@1=80,cluster/r@1=80 rm:");
	expect_at(f, 0, 2, NULL, true, "up:cluster/a@2=81,cluster/b@1=80,cluster/c@2=90,cluster/r@1=80 rm:");
	expect_at(f, 0, 3, NULL, true, "up:cluster/a@2=81,cluster/b@3=82,cluster/e@3=83 rm:");
	expect_at(f, 0, 4, NULL, true, "up:cluster/a@4=84,cluster/b@3=82,cluster/e@3=83 rm:");
	expect_at(f, 0, 5, NULL, true, "up:cluster/a@4=84,cluster/b@3=82,cluster/e@5=85,cluster/r@5=95 rm:");
	/* a node ahead of its target gets the snapshot at the target */
	expect_at(f, 4, 2, NULL, true, "up:cluster/a@2=81,cluster/b@1=80,cluster/c@2=90,cluster/r@1=80 rm:");
	expect_at(f, 99, 3, NULL, true, "up:cluster/a@2=81,cluster/b@3=82,cluster/e@3=83 rm:");
	/* encoded: version is the target */
	struct delta d;
	struct buf b = BUF_INIT;
	buf_puts(&b, "{");
	store_rdlock(f->s);
	delta_collect_at(f->s, 0, 3, NULL, &d);
	delta_encode_tail(&d, &b);
	store_rdunlock(f->s);
	delta_release(&d);
	cJSON *v = cJSON_Parse(b.data);
	if (!v)
		fail_msg("push does not parse: %s", b.data);
	assert_int_equal(cJSON_GetObjectItemCaseSensitive(v, "version")->valuedouble, 3);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(v, "upserts")), 3);
	cJSON_Delete(v);
	buf_release(&b);
}

static void test_collect_at_revert_sends_only_the_version(void **state)
{
	struct fixture *f = *state;
	struct store_change c[3];
	up(&c[0], "cluster/a", CLUSTER);
	up(&c[1], "cluster/b", CLUSTER);
	up(&c[2], "cluster/k", CLUSTER);
	assert_int_equal(commit(f, c, 3), 1);
	set_pin(f, true, 1);
	/* 2: the rollout's version: a changed, b removed, z created */
	char body[128];
	cluster_port(body, sizeof(body), 81);
	up(&c[0], "cluster/a", body);
	rm(&c[1], "cluster/b");
	up(&c[2], "cluster/z", CLUSTER);
	assert_int_equal(commit(f, c, 3), 2);
	/* 3: the revert: the content of 1 as a new version */
	up(&c[0], "cluster/a", CLUSTER);
	up(&c[1], "cluster/b", CLUSTER);
	rm(&c[2], "cluster/z");
	assert_int_equal(commit(f, c, 3), 3);

	/* a node still at 1 gets nothing but the version */
	expect_at(f, 1, 3, NULL, false, "up: rm:");
	struct delta d;
	struct buf b = BUF_INIT;
	store_rdlock(f->s);
	delta_collect_at(f->s, 1, 3, NULL, &d);
	delta_encode_tail(&d, &b);
	store_rdunlock(f->s);
	delta_release(&d);
	assert_string_equal(b.data, "\"version\":3,\"base\":1,\"full\":false,\"upserts\":[],\"removed\":[]}");
	buf_release(&b);
	/* a node that applied 2 gets the restoring content */
	expect_at(f, 2, 3, NULL, false, "up:cluster/a@3=80,cluster/b@3=80 rm:cluster/z");
	/* to the newest (delta_collect) the same holds */
	expect_delta(f, 1, NULL, false, 1, "up: rm:");
	expect_delta(f, 2, NULL, false, 2, "up:cluster/a@3,cluster/b@3 rm:cluster/z");

	/* one resource reverted, another really changed: only the change */
	putp(f, "cluster/k", 44);   /* 4 */
	expect_at(f, 1, 4, NULL, false, "up:cluster/k@4=44 rm:");
	expect_at(f, 1, 3, NULL, false, "up: rm:");

	/* once the history no longer reaches back to the node's version,
	 * the gap is sent whole */
	set_pin(f, true, 2);
	expect_at(f, 1, 3, NULL, false, "up:cluster/a@3=80,cluster/b@3=80 rm:cluster/z");
	expect_at(f, 2, 3, NULL, false, "up:cluster/a@3=80,cluster/b@3=80 rm:cluster/z");
	/* unpinned: to the newest, the whole gap as before */
	set_pin(f, false, 0);
	expect_at(f, 1, 4, NULL, false, "up:cluster/a@3=80,cluster/b@3=80,cluster/k@4=44 rm:cluster/z");
	expect_delta(f, 1, NULL, false, 1, "up:cluster/a@3,cluster/b@3,cluster/k@4 rm:cluster/z");
}

static void test_collect_at_without_history_is_collect(void **state)
{
	struct fixture *f = *state;
	struct store_change c[3];
	up(&c[0], "cluster/a", CLUSTER);
	up(&c[1], "cluster/b", CLUSTER);
	up(&c[2], "route/r", ROUTE);
	commit(f, c, 3);                 /* 1 */
	putp(f, "cluster/a", 81);        /* 2 */
	putp(f, "cluster/a", 80);        /* 3: back to its body of 1 */
	del1(f, "cluster/b");            /* 4 */
	put1(f, "cluster/t", CLUSTER);   /* 5 */
	del1(f, "cluster/t");            /* 6 */
	put1(f, "cluster/b", CLUSTER);   /* 7: re-created */
	put1(f, "secret/s", SECRET);     /* 8 */
	uint64_t floor = 7;
	store_rdlock(f->s);
	assert_false(store_pinned(f->s, &floor));
	store_rdunlock(f->s);
	/* the existing behaviour: a revert is resent, a created-and-removed
	 * name is a removal */
	expect_delta(f, 1, NULL, false, 1, "up:secret/s@8,cluster/a@3,cluster/b@7 rm:cluster/t");
	expect_delta(f, 5, NULL, false, 5, "up:secret/s@8,cluster/b@7 rm:cluster/t");
	for (uint64_t have = 0; have <= 9; have++) {
		struct delta d1, d2;
		store_rdlock(f->s);
		delta_collect(f->s, have, NULL, &d1);
		delta_collect_at(f->s, have, store_version(f->s), NULL, &d2);
		char *a = describe(&d1);
		char *b = describe(&d2);
		store_rdunlock(f->s);
		assert_string_equal(a, b);
		assert_int_equal(d1.version, d2.version);
		assert_int_equal(d1.base, d2.base);
		assert_int_equal(d1.full, d2.full);
		for (size_t i = 0; i < d1.nup; i++) {
			assert_ptr_equal(d1.up[i].body, d2.up[i].body);
			assert_int_equal(d1.up[i].body_len, d2.up[i].body_len);
		}
		free(a);
		free(b);
		delta_release(&d1);
		delta_release(&d2);
	}
}

int main(void)
{
	log_init("test_delta", LOG_LVL_WARN);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_make_before_break_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_removals_last_referrers_first, setup, teardown),
		cmocka_unit_test_setup_teardown(test_delta_is_exactly_the_gap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tombstones_after_v, setup, teardown),
		cmocka_unit_test_setup_teardown(test_snapshot_at_zero_has_live_only, setup, teardown),
		cmocka_unit_test_setup_teardown(test_empty_store_snapshot, setup, teardown),
		cmocka_unit_test_setup_teardown(test_below_horizon_gets_snapshot, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ahead_of_store_gets_snapshot, setup, teardown),
		cmocka_unit_test(test_sub_parse),
		cmocka_unit_test(test_sub_parse_refuses_bad_characters),
		cmocka_unit_test_setup_teardown(test_delta_with_subscription, setup, teardown),
		cmocka_unit_test_setup_teardown(test_encode_tail_is_json, setup, teardown),
		cmocka_unit_test_setup_teardown(test_thousand_clusters_one_changed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_collect_at_older_target, setup, teardown),
		cmocka_unit_test_setup_teardown(test_collect_at_snapshot, setup, teardown),
		cmocka_unit_test_setup_teardown(test_collect_at_revert_sends_only_the_version, setup, teardown),
		cmocka_unit_test_setup_teardown(test_collect_at_without_history_is_collect, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
