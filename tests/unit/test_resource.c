/* test_resource.c: unit tests of common/resource.c: the name grammar, every
 * type's field checks with their exact messages, references and strict mode. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resource.h"

static const char PATH_MSG[] = "path must be relative, without '..', '.', '.tether*' or empty components (at most 4096 bytes)";
static const char HOST_MSG[] = "host must be '*', a host name or '*.' and a host name";
static const char RPATH_MSG[] = "path must start with '/' and hold only URL path characters (at most 1024)";
static const char MODE_MSG[] = "mode must be an octal string from '0000' to '0777'";

static int run(const char *name, const char *json, unsigned flags, struct res_refs *refs, char *err, size_t errlen)
{
	cJSON *body = cJSON_Parse(json);
	if (!body)
		fail_msg("test body does not parse: %s", json);
	int rc = resource_validate(name, body, flags, refs, err, errlen);
	cJSON_Delete(body);
	return rc;
}

static void expect_ok(const char *name, const char *json, unsigned flags)
{
	char err[512] = "";
	if (run(name, json, flags, NULL, err, sizeof(err)) != 0)
		fail_msg("%s %s refused: %s", name, json, err);
}

static void expect_err(const char *name, const char *json, unsigned flags, const char *want)
{
	char err[512] = "";
	if (run(name, json, flags, NULL, err, sizeof(err)) == 0)
		fail_msg("%s %s accepted, want: %s", name, json, want);
	assert_string_equal(err, want);
}

/* "name: msg" for the message of a refused field */
static void expect_field_err(const char *name, const char *json, const char *msg)
{
	char want[600];
	snprintf(want, sizeof(want), "%s: %s", name, msg);
	expect_err(name, json, 0, want);
}

static char *repeat(char c, size_t n)
{
	char *s = malloc(n + 1);
	assert_non_null(s);
	memset(s, c, n);
	s[n] = '\0';
	return s;
}

/* ---- names ----------------------------------------------------------- */

static void test_name_grammar(void **state)
{
	(void)state;
	char *n200 = repeat('a', 200), *n201 = repeat('a', 201);
	assert_true(resource_name_valid(n200));
	assert_false(resource_name_valid(n201));
	assert_true(resource_name_valid("web-1.example_A"));
	assert_true(resource_name_valid("..."));
	assert_true(resource_name_valid(".a"));
	assert_false(resource_name_valid(""));
	assert_false(resource_name_valid("."));
	assert_false(resource_name_valid(".."));
	assert_false(resource_name_valid("a/b"));
	assert_false(resource_name_valid("/"));
	assert_false(resource_name_valid("a b"));
	assert_false(resource_name_valid("a\nb"));
	assert_false(resource_name_valid("caf\xc3\xa9"));
	assert_false(resource_name_valid("a*"));
	free(n200);
	free(n201);
}

static void test_fullname_check(void **state)
{
	(void)state;
	char err[256];
	char full[256];
	char *n200 = repeat('x', 200), *n201 = repeat('x', 201);
	snprintf(full, sizeof(full), "listener/%s", n200);
	assert_int_equal(resource_fullname_check(full, err, sizeof(err)), 0);
	snprintf(full, sizeof(full), "listener/%s", n201);
	assert_int_equal(resource_fullname_check(full, err, sizeof(err)), -1);
	assert_true(strncmp(err, "name 'xxx", 9) == 0);
	assert_non_null(strstr(err, "must match [A-Za-z0-9._-]{1,200}"));
	free(n200);
	free(n201);

	assert_int_equal(resource_fullname_check("cluster", err, sizeof(err)), -1);
	assert_string_equal(err, "name 'cluster' must be 'type/name'");
	assert_int_equal(resource_fullname_check("widget/x", err, sizeof(err)), -1);
	assert_string_equal(err, "unknown resource type 'widget' (known: secret, cluster, listener, route, file, guard)");
	assert_int_equal(resource_fullname_check("Cluster/x", err, sizeof(err)), -1);
	assert_string_equal(err, "unknown resource type 'Cluster' (known: secret, cluster, listener, route, file, guard)");
	assert_int_equal(resource_fullname_check("/x", err, sizeof(err)), -1);
	assert_string_equal(err, "unknown resource type '' (known: secret, cluster, listener, route, file, guard)");
	assert_int_equal(resource_fullname_check("cluster/", err, sizeof(err)), -1);
	assert_string_equal(err, "name '' must match [A-Za-z0-9._-]{1,200}");
	assert_int_equal(resource_fullname_check("cluster/.", err, sizeof(err)), -1);
	assert_string_equal(err, "name '.' must match [A-Za-z0-9._-]{1,200}");
	assert_int_equal(resource_fullname_check("file/..", err, sizeof(err)), -1);
	assert_string_equal(err, "name '..' must match [A-Za-z0-9._-]{1,200}");
	assert_int_equal(resource_fullname_check("cluster/a/b", err, sizeof(err)), -1);
	assert_string_equal(err, "name 'a/b' must match [A-Za-z0-9._-]{1,200}");
	assert_int_equal(resource_fullname_check("cluster/web", err, sizeof(err)), 0);
}

static void test_types_and_ranks(void **state)
{
	(void)state;
	assert_int_equal(resource_type_of("secret/a"), RES_SECRET);
	assert_int_equal(resource_type_of("cluster/a"), RES_CLUSTER);
	assert_int_equal(resource_type_of("listener/a"), RES_LISTENER);
	assert_int_equal(resource_type_of("route/a"), RES_ROUTE);
	assert_int_equal(resource_type_of("file/a"), RES_FILE);
	assert_int_equal(resource_type_of("files/a"), RES_UNKNOWN);
	assert_int_equal(resource_type_of("fil/a"), RES_UNKNOWN);
	assert_int_equal(resource_type_of("cluster"), RES_UNKNOWN);
	/* make before break: secret < cluster < listener < route < file */
	assert_int_equal(resource_rank("secret/a"), 0);
	assert_int_equal(resource_rank("cluster/a"), 1);
	assert_int_equal(resource_rank("listener/a"), 2);
	assert_int_equal(resource_rank("route/a"), 3);
	assert_int_equal(resource_rank("file/a"), 4);
	assert_string_equal(resource_type_name(RES_ROUTE), "route");
	assert_string_equal(resource_type_name(RES_SECRET), "secret");
	assert_string_equal(resource_type_name(RES_UNKNOWN), "unknown");
}

static void test_validate_checks_name_and_object(void **state)
{
	(void)state;
	expect_err("widget/x", "{}", 0, "unknown resource type 'widget' (known: secret, cluster, listener, route, file, guard)");
	expect_err("cluster/a b", "{\"endpoints\":[]}", 0, "name 'a b' must match [A-Za-z0-9._-]{1,200}");
	expect_err("cluster/web", "[]", 0, "cluster/web: body must be a JSON object");
	expect_err("file/f", "\"text\"", 0, "file/f: body must be a JSON object");
}

/* ---- cluster --------------------------------------------------------- */

static void test_cluster_fields(void **state)
{
	(void)state;
	const char *n = "cluster/web";
	expect_ok(n, "{\"endpoints\":[{\"address\":\"127.0.0.1\",\"port\":9001,\"weight\":1}],\"lb\":\"round_robin\"}", 0);
	expect_ok(n, "{\"endpoints\":[]}", 0);
	expect_ok(n, "{\"endpoints\":[{\"address\":\"::1\",\"port\":1},{\"address\":\"backend-2.internal\",\"port\":65535,\"weight\":256}],\"lb\":\"least_conn\"}", 0);
	expect_ok(n, "{\"endpoints\":[],\"lb\":\"random\"}", 0);

	expect_field_err(n, "{}", "missing field 'endpoints'");
	expect_field_err(n, "{\"endpoints\":{}}", "endpoints must be an array");
	expect_field_err(n, "{\"endpoints\":[1]}", "endpoints[0] must be an object");
	expect_field_err(n, "{\"endpoints\":[{\"port\":80}]}", "endpoints[0].address is missing");
	expect_field_err(n, "{\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":80},{\"address\":\"bad host\",\"port\":80}]}",
			 "endpoints[1].address must be an IP address or a host name");
	expect_field_err(n, "{\"endpoints\":[{\"address\":7,\"port\":80}]}",
			 "endpoints[0].address must be an IP address or a host name");
	expect_field_err(n, "{\"endpoints\":[{\"address\":\"10.0.0.1\"}]}", "endpoints[0].port is missing");
	expect_field_err(n, "{\"endpoints\":[{\"address\":\"lb;rm\",\"port\":80}]}",
			 "endpoints[0].address must be an IP address or a host name");
	expect_field_err(n, "{\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":80,\"weight\":1},{\"address\":\"10.0.0.2\",\"port\":80,\"weight\":0}]}",
			 "endpoints[1].weight must be an integer in 1..256");
	expect_field_err(n, "{\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":80,\"weight\":257}]}",
			 "endpoints[0].weight must be an integer in 1..256");
	expect_field_err(n, "{\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":80,\"weight\":1.5}]}",
			 "endpoints[0].weight must be an integer in 1..256");
	expect_field_err(n, "{\"endpoints\":[],\"lb\":\"fastest\"}", "lb must be one of round_robin, least_conn, random");
	expect_field_err(n, "{\"endpoints\":[],\"lb\":1}", "lb must be a string");
}

static void test_port_ranges(void **state)
{
	(void)state;
	static const char *const bad[] = { "0", "65536", "-1", "80.5", "\"80\"", "null", "1e10" };
	char body[160];
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(body, sizeof(body), "{\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":%s}]}", bad[i]);
		expect_field_err("cluster/c", body, "endpoints[0].port must be an integer in 1..65535");
		snprintf(body, sizeof(body), "{\"port\":%s}", bad[i]);
		expect_field_err("listener/l", body, "port must be an integer in 1..65535");
	}
	expect_ok("listener/l", "{\"port\":1}", 0);
	expect_ok("listener/l", "{\"port\":65535}", 0);
}

/* ---- listener -------------------------------------------------------- */

static void test_listener_fields(void **state)
{
	(void)state;
	const char *n = "listener/l";
	expect_ok(n, "{\"address\":\"127.0.0.1\",\"port\":8080}", 0);
	expect_ok(n, "{\"address\":\"::\",\"port\":443,\"tls\":{\"secret\":\"cert-1\"}}", 0);
	expect_ok(n, "{\"port\":8080,\"tls\":null}", 0);
	expect_field_err(n, "{\"address\":\"127.0.0.1\"}", "missing field 'port'");
	expect_field_err(n, "{\"address\":\"localhost\",\"port\":80}", "address must be an IPv4 or IPv6 address");
	expect_field_err(n, "{\"address\":\"300.0.0.1\",\"port\":80}", "address must be an IPv4 or IPv6 address");
	expect_field_err(n, "{\"address\":5,\"port\":80}", "address must be a string");
	expect_field_err(n, "{\"port\":80,\"tls\":\"s\"}", "tls must be an object");
	expect_field_err(n, "{\"port\":80,\"tls\":{}}", "tls.secret is missing");
	expect_field_err(n, "{\"port\":80,\"tls\":{\"secret\":1}}", "tls.secret must be a string");
	expect_field_err(n, "{\"port\":80,\"tls\":{\"secret\":\"a b\"}}",
			 "tls.secret must be a resource name matching [A-Za-z0-9._-]{1,200}");
	expect_field_err(n, "{\"port\":80,\"tls\":{\"secret\":\"..\"}}",
			 "tls.secret must be a resource name matching [A-Za-z0-9._-]{1,200}");
}

/* ---- route ----------------------------------------------------------- */

static void route_with(char *out, size_t cap, const char *field, const char *value)
{
	/* value is a JSON string literal body (escapes allowed) */
	snprintf(out, cap, "{\"listener\":\"l\",\"cluster\":\"c\",\"%s\":\"%s\"}", field, value);
}

static void test_route_fields(void **state)
{
	(void)state;
	const char *n = "route/r";
	expect_ok(n, "{\"listener\":\"l\",\"host\":\"*\",\"path\":\"/\",\"cluster\":\"c\"}", 0);
	expect_ok(n, "{\"listener\":\"l\",\"cluster\":\"c\"}", 0);
	expect_field_err(n, "{\"cluster\":\"c\"}", "missing field 'listener'");
	expect_field_err(n, "{\"listener\":\"l\"}", "missing field 'cluster'");
	expect_field_err(n, "{\"listener\":1,\"cluster\":\"c\"}", "listener must be a string");
	expect_field_err(n, "{\"listener\":\"l\",\"cluster\":[]}", "cluster must be a string");
	expect_field_err(n, "{\"listener\":\"l/x\",\"cluster\":\"c\"}",
			 "listener must be a resource name matching [A-Za-z0-9._-]{1,200}");
	expect_field_err(n, "{\"listener\":\"l\",\"cluster\":\".\"}",
			 "cluster must be a resource name matching [A-Za-z0-9._-]{1,200}");
	expect_field_err(n, "{\"listener\":\"l\",\"cluster\":\"c\",\"host\":5}", "host must be a string");
	expect_field_err(n, "{\"listener\":\"l\",\"cluster\":\"c\",\"path\":false}", "path must be a string");
}

static void test_route_host(void **state)
{
	(void)state;
	static const char *const good[] = {
		"*", "*.example.com", "example.com", "a", "a-b.c-d.e", "xn--bcher-kva.example",
		"123.example", "A.EXAMPLE.COM",
	};
	static const char *const bad[] = {
		"", "*.", "**", "*example.com", "a.*.com", "a;b", "a}b", "a{b", "a\\nb", "a b", "a..b",
		".a", "a.", "-a.com", "a-.com", "a.-b.com", "a_b.com", "a/b", "a:80", "$host",
	};
	char body[512];
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		route_with(body, sizeof(body), "host", good[i]);
		expect_ok("route/r", body, 0);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		route_with(body, sizeof(body), "host", bad[i]);
		expect_field_err("route/r", body, HOST_MSG);
	}
	/* one label at most 63 bytes, the whole name at most 253 */
	char *l63 = repeat('a', 63), *l64 = repeat('a', 64);
	route_with(body, sizeof(body), "host", l63);
	expect_ok("route/r", body, 0);
	route_with(body, sizeof(body), "host", l64);
	expect_field_err("route/r", body, HOST_MSG);
	char host[300];
	snprintf(host, sizeof(host), "%s.%s.%s.%s", l63, l63, l63, l63);   /* 255 bytes */
	route_with(body, sizeof(body), "host", host);
	expect_field_err("route/r", body, HOST_MSG);
	host[253] = '\0';   /* 253 bytes ending in 'a' */
	route_with(body, sizeof(body), "host", host);
	expect_ok("route/r", body, 0);
	free(l63);
	free(l64);
}

static void test_route_path(void **state)
{
	(void)state;
	static const char *const good[] = {
		"/", "/api", "/api/v1/", "/a-b_c.d~e", "/%20x", "/a:b@c+d,e=f!g*", "/UPPER/123",
	};
	static const char *const bad[] = {
		"", "api", "a/", "/a;b", "/a{b", "/a}b", "/a$b", "/a b", "/a\\\"b", "/a#b", "/a?b",
		"/a\\\\b", "/a\\nb", "/a\\tb", "/a'b", "/a<b", "/a|b", "/caf\xc3\xa9",
	};
	char body[1200];
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		route_with(body, sizeof(body), "path", good[i]);
		expect_ok("route/r", body, 0);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		route_with(body, sizeof(body), "path", bad[i]);
		expect_field_err("route/r", body, RPATH_MSG);
	}
	char *p = repeat('p', 1025);
	p[0] = '/';
	route_with(body, sizeof(body), "path", p);
	expect_field_err("route/r", body, RPATH_MSG);
	p[1024] = '\0';
	route_with(body, sizeof(body), "path", p);
	expect_ok("route/r", body, 0);
	free(p);
}

/* ---- secret ---------------------------------------------------------- */

static void test_secret_fields(void **state)
{
	(void)state;
	const char *n = "secret/s";
	const char *cert = "-----BEGIN CERTIFICATE-----\\nMIIB\\n-----END CERTIFICATE-----\\n";
	const char *key = "-----BEGIN PRIVATE KEY-----\\nMIIE\\n-----END PRIVATE KEY-----\\n";
	char body[512];
	snprintf(body, sizeof(body), "{\"cert\":\"%s\",\"key\":\"%s\"}", cert, key);
	expect_ok(n, body, 0);
	snprintf(body, sizeof(body), "{\"key\":\"%s\"}", key);
	expect_field_err(n, body, "missing field 'cert'");
	snprintf(body, sizeof(body), "{\"cert\":\"%s\"}", cert);
	expect_field_err(n, body, "missing field 'key'");
	snprintf(body, sizeof(body), "{\"cert\":\"not pem\",\"key\":\"%s\"}", key);
	expect_field_err(n, body, "cert must be a PEM text (-----BEGIN ...) of at most 65536 bytes");
	snprintf(body, sizeof(body), "{\"cert\":\"%s\",\"key\":\"BEGIN\"}", cert);
	expect_field_err(n, body, "key must be a PEM text (-----BEGIN ...) of at most 65536 bytes");
	snprintf(body, sizeof(body), "{\"cert\":[],\"key\":\"%s\"}", key);
	expect_field_err(n, body, "cert must be a string");

	/* at most 65536 bytes */
	char *big = repeat('A', 65537);
	memcpy(big, "-----BEGIN ", 11);
	size_t cap = 65537 + 256;
	char *b2 = malloc(cap);
	assert_non_null(b2);
	snprintf(b2, cap, "{\"cert\":\"%s\",\"key\":\"%s\"}", big, key);
	expect_field_err(n, b2, "cert must be a PEM text (-----BEGIN ...) of at most 65536 bytes");
	big[65536] = '\0';
	snprintf(b2, cap, "{\"cert\":\"%s\",\"key\":\"%s\"}", big, key);
	expect_ok(n, b2, 0);
	free(b2);
	free(big);
}

/* ---- file ------------------------------------------------------------ */

static void file_with_mode(char *out, size_t cap, const char *mode)
{
	snprintf(out, cap, "{\"path\":\"a.conf\",\"content\":\"x\",\"mode\":\"%s\"}", mode);
}

static void test_file_fields(void **state)
{
	(void)state;
	const char *n = "file/f";
	expect_ok(n, "{\"path\":\"conf.d/app.conf\",\"content\":\"server {}\\n\",\"mode\":\"0644\"}", 0);
	expect_ok(n, "{\"path\":\"a\",\"content\":\"\"}", 0);
	expect_field_err(n, "{\"content\":\"x\"}", "missing field 'path'");
	expect_field_err(n, "{\"path\":\"a\"}", "missing field 'content'");
	expect_field_err(n, "{\"path\":\"a\",\"content\":1}", "content must be a string");
	expect_field_err(n, "{\"path\":1,\"content\":\"x\"}", "path must be a string");
	expect_field_err(n, "{\"path\":\"a\",\"content\":\"x\",\"mode\":420}", "mode must be a string");
	expect_field_err(n, "{\"path\":\"/etc/passwd\",\"content\":\"x\"}", PATH_MSG);
}

static void test_file_mode(void **state)
{
	(void)state;
	static const char *const good[] = { "0777", "777", "0644", "644", "0000", "000", "0600" };
	static const char *const bad[] = {
		"1777", "08", "777x", "", "7", "77", "07777", "0778", "0o77", "-644", " 644", "0x1f", "9",
	};
	char body[160];
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		file_with_mode(body, sizeof(body), good[i]);
		expect_ok("file/f", body, 0);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		file_with_mode(body, sizeof(body), bad[i]);
		expect_field_err("file/f", body, MODE_MSG);
	}
}

static void test_file_paths(void **state)
{
	(void)state;
	static const char *const good[] = {
		"a", "a/b", "conf.d/x.conf", "...", ".hidden", "a/.b/c..d", "a b", "x-y_z~",
	};
	static const char *const bad[] = {
		"", "/", "/a", "..", "../a", "a/..", "a/../b", ".", "./a", "a/.", "a/./b", "a//b", "a/",
		"//a", "a\tb", "a\nb", "\x01", "a\x1f", "a\x7f", "a\\b", ".tether", ".tether-work/x", "a/.tetherfoo",
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		if (!resource_file_path_valid(good[i]))
			fail_msg("path '%s' refused", good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (resource_file_path_valid(bad[i]))
			fail_msg("path '%s' accepted", bad[i]);

	/* components at most 255 bytes, the whole path at most 4096 */
	char *c255 = repeat('c', 255), *c256 = repeat('c', 256);
	assert_true(resource_file_path_valid(c255));
	assert_false(resource_file_path_valid(c256));
	char *p = malloc(4200);
	assert_non_null(p);
	p[0] = '\0';
	size_t len = 0;
	while (len + 256 <= 4096) {   /* 16 components of 255 + '/' */
		memcpy(p + len, c255, 255);
		p[len + 255] = '/';
		len += 256;
		p[len] = '\0';
	}
	/* 4096 bytes so far, ending in '/': close it with one byte over */
	p[len - 1] = '\0';                /* 4095 */
	assert_true(resource_file_path_valid(p));
	p[len - 1] = 'x';                 /* "...c/" -> "...cx": a 256 component */
	p[len] = '\0';
	assert_false(resource_file_path_valid(p));
	p[len - 1] = '/';
	p[len] = 'x';
	p[len + 1] = '\0';                /* 4097 bytes */
	assert_false(resource_file_path_valid(p));
	free(p);
	free(c255);
	free(c256);

	/* the escaped forms as they arrive in JSON, through resource_validate */
	expect_field_err("file/f", "{\"path\":\"a//b\",\"content\":\"\"}", PATH_MSG);
	expect_field_err("file/f", "{\"path\":\"./a\",\"content\":\"\"}", PATH_MSG);
	expect_field_err("file/f", "{\"path\":\"a/../../etc\",\"content\":\"\"}", PATH_MSG);
	expect_field_err("file/f", "{\"path\":\"a\\u0001b\",\"content\":\"\"}", PATH_MSG);
	expect_field_err("file/f", "{\"path\":\"a\\nb\",\"content\":\"\"}", PATH_MSG);
}

/* ---- references ---------------------------------------------------- */

static void test_refs(void **state)
{
	(void)state;
	char err[256];
	struct res_refs refs;
	refs.n = 3;   /* reset by every call */
	assert_int_equal(run("route/r", "{\"listener\":\"front\",\"cluster\":\"web-1\",\"host\":\"*\"}", 0, &refs,
			     err, sizeof(err)), 0);
	assert_int_equal(refs.n, 2);
	assert_string_equal(refs.name[0], "listener/front");
	assert_string_equal(refs.name[1], "cluster/web-1");

	assert_int_equal(run("listener/front", "{\"port\":443,\"tls\":{\"secret\":\"tls-cert\"}}", 0, &refs,
			     err, sizeof(err)), 0);
	assert_int_equal(refs.n, 1);
	assert_string_equal(refs.name[0], "secret/tls-cert");

	assert_int_equal(run("listener/plain", "{\"port\":80}", 0, &refs, err, sizeof(err)), 0);
	assert_int_equal(refs.n, 0);
	refs.n = 2;
	assert_int_equal(run("cluster/c", "{\"endpoints\":[]}", 0, &refs, err, sizeof(err)), 0);
	assert_int_equal(refs.n, 0);
	refs.n = 2;
	assert_int_equal(run("file/f", "{\"path\":\"a\",\"content\":\"\"}", 0, &refs, err, sizeof(err)), 0);
	assert_int_equal(refs.n, 0);

	/* a 200-byte referenced name fits */
	char *n200 = repeat('z', 200);
	char body[600];
	snprintf(body, sizeof(body), "{\"listener\":\"%s\",\"cluster\":\"%s\"}", n200, n200);
	assert_int_equal(run("route/r", body, 0, &refs, err, sizeof(err)), 0);
	assert_int_equal(refs.n, 2);
	assert_int_equal(strlen(refs.name[0]), strlen("listener/") + 200);
	assert_int_equal(strncmp(refs.name[0], "listener/zzz", 12), 0);
	free(n200);
}

/* ---- strict mode ---------------------------------------------------- */

static void test_strict_refuses_unknown_fields(void **state)
{
	(void)state;
	expect_err("cluster/web", "{\"endpoints\":[],\"x\":1}", RES_STRICT,
		   "cluster/web: unknown field 'x' (known: endpoints, lb, health, keepalive, snippet)");
	expect_err("cluster/web", "{\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":80},{\"address\":\"10.0.0.2\",\"port\":80,\"x\":true}]}",
		   RES_STRICT, "cluster/web: endpoints[1]: unknown field 'x' (known: address, port, weight)");
	expect_err("cluster/web", "{\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":80,\"x\":1}]}",
		   RES_STRICT, "cluster/web: endpoints[0]: unknown field 'x' (known: address, port, weight)");
	expect_err("listener/l", "{\"port\":443,\"tls\":{\"secret\":\"s\",\"x\":\"y\"}}", RES_STRICT,
		   "listener/l: tls: unknown field 'x' (known: secret)");
	expect_err("listener/l", "{\"port\":443,\"http2\":true}", RES_STRICT,
		   "listener/l: unknown field 'http2' (known: address, port, tls, snippet)");
	expect_err("route/r", "{\"listener\":\"l\",\"cluster\":\"c\",\"timeuot\":5}", RES_STRICT,
		   "route/r: unknown field 'timeuot' (did you mean 'timeout'?)");
	expect_err("secret/s", "{\"cert\":\"-----BEGIN C\",\"key\":\"-----BEGIN K\",\"chain\":\"\"}", RES_STRICT,
		   "secret/s: unknown field 'chain' (known: cert, key)");
	expect_err("file/f", "{\"path\":\"a\",\"content\":\"\",\"owner\":\"root\"}", RES_STRICT,
		   "file/f: unknown field 'owner' (known: path, content, mode)");
	/* known fields only: strict passes */
	expect_ok("listener/l", "{\"address\":\"127.0.0.1\",\"port\":443,\"tls\":{\"secret\":\"s\"}}", RES_STRICT);
	expect_ok("cluster/web", "{\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":80,\"weight\":2}],\"lb\":\"random\"}",
		  RES_STRICT);
}

/* A near miss names the field it nearly is: a swap, a letter short or
 * extra, another case; far ones list what is known. */
static void test_strict_suggests_nearest_field(void **state)
{
	(void)state;
	expect_err("cluster/web", "{\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":80,\"wieght\":5}]}",
		   RES_STRICT, "cluster/web: endpoints[0]: unknown field 'wieght' (did you mean 'weight'?)");
	expect_err("cluster/web", "{\"endpoint\":[]}", RES_STRICT,
		   "cluster/web: unknown field 'endpoint' (did you mean 'endpoints'?)");
	expect_err("route/r", "{\"listener\":\"l\",\"clutser\":\"c\"}", RES_STRICT,
		   "route/r: unknown field 'clutser' (did you mean 'cluster'?)");
	expect_err("route/r", "{\"listener\":\"l\",\"cluster\":\"c\",\"Host\":\"a\"}", RES_STRICT,
		   "route/r: unknown field 'Host' (did you mean 'host'?)");
	expect_err("listener/l", "{\"port\":443,\"tls\":{\"secrets\":\"s\"}}", RES_STRICT,
		   "listener/l: tls: unknown field 'secrets' (did you mean 'secret'?)");
	expect_err("file/f", "{\"path\":\"a\",\"contents\":\"\"}", RES_STRICT,
		   "file/f: unknown field 'contents' (did you mean 'content'?)");
	expect_err("guard/g", "{\"max_shrnk\":0.5}", RES_STRICT,
		   "guard/g: unknown field 'max_shrnk' (did you mean 'max_shrink'?)");
	expect_err("secret/s", "{\"crt\":\"-----BEGIN C\",\"key\":\"-----BEGIN K\"}", RES_STRICT,
		   "secret/s: unknown field 'crt' (did you mean 'cert'?)");
	/* a field name too long to compare is listed against, not matched */
	char big[200];
	snprintf(big, sizeof(big), "{\"endpoints\":[],\"%060d\":1}", 0);
	char want[300];
	snprintf(want, sizeof(want), "cluster/web: unknown field '%060d' (known: endpoints, lb, health, keepalive, snippet)", 0);
	expect_err("cluster/web", big, RES_STRICT, want);
}

/* Every field of every type, at once: strict takes each (nothing valid
 * is refused as unknown). */
static void test_strict_takes_every_known_field(void **state)
{
	(void)state;
	expect_ok("cluster/c", "{\"endpoints\":[{\"address\":\"a.example\",\"port\":1,\"weight\":3}],\"lb\":\"least_conn\"}",
		  RES_STRICT);
	expect_ok("cluster/c", "{\"endpoints\":[],\"snippet\":{\"nginx\":\"keepalive 8;\",\"haproxy\":\"balance source\"}}",
		  RES_STRICT);
	expect_ok("listener/l", "{\"port\":80,\"snippet\":{\"nginx\":\"gzip on;\"}}", RES_STRICT);
	expect_ok("route/r", "{\"listener\":\"l\",\"cluster\":\"c\",\"snippet\":{\"haproxy\":\"http-response del-header Server\"}}",
		  RES_STRICT);
	expect_ok("listener/l", "{\"address\":\"::1\",\"port\":8443,\"tls\":{\"secret\":\"s\"}}", RES_STRICT);
	expect_ok("listener/l", "{\"port\":80,\"tls\":null}", RES_STRICT);
	expect_ok("route/r", "{\"listener\":\"l\",\"host\":\"*.example.com\",\"path\":\"/api\",\"cluster\":\"c\"}",
		  RES_STRICT);
	expect_ok("secret/s", "{\"cert\":\"-----BEGIN C\",\"key\":\"-----BEGIN K\"}", RES_STRICT);
	expect_ok("file/f", "{\"path\":\"a/b\",\"content\":\"x\",\"mode\":\"0640\"}", RES_STRICT);
	expect_ok("guard/g", "{\"match\":\"cluster/\",\"min_endpoints\":1,\"max_shrink\":0.5,\"max_bytes\":100,"
			     "\"max_growth\":2}", RES_STRICT);
	expect_ok("guard/g", "{}", RES_STRICT);
}

static void test_non_strict_keeps_unknown_fields(void **state)
{
	(void)state;
	expect_ok("cluster/web", "{\"endpoints\":[],\"x\":1}", 0);
	expect_ok("cluster/web", "{\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":80,\"x\":1}]}", 0);
	expect_ok("listener/l", "{\"port\":443,\"tls\":{\"secret\":\"s\",\"x\":\"y\"}}", 0);
	expect_ok("file/f", "{\"path\":\"a\",\"content\":\"\",\"owner\":\"root\"}", 0);
	/* an unknown field does not hide an error in a known one */
	expect_err("cluster/web", "{\"x\":1,\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":0}]}", 0,
		   "cluster/web: endpoints[0].port must be an integer in 1..65535");
}

static void test_error_truncated_safely(void **state)
{
	(void)state;
	char err[16];
	memset(err, 'Z', sizeof(err));
	assert_int_equal(run("cluster/web", "{}", 0, NULL, err, sizeof(err)), -1);
	assert_int_equal(strlen(err), sizeof(err) - 1);
	assert_int_equal(strncmp(err, "cluster/web: mi", 15), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_name_grammar),
		cmocka_unit_test(test_fullname_check),
		cmocka_unit_test(test_types_and_ranks),
		cmocka_unit_test(test_validate_checks_name_and_object),
		cmocka_unit_test(test_cluster_fields),
		cmocka_unit_test(test_port_ranges),
		cmocka_unit_test(test_listener_fields),
		cmocka_unit_test(test_route_fields),
		cmocka_unit_test(test_route_host),
		cmocka_unit_test(test_route_path),
		cmocka_unit_test(test_secret_fields),
		cmocka_unit_test(test_file_fields),
		cmocka_unit_test(test_file_mode),
		cmocka_unit_test(test_file_paths),
		cmocka_unit_test(test_refs),
		cmocka_unit_test(test_strict_refuses_unknown_fields),
		cmocka_unit_test(test_strict_suggests_nearest_field),
		cmocka_unit_test(test_strict_takes_every_known_field),
		cmocka_unit_test(test_non_strict_keeps_unknown_fields),
		cmocka_unit_test(test_error_truncated_safely),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
