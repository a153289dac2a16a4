/* fuzz_pemcheck.c: libFuzzer target for what the agent reads of a TLS
 * secret and of a checker's refusal: pemcheck_pair (the input split at
 * the first NUL byte into cert and key, the second empty without one) and
 * checkmap_prefix, checkmap_file_line and checkmap_owner (the whole input
 * as a checker's output and as a rendered configuration). Nothing
 * crashes; a refusal names the secret and a field; the error never holds
 * a line of the key's text (one of 16 bytes or more without a space or a
 * '-', as base64 is: the messages' own words are shorter); a prefix is empty or
 * "secret/NAME: cert: " or "secret/NAME: key: "; an owner is empty or
 * ends in ": "; a file is one name. */
#include "fuzz.h"
#include "pemcheck.h"
#include "consumer/checkmap.h"

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
