/* api/api.h: the plane's API: its route table, which plane.c hands to the
 * server (http/), and the handlers the table names, one file per
 * resource family. */
#ifndef TETHER_API_H
#define TETHER_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "http/http.h"

struct auth;
struct core;
struct gate;
struct http_server;
struct rollout;

/* The options the handlers read (the plane's, at start-up). */
struct api_config {
	uint64_t max_body;             /* a resource's body at most */
	uint64_t max_request;          /* a request's body at most */
	uint64_t max_depth;            /* a body's JSON nesting at most */
	double heartbeat;              /* seconds */
	const char *rollout;           /* --rollout: "staged" or "immediate" */
	bool allow_unknown_fields;     /* --allow-unknown-fields: writes not strict */
};

/* What every handler gets: the wings it answers from. plane.c fills it
 * once the rollout and the gates are open. */
struct api {
	struct api_config cfg;
	struct core *core;
	struct auth *auth;
	struct http_server *http;
	struct rollout *rollout;
	struct gate *gate;             /* NULL: none configured */
};

/* Every route of the plane, ending with a NULL path (api/routes.c). The
 * server hands each handler the struct api it was given as its ctx. */
extern const struct http_route api_routes[];

/* The handlers (one file per resource family), as the routes call them. */
enum http_result api_healthz(struct api *p, struct http_conn *c);
enum http_result api_metrics(struct api *p, struct http_conn *c);
enum http_result api_status(struct api *p, struct http_conn *c);
enum http_result api_resource(struct api *p, struct http_conn *c, struct request *r,
			     const char *method, const char *name);
enum http_result api_resources_list(struct api *p, struct http_conn *c);
enum http_result api_batch(struct api *p, struct http_conn *c, struct request *r);
enum http_result api_nodes(struct api *p, struct http_conn *c, const char *method, const char *id);
enum http_result api_ack(struct api *p, struct http_conn *c, struct request *r);
/* Sealed secrets (api/secrets.c): POST or DELETE /v1/nodes/ID/key, GET
 * /v1/secrets, GET /v1/wraps. */
enum http_result api_node_key(struct api *p, struct http_conn *c, struct request *r, const char *method,
			      const char *id);
/* POST /v1/nodes/ID/key/approve {"key_id":KID}: an admin approves the key
 * a relay sent that waits (--approve-relay-keys). */
enum http_result api_node_key_approve(struct api *p, struct http_conn *c, struct request *r, const char *id);
enum http_result api_secrets(struct api *p, struct http_conn *c);
enum http_result api_wraps(struct api *p, struct http_conn *c);
enum http_result api_report(struct api *p, struct http_conn *c, struct request *r);
/* The traffic report in a node record that came from another replica
 * (pass_on false) or up from a relay (true), validated as POST /v1/report
 * validates it and recorded (a refused one is logged, naming from). */
struct persist_node;
void api_record_traffic(struct api *p, const struct persist_node *pn, const char *from, bool pass_on);
/* Whether node counts its traffic, as it says (an ACK, its connection,
 * a relay's 'u' line, another replica's record; reason: why not, made one
 * printable line): recorded for /v1/nodes and the gates. */
void api_record_counts(struct api *p, const char *node, bool counts, const char *reason);
enum http_result api_stream(struct api *p, struct http_conn *c);
enum http_result api_relay_stream(struct api *p, struct http_conn *c);
enum http_result api_relay_nodes(struct api *p, struct http_conn *c, struct request *r);
enum http_result api_relay_changes(struct api *p, struct http_conn *c, struct request *r);
enum http_result api_relay_statement(struct api *p, struct http_conn *c);
enum http_result api_config(struct api *p, struct http_conn *c, struct request *r);
enum http_result api_rollouts(struct api *p, struct http_conn *c);
enum http_result api_rollout_current(struct api *p, struct http_conn *c, struct request *r);
enum http_result api_rollout_abort(struct api *p, struct http_conn *c, struct request *r);
enum http_result api_events(struct api *p, struct http_conn *c);
enum http_result api_ui(struct api *p, struct http_conn *c, const char *rest);
/* POST /v1/ui/session (api/ui_session.c): a console session's ttl in
 * seconds, when the body gives none, and its bounds. */
#define UI_SESSION_TTL_DEFAULT 900
#define UI_SESSION_TTL_MIN 60
#define UI_SESSION_TTL_MAX 86400
enum http_result api_ui_session(struct api *p, struct http_conn *c, struct request *r);
/* Its body ({"ttl":SECONDS}, or empty: the default) into *ttl; 0, or -1
 * with err naming the field and its bounds (tests/fuzz/fuzz_ui_session.c). */
int api_ui_session_parse(const char *body, size_t len, int64_t *ttl, char *err, size_t errlen);
/* GET, PUT and DELETE /v1/freeze: the freeze window (api/freeze.c). */
enum http_result api_freeze(struct api *p, struct http_conn *c, struct request *r, const char *method);
/* POST and GET /v1/approvals (api/approvals.c). */
enum http_result api_approvals(struct api *p, struct http_conn *c, struct request *r, const char *method);
enum http_result api_tokens(struct api *p, struct http_conn *c, struct request *r, const char *method,
			   const char *id);

/* The version log (api/history.c): GET /v1/history, /v1/history/{V},
 * /v1/diff, /v1/resources/{name}?at=V and POST /v1/revert. With a shared
 * backend they read it off the HTTP threads (writer_call; r->job). */
struct principal;
enum http_result api_history(struct api *p, struct http_conn *c, struct request *r, const char *version);
enum http_result api_diff(struct api *p, struct http_conn *c, struct request *r);
enum http_result api_revert(struct api *p, struct http_conn *c, struct request *r);
enum http_result api_history_get_at(struct api *p, struct http_conn *c, struct request *r,
				   const struct principal *who, const char *name, const char *at);
/* A write's message: at most 1024 bytes, no control characters. 0, or -1
 * with err. */
int history_message_check(const char *m, char *err, size_t errlen);
/* A write's X-Tether-Override (tetherctl --override REASON) into opts,
 * checked as a message, and whether who is an admin. 0, or -1 with err
 * naming the header. */
struct write_opts;
/* Runs fn(p, arg, res) off the request's thread when the plane has a
 * writer (a shared backend: on the writer thread when write, else a
 * reader), else at once; free_arg(arg) after; the answer is res
 * (api/history.c). */
struct write_result;
enum http_result api_run(struct api *p, struct http_conn *c, struct request *r, bool write,
			 void (*fn)(void *ctx, void *arg, struct write_result *res), void *arg,
			 void (*free_arg)(void *));
int api_override(struct http_conn *c, const struct principal *who, struct write_opts *opts, char *err,
		 size_t errlen);
/* A resource body as who may see it (api/resources.c). */
void api_append_body(struct buf *b, const struct principal *who, const char *name, const char *body, size_t len);

#endif
