/* rollout/rollout.h: the rollout controller. With --rollout immediate every node's
 * target is the newest version. With --rollout staged each new version
 * becomes a rollout: the nodes connected at its start, in a label-
 * stratified order, move from the released version to the new one stage by
 * stage (--stages percentages); a stage advances when every node in it has
 * ACKed the new version, healthy where it reports health, and --bake
 * seconds have passed (with --gate-* options, the stage's live traffic is
 * judged too: gate.h). A NACK, an unhealthy ACK, a traffic gate crossed or
 * a node silent past --ack-timeout stops the rollout and reverts: the baseline content is
 * committed as a new, higher version that every node gets. One rollout at
 * a time; versions committed meanwhile go out in the next one. State and
 * history live in the store's database; a restarted plane resumes. */
#ifndef TETHER_ROLLOUT_H
#define TETHER_ROLLOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "core/nodes.h"

#define ROLLOUT_MAX_STAGES 16

struct core;
struct gate;
struct rollout;

/* The rollout's options (the plane's, at start-up). */
struct rollout_options {
	const char *mode;            /* "staged" or "immediate" (--rollout) */
	const char *stages;          /* "1,10,100" (--stages) */
	double bake;                 /* seconds a stage bakes (--bake) */
	double ack_timeout;          /* seconds a member has to ACK (--ack-timeout) */
};

/* Parses "1,10,100": increasing percentages 1..100 ending at 100. */
int rollout_parse_stages(const char *s, unsigned *out, size_t *n, char *err, size_t errlen);

/* Loads the last rollout and the released version; resumes a rollout in
 * progress (or, under --rollout immediate, ends it). Needs the core's
 * persist, store and nodes; gate may be NULL. NULL with err on failure. */
struct rollout *rollout_open(struct core *p, struct gate *gate, const struct rollout_options *o, char *err,
			     size_t errlen);
void rollout_free(struct rollout *r);
bool rollout_staged(const struct rollout *r);

/* The version node should hold now, or UINT64_MAX for the newest. Safe
 * from any thread and under the store, hub or nodes locks. */
uint64_t rollout_target(struct rollout *r, const char *node);
/* Whether every node's target is the same now (no staged rollout in
 * progress), and then which (UINT64_MAX for the newest): an answer that
 * depends on the node must not go into a shared HTTP cache. */
bool rollout_common_target(struct rollout *r, uint64_t *target);

/* Moves the controller on: starts a rollout for new versions, advances a
 * stage whose gate is met, reverts after a failure or a timeout. Call
 * without holding any lock: after a commit, after an ACK, and from the
 * ticker. */
void rollout_step(struct rollout *r);
/* A push of version (carrying resources or not) went to node. */
void rollout_sent(struct rollout *r, const char *node, uint64_t version, bool has_content);
/* An accepted ACK or NACK (nonce-matched). Returns true when it was a
 * member's answer to the rollout in progress: the caller makes the node
 * record durable before answering, so a restart still counts it. */
bool rollout_acked(struct rollout *r, const struct ack_msg *m);
/* Stops the rollout in progress and reverts it. Returns 0, or -1 with err
 * (nothing in progress: 1 in *status 409; a store failure: 500). */
int rollout_abort(struct rollout *r, int *status, char *err, size_t errlen);

/* Replicas (--store etcd): one elected controller makes the transitions;
 * the others follow its records. A record the controller wrote (run
 * taken, or NULL; the released version when has_released). */
struct ro_run;
struct persist_node;
void rollout_follow(struct rollout *r, struct ro_run *run, bool has_released, uint64_t released);
/* A node record another replica wrote: the controller counts its ACK or
 * NACK toward the stage, as if the node had answered here. */
void rollout_record(struct rollout *r, const struct persist_node *n);
/* Whether this replica is the elected controller now (false for a relay,
 * a replica that follows, or a plane without staged rollouts). */
bool rollout_leads(struct rollout *r);

/* Relays: a count that moves with every transition (a relay stream sends
 * the record again when it moved); the record and the released version as
 * {"released":"R","run":record|null} (newest: the store's version, which
 * is what is released under --rollout immediate); the released version. */
uint64_t rollout_gen(struct rollout *r);
void rollout_relay_json(struct rollout *r, uint64_t newest, struct buf *out);
uint64_t rollout_released_now(struct rollout *r, uint64_t newest);

/* Records the current rollout's counters (at exit: they move between
 * transitions without being saved). */
void rollout_save(struct rollout *r);

/* The current or last rollout as JSON; -1 when there has been none. */
int rollout_current_json(struct rollout *r, struct buf *out);
/* The last `limit` rollouts, newest first, as a JSON array. */
int rollout_history_json(struct rollout *r, size_t limit, struct buf *out, char *err, size_t errlen);
/* What a new version waits for before its rollout starts: the nodes
 * known to reconnect after a start or a controller's take-over (false: it
 * does not wait, or every one is back). until: epoch seconds; left:
 * seconds from now. */
struct rollout_wait {
	uint64_t version;
	size_t back, expected;
	double until, left;
};
bool rollout_waiting(struct rollout *r, struct rollout_wait *w);
/* Appends ,"waiting":{"for":"nodes","version","back","expected","until"}
 * when a version waits so (nothing otherwise). */
void rollout_waiting_json(struct rollout *r, struct buf *out);
/* The versions waiting for a rollout: (after, newest]. false: none, or
 * not staged. */
bool rollout_queue(struct rollout *r, uint64_t *after, uint64_t *newest);
/* A write's answer: appends ,"rollout":{...} for version just committed:
 * {"state":"started","id"}, {"state":"queued","behind":ID,"behind_version",
 * "stage" (1-based),"stages","queue" (1-based place)}, or {"state":
 * "waiting","for":"nodes","back","expected","until","queue"}; nothing
 * under --rollout immediate or when it goes out with nothing to wait for. */
void rollout_write_note(struct rollout *r, uint64_t version, struct buf *out);
/* The baseline of the current or last rollout (the version released
 * before it: what an operator may revert to at once) and its id. false:
 * no rollout yet, or not staged. */
bool rollout_baseline(struct rollout *r, uint64_t *version, uint64_t *id);
/* An emergency revert (tetherctl revert --now): begin before its commit
 * (no transition meanwhile; -1 with *status and err when this replica is
 * not the controller); *e (NULL under --rollout immediate) goes to the
 * commit as its hook, rollout_emergency_rows (persist.h's persist_hook):
 * the rollout in progress aborted, superseded, and the version released,
 * recorded in the commit's own transaction (on etcd fenced: it commits
 * only while this replica is the controller). end after the commit with
 * the version committed (0: it failed or changed nothing) makes it live:
 * the version goes to every node at once, no stages, no bakes; versions
 * queued behind the rollout are older than the revert, whose content
 * replaces them. note (may be NULL) gets ,"rollout":{"state":"emergency",
 * "superseded":ID|null}; end frees e. */
struct rollout_emergency;
struct persist_txn;
int rollout_emergency_begin(struct rollout *r, struct rollout_emergency **e, int *status, char *err,
			    size_t errlen);
int rollout_emergency_rows(void *e, struct persist_txn *tx, uint64_t version, char *err, size_t errlen);
void rollout_emergency_end(struct rollout *r, struct rollout_emergency *e, uint64_t version, struct buf *note);

/* Prometheus lines: state, stage, counters. */
void rollout_metrics(struct rollout *r, struct buf *out);

#endif
