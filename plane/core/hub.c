/* core/hub.c: streams, long-poll waiters, the ticker (heartbeats, deadlines)
 * and the keeper (what writes to the backend) (see hub.h). */
#include "core/hub.h"
#include "core/approvals.h"
#include "alive.h"
#include "core/core.h"
#include "core/events.h"
#include "core/freeze_state.h"
#include "core/freshness.h"
#include "core/nodes.h"
#include "core/overrides.h"
#include "core/pushcache.h"
#include "core/relay_feed.h"
#include "core/statements.h"
#include "core/store.h"
#include "core/tokens.h"
#include "gz.h"
#include "log.h"
#include "persist/persist.h"
#include "resource.h"
#include "sdnotify.h"
#include "strmap.h"
#include "util.h"
#include "xmalloc.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RETRY_MS 2000
#define FLUSH_EVERY_MS 200
#define PRUNE_EVERY_MS 60000
#define LOG_TRIM_EVERY_MS 1000   /* the history's age trim: a query, a write only when due */
#define LAG_EVERY_MS 1000
#define APPROVALS_EVERY_MS 1000  /* replicas: approvals another one took in */
/* A relay's stream hears a heartbeat at least this often (relays are few):
 * a relay cut off from us notices within three of them and says it is
 * stale, and its nodes move (freshness.h). */
#define RELAY_HEARTBEAT_MAX_S 2.0

/* A relay stream's credential as it keeps it (a token id or a principal's name). */
#define CRED_MAX 320

struct stream {
	struct hub *hub;
	struct http_conn *conn;
	char token_id[TOKEN_ID_LEN + 1];   /* the token it came with, or "" */
	char *cred;                        /* a relay's: its credential (hub_relay_new), malloc'd,
					    * at most CRED_MAX - 1 bytes; NULL: a node's stream, or "" */
	struct sub sub;
	uint64_t sent;               /* the node holds (or was sent) this version */
	/* under hub->lock */
	bool suspended, closing, hb_due;
	uint64_t holds;              /* + 1: what the node said it runs after a NACK */
	/* reader thread only */
	bool started, finished, gzip, gz_started;
	bool held;                   /* a push waits for its statement (a relay) */
	/* the node holds its target but the plane has no record of sending
	 * it nor an ACK (a crash lost them): one version-only push at the
	 * start gives it a nonce to ACK */
	bool reack;
	uint32_t crc, isize;
	/* a relay's stream (reader thread only, but relay): what it was
	 * sent of the token records and the rollout */
	bool relay, state_sent;
	uint64_t tok_gen, ro_gen, ap_gen;
	char *own;                   /* this event's own bytes (malloc'd while it is sent) */
	size_t own_len;
	struct push_blob *blob;
	const char *blob_data;
	size_t blob_len;
	char trail[4];
	size_t trail_len;
	size_t off;
	struct stream *prev, *next;
	/* its node's (or relay's) name, allocated with it (stream_alloc): a
	 * stream holds only the bytes its name needs */
	char node[];
};

struct waiter {
	struct http_conn *conn;
	char node[RES_NAME_MAX + 1];
	char token_id[TOKEN_ID_LEN + 1];
	uint64_t have;                /* the node's target when it began waiting */
	int64_t deadline_ms;
	bool registered;
	struct waiter *prev, *next;
};

struct hub {
	struct core *p;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_cond_t keeper_cond;     /* wakes the keeper (to stop, or to step a rollout) */
	pthread_t ticker, keeper;
	bool ticker_running, keeper_running, stop;
	bool wedged;                    /* the ticker's: a thread stopped turning */
	atomic_uint_fast64_t version;
	struct stream *streams;
	size_t nstreams;
	struct strmap by_node;       /* node -> its newest stream (keys: the stream's node) */
	struct strmap by_relay;      /* relay -> its newest stream (keys: the stream's node field) */
	struct waiter *waiters;
};

struct hub *hub_new(struct core *p, uint64_t version)
{
	struct hub *h = xcalloc(1, sizeof(*h));
	h->p = p;
	strmap_init(&h->by_node);
	strmap_init(&h->by_relay);
	pthread_mutex_init(&h->lock, NULL);
	pthread_cond_init(&h->cond, NULL);
	pthread_cond_init(&h->keeper_cond, NULL);
	atomic_init(&h->version, version);
	return h;
}

uint64_t hub_version(struct hub *h)
{
	return atomic_load(&h->version);
}

size_t hub_stream_count(struct hub *h)
{
	pthread_mutex_lock(&h->lock);
	size_t n = h->nstreams;
	pthread_mutex_unlock(&h->lock);
	return n;
}

/* Call with h->lock held. */
static void wake_stream(struct stream *st)
{
	if (st->suspended) {
		st->suspended = false;
		http_resume(st->conn);
	}
}

static void wake_waiter(struct hub *h, struct waiter *w)
{
	if (!w->registered)
		return;
	if (w->prev)
		w->prev->next = w->next;
	else
		h->waiters = w->next;
	if (w->next)
		w->next->prev = w->prev;
	w->registered = false;
	http_resume(w->conn);
}

void hub_wake_keeper(struct hub *h)
{
	pthread_mutex_lock(&h->lock);
	pthread_cond_broadcast(&h->keeper_cond);
	pthread_mutex_unlock(&h->lock);
}

void hub_notify(struct hub *h, uint64_t version)
{
	/* only forward: two notifiers may race with versions out of order */
	uint_fast64_t cur = atomic_load(&h->version);
	while (cur < version && !atomic_compare_exchange_weak(&h->version, &cur, version))
		;
	pthread_mutex_lock(&h->lock);
	for (struct stream *st = h->streams; st; st = st->next)
		wake_stream(st);
	/* a long-poll answers when its node's target moved */
	for (struct waiter *w = h->waiters, *next; w; w = next) {
		next = w->next;
		if (core_target(h->p, w->node) != w->have)
			wake_waiter(h, w);
	}
	pthread_mutex_unlock(&h->lock);
}

/* ---- streams -------------------------------------------------------------- */

/* Under h->lock: st joins the list and is the newest of its name in map
 * (a node's or a relay's); an older stream of that name is closed. */
static void list_add(struct hub *h, struct strmap *map, struct stream *st)
{
	intptr_t old = 0;
	if (strmap_get(map, st->node, &old) && old) {
		struct stream *o = (struct stream *)old;
		if (!o->closing) {
			o->closing = true;
			wake_stream(o);
			if (map == &h->by_node)
				atomic_fetch_add(&h->p->ctr.streams_replaced, 1);
		}
	}
	strmap_put(map, st->node, (intptr_t)st);
	st->next = h->streams;
	if (h->streams)
		h->streams->prev = st;
	h->streams = st;
	h->nstreams++;
}

/* st leaves the list (and map, where it is the newest of its name). */
static void list_remove(struct hub *h, struct strmap *map, struct stream *st)
{
	pthread_mutex_lock(&h->lock);
	if (st->prev)
		st->prev->next = st->next;
	else
		h->streams = st->next;
	if (st->next)
		st->next->prev = st->prev;
	h->nstreams--;
	intptr_t cur = 0;
	if (strmap_get(map, st->node, &cur) && cur == (intptr_t)st)
		strmap_del(map, st->node);
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->lock);
}

/* A zeroed stream with room for name (at most RES_NAME_MAX bytes of it) in
 * st->node. */
static struct stream *stream_alloc(const char *name)
{
	size_t n = strnlen(name, RES_NAME_MAX);
	struct stream *st = xcalloc(1, sizeof(*st) + n + 1);
	memcpy(st->node, name, n);
	return st;
}

struct stream *hub_stream_new(struct hub *h, struct http_conn *c, const char *node, uint64_t have,
			      struct sub *sub, bool gzip, const char *token_id, bool unacked)
{
	struct stream *st = stream_alloc(node);
	st->hub = h;
	st->conn = c;
	snprintf(st->token_id, sizeof(st->token_id), "%s", token_id ? token_id : "");
	st->sub = *sub;
	memset(sub, 0, sizeof(*sub));
	st->sent = have;
	st->gzip = gzip;
	uint64_t sent, acked;
	int healthy;
	/* a node the plane sent pushes before, that holds a version it has
	 * not ACKed: the plane has no record of sending it (a crash lost
	 * it), or the node says so (unacked=1: it finished that apply at
	 * boot, and never ACKs at boot). A new node that claims a version,
	 * or one whose ACK or push is merely in flight, gets nothing extra. */
	st->reack = have > 0 && nodes_versions(h->p->nodes, node, &sent, &acked, &healthy) && sent > 0 &&
		    (sent < have || unacked) && acked < have;

	pthread_mutex_lock(&h->lock);
	/* one stream per node: a reconnect replaces a stream that may be dead
	 * (found by the index: a reconnect storm must not scan every stream) */
	list_add(h, &h->by_node, st);
	pthread_mutex_unlock(&h->lock);
	nodes_stream_open(h->p->nodes, node);
	events_node(h->p->events, node, true);
	atomic_fetch_add(&h->p->ctr.streams_opened, 1);
	return st;
}

struct stream *hub_relay_new(struct hub *h, struct http_conn *c, const char *relay, uint64_t have,
			     const char *token_id, const char *cred)
{
	struct stream *st = stream_alloc(relay);
	st->hub = h;
	st->conn = c;
	st->relay = true;
	st->tok_gen = st->ro_gen = UINT64_MAX;   /* both go out first */
	snprintf(st->token_id, sizeof(st->token_id), "%s", token_id ? token_id : "");
	xstr_set(&st->cred, cred, CRED_MAX);
	st->sent = have;
	pthread_mutex_lock(&h->lock);
	list_add(h, &h->by_relay, st);   /* one stream per relay */
	pthread_mutex_unlock(&h->lock);
	atomic_fetch_add(&h->p->ctr.streams_opened, 1);
	log_info("relay %s: following from version %llu", relay, (unsigned long long)have);
	return st;
}

bool hub_relay_up(struct hub *h, const char *relay)
{
	pthread_mutex_lock(&h->lock);
	intptr_t v = 0;
	bool up = strmap_get(&h->by_relay, relay, &v) && v && !((struct stream *)v)->closing;
	pthread_mutex_unlock(&h->lock);
	return up;
}

bool hub_relay_by(struct hub *h, const char *relay, const char *cred)
{
	pthread_mutex_lock(&h->lock);
	intptr_t v = 0;
	bool ok = strmap_get(&h->by_relay, relay, &v) && v && !((struct stream *)v)->closing &&
		  strcmp(((struct stream *)v)->cred ? ((struct stream *)v)->cred : "", cred ? cred : "") == 0;
	pthread_mutex_unlock(&h->lock);
	return ok;
}

void hub_stream_free(void *cls)
{
	struct stream *st = cls;
	struct hub *h = st->hub;
	list_remove(h, st->relay ? &h->by_relay : &h->by_node, st);
	if (st->relay)
		log_info("relay %s: stream closed", st->node);
	else
		nodes_stream_close(h->p->nodes, st->node);
	if (!st->relay)
		events_node(h->p->events, st->node, false);
	push_blob_unref(st->blob);
	sub_release(&st->sub);
	free(st->own);
	if (st->cred) {
		explicit_bzero(st->cred, strlen(st->cred));   /* a secret */
		free(st->cred);
	}
	free(st);
}

/* Puts text into the stream's own bytes (taking text's memory): as is, or
 * as a stored gzip block (after the gzip header on the first event). */
static void set_own(struct stream *st, struct buf *text)
{
	free(st->own);
	if (!st->gzip) {
		st->own = buf_detach(text, &st->own_len);
		return;
	}
	struct buf b = BUF_INIT;
	if (!st->gz_started) {
		gz_stream_header(&b);
		st->gz_started = true;
	}
	gz_stream_stored(text->data, text->len, &b);
	st->crc = gz_crc32(st->crc, text->data, text->len);
	st->isize += (uint32_t)text->len;
	buf_release(text);
	st->own = buf_detach(&b, &st->own_len);
}

static size_t out_copy(struct stream *st, char *buf, size_t max)
{
	const char *seg[3] = { st->own, st->blob_data, st->trail };
	size_t segn[3] = { st->own_len, st->blob_len, st->trail_len };
	size_t done = 0, base = 0, total = 0;
	for (int i = 0; i < 3; i++) {
		if (st->off < base + segn[i] && done < max) {
			size_t from = st->off - base, k = segn[i] - from;
			if (k > max - done)
				k = max - done;
			memcpy(buf + done, seg[i] + from, k);
			done += k;
			st->off += k;
		}
		base += segn[i];
	}
	total = base;
	if (st->off == total) {
		push_blob_unref(st->blob);
		st->blob = NULL;
		st->blob_data = NULL;
		free(st->own);
		st->own = NULL;
		st->own_len = st->blob_len = st->trail_len = st->off = 0;
	}
	return done;
}

/* How often nodes report their traffic, in seconds (0: they do not): a
 * gated rollout runs here (every second), or upstream of a relay (as
 * often as the upstream asks). */
static unsigned report_every(struct core *p, const struct persist_stats *ps)
{
	return core_wants_reports(p) ? 1 : ps->report_s;
}

static struct persist_stats stats_of(struct core *p)
{
	struct persist_stats ps = { .writable = true };
	if (p->persist->ops->stats)
		p->persist->ops->stats(p->persist, &ps);
	return ps;
}

static void make_heartbeat(struct stream *st, const char *pre)
{
	struct hub *h = st->hub;
	struct buf text = BUF_INIT;
	/* the version this node should hold: the newest, or its rollout target */
	uint64_t target = core_target(h->p, st->node);
	if (h->p->approvals)   /* a held node still there keeps its history */
		approvals_seen(h->p->approvals, st->node);
	buf_printf(&text, "%sevent: heartbeat\ndata: {\"version\":%llu,\"time\":%lld,\"interval\":%g", pre,
		   (unsigned long long)target, (long long)wall_seconds(), h->p->cfg.heartbeat);
	/* the signed word that the target is current: a node that hears no
	 * fresh one (a frozen or replayed feed) knows it is stale */
	char *stmt = h->p->statements ? statements_get(h->p->statements, target, &st->sub, NULL) : NULL;
	if (stmt) {
		/* puts, not printf: a token is long and every stream writes it */
		buf_puts(&text, ",\"statement\":\"");
		buf_puts(&text, stmt);
		buf_putc(&text, '"');
		free(stmt);
	}
	struct persist_stats ps = stats_of(h->p);
	/* a rollout with traffic gates runs (here, or upstream of a relay):
	 * nodes report what they serve */
	unsigned every = report_every(h->p, &ps);
	if (every)
		buf_printf(&text, ",\"report\":%u", every);
	/* a shared store without quorum: we serve what we have, and say so */
	if (!ps.writable)
		buf_puts(&text, ",\"read_only\":true");
	/* a relay without its upstream: what we serve may be old */
	if (ps.upstream_down)
		buf_puts(&text, ",\"upstream_down\":true");
	/* cut off from our source: nodes move to a plane that is current */
	freshness_member(h->p->fresh, &text);
	buf_puts(&text, "}\n\n");
	set_own(st, &text);
	atomic_fetch_add(&h->p->ctr.heartbeats, 1);
}

/* Returns false (and sends nothing) when the node's target turned out to
 * be what it holds already. */
static bool make_push(struct stream *st, const char *pre, uint64_t from)
{
	struct core *p = st->hub->p;
	struct push_blob *b = pushcache_get_for(p->pushes, from, st->node, &st->sub);
	bool reack = st->reack;
	st->reack = false;
	if (st->started && b->version == st->sent && !(reack && b->version == from)) {
		push_blob_unref(b);
		return false;
	}
	char nonce[NONCE_MAX];
	struct buf text = BUF_INIT;
	core_nonce(p, nonce, sizeof(nonce));
	buf_printf(&text, "%sevent: push\nid: %llu\ndata: {\"nonce\":\"%s\"", pre,
		   (unsigned long long)b->version, nonce);
	freshness_member(p->fresh, &text);
	buf_putc(&text, ',');
	/* the statement of the state this push brings the node to: one per
	 * (version, subscription), whatever the node's base */
	char *stmt = p->statements ? statements_get(p->statements, b->version, &st->sub,
						    b->has_digest ? b->digest : NULL) : NULL;
	if (!stmt && p->statements && statements_expected(p->statements)) {
		/* a relay that cannot get the upstream's statement now: a bare
		 * push would only be refused; the next tick tries again */
		log_debug("stream %s: push of version %llu held: no signed statement of it yet", st->node,
			  (unsigned long long)b->version);
		push_blob_unref(b);
		buf_release(&text);
		return false;
	}
	/* unsigned: the newest overridden version, for nodes without --trust */
	overrides_push_field(p->overrides, b->version, core_is_relay(p) ? stmt : NULL, &text);
	if (stmt) {
		buf_puts(&text, "\"statement\":\"");
		buf_puts(&text, stmt);
		buf_puts(&text, "\",");
		free(stmt);
	}
	if (p->approvals)   /* a node that requires approvals gets them beside the statement */
		approvals_push_json(p->approvals, st->node, b->version, &text);
	set_own(st, &text);
	st->blob = b;
	if (st->gzip) {
		pushcache_gzip(p->pushes, b);
		st->blob_data = b->gz;
		st->blob_len = b->gz_len;
		st->crc = gz_crc32_combine(st->crc, b->gz_crc, b->raw_len + 2);
		st->isize += (uint32_t)(b->raw_len + 2);
	} else {
		st->blob_data = b->raw;
		st->blob_len = b->raw_len;
		memcpy(st->trail, "\n\n", 2);
		st->trail_len = 2;
	}
	log_debug("stream %s: push %llu -> %llu (%s, %zu upserts, %zu removed)", st->node,
		  (unsigned long long)from, (unsigned long long)b->version, b->full ? "snapshot" : "delta",
		  b->nup, b->nrm);
	st->sent = b->version;
	core_sent(p, st->node, b->version, nonce, b->nup + b->nrm > 0);
	atomic_fetch_add(&p->ctr.pushes, 1);
	if (b->full)
		atomic_fetch_add(&p->ctr.snapshots, 1);
	atomic_fetch_add(&p->ctr.push_bytes, st->own_len + st->blob_len + st->trail_len);
	return true;
}

/* One event of a relay stream into the stream's own bytes. */
static void relay_event(struct stream *st, const char *pre, const char *type, struct buf *data)
{
	struct buf text = BUF_INIT;
	buf_reserve(&text, data->len + 64);
	buf_printf(&text, "%sevent: %s\ndata: ", pre, type);
	buf_append(&text, data->data, data->len);
	buf_puts(&text, "\n\n");
	buf_release(data);
	atomic_fetch_add(&st->hub->p->ctr.push_bytes, text.len);
	set_own(st, &text);
}

static double relay_heartbeat_s(const struct core *p)
{
	return p->cfg.heartbeat < RELAY_HEARTBEAT_MAX_S ? p->cfg.heartbeat : RELAY_HEARTBEAT_MAX_S;
}

/* A relay's stream: the token records, the rollout record, the state
 * (every state after what the relay holds) and heartbeats, each when it
 * moved (docs/protocol.md, "Relays"). */
static ssize_t relay_read(struct stream *st, char *buf, size_t max)
{
	struct hub *h = st->hub;
	struct core *p = h->p;
	for (;;) {
		size_t n = out_copy(st, buf, max);
		if (n)
			return (ssize_t)n;
		if (st->finished)
			return HTTP_READER_END;
		pthread_mutex_lock(&h->lock);
		bool closing = st->closing, hb = st->hb_due;
		uint64_t v = hub_version(h);
		bool need_tok = tokens_gen(p->tokens) != st->tok_gen;
		bool need_ro = core_rollout_gen(p) != st->ro_gen;
		/* the approvals a relay's nodes need with their pushes */
		bool need_ap = p->approvals && approvals_gen(p->approvals) != st->ap_gen;
		/* a relay ahead of us (we follow a lagging upstream) waits */
		bool need_state = (!st->state_sent && st->sent <= v) || v > st->sent;
		if (!closing && !need_tok && !need_ro && !need_state && !need_ap && !hb) {
			st->suspended = true;
			http_suspend(st->conn);
			pthread_mutex_unlock(&h->lock);
			return 0;
		}
		pthread_mutex_unlock(&h->lock);
		if (closing) {
			st->finished = true;
			return HTTP_READER_END;
		}
		char pre[32] = "";
		if (!st->started) {
			snprintf(pre, sizeof(pre), "retry: %d\n\n", RETRY_MS);
			st->started = true;
			pthread_mutex_lock(&h->lock);
			st->hb_due = true;   /* after the state: the interval at once */
			pthread_mutex_unlock(&h->lock);
		}
		struct buf data = BUF_INIT;
		if (need_tok) {
			st->tok_gen = tokens_gen(p->tokens);
			tokens_records_json(p->tokens, &data);
			relay_event(st, pre, "tokens", &data);
		} else if (need_ro) {
			st->ro_gen = core_rollout_gen(p);
			core_rollout_json(p, v, &data);
			relay_event(st, pre, "rollout", &data);
		} else if (need_ap) {
			st->ap_gen = approvals_gen(p->approvals);
			approvals_relay_seen(p->approvals);
			approvals_all_json(p->approvals, &data);
			relay_event(st, pre, "approvals", &data);
		} else if (need_state) {
			uint64_t to;
			bool full;
			relay_feed_encode(p->store, st->sent, core_released(p, v), &data, &to, &full);
			/* the overridden versions it brings: a relay keeps no log, and
			 * an unsigned plane's pushes have no statement to copy from */
			overrides_relay_member(p->overrides, full ? 0 : st->sent, to, &data);
			char *stmt = p->statements ? statements_get(p->statements, to, NULL, NULL) : NULL;
			if (stmt) {
				buf_puts(&data, ",\"statement\":\"");
				buf_puts(&data, stmt);
				buf_putc(&data, '"');
				free(stmt);
			}
			buf_putc(&data, '}');
			log_debug("relay %s: state %llu -> %llu (%zu bytes)", st->node, (unsigned long long)st->sent,
				  (unsigned long long)to, data.len);
			st->sent = to;
			st->state_sent = true;
			atomic_fetch_add(&p->ctr.pushes, 1);
			if (full)
				atomic_fetch_add(&p->ctr.snapshots, 1);
			relay_event(st, pre, "state", &data);
		} else {
			pthread_mutex_lock(&h->lock);
			st->hb_due = false;
			pthread_mutex_unlock(&h->lock);
			buf_printf(&data, "{\"version\":%llu,\"time\":%lld,\"interval\":%g", (unsigned long long)v,
				   (long long)wall_seconds(), relay_heartbeat_s(p));
			freshness_member(p->fresh, &data);
			char *stmt = p->statements ? statements_get(p->statements, v, NULL, NULL) : NULL;
			if (stmt) {
				buf_puts(&data, ",\"statement\":\"");
				buf_puts(&data, stmt);
				buf_putc(&data, '"');
				free(stmt);
			}
			struct persist_stats ps = stats_of(p);
			unsigned every = report_every(p, &ps);
			if (every)   /* the relay's nodes report, and it passes them up */
				buf_printf(&data, ",\"report\":%u", every);
			buf_putc(&data, '}');
			atomic_fetch_add(&p->ctr.heartbeats, 1);
			if (p->approvals)   /* a relay's held nodes want old statements */
				approvals_relay_seen(p->approvals);
			relay_event(st, pre, "heartbeat", &data);
		}
	}
}

ssize_t hub_stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct stream *st = cls;
	struct hub *h = st->hub;
	(void)pos;
	if (st->relay)
		return relay_read(st, buf, max);
	for (;;) {
		size_t n = out_copy(st, buf, max);
		if (n)
			return (ssize_t)n;
		if (st->finished)
			return HTTP_READER_END;

		pthread_mutex_lock(&h->lock);
		bool closing = st->closing, hb = st->hb_due;
		/* read under the lock: a commit or a retarget wakes us after */
		uint64_t v = core_target(h->p, st->node);
		/* at the start any difference needs a push (a node ahead of the
		 * plane gets a snapshot and decides); later only newer versions */
		bool need_push = st->started ? v > st->sent : v != st->sent || st->reack;
		/* a push held for want of its statement is tried again at the
		 * next tick, not in a loop */
		if (st->held && !hb)
			need_push = false;
		if (!closing && !need_push && !(hb || !st->started)) {
			/* nothing to say: park the connection until a commit or a tick */
			st->suspended = true;
			http_suspend(st->conn);
			pthread_mutex_unlock(&h->lock);
			return 0;
		}
		st->hb_due = false;
		/* the delta starts where the node is: what it was sent, or what
		 * it said it still runs after refusing that */
		uint64_t holds = st->holds;
		uint64_t from = holds && holds - 1 < st->sent ? holds - 1 : st->sent;
		pthread_mutex_unlock(&h->lock);

		if (closing) {
			st->finished = true;
			if (st->gzip && st->gz_started) {
				struct buf b = BUF_INIT;
				gz_stream_trailer(st->crc, st->isize, &b);
				free(st->own);
				st->own = buf_detach(&b, &st->own_len);
				continue;
			}
			return HTTP_READER_END;
		}
		char pre[32] = "";
		if (!st->started) {
			snprintf(pre, sizeof(pre), "retry: %d\n\n", RETRY_MS);
			st->started = true;
			/* a heartbeat right behind the first push: the client learns
			 * the interval (its dead-stream timeout) at once */
			if (need_push) {
				pthread_mutex_lock(&h->lock);
				st->hb_due = true;
				pthread_mutex_unlock(&h->lock);
			}
		}
		st->held = false;
		if (need_push && make_push(st, pre, from)) {
			pthread_mutex_lock(&h->lock);
			if (st->holds == holds)
				st->holds = 0;   /* used */
			pthread_mutex_unlock(&h->lock);
		} else {
			st->held = need_push && v > st->sent;
			make_heartbeat(st, pre);
		}
	}
}

size_t hub_close_token(struct hub *h, const char *token_id)
{
	size_t n = 0;
	pthread_mutex_lock(&h->lock);
	for (struct stream *st = h->streams; st; st = st->next) {
		if (!st->closing && strcmp(st->token_id, token_id) == 0) {
			st->closing = true;
			wake_stream(st);
			n++;
		}
	}
	/* a long-poll answers again, and is refused then */
	for (struct waiter *w = h->waiters, *next; w; w = next) {
		next = w->next;
		if (strcmp(w->token_id, token_id) == 0) {
			wake_waiter(h, w);
			n++;
		}
	}
	pthread_mutex_unlock(&h->lock);
	return n + events_close_token(h->p->events, token_id);   /* GET /v1/events too */
}

void hub_stream_holds(struct hub *h, const char *node, uint64_t version)
{
	pthread_mutex_lock(&h->lock);
	/* the reader uses it when it is below what it sent (st->sent is the
	 * reader's own) */
	intptr_t v = 0;
	if (strmap_get(&h->by_node, node, &v) && v) {
		struct stream *st = (struct stream *)v;
		if (!st->closing)
			st->holds = version + 1;
	}
	pthread_mutex_unlock(&h->lock);
}

/* ---- long-poll waiters ---------------------------------------------------- */

struct waiter *hub_waiter_add(struct hub *h, struct http_conn *c, const char *node, uint64_t have,
			      int64_t deadline_ms, const char *token_id)
{
	pthread_mutex_lock(&h->lock);
	if (core_target(h->p, node) != have || h->stop) {
		pthread_mutex_unlock(&h->lock);
		return NULL;
	}
	struct waiter *w = xcalloc(1, sizeof(*w));
	w->conn = c;
	snprintf(w->node, sizeof(w->node), "%s", node);
	snprintf(w->token_id, sizeof(w->token_id), "%s", token_id ? token_id : "");
	w->have = have;
	w->deadline_ms = deadline_ms;
	w->registered = true;
	w->next = h->waiters;
	if (h->waiters)
		h->waiters->prev = w;
	h->waiters = w;
	http_suspend(c);
	pthread_mutex_unlock(&h->lock);
	return w;
}

void hub_waiter_release(struct hub *h, struct waiter *w)
{
	pthread_mutex_lock(&h->lock);
	if (w->registered) {
		/* still parked: unlink without resuming (the connection is gone) */
		if (w->prev)
			w->prev->next = w->next;
		else
			h->waiters = w->next;
		if (w->next)
			w->next->prev = w->prev;
		w->registered = false;
	}
	pthread_mutex_unlock(&h->lock);
	free(w);
}

/* ---- ticker ---------------------------------------------------------------- */

/* Waits on h->cond (h->lock held) for at most ms milliseconds. */
static void wait_for(struct hub *h, int64_t ms)
{
	alive_park(ms);
	cond_wait_ms(&h->cond, &h->lock, ms);
	alive_unpark();
}

/* systemd's watchdog is fed while every watched thread turns (alive.h);
 * the one that does not is named, once a stretch. The bound is the
 * watchdog's own interval, at least 30 s: a thread may wait on a lock
 * held across backend calls (5 s each, one per endpoint) without a beat. */
static void feed_watchdog(struct hub *h)
{
	int64_t bound = sdnotify_watchdog_ms();
	if (bound <= 0)
		return;
	if (bound < 30000)
		bound = 30000;
	char who[128];
	if (alive_check(bound, who, sizeof(who)) == 0) {
		if (h->wedged)
			log_info("watchdog: every thread turns again; feeding systemd's watchdog");
		h->wedged = false;
		sdnotify_watchdog_tick();
		return;
	}
	if (!h->wedged)
		log_error("watchdog: thread %s; systemd's watchdog is no longer fed", who);
	h->wedged = true;
}

/* systemd's STATUS= line: what `systemctl status tether-plane` shows.
 * Counting the nodes scans every record: not done when no one listens. */
static void notify_status(struct hub *h)
{
	if (!sdnotify_active())
		return;
	struct nodes_stats st;
	char line[160];
	nodes_stats(h->p->nodes, &st);
	snprintf(line, sizeof(line), "version %llu, %zu nodes (%zu connected, %zu lagging), %zu streams",
		 (unsigned long long)atomic_load(&h->version), st.nodes, st.connected, st.lagging, hub_stream_count(h));
	sdnotify_status(line);
}

static void *ticker_main(void *arg)
{
	struct hub *h = arg;
	struct core *p = h->p;
	int64_t interval = (int64_t)(p->cfg.heartbeat * 1000);
	int64_t relay_interval = (int64_t)(relay_heartbeat_s(p) * 1000);
	int64_t next_hb = now_ms() + interval, next_lag = now_ms() + LAG_EVERY_MS;
	int64_t next_relay_hb = now_ms() + relay_interval, recheck = 0;

	alive_enter("ticker");
	pthread_mutex_lock(&h->lock);
	while (!h->stop) {
		int64_t now = now_ms();
		alive_beat();
		/* stale or current again: every stream hears it now, not at
		 * its next heartbeat */
		bool told = false;
		if (now >= recheck) {
			pthread_mutex_unlock(&h->lock);
			told = freshness_update(p->fresh, p->persist, &recheck);
			if (told) {
				struct buf ev = BUF_INIT;
				struct fresh_view fv;
				freshness_get(p->fresh, &fv);
				buf_printf(&ev, "{\"current\":%s", fv.stale ? "false" : "true");
				freshness_member(p->fresh, &ev);
				buf_putc(&ev, '}');
				events_publish(p->events, "plane", &ev);
			}
			if (!recheck)
				recheck = now + interval;
			pthread_mutex_lock(&h->lock);
		}
		if (now >= next_hb || told) {
			for (struct stream *st = h->streams; st; st = st->next) {
				st->hb_due = true;
				wake_stream(st);
			}
			next_hb = now + interval;
			next_relay_hb = now + relay_interval;
		} else if (now >= next_relay_hb && h->by_relay.len) {
			for (struct stream *st = h->streams; st; st = st->next) {
				if (st->relay) {
					st->hb_due = true;
					wake_stream(st);
				}
			}
			next_relay_hb = now + relay_interval;
		}
		/* long-polls answer at once too (a 304 with Tether-Stale) */
		for (struct waiter *w = h->waiters, *next; w; w = next) {
			next = w->next;
			if (now >= w->deadline_ms || told)
				wake_waiter(h, w);
		}
		pthread_mutex_unlock(&h->lock);

		if (now >= next_lag) {
			nodes_check_lag(p->nodes, atomic_load(&h->version));
			notify_status(h);
			next_lag = now + LAG_EVERY_MS;
		}
		/* the ticker takes the hub's lock and sends the heartbeats,
		 * and the other threads beat: while all turn, the plane is
		 * not wedged */
		feed_watchdog(h);

		pthread_mutex_lock(&h->lock);
		if (h->stop)
			break;
		/* wake at the next heartbeat, lag check, freshness check or
		 * waiter deadline */
		int64_t wake = next_hb < next_lag ? next_hb : next_lag;
		if (next_relay_hb < wake && h->by_relay.len)
			wake = next_relay_hb;
		if (recheck < wake)
			wake = recheck;
		for (struct waiter *w = h->waiters; w; w = w->next)
			if (w->deadline_ms < wake)
				wake = w->deadline_ms;
		int64_t wait_ms = wake - now_ms();
		if (wait_ms > 0)
			wait_for(h, wait_ms);
	}
	pthread_mutex_unlock(&h->lock);
	alive_leave();
	return NULL;
}

/* Console sessions that ended: what they opened is closed; records long
 * expired are dropped (core/tokens.h). Returns when to look again. */
static int64_t expire_sessions(struct hub *h)
{
	char (*ids)[TOKEN_ID_LEN + 1] = NULL, err[512];
	size_t n = 0;
	int64_t again = now_ms() + 1000;
	if (tokens_expire(h->p->tokens, wall_seconds(), &ids, &n, err, sizeof(err)) < 0) {
		log_warn("tokens: cannot drop expired console sessions: %s (again in a minute)", err);
		again = now_ms() + PRUNE_EVERY_MS;
	}
	for (size_t i = 0; i < n; i++) {
		size_t closed = hub_close_token(h, ids[i]);
		log_info("tokens: console session %s expired; %zu open connections closed", ids[i], closed);
	}
	free(ids);
	return again;
}

/* The keeper: what writes to the store's backend -- the rollout's gates,
 * node records, old tombstones, the history's age trim, expired console sessions. Apart from the ticker, so a backend that
 * stalls (etcd electing a leader) never holds up heartbeats. */
static void *keeper_main(void *arg)
{
	struct hub *h = arg;
	struct core *p = h->p;
	int64_t next_prune = now_ms() + PRUNE_EVERY_MS, next_flush_warn = 0, next_log_trim = 0, next_approvals = 0,
		next_approvals_trim = 0, next_expire = 0;
	char err[512];
	alive_enter("keeper");
	pthread_mutex_lock(&h->lock);
	while (!h->stop) {
		pthread_mutex_unlock(&h->lock);
		alive_beat();
		/* a freeze that ended by itself, or one another replica set */
		freeze_state_tick(p->freeze);
		/* the rollout's gates: bake time, ACK timeouts, next rollout */
		core_step(p);
		if (nodes_flush(p->nodes, err, sizeof(err)) < 0) {
			/* every 200 ms while the backend (or a relay's upstream)
			 * is away: say it once in a while, not each time */
			if (now_ms() >= next_flush_warn) {
				log_warn("nodes: cannot save node records: %s (will retry)", err);
				next_flush_warn = now_ms() + 10000;
			}
		} else {
			next_flush_warn = 0;
		}
		if (now_ms() >= next_prune) {
			store_write_lock(p->store);
			if (store_prune_aged(p->store, wall_seconds(), err, sizeof(err)) < 0)
				log_warn("store: cannot drop old tombstones: %s", err);
			store_write_unlock(p->store);
			next_prune = now_ms() + PRUNE_EVERY_MS;
		}
		if (now_ms() >= next_log_trim) {
			/* versions past --history-max-age go though no write comes */
			int64_t wait = LOG_TRIM_EVERY_MS;
			if (store_trim_log(p->store, wall_seconds(), err, sizeof(err)) < 0) {
				log_warn("history: cannot drop versions past --history-max-age: %s (again in 10 s)", err);
				wait = 10000;
			}
			next_log_trim = now_ms() + wait;
		}
		if (p->tokens && now_ms() >= next_expire)
			next_expire = expire_sessions(h);
		if (p->approvals && now_ms() >= next_approvals) {
			/* replicas: approvals another one took in (core/approvals.h) */
			struct persist_stats ps = stats_of(p);
			int n = ps.shared ? approvals_load(p->approvals, err, sizeof(err)) : 0;
			if (n < 0)
				log_warn("approvals: cannot read them from the store: %s (again in 1 s)", err);
			/* the history the hold needs follows the nodes up */
			approvals_keep(p->approvals, p->store);
			uint64_t lfloor;
			if (now_ms() >= next_approvals_trim && p->persist->ops->log_floor &&
			    p->persist->ops->log_floor(p->persist, &lfloor, err, sizeof(err)) == 0) {
				/* what the version log no longer shows, and no hold needs */
				if (approvals_trim(p->approvals, lfloor, err, sizeof(err)) < 0)
					log_warn("approvals: cannot drop old approvals: %s (again in a minute)", err);
				next_approvals_trim = now_ms() + PRUNE_EVERY_MS;
			}
			if (n > 0)
				hub_notify(h, hub_version(h));
			next_approvals = now_ms() + APPROVALS_EVERY_MS;
		}
		pthread_mutex_lock(&h->lock);
		if (!h->stop) {
			alive_park(FLUSH_EVERY_MS);
			cond_wait_ms(&h->keeper_cond, &h->lock, FLUSH_EVERY_MS);
			alive_unpark();
		}
	}
	pthread_mutex_unlock(&h->lock);
	alive_leave();
	return NULL;
}

int hub_start(struct hub *h, char *err, size_t errlen)
{
	if (pthread_create(&h->ticker, NULL, ticker_main, h) != 0) {
		snprintf(err, errlen, "cannot start the ticker thread");
		return -1;
	}
	h->ticker_running = true;
	if (pthread_create(&h->keeper, NULL, keeper_main, h) != 0) {
		snprintf(err, errlen, "cannot start the keeper thread");
		return -1;
	}
	h->keeper_running = true;
	return 0;
}

void hub_stop(struct hub *h)
{
	pthread_mutex_lock(&h->lock);
	h->stop = true;
	for (struct stream *st = h->streams; st; st = st->next) {
		st->closing = true;
		wake_stream(st);
	}
	while (h->waiters)
		wake_waiter(h, h->waiters);
	/* give readers a moment to send their last bytes */
	int64_t until = now_ms() + 3000;
	while (h->nstreams > 0 && now_ms() < until)
		wait_for(h, 50);
	pthread_cond_broadcast(&h->cond);
	pthread_cond_broadcast(&h->keeper_cond);
	pthread_mutex_unlock(&h->lock);
	if (h->ticker_running) {
		pthread_join(h->ticker, NULL);
		h->ticker_running = false;
	}
	if (h->keeper_running) {
		pthread_join(h->keeper, NULL);
		h->keeper_running = false;
	}
}

void hub_free(struct hub *h)
{
	if (!h)
		return;
	strmap_release(&h->by_node);
	strmap_release(&h->by_relay);
	pthread_mutex_destroy(&h->lock);
	pthread_cond_destroy(&h->cond);
	pthread_cond_destroy(&h->keeper_cond);
	free(h);
}
