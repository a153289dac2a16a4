/* fuzz_labels.c: libFuzzer target for labels_parse (the agent's --labels and
 * the plane's ?labels=): nothing crashes, a refusal has a message, and an
 * accepted list is an object of at most LABELS_MAX strings with valid,
 * distinct keys and valid values, one per non-empty comma part. */
#include "fuzz.h"
#include "labels.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what, const char *input, const char *detail)
{
	fprintf(stderr, "fuzz_labels: %s\n  input: %.256s\n  detail: %.256s\n", what, input,
		detail ? detail : "");
	abort();
}

static bool ok_char(char c, bool key)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == '-' || (key && c == '/');
}

static bool ok_string(const char *s, bool key)
{
	size_t n = strlen(s);
	if (n > 63 || (key && n == 0))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!ok_char(s[i], key))
			return false;
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	if (!s)
		abort();
	if (size)
		memcpy(s, data, size);
	s[size] = '\0';

	char err[256] = "";
	cJSON *obj = labels_parse(s, err, sizeof(err));
	if (!obj) {
		if (!err[0])
			die("labels_parse failed without a message", s, NULL);
		free(s);
		return 0;
	}
	if (!cJSON_IsObject(obj))
		die("labels_parse returned something other than an object", s, NULL);

	size_t parts = 0;
	for (const char *p = s; *p;) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		parts += len > 0;
		p += len + (end ? 1 : 0);
	}

	size_t n = 0;
	for (const cJSON *c = obj->child; c; c = c->next, n++) {
		if (!c->string || !ok_string(c->string, true))
			die("invalid key accepted", s, c->string);
		if (!cJSON_IsString(c) || !c->valuestring)
			die("a value is not a string", s, c->string);
		if (!ok_string(c->valuestring, false))
			die("invalid value accepted", s, c->valuestring);
		for (const cJSON *d = c->next; d; d = d->next)
			if (strcmp(c->string, d->string) == 0)
				die("key accepted twice", s, c->string);
		/* "key=value" is one of the parts of the input */
		size_t kl = strlen(c->string), vl = strlen(c->valuestring);
		bool found = false;
		for (const char *p = s; *p && !found;) {
			const char *end = strchr(p, ',');
			size_t len = end ? (size_t)(end - p) : strlen(p);
			found = len == kl + 1 + vl && memcmp(p, c->string, kl) == 0 && p[kl] == '=' &&
				memcmp(p + kl + 1, c->valuestring, vl) == 0;
			p += len + (end ? 1 : 0);
		}
		if (!found)
			die("a label that is not in the input", s, c->string);
	}
	if (n > LABELS_MAX)
		die("more than LABELS_MAX labels accepted", s, NULL);
	if (n != parts)
		die("labels and non-empty parts differ in number", s, NULL);

	cJSON_Delete(obj);
	free(s);
	return 0;
}
