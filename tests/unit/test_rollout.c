/* test_rollout.c: unit tests of the staged-rollout building blocks:
 * rollout_parse_stages (plane/rollout/rollout.c), rollout_stage_size and the
 * label-stratified rollout_order (plane/rollout/order.c), and the rollout
 * rows and released version in SQLite (plane/persist/sqlite/rollout.c), the latter in
 * a temporary data directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "persist/sqlite/db.h"
#include "log.h"
#include "rollout/rollout.h"
#include "persist/sqlite/rollout.h"
#include "rollout/order.h"
#include "tmpdir.h"

/* ---- rollout_parse_stages ----------------------------------------------- */

static void expect_stages(const char *s, const unsigned *want, size_t nwant)
{
	unsigned out[ROLLOUT_MAX_STAGES + 4];
	size_t n = 99;
	char err[256] = "";
	if (rollout_parse_stages(s, out, &n, err, sizeof(err)) != 0)
		fail_msg("stages '%s' refused: %s", s, err);
	assert_int_equal(n, nwant);
	for (size_t i = 0; i < nwant; i++)
		assert_int_equal(out[i], want[i]);
}

static void expect_bad_stages(const char *s)
{
	unsigned out[ROLLOUT_MAX_STAGES + 4];
	size_t n = 0;
	char err[256] = "";
	if (rollout_parse_stages(s, out, &n, err, sizeof(err)) != -1)
		fail_msg("stages '%s' accepted (%zu stages)", s ? s : "(null)", n);
	if (err[0] == '\0')
		fail_msg("stages '%s' refused without a message", s ? s : "(null)");
}

static void test_parse_stages_accepts(void **state)
{
	(void)state;
	static const unsigned a[] = { 1, 10, 100 };
	static const unsigned b[] = { 100 };
	static const unsigned c[] = { 5, 25, 50, 100 };
	expect_stages("1,10,100", a, 3);
	expect_stages("100", b, 1);
	expect_stages("5,25,50,100", c, 4);
	/* exactly the maximum number of stages */
	static const unsigned m[ROLLOUT_MAX_STAGES] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 100 };
	expect_stages("1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,100", m, ROLLOUT_MAX_STAGES);
}

static void test_parse_stages_refuses(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"", "0,100", "10,5,100", "1,10,99", "1,,100", "abc", "1,101", "101", "150,100",
		"1,10,10,100", ",1,100", "1;100", "1, 100", " 1,100", "-1,100", "+1,100", "1.5,100",
		"1,10,100x", "99999999999999999999999,100", "100,100",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_bad_stages(bad[i]);
	expect_bad_stages(NULL);
	/* 17 stages: one more than ROLLOUT_MAX_STAGES */
	expect_bad_stages("1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,100");
}

static void test_parse_stages_refuses_trailing_comma(void **state)
{
	(void)state;
	expect_bad_stages("1,10,100,");
	expect_bad_stages("100,");
}

static void test_parse_stages_message(void **state)
{
	(void)state;
	unsigned out[ROLLOUT_MAX_STAGES];
	size_t n = 0;
	char err[256] = "";
	assert_int_equal(rollout_parse_stages("10,5,100", out, &n, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "10,5,100"));
	assert_non_null(strstr(err, "100"));
	/* a tiny buffer is not overrun */
	char small[8];
	memset(small, 'x', sizeof(small));
	assert_int_equal(rollout_parse_stages("abc", out, &n, small, sizeof(small)), -1);
	assert_true(memchr(small, '\0', sizeof(small)) != NULL);
}

/* ---- rollout_stage_size ------------------------------------------------- */

static void test_stage_size(void **state)
{
	(void)state;
	assert_int_equal(rollout_stage_size(0, 1), 0);
	assert_int_equal(rollout_stage_size(0, 100), 0);
	assert_int_equal(rollout_stage_size(100, 1), 1);
	assert_int_equal(rollout_stage_size(100, 10), 10);
	assert_int_equal(rollout_stage_size(100, 100), 100);
	assert_int_equal(rollout_stage_size(10, 1), 1);
	assert_int_equal(rollout_stage_size(7, 50), 4);
	assert_int_equal(rollout_stage_size(1, 1), 1);
	assert_int_equal(rollout_stage_size(3, 34), 2);
	assert_int_equal(rollout_stage_size(1000, 1), 10);
	assert_int_equal(rollout_stage_size(1001, 1), 11);
	for (size_t n = 1; n <= 300; n++) {
		size_t prev = 0;
		for (unsigned pct = 1; pct <= 100; pct++) {
			size_t k = rollout_stage_size(n, pct);
			if (k < 1 || k > n)
				fail_msg("n=%zu pct=%u: %zu", n, pct, k);
			/* ceil(n * pct / 100), at least one */
			size_t want = (n * pct + 99) / 100;
			assert_int_equal(k, want < 1 ? 1 : want);
			assert_true(k >= prev);
			prev = k;
		}
		assert_int_equal(rollout_stage_size(n, 100), n);
	}
}

/* ---- rollout_order ------------------------------------------------------ */

/* Runs rollout_order and checks it is a permutation; returns the order. */
static size_t *order_of(const struct ro_node *nodes, size_t n)
{
	size_t *order = calloc(n ? n : 1, sizeof(*order));
	bool *seen = calloc(n ? n : 1, sizeof(*seen));
	assert_non_null(order);
	assert_non_null(seen);
	for (size_t i = 0; i < n; i++)
		order[i] = SIZE_MAX;
	rollout_order(nodes, n, order);
	for (size_t i = 0; i < n; i++) {
		if (order[i] >= n)
			fail_msg("order[%zu] = %zu, out of range (n %zu)", i, order[i], n);
		if (seen[order[i]])
			fail_msg("index %zu twice in the order", order[i]);
		seen[order[i]] = true;
	}
	free(seen);
	return order;
}

/* The order as "id,id,...". */
static char *order_ids(const struct ro_node *nodes, size_t n)
{
	size_t *order = order_of(nodes, n);
	struct buf b = BUF_INIT;
	buf_puts(&b, "");
	for (size_t i = 0; i < n; i++)
		buf_printf(&b, "%s%s", i ? "," : "", nodes[order[i]].id);
	free(order);
	return buf_detach(&b, NULL);
}

/* A fleet: 100 nodes, n-00..n-99; every tenth is strict; zones z0..z4. */
struct fleet {
	char ids[100][16];
	char labels[100][64];
	struct ro_node nodes[100];
};

static void fleet_init(struct fleet *f)
{
	for (int i = 0; i < 100; i++) {
		snprintf(f->ids[i], sizeof(f->ids[i]), "n-%02d", i);
		snprintf(f->labels[i], sizeof(f->labels[i]), "{\"profile\":\"%s\",\"zone\":\"z%d\"}",
			 i % 10 == 3 ? "strict" : "default", (i * 7) % 5);
		f->nodes[i].id = f->ids[i];
		f->nodes[i].labels = f->labels[i];
	}
}

static void test_order_deterministic(void **state)
{
	(void)state;
	struct fleet *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	fleet_init(f);
	char *a = order_ids(f->nodes, 100);
	char *b = order_ids(f->nodes, 100);
	assert_string_equal(a, b);

	/* the same nodes given reversed, and rotated */
	struct ro_node rev[100], rot[100];
	for (int i = 0; i < 100; i++) {
		rev[i] = f->nodes[99 - i];
		rot[i] = f->nodes[(i + 37) % 100];
	}
	char *c = order_ids(rev, 100);
	char *d = order_ids(rot, 100);
	assert_string_equal(a, c);
	assert_string_equal(a, d);

	/* labels in fresh buffers (same text, other pointers): same order */
	char copies[100][64];
	struct ro_node cp[100];
	for (int i = 0; i < 100; i++) {
		memcpy(copies[i], f->labels[i], sizeof(copies[i]));
		cp[i].id = f->ids[i];
		cp[i].labels = copies[i];
	}
	char *e = order_ids(cp, 100);
	assert_string_equal(a, e);

	/* not simply the input order */
	struct buf in = BUF_INIT;
	buf_puts(&in, "");
	for (int i = 0; i < 100; i++)
		buf_printf(&in, "%s%s", i ? "," : "", f->ids[i]);
	assert_string_not_equal(a, in.data);
	buf_release(&in);
	free(a);
	free(b);
	free(c);
	free(d);
	free(e);
	free(f);
}

static void test_order_stratified(void **state)
{
	(void)state;
	struct fleet *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	fleet_init(f);
	size_t *order = order_of(f->nodes, 100);
	/* the first 10 (a 10% stage) hold a strict node and every zone */
	bool strict = false, zone[5] = { false };
	for (size_t i = 0; i < 10; i++) {
		const char *l = f->nodes[order[i]].labels;
		if (strstr(l, "\"strict\""))
			strict = true;
		const char *z = strstr(l, "\"zone\":\"z");
		assert_non_null(z);
		int k = z[strlen("\"zone\":\"z")] - '0';
		assert_true(k >= 0 && k < 5);
		zone[k] = true;
	}
	assert_true(strict);
	for (int k = 0; k < 5; k++)
		if (!zone[k])
			fail_msg("zone z%d not in the first 10", k);
	/* the rarest value (strict: 10 holders of 100) comes first */
	assert_non_null(strstr(f->nodes[order[0]].labels, "\"strict\""));
	/* even a 1% stage (one node) of this fleet is the minority */
	free(order);
	free(f);
}

static void test_order_rarest_first(void **state)
{
	(void)state;
	enum { N = 60 };
	char ids[N][16];
	struct ro_node nodes[N];
	for (int i = 0; i < N; i++) {
		snprintf(ids[i], sizeof(ids[i]), "node-%d", i);
		nodes[i].id = ids[i];
		nodes[i].labels = i % 2 ? "{\"arch\":\"arm\",\"zone\":\"a\"}" : "{\"arch\":\"x86\",\"zone\":\"a\"}";
	}
	/* one node with a value no other has, in the middle of the input */
	nodes[41].labels = "{\"arch\":\"riscv\",\"zone\":\"a\"}";
	size_t *order = order_of(nodes, N);
	assert_string_equal(nodes[order[0]].id, "node-41");
	/* then both other arch values within the next two */
	bool arm = false, x86 = false;
	for (int i = 1; i < 3; i++) {
		arm |= strstr(nodes[order[i]].labels, "arm") != NULL;
		x86 |= strstr(nodes[order[i]].labels, "x86") != NULL;
	}
	assert_true(arm);
	assert_true(x86);
	free(order);

	/* a rare label key present on one node only */
	for (int i = 0; i < N; i++)
		nodes[i].labels = "{\"zone\":\"a\"}";
	nodes[17].labels = "{\"canary\":\"yes\",\"zone\":\"a\"}";
	order = order_of(nodes, N);
	assert_string_equal(nodes[order[0]].id, "node-17");
	free(order);
}

static void test_order_round_robin_over_label_sets(void **state)
{
	(void)state;
	/* three label sets of 30, 20 and 10: after the first cover, the next
	 * nodes alternate between the sets while every set has some left */
	enum { N = 60 };
	char ids[N][16];
	struct ro_node nodes[N];
	static const char *const sets[] = { "{\"zone\":\"a\"}", "{\"zone\":\"b\"}", "{\"zone\":\"c\"}" };
	for (int i = 0; i < N; i++) {
		snprintf(ids[i], sizeof(ids[i]), "rr-%d", i);
		nodes[i].id = ids[i];
		nodes[i].labels = sets[i < 30 ? 0 : i < 50 ? 1 : 2];
	}
	size_t *order = order_of(nodes, N);
	/* in the first 30, each set appears at least 9 times (10 rounds) */
	int count[3] = { 0 };
	for (int i = 0; i < 30; i++) {
		const char *l = nodes[order[i]].labels;
		for (int s = 0; s < 3; s++)
			if (l == sets[s])
				count[s]++;
	}
	for (int s = 0; s < 3; s++)
		if (count[s] < 9)
			fail_msg("set %s: %d of the first 30", sets[s], count[s]);
	/* any 3 consecutive positions in the first 30 hold all three sets */
	for (int i = 0; i + 3 <= 30; i += 3) {
		bool have[3] = { false };
		for (int j = i; j < i + 3; j++)
			for (int s = 0; s < 3; s++)
				if (nodes[order[j]].labels == sets[s])
					have[s] = true;
		if (!(have[0] && have[1] && have[2]))
			fail_msg("positions %d..%d miss a label set", i, i + 2);
	}
	free(order);
}

static void test_order_no_labels(void **state)
{
	(void)state;
	enum { N = 12 };
	char ids[N][16];
	struct ro_node nodes[N];
	for (int i = 0; i < N; i++) {
		snprintf(ids[i], sizeof(ids[i]), "bare-%d", i);
		nodes[i].id = ids[i];
		nodes[i].labels = i % 3 == 0 ? NULL : "{}";
	}
	char *a = order_ids(nodes, N);
	/* deterministic under reordering too */
	struct ro_node rev[N];
	for (int i = 0; i < N; i++)
		rev[i] = nodes[N - 1 - i];
	char *b = order_ids(rev, N);
	assert_string_equal(a, b);
	free(a);
	free(b);

	/* a mix: the only labelled node comes first */
	nodes[5].labels = "{\"zone\":\"x\"}";
	size_t *order = order_of(nodes, N);
	assert_string_equal(nodes[order[0]].id, "bare-5");
	free(order);

	/* all NULL */
	for (int i = 0; i < N; i++)
		nodes[i].labels = NULL;
	order = order_of(nodes, N);
	free(order);
	/* labels that are not an object, or not JSON, do not crash or lose nodes */
	nodes[0].labels = "not json";
	nodes[1].labels = "[1,2]";
	nodes[2].labels = "{\"n\":3,\"b\":true}";
	order = order_of(nodes, N);
	free(order);
}

static void test_order_one_and_zero(void **state)
{
	(void)state;
	struct ro_node one = { "only", "{\"zone\":\"a\"}" };
	size_t order[1] = { 77 };
	rollout_order(&one, 1, order);
	assert_int_equal(order[0], 0);
	one.labels = NULL;
	order[0] = 77;
	rollout_order(&one, 1, order);
	assert_int_equal(order[0], 0);
	/* zero nodes: nothing is written */
	size_t untouched[1] = { 55 };
	rollout_order(NULL, 0, untouched);
	assert_int_equal(untouched[0], 55);
	struct ro_node none[1] = { { "x", "{}" } };
	rollout_order(none, 0, untouched);
	assert_int_equal(untouched[0], 55);
}

static void test_order_large_fleet(void **state)
{
	(void)state;
	/* 2000 nodes, 40 label sets: still a permutation, and the first
	 * rollout_stage_size(2000, 1) = 20 nodes cover all 8 zones */
	enum { N = 2000 };
	char (*ids)[16] = calloc(N, sizeof(*ids));
	char (*labels)[64] = calloc(N, sizeof(*labels));
	struct ro_node *nodes = calloc(N, sizeof(*nodes));
	assert_non_null(ids);
	assert_non_null(labels);
	assert_non_null(nodes);
	for (int i = 0; i < N; i++) {
		snprintf(ids[i], sizeof(ids[i]), "big-%04d", i);
		snprintf(labels[i], sizeof(labels[i]), "{\"rack\":\"r%d\",\"zone\":\"z%d\"}", i % 5, (i / 3) % 8);
		nodes[i].id = ids[i];
		nodes[i].labels = labels[i];
	}
	size_t *order = order_of(nodes, N);
	size_t k = rollout_stage_size(N, 1);
	assert_int_equal(k, 20);
	bool zone[8] = { false }, rack[5] = { false };
	for (size_t i = 0; i < k; i++) {
		const char *l = nodes[order[i]].labels;
		rack[l[strlen("{\"rack\":\"r")] - '0'] = true;
		const char *z = strstr(l, "\"zone\":\"z");
		zone[z[strlen("\"zone\":\"z")] - '0'] = true;
	}
	for (int z = 0; z < 8; z++)
		assert_true(zone[z]);
	for (int r = 0; r < 5; r++)
		assert_true(rack[r]);
	free(order);
	free(nodes);
	free(labels);
	free(ids);
}

/* ---- rollout_db --------------------------------------------------------- */

struct fixture {
	char dir[64];
	struct db *db;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	if (test_tmpdir_make(f->dir, sizeof(f->dir), "rollout") < 0) {
		free(f);
		return -1;
	}
	char err[256];
	f->db = db_open(f->dir, err, sizeof(err));
	if (!f->db) {
		fprintf(stderr, "db_open: %s\n", err);
		free(f);
		return -1;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	db_close(f->db);
	int rc = test_tmpdir_remove(f->dir);
	free(f);
	return rc;
}

static void reopen_db(struct fixture *f)
{
	char err[256];
	db_close(f->db);
	f->db = db_open(f->dir, err, sizeof(err));
	if (!f->db)
		fail_msg("db_open: %s", err);
}

static void run_init(struct ro_run *r, uint64_t id, enum ro_state st, const char *reason, size_t nmembers)
{
	memset(r, 0, sizeof(*r));
	r->id = id;
	r->state = st;
	r->stage = 1;
	r->reached = nmembers / 2;
	r->from = 10 * id;
	r->to = 10 * id + 3;
	r->revert = st == RO_ROLLED_BACK || st == RO_ABORTED ? 10 * id + 4 : 0;
	r->parent = id > 1 ? id - 1 : 0;
	r->touched = nmembers / 3;
	r->reason = strdup(reason);
	r->nmembers = nmembers;
	r->members = calloc(nmembers ? nmembers : 1, sizeof(char *));
	for (size_t i = 0; i < nmembers; i++) {
		char id_[32];
		snprintf(id_, sizeof(id_), "node-%llu-%zu", (unsigned long long)id, i);
		r->members[i] = strdup(id_);
	}
	r->started_at = 1700000000000LL + (int64_t)id;
	r->stage_at = 1700000000500LL + (int64_t)id;
	r->finished_at = st == RO_IN_PROGRESS ? 0 : 1700000009000LL + (int64_t)id;
	r->msgs = 100 + id;
	r->revert_msgs = 7 * id;
	r->bump_msgs = 11 * id;
}

static void save(struct fixture *f, const struct ro_run *r, uint64_t released)
{
	char err[256] = "";
	if (rollout_db_save(f->db, r, released, err, sizeof(err)) != 0)
		fail_msg("rollout_db_save: %s", err);
}

static void expect_run_equal(const struct ro_run *got, const struct ro_run *want, bool members)
{
	assert_int_equal(got->id, want->id);
	assert_int_equal(got->state, want->state);
	assert_int_equal(got->stage, want->stage);
	assert_int_equal(got->reached, want->reached);
	assert_int_equal(got->from, want->from);
	assert_int_equal(got->to, want->to);
	assert_int_equal(got->revert, want->revert);
	assert_int_equal(got->parent, want->parent);
	assert_int_equal(got->touched, want->touched);
	assert_non_null(got->reason);
	assert_string_equal(got->reason, want->reason ? want->reason : "");
	assert_int_equal(got->started_at, want->started_at);
	assert_int_equal(got->stage_at, want->stage_at);
	assert_int_equal(got->finished_at, want->finished_at);
	assert_int_equal(got->msgs, want->msgs);
	assert_int_equal(got->revert_msgs, want->revert_msgs);
	assert_int_equal(got->bump_msgs, want->bump_msgs);
	if (members) {
		assert_int_equal(got->nmembers, want->nmembers);
		for (size_t i = 0; i < want->nmembers; i++)
			assert_string_equal(got->members[i], want->members[i]);
	} else {
		assert_int_equal(got->nmembers, 0);
	}
}

static void free_runs(struct ro_run *runs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ro_run_release(&runs[i]);
	free(runs);
}

static void test_db_empty(void **state)
{
	struct fixture *f = *state;
	struct ro_run *runs = (struct ro_run *)1;
	size_t n = 99;
	char err[256] = "";
	assert_int_equal(rollout_db_load(f->db, 10, true, &runs, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 0);
	free_runs(runs, n);
	/* released never recorded: 0, and *v untouched */
	uint64_t v = 1234;
	assert_int_equal(rollout_db_released(f->db, &v), 0);
	assert_int_equal(v, 1234);
}

static void test_db_save_load_roundtrip(void **state)
{
	struct fixture *f = *state;
	struct ro_run r;
	run_init(&r, 1, RO_IN_PROGRESS, "", 5);
	save(f, &r, 10);
	struct ro_run *runs;
	size_t n;
	char err[256] = "";
	assert_int_equal(rollout_db_load(f->db, 5, true, &runs, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 1);
	expect_run_equal(&runs[0], &r, true);
	free_runs(runs, n);

	/* the same id again replaces the row: state, counters, reason */
	r.state = RO_ROLLED_BACK;
	r.stage = 2;
	r.reached = 5;
	r.revert = 14;
	r.msgs = 999;
	free(r.reason);
	r.reason = strdup("node-1-3 NACKed version 13: cluster/x: unknown field \"newfield\"\n(line 2)");
	save(f, &r, 14);
	reopen_db(f);   /* durable */
	assert_int_equal(rollout_db_load(f->db, 5, true, &runs, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 1);
	expect_run_equal(&runs[0], &r, true);
	free_runs(runs, n);
	uint64_t v = 0;
	assert_int_equal(rollout_db_released(f->db, &v), 1);
	assert_int_equal(v, 14);
	ro_run_release(&r);
	assert_null(r.members);
	assert_null(r.reason);
	assert_int_equal(r.nmembers, 0);
}

static void test_db_no_members(void **state)
{
	struct fixture *f = *state;
	struct ro_run r;
	run_init(&r, 3, RO_COMPLETED, "done", 0);
	save(f, &r, 0);
	struct ro_run *runs;
	size_t n;
	char err[256] = "";
	assert_int_equal(rollout_db_load(f->db, 1, true, &runs, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 1);
	expect_run_equal(&runs[0], &r, true);
	free_runs(runs, n);
	/* released 0 recorded is not "never recorded" */
	uint64_t v = 99;
	assert_int_equal(rollout_db_released(f->db, &v), 1);
	assert_int_equal(v, 0);
	ro_run_release(&r);
}

static void test_db_history_newest_first(void **state)
{
	struct fixture *f = *state;
	static const enum ro_state st[] = { RO_COMPLETED, RO_ROLLED_BACK, RO_ABORTED, RO_COMPLETED, RO_IN_PROGRESS };
	struct ro_run r[5];
	/* saved out of id order */
	static const int saveorder[] = { 2, 0, 4, 1, 3 };
	for (int i = 0; i < 5; i++)
		run_init(&r[i], (uint64_t)i + 1, st[i], i == 1 ? "timeout" : "", (size_t)(3 + i));
	for (int i = 0; i < 5; i++)
		save(f, &r[saveorder[i]], 1);
	struct ro_run *runs;
	size_t n;
	char err[256] = "";
	/* all, members for the newest only */
	assert_int_equal(rollout_db_load(f->db, 100, true, &runs, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 5);
	for (size_t i = 0; i < n; i++)
		expect_run_equal(&runs[i], &r[4 - i], i == 0);
	free_runs(runs, n);
	/* limit */
	assert_int_equal(rollout_db_load(f->db, 2, false, &runs, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 2);
	expect_run_equal(&runs[0], &r[4], false);
	expect_run_equal(&runs[1], &r[3], false);
	free_runs(runs, n);
	assert_int_equal(rollout_db_load(f->db, 1, true, &runs, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 1);
	expect_run_equal(&runs[0], &r[4], true);
	free_runs(runs, n);
	/* limit 0: nothing */
	assert_int_equal(rollout_db_load(f->db, 0, false, &runs, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 0);
	free_runs(runs, n);
	for (int i = 0; i < 5; i++)
		ro_run_release(&r[i]);
}

static void test_db_released(void **state)
{
	struct fixture *f = *state;
	char err[256] = "";
	uint64_t v = 5;
	assert_int_equal(rollout_db_released(f->db, &v), 0);
	assert_int_equal(rollout_db_set_released(f->db, 0, err, sizeof(err)), 0);
	assert_int_equal(rollout_db_released(f->db, &v), 1);
	assert_int_equal(v, 0);
	assert_int_equal(rollout_db_set_released(f->db, 42, err, sizeof(err)), 0);
	assert_int_equal(rollout_db_released(f->db, &v), 1);
	assert_int_equal(v, 42);
	reopen_db(f);
	v = 0;
	assert_int_equal(rollout_db_released(f->db, &v), 1);
	assert_int_equal(v, 42);
	/* a save carries the released version along */
	struct ro_run r;
	run_init(&r, 1, RO_IN_PROGRESS, "", 2);
	save(f, &r, 43);
	assert_int_equal(rollout_db_released(f->db, &v), 1);
	assert_int_equal(v, 43);
	ro_run_release(&r);
	assert_int_equal(rollout_db_set_released(f->db, 1000000007ULL, err, sizeof(err)), 0);
	assert_int_equal(rollout_db_released(f->db, &v), 1);
	assert_int_equal(v, 1000000007ULL);
}

static void exec_sql(struct fixture *f, const char *sql)
{
	char err[256] = "";
	pthread_mutex_lock(&f->db->lock);
	int rc = db_exec(f->db, sql, err, sizeof(err));
	pthread_mutex_unlock(&f->db->lock);
	if (rc < 0)
		fail_msg("%s: %s", sql, err);
}

static void test_db_bad_rows_refused(void **state)
{
	struct fixture *f = *state;
	struct ro_run r;
	run_init(&r, 1, RO_COMPLETED, "", 4);
	save(f, &r, 3);
	ro_run_release(&r);
	struct ro_run *runs = NULL;
	size_t n = 0;
	char err[256] = "";

	/* state out of range */
	exec_sql(f, "UPDATE rollouts SET state=9 WHERE id=1");
	assert_int_equal(rollout_db_load(f->db, 10, true, &runs, &n, err, sizeof(err)), -1);
	assert_true(err[0] != '\0');
	assert_non_null(strstr(err, "rollout 1"));
	assert_null(runs);
	assert_int_equal(n, 0);
	exec_sql(f, "UPDATE rollouts SET state=0 WHERE id=1");
	err[0] = '\0';
	assert_int_equal(rollout_db_load(f->db, 10, false, &runs, &n, err, sizeof(err)), -1);
	assert_true(err[0] != '\0');

	/* a bad row behind a good newest one is refused too */
	run_init(&r, 2, RO_IN_PROGRESS, "", 4);
	save(f, &r, 3);
	ro_run_release(&r);
	err[0] = '\0';
	assert_int_equal(rollout_db_load(f->db, 10, false, &runs, &n, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "rollout 1"));
	/* ... but not read when the limit stops before it */
	assert_int_equal(rollout_db_load(f->db, 1, true, &runs, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 1);
	assert_int_equal(runs[0].id, 2);
	free_runs(runs, n);

	/* the newest reaching past its members */
	exec_sql(f, "UPDATE rollouts SET state=2 WHERE id=1");
	exec_sql(f, "UPDATE rollouts SET reached=5 WHERE id=2");
	err[0] = '\0';
	assert_int_equal(rollout_db_load(f->db, 10, true, &runs, &n, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "rollout 2"));
	/* without members the reach is not checked */
	assert_int_equal(rollout_db_load(f->db, 10, false, &runs, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 2);
	free_runs(runs, n);
}

static void test_db_state_names(void **state)
{
	(void)state;
	assert_string_equal(ro_state_name(RO_IN_PROGRESS), "in_progress");
	assert_string_equal(ro_state_name(RO_COMPLETED), "completed");
	assert_string_equal(ro_state_name(RO_ROLLED_BACK), "rolled_back");
	assert_string_equal(ro_state_name(RO_ABORTED), "aborted");
	assert_string_equal(ro_state_name((enum ro_state)0), "unknown");
}

int main(void)
{
	log_init("test_rollout", LOG_LVL_WARN);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_stages_accepts),
		cmocka_unit_test(test_parse_stages_refuses),
		cmocka_unit_test(test_parse_stages_refuses_trailing_comma),
		cmocka_unit_test(test_parse_stages_message),
		cmocka_unit_test(test_stage_size),
		cmocka_unit_test(test_order_deterministic),
		cmocka_unit_test(test_order_stratified),
		cmocka_unit_test(test_order_rarest_first),
		cmocka_unit_test(test_order_round_robin_over_label_sets),
		cmocka_unit_test(test_order_no_labels),
		cmocka_unit_test(test_order_one_and_zero),
		cmocka_unit_test(test_order_large_fleet),
		cmocka_unit_test_setup_teardown(test_db_empty, setup, teardown),
		cmocka_unit_test_setup_teardown(test_db_save_load_roundtrip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_db_no_members, setup, teardown),
		cmocka_unit_test_setup_teardown(test_db_history_newest_first, setup, teardown),
		cmocka_unit_test_setup_teardown(test_db_released, setup, teardown),
		cmocka_unit_test_setup_teardown(test_db_bad_rows_refused, setup, teardown),
		cmocka_unit_test(test_db_state_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
