/* urllist.c: lists of URLs (see urllist.h): one parser for the agent's and
 * the CLI's --plane and the plane's --etcd. */
#include "urllist.h"
#include "xmalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int urllist_parse(const char *list, char **urls, int max, char *err, size_t errlen)
{
	int n = 0;
	const char *p = list;
	for (;;) {
		const char *end = p + strcspn(p, ",");
		const char *s = p, *e = end;
		while (s < e && (*s == ' ' || *s == '\t'))
			s++;
		while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '/'))
			e--;
		size_t len = (size_t)(e - s);
		size_t scheme = len >= 7 && strncmp(s, "http://", 7) == 0 ? 7 : len >= 8 && strncmp(s, "https://", 8) == 0 ? 8 : 0;
		if (!len) {
			snprintf(err, errlen, "an empty URL in '%s'", list);
			goto fail;
		}
		if (!scheme || len <= scheme) {
			snprintf(err, errlen, "'%.*s' must be an http:// or https:// URL", (int)len, s);
			goto fail;
		}
		if (n == max) {
			snprintf(err, errlen, "more than %d URLs", max);
			goto fail;
		}
		for (int i = 0; i < n; i++) {
			if (strlen(urls[i]) == len && strncasecmp(urls[i], s, len) == 0) {
				snprintf(err, errlen, "'%.*s' is listed twice", (int)len, s);
				goto fail;
			}
		}
		urls[n++] = xstrndup(s, len);
		if (!*end)
			return n;
		p = end + 1;
	}
fail:
	urllist_free(urls, n);
	return -1;
}

void urllist_free(char **urls, int n)
{
	for (int i = 0; i < n; i++)
		free(urls[i]);
}
