/* consumer/render_opts_nginx.c: a route's and a cluster's options as nginx
 * directives (see consumer/render_opts.h and tetherd(8), "Route and cluster
 * options"). Values went through resource_opts.c: header names are token
 * characters, values printable ASCII without quotes, '\', '$', ';' or
 * braces, paths URL path characters, so each prints inside double quotes
 * (or bare) without escaping. */
#include "consumer/render_opts.h"
#include "json.h"
#include "resource_opts.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

size_t render_opts_nginx_bucket(size_t longest)
{
	size_t need = 2 * sizeof(void *) + ((longest + 2 + sizeof(void *) - 1) & ~(sizeof(void *) - 1));
	size_t size = 64;
	while (size < need)
		size *= 2;
	return size;
}

/* The longest header name in a set object's keys or a remove array. */
static size_t longest_name(const cJSON *list, size_t longest)
{
	const cJSON *h;
	cJSON_ArrayForEach(h, list) {
		const char *n = cJSON_IsObject(list) ? h->string : cJSON_GetStringValue(h);
		if (n && strlen(n) > longest)
			longest = strlen(n);
	}
	return longest;
}

void render_opts_nginx_http(const struct rstate *rs, struct buf *b)
{
	bool ws = false;
	size_t longest = 0;   /* of the names proxy_set_header and proxy_hide_header get */
	for (size_t i = 0; i < rs->n[RES_ROUTE]; i++) {
		const cJSON *body = rs->by_type[RES_ROUTE][i].body;
		ws = ws || cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(body, "websocket"));
		const cJSON *hd = cJSON_GetObjectItemCaseSensitive(body, "headers");
		const char *dirs[] = { "request", "response" }, *lists[] = { "set", "remove" };
		for (size_t d = 0; d < 2; d++)
			for (size_t l = 0; l < 2; l++)
				longest = longest_name(cJSON_GetObjectItemCaseSensitive(
							       cJSON_GetObjectItemCaseSensitive(hd, dirs[d]), lists[l]),
						       longest);
	}
	if (ws)
		buf_puts(b, "# websocket routes: Connection: upgrade when the client asks for one, else\n"
			    "# none (the upstream's keepalive)\n"
			    "map $http_upgrade $tether_connection_upgrade {\n"
			    "    default upgrade;\n    '' \"\";\n}\n\n");
	size_t size = render_opts_nginx_bucket(longest);
	if (size > 64)
		buf_printf(b, "# a route's header name is longer than the default hash bucket holds\n"
			      "proxy_headers_hash_bucket_size %zu;\n\n",
			   size);
}

void render_opts_nginx_server(struct buf *b, const cJSON *cluster)
{
	const cJSON *h = cJSON_GetObjectItemCaseSensitive(cluster, "health");
	if (!cJSON_IsObject(h))
		return;
	const cJSON *mf = cJSON_GetObjectItemCaseSensitive(h, "max_fails");
	const cJSON *ft = cJSON_GetObjectItemCaseSensitive(h, "fail_timeout");
	buf_printf(b, " max_fails=%d fail_timeout=%ds", cJSON_IsNumber(mf) ? (int)mf->valuedouble : 1,
		   cJSON_IsNumber(ft) ? (int)ft->valuedouble : 10);
}

void render_opts_nginx_upstream(struct buf *b, const cJSON *cluster)
{
	const cJSON *k = cJSON_GetObjectItemCaseSensitive(cluster, "keepalive");
	if (cJSON_IsNumber(k) && k->valuedouble >= 1)
		buf_printf(b, "    keepalive %d;\n", (int)k->valuedouble);
}

/* Whether the route's request headers set or remove name. */
static bool overridden(const cJSON *req, const char *name)
{
	const cJSON *set = cJSON_GetObjectItemCaseSensitive(req, "set");
	for (const cJSON *h = cJSON_IsObject(set) ? set->child : NULL; h; h = h->next)
		if (strcasecmp(h->string, name) == 0)
			return true;
	const cJSON *rm = cJSON_GetObjectItemCaseSensitive(req, "remove");
	for (const cJSON *h = cJSON_IsArray(rm) ? rm->child : NULL; h; h = h->next)
		if (cJSON_IsString(h) && strcasecmp(h->valuestring, name) == 0)
			return true;
	return false;
}

static void ms_line(struct buf *b, const char *directive, long ms)
{
	if (ms % 1000 == 0)
		buf_printf(b, "        %s %lds;\n", directive, ms / 1000);
	else
		buf_printf(b, "        %s %ldms;\n", directive, ms);
}

static void response_headers(struct buf *b, const cJSON *resp)
{
	const cJSON *rm = cJSON_GetObjectItemCaseSensitive(resp, "remove");
	for (const cJSON *h = cJSON_IsArray(rm) ? rm->child : NULL; h; h = h->next)
		if (cJSON_IsString(h))
			buf_printf(b, "        proxy_hide_header \"%s\";\n", h->valuestring);
	const cJSON *set = cJSON_GetObjectItemCaseSensitive(resp, "set");
	for (const cJSON *h = cJSON_IsObject(set) ? set->child : NULL; h; h = h->next)
		if (cJSON_IsString(h))
			buf_printf(b, "        proxy_hide_header \"%s\";\n        add_header \"%s\" \"%s\" always;\n",
				   h->string, h->string, h->valuestring);
}

void render_opts_nginx_location(struct buf *b, const cJSON *route)
{
	const cJSON *hd = cJSON_GetObjectItemCaseSensitive(route, "headers");
	const cJSON *req = cJSON_GetObjectItemCaseSensitive(hd, "request");
	bool ws = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(route, "websocket"));
	buf_puts(b, "        proxy_http_version 1.1;\n");
	if (!overridden(req, "Connection"))
		buf_puts(b, ws ? "        proxy_set_header Connection $tether_connection_upgrade;\n"
			       : "        proxy_set_header Connection \"\";\n");
	if (!overridden(req, "Host"))
		buf_puts(b, "        proxy_set_header Host $host;\n");
	if (!overridden(req, "X-Forwarded-For"))
		buf_puts(b, "        proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;\n");
	if (!resource_opts_route_any(route))
		return;
	if (ws && !overridden(req, "Upgrade"))
		buf_puts(b, "        proxy_set_header Upgrade $http_upgrade;\n");
	const cJSON *set = cJSON_GetObjectItemCaseSensitive(req, "set");
	for (const cJSON *h = cJSON_IsObject(set) ? set->child : NULL; h; h = h->next)
		if (cJSON_IsString(h))
			buf_printf(b, "        proxy_set_header \"%s\" \"%s\";\n", h->string, h->valuestring);
	const cJSON *rm = cJSON_GetObjectItemCaseSensitive(req, "remove");
	for (const cJSON *h = cJSON_IsArray(rm) ? rm->child : NULL; h; h = h->next)
		if (cJSON_IsString(h))
			buf_printf(b, "        proxy_set_header \"%s\" \"\";\n", h->valuestring);
	response_headers(b, cJSON_GetObjectItemCaseSensitive(hd, "response"));
	long ms = resource_opts_timeout_ms(route, "connect");
	if (ms)
		ms_line(b, "proxy_connect_timeout", ms);
	ms = resource_opts_timeout_ms(route, "read");
	if (ms || ws)
		ms_line(b, "proxy_read_timeout", ms ? ms : 3600000);
	ms = resource_opts_timeout_ms(route, "send");
	if (ms || ws)
		ms_line(b, "proxy_send_timeout", ms ? ms : 3600000);
	const cJSON *r = cJSON_GetObjectItemCaseSensitive(route, "retries");
	if (cJSON_IsNumber(r) && r->valuedouble < 1)
		buf_puts(b, "        proxy_next_upstream off;\n");
	else if (cJSON_IsNumber(r))
		buf_printf(b, "        proxy_next_upstream error timeout;\n        proxy_next_upstream_tries %d;\n",
			   (int)r->valuedouble + 1);
	const cJSON *mb = cJSON_GetObjectItemCaseSensitive(route, "max_body");
	if (cJSON_IsNumber(mb))
		buf_printf(b, "        client_max_body_size %.0f;\n", mb->valuedouble);
	struct buf re = BUF_INIT, repl = BUF_INIT;
	if (render_opts_path_rewrite(route, '$', &re, &repl))
		/* (?s): nginx matches the decoded path, where %0A is a newline */
		buf_printf(b, "        rewrite \"(?s)%s\" %s break;\n", re.data, repl.data);
	buf_release(&re);
	buf_release(&repl);
}

bool render_opts_path_rewrite(const cJSON *route, char group, struct buf *re, struct buf *repl)
{
	const char *path = json_get_string(route, "path");
	const char *rw = json_get_string(route, "rewrite");
	if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(route, "strip_prefix")) && !rw)
		return false;
	if (!path)
		path = "/";
	size_t pl = strlen(path);
	while (pl && path[pl - 1] == '/')
		pl--;
	buf_putc(re, '^');
	for (size_t i = 0; i < pl; i++) {
		if (strchr(".+*", path[i]))   /* the regex characters a path may hold */
			buf_putc(re, '\\');
		buf_putc(re, path[i]);
	}
	buf_puts(re, "(/(.*))?$");
	size_t rl = rw ? strlen(rw) : 0;
	while (rl && rw[rl - 1] == '/')
		rl--;
	if (rl == 0) {                 /* strip_prefix, or rewrite '/' */
		buf_printf(repl, "/%c2", group);
	} else {
		buf_append(repl, rw, rl);
		buf_printf(repl, "%c1", group);
	}
	return true;
}
