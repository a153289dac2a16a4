/* test_resource_schema.c: unit tests of common/resource_schema.c against
 * the validator (common/resource.c): every type's example validates (a
 * secret's pair passes the plane's certificate check); bodies that use
 * every field the table names are accepted, and hold no field it does not
 * name; an unknown field is refused in every object the table describes,
 * naming the nearest known one; a sealed secret's fields are all in the
 * table; fields flagged RS_PENDING (documented, validated by a part not
 * merged yet) are refused as unknown until the flag goes; the table's own
 * shape, and the lookups. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>

#include "envelope.h"
#include "json.h"
#include "keys.h"
#include "pemcheck.h"
#include "resource.h"
#include "resource_schema.h"

/* Bodies that use every field of the table between them, with values
 * the specification of each field takes (parts A's and B's among them:
 * once their RS_PENDING flag goes, these bodies must validate whole). */
static const struct {
	const char *name, *body;
} full[] = {
	{ "cluster/c",
	  "{\"endpoints\":[{\"address\":\"10.0.0.5\",\"port\":8080,\"weight\":2},{\"address\":\"b.example\",\"port\":1}],"
	  "\"lb\":\"random\",\"health\":{\"max_fails\":3,\"fail_timeout\":30},\"keepalive\":16,"
	  "\"snippet\":{\"nginx\":\"keepalive_timeout 60s;\",\"haproxy\":\"option httpchk GET /healthz\"}}" },
	{ "listener/l",
	  "{\"address\":\"127.0.0.1\",\"port\":8443,\"tls\":{\"secret\":\"site\"},"
	  "\"snippet\":{\"nginx\":\"add_header X-Frame-Options DENY;\",\"haproxy\":\"option forwardfor\"}}" },
	{ "route/r",
	  "{\"listener\":\"l\",\"host\":\"*.example.com\",\"path\":\"/api\",\"cluster\":\"c\","
	  "\"timeout\":{\"connect\":1.5,\"read\":30,\"send\":30},\"strip_prefix\":true,"
	  "\"headers\":{\"request\":{\"set\":{\"X-Env\":\"prod\"},\"remove\":[\"X-Debug\"]},"
	  "\"response\":{\"set\":{\"Cache-Control\":\"no-store\"},\"remove\":[\"Server\"]}},"
	  "\"websocket\":true,\"retries\":2,\"max_body\":1048576,"
	  "\"snippet\":{\"nginx\":\"add_header X-Route api;\",\"haproxy\":\"http-response set-header X-Route api\"}}" },
	/* rewrite and strip_prefix are one or the other */
	{ "route/old", "{\"listener\":\"l\",\"path\":\"/old\",\"cluster\":\"c\",\"rewrite\":\"/new\"}" },
	{ "file/f", "{\"path\":\"html/a.html\",\"content\":\"x\",\"mode\":\"0600\"}" },
	{ "guard/g", "{\"match\":\"cluster/\",\"min_endpoints\":1,\"max_shrink\":0.5,\"max_bytes\":1000,\"max_growth\":2}" },
};
#define NFULL (sizeof(full) / sizeof(full[0]))

static cJSON *parse(const char *text)
{
	char err[256] = "";
	cJSON *v = json_decode(text, strlen(text), NULL, err, sizeof(err));
	if (!v)
		fail_msg("does not parse (%s): %s", err, text);
	return v;
}

static int validate(const char *name, const cJSON *body, unsigned flags, char *err, size_t errlen)
{
	err[0] = '\0';
	return resource_validate(name, body, flags, NULL, err, errlen);
}

/* The table's path of a JSON member: parent "" or "a.b" or "a[]", key. */
static void join(char *out, size_t cap, const char *parent, const char *key)
{
	snprintf(out, cap, "%s%s%s", parent, *parent ? "." : "", key);
}

/* The first component of a table path into comp ("endpoints[]" gives
 * "endpoints", *elems true: the path goes on in each element); returns
 * the rest of the path after it ("" at its end). */
static const char *first_comp(const char *path, char *comp, size_t cap, bool *elems)
{
	size_t n = strcspn(path, ".");
	snprintf(comp, cap, "%.*s", (int)n, path);
	size_t cl = strlen(comp);
	*elems = cl >= 2 && strcmp(comp + cl - 2, "[]") == 0;
	if (*elems)
		comp[cl - 2] = '\0';
	return path + n + (path[n] == '.');
}

/* Calls fn on each object of body at the table's path (an array's
 * elements for "a[]"). */
static void each_at(cJSON *body, const char *path, void (*fn)(cJSON *obj, void *arg), void *arg)
{
	if (!*path) {
		fn(body, arg);
		return;
	}
	char comp[64];
	bool elems;
	const char *rest = first_comp(path, comp, sizeof(comp), &elems);
	cJSON *v = cJSON_GetObjectItemCaseSensitive(body, comp);
	if (!v)
		return;
	if (elems) {
		cJSON *e;
		cJSON_ArrayForEach(e, v)
			each_at(e, rest, fn, arg);
	} else {
		each_at(v, rest, fn, arg);
	}
}

/* The path of a field's object members ("endpoints[]" for an array of
 * objects). */
static void members(const struct rs_field *f, char *out, size_t cap)
{
	snprintf(out, cap, "%s%s", f->path, strcmp(f->json, "array of objects") == 0 ? "[]" : "");
}

struct del_arg {
	const char *key;
};

static void del_member(cJSON *obj, void *arg)
{
	cJSON_DeleteItemFromObjectCaseSensitive(obj, ((struct del_arg *)arg)->key);
}

/* The body without the fields flagged RS_PENDING: what this tree
 * validates. */
static cJSON *without_pending(enum res_type t, const char *text)
{
	cJSON *b = parse(text);
	for (const struct rs_field *f = resource_schema(t)->fields; f->path; f++) {
		if (!(f->flags & RS_PENDING))
			continue;
		char parent[128];
		const char *dot = strrchr(f->path, '.');
		snprintf(parent, sizeof(parent), "%.*s", dot ? (int)(dot - f->path) : 0, f->path);
		struct del_arg a = { dot ? dot + 1 : f->path };
		each_at(b, parent, del_member, &a);
	}
	return b;
}

/* ---- examples ------------------------------------------------------------ */

static void test_every_example_validates(void **state)
{
	(void)state;
	for (int i = 0; i < RES_TYPE_COUNT; i++) {
		const struct rs_type *t = resource_schema((enum res_type)i);
		char name[64], err[512];
		assert_int_equal(t->type, i);
		snprintf(name, sizeof(name), "%s/%s", resource_type_name(t->type), t->example_name);
		cJSON *b = parse(t->example);
		if (validate(name, b, RES_STRICT | RES_V_STORED, err, sizeof(err)) != 0)
			fail_msg("the example of %s is refused: %s", name, err);
		/* an example shows no field this tree does not take yet */
		cJSON *stripped = without_pending(t->type, t->example);
		assert_true(cJSON_Compare(b, stripped, true));
		cJSON_Delete(stripped);
		if (t->type == RES_SECRET) {
			/* the plane parses the pair (core/validate.c): a real one */
			const char *cert = json_get_string(b, "cert"), *key = json_get_string(b, "key");
			assert_non_null(cert);
			assert_non_null(key);
			if (pemcheck_pair(name, cert, key, err, sizeof(err)) != 0)
				fail_msg("the example pair is refused: %s", err);
		}
		cJSON_Delete(b);
	}
}

/* ---- every field the table names, and none else --------------------------- */

struct walk {
	enum res_type t;
	const char *body_name;
};

/* Every member of v at parent is a field of the table; recurses into
 * objects and arrays of objects (not into RS_MAP ones). */
static void walk_members(const struct walk *w, const cJSON *v, const char *parent)
{
	const cJSON *c;
	cJSON_ArrayForEach(c, v) {
		char path[256];
		join(path, sizeof(path), parent, c->string);
		const struct rs_field *f = resource_schema_field(w->t, path);
		if (!f)
			fail_msg("%s: '%s' is in a body but not in the table", w->body_name, path);
		if (f->flags & RS_MAP)
			continue;
		if (cJSON_IsObject(c)) {
			assert_string_equal(f->json, "object");
			walk_members(w, c, path);
		} else if (cJSON_IsArray(c) && strcmp(f->json, "array of objects") == 0) {
			char sub[260];
			snprintf(sub, sizeof(sub), "%s[]", path);
			const cJSON *e;
			cJSON_ArrayForEach(e, c)
				walk_members(w, e, sub);
		}
	}
}

/* Is the table's path present in body (in any element of an array)? */
static bool has_path(const cJSON *v, const char *path)
{
	char comp[64];
	bool elems;
	const char *rest = first_comp(path, comp, sizeof(comp), &elems);
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(v, comp);
	if (!c)
		return false;
	if (!*rest)
		return true;
	if (!elems)
		return has_path(c, rest);
	const cJSON *e;
	cJSON_ArrayForEach(e, c)
		if (has_path(e, rest))
			return true;
	return false;
}

static void test_full_bodies_cover_the_table(void **state)
{
	(void)state;
	/* every field but a sealed secret's (below) is used by a full body,
	 * or is the secret example's */
	for (int i = 0; i < RES_TYPE_COUNT; i++) {
		const struct rs_type *t = resource_schema((enum res_type)i);
		for (const struct rs_field *f = t->fields; f->path; f++) {
			if (f->flags & RS_SEALED)
				continue;
			bool seen = false;
			for (size_t k = 0; k < NFULL && !seen; k++) {
				if (resource_type_of(full[k].name) != t->type)
					continue;
				cJSON *b = parse(full[k].body);
				seen = has_path(b, f->path);
				cJSON_Delete(b);
			}
			if (!seen && t->type == RES_SECRET) {
				cJSON *b = parse(t->example);
				seen = has_path(b, f->path);
				cJSON_Delete(b);
			}
			if (!seen)
				fail_msg("%s.%s: no test body uses it", resource_type_name(t->type), f->path);
		}
	}
	/* and no body holds a field the table does not name */
	for (size_t k = 0; k < NFULL; k++) {
		struct walk w = { resource_type_of(full[k].name), full[k].name };
		cJSON *b = parse(full[k].body);
		walk_members(&w, b, "");
		cJSON_Delete(b);
	}
}

/* What the validator takes of them: the bodies without pending fields
 * validate, strictly; each pending field is refused as unknown (strict),
 * ignored without --strict, until its validation lands and the flag
 * goes. */
static void test_full_bodies_validate(void **state)
{
	(void)state;
	for (size_t k = 0; k < NFULL; k++) {
		enum res_type t = resource_type_of(full[k].name);
		char err[512];
		cJSON *b = without_pending(t, full[k].body);
		if (validate(full[k].name, b, RES_STRICT, err, sizeof(err)) != 0)
			fail_msg("%s: refused: %s", full[k].name, err);
		cJSON_Delete(b);
		cJSON *whole = parse(full[k].body);
		for (const cJSON *c = whole->child; c; c = c->next) {
			const struct rs_field *f = resource_schema_field(t, c->string);
			assert_non_null(f);
			if (!(f->flags & RS_PENDING))
				continue;
			b = without_pending(t, full[k].body);
			cJSON_AddItemToObject(b, c->string, cJSON_Duplicate(c, true));
			assert_int_equal(validate(full[k].name, b, 0, err, sizeof(err)), 0);
			assert_int_equal(validate(full[k].name, b, RES_STRICT, err, sizeof(err)), -1);
			char want[256];
			snprintf(want, sizeof(want), "%s: unknown field '%s' (", full[k].name, c->string);
			if (strncmp(err, want, strlen(want)) != 0)
				fail_msg("%s with pending '%s': %s", full[k].name, c->string, err);
			cJSON_Delete(b);
		}
		cJSON_Delete(whole);
	}
}

/* ---- every field's type is checked ------------------------------------------ */

/* Replaces the member at the table's path (in an array's first element)
 * with v; false when the body has no such member. */
static bool replace_at(cJSON *body, const char *path, cJSON *v)
{
	char comp[64];
	bool elems;
	const char *rest = first_comp(path, comp, sizeof(comp), &elems);
	cJSON *c = cJSON_GetObjectItemCaseSensitive(body, comp);
	if (!c)
		return false;
	if (!*rest) {
		cJSON_ReplaceItemInObjectCaseSensitive(body, comp, v);
		return true;
	}
	return replace_at(elems ? cJSON_GetArrayItem(c, 0) : c, rest, v);
}

/* A value of another JSON type than the table says, in place of each
 * field the validator takes, is refused naming the field: no field is
 * documented with a type nothing checks. */
static void test_documented_types_are_checked(void **state)
{
	(void)state;
	int checked = 0;
	for (size_t k = 0; k < NFULL + 1; k++) {
		const char *name = k < NFULL ? full[k].name : "secret/site";
		const char *text = k < NFULL ? full[k].body : resource_schema(RES_SECRET)->example;
		enum res_type t = resource_type_of(name);
		for (const struct rs_field *f = resource_schema(t)->fields; f->path; f++) {
			if (f->flags & (RS_PENDING | RS_SEALED))
				continue;
			cJSON *b = without_pending(t, text);
			cJSON *wrong = strcmp(f->json, "string") == 0 ? cJSON_CreateNumber(5) : cJSON_CreateString("x");
			if (!replace_at(b, f->path, wrong)) {
				cJSON_Delete(wrong);
				cJSON_Delete(b);
				continue;
			}
			char err[512];
			if (validate(name, b, 0, err, sizeof(err)) == 0)
				fail_msg("%s: %s of the wrong type is taken", name, f->path);
			const char *leaf = strrchr(f->path, '.');
			if (!strstr(err, leaf ? leaf + 1 : f->path))
				fail_msg("%s: %s: the error does not name it: %s", name, f->path, err);
			checked++;
			cJSON_Delete(b);
		}
	}
	assert_true(checked >= 20);
}

/* ---- every documented limit is the validator's -------------------------------- */

/* The full body of name's type that holds path, without pending fields,
 * with the member at path replaced by v: is it taken (strictly)? On a
 * refusal, the error in err. v is consumed. */
static bool takes(enum res_type t, const char *path, cJSON *v, char *err, size_t errlen)
{
	for (size_t k = 0; k < NFULL; k++) {
		if (resource_type_of(full[k].name) != t)
			continue;
		cJSON *b = without_pending(t, full[k].body);
		if (!has_path(b, path)) {
			cJSON_Delete(b);
			continue;
		}
		assert_true(replace_at(b, path, v));
		bool ok = validate(full[k].name, b, RES_STRICT, err, errlen) == 0;
		cJSON_Delete(b);
		return ok;
	}
	cJSON_Delete(v);
	fail_msg("%s.%s: no full body holds it", resource_type_name(t), path);
	return false;
}

/* The range "LO..HI" of a field's limits text; false when it has none. */
static bool range_of(const char *limits, double *lo, double *hi)
{
	const char *dots = strstr(limits, "..");
	if (!dots)
		return false;
	const char *p = dots;
	while (p > limits && ((p[-1] >= '0' && p[-1] <= '9') || p[-1] == '.'))
		p--;
	char low[32], *end;
	snprintf(low, sizeof(low), "%.*s", (int)(dots - p), p);   /* strtod would take "1." of "1.." */
	*lo = strtod(low, &end);
	if (end == low || *end)
		return false;
	*hi = strtod(dots + 2, &end);
	return end != dots + 2;
}

/* Each integer and number field documents its range "LO..HI", and the
 * validator takes exactly that: LO and HI, and not just outside them;
 * an integer field takes no fraction. (Fields of parts A and B join this
 * test when their RS_PENDING flag goes.) */
static void test_documented_ranges_are_the_validators(void **state)
{
	(void)state;
	int checked = 0;
	for (int i = 0; i < RES_TYPE_COUNT; i++) {
		enum res_type t = (enum res_type)i;
		for (const struct rs_field *f = resource_schema(t)->fields; f->path; f++) {
			bool integer = strcmp(f->json, "integer") == 0;
			if ((!integer && strcmp(f->json, "number") != 0) || (f->flags & (RS_PENDING | RS_SEALED)))
				continue;
			double lo = 0, hi = 0;
			char err[512];
			if (!range_of(f->limits, &lo, &hi))
				fail_msg("%s.%s: its limits give no range LO..HI: %s", resource_type_name(t), f->path,
					 f->limits);
			double below = integer ? lo - 1 : lo - (lo != 0 ? lo / 10 : 0.001);
			double above = integer ? hi + 1 : hi + (hi / 1000 > 0.001 ? hi / 1000 : 0.001);
			if (!takes(t, f->path, cJSON_CreateNumber(lo), err, sizeof(err)))
				fail_msg("%s.%s: %.17g (its limits' lowest) is refused: %s", resource_type_name(t), f->path,
					 lo, err);
			if (!takes(t, f->path, cJSON_CreateNumber(hi), err, sizeof(err)))
				fail_msg("%s.%s: %.17g (its limits' highest) is refused: %s", resource_type_name(t),
					 f->path, hi, err);
			if (takes(t, f->path, cJSON_CreateNumber(below), err, sizeof(err)))
				fail_msg("%s.%s: %.17g (below its limits) is taken", resource_type_name(t), f->path, below);
			if (!strstr(err, strrchr(f->path, '.') ? strrchr(f->path, '.') + 1 : f->path))
				fail_msg("%s.%s: the error does not name it: %s", resource_type_name(t), f->path, err);
			if (takes(t, f->path, cJSON_CreateNumber(above), err, sizeof(err)))
				fail_msg("%s.%s: %.17g (above its limits) is taken", resource_type_name(t), f->path, above);
			if (integer && lo + 0.5 < hi && takes(t, f->path, cJSON_CreateNumber(lo + 0.5), err, sizeof(err)))
				fail_msg("%s.%s: an integer field takes %.17g", resource_type_name(t), f->path, lo + 0.5);
			if (!integer && !takes(t, f->path, cJSON_CreateNumber(lo + (hi - lo) / 3), err, sizeof(err)))
				fail_msg("%s.%s: a number field refuses a fraction in its range: %s", resource_type_name(t),
					 f->path, err);
			checked++;
		}
	}
	/* port twice, weight, the guard's four */
	assert_true(checked >= 7);
}

/* A string of n copies of c after prefix (NULL: none). */
static cJSON *str_of(const char *prefix, char c, size_t n)
{
	size_t lp = prefix ? strlen(prefix) : 0;
	char *s = malloc(lp + n + 1);
	assert_non_null(s);
	memcpy(s, prefix ? prefix : "", lp);
	memset(s + lp, c, n);
	s[lp + n] = '\0';
	cJSON *v = cJSON_CreateString(s);
	free(s);
	return v;
}

/* The limits text of t's field at path holds want. */
static void says(enum res_type t, const char *path, const char *want)
{
	const struct rs_field *f = resource_schema_field(t, path);
	assert_non_null(f);
	if (!strstr(f->limits, want))
		fail_msg("%s.%s: the limits do not say '%s': %s", resource_type_name(t), path, want, f->limits);
}

/* The string and list limits the table states, each at its edge. */
static void test_documented_string_limits_are_the_validators(void **state)
{
	(void)state;
	char err[512];
	/* route path: at most 1024, the characters named */
	says(RES_ROUTE, "path", "at most 1024");
	assert_true(takes(RES_ROUTE, "path", str_of("/", 'a', 1023), err, sizeof(err)));
	assert_false(takes(RES_ROUTE, "path", str_of("/", 'a', 1024), err, sizeof(err)));
	assert_non_null(strstr(err, "path must"));
	says(RES_ROUTE, "path", "- . _ ~ / % : @ + , = ! *");
	assert_true(takes(RES_ROUTE, "path", cJSON_CreateString("/a-._~/%:@+,=!*Z9"), err, sizeof(err)));
	static const char *const bad_paths[] = { "api", "/a b", "/a\"", "/a;", "/a{", "/a$", "/a#", "/a?", "/a\\", "/a'", "/a&" };
	for (size_t i = 0; i < sizeof(bad_paths) / sizeof(bad_paths[0]); i++)
		if (takes(RES_ROUTE, "path", cJSON_CreateString(bad_paths[i]), err, sizeof(err)))
			fail_msg("route path '%s' is taken", bad_paths[i]);
	/* a host: labels of at most 63, at most 253 in all */
	says(RES_ROUTE, "host", "at most 63");
	says(RES_ROUTE, "host", "at most 253");
	says(RES_CLUSTER, "endpoints[].address", "at most 63");
	assert_true(takes(RES_ROUTE, "host", str_of(NULL, 'a', 63), err, sizeof(err)));
	assert_false(takes(RES_ROUTE, "host", str_of(NULL, 'a', 64), err, sizeof(err)));
	assert_false(takes(RES_CLUSTER, "endpoints[].address", str_of(NULL, 'a', 64), err, sizeof(err)));
	char host[300] = "";
	for (int i = 0; i < 4; i++)   /* 4 labels of 62 and 3 dots: 251; "a." before: 253 */
		snprintf(host + strlen(host), sizeof(host) - strlen(host), "%s%.62s", i ? "." : "",
			 "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb");
	assert_true(takes(RES_ROUTE, "host", str_of(host, 'x', 0), err, sizeof(err)));
	char longer[300];
	snprintf(longer, sizeof(longer), "a.%s", host);
	assert_int_equal(strlen(longer), 253);
	assert_true(takes(RES_ROUTE, "host", cJSON_CreateString(longer), err, sizeof(err)));
	snprintf(longer, sizeof(longer), "ab.%s", host);
	assert_false(takes(RES_ROUTE, "host", cJSON_CreateString(longer), err, sizeof(err)));
	static const char *const hosts[] = { "*", "*.example.com", "a-b.example", "WWW.Example.COM" };
	for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++)
		if (!takes(RES_ROUTE, "host", cJSON_CreateString(hosts[i]), err, sizeof(err)))
			fail_msg("route host '%s' is refused: %s", hosts[i], err);
	static const char *const bad_hosts[] = { "", "a*.example", "*example.com", "-a.example", "a-.example", "a..b", "a_b.example" };
	for (size_t i = 0; i < sizeof(bad_hosts) / sizeof(bad_hosts[0]); i++)
		if (takes(RES_ROUTE, "host", cJSON_CreateString(bad_hosts[i]), err, sizeof(err)))
			fail_msg("route host '%s' is taken", bad_hosts[i]);
	/* a guard's match: at most 220 bytes */
	says(RES_GUARD, "match", "at most 220 bytes");
	assert_true(takes(RES_GUARD, "match", str_of("cluster/", 'a', 212), err, sizeof(err)));
	assert_false(takes(RES_GUARD, "match", str_of("cluster/", 'a', 213), err, sizeof(err)));
	assert_true(takes(RES_GUARD, "match", cJSON_CreateString(""), err, sizeof(err)));
	assert_true(takes(RES_GUARD, "match", cJSON_CreateString("sec"), err, sizeof(err)));
	assert_false(takes(RES_GUARD, "match", cJSON_CreateString("route/"), err, sizeof(err)));
	/* a file's path: 4096 bytes, 255 a component */
	says(RES_FILE, "path", "at most 4096 bytes, 255 a component");
	assert_true(takes(RES_FILE, "path", str_of(NULL, 'a', 255), err, sizeof(err)));
	assert_false(takes(RES_FILE, "path", str_of(NULL, 'a', 256), err, sizeof(err)));
	char fp[4200] = "";
	for (int i = 0; i < 17; i++)   /* 17 components of 240 and 16 slashes: 4096 */
		snprintf(fp + strlen(fp), sizeof(fp) - strlen(fp), "%s%0240d", i ? "/" : "", 0);
	assert_int_equal(strlen(fp), 4096);
	assert_true(takes(RES_FILE, "path", cJSON_CreateString(fp), err, sizeof(err)));
	strcat(fp, "0");
	assert_false(takes(RES_FILE, "path", cJSON_CreateString(fp), err, sizeof(err)));
	static const char *const bad_files[] = { "/etc/x", "a/../b", "./a", "a//b", "a/", ".tether-x", "a/.tether",
						 "a\\b", "a\tb", "a\x7f" };
	for (size_t i = 0; i < sizeof(bad_files) / sizeof(bad_files[0]); i++)
		if (takes(RES_FILE, "path", cJSON_CreateString(bad_files[i]), err, sizeof(err)))
			fail_msg("file path '%s' is taken", bad_files[i]);
	/* a file's mode: 3 or 4 octal digits up to 0777 */
	says(RES_FILE, "mode", "3 or 4 octal digits, 000..0777");
	static const char *const modes[] = { "000", "644", "0000", "0777", "0644" };
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
		if (!takes(RES_FILE, "mode", cJSON_CreateString(modes[i]), err, sizeof(err)))
			fail_msg("mode '%s' is refused: %s", modes[i], err);
	static const char *const bad_modes[] = { "00", "64", "1000", "0778", "07777", "rw", "0o644" };
	for (size_t i = 0; i < sizeof(bad_modes) / sizeof(bad_modes[0]); i++)
		if (takes(RES_FILE, "mode", cJSON_CreateString(bad_modes[i]), err, sizeof(err)))
			fail_msg("mode '%s' is taken", bad_modes[i]);
	/* lb: the three named */
	says(RES_CLUSTER, "lb", "round_robin, least_conn or random");
	assert_true(takes(RES_CLUSTER, "lb", cJSON_CreateString("round_robin"), err, sizeof(err)));
	assert_true(takes(RES_CLUSTER, "lb", cJSON_CreateString("least_conn"), err, sizeof(err)));
	assert_false(takes(RES_CLUSTER, "lb", cJSON_CreateString("ip_hash"), err, sizeof(err)));
	/* endpoints: at most 10000, may be empty */
	says(RES_CLUSTER, "endpoints", "at most 10000; may be empty");
	static const int counts[] = { 0, 10000, 10001 };
	for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
		int n = counts[c];
		cJSON *eps = cJSON_CreateArray();
		for (int i = 0; i < n; i++) {
			cJSON *ep = cJSON_CreateObject();
			cJSON_AddStringToObject(ep, "address", "10.0.0.1");
			cJSON_AddNumberToObject(ep, "port", 1 + i % 65535);
			cJSON_AddItemToArray(eps, ep);
		}
		if (takes(RES_CLUSTER, "endpoints", eps, err, sizeof(err)) != (n <= 10000))
			fail_msg("%d endpoints: %s", n, err[0] ? err : "taken");
	}
	/* a listener's address is a literal; tls may be null */
	says(RES_LISTENER, "address", "an IPv4 or IPv6 address");
	assert_true(takes(RES_LISTENER, "address", cJSON_CreateString("::1"), err, sizeof(err)));
	assert_false(takes(RES_LISTENER, "address", cJSON_CreateString("localhost"), err, sizeof(err)));
	says(RES_LISTENER, "tls", "null");
	assert_true(takes(RES_LISTENER, "tls", cJSON_CreateNull(), err, sizeof(err)));
	/* names: [A-Za-z0-9._-]{1,200}, as the page's DESCRIPTION says */
	char name[260];
	snprintf(name, sizeof(name), "file/%0200d", 0);
	cJSON *b = parse(resource_schema(RES_FILE)->example);
	assert_int_equal(validate(name, b, RES_STRICT, err, sizeof(err)), 0);
	snprintf(name, sizeof(name), "file/%0201d", 0);
	assert_int_equal(validate(name, b, RES_STRICT, err, sizeof(err)), -1);
	cJSON_Delete(b);
}

/* ---- unknown fields in every object ---------------------------------------- */

struct add_arg {
	const char *key;
};

static void add_member(cJSON *obj, void *arg)
{
	cJSON_AddNumberToObject(obj, ((struct add_arg *)arg)->key, 1);
}

/* One object of a body: a member the table does not name, added there,
 * is refused with RES_STRICT, and taken without it. */
static int refuse_unknown_at(const char *name, const char *text, const char *at)
{
	enum res_type t = resource_type_of(name);
	cJSON *b = without_pending(t, text);
	char field[128], err[512];
	size_t n = strlen(at);
	/* the field whose object it is: "endpoints[]" is in "endpoints" */
	snprintf(field, sizeof(field), "%.*s", (int)(n >= 2 && at[n - 1] == ']' ? n - 2 : n), at);
	if (*at && !has_path(b, field)) {
		cJSON_Delete(b);
		return 0;
	}
	struct add_arg a = { "zz_not_a_field" };
	each_at(b, at, add_member, &a);
	assert_int_equal(validate(name, b, RES_V_STORED, err, sizeof(err)), 0);
	if (validate(name, b, RES_STRICT, err, sizeof(err)) == 0)
		fail_msg("%s: an unknown field in '%s' is taken", name, at);
	if (!strstr(err, "unknown field 'zz_not_a_field' (known: "))
		fail_msg("%s at '%s': %s", name, at, err);
	cJSON_Delete(b);
	return 1;
}

/* ... in the body and in every field of type object or array of objects
 * (not a map, a pending or a sealed secret's one: envelope.c checks
 * those), of the full bodies and the examples. */
static void test_unknown_refused_in_every_object(void **state)
{
	(void)state;
	int objects = 0;
	for (size_t k = 0; k < NFULL + RES_TYPE_COUNT; k++) {
		char name[64];
		const char *text;
		if (k < NFULL) {
			snprintf(name, sizeof(name), "%s", full[k].name);
			text = full[k].body;
		} else {
			const struct rs_type *t = resource_schema((enum res_type)(k - NFULL));
			snprintf(name, sizeof(name), "%s/%s", resource_type_name(t->type), t->example_name);
			text = t->example;
		}
		objects += refuse_unknown_at(name, text, "");
		for (const struct rs_field *f = resource_schema(resource_type_of(name))->fields; f->path; f++) {
			char at[128];
			if ((f->flags & (RS_PENDING | RS_MAP | RS_SEALED)) ||
			    (strcmp(f->json, "object") != 0 && strcmp(f->json, "array of objects") != 0))
				continue;
			members(f, at, sizeof(at));
			objects += refuse_unknown_at(name, text, at);
		}
	}
	/* the bodies, and endpoints[] and tls at least twice each */
	assert_true(objects >= (int)NFULL + RES_TYPE_COUNT + 4);
}

/* The error lists the table's fields in its order, or the nearest. */
static void test_unknown_names_table_fields(void **state)
{
	(void)state;
	char err[512];
	cJSON *b = parse("{\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":80,\"wieght\":5}]}");
	assert_int_equal(validate("cluster/web", b, RES_STRICT, err, sizeof(err)), -1);
	assert_string_equal(err, "cluster/web: endpoints[0]: unknown field 'wieght' (did you mean 'weight'?)");
	cJSON_Delete(b);
	b = parse("{\"cert\":\"-----BEGIN C\",\"key\":\"-----BEGIN K\",\"wraps\":{}}");
	assert_int_equal(validate("secret/s", b, RES_STRICT, err, sizeof(err)), -1);
	/* a sealed secret's fields are not a plaintext one's */
	assert_string_equal(err, "secret/s: unknown field 'wraps' (known: cert, key)");
	cJSON_Delete(b);
	const char *names[RS_CHILDREN_MAX];
	size_t n = resource_schema_children(RES_ROUTE, "", RS_PENDING, names, RS_CHILDREN_MAX);
	assert_true(n >= 4);
	assert_string_equal(names[0], "listener");
	assert_string_equal(names[3], "cluster");
	n = resource_schema_children(RES_ROUTE, "", 0, names, RS_CHILDREN_MAX);
	assert_true(n > 4);
	n = resource_schema_children(RES_CLUSTER, "endpoints[]", 0, names, RS_CHILDREN_MAX);
	assert_int_equal(n, 3);
	assert_string_equal(names[2], "weight");
	n = resource_schema_children(RES_ROUTE, "headers.request", 0, names, RS_CHILDREN_MAX);
	assert_int_equal(n, 2);
	assert_string_equal(names[0], "set");
	assert_string_equal(names[1], "remove");
}

/* ---- sealed secrets --------------------------------------------------------- */

static void test_sealed_fields_in_table(void **state)
{
	(void)state;
	unsigned char rpk[32], rsk[32], npk[32], nsk[32], dk[ENVELOPE_DK_BYTES];
	char rkid[KEY_ID_LEN + 1], nkid[KEY_ID_LEN + 1], err[512] = "";
	assert_true(sodium_init() >= 0);
	crypto_box_keypair(rpk, rsk);
	crypto_box_keypair(npk, nsk);
	keys_id(rpk, rkid);
	keys_id(npk, nkid);
	const char *plain = resource_schema(RES_SECRET)->example;
	cJSON *sealed = envelope_seal("secret/site", (const unsigned char *)plain, strlen(plain), rpk, rkid, dk, err,
				      sizeof(err));
	if (!sealed)
		fail_msg("seal: %s", err);
	char *wrap = envelope_wrap(dk, npk);
	sodium_memzero(dk, sizeof(dk));
	cJSON *b = cJSON_CreateObject();
	cJSON_AddItemToObject(b, "sealed", sealed);
	cJSON_AddStringToObject(cJSON_AddObjectToObject(b, "wraps"), nkid, wrap);
	cJSON *sup = cJSON_AddArrayToObject(b, "superseded");
	cJSON_AddItemToArray(sup, cJSON_CreateString("0123456789abcdef0123456789abcdef"));
	free(wrap);
	assert_int_equal(validate("secret/site", b, RES_STRICT | RES_V_STORED, err, sizeof(err)), 0);
	/* every member is in the table, flagged as a sealed secret's */
	struct walk w = { RES_SECRET, "a sealed secret" };
	walk_members(&w, b, "");
	for (const cJSON *c = b->child; c; c = c->next)
		assert_true(resource_schema_field(RES_SECRET, c->string)->flags & RS_SEALED);
	const cJSON *c;
	size_t n = 0;
	cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(b, "sealed")) {
		char path[64];
		snprintf(path, sizeof(path), "sealed.%s", c->string);
		const struct rs_field *f = resource_schema_field(RES_SECRET, path);
		assert_non_null(f);
		assert_true(f->flags & RS_SEALED);
		n++;
	}
	/* and every sealed.* field of the table is in an envelope */
	size_t in_table = 0;
	for (const struct rs_field *f = resource_schema(RES_SECRET)->fields; f->path; f++)
		in_table += strncmp(f->path, "sealed.", 7) == 0;
	assert_int_equal(n, in_table);
	/* an unknown member is refused, beside sealed or in it */
	cJSON_AddNumberToObject(b, "x", 1);
	assert_int_equal(validate("secret/site", b, RES_STRICT, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "unknown field 'x'"));
	cJSON_DeleteItemFromObjectCaseSensitive(b, "x");
	cJSON_AddNumberToObject(cJSON_GetObjectItemCaseSensitive(b, "sealed"), "x", 1);
	assert_int_equal(validate("secret/site", b, RES_STRICT, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "unknown field 'x'"));
	cJSON_Delete(b);
}

/* ---- the table's shape and lookups ----------------------------------------- */

static void test_table_shape(void **state)
{
	(void)state;
	static const char *const jtypes[] = { "string", "integer", "number", "boolean", "object",
					      "array of objects", "array of strings", "object of strings" };
	for (int i = 0; i < RES_TYPE_COUNT; i++) {
		const struct rs_type *t = resource_schema((enum res_type)i);
		assert_ptr_equal(resource_schema_by_name(resource_type_name((enum res_type)i)), t);
		assert_true(strlen(t->desc) > 20);
		assert_true(resource_name_valid(t->example_name));
		for (const struct rs_field *f = t->fields; f->path; f++) {
			bool known = false;
			for (size_t k = 0; k < sizeof(jtypes) / sizeof(jtypes[0]); k++)
				known = known || strcmp(f->json, jtypes[k]) == 0;
			if (!known)
				fail_msg("%s: type '%s'", f->path, f->json);
			/* the printers add the full stop */
			assert_true(*f->desc && f->desc[strlen(f->desc) - 1] != '.');
			assert_non_null(f->limits);
			/* no field twice */
			for (const struct rs_field *g = t->fields; g != f; g++)
				assert_string_not_equal(g->path, f->path);
			/* a nested field's object is in the table, before it, and
			 * shares its pending and sealed flags */
			const char *dot = strrchr(f->path, '.');
			if (!dot)
				continue;
			char parent[128];
			snprintf(parent, sizeof(parent), "%.*s", (int)(dot - f->path), f->path);
			size_t pl = strlen(parent);
			bool elems = pl > 2 && strcmp(parent + pl - 2, "[]") == 0;
			if (elems)
				parent[pl - 2] = '\0';
			const struct rs_field *p = resource_schema_field(t->type, parent);
			if (!p || p > f)
				fail_msg("%s: its object '%s' is not before it", f->path, parent);
			assert_string_equal(p->json, elems ? "array of objects" : "object");
			assert_int_equal(p->flags & (RS_PENDING | RS_SEALED), f->flags & (RS_PENDING | RS_SEALED));
		}
	}
	assert_null(resource_schema(RES_UNKNOWN));
	assert_null(resource_schema_by_name("routes"));
}

static void test_lookups(void **state)
{
	(void)state;
	const struct rs_field *f = resource_schema_field(RES_CLUSTER, "endpoints.port");
	assert_non_null(f);
	assert_string_equal(f->path, "endpoints[].port");
	assert_ptr_equal(resource_schema_field(RES_CLUSTER, "endpoints[].port"), f);
	assert_null(resource_schema_field(RES_CLUSTER, "endpoints[]port"));
	assert_null(resource_schema_field(RES_CLUSTER, "port"));
	assert_null(resource_schema_field(RES_UNKNOWN, "port"));
	assert_non_null(resource_schema_field(RES_ROUTE, "timeout.read"));
	assert_non_null(resource_schema_field(RES_LISTENER, "snippet.nginx"));
	assert_non_null(resource_schema_field(RES_CLUSTER, "health.max_fails"));
	assert_non_null(resource_schema_field(RES_ROUTE, "headers.request.set"));
	assert_true(resource_schema_under(resource_schema_field(RES_ROUTE, "timeout.read"), "timeout"));
	assert_true(resource_schema_under(resource_schema_field(RES_ROUTE, "timeout"), "timeout"));
	assert_false(resource_schema_under(resource_schema_field(RES_ROUTE, "timeout"), "time"));
	assert_true(resource_schema_under(f, "endpoints"));
	const char *names[] = { "listener", "host", "path", "cluster" };
	assert_string_equal(resource_schema_nearest("clutser", names, 4), "cluster");
	assert_string_equal(resource_schema_nearest("HOST", names, 4), "host");
	assert_null(resource_schema_nearest("zzzzzz", names, 4));
	assert_null(resource_schema_nearest("x", names, 0));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_example_validates),
		cmocka_unit_test(test_full_bodies_cover_the_table),
		cmocka_unit_test(test_full_bodies_validate),
		cmocka_unit_test(test_documented_types_are_checked),
		cmocka_unit_test(test_documented_ranges_are_the_validators),
		cmocka_unit_test(test_documented_string_limits_are_the_validators),
		cmocka_unit_test(test_unknown_refused_in_every_object),
		cmocka_unit_test(test_unknown_names_table_fields),
		cmocka_unit_test(test_sealed_fields_in_table),
		cmocka_unit_test(test_table_shape),
		cmocka_unit_test(test_lookups),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
