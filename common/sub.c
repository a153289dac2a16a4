/* sub.c: subscriptions, name prefixes a node asks for (see sub.h). */
#include "sub.h"
#include "buf.h"
#include "resource.h"
#include "util.h"
#include "xmalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int sub_parse(const char *s, struct sub *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	if (!s || !*s) {
		out->canon = xstrdup("");
		return 0;
	}
	size_t cap = 1;
	for (const char *p = s; *p; p++)
		cap += *p == ',';
	out->prefix = xcalloc(cap, sizeof(char *));
	const char *p = s;
	while (*p) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		if (len > RES_FULLNAME_MAX) {
			snprintf(err, errlen, "sub: prefix longer than %d bytes", RES_FULLNAME_MAX);
			goto fail;
		}
		for (size_t i = 0; i < len; i++) {
			char c = p[i];
			bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
				  c == '.' || c == '_' || c == '-' || c == '/';
			if (!ok) {
				snprintf(err, errlen, "sub: prefix '%.*s' holds a character no name has",
					 (int)(len > 64 ? 64 : len), p);
				goto fail;
			}
		}
		if (len)
			out->prefix[out->n++] = xstrndup(p, len);
		p += len + (end ? 1 : 0);
	}
	qsort(out->prefix, out->n, sizeof(char *), cmp_str);
	/* one canonical form per set of names: a prefix covered by another
	 * (or repeated) adds nothing. Sorted, a covering prefix comes just
	 * before everything it covers, so the last one kept decides. */
	size_t kept = 0;
	for (size_t i = 0; i < out->n; i++) {
		if (kept && str_starts_with(out->prefix[i], out->prefix[kept - 1])) {
			free(out->prefix[i]);
			continue;
		}
		out->prefix[kept++] = out->prefix[i];
	}
	out->n = kept;
	if (out->n > SUB_MAX_PREFIXES) {
		snprintf(err, errlen, "sub: more than %d distinct prefixes", SUB_MAX_PREFIXES);
		goto fail;
	}
	struct buf b = BUF_INIT;
	for (size_t i = 0; i < out->n; i++) {
		if (i)
			buf_putc(&b, ',');
		buf_puts(&b, out->prefix[i]);
	}
	out->canon = buf_detach(&b, NULL);
	return 0;
fail:
	sub_release(out);
	return -1;
}

void sub_release(struct sub *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->prefix[i]);
	free(s->prefix);
	free(s->canon);
	memset(s, 0, sizeof(*s));
}

bool sub_match(const struct sub *s, const char *name)
{
	if (!s || s->n == 0)
		return true;
	/* every node checks the guards (guards.h): they belong to every
	 * subscription, and so to its digests and statements */
	if (strncmp(name, "guard/", 6) == 0)
		return true;
	for (size_t i = 0; i < s->n; i++)
		if (strncmp(name, s->prefix[i], strlen(s->prefix[i])) == 0)
			return true;
	return false;
}
