/* net/http_request.h: one HTTP/1.1 request as http-parser reads it: the
 * request line and headers kept in one bounded arena (the path and query
 * parameters unescaped, never into a NUL), the body handed on as it
 * comes, and hooks at the request's first byte, its whole head, each
 * piece of body and its end. Framing is http-parser's, strict: a repeated
 * Content-Length, Content-Length beside Transfer-Encoding, a malformed
 * length are errors; and a head whose names are not tokens (white space
 * before a colon) or whose values fold over lines is refused here. */
#ifndef TETHER_HTTP_REQUEST_H
#define TETHER_HTTP_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <http_parser.h>

#include "buf.h"

#define HTTP_REQUEST_MAX_HEADERS 100

struct http_request_hooks {
	void (*begin)(void *owner);      /* the first byte of a request */
	void (*head)(void *owner);       /* the request line and headers are in */
	void (*body)(void *owner, const char *data, size_t len);
	void (*end)(void *owner);        /* the whole request is in */
};

struct http_hoff {
	uint32_t name, value;   /* offsets into the arena */
};

struct http_request {
	http_parser hp;
	const struct http_request_hooks *hooks;
	void *owner;
	size_t max_head;          /* request line and headers, bytes */
	struct buf arena;
	uint32_t url_len, path;
	bool url_done, in_value;
	struct http_hoff *h, *q;  /* headers, query parameters */
	unsigned nh, nq, hcap, qcap;
	const char *refused;      /* why the head was refused (static text) */
	const char *feed_end;     /* the end of the input being parsed */
	bool value_cut;           /* the last piece of a value ended with the input */
	bool head_done;           /* the head is in: a field now would be a trailer */
};

void http_request_init(struct http_request *r, const struct http_request_hooks *hooks, void *owner,
		       size_t max_head);
/* Ready for the connection's next request. */
void http_request_reset(struct http_request *r);
void http_request_free(struct http_request *r);

/* Parses data. Returns the bytes used: fewer than len when a hook paused
 * (http_request_pause: the rest is the next request's, or unread body).
 * On malformed input returns with *status 400 or 431 and why in *msg
 * (static text); *status is 0 otherwise. */
size_t http_request_feed(struct http_request *r, const char *data, size_t len, unsigned *status, const char **msg);
/* From a hook: stop after this byte. The next feed goes on from there. */
void http_request_pause(struct http_request *r);

/* After the head. */
const char *http_request_method(const struct http_request *r);
bool http_request_is_head(const struct http_request *r);
bool http_request_keep_alive(const struct http_request *r);
bool http_request_http11(const struct http_request *r);
bool http_request_has_body(const struct http_request *r);
int64_t http_request_content_length(const struct http_request *r);   /* -1: none, or chunked */
const char *http_request_path(const struct http_request *r);
const char *http_request_header(const struct http_request *r, const char *name);
const char *http_request_query(const struct http_request *r, const char *key);

#endif
