/* test_node_changes.c: unit tests of a relay's node changes
 * (plane/persist/node_changes.c): every kind of line encoded and decoded
 * back unchanged (JSON strings with spaces, quotes and newlines included),
 * and what the decoder refuses, each refusal naming its line and field;
 * then nodes_relay_change (plane/core/nodes.c): a relay speaks only for
 * the nodes behind it, a node moves on a 'c' line, and what a relay's
 * ACKs say is what the registry shows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "core/nodes.h"
#include "persist/node_changes.h"
#include "persist/persist.h"
#include "sub.h"
#include "traffic.h"
#include "tmpdir.h"

static void test_round_trip(void **state)
{
	(void)state;
	struct buf b = BUF_INIT;
	node_changes_begin(&b, "r1", 42);
	struct node_change in[] = {
		{ .kind = NC_CONN, .node = "n1", .streaming = true, .transport = "sse", .first_seen = 1700000000,
		  .via = "r2,r3", .sub = "cluster/web, route/\"a b\"", .labels = "{\"zone\":\"a b\"}" },
		{ .kind = NC_CONN, .node = "n2", .streaming = false, .transport = "", .via = "", .sub = NULL,
		  .labels = "{}" },
		{ .kind = NC_ACK, .node = "n1", .version = 41, .healthy = 1, .count = 7 },
		{ .kind = NC_ACK, .node = "n2", .version = 40, .healthy = -1, .count = 0 },
		{ .kind = NC_NACK, .node = "n1", .version = 42, .healthy = 0, .count = 2, .nonce = "k9/x=",
		  .error = "nginx -t:\n  \"bad\" line 3" },
		{ .kind = NC_STALE, .node = "n1", .count = 3 },
		{ .kind = NC_VERIFY, .node = "n2", .count = 1, .version = 39, .error = "signature: no key" },
		{ .kind = NC_TRAFFIC, .node = "n1", .report = "{\"gen\":\"g1\",\"version\":41,\"routes\":[]}" },
		{ .kind = NC_KEY, .node = "n1", .reg = "{\"node\":\"n1\",\"key\":\"a b\"}", .reg_len = 25 },
		{ .kind = NC_HELD, .node = "n2", .version = 42, .nonce = "p42-1",
		  .error = "secret/tls: no wrap for this node's key 0123456789abcdef" },
		{ .kind = NC_COUNTS, .node = "n1", .count = 0, .error = "started with --traffic-listen off" },
		{ .kind = NC_COUNTS, .node = "n2", .count = 1 },
	};
	size_t n = sizeof(in) / sizeof(in[0]);
	for (size_t i = 0; i < n; i++)
		node_changes_put(&b, &in[i]);
	node_changes_end(&b, n);
	struct node_changes d;
	char err[400];
	assert_int_equal(node_changes_decode(b.data, b.len, 100, &d, err, sizeof(err)), 0);
	assert_string_equal(d.relay, "r1");
	assert_int_equal(d.held, 42);
	assert_int_equal(d.n, n);
	for (size_t i = 0; i < n; i++) {
		const struct node_change *o = &d.ch[i];
		assert_int_equal(o->kind, in[i].kind);
		assert_string_equal(o->node, in[i].node);
		switch (o->kind) {
		case NC_CONN:
			assert_int_equal(o->streaming, in[i].streaming);
			assert_string_equal(o->transport, in[i].transport);
			assert_int_equal(o->first_seen, in[i].first_seen);
			assert_string_equal(o->via, in[i].via);
			if (in[i].sub)
				assert_string_equal(o->sub, in[i].sub);
			else
				assert_null(o->sub);
			assert_string_equal(o->labels, in[i].labels);
			break;
		case NC_NACK:
			assert_string_equal(o->nonce, in[i].nonce);
			assert_string_equal(o->error, in[i].error);
			/* fall through */
		case NC_ACK:
			assert_int_equal(o->version, in[i].version);
			assert_int_equal(o->healthy, in[i].healthy);
			assert_int_equal(o->count, in[i].count);
			break;
		case NC_STALE:
			assert_int_equal(o->count, in[i].count);
			break;
		case NC_VERIFY:
			assert_int_equal(o->count, in[i].count);
			assert_int_equal(o->version, in[i].version);
			assert_string_equal(o->error, in[i].error);
			break;
		case NC_TRAFFIC:
			assert_string_equal(o->report, in[i].report);
			break;
		case NC_KEY:
			assert_int_equal(o->reg_len, in[i].reg_len);
			assert_memory_equal(o->reg, in[i].reg, in[i].reg_len);
			break;
		case NC_HELD:
			assert_int_equal(o->version, in[i].version);
			assert_string_equal(o->nonce, in[i].nonce);
			assert_string_equal(o->error, in[i].error);
			break;
		case NC_COUNTS:
			assert_int_equal(o->count, in[i].count);
			if (in[i].error)
				assert_string_equal(o->error, in[i].error);
			else
				assert_null(o->error);
			break;
		}
	}
	node_changes_release(&d);
	buf_release(&b);
}

/* body must be refused with an error containing want. */
static void refused(const char *body, size_t max, const char *want)
{
	struct node_changes d;
	char err[400];
	int rc = node_changes_decode(body, strlen(body), max, &d, err, sizeof(err));
	node_changes_release(&d);
	if (rc == 0 || !strstr(err, want))
		fail_msg("'%s': rc %d, error '%s', wanted '%s'", body, rc, rc ? err : "", want);
}

static void test_refusals(void **state)
{
	(void)state;
	const char *h = "tether-changes 1 r1 5\n";
	char body[1024];
#define R(lines, max, want) do { snprintf(body, sizeof(body), "%s%s", h, lines); refused(body, max, want); } while (0)
	refused("", 10, "empty");
	refused("{\"relay\":\"r1\",\"nodes\":[]}\n", 10, "line 1: header: must start 'tether-changes 1 '");
	refused("tether-changes 1 r/1 5\nend 0\n", 10, "line 1: relay: must match");
	refused("tether-changes 1 r1 x\nend 0\n", 10, "line 1: held: must be an integer");
	refused("tether-changes 1 r1 5 6\nend 0\n", 10, "line 1: held: an unknown field follows it");
	R("", 10, "truncated (no 'end' line)");
	R("a n1 5 1 3\n", 10, "truncated (no 'end' line)");
	R("a n1 5 1 3", 10, "line 2: batch: truncated (the line has no newline");
	R("a n1 5 1 3\nend 2\n", 10, "line 3: end: says 2 changes, the batch holds 1");
	R("end 0\na n1 5 1 3\n", 10, "line 3: batch: a line after the 'end' line");
	R("x n1 5\nend 1\n", 10, "line 2: kind: unknown");
	R("k n1\nend 1\n", 10, "line 2 ('k' n1): registration: missing");
	R("k n1 !!!\nend 1\n", 10, "line 2 ('k' n1): registration: must be standard base64");
	R("h n1 5 p5-1\nend 1\n", 10, "line 2 ('h' n1): reason: missing");
	R("h n1 0 p5-1 why\nend 1\n", 10, "line 2 ('h' n1): version: must be an integer");
	R("u n1 0\nend 1\n", 10, "line 2 ('u' n1): reason: missing");
	R("u n1 0 \nend 1\n", 10, "line 2 ('u' n1): counts: a space ends the line");
	R("u n1 2 why\nend 1\n", 10, "line 2 ('u' n1): counts: must be an integer in 0..1");
	R("u n1 x why\nend 1\n", 10, "line 2 ('u' n1): counts: must be an integer in 0..1");
	R("u n1 0 a\tb\nend 1\n", 10, "line 2 ('u' n1): reason: holds a control character");
	R("a n/1 5 1 3\nend 1\n", 10, "line 2 ('a'): node: must match");
	R("a n1 0 1 3\nend 1\n", 10, "line 2 ('a' n1): version: must be an integer in 1..");
	R("a n1 5 2 3\nend 1\n", 10, "line 2 ('a' n1): healthy: must be -, 0 or 1");
	R("a n1 5 1\nend 1\n", 10, "line 2 ('a' n1): acks: missing");
	R("a n1 5 1 3 9\nend 1\n", 10, "line 2 ('a' n1): acks: an unknown field follows it");
	R("a n1 5  1 3\nend 1\n", 10, "line 2 ('a' n1): healthy: empty");
	R("a n1 5 1 3 \nend 1\n", 10, "line 2 ('a' n1): acks: a space ends the line");
	R("n n1 5 0 1 k1 \"unterminated\nend 1\n", 10, "line 2 ('n' n1): error: an unterminated JSON string");
	R("n n1 5 0 1 k1 \"e\" x\nend 1\n", 10, "line 2 ('n' n1): error: an unknown field follows it");
	R("n n1 5 0 1 k1 plain\nend 1\n", 10, "line 2 ('n' n1): error: must be a JSON string");
	R("c n1 2 sse 1 - - {}\nend 1\n", 10, "line 2 ('c' n1): streaming: must be 0 or 1");
	R("c n1 1 SSE 1 - - {}\nend 1\n", 10, "line 2 ('c' n1): transport: must be - or [a-z]{1,7}");
	R("c n1 1 sse 1 r2,,r3 - {}\nend 1\n", 10, "line 2 ('c' n1): via: must be - or relay ids");
	R("c n1 1 sse 1 - x {}\nend 1\n", 10, "line 2 ('c' n1): sub: must be - or a JSON string");
	R("c n1 1 sse 1 - - {\"a\":1}\nend 1\n", 10, "line 2 ('c' n1): labels: must be a JSON object of");
	R("c n1 1 sse 1 - - [1]\nend 1\n", 10, "line 2 ('c' n1): labels: must be a JSON object of strings");
	R("c n1 1 sse 1 -\nend 1\n", 10, "line 2 ('c' n1): sub: missing");
	R("t n1 [1]\nend 1\n", 10, "line 2 ('t' n1): report: must be a JSON object");
	R("t n1  {}\nend 1\n", 10, "line 2 ('t' n1): report: empty");
	R("c n1 1 sse 1 - -  {}\nend 1\n", 10, "line 2 ('c' n1): labels: empty");
	R("v n1 0 3 \"e\"\nend 1\n", 10, "line 2 ('v' n1): failures: must be an integer in 1..");
	R("s n1 1\ns n2 1\nend 2\n", 1, "line 3: batch: more than 1 changes");
	{
		struct node_changes d2;
		char e2[200];
		const char *many = "tether-changes 1 r1 5\ns n1 1\ns n2 1\nend 2\n";
		assert_int_equal(node_changes_decode(many, strlen(many), 1, &d2, e2, sizeof(e2)), -2);
		node_changes_release(&d2);
	}
	R("end 3\n", 10, "line 2: end: says 3 changes");
#undef R
	/* a NUL byte anywhere */
	struct node_changes d;
	char err[200];
	const char nul[] = "tether-changes 1 r1 5\na n1 5 1 3\0\nend 1\n";
	assert_int_equal(node_changes_decode(nul, sizeof(nul) - 1, 10, &d, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "NUL"));
	node_changes_release(&d);
}

static struct node_change ch(char kind, const char *node)
{
	return (struct node_change){ .kind = kind, .node = node, .transport = "sse", .via = "", .labels = "{}",
				     .streaming = true, .healthy = -1 };
}

static bool r1_down;

static bool up(void *ctx, const char *relay)
{
	(void)ctx;
	return strcmp(relay, "r1") != 0 || !r1_down;
}

/* The plane's own limits: a legal report (128 routes, long names: ~100 KB)
 * and a legal subscription (64 prefixes of 220 bytes: ~14 KB) go through;
 * beyond them the encoder puts nothing rather than a batch the decoder
 * refuses whole. */
static void test_limits(void **state)
{
	(void)state;
	size_t rl = 100 * 1024, sl = SUB_TEXT_MAX;
	char *rep = malloc(TRAFFIC_REPORT_MAX + 16), *sub = malloc(SUB_TEXT_MAX + 16);
	memset(rep, 'x', TRAFFIC_REPORT_MAX + 8);
	memcpy(rep, "{\"gen\":\"", 8);
	memcpy(rep + rl - 2, "\"}", 3);
	memset(sub, 'a', sl);
	for (size_t i = 220; i < sl; i += 221)
		sub[i] = ',';
	sub[sl] = 0;
	struct buf b = BUF_INIT;
	node_changes_begin(&b, "r1", 1);
	struct node_change t = { .kind = NC_TRAFFIC, .node = "n1", .report = rep };
	struct node_change c = { .kind = NC_CONN, .node = "n1", .transport = "", .via = "", .sub = sub, .labels = "{}" };
	assert_int_equal(node_changes_put(&b, &t), 0);
	assert_int_equal(node_changes_put(&b, &c), 0);
	node_changes_end(&b, 2);
	struct node_changes d;
	char err[400];
	int rc = node_changes_decode(b.data, b.len, 10, &d, err, sizeof(err));
	if (rc)
		print_error("%s\n", err);
	assert_int_equal(rc, 0);
	assert_int_equal(d.n, 2);
	assert_int_equal(strlen(d.ch[1].sub), sl);
	node_changes_release(&d);
	size_t before = b.len;
	memcpy(rep + rl - 2, "xxx", 3);
	memcpy(rep + TRAFFIC_REPORT_MAX - 1, "\"}", 3);
	assert_int_equal(node_changes_put(&b, &t), -1);
	sub[sl] = 'a';
	sub[sl + 1] = 0;
	assert_int_equal(node_changes_put(&b, &c), -1);
	assert_int_equal(b.len, before);
	buf_release(&b);
	free(rep);
	free(sub);
}

static void test_nodes_owner(void **state)
{
	(void)state;
	char dir[64], err[300];
	assert_int_equal(test_tmpdir_make(dir, sizeof(dir), "changes"), 0);
	struct persist *db = persist_sqlite_open(dir, err, sizeof(err));
	assert_non_null(db);
	struct nodes *n = nodes_open(db, 3, 10000, err, sizeof(err));
	assert_non_null(n);
	nodes_set_relay_up(n, up, NULL, false);

	/* an ACK of a node nobody placed is refused, naming the node */
	struct node_change a = ch(NC_ACK, "n1");
	a.version = 5;
	a.count = 1;
	a.healthy = 1;
	assert_int_equal(nodes_relay_change(n, "r1", &a, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "node 'n1' is unknown here, not behind relay r1"));

	struct node_change c = ch(NC_CONN, "n1");
	assert_int_equal(nodes_relay_change(n, "r1", &c, err, sizeof(err)), 0);
	assert_int_equal(nodes_relay_change(n, "r1", &a, err, sizeof(err)), 0);
	uint64_t sent, acked;
	int healthy;
	assert_true(nodes_versions(n, "n1", &sent, &acked, &healthy));
	assert_int_equal(acked, 5);
	assert_int_equal(sent, 5);
	assert_int_equal(healthy, 1);

	/* r2 may not speak for r1's node ... */
	a.version = 6;
	assert_int_equal(nodes_relay_change(n, "r2", &a, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "node 'n1' is behind relay r1, not behind relay r2"));
	/* ... nor say it is n1's relay while r1 is up and streams to it ... */
	struct node_change gone = ch(NC_CONN, "n1");
	gone.streaming = false;
	assert_int_equal(nodes_relay_change(n, "r2", &gone, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "node 'n1' is behind relay r1"));
	/* ... but once r1 is gone, n1 is r2's (streaming or polling) ... */
	r1_down = true;
	assert_int_equal(nodes_relay_change(n, "r2", &gone, err, sizeof(err)), 0);
	assert_int_equal(nodes_relay_change(n, "r1", &a, err, sizeof(err)), -1);
	r1_down = false;
	assert_int_equal(nodes_relay_change(n, "r1", &c, err, sizeof(err)), 0);
	/* ... and a node that streams from r2 is r2's (a failover) */
	assert_int_equal(nodes_relay_change(n, "r2", &c, err, sizeof(err)), 0);
	assert_int_equal(nodes_relay_change(n, "r2", &a, err, sizeof(err)), 0);
	assert_int_equal(nodes_relay_change(n, "r1", &a, err, sizeof(err)), -1);
	assert_true(nodes_versions(n, "n1", &sent, &acked, &healthy));
	assert_int_equal(acked, 6);

	/* a verification failure's details are taken when they differ, also
	 * with a lower count (the relay's count restarted after its restart
	 * or a failover) */
	struct node_change v = ch(NC_VERIFY, "n1");
	v.count = 3;
	v.version = 6;
	v.error = "signature: no key";
	assert_int_equal(nodes_relay_change(n, "r2", &v, err, sizeof(err)), 0);
	v.count = 1;
	v.version = 7;
	v.error = "signature: replayed";
	assert_int_equal(nodes_relay_change(n, "r2", &v, err, sizeof(err)), 0);
	struct buf j = BUF_INIT;
	assert_int_equal(nodes_one_to_json(n, "n1", 7, &j), 0);
	buf_putc(&j, 0);
	assert_non_null(strstr(j.data, "\"version\":7"));
	assert_non_null(strstr(j.data, "signature: replayed"));
	buf_release(&j);

	/* a node with a stream open here is not taken over by a relay's word */
	nodes_stream_open(n, "n1");
	assert_int_equal(nodes_relay_change(n, "r1", &c, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "node 'n1' streams from this plane"));
	nodes_stream_close(n, "n1");
	assert_int_equal(nodes_relay_change(n, "r2", &c, err, sizeof(err)), 0);

	/* the registry's limit holds */
	struct node_change c2 = ch(NC_CONN, "n2"), c3 = ch(NC_CONN, "n3"), c4 = ch(NC_CONN, "n4");
	assert_int_equal(nodes_relay_change(n, "r1", &c2, err, sizeof(err)), 0);
	assert_int_equal(nodes_relay_change(n, "r1", &c3, err, sizeof(err)), 0);
	assert_int_equal(nodes_relay_change(n, "r1", &c4, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "the registry is full"));

	/* written behind and loaded back, the ACK part included */
	assert_int_equal(nodes_flush(n, err, sizeof(err)), 0);
	a.version = 7;
	assert_int_equal(nodes_relay_change(n, "r2", &a, err, sizeof(err)), 0);
	assert_int_equal(nodes_flush(n, err, sizeof(err)), 0);
	nodes_free(n);
	n = nodes_open(db, 3, 10000, err, sizeof(err));
	assert_non_null(n);
	assert_true(nodes_versions(n, "n1", &sent, &acked, &healthy));
	assert_int_equal(acked, 7);
	assert_int_equal(sent, 7);
	assert_true(nodes_versions(n, "n3", &sent, &acked, &healthy));
	nodes_free(n);
	persist_close(db);
	test_tmpdir_remove(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_nodes_owner),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
