/* test_guards.c: unit tests of common/guards.c (the evaluator the plane
 * and the agent share) and of the agent's use of it (agent/guardcheck.c):
 * each field at and over its limit, with the message naming guard,
 * resource, field and numbers; match prefixes and guards without one;
 * deletion as a shrink to 0; new files without a growth check; guards not
 * guarded; the report's count, shown messages and distinct guards; and at
 * a node, the candidate's own guards, and the override that lets a
 * violation through only when newer than the version held. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "guardcheck.h"
#include "guards.h"
#include "resource.h"
#include "state/push.h"
#include "state/state.h"

/* ---- helpers ------------------------------------------------------------------ */

static void add(struct guards *gs, const char *name, const char *body)
{
	char err[256];
	if (guards_add(gs, name, body, strlen(body), err, sizeof(err)) < 0)
		fail_msg("guards_add %s: %s", name, err);
}

/* A cluster body with n endpoints (static buffer: one at a time per slot). */
static const char *cluster(int n, char *out, size_t cap)
{
	struct buf b = BUF_INIT;
	buf_puts(&b, "{\"endpoints\":[");
	for (int i = 0; i < n; i++)
		buf_printf(&b, "%s{\"address\":\"10.0.0.%d\",\"port\":80}", i ? "," : "", i + 1);
	buf_puts(&b, "]}");
	snprintf(out, cap, "%s", b.data);
	buf_release(&b);
	return out;
}

static const char *file_of(size_t n, char *out, size_t cap)
{
	size_t k = snprintf(out, cap, "{\"content\":\"");
	for (size_t i = 0; i < n && k + 40 < cap; i++)
		out[k++] = 'x';
	snprintf(out + k, cap - k, "\",\"path\":\"f.txt\"}");
	return out;
}

/* Runs one change through gs; returns the count, the text in msg. */
static size_t one(const struct guards *gs, const char *name, const char *before, const char *after, char *msg,
		  size_t cap)
{
	struct guard_change c = { name, before, after, before ? strlen(before) : 0, after ? strlen(after) : 0 };
	struct guard_report r;
	guard_report_init(&r);
	size_t n = guards_check(gs, &c, 1, &r);
	snprintf(msg, cap, "%s", n ? r.text.data : "");
	guard_report_release(&r);
	return n;
}

/* ---- the evaluator -------------------------------------------------------------- */

static void test_max_shrink(void **state)
{
	(void)state;
	struct guards gs;
	guards_init(&gs);
	add(&gs, "guard/shrink", "{\"match\":\"cluster/\",\"max_shrink\":0.5}");
	char a[1024], b[1024], msg[1024];
	/* 4 -> 2 loses exactly 50%: at the limit */
	assert_int_equal(one(&gs, "cluster/web", cluster(4, a, sizeof(a)), cluster(2, b, sizeof(b)), msg, sizeof(msg)), 0);
	/* 4 -> 1: over */
	assert_int_equal(one(&gs, "cluster/web", cluster(4, a, sizeof(a)), cluster(1, b, sizeof(b)), msg, sizeof(msg)), 1);
	assert_string_equal(msg, "guard/shrink: cluster/web: 4 -> 1 endpoints loses 75% (max_shrink 0.5)");
	/* growing, a new cluster: nothing */
	assert_int_equal(one(&gs, "cluster/web", cluster(1, a, sizeof(a)), cluster(4, b, sizeof(b)), msg, sizeof(msg)), 0);
	assert_int_equal(one(&gs, "cluster/new", NULL, cluster(1, b, sizeof(b)), msg, sizeof(msg)), 0);
	/* a delete shrinks to 0 */
	assert_int_equal(one(&gs, "cluster/web", cluster(2, a, sizeof(a)), NULL, msg, sizeof(msg)), 1);
	assert_string_equal(msg, "guard/shrink: cluster/web: 2 -> 0 endpoints loses 100% (max_shrink 0.5)");
	/* max_shrink 0: no loss at all; 1: anything */
	guards_release(&gs);
	add(&gs, "guard/z", "{\"max_shrink\":0}");
	assert_int_equal(one(&gs, "cluster/web", cluster(3, a, sizeof(a)), cluster(2, b, sizeof(b)), msg, sizeof(msg)), 1);
	assert_string_equal(msg, "guard/z: cluster/web: 3 -> 2 endpoints loses 33% (max_shrink 0)");
	guards_release(&gs);
	add(&gs, "guard/any", "{\"max_shrink\":1}");
	assert_int_equal(one(&gs, "cluster/web", cluster(3, a, sizeof(a)), NULL, msg, sizeof(msg)), 0);
	guards_release(&gs);
}

static void test_min_endpoints(void **state)
{
	(void)state;
	struct guards gs;
	guards_init(&gs);
	add(&gs, "guard/min", "{\"match\":\"cluster/web-\",\"min_endpoints\":2}");
	char a[1024], b[1024], msg[1024];
	assert_int_equal(one(&gs, "cluster/web-1", cluster(3, a, sizeof(a)), cluster(2, b, sizeof(b)), msg, sizeof(msg)), 0);
	assert_int_equal(one(&gs, "cluster/web-1", cluster(3, a, sizeof(a)), cluster(1, b, sizeof(b)), msg, sizeof(msg)), 1);
	assert_string_equal(msg, "guard/min: cluster/web-1: 1 endpoints, fewer than min_endpoints 2");
	/* a new cluster is held to it too */
	assert_int_equal(one(&gs, "cluster/web-2", NULL, cluster(1, b, sizeof(b)), msg, sizeof(msg)), 1);
	/* deleting one */
	assert_int_equal(one(&gs, "cluster/web-1", cluster(3, a, sizeof(a)), NULL, msg, sizeof(msg)), 1);
	assert_string_equal(msg, "guard/min: cluster/web-1: deleting it leaves 0 endpoints (min_endpoints 2)");
	/* outside the prefix: nothing */
	assert_int_equal(one(&gs, "cluster/api", cluster(3, a, sizeof(a)), NULL, msg, sizeof(msg)), 0);
	/* min_endpoints 0: even a delete passes */
	guards_release(&gs);
	add(&gs, "guard/zero", "{\"min_endpoints\":0}");
	assert_int_equal(one(&gs, "cluster/api", cluster(3, a, sizeof(a)), NULL, msg, sizeof(msg)), 0);
	guards_release(&gs);
}

static void test_max_bytes(void **state)
{
	(void)state;
	struct guards gs;
	guards_init(&gs);
	add(&gs, "guard/size", "{\"max_bytes\":100}");
	char a[4096], msg[1024];
	assert_int_equal(one(&gs, "file/f", NULL, file_of(100, a, sizeof(a)), msg, sizeof(msg)), 0);
	assert_int_equal(one(&gs, "file/f", NULL, file_of(101, a, sizeof(a)), msg, sizeof(msg)), 1);
	assert_string_equal(msg, "guard/size: file/f: content is 101 bytes, over max_bytes 100");
	/* a secret: its body's size */
	char sec[512];
	snprintf(sec, sizeof(sec), "{\"cert\":\"-----BEGIN %s\",\"key\":\"-----BEGIN k\"}",
		 "CERTIFICATE-----xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
	assert_int_equal(one(&gs, "secret/tls", NULL, sec, msg, sizeof(msg)), 1);
	char want[256];
	snprintf(want, sizeof(want), "guard/size: secret/tls: body is %zu bytes, over max_bytes 100", strlen(sec));
	assert_string_equal(msg, want);
	/* a deletion is never too big; clusters have no size */
	assert_int_equal(one(&gs, "file/f", file_of(500, a, sizeof(a)), NULL, msg, sizeof(msg)), 0);
	assert_int_equal(one(&gs, "cluster/c", NULL, cluster(9, a, sizeof(a)), msg, sizeof(msg)), 0);
	guards_release(&gs);
}

static void test_max_growth(void **state)
{
	(void)state;
	struct guards gs;
	guards_init(&gs);
	add(&gs, "guard/grow", "{\"match\":\"file/\",\"max_growth\":2}");
	char a[4096], b[4096], msg[1024];
	assert_int_equal(one(&gs, "file/f", file_of(100, a, sizeof(a)), file_of(200, b, sizeof(b)), msg, sizeof(msg)), 0);
	assert_int_equal(one(&gs, "file/f", file_of(100, a, sizeof(a)), file_of(201, b, sizeof(b)), msg, sizeof(msg)), 1);
	assert_string_equal(msg, "guard/grow: file/f: content grows 100 -> 201 bytes, 2.01x (max_growth 2)");
	/* a new file: no growth check */
	assert_int_equal(one(&gs, "file/g", NULL, file_of(3000, b, sizeof(b)), msg, sizeof(msg)), 0);
	/* secrets have no growth check */
	guards_release(&gs);
	guards_init(&gs);
	add(&gs, "guard/grow", "{\"max_growth\":1}");
	assert_int_equal(one(&gs, "secret/s", "{\"a\":1}", "{\"a\":1000000}", msg, sizeof(msg)), 0);
	guards_release(&gs);
}

/* At the limit exactly, for limits whose product with the count rounds
 * below it in floating point (0.57 * 100 is 56.99..., 1.15 * 100 is
 * 114.99...): the fraction is compared, so the limit itself passes. */
static void test_limits_that_round(void **state)
{
	(void)state;
	struct guards gs;
	guards_init(&gs);
	add(&gs, "guard/r", "{\"max_shrink\":0.57,\"max_growth\":1.15}");
	static char a[8192], b[8192];
	char msg[1024];
	/* 100 -> 43 loses 57%: at max_shrink 0.57; 100 -> 42 is over */
	assert_int_equal(one(&gs, "cluster/c", cluster(100, a, sizeof(a)), cluster(43, b, sizeof(b)), msg, sizeof(msg)), 0);
	assert_int_equal(one(&gs, "cluster/c", cluster(100, a, sizeof(a)), cluster(42, b, sizeof(b)), msg, sizeof(msg)), 1);
	assert_string_equal(msg, "guard/r: cluster/c: 100 -> 42 endpoints loses 58% (max_shrink 0.57)");
	/* the numbers show it over: 3 -> 2 loses 33.3%, not "33%", beside 0.33 */
	guards_release(&gs);
	add(&gs, "guard/t", "{\"max_shrink\":0.33,\"max_growth\":1.5}");
	assert_int_equal(one(&gs, "cluster/c", cluster(3, a, sizeof(a)), cluster(2, b, sizeof(b)), msg, sizeof(msg)), 1);
	assert_string_equal(msg, "guard/t: cluster/c: 3 -> 2 endpoints loses 33.3% (max_shrink 0.33)");
	assert_int_equal(one(&gs, "file/f", file_of(1000, a, sizeof(a)), file_of(1501, b, sizeof(b)), msg, sizeof(msg)), 1);
	assert_string_equal(msg, "guard/t: file/f: content grows 1000 -> 1501 bytes, 1.501x (max_growth 1.5)");
	guards_release(&gs);
	add(&gs, "guard/r", "{\"max_shrink\":0.57,\"max_growth\":1.15}");
	/* 100 -> 115 bytes is 1.15x: at max_growth 1.15; 116 is over */
	assert_int_equal(one(&gs, "file/f", file_of(100, a, sizeof(a)), file_of(115, b, sizeof(b)), msg, sizeof(msg)), 0);
	assert_int_equal(one(&gs, "file/f", file_of(100, a, sizeof(a)), file_of(116, b, sizeof(b)), msg, sizeof(msg)), 1);
	/* every shrink of up to 200 endpoints at a limit k/n itself passes */
	for (int n = 1; n <= 200; n += 7)
		for (int k = 0; k <= n; k++) {
			guards_release(&gs);
			char body[64];
			snprintf(body, sizeof(body), "{\"max_shrink\":%.17g}", (double)k / n);
			add(&gs, "guard/k", body);
			assert_int_equal(one(&gs, "cluster/c", cluster(n, a, sizeof(a)), cluster(n - k, b, sizeof(b)), msg,
					     sizeof(msg)), 0);
		}
	guards_release(&gs);
}

static void test_guards_not_guarded_and_report(void **state)
{
	(void)state;
	struct guards gs;
	guards_init(&gs);
	add(&gs, "guard/a", "{\"max_bytes\":1,\"max_shrink\":0,\"min_endpoints\":5}");
	add(&gs, "guard/b", "{\"match\":\"cluster/\",\"max_shrink\":0}");
	char msg[1024], a[1024], b[1024];
	/* a guard's own body is never judged */
	assert_int_equal(one(&gs, "guard/a", "{}", "{\"max_bytes\":1}", msg, sizeof(msg)), 0);
	/* routes and listeners have no guarded field */
	assert_int_equal(one(&gs, "route/r", NULL, "{\"cluster\":\"c\",\"listener\":\"l\"}", msg, sizeof(msg)), 0);
	/* many violations: counted, the first GUARDS_SHOWN shown, guards once each */
	struct guard_change ch[4];
	char names[4][32];
	for (int i = 0; i < 4; i++) {
		snprintf(names[i], sizeof(names[i]), "cluster/c%d", i);
		ch[i] = (struct guard_change){ names[i], cluster(3, a, sizeof(a)), cluster(1, b, sizeof(b)),
					       strlen(a), strlen(b) };
	}
	struct guard_report r;
	guard_report_init(&r);
	/* per cluster: a's min_endpoints and max_shrink, b's max_shrink */
	assert_int_equal(guards_check(&gs, ch, 4, &r), 12);
	assert_int_equal(r.count, 12);
	assert_string_equal(r.passed.data, "[\"guard/a\",\"guard/b\"]");
	assert_int_equal(r.nguards, 2);
	char sum[4096];
	guards_summary(&r, sum, sizeof(sum));
	assert_non_null(strstr(sum, "the write crosses 12 guard limits: guard/a: cluster/c0: 1 endpoints"));
	assert_non_null(strstr(sum, "; and 7 more"));
	guard_report_release(&r);
	/* none: nothing */
	guard_report_init(&r);
	assert_int_equal(guards_check(&gs, ch, 0, &r), 0);
	guards_summary(&r, sum, sizeof(sum));
	assert_string_equal(sum, "crosses no guard");
	guard_report_release(&r);
	guards_release(&gs);
}

static void test_bodies(void **state)
{
	(void)state;
	struct guards gs;
	guards_init(&gs);
	char err[256];
	static const char *const bad[] = {
		"[]", "{\"match\":5}", "{\"min_endpoints\":-1}", "{\"max_shrink\":1.5}", "{\"max_bytes\":0}",
		"{\"max_growth\":0.5}", "not json",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(guards_add(&gs, "guard/x", bad[i], strlen(bad[i]), err, sizeof(err)), -1);
	assert_int_equal(gs.n, 0);
	/* the schema (resource_validate) refuses the same, naming the field */
	static const char *const schema_bad[][2] = {
		{ "{\"match\":5}", "guard/x: match must be a string" },
		{ "{\"min_endpoints\":1.5}", "guard/x: min_endpoints must be an integer in 0..1000000000" },
		{ "{\"max_shrink\":-0.1}", "guard/x: max_shrink must be a number in [0,1]" },
		{ "{\"max_bytes\":0}", "guard/x: max_bytes must be an integer in 1..1000000000000000" },
		{ "{\"max_growth\":0.99}", "guard/x: max_growth must be a number in [1,1000000000]" },
		/* a match no guarded name starts with would guard nothing */
		{ "{\"match\":\"clusters/\",\"max_shrink\":0.5}",
		  "guard/x: match 'clusters/' starts no name a guard limits (cluster/, file/, secret/): it would guard nothing" },
		{ "{\"match\":\"route/\"}",
		  "guard/x: match 'route/' starts no name a guard limits (cluster/, file/, secret/): it would guard nothing" },
	};
	for (size_t i = 0; i < sizeof(schema_bad) / sizeof(schema_bad[0]); i++) {
		cJSON *v = cJSON_Parse(schema_bad[i][0]);
		assert_int_equal(resource_validate("guard/x", v, 0, NULL, err, sizeof(err)), -1);
		assert_string_equal(err, schema_bad[i][1]);
		cJSON_Delete(v);
	}
	/* every field optional; unknown fields as other types do; a match
	 * that is a guarded type's prefix, or starts with one, is fine */
	static const char *const good[] = { "{}", "{\"match\":\"\"}", "{\"match\":\"cluster/web-\"}",
					    "{\"match\":\"f\"}", "{\"match\":\"secret/\"}" };
	cJSON *v;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		v = cJSON_Parse(good[i]);
		assert_int_equal(resource_validate("guard/x", v, RES_STRICT, NULL, err, sizeof(err)), 0);
		cJSON_Delete(v);
	}
	v = cJSON_Parse("{\"max_bytes\":10,\"other\":1}");
	assert_int_equal(resource_validate("guard/x", v, 0, NULL, err, sizeof(err)), 0);
	assert_int_equal(resource_validate("guard/x", v, RES_STRICT, NULL, err, sizeof(err)), -1);
	assert_string_equal(err, "guard/x: unknown field 'other' (known: match, min_endpoints, max_shrink, max_bytes, max_growth)");
	cJSON_Delete(v);
	guards_release(&gs);
}

/* ---- at a node ------------------------------------------------------------------ */

static void must_apply(struct state *s, const char *text)
{
	struct push p;
	struct candidate c;
	char err[512];
	if (push_decode(text, strlen(text), NULL, &p, err, sizeof(err)) < 0)
		fail_msg("push_decode: %s", err);
	if (candidate_build(s, &p, 0, &c, err, sizeof(err)) < 0)
		fail_msg("candidate_build: %s", err);
	state_commit(s, &c);
	candidate_release(&c);
	push_release(&p);
}

/* Builds the candidate of text on s and judges it. */
static int judge(const struct state *s, const char *text, uint64_t overridden, char *err, size_t errlen)
{
	struct push p;
	struct candidate c;
	if (push_decode(text, strlen(text), NULL, &p, err, errlen) < 0)
		fail_msg("push_decode: %s", err);
	if (candidate_build(s, &p, 0, &c, err, errlen) < 0)
		fail_msg("candidate_build: %s", err);
	err[0] = '\0';
	int rc = guardcheck_candidate(s, &c, overridden, err, errlen);
	candidate_release(&c);
	push_release(&p);
	return rc;
}

#define EP(n) "{\"address\":\"10.0.0." #n "\",\"port\":80}"

static void test_node(void **state)
{
	(void)state;
	struct state s;
	state_init(&s);
	must_apply(&s, "{\"version\":2,\"full\":true,\"nonce\":\"n\",\"upserts\":["
		       "{\"name\":\"guard/shrink\",\"version\":1,\"body\":{\"match\":\"cluster/\",\"max_shrink\":0.5}},"
		       "{\"name\":\"cluster/web\",\"version\":2,\"body\":{\"endpoints\":[" EP(1) "," EP(2) "," EP(3) "," EP(4)
		       "]}}]}");
	char err[1024];
	const char *shrink = "{\"version\":3,\"base\":2,\"nonce\":\"n\",\"upserts\":[{\"name\":\"cluster/web\","
			     "\"version\":3,\"body\":{\"endpoints\":[" EP(1) "]}}]}";
	assert_int_equal(judge(&s, shrink, 0, err, sizeof(err)), -1);
	assert_string_equal(err, "the write crosses 1 guard limit: guard/shrink: cluster/web: 4 -> 1 endpoints "
				 "loses 75% (max_shrink 0.5)");
	/* an override at or below the version held does not count; above does */
	assert_int_equal(judge(&s, shrink, 2, err, sizeof(err)), -1);
	assert_int_equal(judge(&s, shrink, 3, err, sizeof(err)), 0);
	/* the candidate's own guards: one it loosens in the same push */
	const char *loosen = "{\"version\":3,\"base\":2,\"nonce\":\"n\",\"upserts\":[{\"name\":\"guard/shrink\","
			     "\"version\":3,\"body\":{\"match\":\"cluster/\",\"max_shrink\":0.8}},{\"name\":\"cluster/web\","
			     "\"version\":3,\"body\":{\"endpoints\":[" EP(1) "]}}]}";
	assert_int_equal(judge(&s, loosen, 0, err, sizeof(err)), 0);
	/* one it brings in the same push holds */
	const char *tighten = "{\"version\":3,\"base\":2,\"nonce\":\"n\",\"upserts\":[{\"name\":\"guard/min\","
			      "\"version\":3,\"body\":{\"min_endpoints\":4}},{\"name\":\"cluster/web\","
			      "\"version\":3,\"body\":{\"endpoints\":[" EP(1) "," EP(2) "," EP(3) "]}}]}";
	assert_int_equal(judge(&s, tighten, 0, err, sizeof(err)), -1);
	assert_string_equal(err, "the write crosses 1 guard limit: guard/min: cluster/web: 3 endpoints, fewer than "
				 "min_endpoints 4");
	/* a removal of the cluster */
	const char *rm = "{\"version\":3,\"base\":2,\"nonce\":\"n\",\"removed\":[\"cluster/web\"]}";
	assert_int_equal(judge(&s, rm, 0, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "4 -> 0 endpoints loses 100%"));
	/* nothing a guard limits: passes */
	const char *other = "{\"version\":3,\"base\":2,\"nonce\":\"n\",\"upserts\":[{\"name\":\"listener/l\","
			    "\"version\":3,\"body\":{\"port\":80}}]}";
	assert_int_equal(judge(&s, other, 0, err, sizeof(err)), 0);
	state_release(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_max_shrink),
		cmocka_unit_test(test_min_endpoints),
		cmocka_unit_test(test_max_bytes),
		cmocka_unit_test(test_max_growth),
		cmocka_unit_test(test_limits_that_round),
		cmocka_unit_test(test_guards_not_guarded_and_report),
		cmocka_unit_test(test_bodies),
		cmocka_unit_test(test_node),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
