/* persist/etcd/lease.c: this replica's lease in etcd (persist/etcd/etcd.h), kept alive
 * by a thread of its own. The lease holds replicas/ID, which says the
 * replica is up, so the nodes it streams to count as connected in every
 * replica's fleet view. While this replica is the rollout controller, the
 * lease also holds `controller`. The election is etcd's own recipe: create
 * the key if absent, in one transaction. The key's create_revision fences
 * the controller's writes: a replica that lost the key cannot record a
 * transition. The set of live replicas is followed from the watch. */
#include "alive.h"
#include "log.h"
#include "persist/etcd/etcd.h"
#include "strmap.h"
#include "util.h"
#include "xmalloc.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct etcd_lease {
	struct etcd *e;
	char *prefix;
	char *id;                     /* this replica */
	int64_t ttl_ms;
	pthread_t th;
	bool running;
	pthread_mutex_t lock;         /* the fields below */
	pthread_cond_t cond;
	bool stop;
	bool campaign;                /* run for controller (staged rollouts) */
	uint64_t lease;               /* 0: none granted */
	int64_t last_ok;              /* the last keep-alive etcd answered (ms) */
	int64_t lost_ms;              /* when etcd said the lease expired (0: it holds one) */
	bool regrant;                 /* it just expired: a new one at once, not in a quarter TTL */
	uint64_t fence;               /* the controller key's create_revision; 0: not leading */
	char *holder;                 /* the controller as last seen ("" none) */
	struct strmap up;             /* replica ids whose keys exist */
	_Atomic bool leading;
	_Atomic uint64_t terms;       /* times this replica became the controller */
};

static char *key(const struct etcd_lease *l, const char *tail)
{
	return xasprintf("%s%s", l->prefix, tail);
}

static void add_str(cJSON *o, const char *field, const char *s)
{
	char *b = etcd_b64(s, strlen(s));
	cJSON_AddStringToObject(o, field, b);
	free(b);
}

static void add_u64(cJSON *o, const char *field, uint64_t v)
{
	char s[24];
	snprintf(s, sizeof(s), "%llu", (unsigned long long)v);
	cJSON_AddStringToObject(o, field, s);
}

/* Under lock: stops leading (the lease or the key is gone). */
static void step_down(struct etcd_lease *l, const char *why)
{
	if (l->fence)
		log_warn("rollout controller: this replica (%s) is no longer the controller: %s", l->id, why);
	l->fence = 0;
	atomic_store(&l->leading, false);
}

/* A new lease, and this replica's key on it. */
static int grant(struct etcd_lease *l, char *err, size_t errlen)
{
	cJSON *b = cJSON_CreateObject(), *resp = NULL;
	cJSON_AddNumberToObject(b, "TTL", (double)((l->ttl_ms + 999) / 1000));
	int rc = etcd_call(l->e, "/v3/lease/grant", b, &resp, err, errlen);
	uint64_t id = rc == 0 ? etcd_u64(resp, "ID") : 0;
	cJSON_Delete(resp);
	if (rc < 0)
		return rc;
	if (!id) {
		snprintf(err, errlen, "etcd granted no lease");
		return -1;
	}
	char *rk = xasprintf("%sreplicas/%s", l->prefix, l->id);
	b = cJSON_CreateObject();
	add_str(b, "key", rk);
	add_str(b, "value", l->id);
	add_u64(b, "lease", id);
	free(rk);
	rc = etcd_call(l->e, "/v3/kv/put", b, &resp, err, errlen);
	cJSON_Delete(resp);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&l->lock);
	l->lease = id;
	l->last_ok = now_ms();
	if (l->lost_ms)
		log_info("etcd: this replica holds a lease again");
	l->lost_ms = 0;
	pthread_mutex_unlock(&l->lock);
	return 0;
}

/* 1 alive, 0 expired, <0 not answered. */
static int keepalive(struct etcd_lease *l, uint64_t id, char *err, size_t errlen)
{
	cJSON *b = cJSON_CreateObject(), *resp = NULL;
	add_u64(b, "ID", id);
	int rc = etcd_call(l->e, "/v3/lease/keepalive", b, &resp, err, errlen);
	if (rc < 0)
		return rc;
	const cJSON *res = cJSON_GetObjectItemCaseSensitive(resp, "result");
	uint64_t ttl = etcd_u64(res ? res : resp, "TTL");
	cJSON_Delete(resp);
	return ttl > 0;
}

/* One try at the controller key. */
static void run_for_controller(struct etcd_lease *l, uint64_t id)
{
	char err[300];
	char *ck = key(l, "controller");
	cJSON *b = cJSON_CreateObject(), *resp = NULL;
	cJSON *cmp = cJSON_AddArrayToObject(b, "compare"), *c = cJSON_CreateObject();
	add_str(c, "key", ck);
	cJSON_AddStringToObject(c, "target", "CREATE");
	cJSON_AddStringToObject(c, "result", "EQUAL");
	cJSON_AddStringToObject(c, "create_revision", "0");
	cJSON_AddItemToArray(cmp, c);
	cJSON *put = cJSON_CreateObject(), *rp = cJSON_CreateObject();
	add_str(rp, "key", ck);
	add_str(rp, "value", l->id);
	add_u64(rp, "lease", id);
	cJSON_AddItemToObject(put, "request_put", rp);
	cJSON_AddItemToArray(cJSON_AddArrayToObject(b, "success"), put);
	cJSON *get = cJSON_CreateObject(), *rr = cJSON_CreateObject();
	add_str(rr, "key", ck);
	cJSON_AddItemToObject(get, "request_range", rr);
	cJSON_AddItemToArray(cJSON_AddArrayToObject(b, "failure"), get);
	free(ck);
	if (etcd_call(l->e, "/v3/kv/txn", b, &resp, err, sizeof(err)) < 0) {
		log_debug("rollout controller: cannot run for it now: %s", err);
		return;
	}
	bool won = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resp, "succeeded"));
	uint64_t rev = etcd_u64(cJSON_GetObjectItemCaseSensitive(resp, "header"), "revision");
	char *holder = NULL;
	if (!won) {
		/* responses[0].response_range.kvs[0].value */
		const cJSON *rs = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(resp, "responses"), 0);
		const cJSON *kvs = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(rs, "response_range"), "kvs");
		struct etcd_kv kv;
		if (cJSON_GetArraySize(kvs) > 0 && etcd_kv_decode(cJSON_GetArrayItem(kvs, 0), false, &kv) == 0) {
			holder = xstrndup(kv.value ? kv.value : "", kv.value_len);
			/* still ours from before this replica stepped down (etcd
			 * was out of reach, and kept the lease): it leads again,
			 * fenced on the key as it is */
			if (strcmp(holder, l->id) == 0) {
				won = true;
				rev = kv.create_revision;
			}
			etcd_kv_release(&kv);
		}
	}
	cJSON_Delete(resp);
	pthread_mutex_lock(&l->lock);
	if (won && l->lease == id && !l->stop) {
		l->fence = rev;
		atomic_store(&l->leading, true);
		atomic_fetch_add(&l->terms, 1);
		free(l->holder);
		l->holder = xstrdup(l->id);
		log_info("rollout controller: this replica (%s) is the controller (etcd revision %llu, lease TTL %llds)",
			 l->id, (unsigned long long)rev, (long long)(l->ttl_ms / 1000));
	} else if (holder) {
		free(l->holder);
		l->holder = holder;
		holder = NULL;
	}
	pthread_mutex_unlock(&l->lock);
	free(holder);
}

static void *lease_main(void *arg)
{
	struct etcd_lease *l = arg;
	char err[300];
	/* a keep-alive four times a TTL; a controller that has not reached
	 * etcd for two thirds of its TTL steps down before the lease can
	 * expire under it */
	int64_t every = l->ttl_ms / 4 > 100 ? l->ttl_ms / 4 : 100;
	alive_enter("etcd-lease");
	pthread_mutex_lock(&l->lock);
	while (!l->stop) {
		alive_beat();
		uint64_t id = l->lease;
		pthread_mutex_unlock(&l->lock);
		if (!id) {
			if (grant(l, err, sizeof(err)) < 0)
				log_debug("etcd: cannot take a lease now: %s", err);
		} else {
			int rc = keepalive(l, id, err, sizeof(err));
			pthread_mutex_lock(&l->lock);
			if (rc > 0) {
				l->last_ok = now_ms();
			} else if (rc == 0) {
				log_warn("etcd: this replica's lease expired; taking a new one");
				l->lease = 0;
				l->lost_ms = now_ms();
				l->regrant = true;
				step_down(l, "its lease expired");
			} else if (now_ms() - l->last_ok > l->ttl_ms * 2 / 3) {
				step_down(l, "etcd has not answered for two thirds of the lease's TTL");
			}
			pthread_mutex_unlock(&l->lock);
		}
		pthread_mutex_lock(&l->lock);
		id = l->lease;
		bool run = l->campaign && id && !l->fence && !l->stop;
		pthread_mutex_unlock(&l->lock);
		if (run)
			run_for_controller(l, id);
		pthread_mutex_lock(&l->lock);
		/* a lease that just expired is taken again at once: until then
		 * the replica is stale (its nodes count as gone) */
		if (l->regrant) {
			l->regrant = false;
			continue;
		}
		if (!l->stop) {
			alive_park(every);
			cond_wait_ms(&l->cond, &l->lock, every);
			alive_unpark();
		}
	}
	pthread_mutex_unlock(&l->lock);
	alive_leave();
	return NULL;
}

struct up_ctx {
	struct etcd_lease *l;
	struct strmap ids;            /* keys owned */
};

static int add_up(void *ctx, const struct etcd_kv *kv)
{
	struct up_ctx *u = ctx;
	size_t plen = strlen(u->l->prefix) + strlen("replicas/");
	intptr_t v;
	if (kv->key_len > plen && !strmap_get(&u->ids, kv->key + plen, &v))
		strmap_put(&u->ids, xstrdup(kv->key + plen), 1);
	return 0;
}

static void free_keys(struct strmap *m)
{
	for (size_t i = 0; i < m->cap; i++)
		free((char *)m->slots[i].key);
	strmap_release(m);
}

int etcd_lease_refresh(struct etcd_lease *l, char *err, size_t errlen)
{
	struct up_ctx u = { .l = l };
	strmap_init(&u.ids);
	char *rp = key(l, "replicas/");
	int rc = etcd_range_prefix(l->e, rp, true, 0, add_up, &u, NULL, err, errlen);
	free(rp);
	if (rc < 0) {
		free_keys(&u.ids);
		return rc;
	}
	pthread_mutex_lock(&l->lock);
	struct strmap old = l->up;
	l->up = u.ids;
	size_t n = l->up.len;
	pthread_mutex_unlock(&l->lock);
	free_keys(&old);
	log_debug("replicas: %zu up", n);
	return 0;
}

struct etcd_lease *etcd_lease_start(struct etcd *e, const char *prefix, const char *id, double ttl_s, char *err,
				    size_t errlen)
{
	struct etcd_lease *l = xcalloc(1, sizeof(*l));
	l->e = e;
	l->prefix = xstrdup(prefix);
	l->id = xstrdup(id);
	l->ttl_ms = (int64_t)(ttl_s * 1000);
	l->holder = xstrdup("");
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->cond, NULL);
	strmap_init(&l->up);
	/* the replicas up now (again when the watch starts); the watch
	 * brings the changes */
	int rc = etcd_lease_refresh(l, err, errlen);
	if (rc == 0)
		rc = grant(l, err, errlen);
	if (rc < 0 || pthread_create(&l->th, NULL, lease_main, l) != 0) {
		if (rc == 0)
			snprintf(err, errlen, "cannot start the lease thread");
		etcd_lease_stop(l);
		return NULL;
	}
	l->running = true;
	return l;
}

void etcd_lease_stop(struct etcd_lease *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&l->lock);
	l->stop = true;
	pthread_cond_broadcast(&l->cond);
	uint64_t id = l->lease;
	pthread_mutex_unlock(&l->lock);
	if (l->running)
		pthread_join(l->th, NULL);
	if (id) {
		/* revoked: the replica's key and the controller key go now, and
		 * another replica takes over without waiting for the TTL */
		char err[300];
		cJSON *b = cJSON_CreateObject(), *resp = NULL;
		add_u64(b, "ID", id);
		if (etcd_call(l->e, "/v3/lease/revoke", b, &resp, err, sizeof(err)) < 0)
			log_warn("etcd: cannot revoke this replica's lease (it expires by itself): %s", err);
		cJSON_Delete(resp);
	}
	free_keys(&l->up);
	pthread_cond_destroy(&l->cond);
	pthread_mutex_destroy(&l->lock);
	free(l->holder);
	free(l->prefix);
	free(l->id);
	free(l);
}

bool etcd_lease_lead(struct etcd_lease *l)
{
	pthread_mutex_lock(&l->lock);
	if (!l->campaign) {
		l->campaign = true;
		pthread_cond_broadcast(&l->cond);   /* run now, not in a TTL */
	}
	/* the keep-alive may be blocked in a request to an etcd without
	 * quorum: the deadline holds anyway */
	if (l->fence && now_ms() - l->last_ok > l->ttl_ms * 2 / 3)
		step_down(l, "etcd has not answered for two thirds of the lease's TTL");
	pthread_mutex_unlock(&l->lock);
	return atomic_load(&l->leading);
}

void etcd_lease_deposed(struct etcd_lease *l)
{
	pthread_mutex_lock(&l->lock);
	step_down(l, "the controller key is not this replica's any more");
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->lock);
}

bool etcd_lease_fence(struct etcd_lease *l, cJSON *cmp)
{
	pthread_mutex_lock(&l->lock);
	uint64_t fence = l->fence;
	bool campaign = l->campaign;
	pthread_mutex_unlock(&l->lock);
	if (!campaign)
		return true;    /* no election runs: nothing to fence */
	if (!fence)
		return false;
	char *ck = key(l, "controller");
	cJSON *c = cJSON_CreateObject();
	add_str(c, "key", ck);
	cJSON_AddStringToObject(c, "target", "CREATE");
	cJSON_AddStringToObject(c, "result", "EQUAL");
	add_u64(c, "create_revision", fence);
	cJSON_AddItemToArray(cmp, c);
	free(ck);
	return true;
}

int64_t etcd_lease_lost(struct etcd_lease *l)
{
	pthread_mutex_lock(&l->lock);
	int64_t lost = l->lost_ms;
	pthread_mutex_unlock(&l->lock);
	return lost;
}

const char *etcd_lease_id(const struct etcd_lease *l)
{
	return l->id;
}

bool etcd_lease_up(struct etcd_lease *l, const char *id)
{
	if (strcmp(id, l->id) == 0)
		return true;
	pthread_mutex_lock(&l->lock);
	intptr_t v;
	bool up = strmap_get(&l->up, id, &v);
	pthread_mutex_unlock(&l->lock);
	return up;
}

void etcd_lease_replica_event(struct etcd_lease *l, const char *id, bool up)
{
	pthread_mutex_lock(&l->lock);
	intptr_t v;
	bool had = strmap_get(&l->up, id, &v);
	if (up && !had)
		strmap_put(&l->up, xstrdup(id), 1);   /* the map holds the copy */
	else if (!up && had)
		free((char *)strmap_del(&l->up, id));
	pthread_mutex_unlock(&l->lock);
	if (up != had && strcmp(id, l->id) != 0)
		log_info("replicas: %s is %s", id, up ? "up" : "gone (its lease ended)");
}

void etcd_lease_status(struct etcd_lease *l, char *holder, size_t cap, uint64_t *terms, size_t *replicas)
{
	pthread_mutex_lock(&l->lock);
	snprintf(holder, cap, "%s", l->holder);
	*replicas = l->up.len;
	pthread_mutex_unlock(&l->lock);
	*terms = atomic_load(&l->terms);
}
