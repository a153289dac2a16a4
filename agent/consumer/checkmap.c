/* consumer/checkmap.c: a checker's refusal mapped to the resource (see
 * consumer/checkmap.h). */
#include "consumer/checkmap.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define HASH_HEX 16   /* render_add_secret: 8 bytes of the content's hash */

/* A secret file's name at p: NAME-HASH.EXT, NAME a resource name's
 * characters. Fills name and ext; false when p holds no such name. */
static bool secret_file(const char *p, char *name, size_t ncap, char *ext, size_t ecap)
{
	size_t n = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.");
	const char *dot = NULL;
	for (size_t i = n; i > 0; i--)
		if (p[i - 1] == '.') {
			dot = p + i - 1;
			break;
		}
	if (!dot || (size_t)(dot - p) < HASH_HEX + 2 || dot[-HASH_HEX - 1] != '-')
		return false;
	for (const char *h = dot - HASH_HEX; h < dot; h++)
		if (!strchr("0123456789abcdef", *h))
			return false;
	size_t nlen = (size_t)(dot - p) - HASH_HEX - 1, elen = n - (size_t)(dot - p) - 1;
	if (nlen == 0 || nlen >= ncap || elen == 0 || elen >= ecap)
		return false;
	memcpy(name, p, nlen);
	name[nlen] = '\0';
	memcpy(ext, dot + 1, elen);
	ext[elen] = '\0';
	return true;
}

void checkmap_prefix(const char *output, const char *secrets_dir, char *out, size_t cap)
{
	size_t dlen = strlen(secrets_dir);
	if (cap)
		out[0] = '\0';
	if (!dlen)
		return;
	for (const char *p = strstr(output, secrets_dir); p; p = strstr(p + 1, secrets_dir)) {
		if (p[dlen] != '/')
			continue;
		char name[256], ext[8];
		if (!secret_file(p + dlen + 1, name, sizeof(name), ext, sizeof(ext)))
			continue;
		const char *field;
		if (strcmp(ext, "crt") == 0)
			field = "cert";
		else if (strcmp(ext, "key") == 0)
			field = "key";
		else if (strcmp(ext, "pem") == 0)
			field = strstr(output, "private key") || strstr(output, "PRIVATE KEY") ? "key" : "cert";
		else
			continue;
		snprintf(out, cap, "secret/%s: %s: ", name, field);
		return;
	}
}
