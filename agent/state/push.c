/* state/push.c: push message decoding (see state/push.h). */
#include "state/push.h"
#include "resource.h"
#include "xmalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int push_decode(const char *text, size_t len, const struct json_limits *lim, struct push *p,
		char *err, size_t errlen)
{
	char inner[512];
	memset(p, 0, sizeof(*p));
	p->doc = json_decode(text, len, lim, inner, sizeof(inner));
	if (!p->doc) {
		snprintf(err, errlen, "push: %s", inner);
		return -1;
	}
	const cJSON *d = p->doc;
	if (!cJSON_IsObject(d)) {
		snprintf(err, errlen, "push: not a JSON object");
		goto fail;
	}
	/* what identifies the push first, each on its own, so that whatever
	 * else is wrong the push can still be NACKed */
	const char *nonce = json_get_string(d, "nonce");
	bool nonce_ok = nonce && *nonce && strlen(nonce) < sizeof(p->nonce);
	if (nonce_ok)
		snprintf(p->nonce, sizeof(p->nonce), "%s", nonce);
	if (!json_get_u64(cJSON_GetObjectItemCaseSensitive(d, "version"), &p->version)) {
		snprintf(err, errlen, "push: version must be a non-negative integer");
		goto fail;
	}
	const cJSON *base = cJSON_GetObjectItemCaseSensitive(d, "base");
	if (base && !json_get_u64(base, &p->base)) {
		snprintf(err, errlen, "push: base must be a non-negative integer");
		goto fail;
	}
	const cJSON *full = cJSON_GetObjectItemCaseSensitive(d, "full");
	if (full && !cJSON_IsBool(full)) {
		snprintf(err, errlen, "push: full must be true or false");
		goto fail;
	}
	p->full = cJSON_IsTrue(full);
	const cJSON *stmt = cJSON_GetObjectItemCaseSensitive(d, "statement");
	if (stmt && !cJSON_IsString(stmt)) {
		snprintf(err, errlen, "push: statement must be a string");
		goto fail;
	}
	p->statement = stmt ? stmt->valuestring : NULL;
	/* unsigned: the newest version <= version whose write overrode a
	 * guard (a node without --trust lets a guard violation through
	 * when it is newer than what it holds) */
	const cJSON *ov = cJSON_GetObjectItemCaseSensitive(d, "overridden");
	if (ov && (!json_get_u64(ov, &p->overridden) || p->overridden > p->version)) {
		snprintf(err, errlen, "push: overridden must be an integer in 0..version");
		goto fail;
	}
	/* whether the plane is stale is no part of the push: never a reason
	 * to refuse it, read by fresh.c from the same parse */
	p->stale = cJSON_GetObjectItemCaseSensitive(d, "stale");
	if (!nonce_ok) {
		snprintf(err, errlen, "push: nonce must be a string of 1..%d bytes", PUSH_NONCE_MAX - 1);
		goto fail;
	}

	const cJSON *ups = cJSON_GetObjectItemCaseSensitive(d, "upserts");
	const cJSON *rms = cJSON_GetObjectItemCaseSensitive(d, "removed");
	if ((ups && !cJSON_IsArray(ups)) || (rms && !cJSON_IsArray(rms))) {
		snprintf(err, errlen, "push: upserts and removed must be arrays");
		goto fail;
	}
	size_t nup = (size_t)cJSON_GetArraySize(ups), nrm = (size_t)cJSON_GetArraySize(rms);
	p->up = xcalloc(nup ? nup : 1, sizeof(*p->up));
	p->removed = xcalloc(nrm ? nrm : 1, sizeof(*p->removed));
	int i = 0;
	for (cJSON *u = ups ? ups->child : NULL; u; u = u->next, i++) {
		struct push_upsert *pu = &p->up[p->nup];
		pu->name = json_get_string(u, "name");
		pu->body = cJSON_GetObjectItemCaseSensitive(u, "body");
		if (!cJSON_IsObject(u) || !pu->name) {
			snprintf(err, errlen, "push: upserts[%d] needs a string name", i);
			goto fail;
		}
		if (resource_fullname_check(pu->name, inner, sizeof(inner)) < 0) {
			snprintf(err, errlen, "push: upserts[%d]: %s", i, inner);
			goto fail;
		}
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(u, "version");
		if (v && !json_get_u64(v, &pu->version)) {
			snprintf(err, errlen, "push: %s: version must be a non-negative integer", pu->name);
			goto fail;
		}
		if (!pu->body) {
			snprintf(err, errlen, "push: %s: body is missing", pu->name);
			goto fail;
		}
		p->nup++;
	}
	i = 0;
	for (const cJSON *r = rms ? rms->child : NULL; r; r = r->next, i++) {
		if (!cJSON_IsString(r)) {
			snprintf(err, errlen, "push: removed[%d] must be a string", i);
			goto fail;
		}
		if (resource_fullname_check(r->valuestring, inner, sizeof(inner)) < 0) {
			snprintf(err, errlen, "push: removed[%d]: %s", i, inner);
			goto fail;
		}
		p->removed[p->nrm++] = r->valuestring;
	}
	if (p->full && p->nrm) {
		snprintf(err, errlen, "push: a snapshot cannot remove names");
		goto fail;
	}
	return 0;
fail:
	{
		/* keep what identifies the push, so the caller can NACK it */
		uint64_t version = p->version;
		char keep[PUSH_NONCE_MAX];
		memcpy(keep, p->nonce, sizeof(keep));
		push_release(p);
		p->version = version;
		memcpy(p->nonce, keep, sizeof(keep));
	}
	return -1;
}

void push_release(struct push *p)
{
	free(p->up);
	free(p->removed);
	cJSON_Delete(p->doc);
	memset(p, 0, sizeof(*p));
}
