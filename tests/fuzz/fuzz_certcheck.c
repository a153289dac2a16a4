/* fuzz_certcheck.c: libFuzzer target for a secret's certificate and key
 * check (plane/core/certcheck.c, GnuTLS's PEM and DER parsers under it).
 * Input: the cert text, a NUL byte, the key text (no NUL: the whole input
 * is the cert, the key empty). Properties: nothing crashes or leaks; a
 * refusal is one of certcheck's own messages, naming the resource and
 * "cert:" or "key:", with nothing of the input in it (only GnuTLS's
 * fixed words in the parentheses, or a count): no key text can leak. */
#include "fuzz.h"
#include "core/certcheck.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what, const char *detail)
{
	fprintf(stderr, "fuzz_certcheck: %s\n  detail: %.512s\n", what, detail ? detail : "");
	abort();
}

/* Whether s is pre, then a middle of at most 200 bytes (from allowed, or
 * with allowed NULL any printable ASCII: gnutls_strerror's words), then post. */
static bool shaped(const char *s, const char *pre, const char *post, const char *allowed)
{
	size_t lp = strlen(pre), lq = strlen(post), ls = strlen(s);
	if (ls < lp + lq || strncmp(s, pre, lp) != 0 || strcmp(s + ls - lq, post) != 0)
		return false;
	size_t mid = ls - lp - lq;
	if (mid > 200)
		return false;
	for (size_t i = lp; i < lp + mid; i++)
		if (allowed ? !strchr(allowed, s[i]) : (s[i] < 0x20 || s[i] > 0x7e))
			return false;
	return true;
}

/* certcheck.c's messages; the parentheses hold gnutls_strerror's words */
static bool known_message(const char *e)
{
	static const char digits[] = "0123456789";
	return shaped(e, "secret/f: cert: not a PEM certificate (",
		      "); give the certificate, then any chain, as -----BEGIN CERTIFICATE----- blocks", NULL) ||
	       shaped(e, "secret/f: cert: a chain of ", " certificates; at most 16", digits) ||
	       strcmp(e, "secret/f: key: cannot be checked (out of memory)") == 0 ||
	       shaped(e, "secret/f: key: not a PEM private key (",
		      "); give an unencrypted key as a -----BEGIN PRIVATE KEY----- (or RSA/EC PRIVATE KEY) block",
		      NULL) ||
	       strcmp(e, "secret/f: key: its public part cannot be compared with the certificate's (an unsupported "
			 "algorithm?)") == 0 ||
	       strcmp(e, "secret/f: key: does not match the certificate (the first one in cert): give the key the "
			 "certificate was issued for") == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, 0, size);
	size_t clen = nul ? (size_t)(nul - data) : size;
	size_t klen = nul ? size - clen - 1 : 0;
	char *cert = malloc(clen + 1), *key = malloc(klen + 1);
	if (!cert || !key)
		abort();
	memcpy(cert, data, clen);
	cert[clen] = '\0';
	if (klen)
		memcpy(key, nul + 1, klen);
	key[klen] = '\0';
	/* the plane passes C strings: a NUL inside the key ends it */
	char err[1024] = "";
	int rc = certcheck_pair("secret/f", cert, key, err, sizeof(err));
	if (rc != 0 && rc != -1)
		die("certcheck_pair returned neither 0 nor -1", NULL);
	if (rc < 0 && !known_message(err))
		die("a refusal that is not one of certcheck's messages", err);
	free(cert);
	free(key);
	return 0;
}
