/* core/hub.h: every open stream and waiting long-poll, and the ticker that
 * drives heartbeats, long-poll deadlines and write-behind of node records.
 * A commit wakes every suspended stream; each stream then asks for one
 * coalesced push from its own last-sent version to the newest, so a slow or
 * late stream gets the whole gap at once, never a queue of stale pushes.
 * Idle streams are suspended in the HTTP server and cost no thread. */
#ifndef TETHER_HUB_H
#define TETHER_HUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "net/httpd.h"

#include "core/delta.h"

struct core;
struct stream;
struct waiter;

struct hub *hub_new(struct core *p, uint64_t version);
int hub_start(struct hub *h, char *err, size_t errlen);
/* Ends every stream (their readers finish cleanly), wakes every waiter,
 * waits up to a few seconds for them to go, and stops the ticker. */
void hub_stop(struct hub *h);
void hub_free(struct hub *h);

/* A new version committed, or rollout targets moved: wake streams and the
 * long-polls whose node's target moved. */
void hub_notify(struct hub *h, uint64_t version);
/* Runs the keeper (rollout gates, node records) now, not at its next tick. */
void hub_wake_keeper(struct hub *h);
uint64_t hub_version(struct hub *h);
size_t hub_stream_count(struct hub *h);

/* A stream for node, starting from the node's version `have`; sub is
 * moved into the stream. Older streams of the same node are closed.
 * token_id names the token it was opened with ("" or NULL: none).
 * unacked: the node says it holds `have` without having ACKed it. */
struct stream *hub_stream_new(struct hub *h, struct http_conn *c, const char *node, uint64_t have,
			      struct sub *sub, bool gzip, const char *token_id, bool unacked);
/* A relay's stream (docs/protocol.md, "Relays"), from the relay's version
 * have; an older stream of the same relay is closed. cred names the
 * credential it was opened with (api_relay_cred). */
struct stream *hub_relay_new(struct hub *h, struct http_conn *c, const char *relay, uint64_t have,
			     const char *token_id, const char *cred);
/* Whether relay holds a stream here now. */
bool hub_relay_up(struct hub *h, const char *relay);
/* Whether relay holds a stream here now opened with credential cred. */
bool hub_relay_by(struct hub *h, const char *relay, const char *cred);
/* A token was revoked: closes the streams opened with it and wakes the
 * long-polls made with it (they are refused when they answer). Returns
 * how many. */
size_t hub_close_token(struct hub *h, const char *token_id);
/* A node refused its last push and still runs version: its stream's next
 * push starts from there (no resync round trip). */
void hub_stream_holds(struct hub *h, const char *node, uint64_t version);
/* The stream's body reader and its free callback (httpd.h). */
ssize_t hub_stream_read(void *cls, uint64_t pos, char *buf, size_t max);
void hub_stream_free(void *cls);

/* Suspends c until node's target moves from have or deadline_ms
 * (monotonic) passes. Returns NULL (and does not suspend) when it already
 * moved. */
struct waiter *hub_waiter_add(struct hub *h, struct http_conn *c, const char *node, uint64_t have,
			      int64_t deadline_ms, const char *token_id);
/* Unregisters (if still waiting) and frees a waiter: after the connection
 * resumed, or from the completion callback. */
void hub_waiter_release(struct hub *h, struct waiter *w);

#endif
