/* core/core.h: the parts the plane's core is made of and what they share:
 * the store and its backend, the writer, node records, pushes, statements,
 * streams (the hub), events, tokens and freshness, with their counters.
 * plane.c fills one struct core at start-up and wires its hooks: through
 * them core tells the wings above it (the rollout and its gates) what
 * happened and asks them what it cannot know, without naming them. */
#ifndef TETHER_CORE_H
#define TETHER_CORE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

struct overrides;

/* What core reads of the options. */
struct core_config {
	double heartbeat;              /* seconds between heartbeats on a stream */
	uint64_t max_resources;        /* live resources at most */
};

struct core_counters {
	atomic_uint_fast64_t writes, write_errors, refused_writes;
	atomic_uint_fast64_t pushes, snapshots, push_bytes, heartbeats;
	atomic_uint_fast64_t polls, polls_not_modified;
	atomic_uint_fast64_t streams_opened, streams_replaced;
	atomic_uint_fast64_t requests;
};

/* What core asks of the wings above it. Each may be NULL (then: every
 * node's target is the newest version, nothing steps, no report is
 * wanted more often than the backend's own pace). ctx is plane.c's. */
struct core_hooks {
	void *ctx;
	/* The version node should hold now (a staged rollout's target), or
	 * UINT64_MAX for the newest. */
	uint64_t (*target)(void *ctx, const char *node);
	/* A push of version went to node (has_content: not a heartbeat). */
	void (*sent)(void *ctx, const char *node, uint64_t version, bool has_content);
	/* A version was committed, or a tick passed: a staged rollout steps. */
	void (*step)(void *ctx);
	/* Whether nodes should report traffic at every heartbeat (a gate judges it). */
	bool (*wants_reports)(void *ctx);
	/* Relay streams: the rollout's generation (it changed when it differs),
	 * its state as a relay takes it, and the released version as of v. */
	uint64_t (*rollout_gen)(void *ctx);
	void (*rollout_json)(void *ctx, uint64_t v, struct buf *out);
	uint64_t (*released)(void *ctx, uint64_t v);
	/* A write's answer: appends ,"rollout":{...} when version waits for
	 * a rollout or started one (rollout_write_note); may be NULL. */
	void (*write_note)(void *ctx, uint64_t version, struct buf *out);
};

struct core {
	struct core_config cfg;
	struct core_hooks hooks;
	struct persist *persist;       /* the store's backend (--store) */
	struct writer *writer;         /* writes off the HTTP threads (a shared backend) */
	struct store *store;
	struct nodes *nodes;
	struct pushcache *pushes;
	struct hub *hub;
	struct events *events;         /* GET /v1/events */
	struct freshness *fresh;       /* whether it can vouch that it is current */
	struct tokens *tokens;
	struct digests *digests;       /* NULL: no signing */
	struct statements *statements;
	struct overrides *overrides;   /* versions that overrode a guard (statements, pushes) */
	struct approvals *approvals;   /* tokens kept, nodes that require them (core/approvals.h) */
	const struct sealed_conf *sealed;   /* --sealed-secrets (NULL: off) */
	struct freeze_state *freeze;   /* the freeze window (NULL: none, tests) */
	char boot_id[12];
	atomic_uint_fast64_t nonce_seq;
	struct core_counters ctr;
	atomic_bool stopping;
	int64_t started_ms;
};

/* Sets the boot id (random), the counters and the clock; the parts are
 * the caller's to open. */
void core_init(struct core *c);
/* Writes a fresh push nonce: "<boot id>.<sequence>". */
void core_nonce(struct core *c, char *out, size_t cap);
/* The version node should hold now: the newest, or its rollout target. */
uint64_t core_target(struct core *c, const char *node);
/* Records a push sent to node (its node record, and the hook). */
void core_sent(struct core *c, const char *node, uint64_t version, const char *nonce, bool has_content);
/* Whether this plane is a relay (its backend follows an upstream), and
 * which: the upstream's URL into up. */
bool core_is_relay(struct core *c);
void core_upstream(struct core *c, char *up, size_t cap);
/* The hooks, or what core does without them. */
void core_step(struct core *c);
uint64_t core_rollout_gen(struct core *c);
void core_rollout_json(struct core *c, uint64_t v, struct buf *out);
uint64_t core_released(struct core *c, uint64_t v);
bool core_wants_reports(struct core *c);

#endif
