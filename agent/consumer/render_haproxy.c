/* consumer/render_haproxy.c: the haproxy renderer: a frontend per listener
 * (TLS from secrets) with host and path ACLs per route, a backend per
 * cluster, a 404 backend, and the marker frontend. The operator starts
 * haproxy with `-f BASE.cfg -f OUTPUT_DIR/current/` (master-worker mode to
 * reload with SIGUSR2). Every proxy carries its own mode and timeouts, so the
 * file works after any base configuration. For traffic-aware gates it may
 * declare the stats socket (a second `global` section, which haproxy merges)
 * and send each request's access log line (docs/gates.md) to the agent's
 * syslog listener, naming the route that served it. For haproxy's runtime
 * API (--runtime-api) it declares the admin-level socket the same way and
 * gives each backend free, disabled server slots after its real servers.
 * Route and cluster options (render_opts_haproxy.c): a listener with a
 * route that sets one names each request's route in txn.tether_route
 * first and picks the backend by it; a route with an option haproxy takes
 * only per backend has a backend of its own, tether_r_NAME. */
#include "consumer/render.h"
#include "consumer/render_opts.h"
#include "json.h"
#include "pemcheck.h"
#include "resource_opts.h"
#include "xmalloc.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One backend: a cluster's (tether_c_NAME, route NULL) or a route's own
 * (tether_r_NAME: its cluster c's servers with the route's options). */
static int backend(const struct rres *c, const char *name, const cJSON *route, const struct render_opts *o,
		   struct buf *b, char *err, size_t errlen)
{
	const char *lb = json_get_string(c->body, "lb");
	const char *balance = lb && strcmp(lb, "least_conn") == 0 ? "leastconn"
			      : lb && strcmp(lb, "random") == 0   ? "random"
								  : "roundrobin";
	buf_printf(b, "backend %s\n    mode http\n    balance %s\n", name, balance);
	render_opts_haproxy_timeouts(b, route);
	render_opts_haproxy_backend(b, c->body, route);
	const cJSON *eps = cJSON_GetObjectItemCaseSensitive(c->body, "endpoints");
	int n = 0;
	for (const cJSON *ep = eps ? eps->child : NULL; ep; ep = ep->next, n++) {
		const char *addr;
		int port, w;
		if (render_endpoint(c, ep, n, &addr, &port, &w, err, errlen) < 0)
			return -1;
		buf_printf(b, strchr(addr, ':') ? "    server e%d [%s]:%d" : "    server e%d %s:%d", n, addr, port);
		buf_printf(b, " weight %d", w ? w : 1);
		render_opts_haproxy_server(b, c->body);
		buf_puts(b, "\n");
	}
	/* the runtime API's free slots: one server-template line
	 * (haproxy names them e<n>..e<n+h-1>), disabled until an
	 * endpoint added at runtime takes one */
	if (o->runtime_slots) {
		buf_printf(b, "    server-template e %d-%d " RENDER_SLOT_ADDR ":%d disabled weight 1", n,
			   n + RENDER_HEADROOM(n) - 1, RENDER_SLOT_PORT);
		render_opts_haproxy_server(b, c->body);
		buf_puts(b, "\n");
	}
	/* the cluster's snippet, in its own backend and in its routes' */
	if (render_snippet(b, c->r->name, c->body, "haproxy", "    ", err, errlen) < 0)
		return -1;
	buf_puts(b, "\n");
	return 0;
}

static int backends(const struct rstate *rs, const struct render_opts *o, struct buf *b, char *err, size_t errlen)
{
	for (size_t i = 0; i < rs->n[RES_CLUSTER]; i++) {
		const struct rres *c = &rs->by_type[RES_CLUSTER][i];
		char name[RES_NAME_MAX + 16];
		snprintf(name, sizeof(name), "tether_c_%s", c->bare);
		if (backend(c, name, NULL, o, b, err, errlen) < 0)
			return -1;
	}
	/* routes with an option haproxy allows only per backend */
	for (size_t i = 0; i < rs->n[RES_ROUTE]; i++) {
		const struct rres *r = &rs->by_type[RES_ROUTE][i];
		if (!resource_opts_own_backend(r->body))
			continue;
		const char *cn = json_get_string(r->body, "cluster");
		const struct rres *c = cn ? rstate_find(rs, RES_CLUSTER, cn) : NULL;
		char name[RES_NAME_MAX + 16];
		snprintf(name, sizeof(name), "tether_r_%s", r->bare);
		if (!c) {
			snprintf(err, errlen, "%s: unknown cluster", r->r->name);
			return -1;
		}
		if (backend(c, name, r->body, o, b, err, errlen) < 0)
			return -1;
	}
	buf_puts(b, "backend tether_not_found\n    mode http\n"
		    "    http-request return status 404 content-type text/plain string \"no route\\n\"\n\n");
	return 0;
}

/* One use_backend rule of a frontend: the route it serves ("-" for the
 * 404 of a host's unrouted paths) and its condition (" acl acl..." or ""). */
struct tag {
	const char *route;
	char cond[600];
};

/* Names the route of each request in txn.tether_route for the access log
 * and the routes' snippets: "-" first, then the rules last to first, so
 * the first rule that matches (the one haproxy's use_backend takes) is the
 * last to set it. */
static void route_tags(struct buf *b, const struct tag *tags, size_t n)
{
	buf_puts(b, "    http-request set-var(txn.tether_route) str(-)\n");
	for (size_t k = n; k-- > 0;) {
		buf_printf(b, "    http-request set-var(txn.tether_route) str(%s)", tags[k].route);
		if (tags[k].cond[0])
			buf_printf(b, " if%s", tags[k].cond);
		buf_puts(b, "\n");
	}
}

static int frontends(const struct rstate *rs, struct render_out *out, const struct render_opts *o, struct buf *b,
		     char *err, size_t errlen)
{
	for (size_t i = 0; i < rs->n[RES_LISTENER]; i++) {
		const struct rres *l = &rs->by_type[RES_LISTENER][i];
		char addr[80], bind[96];
		render_listen_addr(l->body, addr, sizeof(addr));
		/* haproxy binds "ipv6@[addr]:port" and ":port" */
		if (addr[0] == '[')
			snprintf(bind, sizeof(bind), "ipv6@%s", addr);
		else if (!strchr(addr, ':'))
			snprintf(bind, sizeof(bind), ":%s", addr);
		else
			snprintf(bind, sizeof(bind), "%s", addr);
		buf_printf(b, "frontend tether_l_%s\n    mode http\n    bind %s", l->bare, bind);
		const cJSON *tls = cJSON_GetObjectItemCaseSensitive(l->body, "tls");
		const char *sname = cJSON_IsObject(tls) ? json_get_string(tls, "secret") : NULL;
		if (sname) {
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
			/* haproxy reads the certificate and its key from one file */
			struct buf pem = BUF_INIT;
			buf_reserve(&pem, strlen(cert) + strlen(key) + 2);   /* one allocation: wiped below */
			buf_puts(&pem, cert);
			if (pem.len && pem.data[pem.len - 1] != '\n')
				buf_putc(&pem, '\n');
			buf_puts(&pem, key);
			const char *name = render_add_secret(out, sname, "pem", pem.data, pem.len);
			sodium_memzero(pem.data, pem.len);
			buf_release(&pem);
			buf_printf(b, " ssl crt %s/%s", o->secrets_dir, name);
		}
		buf_puts(b, "\n    timeout client 60s\n    option forwardfor\n");
		if (o->traffic_syslog)
			buf_printf(b, "    log %s len 2048 local7 info\n"
				      "    log-format \"tether1 " RENDER_GEN_TOKEN
				      " %%ST %%Ta%%[str(ms)] %%[var(txn.tether_route)]\"\n",
				   o->traffic_syslog);
		struct rroute *routes;
		size_t n;
		if (render_routes_of(rs, l->bare, &routes, &n, err, errlen) < 0)
			return -1;
		/* with the access log, a snippet or route options, the
		 * use_backend rules go after the rules naming the route
		 * (haproxy runs http-request rules first, and warns of one
		 * written after a use_backend) */
		bool opts = render_opts_haproxy_uses(rs, routes, n);
		bool tagged = o->traffic_syslog || opts || render_snippet_haproxy_any(l, routes, n);
		struct buf ub = BUF_INIT;
		struct buf *u = tagged ? &ub : b;
		struct tag *tags = xcalloc(2 * n + 1, sizeof(*tags));
		size_t nt = 0;
		bool has_root = false;
		for (size_t k = 0; k < n; k++) {
			const struct rroute *r = &routes[k];
			const char *rn = strchr(r->name, '/') + 1;
			char cond[600] = "";
			size_t cl = 0;
			buf_printf(b, "    # %s\n", r->name);
			if (strcmp(r->host, "*") != 0) {
				if (strncmp(r->host, "*.", 2) == 0)
					buf_printf(b, "    acl h_%s hdr(host),field(1,:) -i -m end %s\n", rn, r->host + 1);
				else
					buf_printf(b, "    acl h_%s hdr(host),field(1,:) -i %s\n", rn, r->host);
				cl += (size_t)snprintf(cond + cl, sizeof(cond) - cl, " h_%s", rn);
			}
			if (strcmp(r->path, "/") != 0) {
				buf_printf(b, "    acl p_%s path_beg %s\n", rn, r->path);
				cl += (size_t)snprintf(cond + cl, sizeof(cond) - cl, " p_%s", rn);
			}
			char target[RES_NAME_MAX + 16];
			render_opts_haproxy_target(rs, r, target, sizeof(target));
			/* with options, the route as named before they change
			 * the request (its host, its path) */
			if (opts)
				buf_printf(u, "    use_backend %s if { var(txn.tether_route) -m str %s }\n", target, r->name);
			else if (cl)
				buf_printf(u, "    use_backend tether_c_%s if%s\n", r->cluster, cond);
			else
				buf_printf(u, "    use_backend tether_c_%s\n", r->cluster);
			tags[nt].route = r->name;
			snprintf(tags[nt++].cond, sizeof(tags[0].cond), "%s", cond);
			/* the last route of a host without a "/" route: its other
			 * paths are 404, not the "*" routes' (as nginx does) */
			has_root |= strcmp(r->path, "/") == 0;
			bool last = k + 1 == n || !render_same_host(routes[k + 1].host, r->host);
			if (last) {
				if (!has_root && strcmp(r->host, "*") != 0) {
					if (!opts)
						buf_printf(u, "    use_backend tether_not_found if h_%s\n", rn);
					tags[nt].route = "-";
					snprintf(tags[nt++].cond, sizeof(tags[0].cond), " h_%s", rn);
				}
				has_root = false;
			}
		}
		int rc = 0;
		if (tagged) {
			route_tags(b, tags, nt);
			if (opts)
				render_opts_haproxy_frontend(rs, routes, n, b);
			rc = render_snippet_haproxy_frontend(b, l, routes, n, err, errlen);
			if (ub.len)
				buf_append(b, ub.data, ub.len);
		}
		buf_release(&ub);
		free(tags);
		free(routes);
		if (rc < 0)
			return -1;
		buf_puts(b, "    default_backend tether_not_found\n\n");
	}
	return 0;
}

static int haproxy_body(const struct rstate *rs, const struct render_opts *o, struct render_out *out,
			struct buf *b, char *err, size_t errlen)
{
	if (o->stats_socket && !render_safe(o->stats_socket)) {
		snprintf(err, errlen, "the stats socket '%s' cannot be rendered safely", o->stats_socket);
		return -1;
	}
	if (o->admin_socket && !render_safe(o->admin_socket)) {
		snprintf(err, errlen, "the runtime API's socket '%s' cannot be rendered safely", o->admin_socket);
		return -1;
	}
	if (o->traffic_syslog && !render_safe(o->traffic_syslog)) {
		snprintf(err, errlen, "the traffic syslog address '%s' cannot be rendered safely", o->traffic_syslog);
		return -1;
	}
	/* haproxy merges a second global section into the first (the base
	 * configuration's); level user reads the counters, changes nothing;
	 * level admin is the runtime API's (set server) */
	if (o->stats_socket || o->admin_socket) {
		buf_puts(b, "global\n");
		if (o->admin_socket)
			buf_printf(b, "    stats socket %s mode 600 level admin\n", o->admin_socket);
		if (o->stats_socket)
			buf_printf(b, "    stats socket %s mode 600 level user\n", o->stats_socket);
		buf_puts(b, "\n");
	}
	return frontends(rs, out, o, b, err, errlen) < 0 || backends(rs, o, b, err, errlen) < 0 ? -1 : 0;
}

static int haproxy_render(const struct state *s, const struct candidate *c, const struct render_opts *o,
			  struct render_out *out, char *err, size_t errlen)
{
	return render_main(s, c, o, out, "tether.cfg", haproxy_body, err, errlen);
}

static void haproxy_marker(struct buf *conf, const struct render_opts *o, const char *gen_id)
{
	if (!o->marker)
		return;
	buf_printf(conf, "# the agent reads this to see which generation serves\n"
			 "frontend tether_marker\n    mode http\n    bind %s\n    timeout client 10s\n"
			 "    http-request return status 200 content-type text/plain string \"%s\\n\""
			 " if { path /tether-generation }\n"
			 "    http-request return status 404\n\n",
		   o->marker, gen_id);
}

const struct renderer render_haproxy = { "haproxy", haproxy_render, haproxy_marker };
