/* test_relay_state.c: unit tests of what a relay stream carries: the state
 * event written from a real store (plane/core/relay_feed.c: history included,
 * ascending, snapshots with tombstones) and read back, what the reader
 * refuses (with a reason), the overridden versions it carries, and the records of plane/persist/records_json.c (a
 * rollout, a node with its via column and verification failures, a token)
 * going to JSON and back unchanged. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "persist/sqlite/sqlite.h"
#include "persist/records_json.h"
#include "core/overrides.h"
#include "core/relay_feed.h"
#include "persist/relay/state.h"
#include "persist/rollout_rec.h"
#include "core/store.h"
#include "tmpdir.h"
#include "xmalloc.h"

struct fixture {
	char dir[64];
	struct persist *db;
	struct store *s;
};

static int setup(void **state)
{
	struct fixture *f = xcalloc(1, sizeof(*f));
	char err[256];
	if (test_tmpdir_make(f->dir, sizeof(f->dir), "relay_state") < 0)
		return -1;
	f->db = persist_sqlite_open(f->dir, err, sizeof(err));
	struct store_opts o = { .tombstone_keep = 100, .tombstone_max_age = 0, .max_resources = 1000 };
	f->s = f->db ? store_open(f->db, &o, err, sizeof(err)) : NULL;
	if (!f->s)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	store_free(f->s);
	persist_close(f->db);
	test_tmpdir_remove(f->dir);
	free(f);
	return 0;
}

/* One version: an upsert of name with a file body holding content, or
 * (content NULL) its removal. */
static void commit(struct store *s, const char *name, const char *content)
{
	struct store_change c = { .name = name };
	if (content)
		c.body = xasprintf("{\"content\":\"%s\",\"path\":\"%s.txt\"}", content, name + 5);
	if (c.body)
		c.body_len = strlen(c.body);
	uint64_t v;
	bool changed;
	char err[256];
	store_write_lock(s);
	int rc = store_commit(s, &c, 1, &v, &changed, err, sizeof(err));
	store_write_unlock(s);
	assert_int_equal(rc, 0);
	assert_true(changed);
}

static void decode_ok(const struct buf *b, struct relay_state *rs)
{
	char err[256] = "";
	struct buf closed = BUF_INIT;
	buf_append(&closed, b->data, b->len);
	buf_putc(&closed, '}');
	int rc = relay_state_decode(closed.data, closed.len, rs, err, sizeof(err));
	if (rc < 0)
		fail_msg("decode: %s", err);
	buf_release(&closed);
}

static void test_history_in_order(void **state)
{
	struct fixture *f = *state;
	commit(f->s, "file/a", "a1");          /* 1 */
	store_write_lock(f->s);
	char err[128];
	assert_int_equal(store_set_pin(f->s, true, 1, err, sizeof(err)), 0);   /* a rollout's baseline */
	store_write_unlock(f->s);
	commit(f->s, "file/b", "b1");          /* 2 */
	commit(f->s, "file/a", "a2");          /* 3 */
	commit(f->s, "file/b", NULL);          /* 4 */

	struct buf b = BUF_INIT;
	uint64_t to;
	bool full;
	relay_feed_encode(f->s, 0, 2, &b, &to, &full);
	assert_int_equal(to, 4);
	assert_true(full);
	struct relay_state rs;
	decode_ok(&b, &rs);
	assert_int_equal(rs.version, 4);
	assert_int_equal(rs.released, 2);
	assert_true(rs.full);
	/* every state, history included, oldest first: a1@1 b1@2 a2@3 b-@4 */
	assert_int_equal(rs.n, 4);
	const char *names[] = { "file/a", "file/b", "file/a", "file/b" };
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(rs.ch[i].version, i + 1);
		assert_string_equal(rs.ch[i].name, names[i]);
	}
	assert_string_equal(rs.ch[0].body, "{\"content\":\"a1\",\"path\":\"a.txt\"}");
	assert_null(rs.ch[3].body);
	relay_state_release(&rs);

	/* a delta from 3: only what came after */
	buf_reset(&b);
	relay_feed_encode(f->s, 3, 0, &b, &to, &full);
	assert_false(full);
	decode_ok(&b, &rs);
	assert_int_equal(rs.n, 1);
	assert_string_equal(rs.ch[0].name, "file/b");
	assert_int_equal(rs.ch[0].version, 4);
	assert_int_equal(rs.released, 0);   /* nothing released yet is 0, not the newest */
	relay_state_release(&rs);

	/* up to date: no change, still a state (the relay knows it is there) */
	buf_reset(&b);
	relay_feed_encode(f->s, 4, 0, &b, &to, &full);
	decode_ok(&b, &rs);
	assert_int_equal(rs.n, 0);
	assert_int_equal(rs.version, 4);
	relay_state_release(&rs);
	buf_release(&b);
}

static void test_refusals(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"[]",
		"{\"version\":\"2\"}",
		"{\"version\":\"0\",\"changes\":[{\"name\":\"file/a\",\"version\":\"1\",\"body\":{}}]}",
		"{\"version\":\"2\",\"changes\":[{\"name\":\"file/a\",\"version\":\"3\",\"body\":{}}]}",
		"{\"version\":\"2\",\"changes\":[{\"name\":\"file/../x\",\"version\":\"1\",\"body\":{}}]}",
		"{\"version\":\"2\",\"changes\":[{\"name\":\"nope/a\",\"version\":\"1\",\"body\":{}}]}",
		"{\"version\":\"2\",\"changes\":[{\"name\":\"file/a\",\"version\":\"1\",\"body\":[1]}]}",
		"{\"version\":\"2\",\"changes\":[{\"name\":\"file/a\",\"version\":\"1\",\"body\":{}},"
		"{\"name\":\"file/a\",\"version\":\"1\"}]}",
		"{\"version\":\"2\",\"horizon\":\"3\",\"changes\":[]}",
		"{\"version\":\"2\",\"changes\":[],\"changes\":[]}",
		"{\"version\":\"2\",\"changes\":[],\"overridden\":\"2\"}",
		"{\"version\":\"2\",\"changes\":[],\"overridden\":[2]}",
		"{\"version\":\"2\",\"changes\":[],\"overridden\":[\"3\"]}",
		"{\"version\":\"2\",\"changes\":[],\"overridden\":[\"0\"]}",
		"{\"version\":\"2\",\"changes\":[],\"overridden\":[\"1\",\"2\",\"2\"]}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct relay_state rs;
		char err[256] = "";
		assert_int_equal(relay_state_decode(bad[i], strlen(bad[i]), &rs, err, sizeof(err)), -1);
		assert_true(err[0] != '\0');
		assert_null(rs.ch);
	}
}

/* The overridden versions a state brings (core/overrides.c writes them,
 * the relay reads them): those in (base, version] only; a mark taken back
 * leaves the others of its version. */
static void test_overridden(void **state)
{
	(void)state;
	struct overrides *o = overrides_new();
	overrides_note(o, 3);
	overrides_note(o, 9);
	overrides_note(o, 5);
	overrides_note(o, 12);
	struct buf b = BUF_INIT;
	buf_puts(&b, "{\"version\":\"9\",\"base\":\"3\",\"changes\":[]");
	overrides_relay_member(o, 3, 9, &b);
	buf_putc(&b, '}');
	assert_string_equal(b.data, "{\"version\":\"9\",\"base\":\"3\",\"changes\":[],\"overridden\":[\"5\",\"9\"]}");
	struct relay_state rs;
	char err[256] = "";
	assert_int_equal(relay_state_decode(b.data, b.len, &rs, err, sizeof(err)), 0);
	assert_int_equal(rs.noverridden, 2);
	assert_int_equal(rs.overridden[0], 5);
	assert_int_equal(rs.overridden[1], 9);
	relay_state_release(&rs);
	/* none in the range: no member at all (an older relay's form) */
	buf_reset(&b);
	overrides_relay_member(o, 5, 8, &b);
	assert_int_equal(b.len, 0);
	buf_release(&b);
	/* a writer's tentative mark taken back leaves another's of the same
	 * version (an etcd replica's override seen meanwhile) */
	overrides_note(o, 13);
	overrides_note(o, 13);
	overrides_forget(o, 13);
	assert_int_equal(overrides_at(o, 13), 13);
	overrides_forget(o, 13);
	assert_int_equal(overrides_at(o, 13), 12);
	assert_int_equal(overrides_at(o, 11), 9);
	overrides_free(o);
}

static void test_records_round_trip(void **state)
{
	(void)state;
	char *members[] = { "n1", "n2", "n3" };
	struct ro_run run = {
		.id = 7, .state = RO_IN_PROGRESS, .stage = 1, .reached = 2, .from = 41, .to = 42, .touched = 2,
		.reason = "", .members = members, .nmembers = 3, .started_at = 1796170350123, .msgs = 2,
	};
	cJSON *o = record_run_to_json(&run);
	struct ro_run back;
	assert_int_equal(record_run_from_json(o, true, &back), 0);
	assert_int_equal(back.id, 7);
	assert_int_equal(back.reached, 2);
	assert_int_equal(back.to, 42);
	assert_int_equal(back.nmembers, 3);
	assert_string_equal(back.members[2], "n3");
	assert_int_equal(back.started_at, 1796170350123);
	ro_run_release(&back);
	cJSON_Delete(o);

	struct persist_node n = {
		.id = "web-1", .labels = "{\"zone\":\"a\"}", .transport = "sse", .acked_version = 9, .healthy = 1,
		.has_nack = true, .nack_version = 10, .nack_error = "cluster/c: bad", .streaming = true,
		.via = "r2,r3", .verify_failures = 2, .vf_version = 11, .vf_error = "state digest mismatch",
		.traffic = "{\"version\":10,\"routes\":[]}",
	};
	o = record_node_to_json(&n);
	struct persist_node nb;
	assert_int_equal(record_node_from_json(o, &nb), 0);
	assert_string_equal(nb.id, "web-1");
	assert_string_equal(nb.via, "r2,r3");
	assert_int_equal(nb.healthy, 1);
	assert_true(nb.has_nack);
	assert_string_equal(nb.nack_error, "cluster/c: bad");
	assert_int_equal(nb.verify_failures, 2);
	assert_string_equal(nb.vf_error, "state digest mismatch");
	assert_true(nb.streaming);
	assert_string_equal(nb.traffic, "{\"version\":10,\"routes\":[]}");
	cJSON_Delete(o);
	n.traffic = NULL;   /* no new report: no member, and none read back */
	o = record_node_to_json(&n);
	assert_null(cJSON_GetObjectItem(o, "traffic"));
	assert_int_equal(record_node_from_json(o, &nb), 0);
	assert_null(nb.traffic);
	assert_int_equal(nb.counts, 0);   /* not said: nothing written, nothing read */
	assert_null(cJSON_GetObjectItem(o, "counts"));
	cJSON_Delete(o);
	/* whether it counts its traffic: the controller's gates name why not */
	n.counts = -1;
	n.counts_reason = "started with --traffic-listen off";
	o = record_node_to_json(&n);
	assert_int_equal(record_node_from_json(o, &nb), 0);
	assert_int_equal(nb.counts, -1);
	assert_string_equal(nb.counts_reason, "started with --traffic-listen off");
	cJSON_Delete(o);
	n.counts = 1;
	o = record_node_to_json(&n);
	assert_null(cJSON_GetObjectItem(o, "counts_reason"));
	assert_int_equal(record_node_from_json(o, &nb), 0);
	assert_int_equal(nb.counts, 1);
	assert_null(nb.counts_reason);
	cJSON_Delete(o);

	struct persist_token t = { .id = "5f0c2a9b1e77", .hash = "ab", .role = "relay", .node = "", .name = "edge",
				   .created = 5, .revoked = 0 };
	o = record_token_to_json(&t);
	struct persist_token tb;
	assert_int_equal(record_token_from_json(o, &tb), 0);
	assert_string_equal(tb.role, "relay");
	assert_string_equal(tb.name, "edge");
	cJSON_Delete(o);

	/* what lacks its id is refused */
	o = cJSON_Parse("{\"labels\":\"{}\"}");
	assert_int_equal(record_node_from_json(o, &nb), -1);
	assert_int_equal(record_token_from_json(o, &tb), -1);
	assert_int_equal(record_run_from_json(o, true, &back), -1);
	cJSON_Delete(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_history_in_order, setup, teardown),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_overridden),
		cmocka_unit_test(test_records_round_trip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
