/* persist/relay/state.c: a relay stream's state event as the relay reads
 * it (see persist/relay/state.h; core/relay_feed.c writes it upstream). */
#include "persist/relay/state.h"
#include "json.h"
#include "persist/records_json.h"
#include "resource.h"
#include "util.h"
#include "xmalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_change(const void *a, const void *b)
{
	const struct persist_remote *x = a, *y = b;
	if (x->version != y->version)
		return x->version < y->version ? -1 : 1;
	return strcmp(x->name, y->name);
}

void relay_state_release(struct relay_state *st)
{
	for (size_t i = 0; i < st->n; i++) {
		free(st->ch[i].name);
		free(st->ch[i].body);
	}
	free(st->ch);
	free(st->statement);
	free(st->overridden);
	memset(st, 0, sizeof(*st));
}

int relay_state_decode(const char *data, size_t len, struct relay_state *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	struct json_limits lim = { .max_bytes = 0, .max_depth = 520 };   /* past any --max-depth */
	cJSON *o = json_decode(data, len, &lim, err, errlen);
	if (!o)
		return -1;
	const cJSON *changes = cJSON_GetObjectItemCaseSensitive(o, "changes"), *c;
	if (!cJSON_IsObject(o) || !cJSON_IsArray(changes)) {
		snprintf(err, errlen, "a state needs an object with changes");
		cJSON_Delete(o);
		return -1;
	}
	out->version = record_u64(o, "version");
	out->horizon = record_u64(o, "horizon");
	out->full = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "full"));
	out->has_released = cJSON_GetObjectItemCaseSensitive(o, "released") != NULL;
	out->released = record_u64(o, "released");
	const char *stmt = record_str(o, "statement");
	if (stmt[0])
		out->statement = xstrdup(stmt);
	const cJSON *ov = cJSON_GetObjectItemCaseSensitive(o, "overridden"), *e;
	if (ov) {
		if (!cJSON_IsArray(ov) || (size_t)cJSON_GetArraySize(ov) > out->version) {
			snprintf(err, errlen, "overridden must be an array of versions (decimal strings)");
			goto fail;
		}
		out->overridden = xcalloc((size_t)cJSON_GetArraySize(ov) + 1, sizeof(*out->overridden));
		cJSON_ArrayForEach(e, ov) {
			uint64_t v;
			if (!cJSON_IsString(e) || parse_u64(e->valuestring, &v) < 0 || v == 0 || v > out->version) {
				snprintf(err, errlen, "overridden must hold versions in 1..%llu",
					 (unsigned long long)out->version);
				goto fail;
			}
			out->overridden[out->noverridden++] = v;
		}
	}
	size_t n = (size_t)cJSON_GetArraySize(changes);
	if ((!out->version && n) || out->horizon > out->version || out->released > out->version) {
		snprintf(err, errlen, "a state at version %llu with %zu changes, horizon %llu, released %llu",
			 (unsigned long long)out->version, n, (unsigned long long)out->horizon,
			 (unsigned long long)out->released);
		goto fail;
	}
	out->ch = xcalloc(n ? n : 1, sizeof(*out->ch));
	cJSON_ArrayForEach(c, changes) {
		const char *name = record_str(c, "name");
		uint64_t v = record_u64(c, "version");
		cJSON *body = cJSON_GetObjectItemCaseSensitive(c, "body");
		char nerr[160];
		if (!cJSON_IsObject(c) || resource_fullname_check(name, nerr, sizeof(nerr)) < 0) {
			snprintf(err, errlen, "a change with a bad name: %s", cJSON_IsObject(c) ? nerr : "not an object");
			goto fail;
		}
		if (v == 0 || v > out->version || (body && !cJSON_IsObject(body))) {
			snprintf(err, errlen, "%.200s: a change of version %llu (state %llu)%s", name,
				 (unsigned long long)v, (unsigned long long)out->version,
				 body && !cJSON_IsObject(body) ? " whose body is not an object" : "");
			goto fail;
		}
		struct persist_remote *r = &out->ch[out->n++];
		r->name = xstrdup(name);
		r->version = v;
		if (body) {
			/* the upstream's canonical bytes, as it stores them */
			r->body = json_encode_canonical(body);
			r->body_len = strlen(r->body);
		} else {
			r->deleted_at = (int64_t)record_u64(c, "deleted_at");
		}
	}
	if (out->n > 1)
		qsort(out->ch, out->n, sizeof(*out->ch), cmp_change);
	for (size_t i = 1; i < out->n; i++) {
		if (out->ch[i].version == out->ch[i - 1].version && strcmp(out->ch[i].name, out->ch[i - 1].name) == 0) {
			snprintf(err, errlen, "%.200s: two changes in version %llu", out->ch[i].name,
				 (unsigned long long)out->ch[i].version);
			goto fail;
		}
	}
	cJSON_Delete(o);
	return 0;
fail:
	cJSON_Delete(o);
	relay_state_release(out);
	return -1;
}
