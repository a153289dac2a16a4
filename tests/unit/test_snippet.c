/* test_snippet.c: a resource's snippet (common/snippet.c): nginx's
 * tokenizer (quotes, escapes, comments, braces, the statement's end) and
 * haproxy's line reader (quotes, comments, continuations, environment
 * expansions, a route's rules without a condition), each forbidden
 * directive family refused naming the line, what passes passing; the field
 * in resource_validate (types, sizes, unknown consumers under strict, only
 * listener, route and cluster); the renderers' helper (consumer/
 * render_snippet.c: each line indented between the markers, a route's
 * haproxy rules given the route's condition) and a checker's refusal of a
 * snippet line mapped to "TYPE/NAME: snippet.X: " (consumer/checkmap.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "consumer/checkmap.h"
#include "consumer/render.h"
#include "json.h"
#include "resource.h"
#include "snippet.h"
#include "xmalloc.h"

static char err[1024];

static void nginx_ok(const char *s)
{
	err[0] = '\0';
	if (snippet_check_nginx(s, false, err, sizeof(err)) != 0)
		fail_msg("nginx snippet refused: %s\n---\n%s", err, s);
}

/* refused, with want in the message */
static void nginx_no(const char *s, const char *want)
{
	err[0] = '\0';
	if (snippet_check_nginx(s, false, err, sizeof(err)) != -1)
		fail_msg("nginx snippet passed: %s", s);
	if (!strstr(err, want))
		fail_msg("nginx snippet %s: message '%s' lacks '%s'", s, err, want);
}

static void haproxy_ok(const char *s, bool route)
{
	err[0] = '\0';
	if (snippet_check_haproxy(s, route, err, sizeof(err)) != 0)
		fail_msg("haproxy snippet refused: %s\n---\n%s", err, s);
}

static void haproxy_no(const char *s, bool route, const char *want)
{
	err[0] = '\0';
	if (snippet_check_haproxy(s, route, err, sizeof(err)) != -1)
		fail_msg("haproxy snippet passed (route %d): %s", route, s);
	if (!strstr(err, want))
		fail_msg("haproxy snippet %s: message '%s' lacks '%s'", s, err, want);
}

static void test_nginx_passes(void **st)
{
	(void)st;
	nginx_ok("");
	nginx_ok("add_header X-Snip \"yes\" always;");
	nginx_ok("add_header X-Snip yes;\nproxy_set_header X-A $host;\n");
	nginx_ok("if ($request_method = POST) {\n    return 405;\n}\n");
	nginx_ok("limit_except GET {\n    deny all;\n}");
	nginx_ok("proxy_cookie_path /one/ /;");
	nginx_ok("if ($http_x = -f) {\n    return 403;\n}");   /* "-f)": a compared value */
	nginx_ok("add_header X -f;");
	/* a comment holds anything, braces and refused words too */
	nginx_ok("# include /etc/passwd; } {\nadd_header A b;");
	/* quotes hold ';', braces and '#' */
	nginx_ok("add_header X \"a;}{#b\";\nadd_header Y 'c;}d';");
	nginx_ok("add_header X \"a\\\"b\";");
	nginx_ok("add_header X ${host}y;");
	/* '}' inside a word is the word's (nginx reads it so) */
	nginx_ok("add_header X a}b;");
	nginx_ok("proxy_read_timeout 5s;proxy_connect_timeout 1s;");
	nginx_ok("add_header X \"multi\nline\";");
}

static void test_nginx_syntax(void **st)
{
	(void)st;
	nginx_no("}", "line 1: '}' closes a block the snippet did not open");
	nginx_no("add_header A b;\n} server { listen 80;", "line 2: '}' closes a block");
	nginx_no("add_header X \"abc;", "line 1: unterminated double quote");
	nginx_no("add_header X 'abc;\n\n", "unterminated single quote");
	nginx_no("add_header X y", "line 1: the last statement lacks its ';'");
	nginx_no("add_header X y\n}", "unexpected '}'");
	nginx_no("if ($x) {\n return 200;", "1 block(s) left open");
	nginx_no(";", "unexpected ';'");
	nginx_no("{ }", "unexpected '{'");
	nginx_no("add_header X \"a\"b;", "unexpected 'b' after a quoted string");
	nginx_no("add_header A b;\n\ninclude x;", "line 3: 'include' is refused");
	nginx_no("\"include\" x;", "a directive's name must be a bare word");
	nginx_no("inc\\lude x;", "a directive's name must be a bare word");
	nginx_no("add_header A b;\r\n", "line 1: control character 0x0d");
	nginx_no("add_header A \"\x01\";", "control character 0x01");
	nginx_no("# " SNIPPET_MARK "-end\n", "tether's marker");
	nginx_no("gzip on;\n\n# " SNIPPET_MARK "\n", "line 3: '" SNIPPET_MARK "' is tether's marker");
	nginx_no("if ($a) { if ($b) { if ($c) { if ($d) { if ($e) { if ($f) { if ($g) { if ($h) { if ($i) {",
		 "blocks nest more than 8 deep");
	/* the limit */
	char *big = xmalloc(SNIPPET_MAX + 2);
	memset(big, ' ', SNIPPET_MAX + 1);
	big[SNIPPET_MAX + 1] = '\0';
	nginx_no(big, "16385 bytes, more than 16384");
	big[SNIPPET_MAX] = '\0';
	nginx_ok(big);
	free(big);
}

static void test_nginx_refused(void **st)
{
	(void)st;
	static const struct { const char *s, *why; } no[] = {
		{ "include /etc/passwd;", "reads or writes files" },
		{ "load_module x.so;", "changes the consumer's process" },
		{ "content_by_lua_block { ngx.say(1) }", "runs code" },
		{ "access_by_lua 'x';", "runs code" },
		{ "set_by_lua $x 'return 1';", "runs code" },
		{ "lua_code_cache off;", "runs code" },
		{ "perl 'sub { }';", "runs code" },
		{ "perl_set $x 'sub { }';", "runs code" },
		{ "js_content x.y;", "runs code" },
		{ "js_import x.js;", "runs code" },
		{ "root /;", "reads or writes files" },
		{ "alias /etc/;", "reads or writes files" },
		{ "try_files $uri =404;", "reads or writes files" },
		{ "autoindex on;", "reads or writes files" },
		{ "ssl_certificate /x;", "reads or writes files" },
		{ "ssl_certificate_key /x;", "reads or writes files" },
		{ "proxy_ssl_trusted_certificate /x;", "reads or writes files" },
		{ "ssl_password_file /x;", "reads or writes files" },
		{ "ssl_dhparam /x;", "reads or writes files" },
		{ "ssl_conf_command ChainCAFile /x;", "reads or writes files" },
		{ "auth_basic_user_file /etc/passwd;", "reads or writes files" },
		{ "client_body_temp_path /tmp;", "reads or writes files" },
		{ "proxy_temp_path /tmp;", "reads or writes files" },
		{ "proxy_cache_path /tmp keys_zone=x:1m;", "reads or writes files" },
		{ "proxy_store on;", "reads or writes files" },
		{ "client_body_in_file_only on;", "reads or writes files" },
		{ "dav_methods PUT;", "reads or writes files" },
		{ "ssi on;", "reads or writes files" },
		{ "access_log /tmp/x;", "writes logs" },
		{ "error_log /tmp/x;", "writes logs" },
		{ "env SECRET;", "changes the consumer's process" },
		{ "user root;", "changes the consumer's process" },
		{ "pid /tmp/x;", "reads or writes files" },
		{ "daemon off;", "changes the consumer's process" },
		{ "master_process off;", "changes the consumer's process" },
		{ "worker_processes 1;", "changes the consumer's process" },
		{ "ssl_engine x;", "changes the consumer's process" },
		{ "proxy_pass http://127.0.0.1:1;", "past the route's cluster" },
		{ "fastcgi_pass 127.0.0.1:9000;", "past the route's cluster" },
		{ "grpc_pass 127.0.0.1:9000;", "past the route's cluster" },
		{ "mirror /m;", "outside the route" },
		{ "server 10.0.0.9:80;", "new scope" },
		{ "location /x { }", "new scope" },
		{ "server { }", "new scope" },
		{ "upstream x { }", "new scope" },
		{ "http { }", "new scope" },
		{ "map $a $b { default 0; }", "new scope" },
		{ "types { }", "new scope" },
		{ "if ($a) { include x; }", "'include' is refused" },
		{ "set $tether_route x;", "'tether_' names are tether's own" },
		{ "add_header X $TETHER_ROUTE;", "tether's own" },
		{ "INCLUDE x;", "'include' is refused" },
		{ "gzip on; foo { }", "only if and limit_except may open a block" },
		{ "listen 0.0.0.0:22;", "changes the addresses and hosts" },
		{ "server_name evil.example;", "changes the addresses and hosts" },
		{ "mp4;", "reads or writes files" },
		{ "state /var/lib/nginx/state;", "reads or writes files" },
		{ "mruby_content_handler x.rb;", "runs code" },
		{ "proxy_wasm filter;", "runs code" },
		{ "opentracing_load_tracer /x.so /x.json;", "runs code" },
		{ "ssl_key_log /tmp/keys;", "writes logs" },
		{ "xml_entities /etc/passwd;", "reads or writes files" },
		{ "quic_host_key /etc/shadow;", "reads or writes files" },
		{ "passenger_enabled on;", "runs code" },
		{ "pagespeed on;", "runs code" },
		{ "fancyindex on;", "reads files or accounts" },
		{ "auth_pam_service_name login;", "reads files or accounts" },
		/* if's file tests tell whether a path exists on the node */
		{ "if (-f /etc/shadow) { return 200; }", "'if (-f ...)' is refused in a snippet: it tests the node's files" },
		{ "if (!-e /root/.ssh) { return 404; }", "'if (!-e ...)' is refused" },
		{ "if ( -d /home/x ) { return 200; }", "'if (-d ...)' is refused" },
		{ "if (\"-x\" /bin/sh) { return 200; }", "'if (-x ...)' is refused" },
		{ "if ($a) { if (-f /x) { return 1; } }", "'if (-f ...)' is refused" },
	};
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		nginx_no(no[i].s, no[i].why);
}

static void test_haproxy_passes(void **st)
{
	(void)st;
	haproxy_ok("", false);
	haproxy_ok("http-response set-header X-Snip yes\n", false);
	haproxy_ok("acl is_post method POST\nhttp-request deny if is_post\n# a comment\n\n", false);
	haproxy_ok("acl path_ok path_beg /ok\nhttp-request deny if !path_ok p_api", false);
	haproxy_ok("option httpchk GET /health\nhttp-check expect status 200", false);
	haproxy_ok("tcp-request connection accept if { src 127.0.0.1 }", false);
	haproxy_ok("http-response set-header X \"a b # not a comment\"", false);
	haproxy_ok("http-request set-header X 'single ${NOT_EXPANDED}'", false);
	haproxy_ok("http-request set-header X \\$HOME", false);
	haproxy_ok("http-request set-header X '\\x41 is literal in single quotes'", false);
	haproxy_ok("http-response set-header X-R yes\nhttp-request set-header X-Q \"a b\"\n# why\n", true);
	haproxy_ok("http-request set-path /x%[path]", true);
	haproxy_ok("timeout server 30s\nbalance source", false);
}

static void test_haproxy_refused(void **st)
{
	(void)st;
	static const struct { const char *s, *why; } no[] = {
		{ "backend x", "starts a new section" },
		{ "frontend x", "starts a new section" },
		{ "global", "starts a new section" },
		{ "defaults", "starts a new section" },
		{ "listen x", "starts a new section" },
		{ "userlist u", "starts a new section" },
		{ "peers p", "starts a new section" },
		{ "resolvers r", "starts a new section" },
		{ "program p", "starts a new section" },
		{ "cache c", "starts a new section" },
		{ "ring r", "starts a new section" },
		{ "http-errors e", "starts a new section" },
		{ "mailers m", "starts a new section" },
		{ "crt-store c", "starts a new section" },
		{ "lua-load /x.lua", "runs Lua code" },
		{ "http-request lua.foo", "runs Lua code" },
		{ "http-request set-header X %[lua.f]", "runs Lua code" },
		{ "errorfile 503 /etc/passwd", "reads files" },
		{ "errorfiles x", "reads files" },
		{ "http-request return status 200 file /etc/passwd", "reads files" },
		{ "http-request return status 200 lf-file /etc/passwd", "reads files" },
		{ "http-request return status 200 \"file\" /etc/passwd", "reads files" },
		{ "acl x path -f /etc/passwd", "reads files" },
		{ "server-state-file-name x", "reads files" },
		{ "http-request set-header X %[req.hdr(x),map(/etc/passwd)]", "map or ACL files" },
		{ "http-request set-map(/etc/x) a b", "map or ACL files" },
		{ "http-request add-acl(/etc/x) a", "map or ACL files" },
		{ "http-response set-header X %[env(SECRET)]", "environment" },
		{ "http-response set-header X \"${HOME}\"", "expands the consumer's environment" },
		{ "http-response set-header X $HOME", "expands the consumer's environment" },
		{ "external-check command /bin/sh", "process" },
		{ "setenv X y", "process" },
		{ "presetenv X y", "process" },
		{ "resetenv", "process" },
		{ "unsetenv X", "process" },
		{ "chroot /", "process" },
		{ "user root", "process" },
		{ "group root", "process" },
		{ "stats socket /tmp/s", "sockets" },
		{ "stats enable", "sockets" },
		{ "server s 10.0.0.9:80", "routes past" },
		{ "server-template s 1-3 x:80", "routes past" },
		{ "use_backend x", "routes past" },
		{ "default_backend x", "routes past" },
		{ "use-server s if TRUE", "routes past" },
		{ "bind :80", "routes past" },
		{ "dispatch 10.0.0.9:80", "routes past" },
		{ "log 127.0.0.1 local0", "sends logs" },
		{ "log-format x", "sends logs" },
		{ "option httplog", "forwards past the cluster or changes the logs" },
		{ "option http_proxy", "forwards past the cluster" },
		{ "no option transparent", "forwards past the cluster" },
		{ "default log 127.0.0.1:514 local0", "sends logs" },
		{ "default option transparent", "forwards past the cluster" },
		/* haproxy ORs the declarations of one ACL name: one more "p_api"
		 * would send every request to route/api's cluster */
		{ "acl p_api always_true", "'h_' and 'p_' ACL names are tether's own" },
		{ "acl \"h_www\" req.hdr(host) -m found", "'h_' and 'p_' ACL names are tether's own" },
		{ "filter spoe config /x", "other processes" },
		{ "http-request use-service prometheus-exporter", "routes past" },
		{ "http-request set-dst ipv4(10.0.0.9)", "routes past" },
		{ "http-request set-var(txn.tether_route) str(x)", "tether's own" },
		{ ".if defined(X)", "bare keyword" },
		{ "\"backend\" x", "bare keyword" },
		{ "http-request set-header X a\\", "continuations are refused" },
		{ "http-request set-header X \"a", "unterminated double quote" },
		{ "http-request set-header X\r", "control character 0x0d" },
		{ "http-check connect addr 10.0.0.9 port 80", "health checks to another address" },
		{ "tcp-check connect port 22", "health checks to another address" },
		{ "http-request set-var(txn.ok) req.hdr(a),jwt_verify(RS256,/etc/x.pem)", "reads files" },
		/* haproxy decodes \xHH after tether's check: e\x6ev is env,
		 * \x6cua. is lua., fi\x6ce is file, tet\x68er_ is tether_ */
		{ "http-response set-header X %[e\\x6ev(HOME)]", "'\\x' escapes are refused" },
		{ "http-request \\x6cua.foo", "'\\x' escapes are refused" },
		{ "http-request return status 200 fi\\x6Ce /etc/passwd", "'\\x' escapes are refused" },
		{ "http-request set-var(txn.tet\\x68er_route) str(x)", "'\\x' escapes are refused" },
		{ "http-request set-header X \"a\\X41\"", "'\\x' escapes are refused" },
		/* "$.FILE" and "${.LINE}" are haproxy's own variables */
		{ "http-response set-header X \"$.FILE\"", "expands the consumer's environment" },
	};
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		haproxy_no(no[i].s, false, no[i].why);
		haproxy_no(no[i].s, true, "");
	}
	haproxy_no("http-response set-header X y\n\nbackend x", false, "line 3: 'backend' is refused");
}

static void test_haproxy_route(void **st)
{
	(void)st;
	haproxy_no("acl x path /", true, "line 1: 'acl': a route's haproxy snippet holds only http-request");
	haproxy_no("option httpchk", true, "only http-request and http-response");
	haproxy_no("http-request deny if x", true, "'if': a route's rule takes the route's condition");
	haproxy_no("http-request deny UNLESS x", true, "'unless'");
	haproxy_no("http-response set-header X y # why", true, "a comment after a route's rule");
	/* haproxy drops quotes before it looks for a condition: a quoted "if"
	 * would start one, and the route's appended "if {...}" would land
	 * inside an anonymous ACL of the snippet's ("path -m sub if { ..."),
	 * so the rule would act on every route's requests */
	haproxy_no("http-request deny \"if\" { path -m sub", true, "'if': a route's rule takes");
	haproxy_no("http-request deny 'unless' FALSE", true, "'unless': a route's rule takes");
	haproxy_no("http-request deny i\"f\" { path -m sub", true, "'if': a route's rule takes");
	haproxy_ok("http-response set-header X \"if only\"", true);
	haproxy_ok("http-request deny if x", false);
}

static int validate(const char *name, const char *json, unsigned flags)
{
	cJSON *v = cJSON_Parse(json);
	assert_non_null(v);
	err[0] = '\0';
	int rc = resource_validate(name, v, flags, NULL, err, sizeof(err));
	cJSON_Delete(v);
	return rc;
}

static void test_field(void **st)
{
	(void)st;
	assert_int_equal(validate("route/api", "{\"listener\":\"l\",\"cluster\":\"c\",\"snippet\":"
					       "{\"nginx\":\"add_header X y;\",\"haproxy\":\"http-response set-header X y\"}}",
				  RES_STRICT), 0);
	assert_int_equal(validate("listener/l", "{\"port\":80,\"snippet\":{\"nginx\":\"gzip on;\"}}", RES_STRICT), 0);
	assert_int_equal(validate("cluster/c", "{\"endpoints\":[],\"snippet\":{\"haproxy\":\"balance source\"}}",
				  RES_STRICT), 0);
	assert_int_equal(validate("route/api", "{\"listener\":\"l\",\"cluster\":\"c\",\"snippet\":{\"nginx\":"
					       "\"include /etc/passwd;\"}}", 0), -1);
	assert_string_equal(err, "route/api: snippet.nginx: line 1: 'include' is refused in a snippet: it reads or "
				 "writes files on the node (docs/protocol.md lists what is)");
	assert_int_equal(validate("cluster/c", "{\"endpoints\":[],\"snippet\":{\"haproxy\":\"server x 1.2.3.4:80\"}}",
				  0), -1);
	assert_string_equal(err, "cluster/c: snippet.haproxy: line 1: 'server' is refused in a snippet: it routes past "
				 "tether's listeners and clusters (docs/protocol.md lists what is)");
	assert_int_equal(validate("listener/l", "{\"port\":80,\"snippet\":\"gzip on;\"}", 0), -1);
	assert_string_equal(err, "listener/l: snippet must be an object: {\"nginx\": TEXT, \"haproxy\": TEXT}");
	assert_int_equal(validate("listener/l", "{\"port\":80,\"snippet\":{\"nginx\":1}}", 0), -1);
	assert_string_equal(err, "listener/l: snippet.nginx must be a string of nginx directives");
	assert_int_equal(validate("listener/l", "{\"port\":80,\"snippet\":{\"ngnix\":\"x\"}}", RES_STRICT), -1);
	assert_string_equal(err, "listener/l: snippet: unknown field 'ngnix' (known: nginx, haproxy)");
	/* without strict an unknown consumer is ignored, as unknown fields are */
	assert_int_equal(validate("listener/l", "{\"port\":80,\"snippet\":{\"ngnix\":\"x\"}}", 0), 0);
	/* a route's haproxy form */
	assert_int_equal(validate("route/r", "{\"listener\":\"l\",\"cluster\":\"c\",\"snippet\":{\"haproxy\":"
					     "\"acl x path /\"}}", 0), -1);
	assert_non_null(strstr(err, "route/r: snippet.haproxy: line 1: 'acl': a route's haproxy snippet"));
	/* a listener's nginx proxy_set_header would reach no location */
	assert_int_equal(validate("listener/l", "{\"port\":80,\"snippet\":{\"nginx\":\"gzip on;\\nproxy_set_header X-A b;\"}}",
				  0), -1);
	assert_string_equal(err, "listener/l: snippet.nginx: line 2: 'proxy_set_header' in a listener's snippet never "
				 "reaches a route (each route's location sets its own proxy headers, and nginx then "
				 "inherits none): set it in the route's headers.request.set or the route's snippet");
	assert_int_equal(validate("route/r", "{\"listener\":\"l\",\"cluster\":\"c\",\"snippet\":{\"nginx\":"
					     "\"proxy_set_header X-A b;\"}}", 0), 0);
	/* only listeners, routes and clusters have one */
	assert_int_equal(validate("file/f", "{\"path\":\"a\",\"content\":\"\",\"snippet\":{}}", RES_STRICT), -1);
	assert_non_null(strstr(err, "unknown field 'snippet'"));
}

static cJSON *body_of(const char *json)
{
	cJSON *v = cJSON_Parse(json);
	assert_non_null(v);
	return v;
}

static void test_render_nginx(void **st)
{
	(void)st;
	struct buf b = BUF_INIT;
	cJSON *v = body_of("{\"snippet\":{\"nginx\":\"add_header X y;\\n# why\\n\\nif ($a) {\\n  return 403;\\n}\"}}");
	assert_int_equal(render_snippet(&b, "route/api", v, "nginx", "        ", err, sizeof(err)), 0);
	assert_string_equal(b.data, "        #tether-snippet route/api snippet.nginx\n"
				    "        add_header X y;\n"
				    "        # why\n"
				    "        \n"
				    "        if ($a) {\n"
				    "          return 403;\n"
				    "        }\n"
				    "        #tether-snippet-end\n");
	buf_reset(&b);
	/* none, an empty one, the other consumer's: nothing */
	assert_int_equal(render_snippet(&b, "route/api", v, "haproxy", "    ", err, sizeof(err)), 0);
	assert_int_equal(b.len, 0);
	cJSON_Delete(v);
	v = body_of("{\"snippet\":{\"nginx\":\"\"}}");
	assert_int_equal(render_snippet(&b, "route/api", v, "nginx", "    ", err, sizeof(err)), 0);
	assert_int_equal(b.len, 0);
	cJSON_Delete(v);
	/* checked again before it is printed */
	v = body_of("{\"snippet\":{\"nginx\":\"} server { listen 81;\"}}");
	assert_int_equal(render_snippet(&b, "listener/l", v, "nginx", "    ", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "listener/l: snippet.nginx: line 1: '}' closes a block"));
	assert_int_equal(b.len, 0);
	cJSON_Delete(v);
	buf_release(&b);
}

static void test_render_haproxy_frontend(void **st)
{
	(void)st;
	struct buf b = BUF_INIT;
	static char lname[] = "listener/web";
	struct res lr = { .name = lname };
	struct rres l = { .r = &lr, .bare = "web",
			  .body = body_of("{\"port\":80,\"snippet\":{\"haproxy\":\"acl a path /a\\nhttp-request deny if a\"}}") };
	cJSON *r1 = body_of("{\"snippet\":{\"haproxy\":\"http-response set-header X-R one\\n# c\\n\\n"
			    "http-request set-header X-Q \\\"a b\\\"\"}}");
	cJSON *r2 = body_of("{}");
	struct rroute routes[2] = {
		{ "route/one", "*", "/one", "c", r1 },
		{ "route/two", "*", "/", "c", r2 },
	};
	assert_true(render_snippet_haproxy_any(&l, routes, 2));
	assert_true(render_snippet_haproxy_any(&(struct rres){ .r = &lr, .body = r2 }, routes, 1));
	assert_false(render_snippet_haproxy_any(&(struct rres){ .r = &lr, .body = r2 }, routes + 1, 1));
	assert_int_equal(render_snippet_haproxy_frontend(&b, &l, routes, 2, err, sizeof(err)), 0);
	assert_string_equal(b.data,
			    "    #tether-snippet route/one snippet.haproxy\n"
			    "    http-response set-header X-R one if { var(txn.tether_route) -m str route/one }\n"
			    "    # c\n"
			    "    \n"
			    "    http-request set-header X-Q \"a b\" if { var(txn.tether_route) -m str route/one }\n"
			    "    #tether-snippet-end\n"
			    "    #tether-snippet listener/web snippet.haproxy\n"
			    "    acl a path /a\n"
			    "    http-request deny if a\n"
			    "    #tether-snippet-end\n");
	buf_release(&b);
	cJSON_Delete(l.body);
	cJSON_Delete(r1);
	cJSON_Delete(r2);
}

static void test_checkmap(void **st)
{
	(void)st;
	static const char conf[] =
		"upstream tether_c_api {\n"                              /* 1 */
		"    server 10.0.0.1:80;\n"                              /* 2 */
		"    #tether-snippet cluster/api snippet.nginx\n"        /* 3 */
		"    keepalive 8;\n"                                     /* 4 */
		"    #tether-snippet-end\n"                              /* 5 */
		"}\n"                                                    /* 6 */
		"server {\n"                                             /* 7 */
		"    location ^~ /api {\n"                               /* 8 */
		"        # route/api\n"                                  /* 9 */
		"        proxy_pass http://tether_c_api;\n"              /* 10 */
		"        #tether-snippet route/api snippet.nginx\n"      /* 11 */
		"        # listener/other, a comment of the writer's\n"  /* 12 */
		"        add_headr X y;\n"                               /* 13 */
		"        #tether-snippet-end\n"                          /* 14 */
		"    }\n"                                                /* 15 */
		"    #tether-snippet listener/web snippet.nginx\n"       /* 16 */
		"    gzipp on;\n"                                        /* 17 */
		"    #tether-snippet-end\n"                              /* 18 */
		"}\n";                                                   /* 19 */
	char out[320];
	static const struct { unsigned long line; const char *owner; } want[] = {
		{ 2, "cluster/api: " }, { 4, "cluster/api: snippet.nginx: " }, { 6, "cluster/api: " },
		{ 10, "route/api: " }, { 12, "route/api: snippet.nginx: " }, { 13, "route/api: snippet.nginx: " },
		{ 15, "route/api: " }, { 17, "listener/web: snippet.nginx: " },
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		checkmap_owner(conf, want[i].line, out, sizeof(out));
		if (strcmp(out, want[i].owner) != 0)
			fail_msg("line %lu: '%s', want '%s'", want[i].line, out, want[i].owner);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nginx_passes),
		cmocka_unit_test(test_nginx_syntax),
		cmocka_unit_test(test_nginx_refused),
		cmocka_unit_test(test_haproxy_passes),
		cmocka_unit_test(test_haproxy_refused),
		cmocka_unit_test(test_haproxy_route),
		cmocka_unit_test(test_field),
		cmocka_unit_test(test_render_nginx),
		cmocka_unit_test(test_render_haproxy_frontend),
		cmocka_unit_test(test_checkmap),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
