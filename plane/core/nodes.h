/* core/nodes.h: the plane's record of every node: labels, connection, the last
 * push sent (version, nonce), the acked version, the last NACK, counters.
 * Records are written behind (nodes_flush, every few hundred ms and at
 * exit) so a burst of ACKs costs one transaction, not one each. */
#ifndef TETHER_NODES_H
#define TETHER_NODES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "keys.h"
#include "persist/node_changes.h"
#include "persist/persist.h"
#include "sub.h"

#define NONCE_MAX 48
#define NODE_ERROR_MAX 4096

enum ack_result {
	ACK_ACCEPTED,      /* the nonce is the latest sent: the record moved */
	ACK_STALE,         /* an older or unknown nonce: counted, nothing moved */
	ACK_MISMATCH,      /* the nonce is the latest but the version is not its version */
};

struct ack_msg {
	const char *node;
	uint64_t version;
	const char *nonce;
	bool nack;
	const char *error;   /* NACK reason, may be NULL */
	int healthy;         /* -1 unknown, 0 unhealthy, 1 healthy */
	bool verify;         /* a NACK of a push that failed the node's --trust checks */
	bool held;           /* a held NACK: no wrap for a sealed secret it would receive; not a NACK (no
			      * count, no gate, no rollout failure: the member stays pending) */
};

struct nodes_stats {
	size_t nodes, connected, lagging;
	uint64_t acks, nacks, stale, verify_failures;
};

/* A node's target version (what it should run), or UINT64_MAX for the
 * plane's newest. Called with the nodes lock held: it must not call back. */
typedef uint64_t (*nodes_target_fn)(void *ctx, const char *node);

struct nodes *nodes_open(struct persist *p, size_t max_nodes, int64_t poll_window_ms, char *err, size_t errlen);
void nodes_free(struct nodes *n);
/* Takes in a record another replica wrote (a shared store): each part
 * from whichever replica saw it last. Not written back. -1 when the node
 * is new and the table is full. */
int nodes_merge(struct nodes *n, const struct persist_node *pn);
/* Takes in a record a relay sent up (POST /v1/relay/nodes): the node is
 * behind relay (and pn->via, the relays behind that one). Written on, to
 * the store or, on a relay, further up. -1 with err when it is new and the
 * table is full, or when the 'c' line's rules refuse the relay's word (a
 * node streaming from this plane, or from another relay that is up, is
 * not moved). */
int nodes_relayed(struct nodes *n, const struct persist_node *pn, const char *relay, char *err, size_t errlen);
/* Takes in one change a relay sent up (POST /v1/relay/changes,
 * persist/node_changes.h) and marks the record to be written (to the
 * store or, on a relay, further up). A 'c' line places the node behind
 * relay (it takes a node another relay had: nodes move on failover, but
 * not a "not streaming" word from a relay the node has left); every other
 * line is for a node behind relay only. A traffic line is only checked
 * (nodes_set_traffic takes the report). 0; -1 with err when refused. */
int nodes_relay_change(struct nodes *n, const char *relay, const struct node_change *c, char *err, size_t errlen);
/* The version relay says it holds: a node behind it that it streams to
 * was sent its target up to that (/v1/nodes's sent_version). */
void nodes_relay_held(struct nodes *n, const char *relay, uint64_t held);
/* Relays below this plane: fn says whether a relay holds its stream here
 * (a node behind it counts connected while it does). own_only: this plane
 * is a relay itself, and lists only the nodes it serves. */
void nodes_set_relay_up(struct nodes *n, bool (*fn)(void *ctx, const char *relay), void *ctx, bool own_only);
/* --approve-relay-keys: a node's first key (or first after a revoke) that
 * comes through a relay waits for nodes_key_approve (not live until then);
 * rotations it endorses need none, and the node's own registration of it
 * at this plane approves it. */
void nodes_set_approve_relay_keys(struct nodes *n, bool on);
/* /v1/nodes shows, per node, the approvals it requires (core/approvals.h;
 * its lock is taken under the nodes lock: a leaf). */
struct approvals;
void nodes_set_approvals(struct nodes *n, struct approvals *a);
/* Marks every record to be written again (a relay reached an upstream:
 * it hears them all). */
void nodes_resync(struct nodes *n);

/* Per-node targets for lag (none: every node's target is the newest), and
 * the seconds a node may trail its target before it is flagged lagging. */
void nodes_set_target(struct nodes *n, nodes_target_fn fn, void *ctx, double lag_alert_s);
/* Notes which nodes trail their target, and since when. Call every second
 * or so; returns how many are lagging (behind for lag_alert_s or more). */
size_t nodes_check_lag(struct nodes *n, uint64_t plane_version);

/* The connected nodes (ids and canonical labels, copies the caller frees
 * with nodes_list_free): the members of a rollout that starts now. */
size_t nodes_connected_list(struct nodes *n, char ***ids, char ***labels);
void nodes_list_free(char **ids, char **labels, size_t count);
/* One node's sent and acked versions and health; false when unknown. */
bool nodes_versions(struct nodes *n, const char *id, uint64_t *sent, uint64_t *acked, int *healthy);
/* Whether id's record holds a NACK of a version >= min (its error into
 * err): what a rollout controller taking over finds. */
bool nodes_nacked(struct nodes *n, const char *id, uint64_t min, char *err, size_t errlen);

/* Whether id's record holds a held NACK of a version >= min that no ACK
 * ended (its reason into why): a rollout's member that waits for a wrap. */
bool nodes_held(struct nodes *n, const char *id, uint64_t min, char *why, size_t whylen);

/* Checks a node id: [A-Za-z0-9._-]{1,200}. */
bool nodes_id_valid(const char *id);

/* Records that a node was seen (creating it); labels is canonical JSON of
 * an object or NULL to keep the old ones. Returns -1 when the registry is
 * full (max_nodes) and the node is new. */
int nodes_seen(struct nodes *n, const char *id, const char *labels, const char *transport);
/* Records the subscription (canonical, "" for every name) a node's stream
 * or poll asked for: GET /v1/nodes shows it as "sub", so tetherctl sync
 * counts the nodes a change reaches. Saved with the node's record, so a
 * restarted plane still knows it. */
void nodes_set_sub(struct nodes *n, const char *id, const char *canon);
/* Records whether a node counts its traffic, as its ACK says ("counts",
 * and when false "counts_reason": why not), or a traffic report of it
 * shows (true): /v1/nodes shows it. Memory only. */
#define GATE_COUNTS_REASON_MAX 160
void nodes_set_counts(struct nodes *n, const char *id, bool counts, const char *reason);
/* Records a node's last traffic report (traffic-aware gates): /v1/nodes
 * shows it, /metrics its sums. Memory only, but with pass_on on a replica
 * or a relay it goes with the node's next record written
 * (persist_node.traffic). 0; 1 when it is older than the one shown
 * (traffic_replayed: not taken); -1 for an unknown node. */
struct traffic;
int nodes_set_traffic(struct nodes *n, const char *id, const struct traffic *t, bool pass_on);
void nodes_stream_open(struct nodes *n, const char *id);
void nodes_stream_close(struct nodes *n, const char *id);
/* Records the push sent to a node. */
void nodes_sent(struct nodes *n, const char *id, uint64_t version, const char *nonce);
/* Applies an ACK or NACK. plane_version bounds what a poll nonce may
 * claim. A NACK of a failed verification is recorded as such whatever
 * its nonce (a replayed push carries an old one): it moves nothing, but
 * shows. Returns 0 with *res set, or -1 for an unknown node. */
int nodes_ack(struct nodes *n, const struct ack_msg *m, uint64_t plane_version, enum ack_result *res);

/* ---- keys for sealed secrets (docs/protocol.md "Sealed secrets") ---- */

/* What a registration did. */
struct nodes_key_answer {
	unsigned http;               /* 200, or 400, 403, 409, 503 with err */
	const char *status;          /* "registered", "unchanged", "rotated"; with --approve-relay-keys
				      * "pending" (a relay's first key), "approved" (the node's own
				      * registration of a pending key), "replaced" (of another key) */
	char kid[KEY_ID_LEN + 1];    /* the registration's key id */
	bool changed;                /* the record's key moved: event "key" (not for "unchanged") */
	int64_t stale_mark;          /* a 409 for an at not above the node's mark: the mark (key_at),
				      * which the node's next registration's at must pass; 0 else */
};
/* Applies registration text for node id: rule 1 (it parses, its node is
 * id), then rules 2 to 5 (core/nodekeys.h). relay: the relay it came
 * through (a 'k' line: the node must be behind it; the key's via is the
 * node's path), or NULL. A node with no record yet (it registers before
 * its first stream gets here) gets one (behind relay). The record is
 * written behind as any change. Returns 0 with the answer (http 200),
 * or -1 with ans->http and err. */
int nodes_key_register(struct nodes *n, const char *id, const char *text, size_t len, const char *relay,
		       struct nodes_key_answer *ans, char *err, size_t errlen);
/* A relay's: rule 1 here (and at's bound), then the registration goes up
 * as a 'k' line with the node's next record (made now when the node has
 * none yet). relay: a relay below this one it came
 * through (its 'k' line: the node must be behind it), or NULL (the node's
 * POST). 0, or -1 with *http and err. */
int nodes_key_forward(struct nodes *n, const char *id, const char *text, size_t len, const char *relay,
		      unsigned *http, char *err, size_t errlen);
/* The live key's id joins the node's revoked ones and the key is
 * cleared (kid gets it). 0; 1 no live key; -1 no such node. */
int nodes_key_revoke(struct nodes *n, const char *id, char kid[KEY_ID_LEN + 1]);
/* After a revocation of kid: the nodes that still have it live (the same
 * key on another node: a copied node.key) have it revoked too; their ids
 * (malloc'd, each and the array) into *ids. Returns how many. */
size_t nodes_key_revoke_everywhere(struct nodes *n, const char *kid, char ***ids);
/* An admin approves node id's pending key kid (--approve-relay-keys):
 * 200; 404 no such node; 409 with err when no key waits or it is not
 * kid. */
unsigned nodes_key_approve(struct nodes *n, const char *id, const char *kid, char *err, size_t errlen);

/* A copy of the nodes' keys: the live ones (node, key, key id, sub), the
 * pending ones apart, and every revoked key id. */
struct nodes_key {
	char *node, *key, *sub;      /* sub: NULL unknown, "" every name */
	char *via;                   /* where the key came from: "" direct, else the relays */
	char kid[KEY_ID_LEN + 1];
};
struct nodes_keys {
	struct nodes_key *live;
	size_t nlive;
	struct nodes_key *pending;   /* waiting for an admin (--approve-relay-keys): not live */
	size_t npending;
	struct sub *subs;            /* nodes_keys_index: live[i]'s parsed subscription */
	uint64_t gen;                /* the registry's key generation it was copied at */
	unsigned refs;               /* nodes_keys_hold's */
	char **revoked;              /* sorted */
	size_t nrevoked;
};
void nodes_keys_get(struct nodes *n, struct nodes_keys *out);
/* Keeps of k's live keys those whose node's subscription is known and
 * reads (a node that registered before its first stream or poll is no
 * sealing target: no name reaches it until its subscription is known),
 * and parses each into k->subs. */
void nodes_keys_index(struct nodes_keys *k);
/* A shared, read-only copy of the keys, indexed (nodes_keys_index): made
 * once per change of a key, a pending flag or a subscription, so a write
 * of a secret or GET /v1/secrets costs the registry's lock nothing
 * fleet-sized when nothing moved. Give it back with nodes_keys_drop. */
const struct nodes_keys *nodes_keys_hold(struct nodes *n);
void nodes_keys_drop(struct nodes *n, const struct nodes_keys *k);
bool nodes_keys_revoked(const struct nodes_keys *k, const char *kid);
void nodes_keys_release(struct nodes_keys *k);

/* Appends the JSON array of every node (sorted by id). */
void nodes_to_json(struct nodes *n, uint64_t plane_version, struct buf *out);
/* Appends one node's JSON object; returns -1 when unknown. */
int nodes_one_to_json(struct nodes *n, const char *id, uint64_t plane_version, struct buf *out);
void nodes_stats(struct nodes *n, struct nodes_stats *st);
/* Appends Prometheus lines for per-node gauges. */
void nodes_metrics(struct nodes *n, uint64_t plane_version, struct buf *out);

/* Writes the records changed since the last flush. */
int nodes_flush(struct nodes *n, char *err, size_t errlen);

/* Poll nonces are self-describing: "p<version>-<base>". */
void nodes_poll_nonce(char *out, size_t cap, uint64_t version, uint64_t base);

#endif
