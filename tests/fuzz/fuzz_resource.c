/* fuzz_resource.c: libFuzzer target for resource names and resource_validate.
 * Input: one control byte (bit 0: strict; bits 1-3: the type, 0-5 secret
 * .. guard, 6-7 meaning "take the name line as it is"), then a name line, a
 * newline and a JSON body. Properties: nothing crashes; a refusal has a
 * message; on success the name is valid and every reference is "type/name"
 * of a known type with a valid name; strict acceptance implies lenient
 * acceptance with the same references; a guard body the schema accepts is
 * one the evaluator (guards.c) takes, and judging a change with it never
 * crashes; what strict alone refuses is an unknown field, named with the
 * nearest known one or the list of the known ones. */
#include "fuzz.h"
#include "guards.h"
#include "json.h"
#include "resource.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what, const char *name, const char *detail)
{
	fprintf(stderr, "fuzz_resource: %s\n  name: %.256s\n  detail: %.512s\n", what, name,
		detail ? detail : "");
	abort();
}

static char *copy_z(const uint8_t *p, size_t n)
{
	char *s = malloc(n + 1);
	if (!s)
		abort();
	if (n)
		memcpy(s, p, n);
	s[n] = '\0';
	return s;
}

/* A reference implementation of the file-path rules, written from the
 * header's words, to cross-check resource_file_path_valid: relative, at most
 * 4096 bytes, no empty, ".", ".." or ".tether*" component (case-sensitive;
 * components are at most 255 bytes), no control characters or '\\'. */
static bool ref_file_path_valid(const char *path)
{
	size_t n = strlen(path);
	if (n == 0 || n > 4096 || path[0] == '/')
		return false;
	size_t start = 0;
	for (size_t i = 0; i <= n; i++) {
		if (i == n || path[i] == '/') {
			size_t len = i - start;
			if (len == 0 || len > 255)
				return false;
			if (len == 1 && path[start] == '.')
				return false;
			if (len == 2 && path[start] == '.' && path[start + 1] == '.')
				return false;
			/* reserved at any depth: the agent's work directory
			 * (".tether-work") and its temp files beside each target
			 * (".tether-tmp-NAME") */
			if (len >= 7 && strncmp(path + start, ".tether", 7) == 0)
				return false;
			start = i + 1;
		} else {
			unsigned char c = (unsigned char)path[i];
			if (c < 0x20 || c == 0x7f || c == '\\')
				return false;
		}
	}
	return true;
}

static void check_refs(const char *name, const struct res_refs *refs)
{
	char err[256];
	if (refs->n < 0 || refs->n > RES_MAX_REFS)
		die("reference count out of range", name, NULL);
	for (int i = 0; i < refs->n; i++) {
		const char *r = refs->name[i];
		if (!memchr(r, '\0', sizeof(refs->name[i])))
			die("reference not terminated", name, NULL);
		const char *slash = strchr(r, '/');
		if (!slash)
			die("reference without a type", name, r);
		enum res_type t = resource_type_of(r);
		if (t != RES_SECRET && t != RES_CLUSTER && t != RES_LISTENER)
			die("reference to a type nothing references", name, r);
		if (!resource_name_valid(slash + 1))
			die("reference to an invalid name", name, r);
		err[0] = '\0';
		if (resource_fullname_check(r, err, sizeof(err)) < 0)
			die("reference fails resource_fullname_check", name, err);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	unsigned ctl = data[0];
	unsigned flags = (ctl & 1u) ? RES_STRICT : 0;
	unsigned t = (ctl >> 1) & 7u;
	const uint8_t *rest = data + 1;
	size_t rlen = size - 1;

	const uint8_t *nl = memchr(rest, '\n', rlen);
	size_t nlen = nl ? (size_t)(nl - rest) : rlen;
	const uint8_t *body = nl ? nl + 1 : rest + rlen;
	size_t blen = rlen - nlen - (nl ? 1 : 0);

	char *line = copy_z(rest, nlen);
	char *name;
	if (t < RES_TYPE_COUNT) {
		const char *tn = resource_type_name((enum res_type)t);
		size_t tl = strlen(tn), ll = strlen(line);
		name = malloc(tl + 1 + ll + 1);
		if (!name)
			abort();
		memcpy(name, tn, tl);
		name[tl] = '/';
		memcpy(name + tl + 1, line, ll + 1);
	} else {
		name = copy_z((const uint8_t *)line, strlen(line));
	}

	/* the name predicates on their own */
	char err[512] = "";
	int frc = resource_fullname_check(name, err, sizeof(err));
	if (frc < 0 && !err[0])
		die("resource_fullname_check failed without a message", name, NULL);
	if (frc == 0 && resource_type_of(name) == RES_UNKNOWN)
		die("a checked name has an unknown type", name, NULL);
	int rank = resource_rank(name);
	if (rank < 0 || rank > RES_TYPE_COUNT)
		die("rank out of range", name, NULL);
	if (resource_file_path_valid(line) != ref_file_path_valid(line))
		die("resource_file_path_valid disagrees with the reference", name, line);

	struct json_limits lim = { 1024 * 1024, JSON_DEFAULT_MAX_DEPTH };
	cJSON *v = json_decode((const char *)body, blen, &lim, err, sizeof(err));

	struct res_refs refs;
	memset(&refs, 0x5a, sizeof(refs));
	err[0] = '\0';
	int rc = resource_validate(name, v, flags, &refs, err, sizeof(err));
	if (rc < 0) {
		if (!err[0])
			die("resource_validate failed without a message", name, NULL);
	} else {
		if (rc != 0)
			die("resource_validate returned neither 0 nor -1", name, NULL);
		if (frc != 0)
			die("resource_validate accepted a name resource_fullname_check refuses", name, NULL);
		if (!cJSON_IsObject(v))
			die("resource_validate accepted a body that is not an object", name, NULL);
		check_refs(name, &refs);
	}

	/* a guard the schema takes, the evaluator takes; and judges with */
	if (rc == 0 && resource_type_of(name) == RES_GUARD) {
		char *canon = json_encode_canonical(v);
		struct guards gs;
		guards_init(&gs);
		char gerr[512] = "";
		if (guards_add(&gs, name, canon, strlen(canon), gerr, sizeof(gerr)) < 0)
			die("the evaluator refuses a guard the schema accepts", name, gerr);
		static const char *const bodies[] = {
			"{\"endpoints\":[{\"address\":\"a\",\"port\":1},{\"address\":\"b\",\"port\":1}]}",
			"{\"endpoints\":[]}", "{\"path\":\"p\",\"content\":\"xxxxxxxx\"}", "{\"path\":\"p\",\"content\":\"\"}",
		};
		struct guard_change ch[] = {
			{ "cluster/web", bodies[0], bodies[1], strlen(bodies[0]), strlen(bodies[1]) },
			{ "cluster/web", bodies[0], NULL, strlen(bodies[0]), 0 },
			{ "file/f", bodies[3], bodies[2], strlen(bodies[3]), strlen(bodies[2]) },
			{ "file/g", bodies[2], bodies[2], strlen(bodies[2]), strlen(bodies[2]) },
			{ "secret/s", NULL, canon, 0, strlen(canon) },
		};
		struct guard_report r;
		guard_report_init(&r);
		size_t n = guards_check(&gs, ch, sizeof(ch) / sizeof(ch[0]), &r);
		if (n != r.count || (n && (!r.text.data || !r.passed.data || r.nguards != 1)))
			die("the guard report is inconsistent", name, canon);
		char sum[4096];
		guards_summary(&r, sum, sizeof(sum));
		guard_report_release(&r);
		guards_release(&gs);
		free(canon);
	}

	/* strict is lenient plus "no unknown fields": it may only refuse more */
	struct res_refs lrefs;
	memset(&lrefs, 0xa5, sizeof(lrefs));
	char lerr[512] = "";
	int lrc = resource_validate(name, v, flags & ~RES_STRICT, &lrefs, lerr, sizeof(lerr));
	if (lrc < 0 && !lerr[0])
		die("lenient resource_validate failed without a message", name, NULL);
	if ((flags & RES_STRICT) && rc == 0) {
		if (lrc != 0)
			die("strict accepted what lenient refuses", name, lerr);
		if (lrefs.n != refs.n)
			die("strict and lenient found different references", name, NULL);
		for (int i = 0; i < refs.n; i++)
			if (strcmp(lrefs.name[i], refs.name[i]) != 0)
				die("strict and lenient found different references", name, refs.name[i]);
	}
	if (lrc == 0)
		check_refs(name, &lrefs);
	if ((flags & RES_STRICT) && rc < 0 && lrc == 0) {
		const char *u = strstr(err, "unknown field '");
		if (!u || (!strstr(u, "' (did you mean '") && !strstr(u, "' (known: ")))
			die("strict refused what lenient takes, but not as an unknown field with a hint", name, err);
	}

	/* refs is optional */
	err[0] = '\0';
	if (resource_validate(name, v, flags, NULL, err, sizeof(err)) != rc)
		die("resource_validate answers differently without refs", name, err);

	cJSON_Delete(v);
	free(name);
	free(line);
	return 0;
}
