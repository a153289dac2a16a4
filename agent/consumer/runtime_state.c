/* consumer/runtime_state.c: what the running haproxy holds, from its answer
 * to `show servers state BACKEND`, and whether that is what the file says
 * (see consumer/runtime.h). Pure functions of the text: the socket's other
 * end may be anything, so the parser is strict and bounded (lines, columns,
 * servers, every number in range) and fuzzed
 * (tests/fuzz/fuzz_runtime_state.c). The servers it returns are the
 * caller's (runtime_servers_release). */
#include "consumer/runtime.h"
#include "strmap.h"
#include "util.h"
#include "xmalloc.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define COLUMNS_MAX 64

/* What haproxy said, printable, for a message: at most 120 bytes, what is
 * not printable ASCII as '?'. */
static void quote(char *out, size_t cap, const char *s, size_t len)
{
	size_t o = 0;
	for (size_t i = 0; i < len && o + 1 < cap && i < 120; i++)
		out[o++] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
	out[o] = '\0';
}

/* "eN" (no leading zero, N below RT_SERVERS_MAX): N; -1 otherwise. */
static int slot_of(const char *name)
{
	if (name[0] != 'e' || name[1] < '0' || name[1] > '9' || (name[1] == '0' && name[2]))
		return -1;
	uint64_t v;
	if (parse_uint_range(name + 1, 0, RT_SERVERS_MAX - 1, &v) < 0)
		return -1;
	return (int)v;
}

/* Splits line (NUL-terminated, modified) at single spaces into at most max
 * fields. Returns how many, or -1 (an empty field, or too many). */
static int split(char *line, char **f, int max)
{
	int n = 0;
	for (char *p = line;;) {
		char *sp = strchr(p, ' ');
		if (sp)
			*sp = '\0';
		if (!*p || n == max)
			return -1;
		f[n++] = p;
		if (!sp)
			return n;
		p = sp + 1;
	}
}

enum col { C_BE_NAME, C_SRV_NAME, C_SRV_ADDR, C_ADMIN, C_UWEIGHT, C_PORT, C_FQDN, C_N };
static const char *const col_names[C_N] = { "be_name", "srv_name", "srv_addr", "srv_admin_state",
					    "srv_uweight", "srv_port", "srv_fqdn" };

struct parse {
	const char *backend;
	int col[C_N];        /* index of each column, -1 absent (srv_fqdn may be) */
	int ncol;
	struct strmap names;
	char *err;
	size_t errlen;
};

/* One row into srv. 0, or -1 with err. */
static int row(struct parse *ps, char *line, size_t lineno, struct rt_server *srv)
{
	char *f[COLUMNS_MAX];
	if (split(line, f, COLUMNS_MAX) != ps->ncol) {
		snprintf(ps->err, ps->errlen, "line %zu has not the %d columns of the header", lineno, ps->ncol);
		return -1;
	}
	if (strcmp(f[ps->col[C_BE_NAME]], ps->backend) != 0) {
		char q[128];
		quote(q, sizeof(q), f[ps->col[C_BE_NAME]], strlen(f[ps->col[C_BE_NAME]]));
		snprintf(ps->err, ps->errlen, "line %zu is of backend '%s', not of %s", lineno, q, ps->backend);
		return -1;
	}
	const char *name = f[ps->col[C_SRV_NAME]], *addr = f[ps->col[C_SRV_ADDR]];
	const char *fqdn = ps->col[C_FQDN] >= 0 ? f[ps->col[C_FQDN]] : "-";
	uint64_t port, uweight, admin;
	if (strlen(name) >= sizeof(srv->name) || strlen(addr) >= sizeof(srv->addr) ||
	    strlen(fqdn) >= sizeof(srv->fqdn)) {
		snprintf(ps->err, ps->errlen, "line %zu: a name or an address is too long", lineno);
		return -1;
	}
	if (parse_uint_range(f[ps->col[C_PORT]], 0, 65535, &port) < 0 ||
	    parse_uint_range(f[ps->col[C_UWEIGHT]], 0, 256, &uweight) < 0 ||
	    parse_uint_range(f[ps->col[C_ADMIN]], 0, 255, &admin) < 0) {
		snprintf(ps->err, ps->errlen, "line %zu: srv_port, srv_uweight or srv_admin_state is not a number "
			 "in range", lineno);
		return -1;
	}
	memcpy(srv->name, name, strlen(name) + 1);
	memcpy(srv->addr, addr, strlen(addr) + 1);
	if (strcmp(fqdn, "-") != 0)
		memcpy(srv->fqdn, fqdn, strlen(fqdn) + 1);
	srv->port = (unsigned)port;
	srv->uweight = (unsigned)uweight;
	srv->admin = (unsigned)admin;
	srv->slot = slot_of(srv->name);
	intptr_t *seen = strmap_ref(&ps->names, srv->name);
	if (*seen) {
		snprintf(ps->err, ps->errlen, "line %zu: server %s is listed twice", lineno, srv->name);
		return -1;
	}
	*seen = 1;
	return 0;
}

/* The header's columns. 0, or -1 with err. */
static int header(struct parse *ps, char *line)
{
	char *f[COLUMNS_MAX];
	if (strncmp(line, "# ", 2) != 0 || (ps->ncol = split(line + 2, f, COLUMNS_MAX)) < 0) {
		snprintf(ps->err, ps->errlen, "the second line is not the header (\"# be_id be_name ...\")");
		return -1;
	}
	for (int c = 0; c < C_N; c++) {
		ps->col[c] = -1;
		for (int i = 0; i < ps->ncol; i++)
			if (strcmp(f[i], col_names[c]) == 0) {
				if (ps->col[c] >= 0) {
					snprintf(ps->err, ps->errlen, "the header names %s twice", col_names[c]);
					return -1;
				}
				ps->col[c] = i;
			}
		if (ps->col[c] < 0 && c != C_FQDN) {
			snprintf(ps->err, ps->errlen, "the header has no %s column", col_names[c]);
			return -1;
		}
	}
	return 0;
}

int runtime_servers_parse(const char *text, size_t len, const char *backend, struct rt_servers *out, char *err,
			  size_t errlen)
{
	memset(out, 0, sizeof(*out));
	size_t lines = 1;
	for (size_t i = 0; i < len; i++)
		lines += text[i] == '\n';
	struct parse ps = { .backend = backend, .err = err, .errlen = errlen };
	strmap_init(&ps.names);
	char line[RT_LINE_MAX + 1];
	size_t lineno = 0, cap = lines < RT_SERVERS_MAX ? lines : RT_SERVERS_MAX;
	out->v = xcalloc(cap, sizeof(*out->v));   /* never moves: names keys its strings */
	int rc = -1;
	for (size_t pos = 0; pos < len;) {
		const char *nl = memchr(text + pos, '\n', len - pos);
		size_t ll = nl ? (size_t)(nl - (text + pos)) : len - pos;
		const char *start = text + pos;
		pos += ll + (nl ? 1 : 0);
		if (ll && start[ll - 1] == '\r')
			ll--;
		if (ll == 0)
			continue;   /* haproxy ends its answer with an empty line */
		lineno++;
		if (ll > RT_LINE_MAX) {
			snprintf(err, errlen, "line %zu is longer than %d bytes", lineno, RT_LINE_MAX);
			goto out;
		}
		for (size_t i = 0; i < ll; i++)
			if (start[i] < 0x20 || start[i] >= 0x7f) {
				snprintf(err, errlen, "line %zu holds a byte that is not printable ASCII", lineno);
				goto out;
			}
		memcpy(line, start, ll);
		line[ll] = '\0';
		if (lineno == 1) {
			if (strcmp(line, "1") != 0) {
				char q[128];
				quote(q, sizeof(q), line, ll);
				snprintf(err, errlen, "haproxy answered '%s', not a servers state of format 1", q);
				goto out;
			}
		} else if (lineno == 2) {
			if (header(&ps, line) < 0)
				goto out;
		} else {
			if (out->n == cap) {
				snprintf(err, errlen, "more than %d servers", RT_SERVERS_MAX);
				goto out;
			}
			if (row(&ps, line, lineno, &out->v[out->n]) < 0)
				goto out;
			out->n++;
		}
	}
	if (lineno < 2) {
		snprintf(err, errlen, lineno ? "the answer ends before its header" : "the answer is empty");
		goto out;
	}
	/* the slots' index: slot -> position + 1 */
	for (size_t k = 0; k < out->n; k++)
		if (out->v[k].slot >= 0 && (size_t)out->v[k].slot >= out->nindex)
			out->nindex = (size_t)out->v[k].slot + 1;
	out->index = xcalloc(out->nindex ? out->nindex : 1, sizeof(*out->index));
	for (size_t k = 0; k < out->n; k++)
		if (out->v[k].slot >= 0)
			out->index[out->v[k].slot] = k + 1;
	rc = 0;
out:
	strmap_release(&ps.names);
	if (rc < 0)
		runtime_servers_release(out);
	return rc;
}

void runtime_servers_release(struct rt_servers *s)
{
	free(s->v);
	free(s->index);
	memset(s, 0, sizeof(*s));
}

const struct rt_server *runtime_slot(const struct rt_servers *s, size_t i)
{
	return i < s->nindex && s->index[i] ? &s->v[s->index[i] - 1] : NULL;
}

size_t runtime_slots(const struct rt_servers *s)
{
	size_t k = 0;
	while (runtime_slot(s, k))
		k++;
	return k;
}

/* An IP literal's family (4 or 6, a v4-mapped v6 address as 4) and bytes;
 * 0 for anything else. */
static int ip_of(const char *s, unsigned char b[16])
{
	memset(b, 0, 16);
	if (inet_pton(AF_INET, s, b) == 1)
		return 4;
	if (inet_pton(AF_INET6, s, b) != 1)
		return 0;
	static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	if (memcmp(b, mapped, 12) == 0) {
		memmove(b, b + 12, 4);
		memset(b + 4, 0, 12);
		return 4;
	}
	return 6;
}

bool runtime_addr_is(const struct rt_server *srv, const char *addr)
{
	unsigned char a[16], h[16];
	int fa = ip_of(addr, a);
	if (fa)
		return ip_of(srv->addr, h) == fa && memcmp(a, h, 16) == 0;
	return srv->fqdn[0] && strcasecmp(srv->fqdn, addr) == 0;
}

bool runtime_slot_holds(const struct rt_server *srv, const struct rt_endpoint *want)
{
	if (!want)
		return (srv->admin & RT_ADMIN_MAINT) != 0;
	return !(srv->admin & (RT_ADMIN_MAINT | RT_ADMIN_DRAIN)) && srv->port == want->port &&
	       srv->uweight == want->weight && runtime_addr_is(srv, want->addr);
}

int runtime_compare(const struct rt_cluster *c, const struct rt_servers *have, char *err, size_t errlen)
{
	for (size_t i = 0; i < c->nwant; i++) {
		const struct rt_endpoint *w = &c->want[i];
		const struct rt_server *srv = runtime_slot(have, i);
		if (!srv) {
			snprintf(err, errlen, "%s/e%zu: haproxy has no such server", c->backend, i);
			return -1;
		}
		if (runtime_slot_holds(srv, w))
			continue;
		if (srv->admin & (RT_ADMIN_MAINT | RT_ADMIN_DRAIN))
			snprintf(err, errlen, "%s/e%zu: haproxy has it %s (admin state 0x%x), the file has it ready",
				 c->backend, i, srv->admin & RT_ADMIN_MAINT ? "in maintenance" : "draining", srv->admin);
		else if (!runtime_addr_is(srv, w->addr))
			snprintf(err, errlen, "%s/e%zu: haproxy has address %s%s%s, the file %s", c->backend, i,
				 srv->addr, srv->fqdn[0] ? " named " : "", srv->fqdn, w->addr);
		else if (srv->port != w->port)
			snprintf(err, errlen, "%s/e%zu: haproxy has port %u, the file %u", c->backend, i, srv->port,
				 w->port);
		else
			snprintf(err, errlen, "%s/e%zu: haproxy has weight %u, the file %u", c->backend, i, srv->uweight,
				 w->weight);
		return -1;
	}
	for (size_t k = 0; k < have->n; k++) {
		const struct rt_server *srv = &have->v[k];
		if (srv->slot < 0 || (size_t)srv->slot < c->nwant || runtime_slot_holds(srv, NULL))
			continue;
		snprintf(err, errlen, "%s/e%d: haproxy has it in service (%s, admin state 0x%x), the file has it free",
			 c->backend, srv->slot, srv->addr, srv->admin);
		return -1;
	}
	return 0;
}
