/* http/http.h: the plane's side of its HTTP server (httpd.h): request state,
 * what a route needs before its body is read, routing, and the response
 * helpers every handler uses. Streams and long-polls are suspended, not
 * parked on threads. */
#ifndef TETHER_HTTP_H
#define TETHER_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include "net/httpd.h"

#include "buf.h"

struct plane;
struct waiter;

/* A poll answer's statement, also on a 304 (docs/protocol.md). */
#define STATEMENT_HEADER "Tether-Statement"
/* A stale plane's answers to nodes and readers: "SINCE WHY" (freshness.h). */
#define STALE_HEADER "Tether-Stale"

/* Per-request state, from the first header to the completion callback. */
struct request {
	struct buf body;
	uint64_t cap;               /* the most this request may upload */
	bool too_big;
	struct waiter *waiter;      /* a suspended long-poll */
	struct write_job *job;      /* a suspended write or history read (writer.c) */
};

int http_start(struct plane *p, char *err, size_t errlen);
/* Stops accepting new connections (before streams are closed). */
void http_quiesce(struct plane *p);
void http_stop(struct plane *p);

/* Responses. Each takes ownership of body. */
enum http_result http_send(struct http_conn *c, unsigned status, const char *type, struct buf *body,
			  bool gzip_ok);
/* Same, with extra headers: a NULL-terminated list of name, value pairs. */
enum http_result http_send_headers(struct http_conn *c, unsigned status, const char *type,
				  struct buf *body, bool gzip_ok, const char *const *headers);
enum http_result http_send_json(struct http_conn *c, unsigned status, struct buf *body);
/* {"error": msg} and a newline, the body of every error answer. */
void http_error_body(struct buf *b, const char *msg);
enum http_result http_send_error(struct http_conn *c, unsigned status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

bool http_accepts_gzip(struct http_conn *c);
/* Whether the plane listens on a loopback address only. */
bool http_listens_on_loopback(struct plane *p);

/* Handlers (api_*.c). rest is the path after the route's prefix. */
enum http_result api_healthz(struct plane *p, struct http_conn *c);
enum http_result api_metrics(struct plane *p, struct http_conn *c);
enum http_result api_status(struct plane *p, struct http_conn *c);
enum http_result api_resource(struct plane *p, struct http_conn *c, struct request *r,
			     const char *method, const char *name);
enum http_result api_resources_list(struct plane *p, struct http_conn *c);
enum http_result api_batch(struct plane *p, struct http_conn *c, struct request *r);
enum http_result api_nodes(struct plane *p, struct http_conn *c, const char *method, const char *id);
enum http_result api_ack(struct plane *p, struct http_conn *c, struct request *r);
enum http_result api_report(struct plane *p, struct http_conn *c, struct request *r);
/* The traffic report in a node record that came from another replica
 * (pass_on false) or up from a relay (true), validated as POST /v1/report
 * validates it and recorded (a refused one is logged, naming from). */
struct persist_node;
void api_record_traffic(struct plane *p, const struct persist_node *pn, const char *from, bool pass_on);
enum http_result api_stream(struct plane *p, struct http_conn *c);
enum http_result api_relay_stream(struct plane *p, struct http_conn *c);
enum http_result api_relay_nodes(struct plane *p, struct http_conn *c, struct request *r);
enum http_result api_relay_statement(struct plane *p, struct http_conn *c);
enum http_result api_config(struct plane *p, struct http_conn *c, struct request *r);
enum http_result api_rollouts(struct plane *p, struct http_conn *c);
enum http_result api_rollout_current(struct plane *p, struct http_conn *c);
enum http_result api_rollout_abort(struct plane *p, struct http_conn *c);
enum http_result api_events(struct plane *p, struct http_conn *c);
enum http_result api_ui(struct plane *p, struct http_conn *c, const char *rest);
enum http_result api_tokens(struct plane *p, struct http_conn *c, struct request *r, const char *method,
			   const char *id);

/* The version log (api/history.c): GET /v1/history, /v1/history/{V},
 * /v1/diff, /v1/resources/{name}?at=V and POST /v1/revert. With a shared
 * backend they read it off the HTTP threads (writer_call; r->job). */
struct principal;
enum http_result api_history(struct plane *p, struct http_conn *c, struct request *r, const char *version);
enum http_result api_diff(struct plane *p, struct http_conn *c, struct request *r);
enum http_result api_revert(struct plane *p, struct http_conn *c, struct request *r);
enum http_result api_history_get_at(struct plane *p, struct http_conn *c, struct request *r,
				   const struct principal *who, const char *name, const char *at);
/* A write's message: at most 1024 bytes, no control characters. 0, or -1
 * with err. */
int history_message_check(const char *m, char *err, size_t errlen);
/* A resource body as who may see it (api/resources.c). */
void api_append_body(struct buf *b, const struct principal *who, const char *name, const char *body, size_t len);

#endif
