/* persist/etcd/etcd.c: the etcd backend (--store etcd): struct persist_ops over
 * etcd's JSON gateway (persist/etcd/etcd.h lists the keys). A commit is one
 * etcd transaction that compares the version key's value with the version
 * the write was validated against, so two replicas writing at once both
 * land, one after the other, or one is told to retry: nothing is lost and
 * no version is made twice. A watch (persist/etcd/watch.c) follows what the other replicas commit
 * and hands it to the plane revision by revision; after a compaction it
 * reloads cheaply: the keys with their mod_revision, then only the bodies
 * that changed, and the names that went away. */
#include "persist/etcd/etcd.h"
#include "log.h"
#include "persist/etcd/value.h"
#include "persist/records_json.h"
#include "persist/rollout_rec.h"
#include "strmap.h"
#include "util.h"
#include "xmalloc.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A resource key's mod_revision, for the compaction reload. */
struct modrev {
	char *name;
	uint64_t rev;
	size_t slot;                 /* index in all */
};

/* commits keep their txn/VERSION marks for this many versions: a commit
 * sent again finds its own well within that */
#define TXN_MARKS_KEPT 1000

struct persist_etcd {
	struct persist base;
	struct etcd *e;
	char *prefix;
	pthread_mutex_t lock;        /* the fields below */
	uint64_t loaded_rev;         /* the revision load read */
	uint64_t version, horizon;   /* the newest the follower handed over */
	struct strmap by_name;       /* name -> struct modrev * */
	struct modrev **all;
	size_t nall, capall;
	struct etcd_watch *w;
	struct etcd_lease *lease;    /* set by follow, before the watch */
	char *replica;               /* this replica's name among the replicas */
	double lease_ttl;
	_Atomic uint64_t commit_seq; /* this replica's commits, for their marks */
	struct persist_follow follow;
	struct etcd_vlog_cache *vlog;   /* its own lock */
	_Atomic bool writable;
	_Atomic uint64_t revisions, reloads, listed, fetched, deleted, conflicts;
};

static struct persist_etcd *pe(struct persist *p)
{
	return (struct persist_etcd *)p;
}

struct etcd *persist_etcd_client(struct persist *p)
{
	return pe(p)->e;
}

struct etcd_vlog_cache *persist_etcd_vlog_cache(struct persist *p)
{
	return pe(p)->vlog;
}

struct etcd_lease *persist_etcd_lease(struct persist *p)
{
	return pe(p)->lease;
}

const char *persist_etcd_prefix(struct persist *p)
{
	return pe(p)->prefix;
}

char *persist_etcd_key(struct persist *p, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *tail = NULL;
	if (vasprintf(&tail, fmt, ap) < 0)
		fatal("out of memory");
	va_end(ap);
	char *k = xasprintf("%s%s", pe(p)->prefix, tail);
	free(tail);
	return k;
}

/* ---- the modrev map (hold lock) ------------------------------------------- */

static void modrev_set(struct persist_etcd *x, const char *name, uint64_t rev)
{
	intptr_t v;
	if (strmap_get(&x->by_name, name, &v)) {
		((struct modrev *)v)->rev = rev;
		return;
	}
	struct modrev *m = xcalloc(1, sizeof(*m));
	m->name = xstrdup(name);
	m->rev = rev;
	if (x->nall == x->capall) {
		x->capall = x->capall ? x->capall * 2 : 256;
		x->all = xrealloc(x->all, x->capall * sizeof(*x->all));
	}
	m->slot = x->nall;
	x->all[x->nall++] = m;
	strmap_put(&x->by_name, m->name, (intptr_t)m);
}

static void modrev_del(struct persist_etcd *x, const char *name)
{
	intptr_t v;
	if (!strmap_get(&x->by_name, name, &v))
		return;
	struct modrev *m = (struct modrev *)v;
	strmap_del(&x->by_name, name);
	x->all[m->slot] = x->all[--x->nall];
	x->all[m->slot]->slot = m->slot;
	free(m->name);
	free(m);
}

/* ---- small requests ------------------------------------------------------------- */

void persist_etcd_txn_put(cJSON *ops, const char *key, const char *value, size_t len)
{
	cJSON *op = cJSON_CreateObject(), *put = cJSON_CreateObject();
	char *k = etcd_b64(key, strlen(key)), *v = etcd_b64(value, len);
	cJSON_AddStringToObject(put, "key", k);
	cJSON_AddStringToObject(put, "value", v);
	free(k);
	free(v);
	cJSON_AddItemToObject(op, "request_put", put);
	cJSON_AddItemToArray(ops, op);
}

void persist_etcd_txn_delete(cJSON *ops, const char *key, const char *range_end_b64)
{
	cJSON *op = cJSON_CreateObject(), *del = cJSON_CreateObject();
	char *k = etcd_b64(key, strlen(key));
	cJSON_AddStringToObject(del, "key", k);
	free(k);
	if (range_end_b64)
		cJSON_AddStringToObject(del, "range_end", range_end_b64);
	cJSON_AddItemToObject(op, "request_delete_range", del);
	cJSON_AddItemToArray(ops, op);
}

int persist_etcd_put(struct persist *p, const char *key, const char *value, size_t len, char *err, size_t errlen)
{
	cJSON *b = cJSON_CreateObject(), *resp = NULL;
	char *k = etcd_b64(key, strlen(key)), *v = etcd_b64(value, len);
	cJSON_AddStringToObject(b, "key", k);
	cJSON_AddStringToObject(b, "value", v);
	free(k);
	free(v);
	int rc = etcd_call(pe(p)->e, "/v3/kv/put", b, &resp, err, errlen);
	cJSON_Delete(resp);
	return rc;
}

/* One key at revision rev (0: newest): 1 found, 0 absent. */
static int get_at(struct persist *p, const char *key, uint64_t rev, char **value, size_t *len, uint64_t *modrev,
		  char *err, size_t errlen)
{
	cJSON *b = cJSON_CreateObject(), *resp = NULL;
	char *k = etcd_b64(key, strlen(key));
	cJSON_AddStringToObject(b, "key", k);
	free(k);
	if (rev) {
		char r[24];
		snprintf(r, sizeof(r), "%llu", (unsigned long long)rev);
		cJSON_AddStringToObject(b, "revision", r);
	}
	int rc = etcd_call(pe(p)->e, "/v3/kv/range", b, &resp, err, errlen);
	if (rc < 0)
		return rc;
	const cJSON *kv = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(resp, "kvs"), 0);
	struct etcd_kv d;
	rc = 0;
	if (kv) {
		if (etcd_kv_decode(kv, false, &d) < 0) {
			snprintf(err, errlen, "etcd: a malformed answer for '%s'", key);
			rc = -1;
		} else {
			*value = d.value;
			*len = d.value_len;
			if (modrev)
				*modrev = d.mod_revision;
			d.value = NULL;
			etcd_kv_release(&d);
			rc = 1;
		}
	}
	cJSON_Delete(resp);
	return rc;
}

int persist_etcd_get(struct persist *p, const char *key, char **value, size_t *len, char *err, size_t errlen)
{
	/* a linearizable read fails at once while etcd elects a leader (a
	 * write waits for the new one): asked again for up to ~3 s, so a
	 * read rides out an election as a commit does */
	for (int i = 0;; i++) {
		int rc = get_at(p, key, 0, value, len, NULL, err, errlen);
		if (rc != ETCD_UNAVAILABLE || i >= 30 || !strstr(err, "leader changed"))
			return rc;
		struct timespec ts = { 0, 100 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
}

/* A decimal key at rev: its value (0 when absent) and mod_revision. */
static int get_dec(struct persist *p, const char *tail, uint64_t rev, uint64_t *out, uint64_t *modrev, char *err,
		   size_t errlen)
{
	char *key = persist_etcd_key(p, "%s", tail), *v = NULL;
	size_t len = 0;
	*out = 0;
	if (modrev)
		*modrev = 0;
	int rc = get_at(p, key, rev, &v, &len, modrev, err, errlen);
	if (rc == 1 && !etcd_value_dec(v, len, out)) {
		snprintf(err, errlen, "etcd: '%s' is not a number", key);
		rc = -1;
	}
	free(key);
	free(v);
	return rc < 0 ? rc : 0;
}

/* ---- loading --------------------------------------------------------------------- */

struct loaded {
	char *name, *value;
	size_t len;
	uint64_t version, modrev;
};

struct load_ctx {
	struct persist_etcd *x;
	struct loaded *rows;
	size_t n, cap;
	size_t plen;                 /* strlen of prefix + "res/" */
};

static int collect_row(void *ctx, const struct etcd_kv *kv)
{
	struct load_ctx *lc = ctx;
	if (kv->key_len <= lc->plen || memchr(kv->key, '\0', kv->key_len))
		return 0;
	if (lc->n == lc->cap) {
		lc->cap = lc->cap ? lc->cap * 2 : 256;
		lc->rows = xrealloc(lc->rows, lc->cap * sizeof(*lc->rows));
	}
	struct loaded *r = &lc->rows[lc->n++];
	r->name = xstrdup(kv->key + lc->plen);
	r->value = NULL;
	if (kv->value) {
		r->value = xmalloc(kv->value_len + 1);
		memcpy(r->value, kv->value, kv->value_len);
		r->value[kv->value_len] = '\0';
	}
	r->len = kv->value_len;
	r->modrev = kv->mod_revision;
	r->version = 0;
	return 0;
}

static int by_version(const void *a, const void *b)
{
	const struct loaded *x = a, *y = b;
	return x->version < y->version ? -1 : x->version > y->version;
}

static void rows_free(struct load_ctx *lc)
{
	for (size_t i = 0; i < lc->n; i++) {
		free(lc->rows[i].name);
		free(lc->rows[i].value);
	}
	free(lc->rows);
}

static int et_load(struct persist *p, persist_resource_cb cb, void *ctx, uint64_t *version, uint64_t *horizon,
		   char *err, size_t errlen)
{
	struct persist_etcd *x = pe(p);
	char *prefix = persist_etcd_key(p, "res/");
	struct load_ctx lc = { .x = x, .plen = strlen(prefix) };
	uint64_t rev = 0;
	int rc = etcd_range_prefix(x->e, prefix, false, 0, collect_row, &lc, &rev, err, errlen);
	free(prefix);
	if (rc == 0)
		rc = get_dec(p, "version", rev, version, NULL, err, errlen);
	if (rc == 0)
		rc = get_dec(p, "horizon", rev, horizon, NULL, err, errlen);
	for (size_t i = 0; rc == 0 && i < lc.n; i++) {
		const char *body;
		size_t blen;
		int64_t del;
		if (etcd_value_parse(lc.rows[i].value, lc.rows[i].len, &lc.rows[i].version, &del, &body, &blen) < 0 ||
		    lc.rows[i].version > *version) {
			snprintf(err, errlen, "etcd: the value of '%s' is malformed or past the store's version",
				 lc.rows[i].name);
			rc = -1;
		}
	}
	if (rc == 0) {
		if (lc.n)   /* qsort(NULL, 0) is undefined */
			qsort(lc.rows, lc.n, sizeof(*lc.rows), by_version);
		pthread_mutex_lock(&x->lock);
		for (size_t i = 0; rc == 0 && i < lc.n; i++) {
			const char *body;
			size_t blen;
			int64_t del;
			uint64_t v;
			etcd_value_parse(lc.rows[i].value, lc.rows[i].len, &v, &del, &body, &blen);
			modrev_set(x, lc.rows[i].name, lc.rows[i].modrev);
			if (cb(ctx, lc.rows[i].name, body, blen, v, del) < 0) {
				snprintf(err, errlen, "etcd: cannot load '%s'", lc.rows[i].name);
				rc = -1;
			}
		}
		x->loaded_rev = rev;
		x->version = *version;
		x->horizon = *horizon;
		pthread_mutex_unlock(&x->lock);
		log_info("etcd: loaded %zu resources and tombstones at revision %llu (version %llu)", lc.n,
			 (unsigned long long)rev, (unsigned long long)*version);
	}
	rows_free(&lc);
	if (rc == 0 && etcd_vlog_start(p, *version, err, errlen) < 0)
		rc = -1;
	return rc;
}

static int et_load_history(struct persist *p, persist_history_cb cb, void *ctx, bool *keep, uint64_t *pin, char *err,
			   size_t errlen)
{
	struct persist_etcd *x = pe(p);
	char *pk = persist_etcd_key(p, "pin"), *pv = NULL;
	size_t plen = 0;
	int rc = persist_etcd_get(p, pk, &pv, &plen, err, errlen);
	free(pk);
	*keep = false;
	*pin = 0;
	if (rc < 0)
		return rc;
	if (rc == 1) {
		unsigned k = 0;
		unsigned long long f = 0;
		if (sscanf(pv, "%u %llu", &k, &f) != 2) {
			free(pv);
			snprintf(err, errlen, "etcd: the pin is malformed");
			return -1;
		}
		*keep = k != 0;
		*pin = f;
	}
	free(pv);
	char *prefix = persist_etcd_key(p, "hist/");
	struct load_ctx lc = { .x = x, .plen = strlen(prefix) };
	rc = etcd_range_prefix(x->e, prefix, false, 0, collect_row, &lc, NULL, err, errlen);
	free(prefix);
	/* hist/VERSION/NAME: the version is the state's own */
	for (size_t i = 0; rc == 0 && i < lc.n; i++) {
		const char *slash = strchr(lc.rows[i].name, '/'), *body;
		size_t blen;
		int64_t del;
		uint64_t v;
		if (!slash || etcd_value_parse(lc.rows[i].value, lc.rows[i].len, &v, &del, &body, &blen) < 0 ||
		    cb(ctx, slash + 1, v, body, blen) < 0) {
			snprintf(err, errlen, "etcd: a malformed history entry '%s'", lc.rows[i].name);
			rc = -1;
		}
	}
	rows_free(&lc);
	return rc;
}

/* ---- commits ----------------------------------------------------------------------- */

struct etcd_txn {
	struct persist_txn base;
	cJSON *ops, *cmp;
	bool fenced;                 /* the controller key is compared */
};

static int et_txn_rollout(struct persist_txn *tx, const struct ro_run *run, uint64_t released, char *err,
			  size_t errlen)
{
	struct etcd_txn *t = (struct etcd_txn *)tx;
	if (!t->fenced && persist_etcd_fence(tx->p, t->cmp, err, errlen) < 0)
		return PERSIST_FENCED;
	t->fenced = true;
	etcd_rollout_ops(tx->p, t->ops, run, released);
	return 0;
}

int persist_etcd_fence(struct persist *p, cJSON *cmp, char *err, size_t errlen)
{
	struct persist_etcd *x = pe(p);
	if (!x->lease || etcd_lease_fence(x->lease, cmp))
		return 0;
	snprintf(err, errlen, "this replica is not the rollout controller");
	return PERSIST_FENCED;
}

void persist_etcd_fenced_out(struct persist *p)
{
	struct persist_etcd *x = pe(p);
	if (x->lease)
		etcd_lease_deposed(x->lease);
}

/* A failed commit's second range, of its txn/VERSION mark: the revision
 * our own attempt landed at when the mark is token, else 0. */
static uint64_t mark_is(const cJSON *resp, const char *token)
{
	const cJSON *rs = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(resp, "responses"), 1);
	const cJSON *kvs = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(rs, "response_range"),
							     "kvs");
	struct etcd_kv kv;
	if (cJSON_GetArraySize(kvs) < 1 || etcd_kv_decode(cJSON_GetArrayItem(kvs, 0), false, &kv) < 0)
		return 0;
	bool ours = kv.value && kv.value_len == strlen(token) && memcmp(kv.value, token, kv.value_len) == 0;
	uint64_t rev = ours ? kv.mod_revision : 0;
	etcd_kv_release(&kv);
	return rev;
}

/* Whether a failed txn's range of the version key (its first failure
 * op) read expect. */
static bool version_is(const cJSON *resp, uint64_t expect)
{
	const cJSON *rs = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(resp, "responses"), 0);
	const cJSON *kvs = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(rs, "response_range"),
							     "kvs");
	struct etcd_kv kv;
	if (cJSON_GetArraySize(kvs) < 1 || etcd_kv_decode(cJSON_GetArrayItem(kvs, 0), false, &kv) < 0)
		return expect == 0;
	uint64_t v = 0;
	bool same = kv.value && etcd_value_dec(kv.value, kv.value_len, &v) && v == expect;
	etcd_kv_release(&kv);
	return same;
}

/* commit_once's answer when only the version log's floor moved under it
 * (another replica's age trim): computed again at once */
#define FLOOR_MOVED (-100)

static int commit_once(struct persist *p, const struct persist_commit *c, char *err, size_t errlen)
{
	struct persist_etcd *x = pe(p);
	/* the version log's trim: may read etcd, so before the txn */
	struct etcd_vlog_plan plan = { 0 };
	if (c->nchanges) {
		int pr = etcd_vlog_plan(p, c, &plan, err, errlen);
		if (pr < 0) {
			if (pr == ETCD_UNAVAILABLE)
				atomic_store(&x->writable, false);
			return pr == ETCD_UNAVAILABLE ? PERSIST_UNAVAILABLE : -1;
		}
	}
	cJSON *body = cJSON_CreateObject(), *cmp = cJSON_AddArrayToObject(body, "compare");
	cJSON *ops = cJSON_AddArrayToObject(body, "success"), *fail = cJSON_AddArrayToObject(body, "failure");
	char *vkey = persist_etcd_key(p, "version"), *vk64 = etcd_b64(vkey, strlen(vkey)), num[32];
	/* the version this commit was validated against is still the newest
	 * in etcd: compared on the version key's value, which moves only with
	 * the store's own version (a mod_revision the follower learnt before
	 * the store applied it would let a stale writer through) */
	uint64_t expect = c->nchanges ? c->version - 1 : c->version;
	cJSON *cc = cJSON_CreateObject();
	cJSON_AddStringToObject(cc, "key", vk64);
	cJSON_AddStringToObject(cc, "result", "EQUAL");
	if (expect == 0) {
		cJSON_AddStringToObject(cc, "target", "CREATE");
		cJSON_AddStringToObject(cc, "create_revision", "0");   /* no version yet */
	} else {
		snprintf(num, sizeof(num), "%llu", (unsigned long long)expect);
		char *v64 = etcd_b64(num, strlen(num));
		cJSON_AddStringToObject(cc, "target", "VALUE");
		cJSON_AddStringToObject(cc, "value", v64);
		free(v64);
	}
	cJSON_AddItemToArray(cmp, cc);
	cJSON *fr = cJSON_CreateObject(), *frr = cJSON_CreateObject();
	cJSON_AddStringToObject(frr, "key", vk64);
	cJSON_AddItemToObject(fr, "request_range", frr);
	cJSON_AddItemToArray(fail, fr);
	free(vk64);

	snprintf(num, sizeof(num), "%llu", (unsigned long long)c->version);
	persist_etcd_txn_put(ops, vkey, num, strlen(num));
	free(vkey);
	for (size_t i = 0; i < c->nchanges; i++) {
		size_t len;
		char *v = etcd_value_format(c->changes[i].body, c->changes[i].body_len, c->version, c->now, &len);
		char *k = persist_etcd_key(p, "res/%s", c->changes[i].name);
		persist_etcd_txn_put(ops, k, v, len);
		free(k);
		free(v);
	}
	for (size_t i = 0; i < c->npruned; i++) {
		char *k = persist_etcd_key(p, "res/%s", c->pruned[i]);
		persist_etcd_txn_delete(ops, k, NULL);
		free(k);
	}
	if (c->npruned) {
		char *k = persist_etcd_key(p, "horizon");
		snprintf(num, sizeof(num), "%llu", (unsigned long long)c->horizon);
		persist_etcd_txn_put(ops, k, num, strlen(num));
		free(k);
	}
	for (size_t i = 0; i < c->nkept; i++) {
		const struct persist_state *e = &c->kept[i];
		size_t len;
		char *v = etcd_value_format(e->body, e->body_len, e->version, e->deleted_at, &len);
		char *k = persist_etcd_key(p, "hist/%020llu/%s", (unsigned long long)e->version, e->name);
		persist_etcd_txn_put(ops, k, v, len);
		free(k);
		free(v);
	}
	/* this attempt's mark: a txn whose answer was lost is sent again (to
	 * the next endpoint); the second fails its compare on our own
	 * version, and the mark says the first landed, so the write is not
	 * made twice (bench/nemesis.sh found it undoing writes in between) */
	char *token = NULL;
	if (c->nchanges) {
		token = xasprintf("%s/%llu", x->replica, (unsigned long long)atomic_fetch_add(&x->commit_seq, 1) + 1);
		char *tk = persist_etcd_key(p, "txn/%020llu", (unsigned long long)c->version);
		persist_etcd_txn_put(ops, tk, token, strlen(token));
		char *tk64 = etcd_b64(tk, strlen(tk));
		cJSON *tr = cJSON_CreateObject(), *trr = cJSON_CreateObject();
		cJSON_AddStringToObject(trr, "key", tk64);
		cJSON_AddItemToObject(tr, "request_range", trr);
		cJSON_AddItemToArray(fail, tr);
		free(tk64);
		free(tk);
		if (c->version > TXN_MARKS_KEPT) {
			tk = persist_etcd_key(p, "txn/%020llu", (unsigned long long)(c->version - TXN_MARKS_KEPT));
			persist_etcd_txn_delete(ops, tk, NULL);
			free(tk);
		}
		/* the version log's record and trim (persist/etcd/vlog.c); a
		 * range of vlog_floor is the third failure op */
		etcd_vlog_ops(p, cmp, ops, fail, c, &plan);
	}
	struct etcd_txn tx = { { p }, ops, cmp, false };
	if (c->hook) {
		int hr = c->hook(c->hook_ctx, &tx.base, c->version, err, errlen);
		if (hr < 0) {
			cJSON_Delete(body);
			free(token);
			if (c->nchanges)
				etcd_vlog_landed(p, &plan, false);
			return hr == PERSIST_FENCED ? hr : -1;
		}
	}
	cJSON *resp = NULL;
	int rc = etcd_call(x->e, "/v3/kv/txn", body, &resp, err, errlen);
	if (rc < 0) {
		free(token);
		if (c->nchanges)
			etcd_vlog_landed(p, &plan, false);
		if (rc == ETCD_UNAVAILABLE)
			atomic_store(&x->writable, false);
		return rc == ETCD_UNAVAILABLE ? PERSIST_UNAVAILABLE : -1;
	}
	atomic_store(&x->writable, true);
	uint64_t rev = etcd_u64(cJSON_GetObjectItemCaseSensitive(resp, "header"), "revision");
	bool ok = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resp, "succeeded"));
	uint64_t landed = 0;
	if (!ok && token && (landed = mark_is(resp, token)) != 0) {
		log_info("etcd: version %llu landed at revision %llu though its answer was lost (sent again, the "
			 "compare saw it): stored once", (unsigned long long)c->version, (unsigned long long)landed);
		ok = true;
		rev = landed;
	}
	free(token);
	if (c->nchanges)
		etcd_vlog_landed(p, &plan, ok);
	if (!ok) {
		if (plan.floor && version_is(resp, expect) && !etcd_vlog_floor_is(resp, 2, plan.was)) {
			cJSON_Delete(resp);
			return FLOOR_MOVED;
		}
		if (tx.fenced && version_is(resp, expect)) {
			/* the version held: the controller key moved */
			cJSON_Delete(resp);
			persist_etcd_fenced_out(p);
			snprintf(err, errlen, "this replica is not the rollout controller any more");
			return PERSIST_FENCED;
		}
		cJSON_Delete(resp);
		atomic_fetch_add(&x->conflicts, 1);
		snprintf(err, errlen, "another replica wrote first (etcd revision %llu); retrying on the newer state",
			 (unsigned long long)rev);
		return PERSIST_CONFLICT;
	}
	cJSON_Delete(resp);
	pthread_mutex_lock(&x->lock);
	if (c->version > x->version)
		x->version = c->version;
	if (c->horizon > x->horizon)
		x->horizon = c->horizon;
	for (size_t i = 0; i < c->nchanges; i++)
		modrev_set(x, c->changes[i].name, rev);
	for (size_t i = 0; i < c->npruned; i++)
		modrev_del(x, c->pruned[i]);
	pthread_mutex_unlock(&x->lock);
	return 0;
}

static int et_commit(struct persist *p, const struct persist_commit *c, char *err, size_t errlen)
{
	for (int attempt = 0; attempt < 5; attempt++) {
		int rc = commit_once(p, c, err, errlen);
		if (rc != FLOOR_MOVED)
			return rc;
	}
	atomic_fetch_add(&pe(p)->conflicts, 1);
	snprintf(err, errlen, "the version log's floor kept moving under this commit; retrying");
	return PERSIST_CONFLICT;
}

static int et_trim_history(struct persist *p, bool keep, uint64_t floor, char *err, size_t errlen)
{
	/* the pin is written (with !keep, every history key goes in the same
	 * transaction); with keep, the states no version >= floor needs are
	 * deleted after it (persist/etcd/hist.c) */
	struct persist_etcd *x = pe(p);
	cJSON *body = cJSON_CreateObject(), *ops = cJSON_AddArrayToObject(body, "success"), *resp = NULL;
	char *from = persist_etcd_key(p, "hist/");
	if (!keep) {
		char *end = etcd_prefix_end_b64(from);
		persist_etcd_txn_delete(ops, from, end);
		free(end);
	}
	free(from);
	char *pk = persist_etcd_key(p, "pin"), pv[48];
	snprintf(pv, sizeof(pv), "%u %llu", keep ? 1u : 0u, (unsigned long long)floor);
	persist_etcd_txn_put(ops, pk, pv, strlen(pv));
	free(pk);
	int rc = etcd_call(x->e, "/v3/kv/txn", body, &resp, err, errlen);
	cJSON_Delete(resp);
	if (rc == 0 && keep) {
		/* the states no version >= floor needs: best effort (a trim
		 * left undone keeps more, never less) */
		char terr[300];
		if (etcd_history_trim(p, floor, terr, sizeof(terr)) < 0)
			log_warn("etcd: cannot drop old history keys: %s (next time)", terr);
	}
	return rc == ETCD_UNAVAILABLE ? PERSIST_UNAVAILABLE : rc;
}

/* ---- following ------------------------------------------------------------------------ */

static int by_remote_version(const void *a, const void *b)
{
	const struct persist_remote *x = a, *y = b;
	return x->version < y->version ? -1 : x->version > y->version;
}

/* Hands a set of changes to the plane; frees them. */
static int hand_over(struct persist_etcd *x, struct persist_remote *ch, size_t n, char **pruned, size_t np,
		     uint64_t version, uint64_t horizon)
{
	qsort(ch, n, sizeof(*ch), by_remote_version);
	int rc = x->follow.store ? x->follow.store(x->follow.ctx, ch, n, pruned, np, version, horizon) : 0;
	for (size_t i = 0; i < n; i++) {
		free(ch[i].name);
		free(ch[i].body);
	}
	for (size_t i = 0; i < np; i++)
		free(pruned[i]);
	free(ch);
	free(pruned);
	return rc;
}

/* A node or token record another replica (or we) wrote: merged, never
 * written back. */
static void record(struct persist_etcd *x, bool node, const char *value, size_t len)
{
	cJSON *o = cJSON_ParseWithLength(value, len);
	if (node) {
		struct persist_node pn;
		if (o && x->follow.node && record_node_from_json(o, &pn) == 0)
			x->follow.node(x->follow.ctx, &pn);
	} else {
		struct persist_token pt;
		if (o && x->follow.token && record_token_from_json(o, &pt) == 0)
			x->follow.token(x->follow.ctx, &pt);
	}
	cJSON_Delete(o);
}

/* Hands rollout records (taken) to the plane, the released version with
 * the last. */
static void deliver_rollouts(struct persist_etcd *x, struct ro_run *runs, size_t n, bool has_released,
			     uint64_t released)
{
	for (size_t i = 0; i < n; i++) {
		bool last = i + 1 == n;
		if (x->follow.rollout) {
			struct ro_run *run = xmalloc(sizeof(*run));
			*run = runs[i];
			x->follow.rollout(x->follow.ctx, run, last && has_released, released);
		} else {
			ro_run_release(&runs[i]);
		}
	}
	if (!n && has_released && x->follow.rollout)
		x->follow.rollout(x->follow.ctx, NULL, true, released);
	free(runs);
}

static int on_revision(void *ctx, uint64_t rev, const struct etcd_kv *kvs, size_t n)
{
	struct persist_etcd *x = ctx;
	size_t plen = strlen(x->prefix);
	struct persist_remote *ch = xcalloc(n ? n : 1, sizeof(*ch));
	char **pruned = xcalloc(n ? n : 1, sizeof(*pruned));
	size_t nch = 0, np = 0;
	uint64_t version = 0, horizon = 0, released = 0;
	bool got_version = false, got_horizon = false, has_released = false;
	struct ro_run *runs = NULL;
	size_t nruns = 0;
	atomic_fetch_add(&x->revisions, 1);
	for (size_t i = 0; i < n; i++) {
		const struct etcd_kv *kv = &kvs[i];
		if (kv->key_len < plen || memcmp(kv->key, x->prefix, plen) != 0)
			continue;
		const char *k = kv->key + plen;
		if (strcmp(k, "version") == 0 && kv->value) {
			got_version = etcd_value_dec(kv->value, kv->value_len, &version);
		} else if (strcmp(k, "horizon") == 0 && kv->value) {
			got_horizon = etcd_value_dec(kv->value, kv->value_len, &horizon);
		} else if ((strncmp(k, "nodes/", 6) == 0 || strncmp(k, "tokens/", 7) == 0) && kv->value) {
			record(x, k[0] == 'n', kv->value, kv->value_len);
		} else if (strncmp(k, "replicas/", 9) == 0 && k[9]) {
			if (x->lease)
				etcd_lease_replica_event(x->lease, k + 9, kv->value != NULL);
		} else if (strncmp(k, "rollout/", 8) == 0 && kv->value) {
			cJSON *o = cJSON_ParseWithLength(kv->value, kv->value_len);
			runs = xrealloc(runs, (nruns + 1) * sizeof(*runs));
			if (o && record_run_from_json(o, true, &runs[nruns]) == 0)
				nruns++;
			else
				log_error("etcd: rollout record '%s' at revision %llu is malformed; ignored", kv->key,
					  (unsigned long long)rev);
			cJSON_Delete(o);
		} else if (strcmp(k, "vlog_floor") == 0 && kv->value) {
			/* before the version goes to the store: a commit validated
			 * on it is computed on this floor */
			etcd_vlog_seen_floor(&x->base, kv->value, kv->value_len);
		} else if (strncmp(k, "vlog/", 5) == 0 && kv->value && x->follow.overridden &&
			   memmem(kv->value, kv->value_len, ",\"override\":{", 13)) {
			/* another replica's override of a guard: known before its
			 * version is, so its statements say so */
			uint64_t v;
			cJSON *o = cJSON_ParseWithLength(kv->value, kv->value_len);
			if (o && cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(o, "override")) &&
			    parse_u64(k + 5, &v) == 0)
				x->follow.overridden(x->follow.ctx, v);
			cJSON_Delete(o);
		} else if (strcmp(k, "released") == 0 && kv->value) {
			has_released = etcd_value_dec(kv->value, kv->value_len, &released);
		} else if (strncmp(k, "res/", 4) == 0 && k[4]) {
			if (!kv->value) {
				pruned[np++] = xstrdup(k + 4);
				continue;
			}
			const char *body;
			size_t blen;
			int64_t del;
			uint64_t v;
			if (etcd_value_parse(kv->value, kv->value_len, &v, &del, &body, &blen) < 0) {
				log_error("etcd: '%s' at revision %llu is malformed; ignored", kv->key,
					  (unsigned long long)rev);
				continue;
			}
			ch[nch].name = xstrdup(k + 4);
			ch[nch].body = body ? xstrndup(body, blen) : NULL;
			ch[nch].body_len = blen;
			ch[nch].version = v;
			ch[nch].deleted_at = del;
			nch++;
		}
	}
	pthread_mutex_lock(&x->lock);
	if (got_version) {
		if (version > x->version)
			x->version = version;
	}
	if (!got_version)
		version = x->version;
	if (got_horizon && horizon > x->horizon)
		x->horizon = horizon;
	horizon = x->horizon;
	for (size_t i = 0; i < nch; i++)
		modrev_set(x, ch[i].name, rev);
	for (size_t i = 0; i < np; i++)
		modrev_del(x, pruned[i]);
	pthread_mutex_unlock(&x->lock);
	int rc = 0;
	if (!nch && !np && !got_version) {
		free(ch);   /* not the store's: a node record, a rollout, a token */
		free(pruned);
	} else {
		rc = hand_over(x, ch, nch, pruned, np, version, horizon) < 0 ? -1 : 0;
	}
	/* a rollout record after the versions of its revision (a revert
	 * commits both in one) */
	deliver_rollouts(x, runs, nruns, has_released, released);
	return rc;
}

struct reload_ctx {
	struct persist_etcd *x;
	size_t plen;
	struct strmap seen;          /* names listed, borrowed from names */
	char **names;
	uint64_t *revs;
	size_t n, cap;
};

static int list_key(void *ctx, const struct etcd_kv *kv)
{
	struct reload_ctx *rc = ctx;
	if (kv->key_len <= rc->plen)
		return 0;
	if (rc->n == rc->cap) {
		rc->cap = rc->cap ? rc->cap * 2 : 256;
		rc->names = xrealloc(rc->names, rc->cap * sizeof(*rc->names));
		rc->revs = xrealloc(rc->revs, rc->cap * sizeof(*rc->revs));
	}
	rc->names[rc->n] = xstrdup(kv->key + rc->plen);
	rc->revs[rc->n] = kv->mod_revision;
	rc->n++;
	return 0;
}

/* After a compaction: the keys with their mod_revision, the bodies that
 * changed, the names that went away; then the watch goes on from there. */
static void reload_rollout(struct persist_etcd *x);

static void reload(struct persist_etcd *x)
{
	struct persist *p = &x->base;
	char err[512];
	for (unsigned attempt = 0;; attempt++) {
		pthread_mutex_lock(&x->lock);
		bool following = x->w != NULL;
		pthread_mutex_unlock(&x->lock);
		if (!following)
			return;   /* unfollow: shutting down */
		char *prefix = persist_etcd_key(p, "res/");
		struct reload_ctx rc = { .x = x, .plen = strlen(prefix) };
		strmap_init(&rc.seen);
		uint64_t rev = 0, version = 0, horizon = 0;
		int r = etcd_range_prefix(x->e, prefix, true, 0, list_key, &rc, &rev, err, sizeof(err));
		free(prefix);
		if (r == 0)
			r = get_dec(p, "version", rev, &version, NULL, err, sizeof(err));
		if (r == 0)
			r = get_dec(p, "horizon", rev, &horizon, NULL, err, sizeof(err));
		struct persist_remote *ch = NULL;
		char **pruned = NULL;
		size_t nch = 0, np = 0;
		if (r == 0) {
			ch = xcalloc(rc.n ? rc.n : 1, sizeof(*ch));
			for (size_t i = 0; i < rc.n; i++)
				strmap_put(&rc.seen, rc.names[i], 1);
			for (size_t i = 0; r == 0 && i < rc.n; i++) {
				intptr_t m;
				pthread_mutex_lock(&x->lock);
				bool same = strmap_get(&x->by_name, rc.names[i], &m) && ((struct modrev *)m)->rev == rc.revs[i];
				pthread_mutex_unlock(&x->lock);
				if (same)
					continue;
				/* changed while we did not watch: fetch this body only */
				char *k = persist_etcd_key(p, "res/%s", rc.names[i]), *v = NULL;
				size_t len = 0;
				r = get_at(p, k, rev, &v, &len, NULL, err, sizeof(err));
				free(k);
				atomic_fetch_add(&x->fetched, 1);
				const char *body;
				size_t blen;
				int64_t del;
				uint64_t ver;
				if (r == 1 && etcd_value_parse(v, len, &ver, &del, &body, &blen) == 0) {
					ch[nch].name = xstrdup(rc.names[i]);
					ch[nch].body = body ? xstrndup(body, blen) : NULL;
					ch[nch].body_len = blen;
					ch[nch].version = ver;
					ch[nch].deleted_at = del;
					nch++;
					r = 0;
				} else if (r >= 0) {
					r = 0;   /* gone or malformed since the listing: the next revision says */
				}
				free(v);
			}
			/* what we knew and the listing does not hold was deleted --
			 * unless this replica wrote it after the listing was read */
			pthread_mutex_lock(&x->lock);
			pruned = xcalloc(x->nall + 1, sizeof(*pruned));
			for (size_t i = 0; i < x->nall; i++)
				if (!strmap_get(&rc.seen, x->all[i]->name, NULL) && x->all[i]->rev <= rev)
					pruned[np++] = xstrdup(x->all[i]->name);
			for (size_t i = 0; i < np; i++)
				modrev_del(x, pruned[i]);
			for (size_t i = 0; i < rc.n; i++) {
				intptr_t m;
				/* a newer write of ours keeps its own revision */
				if (!strmap_get(&x->by_name, rc.names[i], &m) || ((struct modrev *)m)->rev <= rc.revs[i])
					modrev_set(x, rc.names[i], rc.revs[i]);
			}
			if (version > x->version)
				x->version = version;
			/* tombstones dropped while we did not watch: a node older than
			 * this version may have missed a removal, so it gets a snapshot */
			if (np && version > horizon)
				horizon = version;
			if (horizon > x->horizon)
				x->horizon = horizon;
			pthread_mutex_unlock(&x->lock);
		}
		atomic_fetch_add(&x->listed, rc.n);
		atomic_fetch_add(&x->deleted, np);
		for (size_t i = 0; i < rc.n; i++)
			free(rc.names[i]);
		free(rc.names);
		free(rc.revs);
		strmap_release(&rc.seen);
		if (r == 0) {
			size_t fetched = nch;
			log_warn("etcd: compaction reload at revision %llu: %zu keys listed, %zu bodies fetched, %zu "
				 "deleted", (unsigned long long)rev, rc.n, fetched, np);
			atomic_fetch_add(&x->reloads, 1);
			hand_over(x, ch, nch, pruned, np, version, horizon);
			reload_rollout(x);
			pthread_mutex_lock(&x->lock);
			struct etcd_watch *w = x->w;
			pthread_mutex_unlock(&x->lock);
			/* this runs on the watch's own thread: w is not freed under it
			 * (unfollow joins this thread before it frees w) */
			if (w)
				etcd_watch_restart(w, rev);
			return;
		}
		for (size_t i = 0; i < nch; i++) {
			free(ch[i].name);
			free(ch[i].body);
		}
		free(ch);
		for (size_t i = 0; i < np; i++)
			free(pruned[i]);
		free(pruned);
		log_warn("etcd: compaction reload failed: %s; trying again", err);
		struct timespec ts = { 0, (long)(200000000L * (attempt < 10 ? attempt + 1 : 10)) };
		nanosleep(&ts, NULL);
	}
}

/* After a compaction: the replicas up, the newest rollout record and the
 * released version, which may have moved while the watch was behind. */
static void reload_rollout(struct persist_etcd *x)
{
	char err[300];
	if (etcd_lease_refresh(x->lease, err, sizeof(err)) < 0)
		log_warn("etcd: cannot read the replicas after a compaction: %s", err);
	struct ro_run *runs = NULL;
	size_t n = 0;
	uint64_t released = 0;
	if (!x->follow.rollout || etcd_rollout_load(&x->base, 1, true, &runs, &n, err, sizeof(err)) < 0) {
		free(runs);
		return;
	}
	bool has = etcd_released(&x->base, &released) == 1;
	deliver_rollouts(x, runs, n, has, released);
}

static void on_compacted(void *ctx, uint64_t compact_rev)
{
	struct persist_etcd *x = ctx;
	log_warn("etcd: the watch's revision was compacted (etcd keeps from %llu): reloading what changed",
		 (unsigned long long)compact_rev);
	reload(x);
}

static void on_health(void *ctx, bool up, const char *why)
{
	struct persist_etcd *x = ctx;
	if (up)
		log_info("etcd: reachable again");
	else
		log_warn("etcd: unreachable (%s): serving what we have, writes are refused", why ? why : "?");
	atomic_store(&x->writable, up);
}

/* A replica that has not confirmed it is current for half its lease's TTL
 * (at least 3 s) is stale: well before the lease runs out, its nodes hear
 * it and move to a replica that is current. */
static int64_t stale_after_ms(const struct persist_etcd *x)
{
	int64_t ms = (int64_t)(x->lease_ttl * 500);
	return ms > 3000 ? ms : 3000;
}

/* The watch confirms at every liveness check: more than twice within the
 * bound, 2 s apart at most. */
static double watch_check_s(const struct persist_etcd *x)
{
	double s = (double)stale_after_ms(x) / 2500.0;
	return s < 2.0 ? s : 2.0;
}

static bool et_stale(struct persist *p, int64_t *since, char *why, size_t cap, int64_t *recheck_ms)
{
	struct persist_etcd *x = pe(p);
	int64_t now = now_ms(), wall = wall_seconds();
	int64_t lost = x->lease ? etcd_lease_lost(x->lease) : 0;
	if (lost) {
		*since = wall - (now - lost) / 1000;
		snprintf(why, cap, "its etcd lease expired (the other replicas count its nodes gone)");
		*recheck_ms = now + 500;
		return true;
	}
	pthread_mutex_lock(&x->lock);
	struct etcd_watch *w = x->w;
	char last[256] = "";
	int64_t confirmed = w ? etcd_watch_confirmed(w, last, sizeof(last)) : now;
	pthread_mutex_unlock(&x->lock);
	int64_t bound = stale_after_ms(x);
	if (now - confirmed <= bound) {
		/* at the bound, and every second (a lease that expires says
		 * nothing beforehand) */
		*recheck_ms = confirmed + bound + 1 < now + 1000 ? confirmed + bound + 1 : now + 1000;
		return false;
	}
	*since = wall - (now - confirmed - bound) / 1000;
	/* a reason that stays the same through the episode (since says how
	 * long): nodes rewrite what they show when it changes */
	snprintf(why, cap, "etcd has not confirmed for %llds that this replica holds the newest version%s%.200s%s",
		 (long long)(bound / 1000), last[0] ? " (the watch: " : "", last, last[0] ? ")" : "");
	*recheck_ms = now + 500;
	return true;
}

static int et_follow(struct persist *p, const struct persist_follow *f, char *err, size_t errlen)
{
	struct persist_etcd *x = pe(p);
	x->follow = *f;
	/* replicas that came up between the lease's first look and load */
	if (etcd_lease_refresh(x->lease, err, errlen) < 0)
		return -1;
	struct etcd_watch_cbs cbs = { .ctx = x, .revision = on_revision, .compacted = on_compacted, .health = on_health };
	pthread_mutex_lock(&x->lock);
	uint64_t from = x->loaded_rev + 1;
	pthread_mutex_unlock(&x->lock);
	x->w = etcd_watch_start(x->e, x->prefix, from, watch_check_s(x), &cbs, err, errlen);
	return x->w ? 0 : -1;
}

static void et_unfollow(struct persist *p)
{
	struct persist_etcd *x = pe(p);
	/* out of stats' sight first (it reads w under the lock), then
	 * stopped outside the lock (the callbacks take it) */
	pthread_mutex_lock(&x->lock);
	struct etcd_watch *w = x->w;
	x->w = NULL;
	pthread_mutex_unlock(&x->lock);
	etcd_watch_stop(w);   /* joins the thread: no callback after this */
	memset(&x->follow, 0, sizeof(x->follow));
}

static const char *et_replica(struct persist *p)
{
	return pe(p)->replica;
}

static bool et_replica_up(struct persist *p, const char *id)
{
	struct persist_etcd *x = pe(p);
	return x->lease && etcd_lease_up(x->lease, id);
}

static bool et_lead(struct persist *p)
{
	struct persist_etcd *x = pe(p);
	return x->lease && etcd_lease_lead(x->lease);
}

static void et_controller(struct persist *p, char *holder, size_t cap, uint64_t *terms, size_t *replicas)
{
	struct persist_etcd *x = pe(p);
	*holder = 0;
	*terms = 0;
	*replicas = 0;
	if (x->lease)
		etcd_lease_status(x->lease, holder, cap, terms, replicas);
}

static void et_stats(struct persist *p, struct persist_stats *st)
{
	struct persist_etcd *x = pe(p);
	memset(st, 0, sizeof(*st));
	st->shared = true;
	st->writable = atomic_load(&x->writable);
	pthread_mutex_lock(&x->lock);
	st->watch_opens = x->w ? etcd_watch_opens(x->w) : 0;
	pthread_mutex_unlock(&x->lock);
	st->revisions = atomic_load(&x->revisions);
	st->reloads = atomic_load(&x->reloads);
	st->reload_listed = atomic_load(&x->listed);
	st->reload_fetched = atomic_load(&x->fetched);
	st->reload_deleted = atomic_load(&x->deleted);
	st->conflicts = atomic_load(&x->conflicts);
}

static void et_close(struct persist *p)
{
	struct persist_etcd *x = pe(p);
	etcd_watch_stop(x->w);
	etcd_lease_stop(x->lease);   /* revoked: another replica takes over at once */
	etcd_close(x->e);
	free(x->replica);
	for (size_t i = 0; i < x->nall; i++) {
		free(x->all[i]->name);
		free(x->all[i]);
	}
	free(x->all);
	strmap_release(&x->by_name);
	etcd_vlog_cache_free(x->vlog);
	pthread_mutex_destroy(&x->lock);
	free(x->prefix);
	free(x);
}

static const struct persist_ops persist_etcd_ops = {
	.name = "etcd",
	.close = et_close,
	.load = et_load,
	.load_history = et_load_history,
	.commit = et_commit,
	.trim_history = et_trim_history,
	.log_floor = etcd_vlog_floor,
	.log_list = etcd_vlog_list,
	.log_get = etcd_vlog_get,
	.log_after = etcd_vlog_after,
	.log_trim = etcd_vlog_trim,
	.rollout_save = etcd_rollout_save,
	.txn_rollout = et_txn_rollout,
	.rollout_load = etcd_rollout_load,
	.released = etcd_released,
	.set_released = etcd_set_released,
	.nodes_load = etcd_nodes_load,
	.nodes_save = etcd_nodes_save,
	.tokens_load = etcd_tokens_load,
	.token_add = etcd_token_add,
	.token_revoke = etcd_token_revoke,
	.token_delete = etcd_token_delete,
	.approvals_load = etcd_approvals_load,
	.approval_add = etcd_approval_add,
	.approvals_trim = etcd_approvals_trim,
	.ticket_keys_load = etcd_ticket_keys_load,
	.ticket_keys_swap = etcd_ticket_keys_swap,
	.freeze_load = etcd_freeze_load,
	.freeze_save = etcd_freeze_save,
	.follow = et_follow,
	.unfollow = et_unfollow,
	.stats = et_stats,
	.stale = et_stale,
	.replica = et_replica,
	.replica_up = et_replica_up,
	.lead = et_lead,
	.controller = et_controller,
};

struct persist *persist_etcd_open(const struct persist_etcd_options *cfg, char *err, size_t errlen)
{
	struct etcd_opts o = {
		.endpoints = cfg->endpoints, .ca = cfg->ca, .cert = cfg->cert, .key = cfg->key,
		.token_file = cfg->token_file, .timeout_s = 5,
	};
	const char *prefix = cfg->prefix ? cfg->prefix : "/tether/";
	if (!prefix[0] || prefix[strlen(prefix) - 1] != '/') {
		snprintf(err, errlen, "etcd-prefix: '%s' must end with '/'", prefix);
		return NULL;
	}
	struct etcd *e = etcd_open(&o, err, errlen);
	if (!e)
		return NULL;
	struct persist_etcd *x = xcalloc(1, sizeof(*x));
	x->base.ops = &persist_etcd_ops;
	x->e = e;
	x->prefix = xstrdup(prefix);
	pthread_mutex_init(&x->lock, NULL);
	strmap_init(&x->by_name);
	x->vlog = etcd_vlog_cache_new();
	atomic_store(&x->writable, true);
	x->lease_ttl = cfg->lease_ttl > 0 ? cfg->lease_ttl : 10;
	/* its name among the replicas: host, listening address and process,
	 * so a restarted replica is a new one (its old key ends with the
	 * old lease) */
	char host[128] = "localhost";
	if (gethostname(host, sizeof(host) - 1) < 0)
		snprintf(host, sizeof(host), "localhost");
	x->replica = xasprintf("%s:%s:%ld", host, cfg->listen ? cfg->listen : "", (long)getpid());
	/* reachable now, or say so at start */
	uint64_t v = 0;
	if (get_dec(&x->base, "version", 0, &v, NULL, err, errlen) < 0) {
		et_close(&x->base);
		return NULL;
	}
	/* the lease: the replica is up before its node records say it
	 * streams to them */
	if (!(x->lease = etcd_lease_start(x->e, x->prefix, x->replica, x->lease_ttl, err, errlen))) {
		et_close(&x->base);
		return NULL;
	}
	log_info("replicas: this replica is %s (lease TTL %gs)", x->replica, x->lease_ttl);
	return &x->base;
}
