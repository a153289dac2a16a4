/* persist/etcd/approvals.c: the etcd backend's approvals (see persist.h):
 * one key per (version, kid, sub), approvals/VERSION/KID/SUBHASH (SUBHASH:
 * 16 hex of the subscription's hash, so any sub makes a short key), value
 * {"version","sub","kid","token"} (VERSION zero-padded: a trim is one
 * range delete). Other replicas read them again on a timer
 * (core/approvals.h): the watch leaves these keys alone. */
#include "json.h"
#include "log.h"
#include "persist/etcd/client.h"
#include "persist/etcd/etcd.h"
#include "strmap.h"
#include "xmalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct load_ctx {
	persist_approval_cb cb;
	void *ctx;
	size_t bad;
	bool stop;
};

static int one(void *ctx, const struct etcd_kv *kv)
{
	struct load_ctx *l = ctx;
	if (l->stop || !kv->value)
		return 0;
	cJSON *o = cJSON_ParseWithLength(kv->value, kv->value_len);
	uint64_t v = 0;
	struct persist_approval a = {
		.sub = json_get_string(o, "sub"), .kid = json_get_string(o, "kid"), .token = json_get_string(o, "token"),
	};
	if (!cJSON_IsObject(o) || !json_get_u64(cJSON_GetObjectItemCaseSensitive(o, "version"), &v) || !a.sub ||
	    !a.kid || !a.token) {
		l->bad++;   /* not ours to judge further: skipped, said below */
	} else {
		a.version = v;
		if (l->cb(l->ctx, &a) < 0)
			l->stop = true;
	}
	cJSON_Delete(o);
	return 0;
}

int etcd_approvals_load(struct persist *p, persist_approval_cb cb, void *ctx, char *err, size_t errlen)
{
	struct load_ctx l = { cb, ctx, 0, false };
	char *prefix = persist_etcd_key(p, "approvals/");
	int r = etcd_range_prefix(persist_etcd_client(p), prefix, false, 0, one, &l, NULL, err, errlen);
	free(prefix);
	if (r == 0 && l.bad)
		log_error("etcd: %zu malformed approval records skipped", l.bad);
	if (r == 0 && l.stop) {
		snprintf(err, errlen, "etcd: an approval record could not be loaded");
		return -1;
	}
	return r == ETCD_UNAVAILABLE ? PERSIST_UNAVAILABLE : r;
}

int etcd_approvals_trim(struct persist *p, uint64_t below, char *err, size_t errlen)
{
	char *from = persist_etcd_key(p, "approvals/"), *to = persist_etcd_key(p, "approvals/%020llu",
									      (unsigned long long)below);
	char *f64 = etcd_b64(from, strlen(from)), *t64 = etcd_b64(to, strlen(to));
	cJSON *b = cJSON_CreateObject(), *resp = NULL;
	cJSON_AddStringToObject(b, "key", f64);
	cJSON_AddStringToObject(b, "range_end", t64);
	int rc = etcd_call(persist_etcd_client(p), "/v3/kv/deleterange", b, &resp, err, errlen);
	cJSON_Delete(resp);
	free(from);
	free(to);
	free(f64);
	free(t64);
	return rc == ETCD_UNAVAILABLE ? PERSIST_UNAVAILABLE : rc;
}

int etcd_approval_add(struct persist *p, const struct persist_approval *a, char *err, size_t errlen)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "version", (double)a->version);
	cJSON_AddStringToObject(o, "sub", a->sub);
	cJSON_AddStringToObject(o, "kid", a->kid);
	cJSON_AddStringToObject(o, "token", a->token);
	char *text = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	char *k = persist_etcd_key(p, "approvals/%020llu/%s/%016llx", (unsigned long long)a->version, a->kid,
				   (unsigned long long)strmap_hash(a->sub));
	int rc = persist_etcd_put(p, k, text, strlen(text), err, errlen);
	free(k);
	free(text);
	return rc == ETCD_UNAVAILABLE ? PERSIST_UNAVAILABLE : rc;
}
