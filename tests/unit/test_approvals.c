/* test_approvals.c: unit tests of plane/core/approvals.c on a real SQLite
 * backend: the hold (a node's target: the newest version K distinct keys
 * approved for its subscription, at most the rollout's, never below what
 * it holds), keys counted once per (version, sub), other subscriptions not
 * counted, nodes without approvals= passed through, the push's member, the
 * log's and GET's JSON, the history floor, and the tokens kept across a
 * reopen. Tokens are opaque here (api/approvals.c verifies them). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "approval.h"
#include "buf.h"
#include "core/approvals.h"
#include "log.h"
#include "persist/persist.h"
#include "tmpdir.h"
#include "util.h"

struct fixture {
	char dir[64];
	struct persist *db;
	struct approvals *a;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char err[256];
	if (!f || test_tmpdir_make(f->dir, sizeof(f->dir), "approvals") < 0)
		return -1;
	f->db = persist_sqlite_open(f->dir, err, sizeof(err));
	if (!f->db)
		return -1;
	f->a = approvals_new(f->db);
	*state = f;
	return approvals_load(f->a, err, sizeof(err)) < 0 ? -1 : 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	approvals_free(f->a);
	persist_close(f->db);
	int rc = test_tmpdir_remove(f->dir);
	free(f);
	return rc;
}

static void add(struct fixture *f, uint64_t v, const char *sub, const char *kid, const char *tok, int want)
{
	char err[256];
	assert_int_equal(approvals_add(f->a, v, sub, kid, tok, err, sizeof(err)), want);
}

static void test_not_held_without_approvals(void **state)
{
	struct fixture *f = *state;
	assert_int_equal(approvals_target(f->a, "plain", UINT64_MAX), UINT64_MAX);
	assert_int_equal(approvals_target(f->a, "plain", 7), 7);
	uint64_t floor = 99;
	assert_false(approvals_floor(f->a, &floor));
	struct buf b = BUF_INIT;
	approvals_push_json(f->a, "plain", 3, &b);
	approvals_node_json(f->a, "plain", &b);
	approvals_log_json(f->a, 3, &b);
	assert_int_equal(b.len, 0);
	buf_release(&b);
}

static void test_hold(void **state)
{
	struct fixture *f = *state;
	approvals_node(f->a, "n1", 2, "cluster/", 3);
	/* nothing approved: held at what it holds */
	assert_int_equal(approvals_target(f->a, "n1", UINT64_MAX), 3);
	/* one key (twice): not enough */
	add(f, 5, "cluster/", "aaaa000000000000", "tokA5", 1);
	add(f, 5, "cluster/", "aaaa000000000000", "tokA5b", 0);
	assert_int_equal(approvals_target(f->a, "n1", UINT64_MAX), 3);
	/* another subscription's approval does not count for n1 */
	add(f, 5, "", "bbbb000000000000", "tokB5all", 1);
	assert_int_equal(approvals_target(f->a, "n1", UINT64_MAX), 3);
	/* a second key for its subscription: 5 */
	add(f, 5, "cluster/", "bbbb000000000000", "tokB5", 1);
	assert_int_equal(approvals_target(f->a, "n1", UINT64_MAX), 5);
	/* at most the rollout's target, never below what it holds */
	assert_int_equal(approvals_target(f->a, "n1", 4), 4);
	assert_int_equal(approvals_target(f->a, "n1", 1), 3);
	/* a newer approved version wins; an older one never takes it back */
	add(f, 8, "cluster/", "aaaa000000000000", "tokA8", 1);
	add(f, 8, "cluster/", "cccc000000000000", "tokC8", 1);
	assert_int_equal(approvals_target(f->a, "n1", UINT64_MAX), 8);
	approvals_sent(f->a, "n1", 8);
	assert_int_equal(approvals_target(f->a, "n1", UINT64_MAX), 8);
	/* the push's member: the tokens of (version, its sub), the newer A5 */
	struct buf b = BUF_INIT;
	approvals_push_json(f->a, "n1", 5, &b);
	assert_string_equal(b.data, "\"approvals\":[\"tokA5b\",\"tokB5\"],");
	buf_reset(&b);
	approvals_push_json(f->a, "n1", 6, &b);
	assert_string_equal(b.data, "\"approvals\":[],");
	buf_reset(&b);
	approvals_node_json(f->a, "n1", &b);
	assert_string_equal(b.data, ",\"approvals\":2,\"approved_version\":8");
	buf_reset(&b);
	approvals_log_json(f->a, 6, &b);
	assert_string_equal(b.data, ",\"approvals\":[],\"approvals_needed\":2");
	buf_reset(&b);
	approvals_version_json(f->a, 8, &b);
	assert_non_null(strstr(b.data, "\"needed\":2,\"last_approved\":5,"));
	assert_non_null(strstr(b.data, "{\"sub\":\"cluster/\",\"kids\":[\"aaaa000000000000\",\"cccc000000000000\"],"
				       "\"tokens\":[\"tokA8\",\"tokC8\"]}"));
	assert_non_null(strstr(b.data, "\"subs\":[\"cluster/\"]"));
	buf_release(&b);
	/* the history kept: from what the node holds, and, while a relay
	 * follows, from the oldest approval kept (its nodes may hold it) */
	uint64_t floor = 0;
	assert_true(approvals_floor(f->a, &floor));
	assert_int_equal(floor, 8);
	approvals_relay_seen(f->a);
	assert_true(approvals_floor(f->a, &floor));
	assert_int_equal(floor, 5);
	/* k = 0 forgets the node: not held any more */
	approvals_node(f->a, "n1", 0, "cluster/", 8);
	assert_int_equal(approvals_target(f->a, "n1", UINT64_MAX), UINT64_MAX);
	assert_true(approvals_floor(f->a, &floor));
	assert_int_equal(floor, 5);
}

/* A node gone (not heard of for a day) holds no history back: one that
 * left while held would pin every state since; heard of again, it does. */
static void test_gone_node_keeps_no_history(void **state)
{
	struct fixture *f = *state;
	uint64_t floor = 0;
	int64_t now = now_ms();
	approvals_node(f->a, "gone", 2, "", 3);
	assert_true(approvals_floor_at(f->a, now, &floor));
	assert_int_equal(floor, 3);
	assert_false(approvals_floor_at(f->a, now + APPROVALS_NODE_GONE_MS + 1000, &floor));
	/* still held, should it come back */
	assert_int_equal(approvals_target(f->a, "gone", UINT64_MAX), 3);
	/* an approval kept holds no history without a relay (nothing else
	 * may be held there) */
	add(f, 5, "", "aaaa000000000000", "tokA5", 1);
	assert_false(approvals_floor_at(f->a, now + APPROVALS_NODE_GONE_MS + 1000, &floor));
	/* a heartbeat (approvals_seen) or a push keeps a node there */
	approvals_seen(f->a, "gone");
	assert_true(approvals_floor_at(f->a, now_ms() + APPROVALS_NODE_GONE_MS - 1000, &floor));
	assert_int_equal(floor, 3);
	/* a relay following, then gone too */
	approvals_sent(f->a, "gone", 6);
	assert_true(approvals_floor_at(f->a, now_ms(), &floor));
	assert_int_equal(floor, 6);
	approvals_relay_seen(f->a);
	assert_true(approvals_floor_at(f->a, now_ms(), &floor));
	assert_int_equal(floor, 5);
	assert_false(approvals_floor_at(f->a, now_ms() + APPROVALS_NODE_GONE_MS + 1000, &floor));
}

static void test_many_nodes(void **state)
{
	struct fixture *f = *state;
	char name[16];
	for (int i = 0; i < 50; i++) {
		snprintf(name, sizeof(name), "n%d", i);
		approvals_node(f->a, name, 1, "", (uint64_t)i + 1);
	}
	uint64_t floor = 0;
	assert_true(approvals_floor(f->a, &floor));
	assert_int_equal(floor, 1);
	for (int i = 0; i < 50; i += 2) {
		snprintf(name, sizeof(name), "n%d", i);
		approvals_node(f->a, name, 0, "", 0);
	}
	assert_true(approvals_floor(f->a, &floor));
	assert_int_equal(floor, 2);
	add(f, 30, "", "aaaa000000000000", "t30", 1);
	for (int i = 1; i < 50; i += 2) {
		snprintf(name, sizeof(name), "n%d", i);
		assert_int_equal(approvals_target(f->a, name, UINT64_MAX), i + 1 > 30 ? (uint64_t)i + 1 : 30);
	}
}

static void test_kept_across_reopen(void **state)
{
	struct fixture *f = *state;
	char err[256];
	add(f, 4, "route/", "aaaa000000000000", "t4a", 1);
	add(f, 4, "route/", "bbbb000000000000", "t4b", 1);
	approvals_free(f->a);
	persist_close(f->db);
	f->db = persist_sqlite_open(f->dir, err, sizeof(err));
	assert_non_null(f->db);
	f->a = approvals_new(f->db);
	assert_int_equal(approvals_load(f->a, err, sizeof(err)), 2);
	assert_int_equal(approvals_load(f->a, err, sizeof(err)), 0);   /* nothing new the second time */
	approvals_node(f->a, "r1", 2, "route/", 1);
	assert_int_equal(approvals_target(f->a, "r1", UINT64_MAX), 4);
}

/* A relay: the upstream's set replaces its own; the generation moves on
 * every change (and not on a repeat of the same token). */
static void test_replace_and_gen(void **state)
{
	struct fixture *f = *state;
	uint64_t g0 = approvals_gen(f->a);
	add(f, 3, "", "aaaa000000000000", "t3", 1);
	uint64_t g1 = approvals_gen(f->a);
	assert_true(g1 > g0);
	add(f, 3, "", "aaaa000000000000", "t3", 0);
	assert_int_equal(approvals_gen(f->a), g1);
	struct buf b = BUF_INIT;
	approvals_all_json(f->a, &b);
	assert_string_equal(b.data, "{\"approvals\":[{\"version\":3,\"sub\":\"\",\"kid\":\"aaaa000000000000\","
				    "\"token\":\"t3\"}]}");
	buf_release(&b);
	struct persist_approval up[] = {
		{ 9, "", "bbbb000000000000", "u9b" }, { 7, "", "aaaa000000000000", "u7a" },
		{ 9, "", "aaaa000000000000", "u9a" },
	};
	approvals_replace(f->a, up, 3);
	assert_true(approvals_gen(f->a) > g1);
	approvals_node(f->a, "n", 2, "", 1);
	assert_int_equal(approvals_target(f->a, "n", UINT64_MAX), 9);
	buf_init(&b);
	approvals_push_json(f->a, "n", 3, &b);
	assert_string_equal(b.data, "\"approvals\":[],");   /* version 3's went with the replace */
	buf_release(&b);
	approvals_replace(f->a, NULL, 0);
	assert_int_equal(approvals_target(f->a, "n", UINT64_MAX), 1);
}

/* A (version, sub) keeps at most APPROVALS_MAX keys (a push carries them
 * all; a node takes no more): the next is refused, naming the bound, and
 * nothing is kept of it; a key already kept may still be replaced, and
 * another subscription has its own room. */
static void test_bounded(void **state)
{
	struct fixture *f = *state;
	char kid[17], tok[32], err[256] = "";
	for (int i = 0; i < APPROVALS_MAX; i++) {
		snprintf(kid, sizeof(kid), "%016x", i);
		snprintf(tok, sizeof(tok), "tok%d", i);
		add(f, 4, "", kid, tok, 1);
	}
	assert_int_equal(approvals_add(f->a, 4, "", "00000000000000ff", "tokff", err, sizeof(err)), -2);
	assert_non_null(strstr(err, "already has 32 approvals"));
	add(f, 4, "", "0000000000000000", "tok0-again", 0);
	add(f, 4, "a/", "00000000000000ff", "tokff", 1);
	struct buf b = BUF_INIT;
	approvals_version_json(f->a, 4, &b);
	/* the refused key shows only under "a/" */
	const char *ff = strstr(b.data, "00000000000000ff"), *sa = strstr(b.data, "\"sub\":\"a/\"");
	assert_non_null(ff);
	assert_non_null(sa);
	assert_true(ff > sa);
	assert_int_equal(approvals_load(f->a, err, sizeof(err)), 0);   /* nothing more in the backend */
	buf_release(&b);
}

static void test_trim(void **state)
{
	struct fixture *f = *state;
	char err[256];
	add(f, 2, "", "aaaa000000000000", "t2", 1);
	add(f, 3, "", "aaaa000000000000", "t3", 1);
	add(f, 9, "", "aaaa000000000000", "t9", 1);
	add(f, 4, "route/", "aaaa000000000000", "r4", 1);
	/* below the log's floor (5), but route/'s newest (4) stays: 2 and 3 go */
	assert_int_equal(approvals_trim(f->a, 5, err, sizeof(err)), 2);
	assert_int_equal(approvals_trim(f->a, 5, err, sizeof(err)), 0);
	approvals_node(f->a, "r", 1, "route/", 1);
	assert_int_equal(approvals_target(f->a, "r", UINT64_MAX), 4);
	struct buf b = BUF_INIT;
	approvals_log_json(f->a, 3, &b);
	assert_string_equal(b.data, ",\"approvals\":[],\"approvals_needed\":1");
	buf_release(&b);
	/* gone from the backend too */
	approvals_free(f->a);
	persist_close(f->db);
	f->db = persist_sqlite_open(f->dir, err, sizeof(err));
	assert_non_null(f->db);
	f->a = approvals_new(f->db);
	assert_int_equal(approvals_load(f->a, err, sizeof(err)), 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_not_held_without_approvals, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hold, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_nodes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kept_across_reopen, setup, teardown),
		cmocka_unit_test_setup_teardown(test_trim, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bounded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gone_node_keeps_no_history, setup, teardown),
		cmocka_unit_test_setup_teardown(test_replace_and_gen, setup, teardown),
	};
	log_init("test_approvals", LOG_LVL_WARN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
