/* net/httpd.h: the plane's HTTP/1.1 server. Each of a few threads runs its own
 * level-triggered epoll loop over its connections (a ready connection is
 * served on every turn, never left for a later event); requests are parsed
 * by http-parser (strict framing: a repeated Content-Length, one beside
 * Transfer-Encoding, white space before a colon are a 400 and the
 * connection closes); TLS is GnuTLS on the same sockets. The application
 * sees a request's headers before its body (and may refuse it there:
 * nothing of the body is read), then its body, then the whole request, and
 * answers with a buffer or with a reader that is called whenever the
 * connection can take more (streams). A connection may be suspended (a
 * long-poll, a write in flight, an idle stream) and resumed from any
 * thread. Deadlines: the whole header block (and the TLS handshake) within
 * header_timeout_ms, however slowly it trickles; no progress for
 * idle_timeout_s while reading a body, sending, or idle between requests. */
#ifndef TETHER_HTTPD_H
#define TETHER_HTTPD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Statuses the plane answers with. */
#define HTTP_OK 200
#define HTTP_CREATED 201
#define HTTP_NOT_MODIFIED 304
#define HTTP_BAD_REQUEST 400
#define HTTP_UNAUTHORIZED 401
#define HTTP_FORBIDDEN 403
#define HTTP_NOT_FOUND 404
#define HTTP_METHOD_NOT_ALLOWED 405
#define HTTP_CONFLICT 409
#define HTTP_GONE 410
#define HTTP_CONTENT_TOO_LARGE 413
#define HTTP_UNPROCESSABLE_CONTENT 422
#define HTTP_LOCKED 423
#define HTTP_TOO_MANY_REQUESTS 429
#define HTTP_INTERNAL_SERVER_ERROR 500
#define HTTP_NOT_IMPLEMENTED 501
#define HTTP_SERVICE_UNAVAILABLE 503

#define HTTP_HEADER_ACCEPT_ENCODING "Accept-Encoding"
#define HTTP_HEADER_ALLOW "Allow"
#define HTTP_HEADER_AUTHORIZATION "Authorization"
#define HTTP_HEADER_CACHE_CONTROL "Cache-Control"
#define HTTP_HEADER_CONTENT_ENCODING "Content-Encoding"
#define HTTP_HEADER_CONTENT_LENGTH "Content-Length"
#define HTTP_HEADER_CONTENT_TYPE "Content-Type"
#define HTTP_HEADER_ETAG "ETag"
#define HTTP_HEADER_IF_NONE_MATCH "If-None-Match"
#define HTTP_HEADER_VARY "Vary"
#define HTTP_HEADER_WWW_AUTHENTICATE "WWW-Authenticate"

/* What a handler returns: HTTP_NO drops the connection. */
enum http_result { HTTP_NO = 0, HTTP_YES = 1 };

/* A reader's answers besides a byte count (0: nothing now; the reader
 * suspended the connection and a resume calls it again). */
#define HTTP_READER_END ((ssize_t)-1)     /* the body is complete */
#define HTTP_READER_ERROR ((ssize_t)-2)   /* abort: the connection closes */

struct http_conn;
struct http_response;
struct httpd;

typedef ssize_t (*http_reader_fn)(void *cls, uint64_t pos, char *buf, size_t max);

struct httpd_app {
	void *cls;
	/* The request line and headers are in: *req may be set. A response
	 * queued here refuses the request before its body (the connection
	 * closes after it when a body was announced). */
	void (*headers)(void *cls, struct http_conn *c, void **req);
	/* Part of the body. A response queued here refuses the rest. */
	void (*body)(void *cls, struct http_conn *c, void *req, const char *data, size_t len);
	/* The whole request: queue a response, or suspend (then this is
	 * called again when resumed). */
	void (*request)(void *cls, struct http_conn *c, void *req);
	/* The exchange ended (answered, or the connection went): req is the
	 * application's to free. Called once per request that had headers. */
	void (*completed)(void *cls, struct http_conn *c, void *req);
};

struct httpd_config {
	int listen_fd;                     /* non-blocking, listening */
	unsigned threads;
	unsigned max_connections;
	unsigned max_pending_per_address;  /* connections still sending headers, per client address */
	unsigned header_timeout_ms;
	unsigned idle_timeout_s;
	size_t max_header_bytes;           /* request line and headers */
	/* TLS (NULL: plain): a gnutls_certificate_credentials_t and a
	 * gnutls_priority_t, and whether to ask for a client certificate */
	void *tls_creds;
	void *tls_priority;
	bool tls_request_cert;
	/* called on each new TLS session (a gnutls_session_t) before its
	 * handshake, to set it up further (session tickets); -1 drops the
	 * connection. NULL: none */
	int (*tls_session)(void *cls, void *session);
	/* with it: called when a handshake is done (the session resumed or
	 * not), before the request is read. 0 done, 1 not yet (the socket
	 * is full: it is called again before any other record is sent),
	 * -1 the connection fails */
	int (*tls_handshake_done)(void *cls, void *session);
	void *tls_session_cls;
	unsigned tls_init_flags;           /* more gnutls_init flags */
	/* where the server's own refusals and closes are counted (may be NULL) */
	void (*log)(const char *msg);
};

struct httpd *httpd_start(const struct httpd_config *cfg, const struct httpd_app *app, char *err, size_t errlen);
/* Stops accepting (the listening socket is closed); open connections go on. */
void httpd_quiesce(struct httpd *d);
/* Closes every connection (their completion callbacks run) and joins. */
void httpd_stop(struct httpd *d);

/* Counters since start, for /metrics. */
struct httpd_stats {
	uint64_t accepted, open, refused_full, evicted_pending, header_timeouts, bad_requests, slow_bodies;
	uint64_t tls_full, tls_resumed;    /* TLS handshakes done: full, and resuming a session */
	uint64_t tls_waited;               /* TLS connections whose handshake waited for a slot */
};
void httpd_stats(struct httpd *d, struct httpd_stats *out);

/* The request (valid from the headers callback to the completed one). */
const char *http_method(struct http_conn *c);
/* The path, %HH unescaped except %00 (kept as the text "%00"). */
const char *http_path(struct http_conn *c);
/* A header's first value (names are case-insensitive), or NULL. */
const char *http_header(struct http_conn *c, const char *name);
/* A query parameter's first value, unescaped as the path, or NULL. */
const char *http_query(struct http_conn *c, const char *key);
/* The announced body length, or -1 (none, or chunked). */
int64_t http_content_length(struct http_conn *c);
/* The connection's GnuTLS session (a gnutls_session_t), NULL when plain. */
void *http_tls_session(struct http_conn *c);

/* Suspend: the connection is left alone (not read, not written, no
 * timeout) until http_resume, which any thread may call while the
 * request is not completed. */
void http_suspend(struct http_conn *c);
void http_resume(struct http_conn *c);

/* Responses. A buffer's free_fn (NULL: the data outlives the response)
 * gets data. A reader's free_fn gets cls, once, when the exchange ends. */
struct http_response *http_response_buffer(char *data, size_t len, void (*free_fn)(void *));
struct http_response *http_response_reader(http_reader_fn fn, void *cls, void (*free_fn)(void *));
/* Adds a header (a value holding CR or LF is dropped, and logged). */
void http_response_header(struct http_response *r, const char *name, const char *value);
/* Sends r (taken over) as the answer to the current request. HTTP_NO when
 * one was queued already (r is freed). */
enum http_result http_queue(struct http_conn *c, unsigned status, struct http_response *r);
void http_response_free(struct http_response *r);

#endif
