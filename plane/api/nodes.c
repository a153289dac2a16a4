/* api/nodes.c: node-facing records: the ACK/NACK endpoint, the traffic
 * reports of traffic-aware gates (POST /v1/report, and an ACK's
 * "traffic"), and the node listing operators read (acked version, lag,
 * last NACK, connection, last traffic). */
#include "api/api.h"
#include "core/core.h"
#include "core/events.h"
#include "core/freshness.h"
#include "core/hub.h"
#include "core/nodes.h"
#include "http/auth.h"
#include "http/http.h"
#include "json.h"
#include "log.h"
#include "rollout/gate.h"
#include "rollout/rollout.h"
#include "traffic.h"
#include "util.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

/* an ACK or a report may carry traffic: up to 128 routes of 40 buckets */
#define ACK_MAX_BYTES TRAFFIC_REPORT_MAX

/* A stale plane judges lag against the version it holds, which may be
 * old: its answer says so (Tether-Stale), and tetherctl nodes warns to ask
 * a plane that is current. */
static enum http_result send_view(struct api *p, struct http_conn *c, struct buf *b)
{
	char stale[300];
	const char *const headers[] = { STALE_HEADER, stale, NULL };
	bool is_stale = freshness_header(p->core->fresh, stale, sizeof(stale));
	buf_putc(b, '\n');
	return http_send_headers(c, HTTP_OK, "application/json", b, true, is_stale ? headers : NULL);
}

enum http_result api_nodes(struct api *p, struct http_conn *c, const char *method, const char *id)
{
	struct principal who;
	enum http_result ret;
	(void)method;
	if (!auth_allow(p->auth, c, ROLE_READER, &who, &ret))
		return ret;
	struct buf b = BUF_INIT;
	uint64_t version = hub_version(p->core->hub);
	if (!id) {
		nodes_to_json(p->core->nodes, version, &b);
		return send_view(p, c, &b);
	}
	if (!nodes_id_valid(id))
		return http_send_error(c, HTTP_BAD_REQUEST, "node id '%.64s' must match [A-Za-z0-9._-]{1,200}", id);
	if (nodes_one_to_json(p->core->nodes, id, version, &b) < 0) {
		buf_release(&b);
		return http_send_error(c, HTTP_NOT_FOUND, "no node '%s'", id);
	}
	return send_view(p, c, &b);
}

/* A node's text for a log line: one line, no control characters, cut. */
static void printable(char *out, size_t cap, const char *s)
{
	size_t n = 0;
	for (; s && *s && n + 1 < cap; s++)
		out[n++] = (unsigned char)*s < 0x20 || *s == 0x7f ? ' ' : *s;
	out[n] = '\0';
}

/* Traffic f of node (with version, a report's: of that version),
 * validated and recorded for /v1/nodes and the gates (a report older than
 * the last is not); with pass_on, unless this plane is the controller
 * that judges it, it goes on with the node's record (nodes_set_traffic).
 * 0, or -1 with *status and err. */
static int record_traffic(struct api *p, const char *node, const cJSON *f, const uint64_t *version, bool pass_on,
			  unsigned *status, char *err, size_t errlen)
{
	struct traffic t;
	traffic_init(&t);
	int rc = -1;
	*status = HTTP_UNPROCESSABLE_CONTENT;
	if (traffic_from_json(f, &t, err, errlen) < 0) {
		;
	} else if (version && t.version != *version) {
		snprintf(err, errlen, "version %llu, but its traffic is of version %llu", (unsigned long long)*version,
			 (unsigned long long)t.version);
	} else {
		int taken = nodes_set_traffic(p->core->nodes, node, &t, pass_on && !rollout_leads(p->rollout));
		if (taken < 0) {
			*status = HTTP_NOT_FOUND;
			snprintf(err, errlen, "no node '%s' (connect first)", node);
		} else {
			if (taken == 0)
				gate_report(p->gate, node, &t);
			nodes_set_counts(p->core->nodes, node, true, NULL);   /* traffic: it counts */
			rc = 0;
		}
	}
	traffic_release(&t);
	return rc;
}

/* A node's "traffic" member (optional: 0 and nothing recorded when absent),
 * validated and recorded; with version (a report's), its traffic must be
 * of that version. 0, or -1 with the error answered. */
static int take_traffic(struct api *p, struct http_conn *c, const char *what, const cJSON *doc,
			const char *node, const uint64_t *version, bool required, enum http_result *ret)
{
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(doc, "traffic");
	if (!f || cJSON_IsNull(f)) {
		if (required)
			*ret = http_send_error(c, HTTP_UNPROCESSABLE_CONTENT, "%s: traffic is missing", what);
		return required ? -1 : 0;
	}
	unsigned status;
	char err[400];
	if (record_traffic(p, node, f, version, true, &status, err, sizeof(err)) < 0) {
		*ret = http_send_error(c, status, "%s: %s", what, err);
		return -1;
	}
	return 0;
}

void api_record_counts(struct api *p, const char *node, bool counts, const char *reason)
{
	char why[GATE_COUNTS_REASON_MAX];
	printable(why, sizeof(why), reason ? reason : "");
	nodes_set_counts(p->core->nodes, node, counts, why);
	gate_counts(p->gate, node, counts, why);
}

void api_record_traffic(struct api *p, const struct persist_node *pn, const char *from, bool pass_on)
{
	/* refusals said at most every 10 s, with how many there were (a
	 * lying relay sends thousands of records a second) */
	static _Atomic int64_t next_say_ms;
	static atomic_ulong refused;
	if (!pn->traffic)
		return;
	char err[400];
	unsigned status;
	struct json_limits lim = { ACK_MAX_BYTES, 8 };
	cJSON *f = json_decode(pn->traffic, strlen(pn->traffic), &lim, err, sizeof(err));
	if (!f || record_traffic(p, pn->id, f, NULL, pass_on, &status, err, sizeof(err)) < 0) {
		unsigned long n = atomic_fetch_add(&refused, 1) + 1;
		int64_t now = now_ms(), next = atomic_load(&next_say_ms);
		if (now >= next && atomic_compare_exchange_strong(&next_say_ms, &next, now + 10000)) {
			atomic_store(&refused, 0);
			log_warn("the traffic report of node %s from %s is refused: %s (%lu refused since the last "
				 "such warning)", pn->id, from, err, n);
		}
	}
	cJSON_Delete(f);
}

/* {"node","version","traffic"}: what a node's live generation served, sent
 * while the heartbeats ask for it (a rollout with gates runs). */
enum http_result api_report(struct api *p, struct http_conn *c, struct request *r)
{
	char err[512];
	if (r->body.len > ACK_MAX_BYTES)
		return http_send_error(c, HTTP_CONTENT_TOO_LARGE, "report: body exceeds %d bytes", ACK_MAX_BYTES);
	struct json_limits lim = { ACK_MAX_BYTES, 8 };
	cJSON *doc = json_decode(r->body.data ? r->body.data : "", r->body.len, &lim, err, sizeof(err));
	if (!doc)
		return http_send_error(c, HTTP_BAD_REQUEST, "report: %s", err);
	enum http_result ret;
	const char *node = cJSON_IsObject(doc) ? json_get_string(doc, "node") : NULL;
	uint64_t version;
	struct principal who;
	if (!cJSON_IsObject(doc)) {
		ret = http_send_error(c, HTTP_UNPROCESSABLE_CONTENT, "report: body must be a JSON object");
	} else if (!node || !nodes_id_valid(node)) {
		ret = http_send_error(c, HTTP_UNPROCESSABLE_CONTENT,
				      "report: node must be a string matching [A-Za-z0-9._-]{1,200}");
	} else if (!auth_allow_node(p->auth, c, node, &who, &ret)) {
		/* answered */
	} else if (!json_get_u64(cJSON_GetObjectItemCaseSensitive(doc, "version"), &version)) {
		ret = http_send_error(c, HTTP_UNPROCESSABLE_CONTENT, "report: version must be a non-negative integer");
	} else if (take_traffic(p, c, "report", doc, node, &version, true, &ret) == 0) {
		struct buf b = BUF_INIT;
		buf_puts(&b, "{\"result\":\"recorded\"}");
		ret = http_send_json(c, HTTP_OK, &b);
	}
	cJSON_Delete(doc);
	return ret;
}

/* {"node","version","nonce","status":"ack"|"nack","error","healthy",
 * "traffic"} */
enum http_result api_ack(struct api *p, struct http_conn *c, struct request *r)
{
	char err[512];
	if (r->body.len > ACK_MAX_BYTES)
		return http_send_error(c, HTTP_CONTENT_TOO_LARGE, "ack: body exceeds %d bytes", ACK_MAX_BYTES);
	struct json_limits lim = { ACK_MAX_BYTES, 8 };
	cJSON *doc = json_decode(r->body.data ? r->body.data : "", r->body.len, &lim, err, sizeof(err));
	if (!doc)
		return http_send_error(c, HTTP_BAD_REQUEST, "ack: %s", err);

	struct ack_msg m = { .healthy = -1 };
	enum http_result ret;
	const cJSON *f;
	if (!cJSON_IsObject(doc)) {
		ret = http_send_error(c, HTTP_UNPROCESSABLE_CONTENT, "ack: body must be a JSON object");
		goto out;
	}
	m.node = json_get_string(doc, "node");
	if (!m.node || !nodes_id_valid(m.node)) {
		ret = http_send_error(c, HTTP_UNPROCESSABLE_CONTENT, "ack: node must be a string matching [A-Za-z0-9._-]{1,200}");
		goto out;
	}
	struct principal who;
	if (!auth_allow_node(p->auth, c, m.node, &who, &ret))
		goto out;
	if (!json_get_u64(cJSON_GetObjectItemCaseSensitive(doc, "version"), &m.version)) {
		ret = http_send_error(c, HTTP_UNPROCESSABLE_CONTENT, "ack: version must be a non-negative integer");
		goto out;
	}
	m.nonce = json_get_string(doc, "nonce");
	if (!m.nonce || !*m.nonce || strlen(m.nonce) >= NONCE_MAX) {
		ret = http_send_error(c, HTTP_UNPROCESSABLE_CONTENT, "ack: nonce must be a string of 1..%d bytes", NONCE_MAX - 1);
		goto out;
	}
	const char *status = json_get_string(doc, "status");
	if (!status || (strcmp(status, "ack") != 0 && strcmp(status, "nack") != 0)) {
		ret = http_send_error(c, HTTP_UNPROCESSABLE_CONTENT, "ack: status must be \"ack\" or \"nack\"");
		goto out;
	}
	m.nack = strcmp(status, "nack") == 0;
	f = cJSON_GetObjectItemCaseSensitive(doc, "error");
	if (f && !cJSON_IsNull(f)) {
		if (!cJSON_IsString(f)) {
			ret = http_send_error(c, HTTP_UNPROCESSABLE_CONTENT, "ack: error must be a string");
			goto out;
		}
		m.error = f->valuestring;
	}
	if (m.nack && (!m.error || !*m.error)) {
		ret = http_send_error(c, HTTP_UNPROCESSABLE_CONTENT, "ack: a nack needs an error saying why");
		goto out;
	}
	f = cJSON_GetObjectItemCaseSensitive(doc, "healthy");
	if (f && !cJSON_IsNull(f)) {
		if (!cJSON_IsBool(f)) {
			ret = http_send_error(c, HTTP_UNPROCESSABLE_CONTENT, "ack: healthy must be true or false");
			goto out;
		}
		m.healthy = cJSON_IsTrue(f);
	}

	f = cJSON_GetObjectItemCaseSensitive(doc, "verify");
	if (f && !cJSON_IsNull(f)) {
		if (!cJSON_IsBool(f)) {
			ret = http_send_error(c, HTTP_UNPROCESSABLE_CONTENT, "ack: verify must be true or false");
			goto out;
		}
		m.verify = cJSON_IsTrue(f);
	}

	/* a held NACK (sealed secrets): the node has no wrap for a secret
	 * it would receive; recorded apart, never a NACK's failure */
	f = cJSON_GetObjectItemCaseSensitive(doc, "held");
	if (f && !cJSON_IsNull(f)) {
		if (!cJSON_IsBool(f) || (cJSON_IsTrue(f) && (!m.nack || m.verify))) {
			ret = http_send_error(c, HTTP_UNPROCESSABLE_CONTENT,
					      "ack: held must be true or false, and true only on a nack without verify");
			goto out;
		}
		m.held = cJSON_IsTrue(f);
	}

	/* whether it counts traffic, and why not (traffic-aware gates: a
	 * member that does not cannot be judged) */
	int counts = -1;
	const char *counts_reason = NULL;
	f = cJSON_GetObjectItemCaseSensitive(doc, "counts");
	if (f && !cJSON_IsNull(f)) {
		if (!cJSON_IsBool(f)) {
			ret = http_send_error(c, HTTP_UNPROCESSABLE_CONTENT, "ack: counts must be true or false");
			goto out;
		}
		counts = cJSON_IsTrue(f);
	}
	f = cJSON_GetObjectItemCaseSensitive(doc, "counts_reason");
	if (f && !cJSON_IsNull(f)) {
		if (!cJSON_IsString(f) || strlen(f->valuestring) >= GATE_COUNTS_REASON_MAX) {
			ret = http_send_error(c, HTTP_UNPROCESSABLE_CONTENT,
					      "ack: counts_reason must be a string of at most %d bytes",
					      GATE_COUNTS_REASON_MAX - 1);
			goto out;
		}
		counts_reason = f->valuestring;
	}

	/* a NACK may say which version the node still runs */
	uint64_t holds = 0;
	bool has_holds = false;
	f = cJSON_GetObjectItemCaseSensitive(doc, "current_version");
	if (f && !cJSON_IsNull(f)) {
		if (!json_get_u64(f, &holds)) {
			ret = http_send_error(c, HTTP_UNPROCESSABLE_CONTENT,
					      "ack: current_version must be a non-negative integer");
			goto out;
		}
		has_holds = true;
	}

	/* every field checked: the traffic of the generation now live is
	 * recorded before the ACK moves the rollout (a gate judges it) */
	if (take_traffic(p, c, "ack", doc, m.node, NULL, false, &ret) < 0)
		goto out;

	enum ack_result res;
	if (nodes_ack(p->core->nodes, &m, hub_version(p->core->hub), &res) < 0) {
		ret = http_send_error(c, HTTP_NOT_FOUND, "ack: no node '%s' (connect before acking)", m.node);
		goto out;
	}
	if (res == ACK_MISMATCH) {
		ret = http_send_error(c, HTTP_CONFLICT, "ack: version %llu is not the version of push '%s'",
				      (unsigned long long)m.version, m.nonce);
		goto out;
	}
	if (res == ACK_ACCEPTED && m.nack && has_holds && holds < m.version)
		hub_stream_holds(p->core->hub, m.node, holds);
	if (counts >= 0)
		api_record_counts(p, m.node, counts, counts_reason);   /* before the rollout judges the ACK */
	if (res == ACK_ACCEPTED)
		events_ack(p->core->events, &m);   /* before the rollout's answer to it */
	/* a held member stays pending: the rollout is not told (one rule:
	 * a held NACK is no NACK for counts, stages, gates) */
	if (res == ACK_ACCEPTED && !m.held && rollout_acked(p->rollout, &m) &&
	    nodes_flush(p->core->nodes, err, sizeof(err)) < 0)
		log_warn("nodes: cannot save node records: %s (will retry)", err);
	char shown[512];
	printable(shown, sizeof(shown), m.error);
	if (m.nack && m.held && res == ACK_ACCEPTED)
		log_info("node %s: held at version %llu: %s", m.node, (unsigned long long)m.version, shown);
	else if (m.nack && m.verify)
		log_warn("node %s: refused version %llu, which failed its verification: %s", m.node,
			 (unsigned long long)m.version, shown);
	else if (m.nack && res == ACK_ACCEPTED)
		log_warn("node %s: NACK of version %llu: %s", m.node, (unsigned long long)m.version, shown);
	else if (res == ACK_STALE) {
		char nonce[NONCE_MAX];
		printable(nonce, sizeof(nonce), m.nonce);
		log_info("node %s: stale %s of version %llu (nonce '%s' is not the latest)", m.node, status,
			 (unsigned long long)m.version, nonce);
	}
	struct buf b = BUF_INIT;
	buf_printf(&b, "{\"result\":\"%s\"}", res == ACK_ACCEPTED ? "accepted" : "stale");
	ret = http_send_json(c, HTTP_OK, &b);
out:
	cJSON_Delete(doc);
	return ret;
}
