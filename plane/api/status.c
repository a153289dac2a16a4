/* api/status.c: /healthz (open: a supervisor's readiness probe) and
 * /metrics (Prometheus text, for readers). */
#include "api/api.h"
#include "core/core.h"
#include "core/digests.h"
#include "core/events.h"
#include "core/freeze_state.h"
#include "core/freshness.h"
#include "core/hub.h"
#include "core/nodes.h"
#include "core/pushcache.h"
#include "core/statements.h"
#include "core/store.h"
#include "core/ticket_keeper.h"
#include "http/auth.h"
#include "http/http.h"
#include "persist/persist.h"
#include "rollout/rollout.h"
#include "util.h"

#include <stdio.h>
#include <string.h>

/* A relay: whom it follows, and whether it hears it now. */
static void upstream_members(struct api *p, struct buf *b)
{
	if (!p->core->persist->ops->upstream)
		return;
	char url[512] = "";
	bool up = false;
	p->core->persist->ops->upstream(p->core->persist, url, sizeof(url), &up);
	buf_puts(b, ",\"upstream\":");
	buf_json_string(b, url);
	buf_printf(b, ",\"upstream_up\":%s", up ? "true" : "false");
}

/* 503 while stale: a load balancer drains a plane cut off from its
 * source, as its nodes do (freshness.h). */
enum http_result api_healthz(struct api *p, struct http_conn *c)
{
	struct buf b = BUF_INIT;
	bool stale = freshness_stale(p->core->fresh);
	buf_printf(&b, "{\"status\":\"%s\",\"version\":%llu", stale ? "stale" : "ok",
		   (unsigned long long)hub_version(p->core->hub));
	upstream_members(p, &b);
	freshness_member_brief(p->core->fresh, &b);
	buf_putc(&b, '}');
	return http_send_json(c, stale ? HTTP_SERVICE_UNAVAILABLE : HTTP_OK, &b);
}

/* GET /v1/status: what this plane is and whether it is current. */
enum http_result api_status(struct api *p, struct http_conn *c)
{
	struct principal who;
	enum http_result ret;
	if (!auth_allow(p->auth, c, ROLE_READER, &who, &ret))
		return ret;
	struct persist_stats ps = { .writable = true };
	if (p->core->persist->ops->stats)
		p->core->persist->ops->stats(p->core->persist, &ps);
	bool relay = p->core->persist->ops->upstream != NULL;
	struct buf b = BUF_INIT;
	buf_printf(&b, "{\"version\":%llu,\"store\":", (unsigned long long)hub_version(p->core->hub));
	buf_json_string(&b, p->core->persist->ops->name);
	buf_printf(&b, ",\"role\":\"%s\"", relay ? "relay" : ps.shared ? "replica" : "plane");
	if (p->core->persist->ops->replica && !relay) {
		buf_puts(&b, ",\"replica\":");
		buf_json_string(&b, p->core->persist->ops->replica(p->core->persist));
	}
	upstream_members(p, &b);
	struct fresh_view fv;
	freshness_get(p->core->fresh, &fv);
	buf_printf(&b, ",\"writable\":%s,\"heartbeat\":%g,\"streams\":%zu,\"uptime\":%lld",
		   !relay && ps.writable && !fv.stale ? "true" : "false", p->cfg.heartbeat, hub_stream_count(p->core->hub),
		   (long long)((now_ms() - p->core->started_ms) / 1000));
	if (fv.stale)
		freshness_member(p->core->fresh, &b);
	else
		buf_puts(&b, ",\"stale\":null");
	buf_printf(&b, ",\"stale_episodes\":%llu", (unsigned long long)freshness_episodes(p->core->fresh));
	freeze_state_member(p->core->freeze, &b);   /* "freeze": while one holds */
	rollout_waiting_json(p->rollout, &b);       /* "waiting": a version waits for nodes */
	buf_putc(&b, '}');
	return http_send_json(c, HTTP_OK, &b);
}

static void metric(struct buf *b, const char *name, const char *type, const char *help, unsigned long long v)
{
	buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", name, help, name, type, name, v);
}

enum http_result api_metrics(struct api *p, struct http_conn *c)
{
	struct principal who;
	enum http_result ret;
	if (!auth_allow(p->auth, c, ROLE_READER, &who, &ret))
		return ret;
	struct buf b = BUF_INIT;
	struct nodes_stats ns;
	struct pushcache_stats ps;
	nodes_stats(p->core->nodes, &ns);
	pushcache_stats(p->core->pushes, &ps);
	store_rdlock(p->core->store);
	uint64_t version = store_version(p->core->store), horizon = store_horizon(p->core->store);
	size_t count = store_count(p->core->store), tombs = store_tombstone_count(p->core->store);
	store_rdunlock(p->core->store);

	metric(&b, "tether_version", "gauge", "The store's global version.", version);
	metric(&b, "tether_resources", "gauge", "Live resources.", count);
	metric(&b, "tether_tombstones", "gauge", "Tombstones kept.", tombs);
	metric(&b, "tether_tombstone_horizon", "gauge", "Nodes older than this version get a snapshot.", horizon);
	metric(&b, "tether_streams", "gauge", "Open SSE streams.", hub_stream_count(p->core->hub));
	struct httpd_stats hs;
	httpd_stats(p->http->httpd, &hs);
	metric(&b, "tether_http_connections", "gauge", "Open HTTP connections, streams included.", hs.open);
	metric(&b, "tether_http_accepted_total", "counter", "HTTP connections accepted.", hs.accepted);
	if (p->http->tls) {
		buf_puts(&b, "# HELP tether_tls_handshakes_total TLS handshakes completed, by whether they resumed a "
			 "session (a ticket) or were full.\n# TYPE tether_tls_handshakes_total counter\n");
		buf_printf(&b, "tether_tls_handshakes_total{resumed=\"false\"} %llu\n", (unsigned long long)hs.tls_full);
		buf_printf(&b, "tether_tls_handshakes_total{resumed=\"true\"} %llu\n", (unsigned long long)hs.tls_resumed);
		metric(&b, "tether_tls_handshakes_waited_total", "counter",
		       "TLS connections whose handshake waited: their HTTP thread had 128 under way.",
		       hs.tls_waited);
		metric(&b, "tether_tls_ticket_key_rotations_total", "counter",
		       "Session-ticket key rotations this process made or read from the store.",
		       ticket_keeper_rotations(p->http->tickets));
	}
	metric(&b, "tether_http_refused_total", "counter",
	       "New connections closed at once: at --max-connections, with no connection still sending headers.",
	       hs.refused_full);
	metric(&b, "tether_http_evicted_total", "counter",
	       "Connections closed to make room: at --max-connections the oldest still sending headers, else the "
	       "longest idle between requests; past --max-pending-per-address, that address's oldest slow one.",
	       hs.evicted_pending);
	metric(&b, "tether_http_header_timeouts_total", "counter",
	       "Connections closed because their headers were not all in within --header-timeout.",
	       hs.header_timeouts);
	metric(&b, "tether_http_slow_bodies_total", "counter",
	       "Connections closed because a request body came slower than 1,000 bytes a second (after "
	       "--header-timeout's grace).",
	       hs.slow_bodies);
	metric(&b, "tether_http_bad_requests_total", "counter",
	       "Requests refused as malformed (400) or with too large a head (431); the connection closed.",
	       hs.bad_requests);
	if (p->core->persist->ops->upstream) {
		bool up = false;
		char url[512];
		p->core->persist->ops->upstream(p->core->persist, url, sizeof(url), &up);
		metric(&b, "tether_relay_upstream_up", "gauge", "1 while this relay's stream from its upstream is open.",
		       up);
	} else if (p->core->persist->ops->stats) {
		struct persist_stats st;
		p->core->persist->ops->stats(p->core->persist, &st);
		metric(&b, "tether_store_writable", "gauge", "1 while the shared store takes writes (etcd has quorum).",
		       st.writable);
		metric(&b, "tether_etcd_watch_opens_total", "counter", "Watches on etcd opened (the first and every resume).",
		       st.watch_opens);
		metric(&b, "tether_etcd_revisions_total", "counter", "etcd revisions the watch delivered.", st.revisions);
		metric(&b, "tether_etcd_reloads_total", "counter", "Reloads after a compaction.", st.reloads);
		metric(&b, "tether_etcd_reload_listed_total", "counter", "Keys listed by those reloads.", st.reload_listed);
		metric(&b, "tether_etcd_reload_fetched_total", "counter",
		       "Bodies those reloads fetched (only the changed ones).", st.reload_fetched);
		metric(&b, "tether_etcd_reload_deleted_total", "counter", "Names those reloads found deleted.",
		       st.reload_deleted);
		metric(&b, "tether_store_conflicts_total", "counter",
		       "Commits another replica beat (validated again and retried).", st.conflicts);
	}
	struct fresh_view fv;
	freshness_get(p->core->fresh, &fv);
	metric(&b, "tether_stale", "gauge",
	       "1 while this plane cannot vouch that it is current (cut off from etcd, or from its upstream).",
	       fv.stale);
	metric(&b, "tether_stale_since_seconds", "gauge", "When this plane went stale (Unix time; 0 while current).",
	       fv.stale ? (unsigned long long)fv.since : 0);
	metric(&b, "tether_stale_episodes_total", "counter", "Times this plane went stale.",
	       freshness_episodes(p->core->fresh));
	metric(&b, "tether_nodes", "gauge", "Known nodes.", ns.nodes);
	metric(&b, "tether_nodes_connected", "gauge", "Nodes with an open stream or a recent poll.", ns.connected);
	metric(&b, "tether_nodes_lagging", "gauge", "Nodes trailing their target longer than --lag-alert.", ns.lagging);
	metric(&b, "tether_writes_total", "counter", "Writes that made a new version.", atomic_load(&p->core->ctr.writes));
	metric(&b, "tether_writes_refused_total", "counter", "Writes refused by validation.",
	       atomic_load(&p->core->ctr.refused_writes));
	metric(&b, "tether_write_errors_total", "counter", "Writes the store failed to persist.",
	       atomic_load(&p->core->ctr.write_errors));
	metric(&b, "tether_pushes_total", "counter", "Pushes sent on streams.", atomic_load(&p->core->ctr.pushes));
	metric(&b, "tether_snapshots_total", "counter", "Pushes on streams that were snapshots (the whole state).",
	       atomic_load(&p->core->ctr.snapshots));
	metric(&b, "tether_push_bytes_total", "counter", "Bytes of pushes sent on streams.",
	       atomic_load(&p->core->ctr.push_bytes));
	metric(&b, "tether_heartbeats_total", "counter", "Heartbeats sent.", atomic_load(&p->core->ctr.heartbeats));
	metric(&b, "tether_polls_total", "counter", "Poll requests.", atomic_load(&p->core->ctr.polls));
	metric(&b, "tether_polls_not_modified_total", "counter", "Polls answered 304.",
	       atomic_load(&p->core->ctr.polls_not_modified));
	metric(&b, "tether_streams_opened_total", "counter", "Streams opened.", atomic_load(&p->core->ctr.streams_opened));
	metric(&b, "tether_streams_replaced_total", "counter", "Streams closed because their node reconnected.",
	       atomic_load(&p->core->ctr.streams_replaced));
	metric(&b, "tether_acks_total", "counter", "ACKs accepted.", ns.acks);
	metric(&b, "tether_nacks_total", "counter", "NACKs accepted.", ns.nacks);
	metric(&b, "tether_stale_acks_total", "counter", "ACKs and NACKs whose nonce was not the latest sent.", ns.stale);
	metric(&b, "tether_verify_failures_total", "counter",
	       "Pushes nodes refused because they failed verification (a tampering middle box, a replay).",
	       ns.verify_failures);
	metric(&b, "tether_push_cache_hits_total", "counter", "Pushes served from the shared cache.", ps.hits);
	metric(&b, "tether_push_cache_misses_total", "counter", "Pushes computed.", ps.misses);
	metric(&b, "tether_requests_total", "counter", "HTTP requests.", atomic_load(&p->core->ctr.requests));
	if (p->core->statements) {
		struct statements_stats ss;
		statements_stats(p->core->statements, &ss);
		metric(&b, "tether_statements_signed_total", "counter",
		       "Statements signed (once per version and subscription, again to stay fresh).", ss.signed_total);
		metric(&b, "tether_statements_cached", "gauge", "Signed statements kept for reuse.", ss.cached);
		if (p->core->persist->ops->upstream)
			metric(&b, "tether_statements_fetched_total", "counter",
			       "Statements a relay asked its upstream for (the upstream signs; a relay never does).",
			       ss.fetched);
	}
	if (p->core->digests) {
		struct digests_stats ds;
		digests_stats(p->core->digests, &ds);
		metric(&b, "tether_digest_subscriptions", "gauge", "Subscriptions whose state digest is kept current.",
		       ds.trackers);
		metric(&b, "tether_digest_walks_total", "counter", "Whole-store walks to start a subscription's digest.",
		       ds.walks);
		metric(&b, "tether_digest_walks_refused_total", "counter",
		       "Walks put off: more new subscriptions at once than the plane walks (8 a second, 64 at once).",
		       ds.walks_refused);
	}
	auth_metrics(p->auth, &b);
	freeze_state_metrics(p->core->freeze, &b);
	rollout_metrics(p->rollout, &b);
	events_metrics(p->core->events, &b);
	nodes_metrics(p->core->nodes, version, &b);
	return http_send(c, HTTP_OK, "text/plain; version=0.0.4", &b, true);
}
