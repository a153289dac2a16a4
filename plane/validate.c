/* validate.c: write validation on the candidate state (see validate.h). */
#include "validate.h"
#include "json.h"
#include "strmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int validate_upsert(const char *name, cJSON *body, struct store_change *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	if (resource_validate(name, body, 0, &out->refs, err, errlen) < 0)
		return -1;
	out->name = name;
	out->body = json_encode_canonical(body);
	out->body_len = strlen(out->body);
	return 0;
}

/* A name exists in the candidate when the write upserts it, or when the
 * store has it live and the write does not remove it. */
static int cand_exists(struct store *s, const struct strmap *in_write,
		       const struct store_change *ch, const char *name)
{
	intptr_t idx;
	if (strmap_get(in_write, name, &idx))
		return ch[idx].body != NULL;
	const struct store_entry *e = store_get(s, name);
	return e && e->body;
}

/* Finds one live referrer of name in the candidate, for the message. */
static const char *find_referrer(struct store *s, const struct strmap *in_write,
				 const struct store_change *ch, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++) {
		for (int r = 0; ch[i].body && r < ch[i].refs.n; r++)
			if (strcmp(ch[i].refs.name[r], name) == 0)
				return ch[i].name;
	}
	for (const struct store_entry *e = store_newest(s); e; e = e->prev) {
		if (!e->body || strmap_get(in_write, e->name, NULL))
			continue;
		for (int r = 0; r < e->nrefs; r++)
			if (strcmp(e->refs[r], name) == 0)
				return e->name;
	}
	return "another resource";
}

static const char *bare(const char *fullname)
{
	const char *slash = strchr(fullname, '/');
	return slash ? slash + 1 : fullname;
}

int validate_candidate(struct store *s, const struct store_change *ch, size_t n,
		       size_t max_resources, char *err, size_t errlen)
{
	struct strmap in_write, ref_delta;
	int rc = -1;
	long long live = (long long)store_count(s);

	strmap_init(&in_write);
	strmap_init(&ref_delta);
	for (size_t i = 0; i < n; i++) {
		if (strmap_get(&in_write, ch[i].name, NULL)) {
			snprintf(err, errlen, "%s: named twice in one write", ch[i].name);
			goto out;
		}
		*strmap_ref(&in_write, ch[i].name) = (intptr_t)i;
	}

	/* how the write moves each name's referrer count */
	for (size_t i = 0; i < n; i++) {
		const struct store_entry *e = store_get(s, ch[i].name);
		bool was_live = e && e->body;
		if (was_live)
			for (int r = 0; r < e->nrefs; r++)
				(*strmap_ref(&ref_delta, e->refs[r]))--;
		if (ch[i].body)
			for (int r = 0; r < ch[i].refs.n; r++)
				(*strmap_ref(&ref_delta, ch[i].refs.name[r]))++;
		if (ch[i].body && !was_live)
			live++;
		else if (!ch[i].body && was_live)
			live--;
	}

	for (size_t i = 0; i < n; i++) {
		if (!ch[i].body)
			continue;
		for (int r = 0; r < ch[i].refs.n; r++) {
			const char *ref = ch[i].refs.name[r];
			if (!cand_exists(s, &in_write, ch, ref)) {
				snprintf(err, errlen, "%s: unknown %s '%s'", ch[i].name,
					 resource_type_name(resource_type_of(ref)), bare(ref));
				goto out;
			}
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (ch[i].body)
			continue;
		const struct store_entry *e = store_get(s, ch[i].name);
		if (!e || !e->body)
			continue;
		intptr_t d = 0;
		strmap_get(&ref_delta, ch[i].name, &d);
		if ((long long)e->referrers + d > 0) {
			snprintf(err, errlen, "cannot remove %s: %s refers to it", ch[i].name,
				 find_referrer(s, &in_write, ch, n, ch[i].name));
			goto out;
		}
	}
	if (max_resources && live > (long long)max_resources) {
		snprintf(err, errlen, "the write would hold %lld resources; the limit is %zu", live, max_resources);
		goto out;
	}
	rc = 0;
out:
	strmap_release(&in_write);
	strmap_release(&ref_delta);
	return rc;
}
