/* fuzz_certcheck.c: libFuzzer target for a secret's certificate and key
 * check (plane/core/certcheck.c, GnuTLS's PEM and DER parsers under it).
 * Input: the cert text, a NUL byte, the key text (no NUL: the whole input
 * is the cert, the key empty). Properties: nothing crashes or leaks; a
 * refusal has a message naming the resource and "cert:" or "key:"; no
 * line of the key's text (16 bytes or more, other than a PEM armour line
 * "-----...") is ever in the message. */
#include "fuzz.h"
#include "core/certcheck.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what, const char *detail)
{
	fprintf(stderr, "fuzz_certcheck: %s\n  detail: %.512s\n", what, detail ? detail : "");
	abort();
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
	if (rc < 0) {
		if (strncmp(err, "secret/f: cert: ", 16) != 0 && strncmp(err, "secret/f: key: ", 15) != 0)
			die("a refusal that does not name the resource and the field", err);
		/* no line of the key's text in the message */
		for (char *line = key; *line;) {
			size_t n = strcspn(line, "\n");
			if (n >= 16 && strncmp(line, "-----", 5) != 0) {
				char save = line[n];
				line[n] = '\0';
				if (strstr(err, line))
					die("the key's text is in the message", err);
				line[n] = save;
			}
			line += n + (line[n] == '\n');
		}
	}
	free(cert);
	free(key);
	return 0;
}
