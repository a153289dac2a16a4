/* test_certcheck.c: unit tests of plane/core/certcheck.c and of the
 * client write's validation (validate_write): a secret's certificate and
 * key parsed and matched, unknown fields refused unless allowed. The
 * pairs are self-signed P-256 test certificates made for this file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/certcheck.h"
#include "core/validate.h"
#include "json.h"
#include "xmalloc.h"

static const char cert_a[] =
	"-----BEGIN CERTIFICATE-----\n"
	"MIIBeTCCAR+gAwIBAgIUd9n6IjQ2MeloopeLKQHIIL9A47EwCgYIKoZIzj0EAwIw\n"
	"ETEPMA0GA1UEAwwGYS50ZXN0MCAXDTI2MTIwNjAxNTQwMloYDzIxMjYxMTEyMDE1\n"
	"NDAyWjARMQ8wDQYDVQQDDAZhLnRlc3QwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNC\n"
	"AAQxrnjVGRYyD/Rf3ndlZjwhJAtbVNJNCAdHWyLCk8v83iLgOyYvttBDwlmnqK67\n"
	"3i4SB8m8I3APgBlfDII8pBSIo1MwUTAdBgNVHQ4EFgQUUYlbLp2JM+mOdOye1BVq\n"
	"hL3G124wHwYDVR0jBBgwFoAUUYlbLp2JM+mOdOye1BVqhL3G124wDwYDVR0TAQH/\n"
	"BAUwAwEB/zAKBggqhkjOPQQDAgNIADBFAiAykrRn8B4V215yNpoXH3EjAogHXDxX\n"
	"mkVP+WINR779lwIhAMcV8IPYcUSTwYCAfXmMwqqzaB4SFZE1zNJY/xbvoLpv\n"
	"-----END CERTIFICATE-----\n";
static const char key_a[] =
	"-----BEGIN PRIVATE KEY-----\n"
	"MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgQbifiU9yq6OB8rre\n"
	"HZzWURKuUM26QvE3TfV0VGjdO8yhRANCAAQxrnjVGRYyD/Rf3ndlZjwhJAtbVNJN\n"
	"CAdHWyLCk8v83iLgOyYvttBDwlmnqK673i4SB8m8I3APgBlfDII8pBSI\n"
	"-----END PRIVATE KEY-----\n";
static const char cert_b[] =
	"-----BEGIN CERTIFICATE-----\n"
	"MIIBeTCCAR+gAwIBAgIUfjLDmfqz1J+ngwSQHKnBp8XPhigwCgYIKoZIzj0EAwIw\n"
	"ETEPMA0GA1UEAwwGYi50ZXN0MCAXDTI2MTIwNjAxNTQwMloYDzIxMjYxMTEyMDE1\n"
	"NDAyWjARMQ8wDQYDVQQDDAZiLnRlc3QwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNC\n"
	"AATC6u1RY/cE6IEMK3nqAX8crwHHPXe0bjSVmb7TY6gvMBwULE2Tilc6xRzKlgBI\n"
	"HbBKy84z5PGUoAWkCyujSwKto1MwUTAdBgNVHQ4EFgQUU4WPT7shuT12o5heYf+f\n"
	"f06TFQAwHwYDVR0jBBgwFoAUU4WPT7shuT12o5heYf+ff06TFQAwDwYDVR0TAQH/\n"
	"BAUwAwEB/zAKBggqhkjOPQQDAgNIADBFAiEApVJPar8gEYb0lcZtBsZJF3FmM3JK\n"
	"mzOyfOORXOQ7pN4CIC+K6KBPwJDXjQuFbt0wsiyg6Dmj+UyXdK5/ul81SO+0\n"
	"-----END CERTIFICATE-----\n";
static const char key_b[] =
	"-----BEGIN PRIVATE KEY-----\n"
	"MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgODZfj9ehp6mK1CNZ\n"
	"y0yrI0c6jVD5Y2T487u38T27Vt6hRANCAATC6u1RY/cE6IEMK3nqAX8crwHHPXe0\n"
	"bjSVmb7TY6gvMBwULE2Tilc6xRzKlgBIHbBKy84z5PGUoAWkCyujSwKt\n"
	"-----END PRIVATE KEY-----\n";

static void test_pair_matches(void **state)
{
	(void)state;
	char err[512] = "";
	assert_int_equal(certcheck_pair("secret/a", cert_a, key_a, err, sizeof(err)), 0);
	assert_int_equal(certcheck_pair("secret/b", cert_b, key_b, err, sizeof(err)), 0);
}

static void expect_refused(const char *cert, const char *key, const char *prefix)
{
	char err[512] = "";
	assert_int_equal(certcheck_pair("secret/site", cert, key, err, sizeof(err)), -1);
	if (strncmp(err, prefix, strlen(prefix)) != 0)
		fail_msg("got '%s', want it to start with '%s'", err, prefix);
	/* never the key's text */
	assert_null(strstr(err, "MIG"));
}

static void test_garbage_cert_refused(void **state)
{
	(void)state;
	expect_refused("-----BEGIN CERTIFICATE-----\nTm90IGEgY2VydGlmaWNhdGU@@@garbage!!!***\n-----END CERTIFICATE-----\n",
		       key_a, "secret/site: cert: not a PEM certificate");
	expect_refused("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", key_a,
		       "secret/site: cert: not a PEM certificate");
	expect_refused("-----BEGIN NOTHING-----\n", key_a, "secret/site: cert: not a PEM certificate");
	/* a key where the certificate goes */
	expect_refused(key_a, key_a, "secret/site: cert: not a PEM certificate");
}

static void test_garbage_key_refused(void **state)
{
	(void)state;
	expect_refused(cert_a, "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n",
		       "secret/site: key: not a PEM private key");
	expect_refused(cert_a, cert_a, "secret/site: key: not a PEM private key");
}

static void test_mismatched_key_refused(void **state)
{
	(void)state;
	expect_refused(cert_a, key_b, "secret/site: key: does not match the certificate");
	expect_refused(cert_b, key_a, "secret/site: key: does not match the certificate");
}

static void test_chain_taken(void **state)
{
	(void)state;
	/* the leaf first, then the rest of a chain: each must parse, and the
	 * key is the leaf's (the first one's) */
	char *two = xasprintf("%s%s", cert_a, cert_b);
	char err[512] = "";
	assert_int_equal(certcheck_pair("secret/c", two, key_a, err, sizeof(err)), 0);
	assert_int_equal(certcheck_pair("secret/c", two, key_b, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "secret/c: key: does not match the certificate (the first one in cert)"));
	free(two);
	/* a good leaf followed by garbage is refused */
	char *bad = xasprintf("%s-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", cert_a);
	assert_int_equal(certcheck_pair("secret/c", bad, key_a, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "secret/c: cert: not a PEM certificate"));
	free(bad);
}

static int write_one(const char *name, const char *json, unsigned flags, char *err, size_t errlen)
{
	char jerr[128];
	cJSON *body = json_decode(json, strlen(json), NULL, jerr, sizeof(jerr));
	if (!body)
		fail_msg("test body does not parse: %s", jerr);
	struct store_change ch;
	int rc = validate_write(name, body, flags, &ch, err, errlen);
	if (rc == 0)
		free(ch.body);
	cJSON_Delete(body);
	return rc;
}

static void test_validate_write(void **state)
{
	(void)state;
	char err[512];
	/* a secret's pair checked on every write, strict or not */
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "cert", cert_a);
	cJSON_AddStringToObject(o, "key", key_b);
	char *bad = cJSON_PrintUnformatted(o);
	cJSON_ReplaceItemInObject(o, "key", cJSON_CreateString(key_a));
	char *good = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	assert_int_equal(write_one("secret/s", bad, 0, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "secret/s: key: does not match"));
	assert_int_equal(write_one("secret/s", bad, VALIDATE_STRICT, err, sizeof(err)), -1);
	assert_int_equal(write_one("secret/s", good, VALIDATE_STRICT, err, sizeof(err)), 0);
	/* the schema's errors come first: a missing key is named as such */
	assert_int_equal(write_one("secret/s", "{\"cert\":\"-----BEGIN C\"}", 0, err, sizeof(err)), -1);
	assert_string_equal(err, "secret/s: missing field 'key'");
	cJSON_free(bad);
	cJSON_free(good);
	/* unknown fields: refused strict, with the nearest; kept without */
	const char *w = "{\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":80,\"wieght\":5}]}";
	assert_int_equal(write_one("cluster/web", w, VALIDATE_STRICT, err, sizeof(err)), -1);
	assert_string_equal(err, "cluster/web: endpoints[0]: unknown field 'wieght' (did you mean 'weight'?)");
	assert_int_equal(write_one("cluster/web", w, 0, err, sizeof(err)), 0);
	/* a sealed secret is not opened here: its form is the schema's */
	assert_int_equal(write_one("secret/x", "{\"sealed\":{},\"wraps\":{}}", VALIDATE_STRICT, err, sizeof(err)), -1);
	assert_null(strstr(err, "cert:"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pair_matches),
		cmocka_unit_test(test_garbage_cert_refused),
		cmocka_unit_test(test_garbage_key_refused),
		cmocka_unit_test(test_mismatched_key_refused),
		cmocka_unit_test(test_chain_taken),
		cmocka_unit_test(test_validate_write),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
