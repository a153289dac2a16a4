/* api/routes.c: the plane's route table (see api.h): each endpoint's path,
 * methods, what its caller needs before the body is read, the most its
 * body may be, and its handler. plane.c hands the table to the server. */
#include "api/api.h"
#include "freeze.h"
#include "nodekey.h"
#include "traffic.h"

#include <stddef.h>
#include <string.h>

/* Adapters: the handlers keep the arguments they use. */
#define PLANE(ctx) ((struct api *)(ctx))

static enum http_result healthz(void *ctx, struct http_conn *c, struct request *r, const char *m, const char *rest)
{
	(void)r, (void)m, (void)rest;
	return api_healthz(PLANE(ctx), c);
}

static enum http_result metrics(void *ctx, struct http_conn *c, struct request *r, const char *m, const char *rest)
{
	(void)r, (void)m, (void)rest;
	return api_metrics(PLANE(ctx), c);
}

static enum http_result status(void *ctx, struct http_conn *c, struct request *r, const char *m, const char *rest)
{
	(void)r, (void)m, (void)rest;
	return api_status(PLANE(ctx), c);
}

static enum http_result events(void *ctx, struct http_conn *c, struct request *r, const char *m, const char *rest)
{
	(void)r, (void)m, (void)rest;
	return api_events(PLANE(ctx), c);
}

static enum http_result ui(void *ctx, struct http_conn *c, struct request *r, const char *m, const char *rest)
{
	(void)r, (void)m;
	return api_ui(PLANE(ctx), c, rest);
}

static enum http_result ui_session(void *ctx, struct http_conn *c, struct request *r, const char *m,
				  const char *rest)
{
	(void)m, (void)rest;
	return api_ui_session(PLANE(ctx), c, r);
}

static enum http_result stream(void *ctx, struct http_conn *c, struct request *r, const char *m, const char *rest)
{
	(void)r, (void)m, (void)rest;
	return api_stream(PLANE(ctx), c);
}

static enum http_result config(void *ctx, struct http_conn *c, struct request *r, const char *m, const char *rest)
{
	(void)m, (void)rest;
	return api_config(PLANE(ctx), c, r);
}

static enum http_result ack(void *ctx, struct http_conn *c, struct request *r, const char *m, const char *rest)
{
	(void)m, (void)rest;
	return api_ack(PLANE(ctx), c, r);
}

static enum http_result report(void *ctx, struct http_conn *c, struct request *r, const char *m, const char *rest)
{
	(void)m, (void)rest;
	return api_report(PLANE(ctx), c, r);
}

static enum http_result batch(void *ctx, struct http_conn *c, struct request *r, const char *m, const char *rest)
{
	(void)m, (void)rest;
	return api_batch(PLANE(ctx), c, r);
}

static enum http_result relay_stream(void *ctx, struct http_conn *c, struct request *r, const char *m,
				     const char *rest)
{
	(void)r, (void)m, (void)rest;
	return api_relay_stream(PLANE(ctx), c);
}

static enum http_result relay_nodes(void *ctx, struct http_conn *c, struct request *r, const char *m,
				    const char *rest)
{
	(void)m, (void)rest;
	return api_relay_nodes(PLANE(ctx), c, r);
}

static enum http_result relay_changes(void *ctx, struct http_conn *c, struct request *r, const char *m,
				      const char *rest)
{
	(void)m, (void)rest;
	return api_relay_changes(PLANE(ctx), c, r);
}

static enum http_result relay_statement(void *ctx, struct http_conn *c, struct request *r, const char *m,
					const char *rest)
{
	(void)r, (void)m, (void)rest;
	return api_relay_statement(PLANE(ctx), c);
}

static enum http_result resources_list(void *ctx, struct http_conn *c, struct request *r, const char *m,
				       const char *rest)
{
	(void)r, (void)m, (void)rest;
	return api_resources_list(PLANE(ctx), c);
}

static enum http_result resource(void *ctx, struct http_conn *c, struct request *r, const char *m, const char *rest)
{
	return api_resource(PLANE(ctx), c, r, m, rest);
}

static enum http_result history_list(void *ctx, struct http_conn *c, struct request *r, const char *m,
				     const char *rest)
{
	(void)m, (void)rest;
	return api_history(PLANE(ctx), c, r, NULL);
}

static enum http_result history_one(void *ctx, struct http_conn *c, struct request *r, const char *m,
				    const char *rest)
{
	(void)m;
	return api_history(PLANE(ctx), c, r, rest);
}

static enum http_result diff(void *ctx, struct http_conn *c, struct request *r, const char *m, const char *rest)
{
	(void)m, (void)rest;
	return api_diff(PLANE(ctx), c, r);
}

static enum http_result revert(void *ctx, struct http_conn *c, struct request *r, const char *m, const char *rest)
{
	(void)m, (void)rest;
	return api_revert(PLANE(ctx), c, r);
}

static enum http_result nodes_list(void *ctx, struct http_conn *c, struct request *r, const char *m,
				   const char *rest)
{
	(void)r, (void)rest;
	return api_nodes(PLANE(ctx), c, m, NULL);
}

static enum http_result nodes_one(void *ctx, struct http_conn *c, struct request *r, const char *m, const char *rest)
{
	/* /v1/nodes/ID/key: its key for sealed secrets */
	size_t k = strcspn(rest, "/");
	if (rest[k] == '/' && strcmp(rest + k, "/key") == 0 && k < 256) {
		if (strcmp(m, "POST") != 0 && strcmp(m, "DELETE") != 0)
			return http_send_not_allowed(c, m, "POST, DELETE");
		char id[256];
		memcpy(id, rest, k);
		id[k] = '\0';
		return api_node_key(PLANE(ctx), c, r, m, id);
	}
	/* /v1/nodes/ID/key/approve: an admin approves a relay's key */
	if (rest[k] == '/' && strcmp(rest + k, "/key/approve") == 0 && k < 256) {
		if (strcmp(m, "POST") != 0)
			return http_send_not_allowed(c, m, "POST");
		char id[256];
		memcpy(id, rest, k);
		id[k] = '\0';
		return api_node_key_approve(PLANE(ctx), c, r, id);
	}
	if (strcmp(m, "GET") != 0 && strcmp(m, "HEAD") != 0)
		return http_send_not_allowed(c, m, "GET");
	return api_nodes(PLANE(ctx), c, m, rest);
}

static enum http_result secrets(void *ctx, struct http_conn *c, struct request *r, const char *m, const char *rest)
{
	(void)r, (void)m, (void)rest;
	return api_secrets(PLANE(ctx), c);
}

static enum http_result wraps(void *ctx, struct http_conn *c, struct request *r, const char *m, const char *rest)
{
	(void)r, (void)m, (void)rest;
	return api_wraps(PLANE(ctx), c);
}

static enum http_result rollouts(void *ctx, struct http_conn *c, struct request *r, const char *m, const char *rest)
{
	(void)r, (void)m, (void)rest;
	return api_rollouts(PLANE(ctx), c);
}

static enum http_result rollout_current(void *ctx, struct http_conn *c, struct request *r, const char *m,
					const char *rest)
{
	(void)m, (void)rest;
	return api_rollout_current(PLANE(ctx), c, r);
}

static enum http_result rollout_abort(void *ctx, struct http_conn *c, struct request *r, const char *m,
				      const char *rest)
{
	(void)m, (void)rest;
	return api_rollout_abort(PLANE(ctx), c, r);
}

static enum http_result tokens_list(void *ctx, struct http_conn *c, struct request *r, const char *m,
				    const char *rest)
{
	(void)rest;
	return api_tokens(PLANE(ctx), c, r, m, NULL);
}

static enum http_result tokens_one(void *ctx, struct http_conn *c, struct request *r, const char *m,
				   const char *rest)
{
	return api_tokens(PLANE(ctx), c, r, m, rest);
}

static enum http_result freeze(void *ctx, struct http_conn *c, struct request *r, const char *m, const char *rest)
{
	(void)rest;
	return api_freeze(PLANE(ctx), c, r, m);
}

static enum http_result approvals(void *ctx, struct http_conn *c, struct request *r, const char *m,
				  const char *rest)
{
	(void)rest;
	return api_approvals(PLANE(ctx), c, r, m);
}

/* path, prefix, allow, gate (not GET), open, relay_serves, body_cap, handler */
const struct http_route api_routes[] = {
	{ "/healthz", false, "GET", GATE_ANY, true, false, 0, healthz },
	{ "/metrics", false, "GET", GATE_ANY, false, false, 0, metrics },
	{ "/v1/status", false, "GET", GATE_ANY, false, false, 0, status },
	{ "/v1/events", false, "GET", GATE_ANY, false, false, 0, events },
	{ "/ui", false, "GET", GATE_ANY, true, false, 0, ui },
	{ "/ui/", true, "GET", GATE_ANY, true, false, 0, ui },
	/* a console session: a reader's token that expires */
	{ "/v1/ui/session", false, "POST", GATE_ANY, false, false, 1024, ui_session },
	{ "/v1/stream", false, "GET", GATE_ANY, false, false, 0, stream },
	{ "/v1/config", false, "GET", GATE_ANY, false, false, 0, config },
	/* traffic of up to 128 routes */
	{ "/v1/ack", false, "POST", GATE_NODE, false, true, TRAFFIC_REPORT_MAX, ack },
	{ "/v1/report", false, "POST", GATE_NODE, false, true, TRAFFIC_REPORT_MAX, report },
	{ "/v1/batch", false, "POST", GATE_ADMIN, false, false, HTTP_CAP_MAX_REQUEST, batch },
	{ "/v1/relay/stream", false, "GET", GATE_RELAY, false, true, 0, relay_stream },
	/* a batch of node changes from a relay; and of node records, from a
	 * relay of before 0.x (JSON) */
	{ "/v1/relay/changes", false, "POST", GATE_RELAY, false, true, 16u << 20, relay_changes },
	{ "/v1/relay/nodes", false, "POST", GATE_RELAY, false, true, 16u << 20, relay_nodes },
	{ "/v1/relay/statement", false, "GET", GATE_RELAY, false, true, 0, relay_statement },
	{ "/v1/relay/", true, "GET", GATE_RELAY, false, true, 0, NULL },
	{ "/v1/resources", false, "GET", GATE_ANY, false, false, 0, resources_list },
	{ "/v1/resources/", false, "GET", GATE_ADMIN, false, false, HTTP_CAP_MAX_REQUEST, resources_list },
	{ "/v1/resources/", true, "GET, PUT, DELETE", GATE_ADMIN, false, false, HTTP_CAP_MAX_REQUEST, resource },
	{ "/v1/history", false, "GET", GATE_ANY, false, false, 0, history_list },
	{ "/v1/history/", true, "GET", GATE_ANY, false, false, 0, history_one },
	{ "/v1/diff", false, "GET", GATE_ANY, false, false, 0, diff },
	/* a revert's message may be escaped to 6 bytes a byte; an operator
	 * may make an emergency one ("now":true), an admin any (api_revert) */
	{ "/v1/revert", false, "POST", GATE_OPERATOR, false, false, 64 * 1024, revert },
	{ "/v1/nodes", false, "GET", GATE_ANY, false, false, 0, nodes_list },
	/* and POST, DELETE /v1/nodes/ID/key (a node's key: its own credential
	 * or an admin's, the handler says; a relay takes a node's POST), POST
	 * /v1/nodes/ID/key/approve (an admin's) */
	{ "/v1/nodes/", true, "GET, POST, DELETE", GATE_ANY, false, true, NODEKEY_REG_MAX, nodes_one },
	{ "/v1/secrets", false, "GET", GATE_ANY, false, false, 0, secrets },
	{ "/v1/wraps", false, "GET", GATE_ANY, false, false, 0, wraps },
	{ "/v1/rollouts", false, "GET", GATE_ANY, false, false, 0, rollouts },
	{ "/v1/rollouts/current", false, "GET", GATE_ANY, false, false, 0, rollout_current },
	{ "/v1/rollouts/current/abort", false, "POST", GATE_OPERATOR, false, false, 0, rollout_abort },
	/* a freeze's message may be escaped to 6 bytes a byte */
	{ "/v1/freeze", false, "GET, PUT, DELETE", GATE_OPERATOR, false, false, FREEZE_RECORD_MAX, freeze },
	/* up to 32 approval tokens */
	{ "/v1/approvals", false, "GET, POST", GATE_OPERATOR, false, false, 320 * 1024, approvals },
	{ "/v1/tokens", false, "GET, POST", GATE_ADMIN, false, false, 0, tokens_list },
	{ "/v1/tokens/", true, "DELETE", GATE_ADMIN, false, false, 0, tokens_one },
	{ NULL, false, NULL, GATE_ANY, false, false, 0, NULL },
};
