/* resource.c: names, types, field validation and references of resources
 * (see resource.h). The fields each object may hold are resource_schema.c's. */
#include "resource.h"
#include "resource_schema.h"
#include "resource_opts.h"
#include "buf.h"
#include "envelope.h"
#include "json.h"
#include "snippet.h"
#include "util.h"
#include "xmalloc.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static const char *const type_names[RES_TYPE_COUNT] = {
	"secret", "cluster", "listener", "route", "file", "guard",
};

const char *resource_type_name(enum res_type t)
{
	return t < RES_TYPE_COUNT ? type_names[t] : "unknown";
}

enum res_type resource_type_of(const char *fullname)
{
	const char *slash = strchr(fullname, '/');
	if (!slash)
		return RES_UNKNOWN;
	size_t n = (size_t)(slash - fullname);
	for (int t = 0; t < RES_TYPE_COUNT; t++) {
		if (strlen(type_names[t]) == n && memcmp(type_names[t], fullname, n) == 0)
			return (enum res_type)t;
	}
	return RES_UNKNOWN;
}

int resource_rank(const char *fullname)
{
	return (int)resource_type_of(fullname);
}

static bool name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == '-';
}

bool resource_name_valid(const char *name)
{
	size_t n = 0;
	for (const char *p = name; *p; p++, n++) {
		if (!name_char(*p) || n >= RES_NAME_MAX)
			return false;
	}
	return n > 0 && strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

int resource_fullname_check(const char *fullname, char *err, size_t errlen)
{
	const char *slash = strchr(fullname, '/');
	if (!slash) {
		char show[STR_SHOW_BUF];
		snprintf(err, errlen, "name '%s' must be 'type/name'", str_show(fullname, show));
		return -1;
	}
	if (resource_type_of(fullname) == RES_UNKNOWN) {
		snprintf(err, errlen, "unknown resource type '%.*s' (known: secret, cluster, listener, route, file, guard)",
			 (int)(slash - fullname > 32 ? 32 : slash - fullname), fullname);
		return -1;
	}
	if (!resource_name_valid(slash + 1)) {
		char show[STR_SHOW_BUF];
		snprintf(err, errlen, "name '%s' must match [A-Za-z0-9._-]{1,%d}", str_show(slash + 1, show),
			 RES_NAME_MAX);
		return -1;
	}
	return 0;
}

/* ---- field checks ---------------------------------------------------- */

struct vctx {
	const char *res;      /* "cluster/web" */
	unsigned flags;
	char *err;
	size_t errlen;
};

static int fail(struct vctx *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int resource_vfail(char *err, size_t errlen, const char *res, const char *fmt, va_list ap)
{
	int n = snprintf(err, errlen, "%s: ", res);
	if (n >= 0 && (size_t)n < errlen)
		vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
	return -1;
}

static int fail(struct vctx *v, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	resource_vfail(v->err, v->errlen, v->res, fmt, ap);
	va_end(ap);
	return -1;
}

static bool label_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

/* A DNS name: labels of [A-Za-z0-9-], 1..63 bytes, no leading or trailing
 * '-', at most 253 bytes in all. */
static bool hostname_valid(const char *s)
{
	size_t total = strlen(s), label = 0;
	if (total == 0 || total > 253)
		return false;
	for (const char *p = s; ; p++) {
		if (*p == '.' || *p == '\0') {
			if (label == 0 || label > 63 || p[-1] == '-' || p[-(long)label] == '-')
				return false;
			if (*p == '\0')
				return true;
			label = 0;
			continue;
		}
		if (!label_char(*p))
			return false;
		label++;
	}
}

static bool ip_literal(const char *s)
{
	unsigned char b[16];
	return inet_pton(AF_INET, s, b) == 1 || inet_pton(AF_INET6, s, b) == 1;
}

/* A route's host: "*", a DNS name, or "*." followed by a DNS name. */
static bool route_host_valid(const char *s)
{
	if (strcmp(s, "*") == 0)
		return true;
	if (strncmp(s, "*.", 2) == 0)
		s += 2;
	return hostname_valid(s);
}

/* A route's path prefix: starts with '/', URL path characters only (no
 * white space, quotes, ';', '{', '}', '$', '#', '?' or '\'), at most 1024. */
bool resource_route_path_valid(const char *s)
{
	static const char ok[] = "-._~/%:@+,=!*";
	size_t n = strlen(s);
	if (n == 0 || n > 1024 || s[0] != '/')
		return false;
	for (const char *p = s; *p; p++) {
		char c = *p;
		bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
		if (!alnum && !strchr(ok, c))
			return false;
	}
	return true;
}

bool resource_file_path_valid(const char *path)
{
	size_t n = strlen(path);
	if (n == 0 || n > 4096 || path[0] == '/')
		return false;
	const char *comp = path;
	for (const char *p = path; ; p++) {
		if (*p == '/' || *p == '\0') {
			size_t len = (size_t)(p - comp);
			if (len == 0 || len > 255)
				return false;
			if ((len == 1 && comp[0] == '.') || (len == 2 && comp[0] == '.' && comp[1] == '.'))
				return false;
			/* the agent's own work files live under ".tether*" names */
			if (len >= 7 && memcmp(comp, ".tether", 7) == 0)
				return false;
			if (*p == '\0')
				return true;
			comp = p + 1;
			continue;
		}
		if ((unsigned char)*p < 0x20 || *p == 0x7f || *p == '\\')
			return false;
	}
}

static bool int_in(const cJSON *v, double lo, double hi, double *out)
{
	if (!cJSON_IsNumber(v))
		return false;
	double d = v->valuedouble;
	if (!(d >= lo && d <= hi) || (double)(int64_t)d != d)
		return false;
	if (out)
		*out = d;
	return true;
}

/* With RES_STRICT, a member of obj (the object at parent in the schema's
 * table, shown as where) that the table does not name is refused, with
 * the nearest known name: resource_schema.c is the one list of fields, so
 * none is accepted that tether-resources(5) does not document. */
static int check_unknown(struct vctx *v, const cJSON *obj, const char *parent, unsigned skip, const char *where)
{
	char e[512];
	if (!(v->flags & RES_STRICT))
		return 0;
	if (resource_schema_check(resource_type_of(v->res), parent, skip, obj, e, sizeof(e)) == 0)
		return 0;
	return fail(v, "%s%s%s", where, *where ? ": " : "", e);
}

static int add_ref(struct vctx *v, struct res_refs *refs, const char *type, const char *name, const char *field)
{
	if (!resource_name_valid(name))
		return fail(v, "%s must be a resource name matching [A-Za-z0-9._-]{1,%d}", field, RES_NAME_MAX);
	if (refs && refs->n < RES_MAX_REFS)
		snprintf(refs->name[refs->n++], sizeof(refs->name[0]), "%s/%s", type, name);
	return 0;
}

static const char *opt_string(struct vctx *v, const cJSON *obj, const char *key, bool required, int *rc)
{
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(obj, key);
	*rc = 0;
	if (!f) {
		if (required)
			*rc = fail(v, "missing field '%s'", key);
		return NULL;
	}
	if (!cJSON_IsString(f)) {
		*rc = fail(v, "%s must be a string", key);
		return NULL;
	}
	return f->valuestring;
}

static int validate_cluster(struct vctx *v, const cJSON *b, struct res_refs *refs)
{
	int rc;
	if (check_unknown(v, b, "", 0, "") < 0)
		return -1;
	const cJSON *eps = cJSON_GetObjectItemCaseSensitive(b, "endpoints");
	if (!eps)
		return fail(v, "missing field 'endpoints'");
	if (!cJSON_IsArray(eps))
		return fail(v, "endpoints must be an array");
	int i = 0;
	for (const cJSON *ep = eps->child; ep; ep = ep->next, i++) {
		char where[32];
		snprintf(where, sizeof(where), "endpoints[%d]", i);
		if (i >= 10000)
			return fail(v, "endpoints has more than 10000 entries");
		if (!cJSON_IsObject(ep))
			return fail(v, "%s must be an object", where);
		if (check_unknown(v, ep, "endpoints[]", 0, where) < 0)
			return -1;
		const cJSON *a = cJSON_GetObjectItemCaseSensitive(ep, "address");
		if (!a)
			return fail(v, "%s.address is missing", where);
		if (!cJSON_IsString(a) || !(ip_literal(a->valuestring) || hostname_valid(a->valuestring)))
			return fail(v, "%s.address must be an IP address or a host name", where);
		const cJSON *p = cJSON_GetObjectItemCaseSensitive(ep, "port");
		if (!p)
			return fail(v, "%s.port is missing", where);
		if (!int_in(p, 1, 65535, NULL))
			return fail(v, "%s.port must be an integer in 1..65535", where);
		const cJSON *w = cJSON_GetObjectItemCaseSensitive(ep, "weight");
		if (w && !int_in(w, 1, 256, NULL))
			return fail(v, "%s.weight must be an integer in 1..256", where);
	}
	const char *lb = opt_string(v, b, "lb", false, &rc);
	if (rc < 0)
		return -1;
	if (lb && strcmp(lb, "round_robin") && strcmp(lb, "least_conn") && strcmp(lb, "random"))
		return fail(v, "lb must be one of round_robin, least_conn, random");
	(void)refs;
	if (resource_opts_cluster(v->res, v->flags, b, v->err, v->errlen) < 0)
		return -1;
	return snippet_validate(v->res, b, v->flags & RES_STRICT, v->err, v->errlen);
}

static int validate_listener(struct vctx *v, const cJSON *b, struct res_refs *refs)
{
	int rc;
	if (check_unknown(v, b, "", 0, "") < 0)
		return -1;
	const char *addr = opt_string(v, b, "address", false, &rc);
	if (rc < 0)
		return -1;
	if (addr && !ip_literal(addr))
		return fail(v, "address must be an IPv4 or IPv6 address");
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(b, "port");
	if (!p)
		return fail(v, "missing field 'port'");
	if (!int_in(p, 1, 65535, NULL))
		return fail(v, "port must be an integer in 1..65535");
	const cJSON *tls = cJSON_GetObjectItemCaseSensitive(b, "tls");
	if (tls && !cJSON_IsNull(tls)) {
		if (!cJSON_IsObject(tls))
			return fail(v, "tls must be an object");
		if (check_unknown(v, tls, "tls", 0, "tls") < 0)
			return -1;
		const cJSON *s = cJSON_GetObjectItemCaseSensitive(tls, "secret");
		if (!s)
			return fail(v, "tls.secret is missing");
		if (!cJSON_IsString(s))
			return fail(v, "tls.secret must be a string");
		if (add_ref(v, refs, "secret", s->valuestring, "tls.secret") < 0)
			return -1;
	}
	return snippet_validate(v->res, b, v->flags & RES_STRICT, v->err, v->errlen);
}

static int validate_route(struct vctx *v, const cJSON *b, struct res_refs *refs)
{
	int rc;
	if (check_unknown(v, b, "", 0, "") < 0)
		return -1;
	const char *l = opt_string(v, b, "listener", true, &rc);
	if (rc < 0 || add_ref(v, refs, "listener", l, "listener") < 0)
		return -1;
	const char *host = opt_string(v, b, "host", false, &rc);
	if (rc < 0)
		return -1;
	if (host && !route_host_valid(host))
		return fail(v, "host must be '*', a host name or '*.' and a host name");
	const char *path = opt_string(v, b, "path", false, &rc);
	if (rc < 0)
		return -1;
	if (path && !resource_route_path_valid(path))
		return fail(v, "path must start with '/' and hold only URL path characters (at most 1024)");
	const char *c = opt_string(v, b, "cluster", true, &rc);
	if (rc < 0 || add_ref(v, refs, "cluster", c, "cluster") < 0)
		return -1;
	if (resource_opts_route(v->res, v->flags, b, v->err, v->errlen) < 0)
		return -1;
	return snippet_validate(v->res, b, v->flags & RES_STRICT, v->err, v->errlen);
}

static bool pem_like(const char *s)
{
	return strstr(s, "-----BEGIN ") != NULL && strlen(s) <= 65536;
}

/* A sealed secret (envelope.h): its stored form (sealed, wraps, and the
 * plane's superseded), or its push form (sealed only) unless RES_V_STORED.
 * What it holds is checked by the node that opens it; an opened body
 * (RES_V_PLAINTEXT) is never sealed again. */
static int validate_sealed(struct vctx *v, const cJSON *b)
{
	char e[256];
	int rc;
	if (v->flags & RES_V_PLAINTEXT)
		return fail(v, "sealed: an opened secret must be plaintext");
	if ((v->flags & RES_V_STORED) && !cJSON_GetObjectItemCaseSensitive(b, "wraps"))
		return fail(v, "wraps: missing: a sealed secret's write carries its wraps ({} for none)");
	if (cJSON_GetArraySize(b) == 1) {
		struct envelope env;
		rc = envelope_decode(cJSON_GetObjectItemCaseSensitive(b, "sealed"), &env, e, sizeof(e));
		envelope_release(&env);
	} else {
		rc = envelope_check_stored(b, e, sizeof(e));
	}
	return rc < 0 ? fail(v, "%s", e) : 0;
}

static int validate_secret(struct vctx *v, const cJSON *b, struct res_refs *refs)
{
	int rc;
	(void)refs;
	if (envelope_is_sealed(b))
		return validate_sealed(v, b);
	/* plaintext: sealed, wraps and superseded belong to a sealed one */
	if (check_unknown(v, b, "", RS_SEALED, "") < 0)
		return -1;
	const char *cert = opt_string(v, b, "cert", true, &rc);
	if (rc < 0)
		return -1;
	if (!pem_like(cert))
		return fail(v, "cert must be a PEM text (-----BEGIN ...) of at most 65536 bytes");
	const char *key = opt_string(v, b, "key", true, &rc);
	if (rc < 0)
		return -1;
	if (!pem_like(key))
		return fail(v, "key must be a PEM text (-----BEGIN ...) of at most 65536 bytes");
	return 0;
}

static int validate_file(struct vctx *v, const cJSON *b, struct res_refs *refs)
{
	int rc;
	(void)refs;
	if (check_unknown(v, b, "", 0, "") < 0)
		return -1;
	const char *path = opt_string(v, b, "path", true, &rc);
	if (rc < 0)
		return -1;
	if (!resource_file_path_valid(path))
		return fail(v, "path must be relative, without '..', '.', '.tether*' or empty components (at most 4096 bytes)");
	if (opt_string(v, b, "content", true, &rc), rc < 0)
		return -1;
	const char *mode = opt_string(v, b, "mode", false, &rc);
	if (rc < 0)
		return -1;
	if (mode) {
		size_t n = strlen(mode);
		unsigned m = 0;
		bool ok = n >= 3 && n <= 4;
		for (size_t i = 0; ok && i < n; i++) {
			ok = mode[i] >= '0' && mode[i] <= '7';
			m = m * 8 + (unsigned)(mode[i] - '0');
		}
		if (!ok || m > 0777)
			return fail(v, "mode must be an octal string from '0000' to '0777'");
	}
	return 0;
}

/* A guard (guards.h): every field optional; what it limits is judged by
 * common/guards.c on each write and push. */
static int validate_guard(struct vctx *v, const cJSON *b, struct res_refs *refs)
{
	int rc;
	(void)refs;
	if (check_unknown(v, b, "", 0, "") < 0)
		return -1;
	const char *match = opt_string(v, b, "match", false, &rc);
	if (rc < 0)
		return -1;
	if (match && strlen(match) > RES_FULLNAME_MAX)
		return fail(v, "match must be a name prefix of at most %d bytes", RES_FULLNAME_MAX);
	/* a prefix no guarded name can start with ("clusters/", "route/")
	 * would guard nothing, silently: refused */
	if (match && match[0]) {
		static const char *const limited[] = { "cluster/", "file/", "secret/" };
		bool some = false;
		for (size_t i = 0; i < sizeof(limited) / sizeof(limited[0]) && !some; i++) {
			size_t lm = strlen(match), lt = strlen(limited[i]);
			some = strncmp(match, limited[i], lm < lt ? lm : lt) == 0;
		}
		if (!some)
			return fail(v, "match '%.64s' starts no name a guard limits (cluster/, file/, secret/): "
				    "it would guard nothing", match);
	}
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(b, "min_endpoints");
	if (f && !int_in(f, 0, 1e9, NULL))
		return fail(v, "min_endpoints must be an integer in 0..1000000000");
	f = cJSON_GetObjectItemCaseSensitive(b, "max_shrink");
	if (f && !(cJSON_IsNumber(f) && f->valuedouble >= 0 && f->valuedouble <= 1))
		return fail(v, "max_shrink must be a number in [0,1]");
	f = cJSON_GetObjectItemCaseSensitive(b, "max_bytes");
	if (f && !int_in(f, 1, 1e15, NULL))
		return fail(v, "max_bytes must be an integer in 1..1000000000000000");
	f = cJSON_GetObjectItemCaseSensitive(b, "max_growth");
	if (f && !(cJSON_IsNumber(f) && f->valuedouble >= 1 && f->valuedouble <= 1e9))
		return fail(v, "max_growth must be a number in [1,1000000000]");
	return 0;
}

int resource_validate(const char *fullname, const cJSON *body, unsigned flags,
		      struct res_refs *refs, char *err, size_t errlen)
{
	struct vctx v = { fullname, flags, err, errlen };
	if (refs)
		refs->n = 0;
	if (resource_fullname_check(fullname, err, errlen) < 0)
		return -1;
	if (!cJSON_IsObject(body))
		return fail(&v, "body must be a JSON object");
	switch (resource_type_of(fullname)) {
	case RES_SECRET: return validate_secret(&v, body, refs);
	case RES_CLUSTER: return validate_cluster(&v, body, refs);
	case RES_LISTENER: return validate_listener(&v, body, refs);
	case RES_ROUTE: return validate_route(&v, body, refs);
	case RES_FILE: return validate_file(&v, body, refs);
	case RES_GUARD: return validate_guard(&v, body, refs);
	default: return fail(&v, "unknown resource type");
	}
}

char *resource_file_path(const char *fullname, const char *body, size_t len)
{
	if (resource_type_of(fullname) != RES_FILE)
		return NULL;
	char err[128];
	cJSON *v = json_decode(body, len, NULL, err, sizeof(err));
	if (!v)
		return NULL;
	const char *path = json_get_string(v, "path");
	char *out = path ? xstrdup(path) : NULL;
	cJSON_Delete(v);
	return out;
}
