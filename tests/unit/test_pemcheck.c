/* test_pemcheck.c: pemcheck_pair reads a TLS secret as the consumers
 * will: a certificate and its key pass (PKCS#8 and the traditional EC
 * form, a chain after the certificate); a PEM header round garbage, a
 * missing certificate, a bad certificate in the chain, a chain of more than
 * 16, a bad or encrypted key and a key of another certificate are refused
 * naming the secret and the field, and never quote the key. The plane's
 * client write (validate_write) checks a plaintext secret with it. The
 * fixtures: self-signed P-256 certificates (openssl req, 100 years) and
 * keys made for this test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pemcheck.h"
#include "core/validate.h"
#include "json.h"
#include "xmalloc.h"

static const char cert1[] =
	"-----BEGIN CERTIFICATE-----\n"
	"MIIBdDCCARugAwIBAgIUGLS4L91Ksws4+YKI6TlnghWiqbAwCgYIKoZIzj0EAwIw\n"
	"DzENMAsGA1UEAwwEc2l0ZTAgFw0yNjEyMDYwMTU2NDJaGA8yMTI2MTExMjAxNTY0\n"
	"MlowDzENMAsGA1UEAwwEc2l0ZTBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABGgC\n"
	"0ToWjrlap0MSZS/aiCcYffHM44bGbD7BNVFleKpaDvYR0AhTlgSTDWsVf20glpcJ\n"
	"2/cyABCe7IBHRzpn5SujUzBRMB0GA1UdDgQWBBRikrzm49D58V5WK8hFsuhO0+PV\n"
	"DjAfBgNVHSMEGDAWgBRikrzm49D58V5WK8hFsuhO0+PVDjAPBgNVHRMBAf8EBTAD\n"
	"AQH/MAoGCCqGSM49BAMCA0cAMEQCIFAbTqKHS6klEtfqEa9n9lHke41uXJyE1y9W\n"
	"KUIvJixhAiBsK2PkttyDBxrBAv+dzdvBCMhDgXspcn2fq86WvKRzbw==\n"
	"-----END CERTIFICATE-----\n";
static const char key1[] =
	"-----BEGIN PRIVATE KEY-----\n"
	"MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg3wefCF2ugj6yOw02\n"
	"MY8ZlcnY6psnPTjDAOvKqaRA/MahRANCAARoAtE6Fo65WqdDEmUv2ognGH3xzOOG\n"
	"xmw+wTVRZXiqWg72EdAIU5YEkw1rFX9tIJaXCdv3MgAQnuyAR0c6Z+Ur\n"
	"-----END PRIVATE KEY-----\n";
static const char key1_trad[] =
	"-----BEGIN EC PRIVATE KEY-----\n"
	"MHcCAQEEIN8HnwhdroI+sjsNNjGPGZXJ2OqbJz04wwDryqmkQPzGoAoGCCqGSM49\n"
	"AwEHoUQDQgAEaALROhaOuVqnQxJlL9qIJxh98czjhsZsPsE1UWV4qloO9hHQCFOW\n"
	"BJMNaxV/bSCWlwnb9zIAEJ7sgEdHOmflKw==\n"
	"-----END EC PRIVATE KEY-----\n";
static const char key2[] =
	"-----BEGIN PRIVATE KEY-----\n"
	"MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgFI0sUy3o0ywPtU9+\n"
	"H7NKlWxrxr/RA+zA9j8rh7rFltOhRANCAARlxsLA3Py8SxZMnjbZqt5n4h5jqSJa\n"
	"fLS2TdqXM3J3Xi4NqiYlhmBukKWLAZwCiKuIsomwbVid4BIYfW9fp7RI\n"
	"-----END PRIVATE KEY-----\n";

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

static void expect_refused(const char *cert, const char *key, const char *want_prefix)
{
	char err[512] = "";
	assert_int_equal(pemcheck_pair("secret/site", cert, key, err, sizeof(err)), -1);
	if (strncmp(err, want_prefix, strlen(want_prefix)) != 0)
		fail_msg("'%s' does not start with '%s'", err, want_prefix);
	assert_null(strstr(err, "MIG"));   /* no key or certificate text */
	assert_null(strstr(err, "MHc"));
}

static void test_good_pairs(void **state)
{
	(void)state;
	char err[512] = "";
	assert_int_equal(pemcheck_pair("secret/site", cert1, key1, err, sizeof(err)), 0);
	assert_int_equal(pemcheck_pair("secret/site", cert1, key1_trad, err, sizeof(err)), 0);
	/* a chain: the server's certificate first (a second copy stands for the CA) */
	char chain[sizeof(cert1) * 2];
	snprintf(chain, sizeof(chain), "%s%s", cert1, cert1);
	assert_int_equal(pemcheck_pair("secret/site", chain, key1, err, sizeof(err)), 0);
	assert_string_equal(err, "");
}

static void test_bad_cert(void **state)
{
	(void)state;
	/* the case: a PEM header round garbage */
	expect_refused("-----BEGIN CERTIFICATE-----\nTm90IGEgY2VydGlmaWNhdGU@@@garbage!!!***\n-----END CERTIFICATE-----\n",
		       key1, "secret/site: cert: not a PEM certificate (");
	expect_refused("-----BEGIN CERTIFICATE-----\nTm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n", key1,
		       "secret/site: cert: not a PEM certificate (");
	expect_refused("", key1, "secret/site: cert: not a PEM certificate (");
	/* a key where the certificate goes */
	expect_refused(key1, key1, "secret/site: cert: not a PEM certificate (");
}

static void test_bad_key(void **state)
{
	(void)state;
	expect_refused(cert1, "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5@@@garbage!!!***\n-----END PRIVATE KEY-----\n",
		       "secret/site: key: not a PEM private key (");
	expect_refused(cert1, "", "secret/site: key: not a PEM private key (");
	expect_refused(cert1, cert1, "secret/site: key: not a PEM private key (");
	char err[512];
	pemcheck_pair("secret/site", cert1, "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5@@@garbage!!!***\n-----END PRIVATE KEY-----\n",
		      err, sizeof(err));
	assert_null(strstr(err, "bm90IGEga2V5"));
}

static void test_key_of_another_cert(void **state)
{
	(void)state;
	expect_refused(cert1, key2, "secret/site: key: does not match cert (");
}

static void test_pairs_of_the_plane(void **state)
{
	(void)state;
	char err[512] = "";
	assert_int_equal(pemcheck_pair("secret/a", cert_a, key_a, err, sizeof(err)), 0);
	assert_int_equal(pemcheck_pair("secret/b", cert_b, key_b, err, sizeof(err)), 0);
	expect_refused(cert_a, key_b, "secret/site: key: does not match cert (");
	expect_refused(cert_b, key_a, "secret/site: key: does not match cert (");
	expect_refused("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", key_a,
		       "secret/site: cert: not a PEM certificate (");
	expect_refused("-----BEGIN NOTHING-----\n", key_a, "secret/site: cert: not a PEM certificate (");
	expect_refused(cert_a, "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n",
		       "secret/site: key: not a PEM private key (");
}

static void test_chain(void **state)
{
	(void)state;
	/* the leaf first, then the rest of a chain: each must parse, and the
	 * key is the leaf's (the first one's) */
	char *two = xasprintf("%s%s", cert_a, cert_b);
	char err[512] = "";
	assert_int_equal(pemcheck_pair("secret/c", two, key_a, err, sizeof(err)), 0);
	assert_int_equal(pemcheck_pair("secret/c", two, key_b, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "secret/c: key: does not match cert (the first certificate's"));
	free(two);
	/* a good leaf followed by garbage is refused */
	char *bad = xasprintf("%s-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", cert_a);
	expect_refused(bad, key_a, "secret/site: cert: not a PEM certificate (");
	free(bad);
	/* 16 certificates pass, 17 are refused with the count */
	char *chain = xstrdup("");
	for (int i = 0; i < 17; i++) {
		if (i == 16)
			assert_int_equal(pemcheck_pair("secret/c", chain, key_a, err, sizeof(err)), 0);
		char *more = xasprintf("%s%s", chain, cert_a);
		free(chain);
		chain = more;
	}
	expect_refused(chain, key_a, "secret/site: cert: a chain of 17 certificates; at most 16 (");
	free(chain);
}

static void test_encrypted_key(void **state)
{
	(void)state;
	expect_refused(cert_a,
		       "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIHsMFcGCSqGSIb3DQEFDTBKMCkGCSqGSIb3DQEFDDAcBAhQ\n"
		       "-----END ENCRYPTED PRIVATE KEY-----\n",
		       "secret/site: key: encrypted (");
	expect_refused(cert_a,
		       "-----BEGIN EC PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\n"
		       "MHcCAQEEIN8HnwhdroI+sjsNNjGPGZXJ2OqbJz04wwDryqmkQPzGoAoGCCqGSM49\n-----END EC PRIVATE KEY-----\n",
		       "secret/site: key: encrypted (");
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
	assert_non_null(strstr(err, "secret/s: key: does not match cert ("));
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
		cmocka_unit_test(test_good_pairs),
		cmocka_unit_test(test_bad_cert),
		cmocka_unit_test(test_bad_key),
		cmocka_unit_test(test_key_of_another_cert),
		cmocka_unit_test(test_pairs_of_the_plane),
		cmocka_unit_test(test_chain),
		cmocka_unit_test(test_encrypted_key),
		cmocka_unit_test(test_validate_write),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
