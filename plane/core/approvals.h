/* core/approvals.h: approvals that nodes enforce (docs/protocol.md,
 * "Approvals"): the tokens the plane verified (POST /v1/approvals), kept
 * per (version, subscription, key) in the backend; the nodes that require
 * K of them (they say approvals=K when they connect; in memory); the hold
 * (such a node's target is the newest version, at or above what it holds,
 * that K distinct keys approved for its subscription); and the tokens a
 * push to such a node carries.
 *
 * One mutex, a leaf: approvals_target runs under the hub, nodes and
 * rollout locks (core_target), so nothing here calls out with it held.
 * With replicas (etcd), the keeper re-reads the backend's approvals every
 * second (approvals_load, without the lock), so an approval another
 * replica took in holds or releases nodes here within about a second. */
#ifndef TETHER_APPROVALS_H
#define TETHER_APPROVALS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "persist/persist.h"

struct approvals;

struct approvals *approvals_new(struct persist *p);
void approvals_free(struct approvals *a);
/* Reads what the backend keeps (at start; and, with replicas, every
 * second from the keeper: another replica may have taken approvals).
 * Returns how many were new, or -1 with err. */
int approvals_load(struct approvals *a, char *err, size_t errlen);

/* The most approvals kept in all (each (version, sub) takes at most
 * APPROVALS_MAX keys, the most a push carries). */
#define APPROVALS_KEPT_MAX 65536

/* Keeps a verified token: durably first, then in memory. 1 new, 0 the same
 * (version, sub, kid) was had already (the newer token replaces it), -1
 * with err (the backend failed), -2 with err (full: APPROVALS_MAX keys for
 * (version, sub) already, or APPROVALS_KEPT_MAX in all). */
int approvals_add(struct approvals *a, uint64_t version, const char *sub, const char *kid, const char *token,
		  char *err, size_t errlen);

/* Relays: every approval kept, as the relay stream's "approvals" event
 * ({"approvals":[{"version","sub","kid","token"}...]}), and a generation
 * that moves whenever they change; a relay replaces its set with the
 * upstream's (it verifies nothing: its nodes do). */
uint64_t approvals_gen(struct approvals *a);
void approvals_all_json(struct approvals *a, struct buf *out);
void approvals_replace(struct approvals *a, const struct persist_approval *list, size_t n);

/* Drops the approvals of versions below both the version log's floor
 * (log_floor: what the log still shows) and, per subscription, its newest
 * approved version (what a hold may still need), from the backend first.
 * Returns how many went, or -1 with err. */
int approvals_trim(struct approvals *a, uint64_t log_floor, char *err, size_t errlen);

/* A node connected saying approvals=k (k == 0: it requires none, and is
 * forgotten), with subscription sub (canonical) while holding version
 * held. */
void approvals_node(struct approvals *a, const char *node, unsigned k, const char *sub, uint64_t held);
/* A push of version went to node. */
void approvals_sent(struct approvals *a, const char *node, uint64_t version);
/* node's target under the hold: min(target, the newest approved version
 * >= what it holds), never below what it holds; target itself for a node
 * that requires none. UINT64_MAX: the newest. Leaf lock. */
uint64_t approvals_target(struct approvals *a, const char *node, uint64_t target);
/* A stream's heartbeat went to node: it is still there. */
void approvals_seen(struct approvals *a, const char *node);
/* A relay's stream was sent to (a heartbeat, the approvals): while one
 * follows (heard of within APPROVALS_NODE_GONE_MS), the history is kept
 * from the oldest approval kept too -- the relay's nodes may be held there. */
void approvals_relay_seen(struct approvals *a);
/* A node not heard of this long (no connection, poll, push or heartbeat)
 * is gone for the history floor: it no longer holds the store's history
 * back (it stays held; back, it gets statements again from what is kept). */
#define APPROVALS_NODE_GONE_MS (24LL * 3600 * 1000)
/* Whether some node requires approvals, and the oldest version such a
 * node (not gone) holds (the store keeps history from there:
 * store_set_hold). approvals_floor_at: at now (ms, now_ms's clock). */
bool approvals_floor(struct approvals *a, uint64_t *floor);
bool approvals_floor_at(struct approvals *a, int64_t now, uint64_t *floor);
/* Tells the store what history the hold needs (approvals_floor). Call
 * holding no store lock (after approvals_node, a push, or a new approval). */
struct store;
void approvals_keep(struct approvals *a, struct store *s);

/* A push's member for node at version, and its comma:
 * "approvals":[token,...], (nothing for a node that requires none). */
void approvals_push_json(struct approvals *a, const char *node, uint64_t version, struct buf *out);
/* GET /v1/approvals?version=N: {"version":N,"approvals":[{"sub","kids":[...],"tokens":[...]}],
 * "subs":[the subscriptions of the nodes that require approvals],"needed":K} */
void approvals_version_json(struct approvals *a, uint64_t version, struct buf *out);
/* /v1/nodes: ,"approvals":K,"approved_version":V for a node that requires
 * them (nothing otherwise). */
void approvals_node_json(struct approvals *a, const char *node, struct buf *out);
/* The version log: ,"approvals":[{"kid","sub"}...],"approvals_needed":K
 * when a node requires approvals or some are kept for version. */
void approvals_log_json(struct approvals *a, uint64_t version, struct buf *out);

#endif
