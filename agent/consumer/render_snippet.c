/* consumer/render_snippet.c: a resource's snippet pasted into its block (see
 * render.h and snippet.h): checked again as the plane checked it, each line
 * indented, between marker lines that name the resource and the field. */
#include "consumer/render.h"
#include "json.h"
#include "snippet.h"

#include <stdio.h>
#include <string.h>

/* The text of body's snippet for consumer, checked; NULL with *rc 0 when
 * there is none, with *rc -1 (err) when it does not pass. */
static const char *snippet_text(const char *res, const cJSON *body, const char *consumer, bool route, int *rc,
				char *err, size_t errlen)
{
	*rc = 0;
	const cJSON *sn = body ? cJSON_GetObjectItemCaseSensitive(body, "snippet") : NULL;
	const char *t = cJSON_IsObject(sn) ? json_get_string(sn, consumer) : NULL;
	if (!t || !t[0])
		return NULL;
	char e[400];
	int c = strcmp(consumer, "nginx") == 0 ? snippet_check_nginx(t, strncmp(res, "listener/", 9) == 0, e, sizeof(e))
					       : snippet_check_haproxy(t, route, e, sizeof(e));
	if (c < 0) {
		snprintf(err, errlen, "%s: snippet.%s: %s", res, consumer, e);
		*rc = -1;
		return NULL;
	}
	return t;
}

/* Each line of t after indent, with suffix after every line that holds a
 * rule (not a blank or comment-only one). */
static void paste(struct buf *b, const char *res, const char *consumer, const char *t, const char *indent,
		  const char *suffix)
{
	buf_printf(b, "%s" SNIPPET_MARK " %s snippet.%s\n", indent, res, consumer);
	for (const char *p = t; *p;) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		size_t lead = strspn(p, " \t");
		bool rule = lead < n && p[lead] != '#';
		buf_puts(b, indent);
		buf_append(b, p, n);
		if (suffix && rule)
			buf_puts(b, suffix);
		buf_putc(b, '\n');
		p += n + (nl != NULL);
	}
	buf_printf(b, "%s" SNIPPET_MARK_END "\n", indent);
}

int render_snippet(struct buf *b, const char *res, const cJSON *body, const char *consumer, const char *indent,
		   char *err, size_t errlen)
{
	int rc;
	const char *t = snippet_text(res, body, consumer, false, &rc, err, errlen);
	if (t)
		paste(b, res, consumer, t, indent, NULL);
	return rc;
}

bool render_snippet_haproxy_any(const struct rres *listener, const struct rroute *routes, size_t n)
{
	int rc;
	char e[8];
	if (snippet_text(listener->r->name, listener->body, "haproxy", false, &rc, e, sizeof(e)) || rc < 0)
		return true;
	for (size_t i = 0; i < n; i++)
		if (snippet_text(routes[i].name, routes[i].body, "haproxy", true, &rc, e, sizeof(e)) || rc < 0)
			return true;
	return false;
}

int render_snippet_haproxy_frontend(struct buf *b, const struct rres *listener, const struct rroute *routes,
				    size_t n, char *err, size_t errlen)
{
	int rc;
	for (size_t i = 0; i < n; i++) {
		const char *t = snippet_text(routes[i].name, routes[i].body, "haproxy", true, &rc, err, errlen);
		if (rc < 0)
			return -1;
		if (!t)
			continue;
		/* a route's name is a resource name: safe in a haproxy word */
		char cond[RES_FULLNAME_MAX + 64];
		snprintf(cond, sizeof(cond), " if { var(txn.tether_route) -m str %s }", routes[i].name);
		paste(b, routes[i].name, "haproxy", t, "    ", cond);
	}
	const char *t = snippet_text(listener->r->name, listener->body, "haproxy", false, &rc, err, errlen);
	if (t)
		paste(b, listener->r->name, "haproxy", t, "    ", NULL);
	return rc;
}
