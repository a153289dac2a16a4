/* client.h: tetherctl's HTTP client for the plane's admin API (libcurl
 * easy requests). One place turns failures into the text users read. */
#ifndef TETHER_CTL_CLIENT_H
#define TETHER_CTL_CLIENT_H

#include "buf.h"

#include <stdbool.h>
#include <stddef.h>

#define CLIENT_CONNECT_TIMEOUT_MS 5000L
#define CLIENT_TIMEOUT_MS 60000L
/* The largest answer kept; anything bigger is a broken or hostile plane. */
#define CLIENT_ANSWER_MAX ((size_t)1 << 30)
/* The most planes one --plane lists (replicas or relays of one plane). */
#define CLIENT_MAX_PLANES 16

struct client;

/* An answer of the plane: the HTTP status (0 when none came) and the
 * body, owned by the caller (buf_release). */
struct client_answer {
	long status;
	struct buf body;
	/* a stale plane's word on itself (its Tether-Stale header: "SINCE
	 * WHY"; "" when it is current) */
	char stale[300];
};

/* Sets up libcurl for the whole process; call once before client_new,
 * and client_global_cleanup once at the end. Returns 0 or -1. */
int client_global_init(void);
void client_global_cleanup(void);

/* Returns a new client for the plane at base_url ("http://host:port" or
 * "https://...", trailing slashes ignored), with the credentials of cr
 * (may be NULL): CA, client certificate and key, bearer token. Everything
 * is copied. NULL when libcurl cannot make a handle. */
struct credentials;
struct client *client_new(const char *base_url, const struct credentials *cr);
void client_free(struct client *c);

/* Sends one request (body may be NULL) to base_url + path. Returns 0 when
 * the plane answered 2xx; -1 otherwise, with client_error() holding the
 * message: the plane's "error" text, or "cannot reach the plane at URL:
 * ...". ans is (re)initialised either way and its body must be released. */
int client_request(struct client *c, const char *method, const char *path, const char *body,
		   size_t body_len, struct client_answer *ans);
/* A stream (GET path, header an extra "Name: value" or NULL): the bytes of
 * a 2xx answer go to fn as they come (fn returns 0, or -1 to stop); no
 * overall timeout, but dead after idle_s seconds without a byte. Returns
 * as client_request when the stream ends (0: the plane ended it). */
typedef int client_chunk_fn(void *ctx, const char *data, size_t len);
int client_stream(struct client *c, const char *path, const char *header, long idle_s, client_chunk_fn *fn,
		  void *ctx, struct client_answer *ans);
/* An extra header line ("Name: value", copied) on every request but
 * GETs: up to two (a third replaces the second); NULL: none. */
void client_set_header(struct client *c, const char *line);
/* The message of the last failed request (never NULL). */
const char *client_error(const struct client *c);
/* After a failed request: whether it may go to the next plane of a list.
 * *unsure is set when it may not because the plane may have acted on it
 * (a write sent without an answer). */
bool client_try_next(const struct client *c, const char *method, bool *unsure);

/* Splits "URL[,URL...]" into at most CLIENT_MAX_PLANES base URLs into
 * urls (malloc'd; free them with client_planes_free): each http:// or
 * https:// with a host, trailing slashes dropped, blanks around commas
 * ignored; an empty entry or a duplicate (compared without case) is an
 * error. Returns how many, or -1 with err. */
int client_planes(const char *list, char **urls, char *err, size_t errlen);
void client_planes_free(char **urls, int n);

/* Appends s percent-encoded for a URL: everything but [A-Za-z0-9._~-],
 * and '/' when keep_slash. */
void client_escape(struct buf *out, const char *s, bool keep_slash);

#endif
