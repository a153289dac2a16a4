/* api/sync.c: the node-facing sync endpoints: GET /v1/stream (Server-Sent
 * Events) and GET /v1/config (ETag polling with long-poll). Both take
 * node, version, sub and labels; both send a delta from the node's version
 * (a snapshot at 0), with a nonce the node echoes in its ACK. */
#include "api/api.h"
#include "approval.h"
#include "core/approvals.h"
#include "core/core.h"
#include "core/freshness.h"
#include "core/hub.h"
#include "core/nodes.h"
#include "core/overrides.h"
#include "core/pushcache.h"
#include "core/statements.h"
#include "core/tokens.h"
#include "http/auth.h"
#include "http/http.h"
#include "json.h"
#include "labels.h"
#include "log.h"
#include "rollout/rollout.h"
#include "strmap.h"
#include "util.h"
#include "xmalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_WAIT_S 300

struct sync_params {
	const char *node;
	uint64_t version;
	struct sub sub;
	char *labels;      /* canonical JSON, or NULL when not given */
	bool unacked;      /* unacked=1: the node holds version and has not ACKed it */
	unsigned approvals;   /* approvals=K: the node requires K approvals (0: none) */
	int counts;        /* counts=1 or 0: whether it counts its traffic (-1: not said) */
	const char *counts_reason; /* with counts=0: why not */
};

static void params_release(struct sync_params *sp)
{
	sub_release(&sp->sub);
	cJSON_free(sp->labels);
}

/* What a connecting node says of its counting, recorded (after
 * nodes_seen: its record exists). */
static void take_counts(struct api *p, const struct sync_params *sp)
{
	if (sp->counts >= 0)
		api_record_counts(p, sp->node, sp->counts == 1, sp->counts_reason);
}

/* Returns 0, or sends a 400 and returns -1 (with *ret set). */
static int params_parse(struct http_conn *c, struct sync_params *sp, bool use_last_event_id,
			enum http_result *ret)
{
	char err[256];
	memset(sp, 0, sizeof(*sp));
	sp->node = http_query(c, "node");
	if (!sp->node || !nodes_id_valid(sp->node)) {
		*ret = http_send_error(c, HTTP_BAD_REQUEST, "node: required, [A-Za-z0-9._-]{1,200}");
		return -1;
	}
	const char *v = http_query(c, "version");
	if (v && parse_uint_range(v, 0, 9007199254740992ULL, &sp->version) < 0) {
		*ret = http_send_error(c, HTTP_BAD_REQUEST, "version: '%.32s' is not a non-negative integer", v);
		return -1;
	}
	/* an EventSource resuming sends the id of the last push it saw */
	const char *last = use_last_event_id ? http_header(c, "Last-Event-ID") : NULL;
	uint64_t lv;
	if (last && parse_uint_range(last, 0, 9007199254740992ULL, &lv) == 0)
		sp->version = lv;
	if (sub_parse(http_query(c, "sub"), &sp->sub, err, sizeof(err)) < 0) {
		*ret = http_send_error(c, HTTP_BAD_REQUEST, "%s", err);
		return -1;
	}
	const char *ap = http_query(c, "approvals");
	uint64_t k = 0;
	if (ap && parse_uint_range(ap, 1, APPROVALS_MAX, &k) < 0) {
		sub_release(&sp->sub);
		*ret = http_send_error(c, HTTP_BAD_REQUEST, "approvals: '%.32s' is not 1..%d (the approvals the node "
				       "requires)", ap, APPROVALS_MAX);
		return -1;
	}
	sp->approvals = (unsigned)k;
	const char *u = http_query(c, "unacked");
	sp->unacked = u && strcmp(u, "1") == 0;
	/* whether it counts its traffic, said at every connection: a node
	 * restarted with --traffic-listen off and holding its version already
	 * gets no push to ACK, and its gates must know (docs/gates.md) */
	const char *cn = http_query(c, "counts");
	sp->counts = -1;
	if (cn) {
		if (strcmp(cn, "0") != 0 && strcmp(cn, "1") != 0) {
			sub_release(&sp->sub);
			*ret = http_send_error(c, HTTP_BAD_REQUEST, "counts: '%.32s' is not 0 or 1", cn);
			return -1;
		}
		sp->counts = cn[0] == '1';
	}
	sp->counts_reason = http_query(c, "counts_reason");
	if (sp->counts_reason && strlen(sp->counts_reason) >= GATE_COUNTS_REASON_MAX) {
		sub_release(&sp->sub);
		*ret = http_send_error(c, HTTP_BAD_REQUEST, "counts_reason: longer than %d bytes",
				       GATE_COUNTS_REASON_MAX - 1);
		return -1;
	}
	const char *l = http_query(c, "labels");
	if (l) {
		cJSON *obj = labels_parse(l, err, sizeof(err));
		if (!obj) {
			sub_release(&sp->sub);
			*ret = http_send_error(c, HTTP_BAD_REQUEST, "labels: %s", err);
			return -1;
		}
		json_sort_keys(obj);
		sp->labels = cJSON_PrintUnformatted(obj);
		cJSON_Delete(obj);
	}
	return 0;
}

/* approvals=K: the node is held until K keys approved (core/approvals.h;
 * a relay holds its nodes too, with the approvals its upstream sends). */
static void require_approvals(struct api *p, const struct sync_params *sp)
{
	approvals_node(p->core->approvals, sp->node, sp->approvals, sp->sub.canon, sp->version);
	if (sp->approvals)
		approvals_keep(p->core->approvals, p->core->store);
}

enum http_result api_stream(struct api *p, struct http_conn *c)
{
	struct sync_params sp;
	struct principal who;
	enum http_result ret;
	if (params_parse(c, &sp, true, &ret) < 0)
		return ret;
	if (!auth_allow_node(p->auth, c, sp.node, &who, &ret)) {
		params_release(&sp);
		return ret;
	}
	if (nodes_seen(p->core->nodes, sp.node, sp.labels, "sse") < 0) {
		params_release(&sp);
		return http_send_error(c, HTTP_SERVICE_UNAVAILABLE, "node registry is full (max-nodes)");
	}
	nodes_set_sub(p->core->nodes, sp.node, sp.sub.canon);
	require_approvals(p, &sp);   /* after the registry took it: bounded by max-nodes */
	take_counts(p, &sp);
	bool gzip = http_accepts_gzip(c);
	struct stream *st = hub_stream_new(p->core->hub, c, sp.node, sp.version, &sp.sub, gzip, who.token_id, sp.unacked);
	/* a revocation between the check above and now would have missed
	 * this stream: look once more, now that it is registered */
	if (who.token_id[0] && tokens_ended(p->core->tokens, who.token_id, wall_seconds()))
		hub_close_token(p->core->hub, who.token_id);
	log_info("stream: node %s connected at version %llu%s", sp.node, (unsigned long long)sp.version,
		 gzip ? " (gzip)" : "");
	params_release(&sp);

	/* the reader writes into its loop's buffer; the stream holds bytes
	 * only while they are on their way */
	struct http_response *resp = http_response_reader(hub_stream_read, st, hub_stream_free);
	if (!resp) {
		hub_stream_free(st);
		return HTTP_NO;
	}
	http_response_header(resp, HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
	http_response_header(resp, HTTP_HEADER_CACHE_CONTROL, "no-cache, no-transform");
	http_response_header(resp, "X-Accel-Buffering", "no");
	http_response_header(resp, HTTP_HEADER_VARY, "Accept-Encoding");
	if (gzip)
		http_response_header(resp, HTTP_HEADER_CONTENT_ENCODING, "gzip");
	ret = http_queue(c, HTTP_OK, resp);
	return ret;
}

/* W/"<version>.<subscription hash>": one per (version, subscription). */
static void make_etag(char *out, size_t cap, uint64_t version, const struct sub *sub)
{
	snprintf(out, cap, "W/\"%llu.%08llx\"", (unsigned long long)version,
		 (unsigned long long)(strmap_hash(sub->canon ? sub->canon : "") & 0xffffffffULL));
}

static bool etag_matches(const char *inm, const char *etag)
{
	if (!inm)
		return false;
	if (strcmp(inm, "*") == 0)
		return true;
	/* a list of tags; weak comparison ignores the W/ prefix */
	const char *want = strncmp(etag, "W/", 2) == 0 ? etag + 2 : etag;
	size_t wl = strlen(want);
	for (const char *p = inm; *p;) {
		p += strspn(p, " ,");
		if (strncmp(p, "W/", 2) == 0)
			p += 2;
		if (strncmp(p, want, wl) == 0 && (p[wl] == '\0' || p[wl] == ',' || p[wl] == ' '))
			return true;
		p += strcspn(p, ",");
	}
	return false;
}

/* A shared cache may serve a poll answer for a second, and while the
 * plane is down, to every node asking for the same (version, sub): only
 * when that answer is the same for every one of them and holds nothing
 * private (docs/caching.md). So "public" needs an anonymous request (an
 * answer to a credential is that node's own), a target every node shares
 * (none during a staged rollout in progress, where it is the node's), and
 * no secret in the push (key material stays out of caches). */
#define CACHE_CONTROL "public, max-age=1, stale-if-error=86400"
#define CACHE_CONTROL_PRIVATE "private, max-age=1, stale-if-error=86400"

static bool every_node_gets(struct api *p, uint64_t version)
{
	uint64_t t, newest = hub_version(p->core->hub);
	if (!rollout_common_target(p->rollout, &t))
		return false;
	return version == (t == VERSION_LATEST || t > newest ? newest : t);
}

static bool carries_secret(const struct push_blob *b)
{
	static const char upsert[] = "{\"name\":\"secret/";
	return memmem(b->raw, b->raw_len, upsert, sizeof(upsert) - 1) != NULL;
}

enum http_result api_config(struct api *p, struct http_conn *c, struct request *r)
{
	struct sync_params sp;
	struct principal who;
	enum http_result ret;
	char etag[64];

	bool resumed = r->waiter != NULL;
	if (resumed) {
		hub_waiter_release(p->core->hub, r->waiter);
		r->waiter = NULL;
	}
	if (params_parse(c, &sp, false, &ret) < 0)
		return ret;
	/* checked again when a long-poll resumes: its token may be revoked */
	if (!auth_allow_node(p->auth, c, sp.node, &who, &ret)) {
		params_release(&sp);
		return ret;
	}
	uint64_t wait_s = 0;
	const char *w = http_query(c, "wait");
	if (w && parse_uint_range(w, 0, MAX_WAIT_S, &wait_s) < 0) {
		params_release(&sp);
		return http_send_error(c, HTTP_BAD_REQUEST, "wait: '%.32s' is not 0..%d seconds", w, MAX_WAIT_S);
	}
	if (!resumed) {
		if (nodes_seen(p->core->nodes, sp.node, sp.labels, "poll") < 0) {
			params_release(&sp);
			return http_send_error(c, HTTP_SERVICE_UNAVAILABLE, "node registry is full (max-nodes)");
		}
		nodes_set_sub(p->core->nodes, sp.node, sp.sub.canon);
		require_approvals(p, &sp);   /* after the registry took it: bounded by max-nodes */
		take_counts(p, &sp);
		atomic_fetch_add(&p->core->ctr.polls, 1);
	}

	/* the node's target: the newest, or where its rollout stage stands */
	uint64_t current = core_target(p->core, sp.node);
	make_etag(etag, sizeof(etag), current, &sp.sub);
	const char *inm = http_header(c, HTTP_HEADER_IF_NONE_MATCH);
	bool up_to_date = etag_matches(inm, etag) || (!inm && sp.version == current && current > 0);

	if (up_to_date && wait_s > 0 && !resumed && !atomic_load(&p->core->stopping)) {
		r->waiter = hub_waiter_add(p->core->hub, c, sp.node, current, now_ms() + (int64_t)wait_s * 1000,
					   who.token_id);
		if (r->waiter) {
			params_release(&sp);
			return HTTP_YES;   /* suspended: answered when resumed */
		}
		current = core_target(p->core, sp.node);
		make_etag(etag, sizeof(etag), current, &sp.sub);
		up_to_date = etag_matches(inm, etag);
	}
	if (up_to_date && inm) {
		/* nothing new, but a fresh statement of the target: a polling
		 * node stays fresh on 304s (and an HTTP cache refreshes it) */
		char *stmt = p->core->statements ? statements_get(p->core->statements, current, &sp.sub, NULL) : NULL;
		params_release(&sp);
		atomic_fetch_add(&p->core->ctr.polls_not_modified, 1);
		struct http_response *resp = http_response_buffer((char *)"", 0, NULL);
		if (stmt)
			http_response_header(resp, STATEMENT_HEADER, stmt);
		free(stmt);
		http_response_header(resp, HTTP_HEADER_ETAG, etag);
		char stale[300];
		bool is_stale = freshness_header(p->core->fresh, stale, sizeof(stale));
		if (is_stale)
			http_response_header(resp, STALE_HEADER, stale);
		/* it renews an answer a shared cache holds (a public one: no
		 * secret): public only while that answer is everybody's, and
		 * never a stale plane's word */
		bool shared = who.anonymous && every_node_gets(p, current) && !is_stale;
		http_response_header(resp, HTTP_HEADER_CACHE_CONTROL,
					shared ? CACHE_CONTROL : CACHE_CONTROL_PRIVATE);
		http_response_header(resp, HTTP_HEADER_VARY, "Accept-Encoding");
		ret = http_queue(c, HTTP_NOT_MODIFIED, resp);
		return ret;
	}

	struct push_blob *blob = pushcache_get_for(p->core->pushes, sp.version, sp.node, &sp.sub);
	char nonce[NONCE_MAX];
	nodes_poll_nonce(nonce, sizeof(nonce), blob->version, blob->base);
	make_etag(etag, sizeof(etag), blob->version, &sp.sub);
	char *stmt = p->core->statements ? statements_get(p->core->statements, blob->version, &sp.sub,
						    blob->has_digest ? blob->digest : NULL) : NULL;
	struct buf b = BUF_INIT;
	buf_reserve(&b, blob->raw_len + 64 + (stmt ? strlen(stmt) : 0));
	buf_printf(&b, "{\"nonce\":\"%s\"", nonce);
	char stale[300];
	bool is_stale = freshness_header(p->core->fresh, stale, sizeof(stale));
	if (is_stale)   /* the header's word, read once */
		freshness_member(p->core->fresh, &b);
	buf_putc(&b, ',');
	overrides_push_field(p->core->overrides, blob->version, core_is_relay(p->core) ? stmt : NULL, &b);   /* unsigned "overridden" */
	if (stmt)
		buf_printf(&b, "\"statement\":\"%s\",", stmt);
	approvals_push_json(p->core->approvals, sp.node, blob->version, &b);
	buf_append(&b, blob->raw, blob->raw_len);
	buf_putc(&b, '\n');
	core_sent(p->core, sp.node, blob->version, nonce, blob->nup + blob->nrm > 0);
	/* asked after the push was made: true for the version it brings */
	bool shared = who.anonymous && every_node_gets(p, blob->version) && !carries_secret(blob) && !is_stale;
	push_blob_unref(blob);
	params_release(&sp);

	/* the list ends at its first NULL name: the optional ones last */
	const char *headers[9] = {
		HTTP_HEADER_ETAG, etag, HTTP_HEADER_CACHE_CONTROL, shared ? CACHE_CONTROL : CACHE_CONTROL_PRIVATE,
	};
	size_t nh = 4;
	if (is_stale) {
		headers[nh++] = STALE_HEADER;
		headers[nh++] = stale;
	}
	if (stmt) {
		headers[nh++] = STATEMENT_HEADER;
		headers[nh++] = stmt;
	}
	ret = http_send_headers(c, HTTP_OK, "application/json", &b, true, headers);
	free(stmt);
	return ret;
}
