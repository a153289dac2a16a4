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

struct client;

/* An answer of the plane: the HTTP status (0 when none came) and the
 * body, owned by the caller (buf_release). */
struct client_answer {
	long status;
	struct buf body;
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
/* The message of the last failed request (never NULL). */
const char *client_error(const struct client *c);

/* Appends s percent-encoded for a URL: everything but [A-Za-z0-9._~-],
 * and '/' when keep_slash. */
void client_escape(struct buf *out, const char *s, bool keep_slash);

#endif
