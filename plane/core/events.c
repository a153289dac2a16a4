/* core/events.c: the operators' event bus and its SSE subscribers (see
 * events.h). The ring owns the events' data; a subscriber owns the bytes
 * it is sending (out). Sequence numbers start at the wall clock in
 * microseconds, so they grow across restarts too: an id from before a
 * restart is older than the ring and gets a reset, never a wrong gap. */
#include "core/events.h"
#include "alive.h"
#include "core/nodes.h"
#include "core/sse_writer.h"
#include "core/store.h"
#include "core/tokens.h"
#include "log.h"
#include "util.h"
#include "xmalloc.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RETRY_MS 2000
#define BATCH_BYTES 65536    /* the most one read gathers */

struct event {
	uint64_t seq;
	char type[16];
	char *data;
	size_t len;
};

struct events_sub {
	struct events *e;
	struct http_conn *conn;
	uint64_t next;            /* the next sequence number to send */
	char token_id[TOKEN_ID_LEN + 1];   /* the token it came with, or "" */
	/* under e->lock */
	bool suspended, closing, hb_due, registered;
	/* reader thread only */
	bool started, finished, reset;
	struct buf out;
	size_t off;
	struct events_sub *prev, *next_sub;
};

struct events {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t ticker;
	bool running, stop;
	double heartbeat;
	struct event ring[EVENTS_RING];
	uint64_t first;           /* the sequence number of the first event ever */
	uint64_t seq;             /* the last published (first - 1: none yet) */
	char last_rollout[64];    /* id/state/stage of the last rollout event */
	struct events_sub *subs;
	size_t nsubs;
	atomic_uint_fast64_t published, dropped, opened;
};

struct events *events_new(double heartbeat)
{
	struct events *e = xcalloc(1, sizeof(*e));
	pthread_mutex_init(&e->lock, NULL);
	pthread_cond_init(&e->cond, NULL);
	e->heartbeat = heartbeat > 0 ? heartbeat : 10;
	e->first = (uint64_t)wall_ms() * 1000;
	e->seq = e->first - 1;
	return e;
}

/* Under e->lock. */
static void wake(struct events_sub *s)
{
	if (s->suspended) {
		s->suspended = false;
		http_resume(s->conn);
	}
}

static void *ticker_main(void *arg)
{
	struct events *e = arg;
	int64_t ms = (int64_t)(e->heartbeat * 1000);
	alive_enter("events");
	pthread_mutex_lock(&e->lock);
	while (!e->stop) {
		alive_park(ms);
		cond_wait_ms(&e->cond, &e->lock, ms);
		alive_unpark();
		if (e->stop)
			break;
		for (struct events_sub *s = e->subs; s; s = s->next_sub) {
			s->hb_due = true;
			wake(s);
		}
	}
	pthread_mutex_unlock(&e->lock);
	alive_leave();
	return NULL;
}

int events_start(struct events *e, char *err, size_t errlen)
{
	if (pthread_create(&e->ticker, NULL, ticker_main, e) != 0) {
		snprintf(err, errlen, "cannot start the events thread");
		return -1;
	}
	e->running = true;
	return 0;
}

void events_stop(struct events *e)
{
	if (!e)
		return;
	pthread_mutex_lock(&e->lock);
	e->stop = true;
	for (struct events_sub *s = e->subs; s; s = s->next_sub) {
		s->closing = true;
		wake(s);
	}
	int64_t until = now_ms() + 3000;
	while (e->nsubs > 0 && now_ms() < until)
		cond_wait_ms(&e->cond, &e->lock, 50);
	pthread_cond_broadcast(&e->cond);
	pthread_mutex_unlock(&e->lock);
	if (e->running) {
		pthread_join(e->ticker, NULL);
		e->running = false;
	}
}

void events_free(struct events *e)
{
	if (!e)
		return;
	for (size_t i = 0; i < EVENTS_RING; i++)
		free(e->ring[i].data);
	pthread_mutex_destroy(&e->lock);
	pthread_cond_destroy(&e->cond);
	free(e);
}

void events_publish(struct events *e, const char *type, struct buf *data)
{
	if (!e) {
		buf_release(data);
		return;
	}
	size_t len;
	char *d = buf_detach(data, &len);
	pthread_mutex_lock(&e->lock);
	uint64_t seq = ++e->seq;
	struct event *ev = &e->ring[seq % EVENTS_RING];
	free(ev->data);
	ev->seq = seq;
	snprintf(ev->type, sizeof(ev->type), "%s", type);
	ev->data = d;
	ev->len = len;
	for (struct events_sub *s = e->subs; s; s = s->next_sub)
		wake(s);
	pthread_mutex_unlock(&e->lock);
	atomic_fetch_add(&e->published, 1);
}

void events_version(struct events *e, uint64_t version, const struct store_change *ch, size_t n,
		    const char *origin)
{
	if (!e)
		return;
	struct buf b = BUF_INIT;
	buf_printf(&b, "{\"version\":%llu,\"changes\":%zu,\"time\":%.3f,\"origin\":", (unsigned long long)version,
		   n, (double)wall_ms() / 1000);
	buf_json_string(&b, origin);
	buf_puts(&b, ",\"names\":[");
	/* the names of a big batch are its first 100 */
	for (size_t i = 0; ch && i < n && i < 100; i++) {
		if (i)
			buf_putc(&b, ',');
		buf_json_string(&b, ch[i].name);
	}
	buf_puts(&b, "]}");
	events_publish(e, "version", &b);
}

void events_ack(struct events *e, const struct ack_msg *m)
{
	if (!e)
		return;
	struct buf b = BUF_INIT;
	buf_puts(&b, "{\"node\":");
	buf_json_string(&b, m->node);
	buf_printf(&b, ",\"version\":%llu,\"time\":%.3f", (unsigned long long)m->version, (double)wall_ms() / 1000);
	if (m->healthy >= 0)
		buf_printf(&b, ",\"healthy\":%s", m->healthy ? "true" : "false");
	if (m->nack) {
		buf_puts(&b, m->held ? ",\"reason\":" : ",\"error\":");
		buf_json_string(&b, m->error ? m->error : "");
		if (m->verify)
			buf_puts(&b, ",\"verify\":true");
	}
	buf_putc(&b, '}');
	events_publish(e, m->nack && m->held ? "held" : m->nack ? "nack" : "ack", &b);
}

void events_key(struct events *e, const char *node, const char *kid, const char *what)
{
	if (!e)
		return;
	struct buf b = BUF_INIT;
	buf_puts(&b, "{\"node\":");
	buf_json_string(&b, node);
	buf_puts(&b, ",\"key_id\":");
	buf_json_string(&b, kid);
	buf_puts(&b, ",\"what\":");
	buf_json_string(&b, what);
	buf_printf(&b, ",\"time\":%.3f}", (double)wall_ms() / 1000);
	events_publish(e, "key", &b);
}

/* The first number after "key": in a JSON object (our own output). */
static unsigned long long json_num(const char *json, const char *key)
{
	const char *p = strstr(json, key);
	return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

void events_rollout(struct events *e, const char *json)
{
	if (!e || !json)
		return;
	struct buf b = BUF_INIT;
	buf_puts(&b, json);
	/* one event per transition: id, state and stage */
	char key[64];
	const char *st = strstr(b.data, "\"state\":\"");
	int slen = st ? (int)strcspn(st + 9, "\"") : 0;
	snprintf(key, sizeof(key), "%llu/%.*s/%llu", json_num(b.data, "\"id\":"), slen, st ? st + 9 : "",
		 json_num(b.data, "\"stage_index\":"));
	pthread_mutex_lock(&e->lock);
	bool same = strcmp(key, e->last_rollout) == 0;
	if (!same)
		snprintf(e->last_rollout, sizeof(e->last_rollout), "%s", key);
	pthread_mutex_unlock(&e->lock);
	if (same) {
		buf_release(&b);
		return;
	}
	events_publish(e, "rollout", &b);
}

void events_node(struct events *e, const char *node, bool connected)
{
	if (!e)
		return;
	struct buf b = BUF_INIT;
	buf_puts(&b, "{\"node\":");
	buf_json_string(&b, node);
	buf_printf(&b, ",\"connected\":%s,\"time\":%.3f}", connected ? "true" : "false", (double)wall_ms() / 1000);
	events_publish(e, "node", &b);
}

/* ---- subscribers ------------------------------------------------------------ */

struct events_sub *events_sub_new(struct events *e, struct http_conn *c, uint64_t last_id, bool resume,
				  const char *token_id)
{
	struct events_sub *s = xcalloc(1, sizeof(*s));
	s->e = e;
	s->conn = c;
	snprintf(s->token_id, sizeof(s->token_id), "%s", token_id ? token_id : "");
	buf_init(&s->out);
	pthread_mutex_lock(&e->lock);
	uint64_t oldest = e->seq >= e->first + EVENTS_RING ? e->seq - EVENTS_RING + 1 : e->first;
	if (!resume) {
		s->next = e->seq + 1;
	} else if (last_id + 1 < oldest || last_id > e->seq) {
		/* from before the ring, or another plane's: reload */
		s->reset = true;
		s->next = e->seq + 1;
	} else {
		s->next = last_id + 1;
	}
	s->registered = true;
	s->next_sub = e->subs;
	if (e->subs)
		e->subs->prev = s;
	e->subs = s;
	e->nsubs++;
	pthread_mutex_unlock(&e->lock);
	atomic_fetch_add(&e->opened, 1);
	return s;
}

size_t events_close_token(struct events *e, const char *token_id)
{
	size_t n = 0;
	if (!e || !token_id || !*token_id)
		return 0;
	pthread_mutex_lock(&e->lock);
	for (struct events_sub *s = e->subs; s; s = s->next_sub) {
		if (!s->closing && strcmp(s->token_id, token_id) == 0) {
			s->closing = true;
			wake(s);
			n++;
		}
	}
	pthread_mutex_unlock(&e->lock);
	return n;
}

void events_sub_free(void *cls)
{
	struct events_sub *s = cls;
	struct events *e = s->e;
	pthread_mutex_lock(&e->lock);
	if (s->registered) {
		if (s->prev)
			s->prev->next_sub = s->next_sub;
		else
			e->subs = s->next_sub;
		if (s->next_sub)
			s->next_sub->prev = s->prev;
		e->nsubs--;
	}
	pthread_cond_broadcast(&e->cond);
	pthread_mutex_unlock(&e->lock);
	buf_release(&s->out);
	free(s);
}

static size_t out_copy(struct events_sub *s, char *buf, size_t max)
{
	size_t left = s->out.len - s->off;
	if (!left)
		return 0;
	size_t n = left < max ? left : max;
	memcpy(buf, s->out.data + s->off, n);
	s->off += n;
	if (s->off == s->out.len) {
		buf_reset(&s->out);
		s->off = 0;
	}
	return n;
}

ssize_t events_sub_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct events_sub *s = cls;
	struct events *e = s->e;
	(void)pos;
	for (;;) {
		size_t n = out_copy(s, buf, max);
		if (n)
			return (ssize_t)n;
		if (s->finished)
			return HTTP_READER_END;
		char id[24];
		if (!s->started) {
			s->started = true;
			sse_write_retry(&s->out, RETRY_MS);
			if (s->reset) {
				struct buf d = BUF_INIT;
				pthread_mutex_lock(&e->lock);
				snprintf(id, sizeof(id), "%llu", (unsigned long long)e->seq);
				pthread_mutex_unlock(&e->lock);
				buf_puts(&d, "{\"reason\":\"the events since your last id are gone: reload\"}");
				sse_write_event(&s->out, "reset", id, d.data, d.len);
				buf_release(&d);
			}
			sse_write_comment(&s->out, "tether events");
			continue;
		}
		pthread_mutex_lock(&e->lock);
		uint64_t oldest = e->seq >= e->first + EVENTS_RING ? e->seq - EVENTS_RING + 1 : e->first;
		if (s->closing) {
			pthread_mutex_unlock(&e->lock);
			s->finished = true;
			return HTTP_READER_END;
		}
		if (s->next < oldest) {
			/* a whole ring behind: it reads too slowly to follow */
			pthread_mutex_unlock(&e->lock);
			atomic_fetch_add(&e->dropped, 1);
			log_info("events: a subscriber fell %d events behind; closed", EVENTS_RING);
			s->finished = true;
			return HTTP_READER_ERROR;
		}
		if (s->next > e->seq && !s->hb_due) {
			/* nothing to say: park until an event or a tick (a
			 * subscriber without a connection, a unit test's, is not) */
			if (s->conn) {
				s->suspended = true;
				http_suspend(s->conn);
			}
			pthread_mutex_unlock(&e->lock);
			return 0;
		}
		bool hb = s->hb_due;
		s->hb_due = false;
		while (s->next <= e->seq && s->out.len < BATCH_BYTES) {
			struct event *ev = &e->ring[s->next % EVENTS_RING];
			snprintf(id, sizeof(id), "%llu", (unsigned long long)ev->seq);
			sse_write_event(&s->out, ev->type, id, ev->data, ev->len);
			s->next++;
		}
		uint64_t last = e->seq;
		pthread_mutex_unlock(&e->lock);
		if (hb) {
			char d[96];
			int dl = snprintf(d, sizeof(d), "{\"time\":%lld,\"interval\":%g,\"last_id\":%llu}",
					  (long long)wall_seconds(), e->heartbeat, (unsigned long long)last);
			sse_write_event(&s->out, "heartbeat", NULL, d, (size_t)dl);
		}
	}
}

void events_metrics(struct events *e, struct buf *out)
{
	if (!e)
		return;
	pthread_mutex_lock(&e->lock);
	size_t n = e->nsubs;
	pthread_mutex_unlock(&e->lock);
	buf_printf(out,
		   "# HELP tether_events_subscribers Open GET /v1/events streams.\n"
		   "# TYPE tether_events_subscribers gauge\n"
		   "tether_events_subscribers %zu\n"
		   "# HELP tether_events_published_total Events published to /v1/events.\n"
		   "# TYPE tether_events_published_total counter\n"
		   "tether_events_published_total %llu\n"
		   "# HELP tether_events_subscribers_opened_total GET /v1/events streams opened.\n"
		   "# TYPE tether_events_subscribers_opened_total counter\n"
		   "tether_events_subscribers_opened_total %llu\n"
		   "# HELP tether_events_dropped_total /v1/events streams closed for reading too slowly.\n"
		   "# TYPE tether_events_dropped_total counter\n"
		   "tether_events_dropped_total %llu\n",
		   n, (unsigned long long)atomic_load(&e->published), (unsigned long long)atomic_load(&e->opened),
		   (unsigned long long)atomic_load(&e->dropped));
}
