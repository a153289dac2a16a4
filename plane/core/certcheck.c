/* core/certcheck.c: a plaintext secret's certificate and key parsed and
 * matched (see certcheck.h). */
#include "core/certcheck.h"

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdio.h>
#include <string.h>

#define CHAIN_MAX 16

int certcheck_pair(const char *name, const char *cert, const char *key, char *err, size_t errlen)
{
	gnutls_x509_crt_t *crts = NULL;
	unsigned ncrts = 0;
	gnutls_x509_privkey_t pk = NULL;
	int rc = -1, r;
	gnutls_datum_t cd = { (unsigned char *)cert, (unsigned)strlen(cert) };
	gnutls_datum_t kd = { (unsigned char *)key, (unsigned)strlen(key) };

	/* the order of a chain is the server's to send, not checked here */
	r = gnutls_x509_crt_list_import2(&crts, &ncrts, &cd, GNUTLS_X509_FMT_PEM, 0);
	if (r < 0 || ncrts == 0) {
		snprintf(err, errlen, "%s: cert: not a PEM certificate (%s); give the certificate, then any chain, "
			 "as -----BEGIN CERTIFICATE----- blocks", name,
			 gnutls_strerror(r < 0 ? r : GNUTLS_E_BASE64_DECODING_ERROR));
		goto out;
	}
	if (ncrts > CHAIN_MAX) {
		snprintf(err, errlen, "%s: cert: a chain of %u certificates; at most %d", name, ncrts, CHAIN_MAX);
		goto out;
	}
	if (gnutls_x509_privkey_init(&pk) < 0) {
		snprintf(err, errlen, "%s: key: cannot be checked (out of memory)", name);
		goto out;
	}
	/* no password: an encrypted key is refused (the node has none either) */
	r = gnutls_x509_privkey_import2(pk, &kd, GNUTLS_X509_FMT_PEM, NULL, GNUTLS_PKCS_PLAIN);
	if (r < 0) {
		snprintf(err, errlen, "%s: key: not a PEM private key (%s); give an unencrypted key as a "
			 "-----BEGIN PRIVATE KEY----- (or RSA/EC PRIVATE KEY) block", name, gnutls_strerror(r));
		goto out;
	}
	unsigned char cid[64], kid[64];
	size_t clen = sizeof(cid), klen = sizeof(kid);
	if (gnutls_x509_crt_get_key_id(crts[0], GNUTLS_KEYID_USE_SHA256, cid, &clen) < 0 ||
	    gnutls_x509_privkey_get_key_id(pk, GNUTLS_KEYID_USE_SHA256, kid, &klen) < 0) {
		snprintf(err, errlen, "%s: key: its public part cannot be compared with the certificate's "
			 "(an unsupported algorithm?)", name);
		goto out;
	}
	if (clen != klen || memcmp(cid, kid, clen) != 0) {
		snprintf(err, errlen, "%s: key: does not match the certificate (the first one in cert): give the key "
			 "the certificate was issued for", name);
		goto out;
	}
	rc = 0;
out:
	if (pk)
		gnutls_x509_privkey_deinit(pk);
	for (unsigned i = 0; i < ncrts; i++)
		gnutls_x509_crt_deinit(crts[i]);
	gnutls_free(crts);
	return rc;
}
