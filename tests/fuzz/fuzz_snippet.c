/* fuzz_snippet.c: libFuzzer target for a resource's snippet: the input's
 * first byte picks the consumer (even: nginx, odd: haproxy; bit 1: a
 * route's haproxy form), the rest is the text (cut at a NUL). Nothing
 * crashes; a refusal is "line N: ..." with N a line of the text; a text
 * that passes renders (render_snippet, render_snippet_haproxy_frontend)
 * between the markers, every line of it maps back to "route/f:
 * snippet.X: " (checkmap_owner), and a route's haproxy rule ends with the
 * route's condition. */
#include "fuzz.h"
#include "consumer/checkmap.h"
#include "consumer/render.h"
#include "snippet.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what, const char *s)
{
	fprintf(stderr, "fuzz_snippet: %s: %.300s\n", what, s);
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	unsigned mode = data[0];
	char *text = malloc(size);
	if (!text)
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	bool nginx = !(mode & 1), route = mode & 2;
	unsigned long lines = 1;
	for (const char *p = text; *p; p++)
		lines += *p == '\n';
	char err[512] = "";
	int rc = nginx ? snippet_check_nginx(text, route, err, sizeof(err)) : snippet_check_haproxy(text, route, err, sizeof(err));
	if (rc < 0) {
		unsigned long n = 0;
		if (sscanf(err, "line %lu: ", &n) != 1 || n < 1 || n > lines)
			die("a refusal of another shape", err);
		free(text);
		return 0;
	}
	cJSON *body = cJSON_CreateObject(), *sn = cJSON_AddObjectToObject(body, "snippet");
	cJSON_AddStringToObject(sn, nginx ? "nginx" : "haproxy", text);
	struct buf b = BUF_INIT;
	const char *res = route ? "route/f" : "listener/f";
	if (nginx || !route) {
		if (render_snippet(&b, res, body, nginx ? "nginx" : "haproxy", "    ", err, sizeof(err)) < 0)
			die("the renderer refused what the check passed", err);
	} else {
		char lname[] = "listener/l";
		struct res lr = { .name = lname };
		cJSON *none = cJSON_CreateObject();
		struct rres l = { .r = &lr, .bare = "l", .body = none };
		struct rroute r = { "route/f", "*", "/", "c", body };
		if (render_snippet_haproxy_frontend(&b, &l, &r, 1, err, sizeof(err)) < 0)
			die("the renderer refused what the check passed", err);
		cJSON_Delete(none);
	}
	if (text[0]) {
		char want[64], out[320];
		snprintf(want, sizeof(want), "%s: snippet.%s: ", res, nginx ? "nginx" : "haproxy");
		unsigned long at = 1;
		for (const char *p = b.data; p && *p; at++) {
			const char *nl = strchr(p, '\n');
			size_t n = nl ? (size_t)(nl - p) : strlen(p);
			bool marker = strstr(p, SNIPPET_MARK) == p + 4 && (size_t)(strstr(p, SNIPPET_MARK) - p) < n;
			if (!marker) {
				checkmap_owner(b.data, at, out, sizeof(out));
				if (strcmp(out, want) != 0)
					die("a snippet line maps elsewhere", out);
				const char *t = p + strspn(p, " \t");
				static const char cond[] = " if { var(txn.tether_route) -m str route/f }";
				if (!nginx && route && t < p + n && *t != '#' &&
				    (n < sizeof(cond) - 1 || memcmp(p + n - (sizeof(cond) - 1), cond, sizeof(cond) - 1) != 0))
					die("a route's rule without the route's condition", p);
			}
			p = nl ? nl + 1 : NULL;
		}
	} else if (b.len) {
		die("an empty snippet rendered lines", b.data);
	}
	buf_release(&b);
	cJSON_Delete(body);
	free(text);
	return 0;
}
