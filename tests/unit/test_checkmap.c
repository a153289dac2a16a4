/* test_checkmap.c: a checker's refusal naming a secret file tether
 * rendered (nginx -t's and haproxy -c's own words) maps to the secret and
 * the field; one naming no such file maps to nothing. A line of a
 * configuration tether rendered maps to the resource it belongs to. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>
#include "consumer/checkmap.h"

static const char *map(const char *output)
{
	static char out[320];
	checkmap_prefix(output, "/var/lib/tether/secrets", out, sizeof(out));
	return out;
}

static void test_nginx(void **state)
{
	(void)state;
	assert_string_equal(map("exit 1: nginx: [emerg] SSL_CTX_use_certificate(\"/var/lib/tether/secrets/"
				"site-0123456789abcdef.crt\") failed (SSL: error:0A00018F:SSL routines::ee key too small)\n"
				"nginx: configuration file /x/check.nginx test failed"),
			    "secret/site: cert: ");
	assert_string_equal(map("nginx: [emerg] cannot load certificate key \"/var/lib/tether/secrets/"
				"web.v2-fedcba9876543210.key\": PEM_read_bio_PrivateKey() failed"),
			    "secret/web.v2: key: ");
}

static void test_haproxy(void **state)
{
	(void)state;
	assert_string_equal(map("[ALERT] (1) : config : parsing [/g/tether.cfg:12] : 'bind :8443' in frontend "
				"'tether_l_web' : 'crt' : unable to load SSL private key from PEM file "
				"'/var/lib/tether/secrets/site-0123456789abcdef.pem'."),
			    "secret/site: key: ");
	assert_string_equal(map("[ALERT] : 'crt' : unable to load certificate from file "
				"'/var/lib/tether/secrets/site-0123456789abcdef.pem'"),
			    "secret/site: cert: ");
}

static void test_no_secret_file(void **state)
{
	(void)state;
	assert_string_equal(map("nginx: [emerg] unknown directive \"x\" in /g/check.nginx:3"), "");
	/* another directory, a name without the hash, a hash too short, an unknown extension */
	assert_string_equal(map("\"/etc/ssl/site-0123456789abcdef.crt\""), "");
	assert_string_equal(map("\"/var/lib/tether/secrets/site.crt\""), "");
	assert_string_equal(map("\"/var/lib/tether/secrets/site-0123456789abcde.crt\""), "");
	assert_string_equal(map("\"/var/lib/tether/secrets/site-0123456789abcdef.txt\""), "");
	assert_string_equal(map("/var/lib/tether/secretsX/site-0123456789abcdef.crt"), "");
	/* the directory's path as the tail of another path is not ours */
	assert_string_equal(map("\"/home/x/var/lib/tether/secrets/site-0123456789abcdef.crt\""), "");
	assert_string_equal(map("\"/home/x/var/lib/tether/secrets/a-0123456789abcdef.crt\" and "
				"\"/var/lib/tether/secrets/site-0123456789abcdef.key\""),
			    "secret/site: key: ");
	char out[8] = "x";
	checkmap_prefix("anything", "", out, sizeof(out));
	assert_string_equal(out, "");
}

static void test_file_line(void **state)
{
	(void)state;
	char file[128];
	unsigned long line = 0;
	assert_true(checkmap_file_line("nginx: [emerg] unknown directive \"x\" in /o/gen-1/tether.conf:12\n"
				       "nginx: configuration file /o/gen-1/check.nginx test failed",
				       "/o/gen-1", file, sizeof(file), &line));
	assert_string_equal(file, "tether.conf");
	assert_int_equal(line, 12);
	assert_true(checkmap_file_line("[ALERT] (1) : config : parsing [/o/gen-2/tether.cfg:5] : 'bind' ...", "/o/gen-2",
				       file, sizeof(file), &line));
	assert_string_equal(file, "tether.cfg");
	assert_int_equal(line, 5);
	/* another directory (the operator's base config), no line, a subfolder */
	assert_false(checkmap_file_line("parsing [/etc/haproxy/haproxy.cfg:5]", "/o/gen-2", file, sizeof(file), &line));
	assert_false(checkmap_file_line("in /o/gen-2/tether.cfg", "/o/gen-2", file, sizeof(file), &line));
	assert_false(checkmap_file_line("in /o/gen-2/sub/x.conf:3", "/o/gen-2", file, sizeof(file), &line));
	assert_false(checkmap_file_line("in /o/gen-2/x.conf:0", "/o/gen-2", file, sizeof(file), &line));
	assert_false(checkmap_file_line("in /srv/o/gen-2/tether.cfg:3", "/o/gen-2", file, sizeof(file), &line));
}

/* the shapes render_nginx and render_haproxy write */
static const char nginx_conf[] =
	"upstream tether_c_web__a_pi {\n"          /* 1: cluster/web_aPi */
	"    server 127.0.0.1:9000;\n"             /* 2 */
	"}\n"                                      /* 3 */
	"# listener/main, host example.com\n"      /* 4 */
	"server {\n"                               /* 5 */
	"    listen 80;\n"                         /* 6 */
	"    location ^~ /api {\n"                 /* 7 */
	"        # route/api\n"                    /* 8 */
	"        proxy_pass http://tether_c_web;\n" /* 9 */
	"    }\n"                                  /* 10 */
	"}\n"                                      /* 11 */
	"# listener/other, any other host\n"       /* 12 */
	"server {\n"                               /* 13 */
	"}\n"                                      /* 14 */
	"# the agent reads this to see which generation serves\n" /* 15 */
	"server {\n"                               /* 16 */
	"    listen 127.0.0.1:9999;\n"             /* 17 */
	"}\n";                                     /* 18 */

static const char haproxy_conf[] =
	"backend tether_c_web\n"                   /* 1 */
	"    mode http\n"                          /* 2 */
	"frontend tether_l_main\n"                 /* 3 */
	"    bind :80\n"                           /* 4 */
	"    # route/api\n"                        /* 5 */
	"    use_backend tether_c_web if x\n"      /* 6 */
	"backend tether_not_found\n"               /* 7 */
	"    mode http\n"                          /* 8 */
	"# the agent reads this to see which generation serves\n" /* 9 */
	"frontend tether_marker\n"                 /* 10 */
	"    bind 127.0.0.1:9999\n"                /* 11 */
	"backend tether_r_slow.v2\n"               /* 12: a route's own backend */
	"    timeout server 500ms\n";              /* 13 */

static const char *owner(const char *conf, unsigned long line)
{
	static char out[320];
	checkmap_owner(conf, line, out, sizeof(out));
	return out;
}

static void test_owner(void **state)
{
	(void)state;
	assert_string_equal(owner(nginx_conf, 2), "cluster/web_aPi: ");
	assert_string_equal(owner(nginx_conf, 6), "listener/main: ");
	assert_string_equal(owner(nginx_conf, 7), "route/api: ");   /* the location line: its route */
	assert_string_equal(owner(nginx_conf, 9), "route/api: ");
	assert_string_equal(owner(nginx_conf, 11), "route/api: ");   /* the server's end: no next owner */
	assert_string_equal(owner(nginx_conf, 12), "listener/other: ");
	assert_string_equal(owner(haproxy_conf, 2), "cluster/web: ");
	assert_string_equal(owner(haproxy_conf, 4), "listener/main: ");
	assert_string_equal(owner(haproxy_conf, 6), "route/api: ");
	/* tether's own parts after the resources' are none's (the marker, the fallback) */
	assert_string_equal(owner(nginx_conf, 13), "listener/other: ");
	assert_string_equal(owner(nginx_conf, 17), "");
	assert_string_equal(owner(haproxy_conf, 8), "");
	assert_string_equal(owner(haproxy_conf, 11), "");
	assert_string_equal(owner(haproxy_conf, 12), "route/slow.v2: ");
	assert_string_equal(owner(haproxy_conf, 13), "route/slow.v2: ");
	/* nothing above: none; a comment that names no resource: none */
	assert_string_equal(owner("events {}\n# the agent reads this\nx;\n", 3), "");
	assert_string_equal(owner("# traffic stats: one line\nx;\n", 2), "");
	assert_string_equal(owner("# nosuchtype/x\nx;\n", 2), "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nginx),
		cmocka_unit_test(test_haproxy),
		cmocka_unit_test(test_no_secret_file),
		cmocka_unit_test(test_file_line),
		cmocka_unit_test(test_owner),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
