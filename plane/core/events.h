/* core/events.h: the operators' event bus behind GET /v1/events (and the
 * console, and `tetherctl watch`): versions committed, ACKs and NACKs,
 * rollout transitions, nodes connecting and leaving. Publishers format an
 * event's JSON and hand it over; it lands in a ring of the last
 * EVENTS_RING events, each with a sequence number (its SSE id), and wakes
 * the suspended subscriber connections, which copy from the ring on their
 * own thread. A subscriber that falls a whole ring behind is closed; one
 * resuming from an id the ring no longer holds gets a `reset` event.
 * One mutex, a leaf (only the HTTP server's resume is called under it). */
#ifndef TETHER_EVENTS_H
#define TETHER_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "net/httpd.h"

#include "buf.h"

#define EVENTS_RING 1000

struct events;
struct plane;
struct ack_msg;
struct store_change;

/* heartbeat: seconds between heartbeat events. */
struct events *events_new(double heartbeat);
int events_start(struct events *e, char *err, size_t errlen);
/* Ends every subscriber's stream (they finish cleanly), waits up to a few
 * seconds for them to go, and stops the heartbeat thread. */
void events_stop(struct events *e);
void events_free(struct events *e);

/* Publishes an event of type (a fixed name) whose data is the JSON object
 * in data (taken, released). NULL e: nothing. */
void events_publish(struct events *e, const char *type, struct buf *data);

/* The publishers' short forms. */
void events_version(struct events *e, uint64_t version, const struct store_change *ch, size_t n,
		    const char *origin);
/* A node's key for sealed secrets registered, rotated or revoked (what):
 * event "key" {"node","key_id","what"}. */
void events_key(struct events *e, const char *node, const char *kid, const char *what);
void events_ack(struct events *e, const struct ack_msg *m);
/* Publishes the rollout as /v1/rollouts/current shows it (json, from the
 * rollout) when its id, state or stage changed since the last one
 * published. */
void events_rollout(struct events *e, const char *json);
void events_node(struct events *e, const char *node, bool connected);

/* A subscriber: with resume, from the event after last_id (a reset when
 * the ring no longer holds it); else from the next event. token_id names
 * the token it came with ("" or NULL: none). */
struct events_sub *events_sub_new(struct events *e, struct http_conn *c, uint64_t last_id, bool resume,
				  const char *token_id);
/* A token was revoked: ends the streams opened with it. Returns how many. */
size_t events_close_token(struct events *e, const char *token_id);
ssize_t events_sub_read(void *cls, uint64_t pos, char *buf, size_t max);
void events_sub_free(void *cls);

/* tether_events_* lines for /metrics. */
void events_metrics(struct events *e, struct buf *out);

#endif
