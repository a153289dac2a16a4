/* resource_opts.c: a route's and a cluster's options, validated (see
 * resource_opts.h). Every value that reaches a consumer's configuration is
 * bounded here to characters neither nginx's nor haproxy's syntax gives a
 * meaning to inside a quoted word, so no option can inject configuration. */
#include "resource_opts.h"
#include "resource.h"
#include "util.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

struct octx {
	const char *res;
	unsigned flags;
	char *err;
	size_t errlen;
};

static int fail(struct octx *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct octx *v, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	resource_vfail(v->err, v->errlen, v->res, fmt, ap);
	va_end(ap);
	return -1;
}

/* With RES_STRICT, a key of obj not in known (NULL-ended) is an error. */
static int only(struct octx *v, const cJSON *obj, const char *where, const char *const *known)
{
	if (!(v->flags & RES_STRICT))
		return 0;
	for (const cJSON *c = obj->child; c; c = c->next) {
		bool ok = false;
		for (const char *const *k = known; *k && !ok; k++)
			ok = strcmp(c->string, *k) == 0;
		if (ok)
			continue;
		char show[STR_SHOW_BUF], list[128] = "";
		size_t l = 0;
		for (const char *const *k = known; *k; k++)
			l += (size_t)snprintf(list + l, sizeof(list) - l, "%s%s", k == known ? "" : ", ", *k);
		return fail(v, "%s: unknown field '%s' (known: %s)", where, str_show(c->string, show), list);
	}
	return 0;
}

static bool integer_in(const cJSON *f, double lo, double hi)
{
	return cJSON_IsNumber(f) && f->valuedouble >= lo && f->valuedouble <= hi &&
	       (double)(int64_t)f->valuedouble == f->valuedouble;
}

static int timeouts(struct octx *v, const cJSON *t)
{
	static const char *const keys[] = { "connect", "read", "send", NULL };
	if (!cJSON_IsObject(t))
		return fail(v, "timeout: must be an object with connect, read and send in seconds (each optional)");
	if (only(v, t, "timeout", keys) < 0)
		return -1;
	for (const char *const *k = keys; *k; k++) {
		const cJSON *f = cJSON_GetObjectItemCaseSensitive(t, *k);
		if (f && !(cJSON_IsNumber(f) && f->valuedouble >= 0.001 && f->valuedouble <= RES_OPTS_TIMEOUT_MAX))
			return fail(v, "timeout.%s: must be a number of seconds in 0.001..86400", *k);
	}
	return 0;
}

/* RFC 7230's token characters. */
static bool token_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool header_name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > RES_OPTS_HEADER_NAME_MAX)
		return false;
	for (; *s; s++)
		if (!token_char(*s))
			return false;
	return true;
}

/* Not empty: nginx sends no header set to "" and haproxy's parser drops
 * an empty word; a header to drop is removed. */
static bool header_value_ok(const char *s)
{
	if (!*s || strlen(s) > RES_OPTS_HEADER_VALUE_MAX)
		return false;
	for (; *s; s++)
		if (*s < 0x20 || *s > 0x7e || strchr("\"\\$;{}'", *s))
			return false;
	return true;
}

/* The headers that frame a message: one a route set or removed would make
 * the proxy's Content-Length or chunking disagree with the body it sends
 * (request smuggling upstream, a desynchronised client downstream). */
static bool framing(const char *name)
{
	return strcasecmp(name, "Content-Length") == 0 || strcasecmp(name, "Transfer-Encoding") == 0;
}

static int header_dir(struct octx *v, const cJSON *d, const char *dir)
{
	static const char *const keys[] = { "set", "remove", NULL };
	char where[32];
	snprintf(where, sizeof(where), "headers.%s", dir);
	if (!cJSON_IsObject(d))
		return fail(v, "%s: must be an object with set and remove (each optional)", where);
	if (only(v, d, where, keys) < 0)
		return -1;
	const cJSON *set = cJSON_GetObjectItemCaseSensitive(d, "set");
	const cJSON *rm = cJSON_GetObjectItemCaseSensitive(d, "remove");
	if (set) {
		if (!cJSON_IsObject(set))
			return fail(v, "%s.set: must be an object of header names to values", where);
		int n = 0;
		for (const cJSON *h = set->child; h; h = h->next, n++) {
			char show[STR_SHOW_BUF];
			if (n >= RES_OPTS_HEADERS_MAX)
				return fail(v, "%s.set: at most %d headers", where, RES_OPTS_HEADERS_MAX);
			if (!header_name_ok(h->string))
				return fail(v, "%s.set: '%s' is not a header name (RFC 7230 token characters, at most %d)",
					    where, str_show(h->string, show), RES_OPTS_HEADER_NAME_MAX);
			if (framing(h->string))
				return fail(v, "%s.set: %s frames the message: the proxy sets it from the body; drop it",
					    where, h->string);
			if (!cJSON_IsString(h) || !header_value_ok(h->valuestring))
				return fail(v, "%s.set.%s: must be a string of 1 to %d printable ASCII characters without "
					    "\" \\ $ ; { } ' (to drop a header, remove it)", where, h->string,
					    RES_OPTS_HEADER_VALUE_MAX);
			for (const cJSON *o = set->child; o != h; o = o->next)
				if (strcasecmp(o->string, h->string) == 0)
					return fail(v, "%s.set: '%s' is set twice (header names have no case)", where,
						    h->string);
		}
	}
	if (rm) {
		if (!cJSON_IsArray(rm))
			return fail(v, "%s.remove: must be an array of header names", where);
		int n = 0;
		for (const cJSON *h = rm->child; h; h = h->next, n++) {
			if (n >= RES_OPTS_HEADERS_MAX)
				return fail(v, "%s.remove: at most %d headers", where, RES_OPTS_HEADERS_MAX);
			if (!cJSON_IsString(h) || !header_name_ok(h->valuestring))
				return fail(v, "%s.remove[%d]: must be a header name (RFC 7230 token characters, at most %d)",
					    where, n, RES_OPTS_HEADER_NAME_MAX);
			if (framing(h->valuestring))
				return fail(v, "%s.remove[%d]: %s frames the message: the proxy sets it from the body; drop it",
					    where, n, h->valuestring);
			if (strcasecmp(h->valuestring, "Host") == 0)
				return fail(v, "%s.remove[%d]: Host cannot be removed (set it instead)", where, n);
			for (const cJSON *o = set ? set->child : NULL; o; o = o->next)
				if (strcasecmp(o->string, h->valuestring) == 0)
					return fail(v, "%s: '%s' is both set and removed: drop it from one of them", where,
						    o->string);
		}
	}
	return 0;
}

static int headers(struct octx *v, const cJSON *h)
{
	static const char *const keys[] = { "request", "response", NULL };
	if (!cJSON_IsObject(h))
		return fail(v, "headers: must be an object with request and response (each optional)");
	if (only(v, h, "headers", keys) < 0)
		return -1;
	for (const char *const *k = keys; *k; k++) {
		const cJSON *d = cJSON_GetObjectItemCaseSensitive(h, *k);
		if (d && header_dir(v, d, *k) < 0)
			return -1;
	}
	return 0;
}

int resource_opts_route(const char *res, unsigned flags, const cJSON *b, char *err, size_t errlen)
{
	struct octx v = { res, flags, err, errlen };
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(b, "timeout");
	if (f && timeouts(&v, f) < 0)
		return -1;
	const cJSON *path = cJSON_GetObjectItemCaseSensitive(b, "path");
	bool root = !cJSON_IsString(path) || strcmp(path->valuestring, "/") == 0;
	const cJSON *strip = cJSON_GetObjectItemCaseSensitive(b, "strip_prefix");
	if (strip && !cJSON_IsBool(strip))
		return fail(&v, "strip_prefix: must be true or false");
	if (cJSON_IsTrue(strip) && root)
		return fail(&v, "strip_prefix: needs a path other than /");
	const cJSON *rw = cJSON_GetObjectItemCaseSensitive(b, "rewrite");
	if (rw) {
		if (!cJSON_IsString(rw) || !resource_route_path_valid(rw->valuestring))
			return fail(&v, "rewrite: must be a path starting with '/' of URL path characters (at most 1024)");
		/* nginx encodes a rewritten path again (%20 goes up as %2520),
		 * haproxy sends it as written: no rewrite means the same to both */
		if (strchr(rw->valuestring, '%'))
			return fail(&v, "rewrite: '%%' is not allowed (nginx would encode it again, haproxy would not): "
				    "write the path without percent-encoding");
		if (cJSON_IsTrue(strip))
			return fail(&v, "rewrite: cannot go with strip_prefix: drop one (rewrite '/' strips the prefix)");
	}
	f = cJSON_GetObjectItemCaseSensitive(b, "headers");
	if (f && headers(&v, f) < 0)
		return -1;
	f = cJSON_GetObjectItemCaseSensitive(b, "websocket");
	if (f && !cJSON_IsBool(f))
		return fail(&v, "websocket: must be true or false");
	f = cJSON_GetObjectItemCaseSensitive(b, "retries");
	if (f && !integer_in(f, 0, RES_OPTS_RETRIES_MAX))
		return fail(&v, "retries: must be an integer in 0..%d", RES_OPTS_RETRIES_MAX);
	f = cJSON_GetObjectItemCaseSensitive(b, "max_body");
	if (f && !integer_in(f, 0, RES_OPTS_MAX_BODY))
		return fail(&v, "max_body: must be an integer of bytes in 0..1099511627776 (0: unlimited)");
	return 0;
}

int resource_opts_cluster(const char *res, unsigned flags, const cJSON *b, char *err, size_t errlen)
{
	static const char *const hkeys[] = { "max_fails", "fail_timeout", NULL };
	struct octx v = { res, flags, err, errlen };
	const cJSON *h = cJSON_GetObjectItemCaseSensitive(b, "health");
	if (h) {
		if (!cJSON_IsObject(h))
			return fail(&v, "health: must be an object with max_fails and fail_timeout (each optional)");
		if (only(&v, h, "health", hkeys) < 0)
			return -1;
		const cJSON *f = cJSON_GetObjectItemCaseSensitive(h, "max_fails");
		if (f && !integer_in(f, 1, 1000))
			return fail(&v, "health.max_fails: must be an integer in 1..1000");
		f = cJSON_GetObjectItemCaseSensitive(h, "fail_timeout");
		if (f && !integer_in(f, 1, 86400))
			return fail(&v, "health.fail_timeout: must be an integer of seconds in 1..86400");
	}
	const cJSON *k = cJSON_GetObjectItemCaseSensitive(b, "keepalive");
	if (k && !integer_in(k, 0, 10000))
		return fail(&v, "keepalive: must be an integer in 0..10000");
	return 0;
}

bool resource_opts_own_backend(const cJSON *route)
{
	return cJSON_GetObjectItemCaseSensitive(route, "timeout") || cJSON_GetObjectItemCaseSensitive(route, "retries") ||
	       cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(route, "websocket"));
}

bool resource_opts_route_any(const cJSON *route)
{
	static const char *const keys[] = { "timeout", "strip_prefix", "rewrite", "headers", "websocket",
					     "retries", "max_body", NULL };
	for (const char *const *k = keys; *k; k++)
		if (cJSON_GetObjectItemCaseSensitive(route, *k))
			return true;
	return false;
}

long resource_opts_timeout_ms(const cJSON *route, const char *which)
{
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(route, "timeout");
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(t, which);
	if (!cJSON_IsNumber(f))
		return 0;
	long ms = (long)(f->valuedouble * 1000.0 + 0.5);
	return ms < 1 ? 1 : ms;
}
