/* persist/etcd/hist.c: trimming the etcd backend's history keys
 * (hist/VERSION/NAME, the older states a staged rollout's baseline needs).
 * Commits add them while the store is pinned; once the floor moves up,
 * each name needs only its newest state at or below the floor, and every
 * older one is deleted, a few transactions of up to TXN_OPS deletes. */
#include "persist/etcd/etcd.h"
#include "xmalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TXN_OPS 100
#define VERSION_DIGITS 20   /* hist/%020llu/NAME */

struct hist_key {
	char *name;
	uint64_t version;
	char *key;                  /* the whole key */
};

struct hist_ctx {
	size_t plen;                /* of the hist/ prefix */
	struct hist_key *k;
	size_t n, cap;
};

static int collect(void *ctx, const struct etcd_kv *kv)
{
	struct hist_ctx *h = ctx;
	const char *t = kv->key + h->plen;
	if (kv->key_len < h->plen + VERSION_DIGITS + 2 || t[VERSION_DIGITS] != '/')
		return 0;   /* not ours: left alone */
	uint64_t v = 0;
	for (size_t i = 0; i < VERSION_DIGITS; i++) {
		if (t[i] < '0' || t[i] > '9' || v > (UINT64_MAX - 9) / 10)
			return 0;
		v = v * 10 + (uint64_t)(t[i] - '0');
	}
	if (h->n == h->cap) {
		h->cap = h->cap ? h->cap * 2 : 64;
		h->k = xrealloc(h->k, h->cap * sizeof(*h->k));
	}
	h->k[h->n++] = (struct hist_key){ xstrdup(t + VERSION_DIGITS + 1), v, xstrndup(kv->key, kv->key_len) };
	return 0;
}

/* by name, newest first */
static int by_name_newest(const void *a, const void *b)
{
	const struct hist_key *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	if (c)
		return c;
	return x->version > y->version ? -1 : x->version < y->version;
}

static int delete_keys(struct persist *p, char **keys, size_t n, char *err, size_t errlen)
{
	for (size_t i = 0; i < n;) {
		cJSON *body = cJSON_CreateObject(), *ops = cJSON_AddArrayToObject(body, "success"), *resp = NULL;
		for (size_t k = 0; k < TXN_OPS && i < n; k++, i++)
			persist_etcd_txn_delete(ops, keys[i], NULL);
		int rc = etcd_call(persist_etcd_client(p), "/v3/kv/txn", body, &resp, err, errlen);
		cJSON_Delete(resp);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int etcd_history_trim(struct persist *p, uint64_t floor, char *err, size_t errlen)
{
	char *prefix = persist_etcd_key(p, "hist/");
	struct hist_ctx h = { .plen = strlen(prefix) };
	int rc = etcd_range_prefix(persist_etcd_client(p), prefix, true, 0, collect, &h, NULL, err, errlen);
	free(prefix);
	char **gone = xcalloc(h.n ? h.n : 1, sizeof(char *));
	size_t ngone = 0;
	if (rc == 0 && h.n) {
		qsort(h.k, h.n, sizeof(*h.k), by_name_newest);
		bool kept_one = false;   /* the name's newest state <= floor is kept */
		for (size_t i = 0; i < h.n; i++) {
			if (i == 0 || strcmp(h.k[i].name, h.k[i - 1].name) != 0)
				kept_one = false;
			if (h.k[i].version > floor)
				continue;
			if (kept_one)
				gone[ngone++] = h.k[i].key;
			kept_one = true;
		}
		rc = delete_keys(p, gone, ngone, err, errlen);
	}
	for (size_t i = 0; i < h.n; i++) {
		free(h.k[i].name);
		free(h.k[i].key);
	}
	free(h.k);
	free(gone);
	return rc;
}
