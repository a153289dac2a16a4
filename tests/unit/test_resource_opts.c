/* test_resource_opts.c: unit tests of common/resource_opts.c through
 * resource_validate: every route and cluster option's refusals with their
 * exact messages (the resource, the field, what to do), the limits at their
 * edges, strict mode inside the options' objects, and the facts the
 * renderers share (a route's own haproxy backend, timeouts in ms). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "resource.h"
#include "resource_opts.h"

#define R "\"listener\":\"l\",\"cluster\":\"c\",\"path\":\"/api\""
#define E "\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":80}]"

static int run(const char *name, const char *json, unsigned flags, char *err, size_t errlen)
{
	cJSON *body = cJSON_Parse(json);
	if (!body)
		fail_msg("test body does not parse: %s", json);
	int rc = resource_validate(name, body, flags, NULL, err, errlen);
	cJSON_Delete(body);
	return rc;
}

static void ok_body(const char *name, const char *json)
{
	char err[512] = "";
	if (run(name, json, RES_STRICT, err, sizeof(err)) != 0)
		fail_msg("%s %s refused: %s", name, json, err);
}

/* refused with "NAME: msg", strict or not */
static void refused(const char *name, const char *json, const char *msg)
{
	char err[512] = "", want[600];
	snprintf(want, sizeof(want), "%s: %s", name, msg);
	for (unsigned flags = 0; flags <= RES_STRICT; flags += RES_STRICT) {
		if (run(name, json, flags, err, sizeof(err)) == 0)
			fail_msg("%s %s accepted, want: %s", name, json, want);
		assert_string_equal(err, want);
	}
}

static void test_timeout(void **state)
{
	(void)state;
	static const char TMSG[] = "must be a number of seconds in 0.001..86400";
	char msg[128];
	ok_body("route/r", "{" R ",\"timeout\":{}}");
	ok_body("route/r", "{" R ",\"timeout\":{\"connect\":0.001,\"read\":86400,\"send\":1.5}}");
	refused("route/r", "{" R ",\"timeout\":5}",
		"timeout: must be an object with connect, read and send in seconds (each optional)");
	const char *bad[] = { "0", "0.0009", "86400.5", "-1", "\"5\"", "null", "true" };
	const char *which[] = { "connect", "read", "send" };
	for (size_t w = 0; w < 3; w++) {
		snprintf(msg, sizeof(msg), "timeout.%s: %s", which[w], TMSG);
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			char body[256];
			snprintf(body, sizeof(body), "{" R ",\"timeout\":{\"%s\":%s}}", which[w], bad[i]);
			refused("route/r", body, msg);
		}
	}
	char err[256];
	assert_int_equal(run("route/r", "{" R ",\"timeout\":{\"idle\":1}}", RES_STRICT, err, sizeof(err)), -1);
	assert_string_equal(err, "route/r: timeout: unknown field 'idle' (known: connect, read, send)");
	assert_int_equal(run("route/r", "{" R ",\"timeout\":{\"idle\":1}}", 0, err, sizeof(err)), 0);
}

static void test_paths(void **state)
{
	(void)state;
	ok_body("route/r", "{" R ",\"strip_prefix\":true}");
	ok_body("route/r", "{" R ",\"strip_prefix\":false}");
	ok_body("route/r", "{\"listener\":\"l\",\"cluster\":\"c\",\"strip_prefix\":false}");
	ok_body("route/r", "{" R ",\"rewrite\":\"/v2/x-y_z.~:@+,=!*\"}");
	/* nginx sends a rewritten %20 as %2520, haproxy as %20 */
	refused("route/r", "{" R ",\"rewrite\":\"/a%20b\"}",
		"rewrite: '%' is not allowed (nginx would encode it again, haproxy would not): "
		"write the path without percent-encoding");
	ok_body("route/r", "{\"listener\":\"l\",\"cluster\":\"c\",\"rewrite\":\"/new\"}");
	refused("route/r", "{" R ",\"strip_prefix\":1}", "strip_prefix: must be true or false");
	refused("route/r", "{\"listener\":\"l\",\"cluster\":\"c\",\"strip_prefix\":true}",
		"strip_prefix: needs a path other than /");
	refused("route/r", "{\"listener\":\"l\",\"cluster\":\"c\",\"path\":\"/\",\"strip_prefix\":true}",
		"strip_prefix: needs a path other than /");
	static const char RW[] = "rewrite: must be a path starting with '/' of URL path characters (at most 1024)";
	refused("route/r", "{" R ",\"rewrite\":\"new\"}", RW);
	refused("route/r", "{" R ",\"rewrite\":\"\"}", RW);
	refused("route/r", "{" R ",\"rewrite\":\"/a?b\"}", RW);
	refused("route/r", "{" R ",\"rewrite\":\"/a;b\"}", RW);
	refused("route/r", "{" R ",\"rewrite\":\"/$1\"}", RW);
	refused("route/r", "{" R ",\"rewrite\":7}", RW);
	struct buf b = BUF_INIT;
	buf_puts(&b, "{" R ",\"rewrite\":\"/");
	for (int i = 0; i < 1024; i++)
		buf_putc(&b, 'a');
	buf_puts(&b, "\"}");
	refused("route/r", b.data, RW);
	buf_release(&b);
	refused("route/r", "{" R ",\"rewrite\":\"/new\",\"strip_prefix\":true}",
		"rewrite: cannot go with strip_prefix: drop one (rewrite '/' strips the prefix)");
	ok_body("route/r", "{" R ",\"rewrite\":\"/new\",\"strip_prefix\":false}");
}

static void test_headers(void **state)
{
	(void)state;
	ok_body("route/r", "{" R ",\"headers\":{\"request\":{\"set\":{\"Host\":\"h.test\",\"X-A\":\"a b % # ~\"},"
			   "\"remove\":[\"X-B\"]},\"response\":{\"set\":{\"!#$%&'*+-.^_`|~\":\"x\"},\"remove\":[]}}}");
	refused("route/r", "{" R ",\"headers\":[]}", "headers: must be an object with request and response (each optional)");
	refused("route/r", "{" R ",\"headers\":{\"request\":1}}",
		"headers.request: must be an object with set and remove (each optional)");
	refused("route/r", "{" R ",\"headers\":{\"response\":{\"set\":[]}}}",
		"headers.response.set: must be an object of header names to values");
	refused("route/r", "{" R ",\"headers\":{\"response\":{\"remove\":\"X\"}}}",
		"headers.response.remove: must be an array of header names");
	static const char V[] = "must be a string of 1 to 1024 printable ASCII characters without \" \\ $ ; { } ' (to drop a header, remove it)";
	const char *bad[] = { "a\\\"b", "a\\\\b", "$host", "a;b", "{", "}", "it's", "tab\\there", "\\u00e9", "nl\\n" };
	char body[256], want[256];
	snprintf(want, sizeof(want), "headers.request.set.X-A: %s", V);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(body, sizeof(body), "{" R ",\"headers\":{\"request\":{\"set\":{\"X-A\":\"%s\"}}}}", bad[i]);
		refused("route/r", body, want);
	}
	refused("route/r", "{" R ",\"headers\":{\"request\":{\"set\":{\"X-A\":1}}}}", want);
	refused("route/r", "{" R ",\"headers\":{\"request\":{\"set\":{\"X-A\":\"\"}}}}", want);
	refused("route/r", "{" R ",\"headers\":{\"request\":{\"set\":{\"X A\":\"v\"}}}}",
		"headers.request.set: 'X A' is not a header name (RFC 7230 token characters, at most 128)");
	refused("route/r", "{" R ",\"headers\":{\"request\":{\"set\":{\"\":\"v\"}}}}",
		"headers.request.set: '' is not a header name (RFC 7230 token characters, at most 128)");
	refused("route/r", "{" R ",\"headers\":{\"response\":{\"remove\":[\"X:Y\"]}}}",
		"headers.response.remove[0]: must be a header name (RFC 7230 token characters, at most 128)");
	refused("route/r", "{" R ",\"headers\":{\"request\":{\"remove\":[\"host\"]}}}",
		"headers.request.remove[0]: Host cannot be removed (set it instead)");
	refused("route/r", "{" R ",\"headers\":{\"request\":{\"set\":{\"X-A\":\"1\"},\"remove\":[\"x-a\"]}}}",
		"headers.request: 'X-A' is both set and removed: drop it from one of them");
	refused("route/r", "{" R ",\"headers\":{\"response\":{\"set\":{\"X-A\":\"1\",\"x-A\":\"2\"}}}}",
		"headers.response.set: 'x-A' is set twice (header names have no case)");
	/* the framing headers: a second Content-Length or a chunking the body
	 * does not have would smuggle requests past the backend's parser */
	refused("route/r", "{" R ",\"headers\":{\"request\":{\"set\":{\"Transfer-Encoding\":\"chunked\"}}}}",
		"headers.request.set: Transfer-Encoding frames the message: the proxy sets it from the body; drop it");
	refused("route/r", "{" R ",\"headers\":{\"request\":{\"remove\":[\"content-length\"]}}}",
		"headers.request.remove[0]: content-length frames the message: the proxy sets it from the body; drop it");
	refused("route/r", "{" R ",\"headers\":{\"response\":{\"set\":{\"Content-Length\":\"0\"}}}}",
		"headers.response.set: Content-Length frames the message: the proxy sets it from the body; drop it");
	refused("route/r", "{" R ",\"headers\":{\"response\":{\"remove\":[\"X-A\",\"TRANSFER-ENCODING\"]}}}",
		"headers.response.remove[1]: TRANSFER-ENCODING frames the message: the proxy sets it from the body; drop it");
	/* one name set in one direction and removed in the other: fine */
	ok_body("route/r", "{" R ",\"headers\":{\"request\":{\"set\":{\"X-A\":\"1\"}},\"response\":{\"remove\":[\"X-A\"]}}}");
	/* the limits: 128-byte names, 1024-byte values, 64 per list */
	struct buf b = BUF_INIT;
	buf_puts(&b, "{" R ",\"headers\":{\"request\":{\"set\":{\"");
	for (int i = 0; i < 128; i++)
		buf_putc(&b, 'n');
	buf_puts(&b, "\":\"");
	for (int i = 0; i < 1024; i++)
		buf_putc(&b, 'v');
	buf_puts(&b, "\"}}}}");
	ok_body("route/r", b.data);
	buf_release(&b);
	buf_puts(&b, "{" R ",\"headers\":{\"request\":{\"set\":{\"X\":\"");
	for (int i = 0; i < 1025; i++)
		buf_putc(&b, 'v');
	buf_puts(&b, "\"}}}}");
	snprintf(want, sizeof(want), "headers.request.set.X: %s", V);
	refused("route/r", b.data, want);
	buf_release(&b);
	for (int n = 64; n <= 65; n++) {
		buf_puts(&b, "{" R ",\"headers\":{\"response\":{\"remove\":[");
		for (int i = 0; i < n; i++)
			buf_printf(&b, "%s\"H%d\"", i ? "," : "", i);
		buf_puts(&b, "]}}}");
		if (n == 64)
			ok_body("route/r", b.data);
		else
			refused("route/r", b.data, "headers.response.remove: at most 64 headers");
		buf_release(&b);
	}
	buf_puts(&b, "{" R ",\"headers\":{\"request\":{\"set\":{");
	for (int i = 0; i < 65; i++)
		buf_printf(&b, "%s\"H%d\":\"v\"", i ? "," : "", i);
	buf_puts(&b, "}}}}");
	refused("route/r", b.data, "headers.request.set: at most 64 headers");
	buf_release(&b);
	char err[256];
	assert_int_equal(run("route/r", "{" R ",\"headers\":{\"request\":{\"add\":{}}}}", RES_STRICT, err, sizeof(err)), -1);
	assert_string_equal(err, "route/r: headers.request: unknown field 'add' (known: set, remove)");
	assert_int_equal(run("route/r", "{" R ",\"headers\":{\"trailers\":{}}}", RES_STRICT, err, sizeof(err)), -1);
	assert_string_equal(err, "route/r: headers: unknown field 'trailers' (known: request, response)");
}

static void test_scalars(void **state)
{
	(void)state;
	ok_body("route/r", "{" R ",\"websocket\":true,\"retries\":0,\"max_body\":0}");
	ok_body("route/r", "{" R ",\"websocket\":false,\"retries\":10,\"max_body\":1099511627776}");
	refused("route/r", "{" R ",\"websocket\":\"yes\"}", "websocket: must be true or false");
	const char *rbad[] = { "-1", "11", "1.5", "\"1\"" };
	for (size_t i = 0; i < 4; i++) {
		char body[128];
		snprintf(body, sizeof(body), "{" R ",\"retries\":%s}", rbad[i]);
		refused("route/r", body, "retries: must be an integer in 0..10");
	}
	const char *mbad[] = { "-1", "1099511627777", "0.5", "\"1m\"" };
	for (size_t i = 0; i < 4; i++) {
		char body[128];
		snprintf(body, sizeof(body), "{" R ",\"max_body\":%s}", mbad[i]);
		refused("route/r", body, "max_body: must be an integer of bytes in 0..1099511627776 (0: unlimited)");
	}
}

static void test_cluster(void **state)
{
	(void)state;
	ok_body("cluster/c", "{" E ",\"health\":{},\"keepalive\":0}");
	ok_body("cluster/c", "{" E ",\"health\":{\"max_fails\":1000,\"fail_timeout\":86400},\"keepalive\":10000}");
	ok_body("cluster/c", "{" E ",\"health\":{\"max_fails\":1,\"fail_timeout\":1}}");
	refused("cluster/c", "{" E ",\"health\":5}",
		"health: must be an object with max_fails and fail_timeout (each optional)");
	const char *fbad[] = { "0", "1001", "2.5", "\"3\"" };
	for (size_t i = 0; i < 4; i++) {
		char body[160];
		snprintf(body, sizeof(body), "{" E ",\"health\":{\"max_fails\":%s}}", fbad[i]);
		refused("cluster/c", body, "health.max_fails: must be an integer in 1..1000");
	}
	const char *tbad[] = { "0", "86401", "0.5", "\"10s\"" };
	for (size_t i = 0; i < 4; i++) {
		char body[160];
		snprintf(body, sizeof(body), "{" E ",\"health\":{\"fail_timeout\":%s}}", tbad[i]);
		refused("cluster/c", body, "health.fail_timeout: must be an integer of seconds in 1..86400");
	}
	refused("cluster/c", "{" E ",\"keepalive\":10001}", "keepalive: must be an integer in 0..10000");
	refused("cluster/c", "{" E ",\"keepalive\":-1}", "keepalive: must be an integer in 0..10000");
	char err[256];
	assert_int_equal(run("cluster/c", "{" E ",\"health\":{\"interval\":1}}", RES_STRICT, err, sizeof(err)), -1);
	assert_string_equal(err, "cluster/c: health: unknown field 'interval' (known: max_fails, fail_timeout)");
	assert_int_equal(run("cluster/c", "{" E ",\"keepalvie\":1}", RES_STRICT, err, sizeof(err)), -1);
	assert_string_equal(err, "cluster/c: unknown field 'keepalvie' (did you mean 'keepalive'?)");
}

static void test_shared_facts(void **state)
{
	(void)state;
	struct { const char *json; bool own, any; } cases[] = {
		{ "{" R "}", false, false },
		{ "{" R ",\"strip_prefix\":true}", false, true },
		{ "{" R ",\"headers\":{}}", false, true },
		{ "{" R ",\"max_body\":5}", false, true },
		{ "{" R ",\"websocket\":false}", false, true },
		{ "{" R ",\"websocket\":true}", true, true },
		{ "{" R ",\"retries\":0}", true, true },
		{ "{" R ",\"timeout\":{\"read\":1}}", true, true },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cJSON *b = cJSON_Parse(cases[i].json);
		assert_int_equal(resource_opts_own_backend(b), cases[i].own);
		assert_int_equal(resource_opts_route_any(b), cases[i].any);
		cJSON_Delete(b);
	}
	cJSON *b = cJSON_Parse("{\"timeout\":{\"connect\":0.0004,\"read\":1.5,\"send\":86400}}");
	assert_int_equal(resource_opts_timeout_ms(b, "connect"), 1);
	assert_int_equal(resource_opts_timeout_ms(b, "read"), 1500);
	assert_int_equal(resource_opts_timeout_ms(b, "send"), 86400000);
	assert_int_equal(resource_opts_timeout_ms(b, "idle"), 0);
	cJSON_Delete(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_timeout),
		cmocka_unit_test(test_paths),
		cmocka_unit_test(test_headers),
		cmocka_unit_test(test_scalars),
		cmocka_unit_test(test_cluster),
		cmocka_unit_test(test_shared_facts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
