/* consumer/render_nginx.c: the nginx renderer: one upstream per cluster, one
 * server per (listener, host) with a location per route path, TLS from
 * secrets, a 404 default server per listener without a "*" route, and the
 * marker server. The operator's nginx.conf includes
 * OUTPUT_DIR/current/ *.conf (without the space) inside http {}. With
 * traffic stats, each of our servers sends its access log, one line per
 * request naming the route and the generation, to the agent over local
 * syslog (docs/gates.md); at the server level, since an `access_log off;` of
 * the operator's at the http level would turn off an http-level one of ours,
 * and the operator's own servers must not log our format. Route and
 * cluster options are rendered by render_opts_nginx.c, one call per block. */
#include "consumer/render.h"
#include "consumer/render_opts.h"
#include "json.h"
#include "pemcheck.h"
#include "xmalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The upstream of cluster bare. nginx compares upstream names without case
 * ("Web" and "web" would be one "duplicate upstream"), so the name is
 * written without capitals: '_' doubled, a capital as '_' and its small
 * letter -- one name per cluster, and a small-letter name as it is. */
static void upstream_name(struct buf *b, const char *bare)
{
	buf_puts(b, "tether_c_");
	for (const char *p = bare; *p; p++) {
		if (*p == '_') {
			buf_puts(b, "__");
		} else if (*p >= 'A' && *p <= 'Z') {
			buf_putc(b, '_');
			buf_putc(b, (char)(*p - 'A' + 'a'));
		} else {
			buf_putc(b, *p);
		}
	}
}

/* nginx puts exact server names whole, wildcard ones label by label, into
 * hash buckets of server_names_hash_bucket_size bytes
 * (render_opts_nginx_bucket): longer names than the default holds get the
 * directive. */
static void names_hash(const struct rstate *rs, struct buf *b)
{
	size_t longest = 0;
	for (size_t i = 0; i < rs->n[RES_ROUTE]; i++) {
		const char *h = json_get_string(rs->by_type[RES_ROUTE][i].body, "host");
		if (!h || strcmp(h, "*") == 0)
			continue;
		if (strncmp(h, "*.", 2) != 0) {
			longest = strlen(h) > longest ? strlen(h) : longest;
			continue;
		}
		for (const char *l = h + 2; *l;) {
			size_t n = strcspn(l, ".");
			longest = n > longest ? n : longest;
			l += n + (l[n] == '.');
		}
	}
	size_t size = render_opts_nginx_bucket(longest);
	if (size > 64)
		buf_printf(b, "server_names_hash_bucket_size %zu;\n\n", size);
}

static int upstreams(const struct rstate *rs, struct buf *b, char *err, size_t errlen)
{
	for (size_t i = 0; i < rs->n[RES_CLUSTER]; i++) {
		const struct rres *c = &rs->by_type[RES_CLUSTER][i];
		const char *lb = json_get_string(c->body, "lb");
		buf_puts(b, "upstream ");
		upstream_name(b, c->bare);
		buf_puts(b, " {\n");
		if (lb && strcmp(lb, "least_conn") == 0)
			buf_puts(b, "    least_conn;\n");
		else if (lb && strcmp(lb, "random") == 0)
			buf_puts(b, "    random;\n");
		const cJSON *eps = cJSON_GetObjectItemCaseSensitive(c->body, "endpoints");
		int n = 0;
		for (const cJSON *ep = eps ? eps->child : NULL; ep; ep = ep->next, n++) {
			const char *addr;
			int port, w;
			if (render_endpoint(c, ep, n, &addr, &port, &w, err, errlen) < 0)
				return -1;
			buf_printf(b, strchr(addr, ':') ? "    server [%s]:%d" : "    server %s:%d", addr, port);
			if (w)
				buf_printf(b, " weight=%d", w);
			render_opts_nginx_server(b, c->body);
			buf_puts(b, ";\n");
		}
		if (n == 0)
			buf_puts(b, "    server 127.0.0.1:9 down;   # no endpoints: requests get 502\n");
		render_opts_nginx_upstream(b, c->body);
		if (render_snippet(b, c->r->name, c->body, "nginx", "    ", err, errlen) < 0)
			return -1;
		buf_puts(b, "}\n\n");
	}
	return 0;
}

/* The listen line and, for TLS, the certificate lines. */
static int listen_lines(const struct rres *l, const struct rstate *rs, const struct render_opts *o,
			struct render_out *out, bool default_server, struct buf *b, char *err, size_t errlen)
{
	char addr[80];
	render_listen_addr(l->body, addr, sizeof(addr));
	const cJSON *tls = cJSON_GetObjectItemCaseSensitive(l->body, "tls");
	const char *sname = cJSON_IsObject(tls) ? json_get_string(tls, "secret") : NULL;
	buf_printf(b, "    listen %s%s%s;\n", addr, sname ? " ssl" : "", default_server ? " default_server" : "");
	if (!sname)
		return 0;
	const struct rres *sec = rstate_find(rs, RES_SECRET, sname);
	const char *cert = sec ? json_get_string(sec->body, "cert") : NULL;
	const char *key = sec ? json_get_string(sec->body, "key") : NULL;
	if (!cert || !key) {
		snprintf(err, errlen, "%s: unknown secret '%s'", l->r->name, sname);
		return -1;
	}
	/* read as the consumer will: a bad one names the secret and the field */
	if (!o->skip_secret_check && pemcheck_pair(sec->r->name, cert, key, err, errlen) < 0)
		return -1;
	const char *crt = render_add_secret(out, sname, "crt", cert, strlen(cert));
	buf_printf(b, "    ssl_certificate %s/%s;\n", o->secrets_dir, crt);
	const char *k = render_add_secret(out, sname, "key", key, strlen(key));
	buf_printf(b, "    ssl_certificate_key %s/%s;\n", o->secrets_dir, k);
	return 0;
}

/* The access log of one of our servers, with traffic stats: "-" until a
 * route's location names its route. */
static void access_log(struct buf *b, const struct render_opts *o)
{
	if (!o->traffic_syslog)
		return;
	buf_printf(b, "    access_log syslog:server=%s,facility=local7,tag=tether,severity=info,nohostname "
		      "tether_traffic;\n    set $tether_route -;\n", o->traffic_syslog);
}

static int location(struct buf *b, const struct render_opts *o, const struct rroute *r, char *err, size_t errlen)
{
	if (strcmp(r->path, "/") == 0)
		buf_puts(b, "    location / {\n");
	else
		buf_printf(b, "    location ^~ %s {\n", r->path);
	buf_printf(b, "        # %s\n", r->name);
	if (o->traffic_syslog)
		buf_printf(b, "        set $tether_route %s;\n", r->name);
	buf_puts(b, "        proxy_pass http://");
	upstream_name(b, r->cluster);
	buf_puts(b, ";\n");
	render_opts_nginx_location(b, r->body);
	if (render_snippet(b, r->name, r->body, "nginx", "        ", err, errlen) < 0)
		return -1;
	buf_puts(b, "    }\n");
	return 0;
}

static int servers(const struct rstate *rs, const struct render_opts *o, struct render_out *out, struct buf *b,
		   char *err, size_t errlen)
{
	for (size_t i = 0; i < rs->n[RES_LISTENER]; i++) {
		const struct rres *l = &rs->by_type[RES_LISTENER][i];
		struct rroute *routes;
		size_t n;
		if (render_routes_of(rs, l->bare, &routes, &n, err, errlen) < 0)
			return -1;
		bool has_any = false;
		for (size_t k = 0; k < n;) {
			const char *host = routes[k].host;
			bool any = strcmp(host, "*") == 0;
			has_any |= any;
			buf_printf(b, "# listener/%s, host %s\nserver {\n", l->bare, host);
			if (listen_lines(l, rs, o, out, any, b, err, errlen) < 0) {
				free(routes);
				return -1;
			}
			buf_printf(b, "    server_name %s;\n", any ? "_" : host);
			access_log(b, o);
			bool has_root = false;
			size_t start = k;
			for (; k < n && render_same_host(routes[k].host, host); k++) {
				if (location(b, o, &routes[k], err, errlen) < 0) {
					free(routes);
					return -1;
				}
				has_root |= strcmp(routes[k].path, "/") == 0;
			}
			(void)start;
			if (!has_root)
				buf_puts(b, "    location / {\n        return 404;\n    }\n");
			if (render_snippet(b, l->r->name, l->body, "nginx", "    ", err, errlen) < 0) {
				free(routes);
				return -1;
			}
			buf_puts(b, "}\n\n");
		}
		if (!has_any) {
			/* no route takes every host: unknown hosts get 404, not the
			 * first server */
			buf_printf(b, "# listener/%s, any other host\nserver {\n", l->bare);
			if (listen_lines(l, rs, o, out, true, b, err, errlen) < 0) {
				free(routes);
				return -1;
			}
			buf_puts(b, "    server_name _;\n");
			access_log(b, o);
			buf_puts(b, "    return 404;\n");
			if (render_snippet(b, l->r->name, l->body, "nginx", "    ", err, errlen) < 0) {
				free(routes);
				return -1;
			}
			buf_puts(b, "}\n\n");
		}
		free(routes);
	}
	return 0;
}

static int nginx_body(const struct rstate *rs, const struct render_opts *o, struct render_out *out,
		      struct buf *b, char *err, size_t errlen)
{
	if (o->traffic_syslog) {
		if (!render_safe(o->traffic_syslog)) {
			snprintf(err, errlen, "traffic stats: '%s' cannot be rendered safely", o->traffic_syslog);
			return -1;
		}
	}
	size_t from = b->len;
	names_hash(rs, b);
	render_opts_nginx_http(rs, b);
	if (upstreams(rs, b, err, errlen) < 0 || servers(rs, o, out, b, err, errlen) < 0)
		return -1;
	/* the format names $tether_route, which only our servers set: without
	 * a server (no route yet) nginx would refuse it ("unknown variable") */
	if (o->traffic_syslog && b->len > from && memmem(b->data + from, b->len - from, "set $tether_route", 17)) {
		/* the generation's id is filled in once it is known */
		static const char fmt[] = "# traffic stats: one line per request to the agent (docs/gates.md)\n"
					  "log_format tether_traffic escape=none 'tether1 " RENDER_GEN_TOKEN
					  " $status ${request_time}s $tether_route';\n\n";
		size_t n = sizeof(fmt) - 1, tail = b->len - from;
		buf_reserve(b, n);
		memmove(b->data + from + n, b->data + from, tail);
		memcpy(b->data + from, fmt, n);
		b->len += n;
		b->data[b->len] = '\0';
	}
	return 0;
}

static int nginx_render(const struct state *s, const struct candidate *c, const struct render_opts *o,
			struct render_out *out, char *err, size_t errlen)
{
	return render_main(s, c, o, out, "tether.conf", nginx_body, err, errlen);
}

static void nginx_marker(struct buf *conf, const struct render_opts *o, const char *gen_id)
{
	if (!o->marker)
		return;
	buf_printf(conf, "# the agent reads this to see which generation serves\n"
			 "server {\n    listen %s;\n%s"
			 "    location = /tether-generation {\n        default_type text/plain;\n"
			 "        return 200 \"%s\\n\";\n    }\n"
			 "    location / {\n        return 404;\n    }\n}\n",
		   o->marker, o->traffic_syslog ? "    access_log off;   # probes are not traffic\n" : "", gen_id);
}

const struct renderer render_nginx = { "nginx", nginx_render, nginx_marker };
