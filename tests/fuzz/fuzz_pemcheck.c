/* fuzz_pemcheck.c: libFuzzer target for what the agent reads of a TLS
 * secret and of a checker's refusal: pemcheck_pair (the input split at
 * the first NUL byte into cert and key, the second empty without one) and
 * checkmap_prefix, checkmap_file_line and checkmap_owner (the whole input
 * as a checker's output and as a rendered configuration). Nothing
 * crashes; a refusal is one of pemcheck's own messages (nothing of the
 * input in it: only GnuTLS's fixed words in the parentheses, or a count),
 * naming the secret and a field; the error never holds a line of the key's
 * text (one of 16 bytes or more without a space or a '-', as base64 is:
 * the messages' own words are shorter); a prefix is empty or
 * "secret/NAME: cert: " or "secret/NAME: key: "; an owner is empty or
 * ends in ": "; a file is one name. */
#include "fuzz.h"
#include "pemcheck.h"
#include "consumer/checkmap.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what, const char *s)
{
	fprintf(stderr, "fuzz_pemcheck: %s: %.300s\n", what, s);
	abort();
}

static void key_lines_absent(const char *key, const char *err)
{
	const char *p = key;
	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		char *line = strndup(p, n);
		if (line && n >= 16 && !strpbrk(line, " -")) {
			if (strstr(err, line))
				die("the error quotes the key", err);
		}
		free(line);
		p += n + (nl ? 1 : 0);
	}
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

/* pemcheck.c's messages; the parentheses hold gnutls_strerror's words */
static bool known_message(const char *e)
{
	return shaped(e, "secret/f: cert: not a PEM certificate (",
		      "; put the server's certificate, -----BEGIN CERTIFICATE----- ... -----END CERTIFICATE-----, "
		      "then its chain)",
		      NULL) ||
	       shaped(e, "secret/f: cert: a chain of ",
		      " certificates; at most 16 (put the server's certificate, then only the intermediates it needs)",
		      "0123456789") ||
	       strcmp(e, "secret/f: key: cannot be checked (out of memory)") == 0 ||
	       strcmp(e, "secret/f: key: encrypted (no node has its password; put it unencrypted, e.g. the output "
			 "of openssl pkey -in KEY)") == 0 ||
	       shaped(e, "secret/f: key: not a PEM private key (",
		      "; put the certificate's unencrypted key, -----BEGIN PRIVATE KEY----- ... -----END PRIVATE "
		      "KEY-----, or RSA/EC PRIVATE KEY)",
		      NULL) ||
	       strcmp(e, "secret/f: key: cannot be compared with cert (an unsupported key type)") == 0 ||
	       strcmp(e, "secret/f: key: does not match cert (the first certificate's public key is another key's; "
			 "put that certificate's own key, or the certificate first in cert)") == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 2);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = text[size + 1] = '\0';
	const char *cert = text, *key = text + strlen(text) + (strlen(text) < size ? 1 : 0);
	char err[1024] = "";
	if (pemcheck_pair("secret/f", cert, key, err, sizeof(err)) < 0) {
		if (strncmp(err, "secret/f: cert: ", 16) != 0 && strncmp(err, "secret/f: key: ", 15) != 0)
			die("a refusal names no field", err);
		if (!known_message(err))
			die("a refusal that is not one of pemcheck's messages", err);
		key_lines_absent(key, err);
	}
	char out[320];
	checkmap_prefix(text, "/s", out, sizeof(out));
	if (out[0]) {
		size_t n = strlen(out);
		if (strncmp(out, "secret/", 7) != 0 ||
		    !((n > 8 && strcmp(out + n - 8, ": cert: ") == 0) || (n > 7 && strcmp(out + n - 7, ": key: ") == 0)))
			die("a prefix of another shape", out);
	}
	char file[128];
	unsigned long line;
	if (checkmap_file_line(text, "/s", file, sizeof(file), &line) && (strchr(file, '/') || !file[0] || !line))
		die("a file of another shape", file);
	checkmap_owner(text, size % 64 + 1, out, sizeof(out));
	size_t n = strlen(out);
	if (n && (n < 4 || strcmp(out + n - 2, ": ") != 0 || !strchr(out, '/')))
		die("an owner of another shape", out);
	free(text);
	return 0;
}
