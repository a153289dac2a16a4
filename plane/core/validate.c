/* core/validate.c: write validation on the candidate state (see validate.h):
 * the rules themselves are common/refcheck.c's, shared with the agent. */
#include "core/validate.h"
#include "pemcheck.h"
#include "envelope.h"
#include "json.h"
#include "refcheck.h"
#include "xmalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int upsert(const char *name, cJSON *body, unsigned res_flags, struct store_change *out, char *err,
		  size_t errlen)
{
	memset(out, 0, sizeof(*out));
	/* a sealed secret is written in its stored form (with "wraps") */
	if (resource_validate(name, body, RES_V_STORED | res_flags, &out->refs, err, errlen) < 0)
		return -1;
	out->name = name;
	out->body = json_encode_canonical(body);
	out->body_len = strlen(out->body);
	return 0;
}

int validate_upsert(const char *name, cJSON *body, struct store_change *out, char *err, size_t errlen)
{
	return upsert(name, body, 0, out, err, errlen);
}

int validate_write(const char *name, cJSON *body, unsigned flags, struct store_change *out, char *err,
		   size_t errlen)
{
	/* a plaintext secret's certificate and key, parsed and matched first:
	 * the schema has seen that both are strings */
	if (resource_type_of(name) == RES_SECRET && cJSON_IsObject(body) && !envelope_is_sealed(body)) {
		struct res_refs refs;
		if (resource_validate(name, body, RES_V_STORED | ((flags & VALIDATE_STRICT) ? RES_STRICT : 0), &refs,
				      err, errlen) < 0)
			return -1;
		if (pemcheck_pair(name, json_get_string(body, "cert"), json_get_string(body, "key"), err, errlen) < 0)
			return -1;
	}
	return upsert(name, body, (flags & VALIDATE_STRICT) ? RES_STRICT : 0, out, err, errlen);
}

/* ---- refcheck's view of the store --------------------------------------- */

static bool base_lookup(void *ctx, const char *name, const char *const **refs, int *nrefs,
			uint32_t *referrers, const char **file_path)
{
	const struct store_entry *e = store_get(ctx, name);
	if (!e || !e->body)
		return false;
	if (refs)
		*refs = (const char *const *)e->refs;
	if (nrefs)
		*nrefs = e->nrefs;
	if (referrers)
		*referrers = e->referrers;
	if (file_path)
		*file_path = e->file_path;
	return true;
}

static const char *base_file_at(void *ctx, const char *path)
{
	return store_file_at(ctx, path);
}

static uint32_t base_files_under(void *ctx, const char *dir)
{
	return store_files_under(ctx, dir);
}

/* Only on the error path: a scan is fine. */
static const char *base_referrer_of(void *ctx, const char *name, bool (*skip)(void *, const char *), void *sctx)
{
	for (const struct store_entry *e = store_newest(ctx); e; e = e->prev) {
		if (!e->body || skip(sctx, e->name))
			continue;
		for (int r = 0; r < e->nrefs; r++)
			if (strcmp(e->refs[r], name) == 0)
				return e->name;
	}
	return NULL;
}

int validate_candidate(struct store *s, const struct store_change *ch, size_t n,
		       size_t max_resources, char *err, size_t errlen)
{
	long long live = (long long)store_count(s);
	for (size_t i = 0; i < n; i++) {
		const struct store_entry *e = store_get(s, ch[i].name);
		bool was_live = e && e->body;
		if (ch[i].body && !was_live)
			live++;
		else if (!ch[i].body && was_live)
			live--;
	}
	if (max_resources && live > (long long)max_resources) {
		snprintf(err, errlen, "the write would hold %lld resources; the limit is %zu", live, max_resources);
		return -1;
	}

	struct refcheck_change *rc = xcalloc(n ? n : 1, sizeof(*rc));
	char **paths = xcalloc(n ? n : 1, sizeof(char *));
	for (size_t i = 0; i < n; i++) {
		rc[i].name = ch[i].name;
		rc[i].upsert = ch[i].body != NULL;
		rc[i].refs = &ch[i].refs;
		if (ch[i].body)
			rc[i].file_path = paths[i] = resource_file_path(ch[i].name, ch[i].body, ch[i].body_len);
	}
	struct refcheck_base b = {
		.ctx = s, .lookup = base_lookup, .file_at = base_file_at,
		.files_under = base_files_under, .referrer_of = base_referrer_of,
	};
	int ret = refcheck_candidate(&b, rc, n, err, errlen);
	for (size_t i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
	free(rc);
	return ret;
}
