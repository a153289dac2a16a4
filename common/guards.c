/* guards.c: the guard evaluator (see guards.h), shared by the plane and
 * the agent. Bodies are decoded only for resources a guard covers, and
 * only when a guard has a field that applies to their type. */
#include "guards.h"
#include "json.h"
#include "resource.h"
#include "xmalloc.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void guards_init(struct guards *gs)
{
	memset(gs, 0, sizeof(*gs));
}

void guards_release(struct guards *gs)
{
	for (size_t i = 0; i < gs->n; i++) {
		free(gs->g[i].name);
		free(gs->g[i].match);
	}
	free(gs->g);
	memset(gs, 0, sizeof(*gs));
}

static int bad(char *err, size_t errlen, const char *name, const char *field, const char *what)
{
	snprintf(err, errlen, "%s: %s must be %s", name, field, what);
	return -1;
}

int guards_add(struct guards *gs, const char *name, const char *body, size_t len, char *err, size_t errlen)
{
	cJSON *v = json_decode(body, len, NULL, err, errlen);
	if (!v)
		return -1;
	struct guard_rule g = { 0 };
	int rc = -1;
	const cJSON *f;
	if (!cJSON_IsObject(v)) {
		bad(err, errlen, name, "body", "a JSON object");
		goto out;
	}
	if ((f = cJSON_GetObjectItemCaseSensitive(v, "match"))) {
		if (!cJSON_IsString(f)) {
			bad(err, errlen, name, "match", "a string");
			goto out;
		}
		g.match = xstrdup(f->valuestring);
	}
	if ((f = cJSON_GetObjectItemCaseSensitive(v, "min_endpoints"))) {
		if (!cJSON_IsNumber(f) || !(f->valuedouble >= 0) || f->valuedouble > 1e15) {
			bad(err, errlen, name, "min_endpoints", "an integer >= 0");
			goto out;
		}
		g.has_min_endpoints = true;
		g.min_endpoints = (uint64_t)f->valuedouble;
	}
	if ((f = cJSON_GetObjectItemCaseSensitive(v, "max_shrink"))) {
		if (!cJSON_IsNumber(f) || !(f->valuedouble >= 0 && f->valuedouble <= 1)) {
			bad(err, errlen, name, "max_shrink", "a number in [0,1]");
			goto out;
		}
		g.has_max_shrink = true;
		g.max_shrink = f->valuedouble;
	}
	if ((f = cJSON_GetObjectItemCaseSensitive(v, "max_bytes"))) {
		if (!cJSON_IsNumber(f) || !(f->valuedouble >= 1) || f->valuedouble > 1e15) {
			bad(err, errlen, name, "max_bytes", "an integer > 0");
			goto out;
		}
		g.has_max_bytes = true;
		g.max_bytes = (uint64_t)f->valuedouble;
	}
	if ((f = cJSON_GetObjectItemCaseSensitive(v, "max_growth"))) {
		if (!cJSON_IsNumber(f) || !(f->valuedouble >= 1) || !isfinite(f->valuedouble)) {
			bad(err, errlen, name, "max_growth", "a number >= 1");
			goto out;
		}
		g.has_max_growth = true;
		g.max_growth = f->valuedouble;
	}
	g.name = xstrdup(name);
	if (gs->n == gs->cap) {
		gs->cap = gs->cap ? gs->cap * 2 : 8;
		gs->g = xrealloc(gs->g, gs->cap * sizeof(*gs->g));
	}
	gs->g[gs->n++] = g;
	g.match = NULL;
	rc = 0;
out:
	free(g.match);
	cJSON_Delete(v);
	return rc;
}

void guard_report_init(struct guard_report *r)
{
	memset(r, 0, sizeof(*r));
	buf_init(&r->text);
	buf_init(&r->passed);
}

void guard_report_release(struct guard_report *r)
{
	buf_release(&r->text);
	buf_release(&r->passed);
}

/* ---- what a guard measures --------------------------------------------- */

/* A body's measure: endpoints of a cluster, content bytes of a file, body
 * bytes of a secret. -1: absent (or a body that does not decode, which
 * validation refused already: nothing to judge). */
struct measure {
	long long endpoints;
	long long bytes;
};

static void measure(enum res_type t, const char *body, size_t len, struct measure *m)
{
	m->endpoints = m->bytes = -1;
	if (!body)
		return;
	if (t == RES_SECRET) {
		m->bytes = (long long)len;
		return;
	}
	char err[8];
	cJSON *v = json_decode(body, len, NULL, err, sizeof(err));
	if (!v)
		return;
	if (t == RES_CLUSTER) {
		const cJSON *eps = cJSON_GetObjectItemCaseSensitive(v, "endpoints");
		m->endpoints = cJSON_IsArray(eps) ? cJSON_GetArraySize(eps) : 0;
	} else if (t == RES_FILE) {
		const char *c = json_get_string(v, "content");
		m->bytes = c ? (long long)strlen(c) : 0;
	}
	cJSON_Delete(v);
}

static bool covers(const struct guard_rule *g, const char *name)
{
	return !g->match || strncmp(name, g->match, strlen(g->match)) == 0;
}

static bool applies(const struct guard_rule *g, enum res_type t)
{
	if (t == RES_CLUSTER)
		return g->has_min_endpoints || g->has_max_shrink;
	if (t == RES_FILE)
		return g->has_max_bytes || g->has_max_growth;
	if (t == RES_SECRET)
		return g->has_max_bytes;
	return false;
}

static void violation(struct guard_report *r, const struct guard_rule *g, const char *res, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void violation(struct guard_report *r, const struct guard_rule *g, const char *res, const char *fmt, ...)
{
	if (r->count < GUARDS_SHOWN) {
		char msg[512];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(msg, sizeof(msg), fmt, ap);
		va_end(ap);
		if (r->count)
			buf_puts(&r->text, "; ");
		buf_printf(&r->text, "%s: %s: %s", g->name, res, msg);
	}
	r->count++;
	/* distinct guards, in the order first crossed */
	char q[RES_FULLNAME_MAX + 8];
	snprintf(q, sizeof(q), "\"%s\"", g->name);
	if (r->passed.len && r->passed.data && strstr(r->passed.data, q))
		return;
	if (!r->passed.len)
		buf_putc(&r->passed, '[');
	else
		r->passed.data[--r->passed.len] = '\0';   /* drop the ']' */
	if (r->nguards++)
		buf_putc(&r->passed, ',');
	buf_json_string(&r->passed, g->name);
	buf_putc(&r->passed, ']');
}

/* The digits that show x over limit: 0 (or 2) decimals as usual, more
 * when those would show it at or under the limit ("loses 33%" beside
 * "max_shrink 0.33" reads as a pass: "33.3%"). x / scale is in the
 * limit's unit. */
static int digits_over(double x, double scale, double limit, int least)
{
	int d = least;
	char a[64];
	while (d < 6) {
		snprintf(a, sizeof(a), "%.*f", d, x);
		if (strtod(a, NULL) / scale > limit)
			break;
		d++;
	}
	return d;
}

static void check_one(const struct guard_rule *g, const struct guard_change *c, enum res_type t,
		      const struct measure *old, const struct measure *now, struct guard_report *r)
{
	if (t == RES_CLUSTER) {
		long long n = old->endpoints < 0 ? -1 : old->endpoints;
		long long m = now->endpoints < 0 ? 0 : now->endpoints;   /* deleted: 0 endpoints */
		if (g->has_min_endpoints && (uint64_t)m < g->min_endpoints) {
			if (!c->after)
				violation(r, g, c->name, "deleting it leaves 0 endpoints (min_endpoints %llu)",
					  (unsigned long long)g->min_endpoints);
			else
				violation(r, g, c->name, "%lld endpoints, fewer than min_endpoints %llu", m,
					  (unsigned long long)g->min_endpoints);
		}
		/* the fraction itself, not (n-m) > max_shrink*n: the product rounds
		 * (0.57*100 is 56.99...), which would refuse a shrink at the limit */
		if (g->has_max_shrink && n > 0 && m < n && (double)(n - m) / (double)n > g->max_shrink) {
			double pct = 100.0 * (double)(n - m) / (double)n;
			violation(r, g, c->name, "%lld -> %lld endpoints loses %.*f%% (max_shrink %g)", n, m,
				  digits_over(pct, 100.0, g->max_shrink, 0), pct, g->max_shrink);
		}
		return;
	}
	if (!c->after || now->bytes < 0)
		return;
	const char *what = t == RES_FILE ? "content" : "body";
	if (g->has_max_bytes && (uint64_t)now->bytes > g->max_bytes)
		violation(r, g, c->name, "%s is %lld bytes, over max_bytes %llu", what, now->bytes,
			  (unsigned long long)g->max_bytes);
	if (t == RES_FILE && g->has_max_growth && old->bytes > 0 &&
	    (double)now->bytes / (double)old->bytes > g->max_growth)   /* the ratio: see max_shrink */
		violation(r, g, c->name, "content grows %lld -> %lld bytes, %.*fx (max_growth %g)", old->bytes,
			  now->bytes, digits_over((double)now->bytes / (double)old->bytes, 1.0, g->max_growth, 2),
			  (double)now->bytes / (double)old->bytes, g->max_growth);
}

size_t guards_check(const struct guards *gs, const struct guard_change *ch, size_t n, struct guard_report *r)
{
	size_t before = r->count;
	if (!gs || !gs->n)
		return 0;
	for (size_t i = 0; i < n; i++) {
		const struct guard_change *c = &ch[i];
		enum res_type t = resource_type_of(c->name);
		if (t != RES_CLUSTER && t != RES_FILE && t != RES_SECRET)
			continue;   /* guards are not guarded; other types have no guarded field */
		/* decoded once each, and the body before only for a guard that
		 * compares with it (max_shrink, max_growth) */
		bool have_now = false, have_old = false;
		struct measure old = { -1, -1 }, now;
		for (size_t k = 0; k < gs->n; k++) {
			const struct guard_rule *g = &gs->g[k];
			if (!applies(g, t) || !covers(g, c->name))
				continue;
			if (!have_now) {
				measure(t, c->after, c->after_len, &now);
				have_now = true;
			}
			bool compares = t == RES_CLUSTER ? g->has_max_shrink : t == RES_FILE && g->has_max_growth;
			if (compares && !have_old) {
				measure(t, c->before, c->before_len, &old);
				have_old = true;
			}
			check_one(g, c, t, &old, &now, r);
		}
	}
	return r->count - before;
}

void guards_summary(const struct guard_report *r, char *out, size_t outlen)
{
	if (!r->count) {
		snprintf(out, outlen, "crosses no guard");
		return;
	}
	if (r->count > GUARDS_SHOWN)
		snprintf(out, outlen, "the write crosses %zu guard limits: %s; and %zu more", r->count,
			 r->text.data, r->count - GUARDS_SHOWN);
	else
		snprintf(out, outlen, "the write crosses %zu guard limit%s: %s", r->count, r->count == 1 ? "" : "s",
			 r->text.data);
}
