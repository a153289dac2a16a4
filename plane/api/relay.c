/* api/relay.c: what a plane offers the relays below it (docs/protocol.md,
 * "Relays"): GET /v1/relay/stream (the state, rollout and token records,
 * heartbeats), POST /v1/relay/nodes (the relay's node records, in
 * batches) and GET /v1/relay/statement (a signed statement of a version
 * for a subscription, which a relay cannot make itself). Each needs the
 * relay role (or admin). */
#include "api/api.h"
#include "core/core.h"
#include "core/hub.h"
#include "core/nodes.h"
#include "core/statements.h"
#include "core/tokens.h"
#include "http/auth.h"
#include "http/http.h"
#include "json.h"
#include "log.h"
#include "persist/records_json.h"
#include "rollout/rollout.h"
#include "sub.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RECORDS 10000

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
	struct stream *st = hub_relay_new(p->core->hub, c, relay, have, who.token_id);
	if (who.token_id[0] && tokens_revoked(p->core->tokens, who.token_id))
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
	size_t taken = 0, refused = 0;
	cJSON_ArrayForEach(it, arr) {
		struct persist_node pn;
		if (record_node_from_json(it, &pn) < 0 || !nodes_id_valid(pn.id)) {
			refused++;
			continue;
		}
		if (nodes_relayed(p->core->nodes, &pn, relay) < 0) {
			refused++;
			continue;
		}
		rollout_record(p->rollout, &pn);   /* a member's ACK or NACK from behind the relay */
		api_record_traffic(p, &pn, relay, true);
		taken++;
	}
	cJSON_Delete(doc);
	if (refused)
		log_warn("relay %s: %zu node records refused (malformed, or the registry is full)", relay, refused);
	struct buf b = BUF_INIT;
	buf_printf(&b, "{\"taken\":%zu,\"refused\":%zu}", taken, refused);
	return http_send_json(c, HTTP_OK, &b);
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
