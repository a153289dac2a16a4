/* consumer/render.c: what the renderers share: parsed and sorted state,
 * output files (see consumer/render.h). */
#include "consumer/render.h"
#include "json.h"
#include "strmap.h"
#include "xmalloc.h"

#include <sodium.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void render_out_release(struct render_out *out)
{
	for (size_t i = 0; i < out->n; i++) {
		free(out->files[i].path);
		if (out->files[i].secret && out->files[i].data.data)
			sodium_memzero(out->files[i].data.data, out->files[i].data.len);
		buf_release(&out->files[i].data);
	}
	free(out->files);
	out->files = NULL;
	out->n = 0;
}

struct buf *render_add(struct render_out *out, const char *path, mode_t mode)
{
	out->files = xrealloc(out->files, (out->n + 1) * sizeof(*out->files));
	struct render_file *f = &out->files[out->n++];
	f->path = xstrdup(path);
	buf_init(&f->data);
	f->mode = mode;
	f->secret = false;
	return &f->data;
}

const char *render_add_secret(struct render_out *out, const char *name, const char *ext, const char *data,
			      size_t len)
{
	unsigned char h[16];
	crypto_generichash(h, sizeof(h), (const unsigned char *)data, len, NULL, 0);
	char path[300];
	snprintf(path, sizeof(path), "%s-%02x%02x%02x%02x%02x%02x%02x%02x.%s", name, h[0], h[1], h[2], h[3], h[4],
		 h[5], h[6], h[7], ext);
	for (size_t i = 0; i < out->n; i++)
		if (out->files[i].secret && strcmp(out->files[i].path, path) == 0)
			return out->files[i].path;
	struct buf *b = render_add(out, path, 0600);
	buf_reserve(b, len + 1);   /* one allocation: no copy of key material left behind by a move */
	buf_append(b, data, len);
	out->files[out->n - 1].secret = true;
	return out->files[out->n - 1].path;
}

/* One spelling per address: "0:0::1" is "::1", and an IPv4 address written
 * as IPv6 ("::ffff:127.0.0.1") is that IPv4 address (nginx cannot bind the
 * mapped form: its IPv6 sockets are IPv6-only). */
static void addr_port(const char *addr, int port, char *out, size_t cap)
{
	struct in6_addr a6;
	char canon[INET6_ADDRSTRLEN];
	if (addr && inet_pton(AF_INET6, addr, &a6) == 1) {
		if (IN6_IS_ADDR_V4MAPPED(&a6) && inet_ntop(AF_INET, &a6.s6_addr[12], canon, sizeof(canon))) {
			snprintf(out, cap, "%s:%d", canon, port);
			return;
		}
		if (inet_ntop(AF_INET6, &a6, canon, sizeof(canon)))
			addr = canon;
	}
	if (!addr)
		snprintf(out, cap, "%d", port);
	else if (strchr(addr, ':'))
		snprintf(out, cap, "[%s]:%d", addr, port);
	else
		snprintf(out, cap, "%s:%d", addr, port);
}

void render_listen_addr(const cJSON *listener, char *out, size_t cap)
{
	const cJSON *port = cJSON_GetObjectItemCaseSensitive(listener, "port");
	addr_port(json_get_string(listener, "address"), cJSON_IsNumber(port) ? (int)port->valuedouble : 0, out, cap);
}

/* The socket address a listen line means: no address is 0.0.0.0. */
static void listen_key(const char *rendered, char *out, size_t cap)
{
	snprintf(out, cap, "%s%s", strchr(rendered, ':') ? "" : "0.0.0.0:", rendered);
}

/* The marker ("HOST:PORT", "[V6]:PORT") spelled the way listeners are. */
static void marker_key(const char *marker, char *out, size_t cap)
{
	char host[INET6_ADDRSTRLEN + 2];
	const char *colon = strrchr(marker, ':');
	size_t hl = colon ? (size_t)(colon - marker) : 0;
	char *end = NULL;
	long port = colon ? strtol(colon + 1, &end, 10) : -1;
	if (!colon || hl == 0 || hl >= sizeof(host) || !end || *end || port < 1 || port > 65535) {
		snprintf(out, cap, "%s", marker);
		return;
	}
	if (marker[0] == '[' && hl >= 2 && marker[hl - 1] == ']')
		snprintf(host, sizeof(host), "%.*s", (int)(hl - 2), marker + 1);
	else
		snprintf(host, sizeof(host), "%.*s", (int)hl, marker);
	char rendered[80];
	addr_port(host, (int)port, rendered, sizeof(rendered));
	listen_key(rendered, out, cap);
}

void render_fill_gen(struct buf *conf, const char *gen_id)
{
	const size_t tl = strlen(RENDER_GEN_TOKEN), gl = strlen(gen_id);
	if (!conf->len || !memmem(conf->data, conf->len, RENDER_GEN_TOKEN, tl))
		return;
	struct buf out = BUF_INIT;
	const char *p = conf->data, *end = conf->data + conf->len;
	for (const char *hit; (hit = memmem(p, (size_t)(end - p), RENDER_GEN_TOKEN, tl)); p = hit + tl) {
		buf_append(&out, p, (size_t)(hit - p));
		buf_append(&out, gen_id, gl);
	}
	buf_append(&out, p, (size_t)(end - p));
	buf_release(conf);
	*conf = out;
}

int render_endpoint(const struct rres *c, const cJSON *ep, int n, const char **addr, int *port, int *weight,
		    char *err, size_t errlen)
{
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(ep, "port");
	const cJSON *w = cJSON_GetObjectItemCaseSensitive(ep, "weight");
	*addr = json_get_string(ep, "address");
	if (!*addr || !render_safe(*addr) || !cJSON_IsNumber(p)) {
		snprintf(err, errlen, "%s: endpoints[%d] cannot be rendered safely", c->r->name, n);
		return -1;
	}
	*port = (int)p->valuedouble;
	*weight = cJSON_IsNumber(w) ? (int)w->valuedouble : 0;
	return 0;
}

bool render_safe(const char *s)
{
	static const char ok[] = "._:/%@+,=!*~-[]";
	if (!*s)
		return false;
	for (; *s; s++) {
		char c = *s;
		bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
		if (!alnum && !strchr(ok, c))
			return false;
	}
	return true;
}

struct load_ctx {
	struct rstate *rs;
	const struct sealed_opener *opener;
	const struct strmap *skip;   /* names the candidate replaces or removes */
	size_t cap[RES_TYPE_COUNT];
	char *err;
	size_t errlen;
	int rc;
};

static void load_one(void *ctx, const struct res *r)
{
	struct load_ctx *l = ctx;
	if (l->rc < 0 || (l->skip && strmap_get(l->skip, r->name, NULL)))
		return;
	enum res_type t = resource_type_of(r->name);
	if (t >= RES_TYPE_COUNT)
		return;
	cJSON *body = NULL;
	if (sealed_is(r)) {
		/* its plaintext, opened for this render only */
		if (!l->opener) {
			snprintf(l->err, l->errlen, "%s: sealed, and nothing here can open it", r->name);
			l->rc = -1;
			return;
		}
		if (l->opener->open(l->opener->ctx, r, &body, l->err, l->errlen) < 0) {
			l->rc = -1;
			return;
		}
	} else if (!(body = json_decode(r->body, r->body_len, NULL, l->err, l->errlen))) {
		l->rc = -1;
		return;
	}
	struct rstate *rs = l->rs;
	if (rs->n[t] == l->cap[t]) {
		l->cap[t] = l->cap[t] ? l->cap[t] * 2 : 16;
		rs->by_type[t] = xrealloc(rs->by_type[t], l->cap[t] * sizeof(struct rres));
	}
	struct rres *x = &rs->by_type[t][rs->n[t]++];
	x->r = r;
	x->bare = strchr(r->name, '/') + 1;
	x->body = body;
}

static int cmp_rres(const void *a, const void *b)
{
	return strcmp(((const struct rres *)a)->r->name, ((const struct rres *)b)->r->name);
}

int rstate_load(const struct state *s, const struct candidate *c, struct rstate *rs, char *err, size_t errlen)
{
	return rstate_load_opened(s, c, NULL, rs, err, errlen);
}

int rstate_load_opened(const struct state *s, const struct candidate *c, const struct sealed_opener *opener,
		       struct rstate *rs, char *err, size_t errlen)
{
	memset(rs, 0, sizeof(*rs));
	struct strmap skip;
	strmap_init(&skip);
	for (size_t i = 0; c && i < c->n; i++) {
		const struct res *r = c->items[i].new_res ? c->items[i].new_res : c->items[i].old;
		*strmap_ref(&skip, r->name) = 1;
	}
	struct load_ctx l = { .rs = rs, .opener = opener, .skip = c ? &skip : NULL, .err = err, .errlen = errlen };
	state_each(s, load_one, &l);
	l.skip = NULL;
	for (size_t i = 0; c && i < c->n; i++)
		if (c->items[i].new_res)
			load_one(&l, c->items[i].new_res);
	strmap_release(&skip);
	for (int t = 0; t < RES_TYPE_COUNT; t++)
		if (rs->n[t] > 1)
			qsort(rs->by_type[t], rs->n[t], sizeof(struct rres), cmp_rres);
	if (l.rc < 0) {
		rstate_release(rs);
		return -1;
	}
	return 0;
}

void rstate_release(struct rstate *rs)
{
	for (int t = 0; t < RES_TYPE_COUNT; t++) {
		for (size_t i = 0; i < rs->n[t]; i++) {
			if (t == RES_SECRET)
				sealed_body_free(rs->by_type[t][i].body);   /* key material */
			else
				cJSON_Delete(rs->by_type[t][i].body);
		}
		free(rs->by_type[t]);
	}
	memset(rs, 0, sizeof(*rs));
}

const struct rres *rstate_find(const struct rstate *rs, enum res_type t, const char *bare)
{
	size_t lo = 0, hi = rs->n[t];
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(rs->by_type[t][mid].bare, bare);
		if (c == 0)
			return &rs->by_type[t][mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static int host_class(const char *h)
{
	return strcmp(h, "*") == 0 ? 2 : strncmp(h, "*.", 2) == 0 ? 1 : 0;
}

static int cmp_route(const void *a, const void *b)
{
	const struct rroute *x = a, *y = b;
	int cx = host_class(x->host), cy = host_class(y->host);
	if (cx != cy)
		return cx - cy;
	/* of two wildcards the longer, more specific one first: nginx takes
	 * the longest match, haproxy the first */
	size_t hx = strlen(x->host), hy = strlen(y->host);
	if (cx == 1 && hx != hy)
		return hx > hy ? -1 : 1;
	/* host names have no case: "A.com" and "a.com" are one host */
	int c = strcasecmp(x->host, y->host);
	if (c)
		return c;
	size_t lx = strlen(x->path), ly = strlen(y->path);
	if (lx != ly)
		return lx > ly ? -1 : 1;
	c = strcmp(x->path, y->path);
	return c ? c : strcmp(x->name, y->name);
}

bool render_same_host(const char *a, const char *b)
{
	return strcasecmp(a, b) == 0;
}

int render_routes_of(const struct rstate *rs, const char *listener, struct rroute **out, size_t *n,
		     char *err, size_t errlen)
{
	size_t cnt = 0;
	struct rroute *v = xcalloc(rs->n[RES_ROUTE] ? rs->n[RES_ROUTE] : 1, sizeof(*v));
	for (size_t i = 0; i < rs->n[RES_ROUTE]; i++) {
		const struct rres *r = &rs->by_type[RES_ROUTE][i];
		const char *l = json_get_string(r->body, "listener");
		if (!l || strcmp(l, listener) != 0)
			continue;
		struct rroute *x = &v[cnt++];
		x->name = r->r->name;
		x->host = json_get_string(r->body, "host");
		x->path = json_get_string(r->body, "path");
		x->cluster = json_get_string(r->body, "cluster");
		x->body = r->body;
		if (!x->host)
			x->host = "*";
		if (!x->path)
			x->path = "/";
		if (!x->cluster || !render_safe(x->host) || !render_safe(x->path) || !render_safe(x->cluster)) {
			snprintf(err, errlen, "%s: a value cannot be rendered safely", x->name);
			free(v);
			return -1;
		}
	}
	qsort(v, cnt, sizeof(*v), cmp_route);
	for (size_t i = 1; i < cnt; i++) {
		if (render_same_host(v[i].host, v[i - 1].host) && strcmp(v[i].path, v[i - 1].path) == 0) {
			snprintf(err, errlen, "%s: host '%s' and path '%s' on listener '%s' are already %s's", v[i].name,
				 v[i].host, v[i].path, listener, v[i - 1].name);
			free(v);
			return -1;
		}
	}
	*out = v;
	*n = cnt;
	return 0;
}

int render_check_listeners(const struct rstate *rs, const char *marker, char *err, size_t errlen)
{
	char mk[100] = "";
	if (marker)
		marker_key(marker, mk, sizeof(mk));
	for (size_t i = 0; i < rs->n[RES_LISTENER]; i++) {
		char a[80], ka[100];
		render_listen_addr(rs->by_type[RES_LISTENER][i].body, a, sizeof(a));
		if (!render_safe(a)) {
			snprintf(err, errlen, "%s: its address cannot be rendered safely", rs->by_type[RES_LISTENER][i].r->name);
			return -1;
		}
		/* compared as socket addresses: "8080" is 0.0.0.0:8080 */
		listen_key(a, ka, sizeof(ka));
		if (marker && strcmp(ka, mk) == 0) {
			snprintf(err, errlen, "%s: %s is the agent's marker address", rs->by_type[RES_LISTENER][i].r->name, a);
			return -1;
		}
		for (size_t j = 0; j < i; j++) {
			char b[80], kb[100];
			render_listen_addr(rs->by_type[RES_LISTENER][j].body, b, sizeof(b));
			listen_key(b, kb, sizeof(kb));
			if (strcmp(ka, kb) == 0) {
				snprintf(err, errlen, "%s: %s is already %s's address", rs->by_type[RES_LISTENER][i].r->name,
					 a, rs->by_type[RES_LISTENER][j].r->name);
				return -1;
			}
		}
	}
	return 0;
}

int render_main(const struct state *s, const struct candidate *c, const struct render_opts *o,
		struct render_out *out, const char *main_name, render_body_fn body, char *err, size_t errlen)
{
	struct rstate rs;
	if (rstate_load_opened(s, c, o->opener, &rs, err, errlen) < 0)
		return -1;
	int rc = -1;
	/* the main file is the first; it is written into a local buffer,
	 * since adding secret files moves out->files */
	render_add(out, main_name, 0644);
	struct buf main = BUF_INIT;
	buf_puts(&main, "# generated by tetherd: do not edit (it is replaced on every change)\n\n");
	if (render_check_listeners(&rs, o->marker, err, errlen) < 0 || body(&rs, o, out, &main, err, errlen) < 0)
		goto out;
	rc = 0;
	buf_release(&out->files[0].data);
	out->files[0].data = main;
	buf_init(&main);
out:
	buf_release(&main);
	rstate_release(&rs);
	return rc;
}
