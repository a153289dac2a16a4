/* http/http.h: the plane's side of its HTTP server (net/httpd.h): request
 * state, routing by a table of routes (api/ gives it; this wing knows no
 * handler by name), what a route needs before its body is read, and the
 * response helpers every handler uses. Streams and long-polls are
 * suspended, not parked on threads. */
#ifndef TETHER_HTTP_H
#define TETHER_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http/auth.h"
#include "net/httpd.h"

#include "buf.h"

struct auth;
struct core;
struct plane_tls;
struct ticket_keeper;
struct waiter;
struct write_result;

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

/* A handler: ctx is the server's (the plane), rest the path after a
 * prefix route's path ("" for an exact one). */
typedef enum http_result (*http_handler)(void *ctx, struct http_conn *c, struct request *r, const char *method,
					 const char *rest);

/* The body bound of a route that takes --max-request (a PUT's body is
 * held to --max-body after). */
#define HTTP_CAP_MAX_REQUEST UINT64_MAX

/* One route. The first whose path matches wins: an exact path, or, when
 * prefix, any path starting with it (rest: what follows). */
struct http_route {
	const char *path;
	bool prefix;
	const char *allow;          /* its methods, as Allow lists them ("GET, PUT, DELETE"); GET takes HEAD */
	enum auth_gate gate;        /* what a request other than a GET needs, before its body is read */
	bool open;                  /* anyone, with any method (/healthz, the console's files) */
	bool relay_serves;          /* a relay answers it though it is not a GET (else 421: the origin's) */
	uint64_t body_cap;          /* the most its body may be (0: 4096; HTTP_CAP_MAX_REQUEST) */
	http_handler handler;       /* NULL: no such endpoint (a prefix that only sets the gate) */
};

/* The server's options (the plane's, at start-up). */
struct http_options {
	const char *listen;
	unsigned threads;
	unsigned max_connections;          /* 0: from the open-files limit */
	unsigned max_pending_per_address;
	double header_timeout, send_timeout;   /* seconds */
	uint64_t max_request;
};

/* The server. The plane fills what is above the line, http_start the rest. */
struct http_server {
	struct http_options opt;
	const struct http_route *routes;   /* ends with a NULL path */
	void *ctx;                         /* what handlers get */
	struct core *core;                 /* the store's backend, the hub, the writer, counters */
	struct auth *auth;
	struct plane_tls *tls;             /* NULL: plain HTTP */
	struct ticket_keeper *tickets;           /* TLS session resumption; NULL: none */
	/* ---- */
	struct httpd *httpd;
	int listen_fd;
	char listen_addr[80];              /* "127.0.0.1:7070", the real port */
};

int http_start(struct http_server *h, char *err, size_t errlen);
/* Stops accepting new connections (before streams are closed). */
void http_quiesce(struct http_server *h);
void http_stop(struct http_server *h);

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
/* 405 with the Allow header: for a handler whose route takes methods some
 * of its paths do not (/v1/nodes/ID is GET, /v1/nodes/ID/key POST and
 * DELETE). */
enum http_result http_send_not_allowed(struct http_conn *c, const char *method, const char *allow);

bool http_accepts_gzip(struct http_conn *c);
/* Whether the plane listens on a loopback address only. */
bool http_listens_on_loopback(struct http_server *h);
/* A write's (or a writer call's) answer: its body, or its error as every
 * error answer is written. Takes the result's memory. */
enum http_result http_send_result(struct http_conn *c, struct write_result *res);

#endif
