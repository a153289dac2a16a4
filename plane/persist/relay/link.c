/* persist/relay/link.c: a relay's stream from its upstream and its requests to it
 * (see persist/relay/link.h). */
#include "persist/relay/link.h"
#include "alive.h"
#include "credentials.h"
#include "log.h"
#include "sse_parser.h"
#include "urllist.h"
#include "util.h"
#include "xmalloc.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONNECT_TIMEOUT_MS 3000
#define FIRST_INTERVAL_S 10.0

struct relay_link {
	char *urls[RELAY_MAX_UPSTREAMS];
	int nurls;
	char *relay_id;
	char *token;
	struct credentials cr;
	char *ca_file, *cert, *key;
	size_t max_event;
	struct relay_link_cbs cbs;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
	bool reopen;                 /* the follower lost its place: start over */
	bool move;                   /* the upstream is stale: go on to the next one */
	int cur;                     /* the upstream the stream is on (or tries) */
	bool up;
	int64_t down_ms;             /* since when it is not up (monotonic; 0: up) */
	char down_why[256];          /* why (the last failure) */
	int64_t moved_ms;            /* the last move off a stale upstream */
	double interval_s;
	/* the stream being read (link thread only) */
	struct sse_parser parser;
	int64_t last_byte_ms;
	bool broken;
	bool got_event;
	char why[256];
};

static int on_event(void *ctx, const struct sse_event *ev)
{
	struct relay_link *l = ctx;
	l->got_event = true;
	if (l->cbs.event(l->cbs.ctx, ev->type, ev->data, ev->data_len) != 0) {
		if (!l->why[0])
			snprintf(l->why, sizeof(l->why), "a '%.32s' event could not be applied", ev->type);
		l->broken = true;
		return 1;
	}
	return 0;
}

static size_t on_data(char *ptr, size_t size, size_t n, void *ud)
{
	struct relay_link *l = ud;
	size_t len = size * n;
	l->last_byte_ms = now_ms();
	int rc = sse_parser_feed(&l->parser, ptr, len, on_event, l);
	if (rc < 0) {
		snprintf(l->why, sizeof(l->why), "an event over %zu bytes", l->max_event);
		return 0;
	}
	return rc ? 0 : len;
}

static int progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	(void)dt, (void)dn, (void)ut, (void)un;
	struct relay_link *l = ud;
	alive_beat();   /* curl calls this at least once a second, events or not */
	pthread_mutex_lock(&l->lock);
	bool stop = l->stop, reopen = l->reopen, move = l->move;
	double iv = l->interval_s;
	l->reopen = false;
	pthread_mutex_unlock(&l->lock);
	if (stop)
		return 1;
	if (move) {
		snprintf(l->why, sizeof(l->why), "it is stale (cut off from its own source)");
		return 1;
	}
	if (reopen) {
		snprintf(l->why, sizeof(l->why), "an event could not be applied");
		return 1;
	}
	/* seed 002: a silent stream looks exactly like an idle one; the
	 * heartbeats tell them apart */
	int64_t silent = now_ms() - l->last_byte_ms;
	if (silent > (int64_t)(iv * 3000) + 1000) {
		snprintf(l->why, sizeof(l->why), "silent for %.1fs (three heartbeats)", (double)silent / 1000.0);
		return 1;
	}
	return 0;
}

static void setup(struct relay_link *l, CURL *h, struct curl_slist **hdr)
{
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)CONNECT_TIMEOUT_MS);
	*hdr = credentials_apply(h, &l->cr, *hdr);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, *hdr);
}

static void set_health(struct relay_link *l, bool up, const char *url, const char *why)
{
	pthread_mutex_lock(&l->lock);
	bool was = l->up;
	l->up = up;
	if (up) {
		l->down_ms = 0;
	} else {
		if (was || !l->down_ms)
			l->down_ms = now_ms();
		snprintf(l->down_why, sizeof(l->down_why), "%s: %s", url, why ? why : "no answer");
	}
	pthread_mutex_unlock(&l->lock);
	if (was != up && l->cbs.health)
		l->cbs.health(l->cbs.ctx, up, url, why);
}

/* The status line of a refused stream, with the upstream's error text. */
static size_t on_refusal(char *ptr, size_t size, size_t n, void *ud)
{
	struct buf *b = ud;
	size_t len = size * n;
	if (b->len < 512)
		buf_append(b, ptr, len < 512 - b->len ? len : 512 - b->len);
	return len;
}

struct open_ctx {
	struct relay_link *l;
	const char *url;
	struct buf refusal;
	long status;
	bool checked;
};

/* The header's end decides: 200 reads events, anything else reads the
 * error text. */
static size_t on_body(char *ptr, size_t size, size_t n, void *ud)
{
	struct open_ctx *o = ud;
	if (!o->checked) {
		o->checked = true;
		if (o->status == 200) {
			set_health(o->l, true, o->url, NULL);
			log_info("relay: following %s", o->url);
		}
	}
	if (o->status != 200)
		return on_refusal(ptr, size, n, &o->refusal);
	return on_data(ptr, size, n, o->l);
}

static size_t on_header(char *ptr, size_t size, size_t n, void *ud)
{
	struct open_ctx *o = ud;
	size_t len = size * n;
	if (len > 9 && strncmp(ptr, "HTTP/", 5) == 0) {
		const char *sp = memchr(ptr, ' ', len);
		if (sp)
			o->status = strtol(sp + 1, NULL, 10);
		o->checked = false;
	}
	return len;
}

static void stream_once(struct relay_link *l, const char *url)
{
	uint64_t from = l->cbs.resume(l->cbs.ctx);
	char *esc_id = curl_easy_escape(NULL, l->relay_id, 0);
	char *full = xasprintf("%s/v1/relay/stream?relay=%s&version=%llu", url, esc_id, (unsigned long long)from);
	curl_free(esc_id);
	CURL *h = curl_easy_init();
	struct curl_slist *hdr = curl_slist_append(NULL, "Accept: text/event-stream");
	setup(l, h, &hdr);
	struct open_ctx o = { .l = l, .url = url };
	buf_init(&o.refusal);
	curl_easy_setopt(h, CURLOPT_URL, full);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &o);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, &o);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, progress);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, l);
	char detail[CURL_ERROR_SIZE] = "";
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, detail);
	sse_parser_reset(&l->parser);
	l->broken = false;
	l->got_event = false;
	l->why[0] = '\0';
	l->last_byte_ms = now_ms();
	CURLcode rc = curl_easy_perform(h);
	if (o.status && o.status != 200) {
		/* the upstream's own words: {"error":"..."} */
		snprintf(l->why, sizeof(l->why), "the upstream answered %ld: %.*s", o.status, (int)o.refusal.len,
			 o.refusal.data ? o.refusal.data : "");
		size_t k = strlen(l->why);
		while (k && (l->why[k - 1] == '\n' || l->why[k - 1] == '\r'))
			l->why[--k] = '\0';
	} else if (!l->why[0]) {
		snprintf(l->why, sizeof(l->why), "%s", rc == CURLE_OK ? "the stream ended"
						      : detail[0] ? detail : curl_easy_strerror(rc));
	}
	buf_release(&o.refusal);
	curl_easy_cleanup(h);
	credentials_free_headers(hdr);
	free(full);
}

static void *link_main(void *arg)
{
	struct relay_link *l = arg;
	unsigned attempt = 0;
	alive_enter("relay-link");
	for (;;) {
		alive_beat();
		pthread_mutex_lock(&l->lock);
		bool stop = l->stop;
		int cur = l->cur;
		pthread_mutex_unlock(&l->lock);
		if (stop)
			break;
		int64_t t0 = now_ms();
		stream_once(l, l->urls[cur]);
		pthread_mutex_lock(&l->lock);
		stop = l->stop;
		pthread_mutex_unlock(&l->lock);
		if (stop)
			break;
		set_health(l, false, l->urls[cur], l->why);
		log_warn("relay: upstream %s: %s; reopening from version %llu", l->urls[cur], l->why,
			 (unsigned long long)l->cbs.resume(l->cbs.ctx));
		/* a stream that lived starts over at once on the same upstream;
		 * one that failed at once moves to the next, waiting a little
		 * longer each round */
		bool lived = l->got_event && now_ms() - t0 > 5000;
		int64_t wait = 50;
		pthread_mutex_lock(&l->lock);
		bool moving = l->move;
		l->move = false;
		pthread_mutex_unlock(&l->lock);
		if (moving) {
			/* off a stale upstream at once, to the next one */
			pthread_mutex_lock(&l->lock);
			l->cur = (l->cur + 1) % l->nurls;
			pthread_mutex_unlock(&l->lock);
		} else if (lived) {
			attempt = 0;
		} else {
			attempt++;
			pthread_mutex_lock(&l->lock);
			l->cur = (l->cur + 1) % l->nurls;
			pthread_mutex_unlock(&l->lock);
			unsigned round = attempt / (unsigned)l->nurls;
			wait = round ? (int64_t)(100 << (round > 5 ? 5 : round)) : 50;
		}
		pthread_mutex_lock(&l->lock);
		if (!l->stop) {
			alive_park(wait);
			cond_wait_ms(&l->cond, &l->lock, wait);
			alive_unpark();
		}
		pthread_mutex_unlock(&l->lock);
	}
	alive_leave();
	return NULL;
}

struct relay_link *relay_link_start(const struct relay_link_opts *o, const struct relay_link_cbs *cbs, char *err,
				    size_t errlen)
{
	struct relay_link *l = xcalloc(1, sizeof(*l));
	l->nurls = urllist_parse(o->urls, l->urls, RELAY_MAX_UPSTREAMS, err, errlen);
	if (l->nurls <= 0) {
		if (l->nurls == 0)
			snprintf(err, errlen, "upstream: no URL");
		free(l);
		return NULL;
	}
	if (o->token_file && !(l->token = credentials_read_token(o->token_file, err, errlen))) {
		urllist_free(l->urls, l->nurls);
		free(l);
		return NULL;
	}
	l->relay_id = xstrdup(o->relay_id);
	l->ca_file = o->ca_file ? xstrdup(o->ca_file) : NULL;
	l->cert = o->cert ? xstrdup(o->cert) : NULL;
	l->key = o->key ? xstrdup(o->key) : NULL;
	l->cr = (struct credentials){ .ca_file = l->ca_file, .cert = l->cert, .key = l->key, .token = l->token };
	l->max_event = o->max_event;
	l->cbs = *cbs;
	l->interval_s = FIRST_INTERVAL_S;
	l->down_ms = now_ms();   /* not following yet */
	snprintf(l->down_why, sizeof(l->down_why), "not connected yet");
	sse_parser_init(&l->parser, o->max_event, o->max_event);
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->cond, NULL);
	if (pthread_create(&l->thread, NULL, link_main, l) != 0) {
		snprintf(err, errlen, "relay: cannot start the upstream thread");
		l->thread = 0;
		relay_link_free(l);
		return NULL;
	}
	return l;
}

void relay_link_stop(struct relay_link *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&l->lock);
	l->stop = true;
	l->up = false;
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->lock);
	if (l->thread)
		pthread_join(l->thread, NULL);
	l->thread = 0;
}

void relay_link_free(struct relay_link *l)
{
	if (!l)
		return;
	relay_link_stop(l);
	pthread_mutex_destroy(&l->lock);
	pthread_cond_destroy(&l->cond);
	sse_parser_release(&l->parser);
	urllist_free(l->urls, l->nurls);
	credentials_forget(l->token);
	free(l->relay_id);
	free(l->ca_file);
	free(l->cert);
	free(l->key);
	free(l);
}

void relay_link_reopen(struct relay_link *l)
{
	pthread_mutex_lock(&l->lock);
	l->reopen = true;
	pthread_mutex_unlock(&l->lock);
}

int64_t relay_link_down_since(struct relay_link *l, char *why, size_t cap)
{
	pthread_mutex_lock(&l->lock);
	int64_t down = l->up ? 0 : l->down_ms;
	if (why)
		snprintf(why, cap, "%s", l->down_why);
	pthread_mutex_unlock(&l->lock);
	return down;
}

bool relay_link_move(struct relay_link *l, int64_t hold_ms)
{
	pthread_mutex_lock(&l->lock);
	bool move = l->nurls > 1 && l->up && (!l->moved_ms || now_ms() - l->moved_ms >= hold_ms);
	if (move) {
		l->moved_ms = now_ms();
		l->move = true;
	}
	pthread_mutex_unlock(&l->lock);
	return move;
}

void relay_link_set_interval(struct relay_link *l, double seconds)
{
	pthread_mutex_lock(&l->lock);
	if (seconds > 0)
		l->interval_s = seconds;
	pthread_mutex_unlock(&l->lock);
}

bool relay_link_up(struct relay_link *l, char *url, size_t cap)
{
	pthread_mutex_lock(&l->lock);
	bool up = l->up;
	if (url)
		snprintf(url, cap, "%s", l->urls[l->cur]);
	pthread_mutex_unlock(&l->lock);
	return up;
}

static size_t collect(char *ptr, size_t size, size_t n, void *ud)
{
	struct buf *b = ud;
	size_t len = size * n;
	if (b->len + len > (64u << 20))
		return 0;   /* no answer of ours is that big */
	buf_append(b, ptr, len);
	return len;
}

long relay_link_call(struct relay_link *l, const char *method, const char *path, const char *body, size_t len,
		     long timeout_ms, struct buf *out, char *err, size_t errlen)
{
	pthread_mutex_lock(&l->lock);
	int cur = l->cur;
	pthread_mutex_unlock(&l->lock);
	char *url = xasprintf("%s%s", l->urls[cur], path);
	CURL *h = curl_easy_init();
	struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
	setup(l, h, &hdr);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	if (body) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	}
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
	char detail[CURL_ERROR_SIZE] = "";
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, detail);
	alive_curl(h);
	CURLcode rc = curl_easy_perform(h);
	long status = -1;
	if (rc == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	else
		snprintf(err, errlen, "upstream %s: %s", l->urls[cur], detail[0] ? detail : curl_easy_strerror(rc));
	curl_easy_cleanup(h);
	credentials_free_headers(hdr);
	free(url);
	return status;
}
