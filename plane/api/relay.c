/* api/relay.c: what a plane offers the relays below it (docs/protocol.md,
 * "Relays"): GET /v1/relay/stream (the state, rollout and token records,
 * heartbeats), POST /v1/relay/changes (what the relay's nodes changed,
 * in batches), POST /v1/relay/nodes (a relay's node records as JSON, as
 * relays before the changes sent them) and GET /v1/relay/statement (a
 * signed statement of a version for a subscription, which a relay cannot
 * make itself). Each needs the relay role (or admin). */
#include "api/api.h"
#include "core/core.h"
#include "core/events.h"
#include "core/hub.h"
#include "core/nodes.h"
#include "core/statements.h"
#include "core/tokens.h"
#include "http/auth.h"
#include "http/http.h"
#include "json.h"
#include "log.h"
#include "persist/node_changes.h"
#include "persist/records_json.h"
#include "rollout/gate.h"
#include "rollout/rollout.h"
#include "strmap.h"
#include "sub.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RECORDS 10000
#define MAX_CHANGES 100000
#define REFUSED_NAMED 1000    /* refused nodes an answer names */

/* The credential a relay's request came with, as its stream records it: a
 * store token's id, else who it is (a client certificate's subject, the
 * admin token, anonymous on a plane without authentication). */
static const char *relay_cred(const struct principal *who)
{
	return who->token_id[0] ? who->token_id : who->who;
}

enum http_result api_relay_stream(struct api *p, struct http_conn *c)
{
	struct principal who;
	enum http_result ret;
	const char *relay = http_query(c, "relay");
	if (!relay || !nodes_id_valid(relay))
		return http_send_error(c, HTTP_BAD_REQUEST, "relay: required, [A-Za-z0-9._-]{1,200}");
	uint64_t have = 0;
	const char *v = http_query(c, "version");
	if (v && parse_uint_range(v, 0, 9007199254740992ULL, &have) < 0)
		return http_send_error(c, HTTP_BAD_REQUEST, "version: '%.32s' is not a non-negative integer", v);
	if (!auth_allow_relay(p->auth, c, &who, &ret))
		return ret;
	struct stream *st = hub_relay_new(p->core->hub, c, relay, have, who.token_id, relay_cred(&who));
	if (who.token_id[0] && tokens_ended(p->core->tokens, who.token_id, wall_seconds()))
		hub_close_token(p->core->hub, who.token_id);
	struct http_response *resp = http_response_reader(hub_stream_read, st, hub_stream_free);
	if (!resp) {
		hub_stream_free(st);
		return HTTP_NO;
	}
	http_response_header(resp, HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
	http_response_header(resp, HTTP_HEADER_CACHE_CONTROL, "no-store");
	http_response_header(resp, "X-Accel-Buffering", "no");
	ret = http_queue(c, HTTP_OK, resp);
	return ret;
}

/* {"relay":"ID","nodes":[record...]}: every record goes into the registry
 * as a node behind that relay, and counts toward a rollout as an ACK or
 * NACK here would. */
enum http_result api_relay_nodes(struct api *p, struct http_conn *c, struct request *r)
{
	struct principal who;
	enum http_result ret;
	if (!auth_allow_relay(p->auth, c, &who, &ret))
		return ret;
	char err[256];
	struct json_limits lim = { .max_bytes = r->cap, .max_depth = 8 };
	cJSON *doc = json_decode(r->body.data ? r->body.data : "", r->body.len, &lim, err, sizeof(err));
	if (!doc)
		return http_send_error(c, HTTP_BAD_REQUEST, "relay nodes: %s", err);
	const char *relay = record_str(doc, "relay");
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(doc, "nodes"), *it;
	if (!cJSON_IsObject(doc) || !nodes_id_valid(relay) || !cJSON_IsArray(arr)) {
		cJSON_Delete(doc);
		return http_send_error(c, HTTP_UNPROCESSABLE_CONTENT,
				       "relay nodes: needs {\"relay\": ID, \"nodes\": [records]}");
	}
	if (cJSON_GetArraySize(arr) > MAX_RECORDS) {
		cJSON_Delete(doc);
		return http_send_error(c, HTTP_CONTENT_TOO_LARGE, "relay nodes: at most %d records a batch",
				       MAX_RECORDS);
	}
	/* RELAY is the sender's word, as in a changes batch: taken only from
	 * the credential that holds relay RELAY's stream here */
	if (!hub_relay_by(p->core->hub, relay, relay_cred(&who))) {
		log_warn("relay nodes: %s names relay %s, which holds no stream here opened with that credential; "
			 "refused", who.who, relay);
		ret = http_send_error(c, HTTP_FORBIDDEN,
				      "relay nodes: relay %s holds no stream here (GET /v1/relay/stream) opened with "
				      "this credential",
				      relay);
		cJSON_Delete(doc);
		return ret;
	}
	size_t taken = 0, refused = 0;
	char first[300] = "";
	cJSON_ArrayForEach(it, arr) {
		struct persist_node pn;
		if (record_node_from_json(it, &pn) < 0 || !nodes_id_valid(pn.id)) {
			if (!refused++)
				snprintf(first, sizeof(first), "a record without a valid id");
			continue;
		}
		if (nodes_relayed(p->core->nodes, &pn, relay, err, sizeof(err)) < 0) {
			if (!refused++)
				snprintf(first, sizeof(first), "%s", err);
			continue;
		}
		rollout_record(p->rollout, &pn);   /* a member's ACK or NACK from behind the relay */
		api_record_traffic(p, &pn, relay, true);
		taken++;
	}
	cJSON_Delete(doc);
	if (refused)
		log_warn("relay %s: %zu node records refused; the first: %s", relay, refused, first);
	struct buf b = BUF_INIT;
	buf_printf(&b, "{\"taken\":%zu,\"refused\":%zu}", taken, refused);
	return http_send_json(c, HTTP_OK, &b);
}

/* A batch of node changes (persist/node_changes.h): decoded whole first
 * (a malformed batch changes nothing), then each change taken into the
 * registry, counted toward a rollout, its traffic report judged. A change
 * for a node that is not behind the sending relay is refused alone. */
enum http_result api_relay_changes(struct api *p, struct http_conn *c, struct request *r)
{
	struct principal who;
	enum http_result ret;
	if (!auth_allow_relay(p->auth, c, &who, &ret))
		return ret;
	struct node_changes b;
	char err[400], first[400] = "";
	int rc = node_changes_decode(r->body.data ? r->body.data : "", r->body.len, MAX_CHANGES, &b, err, sizeof(err));
	if (rc < 0) {
		node_changes_release(&b);
		return http_send_error(c, rc == -2 ? HTTP_CONTENT_TOO_LARGE : HTTP_BAD_REQUEST, "relay changes: %s", err);
	}
	/* the header's RELAY is the sender's word: taken only from the
	 * credential that holds relay RELAY's stream here */
	if (!hub_relay_by(p->core->hub, b.relay, relay_cred(&who))) {
		log_warn("relay changes: %s names relay %s, which holds no stream here opened with that credential; "
			 "refused", who.who, b.relay);
		ret = http_send_error(c, HTTP_FORBIDDEN,
				      "relay changes: relay %s holds no stream here (GET /v1/relay/stream) opened with "
				      "this credential",
				      b.relay);
		node_changes_release(&b);
		return ret;
	}
	nodes_relay_held(p->core->nodes, b.relay, b.held);
	size_t taken = 0, refused = 0, named = 0, refused_keys = 0;
	char first_key[400] = "";
	bool more = false;
	struct buf ids = BUF_INIT;
	struct strmap seen;   /* the nodes named, pointing into the batch */
	strmap_init(&seen);
	for (size_t i = 0; i < b.n; i++) {
		const struct node_change *ch = &b.ch[i];
		struct nodes_key_answer ka = { 0 };
		unsigned kst;
		/* a 'k' line: judged at the origin; a relay in between passes it on */
		int crc = ch->kind != NC_KEY ? nodes_relay_change(p->core->nodes, b.relay, ch, err, sizeof(err))
			  : core_is_relay(p->core) ? nodes_key_forward(p->core->nodes, ch->node, ch->reg, ch->reg_len,
								       b.relay, &kst, err, sizeof(err))
			  : nodes_key_register(p->core->nodes, ch->node, ch->reg, ch->reg_len, b.relay, &ka, err,
					       sizeof(err));
		if (crc < 0 && ch->kind == NC_KEY) {
			/* a registration refused (a revoked key, one not endorsed):
			 * the origin's log and event say it; the node's record and
			 * its other lines stand, so the relay is not told to send
			 * them again (refused_nodes) */
			if (!refused_keys++)
				snprintf(first_key, sizeof(first_key), "%s", err);
			log_warn("relay %s: node %s: key registration refused: %s", b.relay, ch->node, err);
			continue;
		}
		if (crc < 0) {
			if (!refused++)
				snprintf(first, sizeof(first), "%s", err);
			/* each node named once, at most REFUSED_NAMED of them */
			intptr_t v;
			if (!strmap_get(&seen, ch->node, &v)) {
				if (named < REFUSED_NAMED) {
					buf_puts(&ids, named++ ? "," : "");
					buf_json_string(&ids, ch->node);
					strmap_put(&seen, ch->node, 1);
				} else {
					more = true;
				}
			}
			continue;
		}
		taken++;
		/* a member's ACK or NACK from behind the relay */
		struct persist_node pn = { .id = ch->node, .labels = "", .transport = "", .healthy = ch->healthy };
		if (ch->kind == NC_ACK) {
			pn.sent_version = pn.acked_version = ch->version;
			rollout_record(p->rollout, &pn);
		} else if (ch->kind == NC_NACK) {
			pn.sent_version = pn.nack_version = ch->version;
			pn.has_nack = true;
			pn.nack_error = ch->error;
			rollout_record(p->rollout, &pn);
		} else if (ch->kind == NC_TRAFFIC) {
			pn.traffic = ch->report;
			api_record_traffic(p, &pn, b.relay, true);
		} else if (ch->kind == NC_COUNTS) {
			gate_counts(p->gate, ch->node, ch->count != 0, ch->error);
		} else if (ch->kind == NC_KEY && ka.changed) {
			events_key(p->core->events, ch->node, ka.kid, ka.status);
		} else if (ch->kind == NC_HELD) {
			struct ack_msg m = { .node = ch->node, .version = ch->version, .nonce = ch->nonce, .nack = true,
					     .held = true, .error = ch->error, .healthy = -1 };
			events_ack(p->core->events, &m);
		}
	}
	if (refused)
		log_warn("relay %s: %zu of %zu node changes refused; the first: %s", b.relay, refused, b.n, first);
	struct buf out = BUF_INIT;
	buf_printf(&out, "{\"taken\":%zu,\"refused\":%zu,\"first_refusal\":", taken, refused);
	if (refused)
		buf_json_string(&out, first);
	else
		buf_puts(&out, "null");
	buf_puts(&out, ",\"refused_nodes\":[");
	if (ids.len)
		buf_append(&out, ids.data, ids.len);
	buf_printf(&out, "],\"refused_nodes_more\":%s,\"refused_keys\":%zu,\"first_key_refusal\":",
		   more ? "true" : "false", refused_keys);
	if (refused_keys)
		buf_json_string(&out, first_key);
	else
		buf_puts(&out, "null");
	buf_putc(&out, '}');
	buf_release(&ids);
	strmap_release(&seen);
	node_changes_release(&b);
	return http_send_json(c, HTTP_OK, &out);
}

/* ?version=V&sub=S -> {"statement":"..."}: signed here, or (a relay)
 * fetched from upstream. */
enum http_result api_relay_statement(struct api *p, struct http_conn *c)
{
	struct principal who;
	enum http_result ret;
	if (!auth_allow_relay(p->auth, c, &who, &ret))
		return ret;
	uint64_t version;
	const char *v = http_query(c, "version");
	if (!v || parse_uint_range(v, 1, 9007199254740992ULL, &version) < 0)
		return http_send_error(c, HTTP_BAD_REQUEST, "version: required, a positive integer");
	struct sub sub;
	char err[256];
	if (sub_parse(http_query(c, "sub"), &sub, err, sizeof(err)) < 0)
		return http_send_error(c, HTTP_BAD_REQUEST, "%s", err);
	char *stmt = p->core->statements ? statements_get(p->core->statements, version, &sub, NULL) : NULL;
	sub_release(&sub);
	if (!stmt)
		return http_send_error(c, HTTP_NOT_FOUND, "no statement of version %llu here (signing is off, "
				       "or the version is past the history kept)", (unsigned long long)version);
	struct buf b = BUF_INIT;
	buf_printf(&b, "{\"statement\":\"%s\"}", stmt);
	free(stmt);
	return http_send_json(c, HTTP_OK, &b);
}
