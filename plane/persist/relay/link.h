/* persist/relay/link.h: a relay's connection to its upstream (the origin, or
 * another relay): one thread holds the relay stream (GET /v1/relay/stream,
 * Server-Sent Events) and hands each event over in order; a stream silent
 * for three heartbeats, or one that breaks, is reopened on the next
 * upstream of --upstream from the version the relay holds. Requests
 * (node records up, statements down) go to the upstream the stream is on.
 * Credentials: --upstream-token-file, or a client certificate. */
#ifndef TETHER_RELAY_LINK_H
#define TETHER_RELAY_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define RELAY_MAX_UPSTREAMS 16

struct relay_link_opts {
	const char *urls;            /* --upstream: URL[,URL...] */
	const char *relay_id;        /* this relay's name upstream */
	const char *token_file;      /* NULL: none */
	const char *ca_file, *cert, *key;
	size_t max_event;            /* the largest event accepted */
};

struct relay_link_cbs {
	void *ctx;
	/* the version to (re)open the stream from */
	uint64_t (*resume)(void *ctx);
	/* one event; non-zero reopens the stream */
	int (*event)(void *ctx, const char *type, const char *data, size_t len);
	/* the stream opened (up) or broke (!up, why) */
	void (*health)(void *ctx, bool up, const char *url, const char *why);
};

/* Checks the options (URLs, token file) and starts the thread. NULL with
 * err. */
struct relay_link *relay_link_start(const struct relay_link_opts *o, const struct relay_link_cbs *cbs, char *err,
				    size_t errlen);
/* Stops the thread: no callback runs once it returns; requests still
 * go (the last node records, at shutdown). */
void relay_link_stop(struct relay_link *l);
void relay_link_free(struct relay_link *l);
/* Reopens the stream (from the version the follower holds then). */
void relay_link_reopen(struct relay_link *l);
/* The heartbeat interval the upstream announced: three of them silent is
 * a dead stream. */
void relay_link_set_interval(struct relay_link *l, double seconds);
/* Since when (monotonic ms) the stream is not open, with the last
 * failure in why; 0 while it is open. */
int64_t relay_link_down_since(struct relay_link *l, char *why, size_t cap);
/* The upstream says it is stale: with another upstream listed, the stream
 * moves on to the next one (not again within hold_ms: a flapping upstream
 * does not make the relay thrash). Whether it moves. */
bool relay_link_move(struct relay_link *l, int64_t hold_ms);
/* Whether the stream is open now, and the URL it is on. */
bool relay_link_up(struct relay_link *l, char *url, size_t cap);
/* One request to the upstream the stream is on (body NULL: GET), bounded
 * by timeout_ms. Returns the HTTP status (out has the answer), or -1 with
 * err when none answered. */
long relay_link_call(struct relay_link *l, const char *method, const char *path, const char *body, size_t len,
		     long timeout_ms, struct buf *out, char *err, size_t errlen);

#endif
