/* test_push.c: unit tests of agent/state/push.c: good deltas and snapshots, every
 * shape error (version and nonce kept for the NACK), unknown fields, limits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "state/push.h"

static const struct json_limits default_lim = { 1u << 20, 0 };

static int decode(const char *text, struct push *p, char *err, size_t errlen)
{
	err[0] = '\0';
	return push_decode(text, strlen(text), &default_lim, p, err, errlen);
}

/* ---- good pushes ------------------------------------------------------- */

static void test_good_delta(void **state)
{
	(void)state;
	struct push p;
	char err[512];
	const char *t = "{\"version\":7,\"base\":5,\"nonce\":\"n-7\",\"full\":false,"
			"\"upserts\":[{\"name\":\"cluster/web\",\"version\":6,\"body\":{\"endpoints\":[]}},"
			"{\"name\":\"route/r\",\"body\":{\"listener\":\"l\",\"cluster\":\"web\"}}],"
			"\"removed\":[\"listener/old\",\"file/f.conf\"]}";
	assert_int_equal(decode(t, &p, err, sizeof(err)), 0);
	assert_int_equal(p.version, 7);
	assert_int_equal(p.base, 5);
	assert_false(p.full);
	assert_string_equal(p.nonce, "n-7");
	assert_int_equal(p.nup, 2);
	assert_string_equal(p.up[0].name, "cluster/web");
	assert_int_equal(p.up[0].version, 6);
	assert_true(cJSON_IsObject(p.up[0].body));
	assert_true(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(p.up[0].body, "endpoints")));
	assert_string_equal(p.up[1].name, "route/r");
	assert_int_equal(p.up[1].version, 0);
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(p.up[1].body, "cluster")->valuestring, "web");
	assert_int_equal(p.nrm, 2);
	assert_string_equal(p.removed[0], "listener/old");
	assert_string_equal(p.removed[1], "file/f.conf");
	assert_non_null(p.doc);
	push_release(&p);
	assert_null(p.doc);
	assert_null(p.up);
	assert_int_equal(p.nup, 0);
}

static void test_good_snapshot(void **state)
{
	(void)state;
	struct push p;
	char err[512];
	const char *t = "{\"version\":9,\"base\":0,\"full\":true,\"nonce\":\"s9\","
			"\"upserts\":[{\"name\":\"secret/s\",\"version\":1,\"body\":{}},"
			"{\"name\":\"listener/l\",\"version\":9,\"body\":{\"port\":80}}],\"removed\":[]}";
	assert_int_equal(decode(t, &p, err, sizeof(err)), 0);
	assert_int_equal(p.version, 9);
	assert_int_equal(p.base, 0);
	assert_true(p.full);
	assert_string_equal(p.nonce, "s9");
	assert_int_equal(p.nup, 2);
	assert_int_equal(p.up[0].version, 1);
	assert_int_equal(p.up[1].version, 9);
	assert_int_equal(p.nrm, 0);
	push_release(&p);
}

static void test_minimal_push_defaults(void **state)
{
	(void)state;
	struct push p;
	char err[512];
	/* base, full, upserts and removed may be absent */
	assert_int_equal(decode("{\"version\":3,\"nonce\":\"x\"}", &p, err, sizeof(err)), 0);
	assert_int_equal(p.version, 3);
	assert_int_equal(p.base, 0);
	assert_false(p.full);
	assert_int_equal(p.nup, 0);
	assert_int_equal(p.nrm, 0);
	push_release(&p);
	/* large versions that a double holds exactly */
	assert_int_equal(decode("{\"version\":9007199254740991,\"base\":9007199254740990,\"nonce\":\"x\"}", &p, err,
				sizeof(err)), 0);
	assert_int_equal(p.version, UINT64_C(9007199254740991));
	assert_int_equal(p.base, UINT64_C(9007199254740990));
	push_release(&p);
}

static void test_nonce_length_bound(void **state)
{
	(void)state;
	struct push p;
	char err[512], t[256], nonce[PUSH_NONCE_MAX + 1];
	memset(nonce, 'n', PUSH_NONCE_MAX - 1);
	nonce[PUSH_NONCE_MAX - 1] = '\0';
	snprintf(t, sizeof(t), "{\"version\":1,\"nonce\":\"%s\"}", nonce);
	assert_int_equal(decode(t, &p, err, sizeof(err)), 0);
	assert_int_equal(strlen(p.nonce), PUSH_NONCE_MAX - 1);
	assert_string_equal(p.nonce, nonce);
	push_release(&p);
}

static void test_unknown_top_level_fields_ignored(void **state)
{
	(void)state;
	struct push p;
	char err[512];
	const char *t = "{\"signature\":\"abc\",\"digest\":{\"lthash\":[1,2,3]},\"version\":4,\"nonce\":\"q\","
			"\"future\":[null,true],\"upserts\":[{\"name\":\"cluster/a\",\"body\":{},\"extra\":1}]}";
	assert_int_equal(decode(t, &p, err, sizeof(err)), 0);
	assert_int_equal(p.version, 4);
	assert_int_equal(p.nup, 1);
	assert_string_equal(p.up[0].name, "cluster/a");
	push_release(&p);
}

/* ---- shape errors ---------------------------------------------------------- */

struct bad_case {
	const char *text;
	const char *msg;          /* expected substring of err */
	uint64_t version;         /* what must be kept (0 when unreadable) */
	const char *nonce;        /* what must be kept ("" when unreadable) */
};

static const struct bad_case bad_cases[] = {
	/* version */
	{ "{\"nonce\":\"n1\",\"base\":0}", "push: version must be a non-negative integer", 0, "n1" },
	{ "{\"version\":-1,\"nonce\":\"n1\"}", "push: version must be a non-negative integer", 0, "n1" },
	{ "{\"version\":1.5,\"nonce\":\"n1\"}", "push: version must be a non-negative integer", 0, "n1" },
	{ "{\"version\":\"7\",\"nonce\":\"n1\"}", "push: version must be a non-negative integer", 0, "n1" },
	{ "{\"version\":null,\"nonce\":\"n1\"}", "push: version must be a non-negative integer", 0, "n1" },
	{ "{\"version\":9007199254740994,\"nonce\":\"n1\"}", "push: version must be a non-negative integer", 0, "n1" },
	{ "{\"version\":1e300,\"nonce\":\"n1\"}", "push: version must be a non-negative integer", 0, "n1" },
	/* base */
	{ "{\"version\":7,\"base\":\"3\",\"nonce\":\"n2\"}", "push: base must be a non-negative integer", 7, "n2" },
	{ "{\"version\":7,\"base\":-1,\"nonce\":\"n2\"}", "push: base must be a non-negative integer", 7, "n2" },
	{ "{\"version\":7,\"base\":2.5,\"nonce\":\"n2\"}", "push: base must be a non-negative integer", 7, "n2" },
	{ "{\"version\":7,\"base\":null,\"nonce\":\"n2\"}", "push: base must be a non-negative integer", 7, "n2" },
	/* full */
	{ "{\"version\":7,\"full\":\"true\",\"nonce\":\"n3\"}", "push: full must be true or false", 7, "n3" },
	{ "{\"version\":7,\"full\":1,\"nonce\":\"n3\"}", "push: full must be true or false", 7, "n3" },
	{ "{\"version\":7,\"full\":null,\"nonce\":\"n3\"}", "push: full must be true or false", 7, "n3" },
	/* nonce */
	{ "{\"version\":7}", "push: nonce must be a string of 1..47 bytes", 7, "" },
	{ "{\"version\":7,\"nonce\":\"\"}", "push: nonce must be a string of 1..47 bytes", 7, "" },
	{ "{\"version\":7,\"nonce\":5}", "push: nonce must be a string of 1..47 bytes", 7, "" },
	{ "{\"version\":7,\"nonce\":[\"a\"]}", "push: nonce must be a string of 1..47 bytes", 7, "" },
	{ "{\"version\":7,\"nonce\":\"012345678901234567890123456789012345678901234567\"}",
	  "push: nonce must be a string of 1..47 bytes", 7, "" },
	/* upserts and removed */
	{ "{\"version\":7,\"nonce\":\"n4\",\"upserts\":{}}", "push: upserts and removed must be arrays", 7, "n4" },
	{ "{\"version\":7,\"nonce\":\"n4\",\"upserts\":null}", "push: upserts and removed must be arrays", 7, "n4" },
	{ "{\"version\":7,\"nonce\":\"n4\",\"removed\":\"cluster/a\"}", "push: upserts and removed must be arrays", 7,
	  "n4" },
	{ "{\"version\":7,\"nonce\":\"n5\",\"upserts\":[{\"body\":{}}]}", "push: upserts[0] needs a string name", 7, "n5" },
	{ "{\"version\":7,\"nonce\":\"n5\",\"upserts\":[{\"name\":5,\"body\":{}}]}", "push: upserts[0] needs a string name",
	  7, "n5" },
	{ "{\"version\":7,\"nonce\":\"n5\",\"upserts\":[\"cluster/a\"]}", "push: upserts[0] needs a string name", 7, "n5" },
	{ "{\"version\":7,\"nonce\":\"n5\",\"upserts\":[null]}", "push: upserts[0] needs a string name", 7, "n5" },
	{ "{\"version\":7,\"nonce\":\"n5\",\"upserts\":[{\"name\":\"cluster/a\",\"body\":{}},{\"body\":{}}]}",
	  "push: upserts[1] needs a string name", 7, "n5" },
	{ "{\"version\":7,\"nonce\":\"n6\",\"upserts\":[{\"name\":\"cluster/a\"}]}", "push: cluster/a: body is missing", 7,
	  "n6" },
	{ "{\"version\":7,\"nonce\":\"n6\",\"upserts\":[{\"name\":\"cluster/a\",\"version\":-3,\"body\":{}}]}",
	  "push: cluster/a: version must be a non-negative integer", 7, "n6" },
	/* bad names */
	{ "{\"version\":7,\"nonce\":\"n7\",\"upserts\":[{\"name\":\"cluster\",\"body\":{}}]}",
	  "push: upserts[0]: name 'cluster' must be 'type/name'", 7, "n7" },
	{ "{\"version\":7,\"nonce\":\"n7\",\"upserts\":[{\"name\":\"bogus/x\",\"body\":{}}]}",
	  "push: upserts[0]: unknown resource type 'bogus'", 7, "n7" },
	{ "{\"version\":7,\"nonce\":\"n7\",\"upserts\":[{\"name\":\"cluster/a b\",\"body\":{}}]}",
	  "push: upserts[0]: name 'a b' must match", 7, "n7" },
	{ "{\"version\":7,\"nonce\":\"n7\",\"upserts\":[{\"name\":\"cluster/..\",\"body\":{}}]}", "push: upserts[0]: name '..'",
	  7, "n7" },
	{ "{\"version\":7,\"nonce\":\"n7\",\"upserts\":[{\"name\":\"cluster/\",\"body\":{}}]}", "push: upserts[0]: name ''",
	  7, "n7" },
	{ "{\"version\":7,\"nonce\":\"n7\",\"upserts\":[{\"name\":\"file/a/b\",\"body\":{}}]}", "push: upserts[0]: name 'a/b'",
	  7, "n7" },
	/* removed */
	{ "{\"version\":7,\"nonce\":\"n8\",\"removed\":[5]}", "push: removed[0] must be a string", 7, "n8" },
	{ "{\"version\":7,\"nonce\":\"n8\",\"removed\":[\"cluster/a\",null]}", "push: removed[1] must be a string", 7, "n8" },
	{ "{\"version\":7,\"nonce\":\"n8\",\"removed\":[{\"name\":\"cluster/a\"}]}", "push: removed[0] must be a string", 7,
	  "n8" },
	{ "{\"version\":7,\"nonce\":\"n8\",\"removed\":[\"nope\"]}", "push: removed[0]: name 'nope' must be 'type/name'", 7,
	  "n8" },
	{ "{\"version\":7,\"nonce\":\"n8\",\"removed\":[\"cluster/a\",\"weird/b\"]}",
	  "push: removed[1]: unknown resource type 'weird'", 7, "n8" },
	/* a snapshot replaces everything: it has nothing to remove */
	{ "{\"version\":7,\"nonce\":\"n9\",\"full\":true,\"removed\":[\"cluster/a\"]}", "push: a snapshot cannot remove names",
	  7, "n9" },
	/* not a push at all */
	{ "[1,2]", "push: not a JSON object", 0, "" },
	{ "\"version\"", "push: not a JSON object", 0, "" },
	{ "{\"version\":7,\"nonce\":\"n\"", "push: malformed JSON", 0, "" },
	{ "", "push: malformed JSON", 0, "" },
	{ "{\"version\":7,\"nonce\":\"a\",\"nonce\":\"b\"}", "push: duplicate key 'nonce'", 0, "" },
	{ "{\"version\":7,\"nonce\":\"a\\u0000b\"}", "push: JSON string holds \\u0000", 0, "" },
};

static void test_shape_errors(void **state)
{
	(void)state;
	int failures = 0;
	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		const struct bad_case *bc = &bad_cases[i];
		struct push p;
		char err[512];
		memset(&p, 0x5a, sizeof(p));   /* push_decode must set everything */
		int rc = decode(bc->text, &p, err, sizeof(err));
		const char *why = NULL;
		if (rc != -1)
			why = "accepted";
		else if (!strstr(err, bc->msg))
			why = "wrong message";
		else if (p.version != bc->version)
			why = "version not kept";
		else if (strcmp(p.nonce, bc->nonce) != 0)
			why = "nonce not kept";
		else if (p.doc || p.up || p.removed || p.nup || p.nrm)
			why = "not released";
		if (why) {
			print_error("case %zu %s: %s\n  err '%s' (want '%s'), version %llu (want %llu), nonce '%.*s' "
				    "(want '%s')\n", i, bc->text, why, err, bc->msg, (unsigned long long)p.version,
				    (unsigned long long)bc->version, PUSH_NONCE_MAX - 1, p.nonce, bc->nonce);
			failures++;
		}
		if (rc == 0)
			push_release(&p);
		/* and release is harmless after a failure */
		push_release(&p);
	}
	assert_int_equal(failures, 0);
}

/* The agent NACKs with whatever identifies the push: each of the fields
 * that can be wrong must not hide a nonce that is right. */
static void test_nonce_kept_whatever_fails(void **state)
{
	(void)state;
	static const char *const fields[] = {
		"\"version\":-1", "\"base\":\"x\"", "\"full\":0", "\"upserts\":5", "\"removed\":{}",
		"\"upserts\":[{\"name\":\"x\",\"body\":{}}]", "\"removed\":[1]",
	};
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		char t[256], err[512];
		struct push p;
		/* the bad field before and after the nonce: order must not matter */
		for (int order = 0; order < 2; order++) {
			if (order == 0)
				snprintf(t, sizeof(t), "{%s,\"nonce\":\"keep-me\"%s}", fields[i],
					 i == 0 ? "" : ",\"version\":12");
			else
				snprintf(t, sizeof(t), "{%s\"nonce\":\"keep-me\",%s}", i == 0 ? "" : "\"version\":12,",
					 fields[i]);
			assert_int_equal(decode(t, &p, err, sizeof(err)), -1);
			if (strcmp(p.nonce, "keep-me") != 0)
				fail_msg("%s: nonce '%s' not kept (err '%s')", t, p.nonce, err);
			assert_int_equal(p.version, i == 0 ? 0 : 12);
			push_release(&p);
		}
	}
}

/* ---- limits ----------------------------------------------------------------- */

static void test_size_limit(void **state)
{
	(void)state;
	const char *t = "{\"version\":1,\"nonce\":\"abc\",\"upserts\":[]}";
	size_t len = strlen(t);
	struct json_limits lim = { len, 0 };
	struct push p;
	char err[512];
	/* exactly the limit is fine */
	assert_int_equal(push_decode(t, len, &lim, &p, err, sizeof(err)), 0);
	assert_int_equal(p.version, 1);
	push_release(&p);
	/* one byte more is not, and nothing is readable then */
	lim.max_bytes = len - 1;
	assert_int_equal(push_decode(t, len, &lim, &p, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "exceeds the limit"));
	assert_int_equal(p.version, 0);
	assert_string_equal(p.nonce, "");
	assert_null(p.doc);
	push_release(&p);
}

/* A push whose one body nests depth levels below the top object. */
static char *nested_push(int body_depth)
{
	struct buf b = BUF_INIT;
	buf_puts(&b, "{\"version\":2,\"nonce\":\"d\",\"upserts\":[{\"name\":\"file/f\",\"body\":");
	for (int i = 0; i < body_depth; i++)
		buf_puts(&b, "{\"a\":");
	buf_puts(&b, "1");
	for (int i = 0; i < body_depth; i++)
		buf_putc(&b, '}');
	buf_puts(&b, "}]}");
	return buf_detach(&b, NULL);
}

static void test_depth_limit(void **state)
{
	(void)state;
	struct push p;
	char err[512];
	/* top object, upserts array, upsert object: 3 levels before the body */
	struct json_limits lim = { 0, 8 };
	char *ok = nested_push(5), *deep = nested_push(6);
	assert_int_equal(push_decode(ok, strlen(ok), &lim, &p, err, sizeof(err)), 0);
	push_release(&p);
	assert_int_equal(push_decode(deep, strlen(deep), &lim, &p, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "nesting deeper than 8"));
	push_release(&p);
	free(ok);
	free(deep);
	/* the default depth (32) applies when the limit says 0 */
	char *d32 = nested_push(29), *d33 = nested_push(30);
	lim.max_depth = 0;
	assert_int_equal(push_decode(d32, strlen(d32), &lim, &p, err, sizeof(err)), 0);
	push_release(&p);
	assert_int_equal(push_decode(d33, strlen(d33), &lim, &p, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "nesting deeper than 32"));
	push_release(&p);
	free(d32);
	free(d33);
	/* a very deep text costs no deep recursion */
	char *huge = nested_push(100000);
	assert_int_equal(push_decode(huge, strlen(huge), NULL, &p, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "nesting deeper than"));
	push_release(&p);
	free(huge);
}

static void test_nul_byte_refused(void **state)
{
	(void)state;
	static const char t[] = "{\"version\":1,\"nonce\":\"a\"}\0";
	struct push p;
	char err[512];
	assert_int_equal(push_decode(t, sizeof(t) - 1, &default_lim, &p, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "NUL"));
	push_release(&p);
}

static void test_many_upserts(void **state)
{
	(void)state;
	struct buf b = BUF_INIT;
	buf_puts(&b, "{\"version\":100,\"nonce\":\"m\",\"upserts\":[");
	for (int i = 0; i < 1000; i++)
		buf_printf(&b, "%s{\"name\":\"cluster/c%d\",\"version\":%d,\"body\":{}}", i ? "," : "", i, i + 1);
	buf_puts(&b, "],\"removed\":[");
	for (int i = 0; i < 500; i++)
		buf_printf(&b, "%s\"route/r%d\"", i ? "," : "", i);
	buf_puts(&b, "]}");
	struct push p;
	char err[512];
	assert_int_equal(push_decode(b.data, b.len, NULL, &p, err, sizeof(err)), 0);
	assert_int_equal(p.nup, 1000);
	assert_int_equal(p.nrm, 500);
	assert_string_equal(p.up[999].name, "cluster/c999");
	assert_int_equal(p.up[999].version, 1000);
	assert_string_equal(p.removed[499], "route/r499");
	push_release(&p);
	buf_release(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good_delta),
		cmocka_unit_test(test_good_snapshot),
		cmocka_unit_test(test_minimal_push_defaults),
		cmocka_unit_test(test_nonce_length_bound),
		cmocka_unit_test(test_unknown_top_level_fields_ignored),
		cmocka_unit_test(test_shape_errors),
		cmocka_unit_test(test_nonce_kept_whatever_fails),
		cmocka_unit_test(test_size_limit),
		cmocka_unit_test(test_depth_limit),
		cmocka_unit_test(test_nul_byte_refused),
		cmocka_unit_test(test_many_upserts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
