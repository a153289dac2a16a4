/* test_checkmap.c: a checker's refusal naming a secret file tether
 * rendered (nginx -t's and haproxy -c's own words) maps to the secret and
 * the field; one naming no such file maps to nothing. */
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
	char out[8] = "x";
	checkmap_prefix("anything", "", out, sizeof(out));
	assert_string_equal(out, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nginx),
		cmocka_unit_test(test_haproxy),
		cmocka_unit_test(test_no_secret_file),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
