/* persist/etcd/watch.c: the watch half of persist/etcd/client.h: a thread that holds one
 * watch stream on a prefix and hands each revision's events over in order.
 * Seed 002's rules: it resumes from the last revision it delivered plus
 * one (never a newer one), checks every check_s that a silent stream is
 * not a dead one (the newest revision under the prefix, read on another
 * connection, must not be past what it delivered), and reports a
 * compaction instead of skipping what was compacted. A watch etcd cancels
 * for its token (expired, unknown to the member it reached) reopens with a
 * new one. */
#include "alive.h"
#include "buf.h"
#include "log.h"
#include "persist/etcd/client.h"
#include "util.h"
#include "xmalloc.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINE_MAX_BYTES (64u << 20)

struct etcd_watch {
	struct etcd *e;
	char *prefix;
	double check_s;
	struct etcd_watch_cbs cbs;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
	bool compacted;              /* waiting for etcd_watch_restart */
	_Atomic uint64_t delivered;  /* the last revision handed over */
	_Atomic uint64_t opens;
	/* the stream being read (watch thread only) */
	struct buf line;
	int64_t last_byte_ms, next_check_ms;
	bool broken;                 /* a reason to reopen was found */
	bool reauth;                 /* etcd refused the token: a new one first */
	bool up;
	char why[256];
	/* confirmation that it is current (freshness.h): a check read the
	 * newest revision under the prefix at pend_ms; once it is delivered,
	 * the watch was current as of then */
	uint64_t pend_newest;
	int64_t pend_ms;
	_Atomic int64_t confirmed_ms;
	char last_why[256];          /* under lock: the last reason it reopened */
};

/* The watch holds every revision etcd held at t (watch thread). */
static void confirm(struct etcd_watch *w, int64_t t)
{
	if (t > atomic_load(&w->confirmed_ms))
		atomic_store(&w->confirmed_ms, t);
}

/* The events of one answer, grouped by revision, handed over in order. */
static int deliver(struct etcd_watch *w, const cJSON *events)
{
	size_t n = (size_t)cJSON_GetArraySize(events), k = 0;
	struct etcd_kv *kvs = xcalloc(n ? n : 1, sizeof(*kvs));
	const cJSON *ev;
	int rc = 0;
	cJSON_ArrayForEach(ev, events) {
		const cJSON *type = cJSON_GetObjectItemCaseSensitive(ev, "type");
		bool del = cJSON_IsString(type) && strcmp(type->valuestring, "DELETE") == 0;
		if (etcd_kv_decode(cJSON_GetObjectItemCaseSensitive(ev, "kv"), del, &kvs[k]) < 0) {
			log_warn("etcd watch: a malformed event; reopening");
			rc = -1;
			goto out;
		}
		k++;
	}
	for (size_t i = 0; i < k;) {
		size_t j = i;
		while (j < k && kvs[j].mod_revision == kvs[i].mod_revision)
			j++;
		uint64_t rev = kvs[i].mod_revision;
		if (rev > atomic_load(&w->delivered)) {   /* a replay after a reopen is skipped */
			if (w->cbs.revision(w->cbs.ctx, rev, kvs + i, j - i) < 0) {
				rc = -1;
				goto out;
			}
			atomic_store(&w->delivered, rev);
			if (w->pend_newest && rev >= w->pend_newest) {
				confirm(w, w->pend_ms);
				w->pend_newest = 0;
			}
		}
		i = j;
	}
out:
	for (size_t i = 0; i < k; i++)
		etcd_kv_release(&kvs[i]);
	free(kvs);
	return rc;
}

static void set_health(struct etcd_watch *w, bool up, const char *why)
{
	if (up == w->up)
		return;
	w->up = up;
	if (w->cbs.health)
		w->cbs.health(w->cbs.ctx, up, why);
}

/* One message of the stream. */
static void message(struct etcd_watch *w, const char *text, size_t len)
{
	cJSON *j = cJSON_ParseWithLength(text, len);
	const cJSON *res = cJSON_GetObjectItemCaseSensitive(j, "result");
	if (!res) {
		const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
		snprintf(w->why, sizeof(w->why), "the watch answered %.200s",
			 e && cJSON_IsObject(e) && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "message"))
				 ? cJSON_GetObjectItemCaseSensitive(e, "message")->valuestring
				 : "something that is not a watch result");
		w->broken = true;
		cJSON_Delete(j);
		return;
	}
	uint64_t compact = etcd_u64(res, "compact_revision");
	if (compact) {
		pthread_mutex_lock(&w->lock);
		w->compacted = true;
		pthread_mutex_unlock(&w->lock);
		w->broken = true;
		snprintf(w->why, sizeof(w->why), "revision %llu was compacted",
			 (unsigned long long)atomic_load(&w->delivered) + 1);
		if (w->cbs.compacted)
			w->cbs.compacted(w->cbs.ctx, compact);
	} else if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "canceled"))) {
		const cJSON *r = cJSON_GetObjectItemCaseSensitive(res, "cancel_reason");
		const char *reason = cJSON_IsString(r) ? r->valuestring : "";
		snprintf(w->why, sizeof(w->why), "etcd cancelled the watch%s%.200s", reason[0] ? ": " : "", reason);
		if (strstr(reason, "PermissionDenied") || strstr(reason, "permission denied"))
			snprintf(w->why + strlen(w->why), sizeof(w->why) - strlen(w->why),
				 " (the etcd user's role needs read on the range of --etcd-prefix)");
		/* checked on the watch's creation only: an expired token (or
		 * one this member never saw) is refused here */
		w->reauth = etcd_token_refused(0, reason);
		w->broken = true;
	} else {
		const cJSON *events = cJSON_GetObjectItemCaseSensitive(res, "events");
		if (cJSON_IsArray(events) && deliver(w, events) < 0) {
			snprintf(w->why, sizeof(w->why), "an event could not be applied");
			w->broken = true;
		}
		/* health comes from the liveness check only: a member without
		 * quorum still opens watches */
	}
	cJSON_Delete(j);
}

static size_t on_data(char *ptr, size_t size, size_t n, void *ud)
{
	struct etcd_watch *w = ud;
	size_t len = size * n;
	w->last_byte_ms = now_ms();
	for (size_t i = 0; i < len; i++) {
		if (ptr[i] == '\n') {
			if (w->line.len)
				message(w, w->line.data, w->line.len);
			buf_reset(&w->line);
			if (w->broken)
				return 0;   /* ends the transfer: reopen */
			continue;
		}
		if (w->line.len >= LINE_MAX_BYTES) {
			snprintf(w->why, sizeof(w->why), "a watch message over %u bytes", LINE_MAX_BYTES);
			w->broken = true;
			return 0;
		}
		buf_append(&w->line, ptr + i, 1);
	}
	return len;
}

/* The newest revision that changed a key under the prefix, read on its own
 * connection; 0 when etcd cannot be asked. */
static uint64_t newest_under_prefix(struct etcd_watch *w, char *err, size_t errlen)
{
	cJSON *b = cJSON_CreateObject(), *resp = NULL;
	char *k = etcd_b64(w->prefix, strlen(w->prefix)), *end = etcd_prefix_end_b64(w->prefix);
	cJSON_AddStringToObject(b, "key", k);
	cJSON_AddStringToObject(b, "range_end", end);
	cJSON_AddNumberToObject(b, "limit", 1);
	cJSON_AddStringToObject(b, "sort_order", "DESCEND");
	cJSON_AddStringToObject(b, "sort_target", "MOD");
	cJSON_AddTrueToObject(b, "keys_only");
	free(k);
	free(end);
	if (etcd_call(w->e, "/v3/kv/range", b, &resp, err, errlen) < 0)
		return 0;
	uint64_t newest = 0;
	const cJSON *kv = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(resp, "kvs"), 0);
	if (kv)
		newest = etcd_u64(kv, "mod_revision");
	else
		newest = 1;   /* nothing under the prefix: nothing to miss */
	cJSON_Delete(resp);
	return newest;
}

static int progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	(void)dt, (void)dn, (void)ut, (void)un;
	struct etcd_watch *w = ud;
	alive_beat();   /* curl calls this at least once a second, events or not */
	pthread_mutex_lock(&w->lock);
	bool stop = w->stop;
	pthread_mutex_unlock(&w->lock);
	if (stop)
		return 1;
	int64_t now = now_ms();
	if (now < w->next_check_ms)
		return 0;
	w->next_check_ms = now + (int64_t)(w->check_s * 1000);
	/* the liveness check: a stream that is silent while etcd moved on
	 * under the prefix is dead (a black hole, a lost connection) */
	char err[200];
	int64_t asked = now_ms();
	uint64_t newest = newest_under_prefix(w, err, sizeof(err));
	if (newest == 0) {
		set_health(w, false, err);
		snprintf(w->why, sizeof(w->why), "etcd does not answer (%s)", err);
		return 1;
	}
	set_health(w, true, NULL);
	/* current as of the question when what etcd held then is delivered
	 * (now, or later: a write's event may still be on its way) */
	uint64_t have = atomic_load(&w->delivered);
	if (newest <= have) {
		confirm(w, asked);
		w->pend_newest = 0;
	} else {
		if (w->pend_newest && have >= w->pend_newest)
			confirm(w, w->pend_ms);
		w->pend_newest = newest;
		w->pend_ms = asked;
	}
	if (newest > atomic_load(&w->delivered) && now - w->last_byte_ms >= (int64_t)(w->check_s * 1000)) {
		snprintf(w->why, sizeof(w->why), "silent for %.1fs while etcd is at revision %llu",
			 (double)(now - w->last_byte_ms) / 1000.0, (unsigned long long)newest);
		return 1;
	}
	return 0;
}

static void watch_once(struct etcd_watch *w, const char *endpoint)
{
	char rev[24];
	snprintf(rev, sizeof(rev), "%llu", (unsigned long long)atomic_load(&w->delivered) + 1);
	cJSON *cr = cJSON_CreateObject(), *b = cJSON_CreateObject();
	char *k = etcd_b64(w->prefix, strlen(w->prefix)), *end = etcd_prefix_end_b64(w->prefix);
	cJSON_AddStringToObject(cr, "key", k);
	cJSON_AddStringToObject(cr, "range_end", end);
	cJSON_AddStringToObject(cr, "start_revision", rev);
	cJSON_AddTrueToObject(cr, "progress_notify");
	cJSON_AddItemToObject(b, "create_request", cr);
	free(k);
	free(end);
	char *body = cJSON_PrintUnformatted(b);
	cJSON_Delete(b);
	char *url = xasprintf("%s/v3/watch", endpoint);
	CURL *h = curl_easy_init();
	struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(w->check_s * 1000));
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, w);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, progress);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, w);
	char detail[CURL_ERROR_SIZE] = "";
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, detail);
	etcd_setup_tls(w->e, h);
	etcd_add_auth(w->e, &hdr);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
	w->broken = false;
	w->reauth = false;
	w->why[0] = '\0';
	buf_reset(&w->line);
	w->last_byte_ms = now_ms();
	w->next_check_ms = w->last_byte_ms + (int64_t)(w->check_s * 1000);
	atomic_fetch_add(&w->opens, 1);
	CURLcode rc = curl_easy_perform(h);
	if (!w->why[0] && rc == CURLE_OK)
		snprintf(w->why, sizeof(w->why), "the stream ended");
	else if (!w->why[0])
		etcd_transfer_error(w->e, rc, detail, w->why, sizeof(w->why));
	curl_easy_cleanup(h);
	curl_slist_free_all(hdr);
	free(url);
	free(body);
}

/* etcd cancelled the watch for its token: a new one before reopening
 * (nothing else may call etcd meanwhile, and the liveness check runs
 * only while a stream is open). Whether it worked. */
static bool reauthenticate(struct etcd_watch *w)
{
	char err[512];
	log_info("etcd watch: etcd refused the auth token; authenticating again");
	if (etcd_reauthenticate(w->e, err, sizeof(err)) < 0) {
		log_warn("etcd watch: %s", err);
		return false;
	}
	return true;
}

static void *watch_main(void *arg)
{
	struct etcd_watch *w = arg;
	unsigned attempt = 0, fresh_in_row = 0;
	alive_enter("etcd-watch");
	for (;;) {
		alive_beat();
		pthread_mutex_lock(&w->lock);
		alive_park(-1);
		while (!w->stop && w->compacted)
			pthread_cond_wait(&w->cond, &w->lock);
		alive_unpark();
		bool stop = w->stop;
		pthread_mutex_unlock(&w->lock);
		if (stop)
			break;
		uint64_t before = atomic_load(&w->delivered);
		int64_t t0 = now_ms();
		watch_once(w, etcd_endpoint(w->e, attempt));
		pthread_mutex_lock(&w->lock);
		stop = w->stop;
		pthread_mutex_unlock(&w->lock);
		if (stop)
			break;
		log_warn("etcd watch: %s; reopening from revision %llu", w->why,
			 (unsigned long long)atomic_load(&w->delivered) + 1);
		pthread_mutex_lock(&w->lock);
		snprintf(w->last_why, sizeof(w->last_why), "%s", w->why);
		pthread_mutex_unlock(&w->lock);
		bool fresh = w->reauth && reauthenticate(w);
		/* a stream that lived or delivered starts over at once, and so
		 * does one refused for its token once a new one came (used at
		 * once, on the member that gave it: a token left idle through a
		 * backoff may expire before the watch uses it; three times in a
		 * row at most, each sign-in costs etcd a password hash); one
		 * that failed at once waits a little longer each time, on the
		 * next endpoint */
		bool lived = atomic_load(&w->delivered) > before || now_ms() - t0 > 5000;
		fresh_in_row = lived ? 0 : fresh_in_row + fresh;
		if (lived || (fresh && fresh_in_row <= 3))
			attempt = 0;
		else
			attempt++;
		int64_t wait = attempt ? (int64_t)(100 << (attempt > 5 ? 5 : attempt)) : 50;
		pthread_mutex_lock(&w->lock);
		if (!w->stop) {
			alive_park(wait);
			cond_wait_ms(&w->cond, &w->lock, wait);
			alive_unpark();
		}
		pthread_mutex_unlock(&w->lock);
	}
	alive_leave();
	return NULL;
}

struct etcd_watch *etcd_watch_start(struct etcd *e, const char *prefix, uint64_t start_rev, double check_s,
				    const struct etcd_watch_cbs *cbs, char *err, size_t errlen)
{
	struct etcd_watch *w = xcalloc(1, sizeof(*w));
	w->e = e;
	w->prefix = xstrdup(prefix);
	w->check_s = check_s > 0 ? check_s : 2;
	w->cbs = *cbs;
	w->up = true;
	atomic_store(&w->delivered, start_rev ? start_rev - 1 : 0);
	atomic_store(&w->confirmed_ms, now_ms());   /* the caller just loaded what etcd holds */
	buf_init(&w->line);
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	if (pthread_create(&w->thread, NULL, watch_main, w) != 0) {
		snprintf(err, errlen, "etcd: cannot start the watch thread");
		pthread_mutex_destroy(&w->lock);
		pthread_cond_destroy(&w->cond);
		free(w->prefix);
		free(w);
		return NULL;
	}
	return w;
}

void etcd_watch_restart(struct etcd_watch *w, uint64_t rev)
{
	pthread_mutex_lock(&w->lock);
	atomic_store(&w->delivered, rev);
	w->compacted = false;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

uint64_t etcd_watch_revision(struct etcd_watch *w)
{
	return atomic_load(&w->delivered);
}

uint64_t etcd_watch_opens(struct etcd_watch *w)
{
	return atomic_load(&w->opens);
}

int64_t etcd_watch_confirmed(struct etcd_watch *w, char *why, size_t cap)
{
	pthread_mutex_lock(&w->lock);
	snprintf(why, cap, "%s", w->last_why);
	pthread_mutex_unlock(&w->lock);
	return atomic_load(&w->confirmed_ms);
}

void etcd_watch_stop(struct etcd_watch *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->thread, NULL);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->cond);
	buf_release(&w->line);
	free(w->prefix);
	free(w);
}
