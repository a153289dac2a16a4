/* pemcheck.c: a TLS secret's certificate and key parsed and matched (see
 * pemcheck.h). */
#include "pemcheck.h"

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* At most this many certificates in cert (the server's and its chain). */
#define PEMCHECK_CHAIN_MAX 16

/* GnuTLS's words for rc without their final period, in out[cap]. */
static const char *why(int rc, char *out, size_t cap)
{
	snprintf(out, cap, "%s", gnutls_strerror(rc));
	size_t n = strlen(out);
	if (n && out[n - 1] == '.')
		out[n - 1] = '\0';
	return out;
}

/* The first certificate of cert, or NULL with err set. */
static gnutls_x509_crt_t first_cert(const char *name, const char *cert, char *err, size_t errlen)
{
	gnutls_x509_crt_t *list = NULL;
	unsigned n = 0;
	gnutls_datum_t d = { (unsigned char *)(uintptr_t)cert, (unsigned)strlen(cert) };
	int rc = strstr(cert, "-----BEGIN CERTIFICATE-----") || strstr(cert, "-----BEGIN X509 CERTIFICATE-----")
			 ? gnutls_x509_crt_list_import2(&list, &n, &d, GNUTLS_X509_FMT_PEM, 0)
			 : GNUTLS_E_BASE64_UNEXPECTED_HEADER_ERROR;
	if (rc < 0 || n == 0) {
		char w[128];
		snprintf(err, errlen,
			 "%s: cert: not a PEM certificate (%s; put the server's certificate, "
			 "-----BEGIN CERTIFICATE----- ... -----END CERTIFICATE-----, then its chain)",
			 name, rc < 0 ? why(rc, w, sizeof(w)) : "no certificate in it");
		return NULL;
	}
	gnutls_x509_crt_t c = list[0];
	if (n > PEMCHECK_CHAIN_MAX) {
		snprintf(err, errlen,
			 "%s: cert: a chain of %u certificates; at most %d (put the server's certificate, then "
			 "only the intermediates it needs)",
			 name, n, PEMCHECK_CHAIN_MAX);
		gnutls_x509_crt_deinit(c);
		c = NULL;
	}
	for (unsigned i = 1; i < n; i++)
		gnutls_x509_crt_deinit(list[i]);
	gnutls_free(list);
	return c;
}

int pemcheck_pair(const char *name, const char *cert, const char *key, char *err, size_t errlen)
{
	int ret = -1;
	gnutls_x509_privkey_t k = NULL;
	gnutls_x509_crt_t c = first_cert(name, cert, err, errlen);
	if (!c)
		return -1;
	if (gnutls_x509_privkey_init(&k) < 0) {
		snprintf(err, errlen, "%s: key: cannot be checked (out of memory)", name);
		goto out;
	}
	if (strstr(key, "-----BEGIN ENCRYPTED PRIVATE KEY-----") || strstr(key, "Proc-Type: 4,ENCRYPTED")) {
		snprintf(err, errlen,
			 "%s: key: encrypted (no node has its password; put it unencrypted, e.g. the output of "
			 "openssl pkey -in KEY)",
			 name);
		goto out;
	}
	gnutls_datum_t d = { (unsigned char *)(uintptr_t)key, (unsigned)strlen(key) };
	int rc = strstr(key, "-----BEGIN ") ? gnutls_x509_privkey_import2(k, &d, GNUTLS_X509_FMT_PEM, NULL,
									   GNUTLS_PKCS_PLAIN)
					  : GNUTLS_E_BASE64_UNEXPECTED_HEADER_ERROR;
	if (rc < 0) {
		char w[128];
		snprintf(err, errlen,
			 "%s: key: not a PEM private key (%s; put the certificate's unencrypted key, "
			 "-----BEGIN PRIVATE KEY----- ... -----END PRIVATE KEY-----, or RSA/EC PRIVATE KEY)",
			 name, why(rc, w, sizeof(w)));
		goto out;
	}
	unsigned char a[64], b[64];
	size_t alen = sizeof(a), blen = sizeof(b);
	if (gnutls_x509_crt_get_key_id(c, 0, a, &alen) < 0 || gnutls_x509_privkey_get_key_id(k, 0, b, &blen) < 0) {
		snprintf(err, errlen, "%s: key: cannot be compared with cert (an unsupported key type)", name);
		goto out;
	}
	if (alen != blen || memcmp(a, b, alen) != 0) {
		snprintf(err, errlen,
			 "%s: key: does not match cert (the first certificate's public key is another key's; "
			 "put that certificate's own key, or the certificate first in cert)",
			 name);
		goto out;
	}
	ret = 0;
out:
	if (k)
		gnutls_x509_privkey_deinit(k);
	gnutls_x509_crt_deinit(c);
	return ret;
}
