/* test_pemcheck.c: pemcheck_pair reads a TLS secret as the consumers
 * will: a certificate and its key pass (PKCS#8 and the traditional EC
 * form, a chain after the certificate); a PEM header round garbage, a
 * missing certificate, a bad key and a key of another certificate are
 * refused naming the secret and the field, and never quote the key. The
 * fixtures: a self-signed P-256 certificate (openssl req, 100 years) and
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good_pairs),
		cmocka_unit_test(test_bad_cert),
		cmocka_unit_test(test_bad_key),
		cmocka_unit_test(test_key_of_another_cert),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
