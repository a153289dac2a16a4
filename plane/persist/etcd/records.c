/* persist/etcd/records.c: the etcd backend's records (persist/etcd/etcd.h):
 * rollouts under rollout/ID (zero-padded, so keys sort by id) with the
 * released version beside them, node records under nodes/ID and token
 * records under tokens/ID, each a small JSON object (records_json.h). A batch of node
 * records is a few transactions of up to TXN_OPS puts, not one write per
 * node. */
#include "json.h"
#include "persist/etcd/etcd.h"
#include "persist/records_json.h"
#include "persist/rollout_rec.h"
#include "util.h"
#include "xmalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* etcd refuses a transaction of more than --max-txn-ops (default 128) */
#define TXN_OPS 100
/* and a transaction's values, base64 in the request: under etcd's default
 * --max-request-bytes (1.5 MiB) when records carry traffic reports */
#define TXN_BYTES (512u * 1024)

/* Puts obj at key in ops; its text's length. */
static size_t put_json(cJSON *ops, struct persist *p, const char *key, cJSON *obj)
{
	(void)p;
	char *text = cJSON_PrintUnformatted(obj);
	size_t len = strlen(text);
	persist_etcd_txn_put(ops, key, text, len);
	free(text);
	cJSON_Delete(obj);
	return len;
}

static int run_txn(struct persist *p, cJSON *body, char *err, size_t errlen)
{
	cJSON *resp = NULL;
	int rc = etcd_call(persist_etcd_client(p), "/v3/kv/txn", body, &resp, err, errlen);
	cJSON_Delete(resp);
	return rc == ETCD_UNAVAILABLE ? PERSIST_UNAVAILABLE : rc;
}

/* ---- rollouts ---------------------------------------------------------------- */

void etcd_rollout_ops(struct persist *p, cJSON *ops, const struct ro_run *run, uint64_t released)
{
	cJSON *o = record_run_to_json(run);
	char *k = persist_etcd_key(p, "rollout/%020llu", (unsigned long long)run->id);
	put_json(ops, p, k, o);
	free(k);
	k = persist_etcd_key(p, "released");
	char r[24];
	snprintf(r, sizeof(r), "%llu", (unsigned long long)released);
	persist_etcd_txn_put(ops, k, r, strlen(r));
	free(k);
}

/* A txn the rollout controller writes: fenced by the controller key when
 * an election runs, so a deposed controller records nothing. */
static int fenced_txn(struct persist *p, cJSON *body, char *err, size_t errlen)
{
	int rc = persist_etcd_fence(p, cJSON_AddArrayToObject(body, "compare"), err, errlen);
	if (rc < 0) {
		cJSON_Delete(body);
		return rc;
	}
	cJSON *resp = NULL;
	rc = etcd_call(persist_etcd_client(p), "/v3/kv/txn", body, &resp, err, errlen);
	bool lost = rc == 0 && !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resp, "succeeded"));
	cJSON_Delete(resp);
	if (lost) {
		persist_etcd_fenced_out(p);
		snprintf(err, errlen, "this replica is not the rollout controller any more");
		return PERSIST_FENCED;
	}
	return rc == ETCD_UNAVAILABLE ? PERSIST_UNAVAILABLE : rc;
}

int etcd_rollout_save(struct persist *p, const struct ro_run *run, uint64_t released, char *err, size_t errlen)
{
	cJSON *body = cJSON_CreateObject();
	etcd_rollout_ops(p, cJSON_AddArrayToObject(body, "success"), run, released);
	return fenced_txn(p, body, err, errlen);
}

struct runs_ctx {
	cJSON **objs;
	size_t n, cap;
	bool bad;
};

static int collect_json(void *ctx, const struct etcd_kv *kv)
{
	struct runs_ctx *rc = ctx;
	cJSON *o = cJSON_ParseWithLength(kv->value, kv->value_len);
	if (!cJSON_IsObject(o)) {
		cJSON_Delete(o);
		rc->bad = true;
		return -1;
	}
	if (rc->n == rc->cap) {
		rc->cap = rc->cap ? rc->cap * 2 : 16;
		rc->objs = xrealloc(rc->objs, rc->cap * sizeof(*rc->objs));
	}
	rc->objs[rc->n++] = o;
	return 0;
}

static void objs_free(struct runs_ctx *rc)
{
	for (size_t i = 0; i < rc->n; i++)
		cJSON_Delete(rc->objs[i]);
	free(rc->objs);
}

int etcd_rollout_load(struct persist *p, size_t max, bool with_members, struct ro_run **runs, size_t *n, char *err,
		      size_t errlen)
{
	struct runs_ctx rc = { 0 };
	char *prefix = persist_etcd_key(p, "rollout/");
	int r = etcd_range_prefix(persist_etcd_client(p), prefix, false, 0, collect_json, &rc, NULL, err, errlen);
	free(prefix);
	*runs = NULL;
	*n = 0;
	if (r < 0) {
		objs_free(&rc);
		return r == ETCD_UNAVAILABLE ? PERSIST_UNAVAILABLE : -1;
	}
	/* keys sort by id ascending: the newest are last */
	size_t take = rc.n < max ? rc.n : max;
	struct ro_run *out = xcalloc(take ? take : 1, sizeof(*out));
	for (size_t i = 0; i < take; i++) {
		const cJSON *o = rc.objs[rc.n - 1 - i];
		if (record_run_from_json(o, with_members && i == 0, &out[i]) < 0) {
			snprintf(err, errlen, "etcd: rollout %llu has a bad state or stage",
				 (unsigned long long)record_u64(o, "id"));
			for (size_t j = 0; j < i; j++)
				ro_run_release(&out[j]);
			free(out);
			objs_free(&rc);
			return -1;
		}
	}
	objs_free(&rc);
	*runs = out;
	*n = take;
	return 0;
}

int etcd_released(struct persist *p, uint64_t *v)
{
	char *k = persist_etcd_key(p, "released"), *val = NULL, e[256];
	size_t len = 0;
	int rc = persist_etcd_get(p, k, &val, &len, e, sizeof(e));
	free(k);
	if (rc <= 0)
		return rc < 0 ? -1 : 0;
	int out = parse_u64(val, v) == 0 ? 1 : -1;
	free(val);
	return out;
}

int etcd_set_released(struct persist *p, uint64_t v, char *err, size_t errlen)
{
	char *k = persist_etcd_key(p, "released"), r[24];
	snprintf(r, sizeof(r), "%llu", (unsigned long long)v);
	cJSON *body = cJSON_CreateObject();
	persist_etcd_txn_put(cJSON_AddArrayToObject(body, "success"), k, r, strlen(r));
	free(k);
	return fenced_txn(p, body, err, errlen);
}

/* ---- nodes ------------------------------------------------------------------- */

int etcd_nodes_load(struct persist *p, persist_node_cb cb, void *ctx, char *err, size_t errlen)
{
	struct runs_ctx rc = { 0 };
	char *prefix = persist_etcd_key(p, "nodes/");
	int r = etcd_range_prefix(persist_etcd_client(p), prefix, false, 0, collect_json, &rc, NULL, err, errlen);
	free(prefix);
	for (size_t i = 0; r == 0 && i < rc.n; i++) {
		struct persist_node n;
		if (record_node_from_json(rc.objs[i], &n) < 0)
			continue;
		if (cb(ctx, &n) < 0) {
			snprintf(err, errlen, "etcd: node record '%s' could not be loaded", n.id);
			r = -1;
		}
	}
	objs_free(&rc);
	return r == ETCD_UNAVAILABLE ? PERSIST_UNAVAILABLE : r;
}

int etcd_nodes_save(struct persist *p, const struct persist_node *recs, size_t cnt, char *err, size_t errlen)
{
	for (size_t i = 0; i < cnt;) {
		cJSON *body = cJSON_CreateObject(), *ops = cJSON_AddArrayToObject(body, "success");
		size_t bytes = 0;
		for (size_t k = 0; k < TXN_OPS && i < cnt && bytes < TXN_BYTES; k++, i++) {
			const struct persist_node *r = &recs[i];
			cJSON *o = record_node_to_json(r);
			char *key = persist_etcd_key(p, "nodes/%s", r->id);
			bytes += put_json(ops, p, key, o);
			free(key);
		}
		int rc = run_txn(p, body, err, errlen);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* ---- tokens ------------------------------------------------------------------ */

int etcd_tokens_load(struct persist *p, persist_token_cb cb, void *ctx, char *err, size_t errlen)
{
	struct runs_ctx rc = { 0 };
	char *prefix = persist_etcd_key(p, "tokens/");
	int r = etcd_range_prefix(persist_etcd_client(p), prefix, false, 0, collect_json, &rc, NULL, err, errlen);
	free(prefix);
	for (size_t i = 0; r == 0 && i < rc.n; i++) {
		struct persist_token t;
		if (record_token_from_json(rc.objs[i], &t) < 0)
			continue;
		if (cb(ctx, &t) < 0) {
			snprintf(err, errlen, "etcd: token record '%s' could not be loaded", t.id);
			r = -1;
		}
	}
	objs_free(&rc);
	return r == ETCD_UNAVAILABLE ? PERSIST_UNAVAILABLE : r;
}

static int token_write(struct persist *p, const struct persist_token *t, char *err, size_t errlen)
{
	cJSON *o = record_token_to_json(t);
	char *text = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	char *k = persist_etcd_key(p, "tokens/%s", t->id);
	int rc = persist_etcd_put(p, k, text, strlen(text), err, errlen);
	free(k);
	free(text);
	return rc == ETCD_UNAVAILABLE ? PERSIST_UNAVAILABLE : rc;
}

int etcd_token_add(struct persist *p, const struct persist_token *t, char *err, size_t errlen)
{
	return token_write(p, t, err, errlen);
}

int etcd_token_revoke(struct persist *p, const char *id, int64_t when, char *err, size_t errlen)
{
	char *k = persist_etcd_key(p, "tokens/%s", id), *v = NULL;
	size_t len = 0;
	int rc = persist_etcd_get(p, k, &v, &len, err, errlen);
	free(k);
	if (rc <= 0) {
		if (rc == 0)
			snprintf(err, errlen, "etcd: no token record '%s'", id);
		return rc == 0 ? -1 : (rc == ETCD_UNAVAILABLE ? PERSIST_UNAVAILABLE : rc);
	}
	cJSON *o = cJSON_ParseWithLength(v, len);
	free(v);
	if (!cJSON_IsObject(o)) {
		cJSON_Delete(o);
		snprintf(err, errlen, "etcd: token record '%s' is malformed", id);
		return -1;
	}
	struct persist_token t = {
		.id = record_str(o, "id"), .hash = record_str(o, "hash"), .role = record_str(o, "role"),
		.node = record_str(o, "node"),
		.name = record_str(o, "name"), .created = (int64_t)record_u64(o, "created"), .revoked = when,
		.expires = (int64_t)record_u64(o, "expires"),
	};
	rc = token_write(p, &t, err, errlen);
	cJSON_Delete(o);
	return rc;
}

int etcd_token_delete(struct persist *p, const char *id, char *err, size_t errlen)
{
	char *k = persist_etcd_key(p, "tokens/%s", id);
	char *k64 = etcd_b64(k, strlen(k));
	cJSON *b = cJSON_CreateObject(), *resp = NULL;
	cJSON_AddStringToObject(b, "key", k64);
	int rc = etcd_call(persist_etcd_client(p), "/v3/kv/deleterange", b, &resp, err, errlen);
	cJSON_Delete(resp);
	free(k);
	free(k64);
	return rc == ETCD_UNAVAILABLE ? PERSIST_UNAVAILABLE : rc;
}
