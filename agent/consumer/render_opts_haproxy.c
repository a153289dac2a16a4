/* consumer/render_opts_haproxy.c: a route's and a cluster's options as
 * haproxy configuration (see consumer/render_opts.h and tetherd(8), "Route
 * and cluster options"). What haproxy allows per request in a frontend
 * goes into the listener's frontend under the route's own condition, the
 * route named by txn.tether_route before any rule changes the request; what
 * it allows only in a backend (2.6: every timeout, retries) makes the route
 * a backend of its own, tether_r_NAME, with its cluster's servers. Values went through
 * resource_opts.c; a header value is a log-format string to haproxy, so its
 * '%' is doubled. */
#include "consumer/render_opts.h"
#include "json.h"
#include "resource_opts.h"

#include <stdio.h>
#include <string.h>

static void ms_value(struct buf *b, long ms)
{
	if (ms % 1000 == 0)
		buf_printf(b, "%lds", ms / 1000);
	else
		buf_printf(b, "%ldms", ms);
}

/* haproxy's one server-side inactivity timeout: read, else send. */
static long server_ms(const cJSON *route)
{
	long ms = resource_opts_timeout_ms(route, "read");
	return ms ? ms : resource_opts_timeout_ms(route, "send");
}

void render_opts_haproxy_timeouts(struct buf *b, const cJSON *route)
{
	long c = route ? resource_opts_timeout_ms(route, "connect") : 0;
	long s = route ? server_ms(route) : 0;
	buf_puts(b, "    timeout connect ");
	ms_value(b, c ? c : 5000);
	buf_puts(b, "\n    timeout server ");
	ms_value(b, s ? s : 60000);
	buf_puts(b, "\n");
	if (route && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(route, "websocket"))) {
		long t = resource_opts_timeout_ms(route, "read");
		buf_puts(b, "    timeout tunnel ");
		ms_value(b, t ? t : 3600000);
		buf_puts(b, "\n");
	}
}

void render_opts_haproxy_backend(struct buf *b, const cJSON *cluster, const cJSON *route)
{
	const cJSON *r = route ? cJSON_GetObjectItemCaseSensitive(route, "retries") : NULL;
	if (cJSON_IsNumber(r))
		buf_printf(b, "    retries %d\n%s", (int)r->valuedouble,
			   r->valuedouble >= 1 ? "    option redispatch 1\n" : "");
	const cJSON *k = cJSON_GetObjectItemCaseSensitive(cluster, "keepalive");
	if (cJSON_IsNumber(k))
		/* always: a new client's first request may take any idle
		 * connection, as nginx's keepalive does (safe and aggressive
		 * keep a client's first request off an idle one that has
		 * served one request only: t0991 sees them reuse nothing) */
		buf_puts(b, k->valuedouble >= 1 ? "    http-reuse always\n" : "    http-reuse never\n");
}

void render_opts_haproxy_server(struct buf *b, const cJSON *cluster)
{
	const cJSON *h = cJSON_GetObjectItemCaseSensitive(cluster, "health");
	if (cJSON_IsObject(h)) {
		const cJSON *mf = cJSON_GetObjectItemCaseSensitive(h, "max_fails");
		const cJSON *ft = cJSON_GetObjectItemCaseSensitive(h, "fail_timeout");
		buf_printf(b, " check inter %ds fall 1 rise 1 observe layer4 error-limit %d on-error mark-down",
			   cJSON_IsNumber(ft) ? (int)ft->valuedouble : 10, cJSON_IsNumber(mf) ? (int)mf->valuedouble : 1);
	}
	const cJSON *k = cJSON_GetObjectItemCaseSensitive(cluster, "keepalive");
	if (cJSON_IsNumber(k) && k->valuedouble >= 1)
		buf_printf(b, " pool-max-conn %d", (int)k->valuedouble);
}

static const cJSON *body_of(const struct rstate *rs, const struct rroute *r)
{
	const struct rres *rr = rstate_find(rs, RES_ROUTE, strchr(r->name, '/') + 1);
	return rr ? rr->body : NULL;
}

bool render_opts_haproxy_uses(const struct rstate *rs, const struct rroute *routes, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		const cJSON *b = body_of(rs, &routes[k]);
		if (b && resource_opts_route_any(b))
			return true;
	}
	return false;
}

void render_opts_haproxy_target(const struct rstate *rs, const struct rroute *r, char *out, size_t cap)
{
	const cJSON *b = body_of(rs, r);
	if (b && resource_opts_own_backend(b))
		snprintf(out, cap, "tether_r_%s", strchr(r->name, '/') + 1);
	else
		snprintf(out, cap, "tether_c_%s", r->cluster);
}

/* A header name as one haproxy word: bare when it holds no character
 * haproxy's parser reads (a token may hold '#', '$', quotes), else in
 * single quotes, which expand nothing; a name with a "'" in double quotes
 * with '$' escaped. */
static void hname(struct buf *b, const char *n)
{
	if (strspn(n, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.") == strlen(n)) {
		buf_puts(b, n);
	} else if (!strchr(n, '\'')) {
		buf_printf(b, "'%s'", n);
	} else {
		buf_putc(b, '"');
		for (; *n; n++) {
			if (*n == '$')
				buf_putc(b, '\\');
			buf_putc(b, *n);
		}
		buf_putc(b, '"');
	}
}

static void hvalue(struct buf *b, const char *v)
{
	buf_putc(b, '"');
	for (; *v; v++) {
		if (*v == '%')
			buf_putc(b, '%');
		buf_putc(b, *v);
	}
	buf_putc(b, '"');
}

static void header_rules(struct buf *b, const char *dir, const cJSON *d, const char *cond)
{
	const cJSON *rm = cJSON_GetObjectItemCaseSensitive(d, "remove");
	for (const cJSON *h = cJSON_IsArray(rm) ? rm->child : NULL; h; h = h->next) {
		if (!cJSON_IsString(h))
			continue;
		buf_printf(b, "    %s del-header ", dir);
		hname(b, h->valuestring);
		buf_printf(b, " %s\n", cond);
	}
	const cJSON *set = cJSON_GetObjectItemCaseSensitive(d, "set");
	for (const cJSON *h = cJSON_IsObject(set) ? set->child : NULL; h; h = h->next) {
		if (!cJSON_IsString(h))
			continue;
		buf_printf(b, "    %s set-header ", dir);
		hname(b, h->string);
		buf_putc(b, ' ');
		hvalue(b, h->valuestring);
		buf_printf(b, " %s\n", cond);
	}
}

static void route_rules(struct buf *b, const char *name, const cJSON *route)
{
	char cond[300];
	snprintf(cond, sizeof(cond), "if { var(txn.tether_route) -m str %s }", name);
	buf_printf(b, "    # %s\n", name);
	const cJSON *mb = cJSON_GetObjectItemCaseSensitive(route, "max_body");
	if (cJSON_IsNumber(mb) && mb->valuedouble >= 1) {
		/* by its Content-Length; a body without one (chunked) as far as
		 * haproxy buffers it (tune.bufsize): waited for up to one byte
		 * more than allowed, then measured */
		buf_printf(b, "    http-request deny deny_status 413 %s { req.hdr_val(content-length) gt %.0f }\n", cond,
			   mb->valuedouble);
		/* at-least takes 32 bits; haproxy's buffer is far smaller */
		double least = mb->valuedouble + 1 > 4294967295.0 ? 4294967295.0 : mb->valuedouble + 1;
		buf_printf(b, "    http-request wait-for-body time 10s at-least %.0f %s !{ req.hdr(content-length) -m found }\n",
			   least, cond);
		buf_printf(b, "    http-request deny deny_status 413 %s { req.body_size gt %.0f }\n", cond, mb->valuedouble);
	}
	const cJSON *hd = cJSON_GetObjectItemCaseSensitive(route, "headers");
	header_rules(b, "http-request", cJSON_GetObjectItemCaseSensitive(hd, "request"), cond);
	struct buf re = BUF_INIT, repl = BUF_INIT;
	if (render_opts_path_rewrite(route, '\\', &re, &repl))
		buf_printf(b, "    http-request replace-path '%s' '%s' %s\n", re.data, repl.data, cond);
	buf_release(&re);
	buf_release(&repl);
	/* after-response: haproxy's own answers too (a 504, a 413), as
	 * nginx's add_header ... always */
	header_rules(b, "http-after-response", cJSON_GetObjectItemCaseSensitive(hd, "response"), cond);
}

void render_opts_haproxy_frontend(const struct rstate *rs, const struct rroute *routes, size_t n, struct buf *b)
{
	for (size_t k = 0; k < n; k++) {
		const cJSON *body = body_of(rs, &routes[k]);
		if (body && resource_opts_route_any(body))
			route_rules(b, routes[k].name, body);
	}
}
