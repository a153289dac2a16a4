/* consumer/runtime.c: which changes go over haproxy's runtime API, and
 * with which commands (see consumer/runtime.h). runtime_plan diffs the
 * applied state and a candidate: only clusters whose endpoints change,
 * every other field equal, nothing else changing, qualify; the plan it
 * returns (owned by the caller: runtime_plan_release) lists them, before
 * and after. runtime_commands turns one of them, with what the running
 * haproxy holds, into `set server` lines. Pure: no I/O. */
#include "consumer/runtime.h"
#include "json.h"
#include "resource.h"
#include "resource_opts.h"
#include "xmalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The characters an address may hold on haproxy's command line (an IP
 * literal or a host name: never a blank, ';' or a newline). */
static bool sendable(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '.' ||
		      *s == ':' || *s == '-'))
			return false;
	return true;
}

/* The endpoints of a cluster's body into *out (n of them). 0, or -1 when
 * one cannot be sent (why says which). */
static int endpoints_of(const char *name, const cJSON *body, struct rt_endpoint **out, size_t *n, char *why,
			size_t whylen)
{
	const cJSON *eps = cJSON_GetObjectItemCaseSensitive(body, "endpoints");
	size_t count = (size_t)cJSON_GetArraySize(eps);
	*out = xcalloc(count ? count : 1, sizeof(**out));
	*n = 0;
	for (const cJSON *ep = eps ? eps->child : NULL; ep; ep = ep->next) {
		struct rt_endpoint *e = &(*out)[*n];
		const char *addr = json_get_string(ep, "address");
		const cJSON *port = cJSON_GetObjectItemCaseSensitive(ep, "port");
		const cJSON *w = cJSON_GetObjectItemCaseSensitive(ep, "weight");
		if (!addr || strlen(addr) >= sizeof(e->addr) || !sendable(addr) || !cJSON_IsNumber(port)) {
			snprintf(why, whylen, "%s: endpoints[%zu] cannot be sent over the runtime API", name, *n);
			free(*out);
			*out = NULL;
			return -1;
		}
		snprintf(e->addr, sizeof(e->addr), "%s", addr);
		e->port = (unsigned)port->valuedouble;
		e->weight = cJSON_IsNumber(w) ? (unsigned)w->valuedouble : 1;
		(*n)++;
	}
	return 0;
}

/* One changed cluster: qualifies when both bodies have the same fields
 * but for endpoints. 1 (rc filled), 0 (why says what else changes). */
static int cluster_of(const struct cand_item *it, struct rt_cluster *rc, char *why, size_t whylen)
{
	const char *name = it->new_res->name;
	char e[128];
	int ok = 0;
	cJSON *before = json_decode(it->old->body, it->old->body_len, NULL, e, sizeof(e));
	cJSON *after = json_decode(it->new_res->body, it->new_res->body_len, NULL, e, sizeof(e));
	if (!before || !after) {
		snprintf(why, whylen, "%s cannot be read", name);
		goto out;
	}
	cJSON *eb = cJSON_DetachItemFromObjectCaseSensitive(before, "endpoints");
	cJSON *ea = cJSON_DetachItemFromObjectCaseSensitive(after, "endpoints");
	bool same = cJSON_Compare(before, after, true);
	if (eb)
		cJSON_AddItemToObject(before, "endpoints", eb);
	if (ea)
		cJSON_AddItemToObject(after, "endpoints", ea);
	if (!same) {
		snprintf(why, whylen, "%s changes more than its endpoints", name);
		goto out;
	}
	memset(rc, 0, sizeof(*rc));
	if (endpoints_of(name, before, &rc->old, &rc->nold, why, whylen) < 0 ||
	    endpoints_of(name, after, &rc->want, &rc->nwant, why, whylen) < 0) {
		free(rc->old);
		rc->old = NULL;
		goto out;
	}
	rc->name = xstrdup(name);
	rc->backend = xasprintf("tether_c_%s", strchr(name, '/') + 1);
	ok = 1;
out:
	cJSON_Delete(before);
	cJSON_Delete(after);
	return ok;
}

/* The routes of the applied state with a haproxy backend of their own
 * (resource_opts_own_backend): route name and cluster, bare. */
struct own_routes {
	char **route, **cluster;
	size_t n, cap;
};

static void own_route(void *ctx, const struct res *r)
{
	struct own_routes *o = ctx;
	if (resource_type_of(r->name) != RES_ROUTE ||
	    !(strstr(r->body, "\"timeout\"") || strstr(r->body, "\"retries\"") || strstr(r->body, "\"websocket\"")))
		return;
	char e[128];
	cJSON *b = json_decode(r->body, r->body_len, NULL, e, sizeof(e));
	const char *cl = b ? json_get_string(b, "cluster") : NULL;
	if (cl && resource_opts_own_backend(b)) {
		if (o->n == o->cap) {
			o->cap = o->cap ? 2 * o->cap : 8;
			o->route = xrealloc(o->route, o->cap * sizeof(*o->route));
			o->cluster = xrealloc(o->cluster, o->cap * sizeof(*o->cluster));
		}
		o->route[o->n] = xstrdup(strchr(r->name, '/') + 1);
		o->cluster[o->n++] = xstrdup(cl);
	}
	cJSON_Delete(b);
}

static struct rt_endpoint *endpoints_copy(const struct rt_endpoint *e, size_t n)
{
	struct rt_endpoint *c = xcalloc(n ? n : 1, sizeof(*c));
	if (n)
		memcpy(c, e, n * sizeof(*c));
	return c;
}

/* Each planned cluster's changes go to the backends of the routes that
 * have one of their own too (tether_r_NAME, the cluster's servers). */
static void route_backends(const struct state *s, struct rt_plan *p)
{
	struct own_routes o = { 0 };
	state_each(s, own_route, &o);
	size_t n = p->n;
	for (size_t i = 0; i < o.n; i++) {
		for (size_t k = 0; k < n; k++) {
			struct rt_cluster *c = &p->clusters[k];
			if (strcmp(strchr(c->name, '/') + 1, o.cluster[i]) != 0)
				continue;
			p->clusters = xrealloc(p->clusters, (p->n + 1) * sizeof(*p->clusters));
			c = &p->clusters[k];
			struct rt_cluster *r = &p->clusters[p->n++];
			r->name = xstrdup(c->name);
			r->backend = xasprintf("tether_r_%s", o.route[i]);
			r->old = endpoints_copy(c->old, c->nold);
			r->nold = c->nold;
			r->want = endpoints_copy(c->want, c->nwant);
			r->nwant = c->nwant;
		}
		free(o.route[i]);
		free(o.cluster[i]);
	}
	free(o.route);
	free(o.cluster);
}

int runtime_plan(const struct state *s, const struct candidate *c, struct rt_plan *p, char *why, size_t whylen)
{
	memset(p, 0, sizeof(*p));
	if (!c->n) {
		snprintf(why, whylen, "nothing changes");
		return 0;
	}
	p->clusters = xcalloc(c->n, sizeof(*p->clusters));
	for (size_t i = 0; i < c->n; i++) {
		const struct cand_item *it = &c->items[i];
		const char *name = it->new_res ? it->new_res->name : it->old ? it->old->name : "?";
		if (resource_type_of(name) != RES_CLUSTER || !it->new_res || !it->old) {
			snprintf(why, whylen, "%s %s", name, !it->old ? "is added" : !it->new_res ? "is removed" : "changes");
			goto no;
		}
		if (!cluster_of(it, &p->clusters[p->n], why, whylen))
			goto no;
		p->n++;
	}
	if (s)
		route_backends(s, p);
	return 1;
no:
	runtime_plan_release(p);
	return 0;
}

void runtime_plan_release(struct rt_plan *p)
{
	for (size_t i = 0; i < p->n; i++) {
		free(p->clusters[i].name);
		free(p->clusters[i].backend);
		free(p->clusters[i].old);
		free(p->clusters[i].want);
	}
	free(p->clusters);
	memset(p, 0, sizeof(*p));
}

/* ---- the commands ------------------------------------------------------------ */

size_t runtime_commands(const struct rt_cluster *c, const struct rt_servers *have, struct buf *cmds)
{
	size_t n = 0;
	for (size_t i = 0; i < c->nwant; i++) {
		const struct rt_endpoint *w = &c->want[i];
		const struct rt_endpoint *o = i < c->nold ? &c->old[i] : NULL;
		const struct rt_server *srv = runtime_slot(have, i);
		bool addr_held = srv && srv->port == w->port && runtime_addr_is(srv, w->addr);
		bool weight_held = srv && srv->uweight == w->weight;
		bool ready = srv && !(srv->admin & (RT_ADMIN_MAINT | RT_ADMIN_DRAIN));
		/* the state says it changed: set it, whatever haproxy seems to
		 * hold (a host name's srv_fqdn outlives an address set later) */
		if (!o || strcmp(o->addr, w->addr) != 0 || o->port != w->port || !addr_held) {
			buf_printf(cmds, "set server %s/e%zu addr %s port %u\n", c->backend, i, w->addr, w->port);
			n++;
		}
		if (!o || o->weight != w->weight || !weight_held) {
			buf_printf(cmds, "set server %s/e%zu weight %u\n", c->backend, i, w->weight);
			n++;
		}
		if (!ready) {
			buf_printf(cmds, "set server %s/e%zu state ready\n", c->backend, i);
			n++;
		}
	}
	/* then the slots no endpoint wants: drained first (no new
	 * connection; those open finish), then maintenance */
	for (size_t k = 0; k < have->n; k++) {
		const struct rt_server *srv = &have->v[k];
		if (srv->slot < 0 || (size_t)srv->slot < c->nwant || (srv->admin & RT_ADMIN_MAINT))
			continue;
		buf_printf(cmds, "set server %s/e%d state drain\n", c->backend, srv->slot);
		buf_printf(cmds, "set server %s/e%d state maint\n", c->backend, srv->slot);
		n += 2;
	}
	return n;
}
