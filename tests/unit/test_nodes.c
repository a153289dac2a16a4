/* test_nodes.c: unit tests of plane/core/nodes.c: nonce-matched ACK and NACK
 * handling, poll nonces, the registry limit, and write-behind persistence. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>

#include "buf.h"
#include "persist/persist.h"
#include "log.h"
#include "core/nodes.h"
#include "keys.h"
#include "tmpdir.h"
#include "util.h"

struct fixture {
	char dir[64];
	struct persist *db;
	struct nodes *n;
};

static int open_nodes(struct fixture *f)
{
	char err[256];
	f->db = persist_sqlite_open(f->dir, err, sizeof(err));
	if (!f->db)
		return -1;
	f->n = nodes_open(f->db, 3, 60000, err, sizeof(err));
	return f->n ? 0 : -1;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	if (test_tmpdir_make(f->dir, sizeof(f->dir), "nodes") < 0) {
		free(f);
		return -1;
	}
	*state = f;
	return open_nodes(f);
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	nodes_free(f->n);
	persist_close(f->db);
	int rc = test_tmpdir_remove(f->dir);
	free(f);
	return rc;
}

/* One node's record, parsed. */
static cJSON *record(struct fixture *f, const char *id, uint64_t plane_version)
{
	struct buf b = BUF_INIT;
	assert_int_equal(nodes_one_to_json(f->n, id, plane_version, &b), 0);
	cJSON *v = cJSON_Parse(b.data);
	if (!v)
		fail_msg("record does not parse: %s", b.data);
	buf_release(&b);
	return v;
}

static double num(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	if (!cJSON_IsNumber(v)) {
		fail_msg("'%s' is not a number", key);
		return -1;
	}
	return v->valuedouble;
}

static const char *str(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	if (!cJSON_IsString(v)) {
		fail_msg("'%s' is not a string", key);
		return "";
	}
	return v->valuestring;
}

static uint64_t acked(struct fixture *f, const char *id)
{
	cJSON *r = record(f, id, 100);
	uint64_t v = (uint64_t)num(r, "acked_version");
	cJSON_Delete(r);
	return v;
}

static enum ack_result ack(struct fixture *f, const char *id, uint64_t version, const char *nonce, bool nack,
			   const char *error, uint64_t plane_version)
{
	struct ack_msg m = { id, version, nonce, nack, error, -1, false, false };
	enum ack_result res = (enum ack_result)-1;
	assert_int_equal(nodes_ack(f->n, &m, plane_version, &res), 0);
	return res;
}

static void test_ack_latest_nonce_moves_acked(void **state)
{
	struct fixture *f = *state;
	assert_int_equal(nodes_seen(f->n, "n1", "{\"env\":\"prod\"}", "sse"), 0);
	assert_int_equal(acked(f, "n1"), 0);
	nodes_sent(f->n, "n1", 5, "b.1");
	assert_int_equal(ack(f, "n1", 5, "b.1", false, NULL, 7), ACK_ACCEPTED);
	cJSON *r = record(f, "n1", 7);
	assert_int_equal(num(r, "acked_version"), 5);
	assert_int_equal(num(r, "lag"), 2);
	assert_int_equal(num(r, "acks"), 1);
	assert_int_equal(num(r, "stale_acks"), 0);
	assert_string_equal(str(r, "sent_nonce"), "b.1");
	assert_int_equal(num(r, "sent_version"), 5);
	assert_string_equal(str(r, "node"), "n1");
	assert_string_equal(str(r, "transport"), "sse");
	assert_string_equal(str(cJSON_GetObjectItemCaseSensitive(r, "labels"), "env"), "prod");
	assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(r, "last_nack")));
	assert_true(num(r, "acked_at") >= (double)(wall_seconds() - 60));
	cJSON_Delete(r);
	struct nodes_stats st;
	nodes_stats(f->n, &st);
	assert_int_equal(st.nodes, 1);
	assert_int_equal(st.acks, 1);
	assert_int_equal(st.nacks, 0);
	assert_int_equal(st.stale, 0);
}

static void test_older_nonce_is_stale(void **state)
{
	struct fixture *f = *state;
	nodes_seen(f->n, "n1", NULL, "sse");
	nodes_sent(f->n, "n1", 5, "b.1");
	nodes_sent(f->n, "n1", 6, "b.2");
	/* the ACK of the older push arrives late */
	assert_int_equal(ack(f, "n1", 5, "b.1", false, NULL, 6), ACK_STALE);
	assert_int_equal(acked(f, "n1"), 0);
	assert_int_equal(ack(f, "n1", 6, "b.2", false, NULL, 6), ACK_ACCEPTED);
	assert_int_equal(acked(f, "n1"), 6);
	/* a replay of the old one never moves it back */
	assert_int_equal(ack(f, "n1", 5, "b.1", false, NULL, 6), ACK_STALE);
	assert_int_equal(ack(f, "n1", 9, "made-up", false, NULL, 9), ACK_STALE);
	assert_int_equal(ack(f, "n1", 6, "", false, NULL, 6), ACK_STALE);
	assert_int_equal(acked(f, "n1"), 6);
	cJSON *r = record(f, "n1", 6);
	assert_int_equal(num(r, "stale_acks"), 4);
	assert_int_equal(num(r, "acks"), 1);
	cJSON_Delete(r);
	struct nodes_stats st;
	nodes_stats(f->n, &st);
	assert_int_equal(st.stale, 4);
}

static void test_nothing_sent_yet_is_stale(void **state)
{
	struct fixture *f = *state;
	nodes_seen(f->n, "n1", NULL, "sse");
	/* no push was sent: an empty nonce must not match the empty record */
	assert_int_equal(ack(f, "n1", 0, "", false, NULL, 3), ACK_STALE);
	assert_int_equal(ack(f, "n1", 3, "b.1", false, NULL, 3), ACK_STALE);
	assert_int_equal(acked(f, "n1"), 0);
}

static void test_right_nonce_wrong_version_mismatch(void **state)
{
	struct fixture *f = *state;
	nodes_seen(f->n, "n1", NULL, "sse");
	nodes_sent(f->n, "n1", 7, "b.3");
	assert_int_equal(ack(f, "n1", 8, "b.3", false, NULL, 8), ACK_MISMATCH);
	assert_int_equal(ack(f, "n1", 6, "b.3", false, NULL, 8), ACK_MISMATCH);
	assert_int_equal(ack(f, "n1", 6, "b.3", true, "x", 8), ACK_MISMATCH);
	cJSON *r = record(f, "n1", 8);
	assert_int_equal(num(r, "acked_version"), 0);
	assert_int_equal(num(r, "acks"), 0);
	assert_int_equal(num(r, "nacks"), 0);
	assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(r, "last_nack")));
	cJSON_Delete(r);
}

static void test_nack_records_last_nack(void **state)
{
	struct fixture *f = *state;
	nodes_seen(f->n, "n1", NULL, "sse");
	nodes_sent(f->n, "n1", 3, "b.1");
	assert_int_equal(ack(f, "n1", 3, "b.1", false, NULL, 3), ACK_ACCEPTED);
	nodes_sent(f->n, "n1", 4, "b.2");
	const char *why = "nginx -t: \"upstream\" directive is not allowed here\nin /x.conf:3";
	assert_int_equal(ack(f, "n1", 4, "b.2", true, why, 4), ACK_ACCEPTED);
	cJSON *r = record(f, "n1", 4);
	assert_int_equal(num(r, "acked_version"), 3);   /* a NACK does not move it */
	assert_int_equal(num(r, "lag"), 1);
	assert_int_equal(num(r, "nacks"), 1);
	const cJSON *nack = cJSON_GetObjectItemCaseSensitive(r, "last_nack");
	assert_true(cJSON_IsObject(nack));
	assert_int_equal(num(nack, "version"), 4);
	assert_string_equal(str(nack, "nonce"), "b.2");
	assert_string_equal(str(nack, "error"), why);
	assert_true(num(nack, "time") >= (double)(wall_seconds() - 60));
	cJSON_Delete(r);

	/* a stale NACK is not recorded */
	assert_int_equal(ack(f, "n1", 3, "b.1", true, "old news", 4), ACK_STALE);
	r = record(f, "n1", 4);
	assert_string_equal(str(cJSON_GetObjectItemCaseSensitive(r, "last_nack"), "error"), why);
	assert_int_equal(num(r, "nacks"), 1);
	cJSON_Delete(r);

	/* an over-long reason is cut, and a NULL one is empty */
	char *huge = malloc(NODE_ERROR_MAX + 100);
	assert_non_null(huge);
	memset(huge, 'e', NODE_ERROR_MAX + 99);
	huge[NODE_ERROR_MAX + 99] = '\0';
	nodes_sent(f->n, "n1", 5, "b.3");
	assert_int_equal(ack(f, "n1", 5, "b.3", true, huge, 5), ACK_ACCEPTED);
	r = record(f, "n1", 5);
	assert_int_equal(strlen(str(cJSON_GetObjectItemCaseSensitive(r, "last_nack"), "error")), NODE_ERROR_MAX);
	cJSON_Delete(r);
	free(huge);
	nodes_sent(f->n, "n1", 6, "b.4");
	assert_int_equal(ack(f, "n1", 6, "b.4", true, NULL, 6), ACK_ACCEPTED);
	r = record(f, "n1", 6);
	assert_string_equal(str(cJSON_GetObjectItemCaseSensitive(r, "last_nack"), "error"), "");
	cJSON_Delete(r);
}

static void test_health_recorded(void **state)
{
	struct fixture *f = *state;
	nodes_seen(f->n, "n1", NULL, "sse");
	cJSON *r = record(f, "n1", 1);
	assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(r, "healthy")));
	cJSON_Delete(r);
	nodes_sent(f->n, "n1", 1, "b.1");
	struct ack_msg m = { "n1", 1, "b.1", false, NULL, 0, false, false };
	enum ack_result res;
	assert_int_equal(nodes_ack(f->n, &m, 1, &res), 0);
	assert_int_equal(res, ACK_ACCEPTED);
	r = record(f, "n1", 1);
	assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(r, "healthy")));
	cJSON_Delete(r);
}

static void test_poll_nonce(void **state)
{
	struct fixture *f = *state;
	char nonce[NONCE_MAX];
	nodes_poll_nonce(nonce, sizeof(nonce), 7, 3);
	assert_string_equal(nonce, "p7-3");
	nodes_poll_nonce(nonce, sizeof(nonce), 12345678901234ULL, 0);
	assert_string_equal(nonce, "p12345678901234-0");

	nodes_seen(f->n, "n1", NULL, "poll");
	nodes_sent(f->n, "n1", 5, "p5-0");
	/* a cache served p7-3 without asking the plane: accepted */
	assert_int_equal(ack(f, "n1", 7, "p7-3", false, NULL, 7), ACK_ACCEPTED);
	cJSON *r = record(f, "n1", 7);
	assert_int_equal(num(r, "acked_version"), 7);
	assert_int_equal(num(r, "sent_version"), 7);
	assert_string_equal(str(r, "sent_nonce"), "p7-3");
	cJSON_Delete(r);
	/* not newer than what was sent */
	assert_int_equal(ack(f, "n1", 6, "p6-5", false, NULL, 9), ACK_STALE);
	assert_int_equal(ack(f, "n1", 7, "p7-0", false, NULL, 9), ACK_STALE);
	/* beyond the plane's version */
	assert_int_equal(ack(f, "n1", 10, "p10-7", false, NULL, 9), ACK_STALE);
	/* a nonce whose version is not the ACK's version */
	assert_int_equal(ack(f, "n1", 8, "p9-7", false, NULL, 9), ACK_STALE);
	/* malformed poll nonces */
	assert_int_equal(ack(f, "n1", 8, "p8", false, NULL, 9), ACK_STALE);
	assert_int_equal(ack(f, "n1", 8, "p8-", false, NULL, 9), ACK_STALE);
	assert_int_equal(ack(f, "n1", 8, "p8-7x", false, NULL, 9), ACK_STALE);
	assert_int_equal(ack(f, "n1", 8, "p08-7", false, NULL, 9), ACK_STALE);
	assert_int_equal(ack(f, "n1", 8, "q8-7", false, NULL, 9), ACK_STALE);
	assert_int_equal(acked(f, "n1"), 7);
	/* a newer poll NACK is recorded too */
	assert_int_equal(ack(f, "n1", 9, "p9-7", true, "bad", 9), ACK_ACCEPTED);
	r = record(f, "n1", 9);
	assert_int_equal(num(r, "acked_version"), 7);
	assert_int_equal(num(cJSON_GetObjectItemCaseSensitive(r, "last_nack"), "version"), 9);
	cJSON_Delete(r);
}

static void test_unknown_node(void **state)
{
	struct fixture *f = *state;
	struct ack_msg m = { "ghost", 1, "b.1", false, NULL, -1, false, false };
	enum ack_result res = ACK_ACCEPTED;
	assert_int_equal(nodes_ack(f->n, &m, 1, &res), -1);
	struct buf b = BUF_INIT;
	assert_int_equal(nodes_one_to_json(f->n, "ghost", 1, &b), -1);
	assert_int_equal(b.len, 0);
	buf_release(&b);
	/* sent and stream calls for an unknown node create nothing */
	nodes_sent(f->n, "ghost", 1, "b.1");
	nodes_stream_open(f->n, "ghost");
	struct nodes_stats st;
	nodes_stats(f->n, &st);
	assert_int_equal(st.nodes, 0);
}

static void test_registry_full(void **state)
{
	struct fixture *f = *state;
	assert_int_equal(nodes_seen(f->n, "a", NULL, "sse"), 0);
	assert_int_equal(nodes_seen(f->n, "b", NULL, "sse"), 0);
	assert_int_equal(nodes_seen(f->n, "c", NULL, "poll"), 0);
	assert_int_equal(nodes_seen(f->n, "d", NULL, "sse"), -1);
	/* known nodes are still welcome */
	assert_int_equal(nodes_seen(f->n, "a", "{\"k\":\"v\"}", "sse"), 0);
	struct nodes_stats st;
	nodes_stats(f->n, &st);
	assert_int_equal(st.nodes, 3);
	struct buf b = BUF_INIT;
	assert_int_equal(nodes_one_to_json(f->n, "d", 1, &b), -1);
	buf_release(&b);
}

static void test_id_valid(void **state)
{
	(void)state;
	assert_true(nodes_id_valid("web-01.eu_west"));
	assert_false(nodes_id_valid(NULL));
	assert_false(nodes_id_valid(""));
	assert_false(nodes_id_valid("a b"));
	assert_false(nodes_id_valid("a/b"));
	assert_false(nodes_id_valid(".."));
	assert_false(nodes_id_valid("a\"b"));
}

static void test_list_sorted_and_connected(void **state)
{
	struct fixture *f = *state;
	nodes_seen(f->n, "c", NULL, "sse");
	nodes_seen(f->n, "a", "{\"role\":\"edge\"}", "sse");
	nodes_seen(f->n, "b", NULL, "poll");
	nodes_stream_open(f->n, "c");
	struct buf b = BUF_INIT;
	nodes_to_json(f->n, 4, &b);
	cJSON *v = cJSON_Parse(b.data);
	assert_non_null(v);
	assert_int_equal(cJSON_GetArraySize(v), 3);
	assert_string_equal(str(cJSON_GetArrayItem(v, 0), "node"), "a");
	assert_string_equal(str(cJSON_GetArrayItem(v, 1), "node"), "b");
	assert_string_equal(str(cJSON_GetArrayItem(v, 2), "node"), "c");
	assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(v, 0), "connected")));
	assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(v, 1), "connected")));  /* polled just now */
	assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(v, 2), "connected")));
	assert_int_equal(num(cJSON_GetArrayItem(v, 0), "lag"), 4);
	assert_string_equal(str(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(v, 0), "labels"), "role"), "edge");
	cJSON_Delete(v);
	struct nodes_stats st;
	nodes_stats(f->n, &st);
	assert_int_equal(st.connected, 2);
	nodes_stream_close(f->n, "c");
	nodes_stream_close(f->n, "c");   /* one too many: no underflow */
	nodes_stats(f->n, &st);
	assert_int_equal(st.connected, 1);
	nodes_stream_open(f->n, "c");
	nodes_stats(f->n, &st);
	assert_int_equal(st.connected, 2);

	buf_reset(&b);
	nodes_metrics(f->n, 4, &b);
	assert_non_null(strstr(b.data, "tether_node_lag{node=\"a\"} 4\n"));
	assert_non_null(strstr(b.data, "tether_node_acked_version{node=\"b\"} 0\n"));
	buf_release(&b);
}

static void test_labels_kept_when_null(void **state)
{
	struct fixture *f = *state;
	nodes_seen(f->n, "a", "{\"role\":\"edge\"}", "sse");
	nodes_seen(f->n, "a", NULL, NULL);
	cJSON *r = record(f, "a", 0);
	assert_string_equal(str(cJSON_GetObjectItemCaseSensitive(r, "labels"), "role"), "edge");
	assert_string_equal(str(r, "transport"), "sse");
	cJSON_Delete(r);
	nodes_seen(f->n, "a", "{}", "poll");
	r = record(f, "a", 0);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r, "labels")), 0);
	assert_string_equal(str(r, "transport"), "poll");
	cJSON_Delete(r);
}

/* The subscription of a node's last stream or poll: null until one,
 * then the canonical text ("" for every name), replaced by the next. */
static void test_sub_recorded(void **state)
{
	struct fixture *f = *state;
	nodes_seen(f->n, "a", NULL, "sse");
	cJSON *r = record(f, "a", 0);
	assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(r, "sub")));
	cJSON_Delete(r);
	nodes_set_sub(f->n, "a", "cluster/,route/");
	r = record(f, "a", 0);
	assert_string_equal(str(r, "sub"), "cluster/,route/");
	cJSON_Delete(r);
	nodes_set_sub(f->n, "a", "");
	r = record(f, "a", 0);
	assert_string_equal(str(r, "sub"), "");
	cJSON_Delete(r);
	nodes_set_sub(f->n, "unknown", "x");   /* no record: nothing happens */
	struct buf b = BUF_INIT;
	assert_int_equal(nodes_one_to_json(f->n, "unknown", 0, &b), -1);
	buf_release(&b);
}

/* The fields that must survive a restart. */
static void expect_same_record(const cJSON *a, const cJSON *b)
{
	static const char *const nums[] = {
		"sent_version", "acked_version", "lag", "first_seen", "acked_at", "acks", "nacks", "stale_acks",
	};
	for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++)
		if (num(a, nums[i]) != num(b, nums[i]))
			fail_msg("%s: %g before, %g after", nums[i], num(a, nums[i]), num(b, nums[i]));
	assert_string_equal(str(a, "node"), str(b, "node"));
	assert_string_equal(str(a, "sent_nonce"), str(b, "sent_nonce"));
	assert_string_equal(str(a, "transport"), str(b, "transport"));
	char *la = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(a, "labels"));
	char *lb = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(b, "labels"));
	assert_string_equal(la, lb);
	free(la);
	free(lb);
	char *na = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(a, "last_nack"));
	char *nb = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(b, "last_nack"));
	assert_string_equal(na, nb);
	free(na);
	free(nb);
	char *ha = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(a, "healthy"));
	char *hb = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(b, "healthy"));
	assert_string_equal(ha, hb);
	free(ha);
	free(hb);
}

static void test_flush_and_reopen(void **state)
{
	struct fixture *f = *state;
	char err[256] = "";
	nodes_seen(f->n, "n1", "{\"env\":\"prod\",\"zone\":\"a\"}", "sse");
	nodes_seen(f->n, "n2", NULL, "poll");
	nodes_sent(f->n, "n1", 4, "b.1");
	assert_int_equal(ack(f, "n1", 4, "b.1", false, NULL, 5), ACK_ACCEPTED);
	nodes_sent(f->n, "n1", 5, "b.2");
	struct ack_msg m = { "n1", 5, "b.2", true, "check failed: \"x\"", 1, false, false };
	enum ack_result res;
	assert_int_equal(nodes_ack(f->n, &m, 5, &res), 0);
	assert_int_equal(res, ACK_ACCEPTED);
	assert_int_equal(ack(f, "n1", 4, "b.1", false, NULL, 5), ACK_STALE);
	assert_int_equal(nodes_flush(f->n, err, sizeof(err)), 0);
	/* a change after the flush, flushed again: only the dirty record moves */
	nodes_sent(f->n, "n2", 5, "p5-0");
	assert_int_equal(ack(f, "n2", 5, "p5-0", false, NULL, 5), ACK_ACCEPTED);
	assert_int_equal(nodes_flush(f->n, err, sizeof(err)), 0);
	assert_int_equal(nodes_flush(f->n, err, sizeof(err)), 0);   /* nothing dirty */

	cJSON *b1 = record(f, "n1", 5), *b2 = record(f, "n2", 5);
	nodes_free(f->n);
	persist_close(f->db);
	f->n = NULL;
	f->db = NULL;
	assert_int_equal(open_nodes(f), 0);

	cJSON *a1 = record(f, "n1", 5), *a2 = record(f, "n2", 5);
	expect_same_record(b1, a1);
	expect_same_record(b2, a2);
	assert_int_equal(num(a1, "acked_version"), 4);
	assert_int_equal(num(a1, "stale_acks"), 1);
	assert_string_equal(str(cJSON_GetObjectItemCaseSensitive(a1, "last_nack"), "error"), "check failed: \"x\"");
	assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(a1, "healthy")));
	assert_int_equal(num(a2, "acked_version"), 5);
	assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(a1, "connected")));
	/* the reloaded record still matches ACKs by the stored nonce */
	nodes_sent(f->n, "n1", 6, "b.3");
	assert_int_equal(ack(f, "n1", 5, "b.2", false, NULL, 6), ACK_STALE);
	assert_int_equal(ack(f, "n1", 6, "b.3", false, NULL, 6), ACK_ACCEPTED);
	assert_int_equal(acked(f, "n1"), 6);
	/* reloaded records count against the limit */
	assert_int_equal(nodes_seen(f->n, "n3", NULL, "sse"), 0);
	assert_int_equal(nodes_seen(f->n, "n4", NULL, "sse"), -1);
	cJSON_Delete(b1);
	cJSON_Delete(b2);
	cJSON_Delete(a1);
	cJSON_Delete(a2);
}

static void test_unflushed_changes_are_lost_not_torn(void **state)
{
	struct fixture *f = *state;
	char err[256];
	nodes_seen(f->n, "n1", NULL, "sse");
	nodes_sent(f->n, "n1", 1, "b.1");
	assert_int_equal(nodes_flush(f->n, err, sizeof(err)), 0);
	assert_int_equal(ack(f, "n1", 1, "b.1", false, NULL, 1), ACK_ACCEPTED);
	/* no flush: the ACK is not on disk, the earlier state is */
	nodes_free(f->n);
	persist_close(f->db);
	assert_int_equal(open_nodes(f), 0);
	cJSON *r = record(f, "n1", 1);
	assert_int_equal(num(r, "acked_version"), 0);
	assert_int_equal(num(r, "sent_version"), 1);
	assert_string_equal(str(r, "sent_nonce"), "b.1");
	cJSON_Delete(r);
}

/* A backend that says it is replica p1 (p2 is up too), and what nodes_save
 * was last handed for n1 (copied: the record is the caller's). */
static int (*real_save)(struct persist *, const struct persist_node *, size_t, char *, size_t);
static char saved_revoked[300], saved_key_via[300], saved_counts_reason[200];
static int saves;

static const char *as_p1(struct persist *p)
{
	(void)p;
	return "p1";
}

static bool p2_up(struct persist *p, const char *id)
{
	(void)p;
	return strcmp(id, "p2") == 0;
}

static int capture_save(struct persist *p, const struct persist_node *recs, size_t cnt, char *err, size_t errlen)
{
	for (size_t i = 0; i < cnt; i++) {
		if (strcmp(recs[i].id, "n1") != 0)
			continue;
		saves++;
		snprintf(saved_revoked, sizeof(saved_revoked), "%s", recs[i].revoked ? recs[i].revoked : "(null)");
		snprintf(saved_key_via, sizeof(saved_key_via), "%s", recs[i].key_via ? recs[i].key_via : "(null)");
		snprintf(saved_counts_reason, sizeof(saved_counts_reason), "%s",
			 recs[i].counts_reason ? recs[i].counts_reason : "(null)");
	}
	return real_save(p, recs, cnt, err, errlen);
}

/* n1 as replica p2 says it: streaming there, behind r1, a live key from
 * r1 (its id kid), revoked ids, a NACK, a held NACK, not counting. */
static void merge_full(struct fixture *f, const char *key_b64, const char *kid, bool streaming)
{
	struct persist_node pn = {
		.id = "n1", .labels = "{\"zone\":\"a\"}", .transport = "sse", .first_seen = 100, .last_seen = 200,
		.healthy = 1, .has_nack = true, .nack_version = 3, .nack_nonce = "b.3", .nack_error = "bad", .nack_at = 150,
		.replica = "p2", .streaming = streaming, .via = "r1", .verify_failures = 1, .vf_version = 3,
		.vf_error = "sig", .vf_at = 150, .sub = "", .counts = -1, .counts_reason = "--traffic-listen off",
		.key = key_b64, .key_id = kid, .key_at = 120, .revoked = "0000000000000001,0000000000000002",
		.key_via = "r1", .held_version = 4, .held_reason = "no wrap", .held_at = 160,
	};
	assert_int_equal(nodes_merge(f->n, &pn), 0);
}

/* The record's strings that are NULL when empty (holder, counts_reason,
 * the key's via and revoked list): set, flushed (the flush's copy holds
 * its own), cleared, set again, and freed with the registry (valgrind). */
static void test_record_strings(void **state)
{
	struct fixture *f = *state;
	char err[256] = "";
	static struct persist_ops ops;
	const struct persist_ops *was = f->db->ops;
	ops = *was;
	ops.replica = as_p1;
	ops.replica_up = p2_up;
	real_save = ops.nodes_save;
	ops.nodes_save = capture_save;
	f->db->ops = &ops;

	unsigned char pk[32];
	for (size_t i = 0; i < sizeof(pk); i++)
		pk[i] = (unsigned char)(i + 7);
	char b64[48], kid[KEY_ID_LEN + 1];
	sodium_bin2base64(b64, sizeof(b64), pk, sizeof(pk), sodium_base64_VARIANT_ORIGINAL);
	keys_id(pk, kid);

	/* a new record with every string set */
	merge_full(f, b64, kid, true);
	cJSON *r = record(f, "n1", 5);
	assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "connected")));   /* p2 holds it */
	assert_string_equal(str(r, "key_id"), kid);
	assert_string_equal(str(r, "key_via"), "r1");
	assert_string_equal(str(r, "counts_reason"), "--traffic-listen off");
	const cJSON *rv = cJSON_GetObjectItemCaseSensitive(r, "key_revoked");
	assert_int_equal(cJSON_GetArraySize(rv), 2);
	assert_string_equal(cJSON_GetArrayItem(rv, 1)->valuestring, "0000000000000002");
	cJSON_Delete(r);

	/* a flush hands the backend the strings as they were, "" for none */
	nodes_set_counts(f->n, "n1", false, "counting off");
	assert_int_equal(nodes_flush(f->n, err, sizeof(err)), 0);
	assert_int_equal(saves, 1);
	assert_string_equal(saved_revoked, "0000000000000001,0000000000000002");
	assert_string_equal(saved_key_via, "r1");
	assert_string_equal(saved_counts_reason, "counting off");

	/* cleared: p2 streams no more, it counts, its key revoked (the via
	 * goes with the key) */
	merge_full(f, b64, kid, false);
	nodes_set_counts(f->n, "n1", true, "ignored");
	char got[KEY_ID_LEN + 1];
	assert_int_equal(nodes_key_revoke(f->n, "n1", got), 0);
	assert_string_equal(got, kid);
	r = record(f, "n1", 5);
	assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(r, "connected")));
	assert_null(cJSON_GetObjectItemCaseSensitive(r, "counts_reason"));
	assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(r, "key_id")));
	assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(r, "key_via")));
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r, "key_revoked")), 3);
	cJSON_Delete(r);
	assert_int_equal(nodes_flush(f->n, err, sizeof(err)), 0);
	assert_int_equal(saves, 2);
	char want[300];
	snprintf(want, sizeof(want), "0000000000000001,0000000000000002,%s", kid);
	assert_string_equal(saved_revoked, want);
	assert_string_equal(saved_key_via, "");
	assert_string_equal(saved_counts_reason, "");
	/* a revoked key is not taken back from a replica's record */
	merge_full(f, b64, kid, true);
	r = record(f, "n1", 5);
	assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(r, "key_id")));
	assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "connected")));   /* the holder again */
	cJSON_Delete(r);

	/* set again (a new key from r1, not counting) and left for
	 * nodes_free: every string of the record is freed with it */
	for (size_t i = 0; i < sizeof(pk); i++)
		pk[i] = (unsigned char)(i + 9);
	sodium_bin2base64(b64, sizeof(b64), pk, sizeof(pk), sodium_base64_VARIANT_ORIGINAL);
	keys_id(pk, kid);
	struct persist_node pn = { .id = "n1", .labels = "{}", .transport = "sse", .replica = "p2", .streaming = true,
				   .key = b64, .key_id = kid, .key_at = 130, .key_via = "r1,r2", .counts = -1,
				   .counts_reason = "off again" };
	assert_int_equal(nodes_merge(f->n, &pn), 0);
	r = record(f, "n1", 5);
	assert_string_equal(str(r, "key_id"), kid);
	assert_string_equal(str(r, "key_via"), "r1,r2");
	assert_string_equal(str(r, "counts_reason"), "off again");
	cJSON_Delete(r);
	nodes_free(f->n);   /* (with the ops above: the flush it makes is captured) */
	f->n = NULL;
	f->db->ops = was;
}

int main(void)
{
	log_init("test_nodes", LOG_LVL_WARN);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_ack_latest_nonce_moves_acked, setup, teardown),
		cmocka_unit_test_setup_teardown(test_older_nonce_is_stale, setup, teardown),
		cmocka_unit_test_setup_teardown(test_nothing_sent_yet_is_stale, setup, teardown),
		cmocka_unit_test_setup_teardown(test_right_nonce_wrong_version_mismatch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_nack_records_last_nack, setup, teardown),
		cmocka_unit_test_setup_teardown(test_health_recorded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_poll_nonce, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unknown_node, setup, teardown),
		cmocka_unit_test_setup_teardown(test_registry_full, setup, teardown),
		cmocka_unit_test(test_id_valid),
		cmocka_unit_test_setup_teardown(test_list_sorted_and_connected, setup, teardown),
		cmocka_unit_test_setup_teardown(test_labels_kept_when_null, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sub_recorded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flush_and_reopen, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unflushed_changes_are_lost_not_torn, setup, teardown),
		cmocka_unit_test_setup_teardown(test_record_strings, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
