/* persist/persist.h: the plane's persistence as one interface (OpenSMTPD's table
 * backends are the model): resources, tombstones and history; rollout
 * records and the released version; node records; token records; the TLS
 * session-ticket keys. One
 * backend runs (--store); persist/sqlite/sqlite.c is the embedded one. Nothing
 * outside the persist_* and *_sqlite files knows which. Each backend owns
 * its locking: every op may be called from any thread. */
#ifndef TETHER_PERSIST_H
#define TETHER_PERSIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ro_run;

/* Errors beyond -1: the backend cannot be reached or has no quorum (a
 * write gets 503), or another replica committed first (validate again
 * against the newer state and retry). */
#define PERSIST_UNAVAILABLE (-2)
#define PERSIST_CONFLICT (-3)
/* A rollout transition from a replica that is not the elected controller
 * (any more): it is not recorded, and the replica follows the records. */
#define PERSIST_FENCED (-4)
/* A record is there but cannot be read (ticket_keys_load: *rev is its
 * revision, so a swap at it replaces it). */
#define PERSIST_MALFORMED (-5)

/* A backend instance: the backend's own struct begins with this. */
struct persist {
	const struct persist_ops *ops;
};

/* One commit in progress: what a hook adds lands with the commit or not
 * at all. The backend's own struct begins with this. */
struct persist_txn {
	struct persist *p;
};
typedef int (*persist_hook)(void *ctx, struct persist_txn *tx, uint64_t version, char *err, size_t errlen);

/* One change of a commit: a new body, or a deletion (body NULL). */
struct persist_change {
	const char *name;
	const char *body;
	size_t body_len;
};

/* A state moving to the history: name's body as of version (body NULL: a
 * tombstone deleted at deleted_at). */
struct persist_state {
	const char *name;
	const char *body;
	size_t body_len;
	uint64_t version;
	int64_t deleted_at;
};

/* Loading the history: one older state of name (body NULL: deleted at
 * that version). Returns 0, or -1 when the store holds no such name. */
typedef int (*persist_history_cb)(void *ctx, const char *name, uint64_t version, const char *body, size_t len);

/* What one store commit writes. */
struct persist_commit {
	uint64_t version;                  /* the new global version */
	uint64_t horizon;                  /* the tombstone horizon after this commit */
	int64_t now;                       /* deletion time for new tombstones */
	const struct persist_change *changes;
	size_t nchanges;
	const char *const *pruned;         /* tombstones dropped by this commit */
	size_t npruned;
	const struct persist_state *kept;  /* states moving to the history */
	size_t nkept;
	persist_hook hook;                 /* more writes in the same commit */
	void *hook_ctx;
	/* the version log (docs/protocol.md "History"): who, why, and each
	 * change's state before it (before[i] NULL: absent); a rollout's
	 * revert marks versions (reverts_from, reverts_to] reverted by this
	 * one; versions past log_keep or older than log_max_age (0: no
	 * limit) are dropped in the same commit */
	const char *author, *message;
	const char *const *before;
	const size_t *before_len;
	uint64_t reverts_from, reverts_to;
	/* the write's override (tetherctl --override): JSON
	 * {"passed":[GUARD...],"reason":R}; NULL: none */
	const char *override;
	bool emergency;                    /* tetherctl revert --now: past every stage and bake */
	uint64_t log_keep;
	int64_t log_max_age;
};

/* One version of the log as read back (strings borrowed for the call);
 * names is a JSON array of the names it touched. */
struct persist_version {
	uint64_t version;
	const char *author, *message, *names;
	int64_t time;
	uint64_t reverted_by;
	const char *override;              /* JSON {"passed","reason"}; NULL: none */
	bool emergency;                    /* an emergency revert (tetherctl revert --now) */
};
typedef int (*persist_version_cb)(void *ctx, const struct persist_version *v);
/* One change of a version: the state before and after (NULL: absent). */
struct persist_vchange {
	uint64_t version;
	const char *name;
	const char *before, *after;
	size_t before_len, after_len;
};
typedef int (*persist_vchange_cb)(void *ctx, const struct persist_vchange *c);

/* A resource (body != NULL) or tombstone (body NULL), as loaded. */
typedef int (*persist_resource_cb)(void *ctx, const char *name, const char *body, size_t body_len,
				   uint64_t version, int64_t deleted_at);

/* A node's durable record. Strings are borrowed for the call. */
struct persist_node {
	const char *id, *labels, *transport;
	int64_t first_seen, last_seen;
	uint64_t sent_version;
	const char *sent_nonce;
	int64_t sent_at;
	uint64_t acked_version;
	int64_t acked_at;
	int healthy;                       /* -1 unknown */
	bool has_nack;
	uint64_t nack_version;
	const char *nack_nonce, *nack_error;
	int64_t nack_at;
	uint64_t acks, nacks, stale;
	const char *replica;               /* the replica that wrote it ("" or NULL: unknown) */
	bool streaming;                    /* it holds a stream of the node there */
	/* behind relays: the relays between this plane and the node, nearest
	 * first, comma-joined ("" or NULL: none); and the pushes the node
	 * refused on verification since the relay nearest it started (kept
	 * in memory only: no backend stores them) */
	const char *via;
	uint64_t verify_failures, vf_version;
	const char *vf_error;              /* NULL: none */
	int64_t vf_at;
	/* its subscription, canonical ("": every name; NULL: not known) */
	const char *sub;
	/* its last traffic report (traffic-aware gates) as JSON text, when a
	 * new one came since the record was last written to a replica that
	 * does not judge it or a relay: passed on to the controller or up to
	 * the origin, whose gates judge it (NULL: none). etcd keeps it in the
	 * record until the next write; SQLite does not store it. */
	const char *traffic;
	/* whether it counts its traffic, as its ACKs say (traffic-aware
	 * gates): 0 unknown, 1 it does, -1 it does not (counts_reason: why);
	 * a relay passes it up (a 'u' line), etcd keeps it in the record (the
	 * controller's gates learn why a node of another replica does not
	 * count), SQLite does not store it */
	int counts;
	const char *counts_reason;
	/* only its ACK part (acked version and time, health, ACKs; sent
	 * version, nonce and time; last seen) changed since it was last
	 * written: a backend may write just that part (every field is filled
	 * all the same). Never set on a record not written before. */
	bool acks_only;
	/* its key for sealed secrets (docs/protocol.md "Sealed secrets"):
	 * the Ed25519 public key as base64 and its id (NULL or "": none
	 * live), the registration's time, and up to 16 revoked key ids,
	 * comma-joined (NULL or "": none). Taken from replicas, never from
	 * a relay's record (POST /v1/relay/nodes). */
	const char *key, *key_id;
	int64_t key_at;
	const char *revoked;
	/* key_at is the high-water mark of the node's registrations (kept
	 * when no key is live); key_via where the live key came from ("" or
	 * NULL: direct, else the relays as in via) */
	const char *key_via;
	bool key_pending;                  /* the live key waits for an admin (--approve-relay-keys) */
	/* a relay's: a registration its node sent, to go up as a 'k' line
	 * (NULL: none; no backend stores it); the backend sets *key_sent
	 * when the upstream answered the batch that held it (taken or
	 * refused: it is not sent again) */
	const char *key_reg;
	bool *key_sent;
	/* a held NACK (the node has no wrap for a sealed secret it would
	 * receive): the version, why, and when (held_at 0: none) */
	uint64_t held_version;
	const char *held_reason;
	int64_t held_at;
	/* set by nodes_save (a relay's): the upstream refused this record's
	 * changes, so keep it dirty to go again at a later flush (NULL: not
	 * asked) */
	bool *again;
};
typedef int (*persist_node_cb)(void *ctx, const struct persist_node *n);

/* A token's record: its hash, never the token. A console session's role
 * is "ui-session" (a reader that expires): a plane or relay too old to
 * know it admits nothing with it, rather than a reader that never expires. */
struct persist_token {
	const char *id, *hash, *role, *node, *name;
	int64_t created, revoked;          /* wall seconds; revoked 0: live */
	int64_t expires;                   /* wall seconds; 0: never */
};
typedef int (*persist_token_cb)(void *ctx, const struct persist_token *t);

/* One approval token (common/approval.h) the plane verified and keeps:
 * for (version, canonical sub), by key kid. */
struct persist_approval {
	uint64_t version;
	const char *sub, *kid, *token;
};
typedef int (*persist_approval_cb)(void *ctx, const struct persist_approval *a);

/* The TLS session-ticket keys (http/tickets.c): GnuTLS master keys (64
 * bytes each) the plane's replicas share, so a session resumes across a
 * restart and a failover. A secret: never logged nor served. cur encrypts
 * new tickets; prev (has_prev) still decrypts for one rotation period. */
#define PERSIST_TICKET_KEY 64
struct persist_ticket_keys {
	unsigned char cur[PERSIST_TICKET_KEY], prev[PERSIST_TICKET_KEY];
	bool has_prev;
	int64_t created;                   /* wall seconds cur was made */
};

/* A change another replica committed, as the follower delivers it: body
 * (taken) NULL is a tombstone. */
struct persist_remote {
	char *name;
	char *body;
	size_t body_len;
	uint64_t version;                  /* the version of this entry's change */
	int64_t deleted_at;
};
/* One version (or, after a compaction, the jump to one) from elsewhere:
 * changes ascending by version, tombstones dropped (pruned), the global
 * version and horizon after it. 0, or -1 (the follower reloads). */
typedef int (*persist_follow_fn)(void *ctx, struct persist_remote *ch, size_t n, char **pruned, size_t npruned,
				 uint64_t version, uint64_t horizon);

/* What a follower hands over: store versions, and the node and token
 * records other replicas wrote (node or token may be NULL). */
struct persist_follow {
	void *ctx;
	persist_follow_fn store;
	/* around the steps of one catch-up (a relay's state: one step per
	 * version, each name's newest state only): nobody reads the store
	 * between begin and end, nor is sent a step -- a step between two of
	 * the upstream's versions may hold some names' newer states and not
	 * others', a version that never was; ok false at the end: a step
	 * failed, nothing is announced (the stream reopens) */
	void (*catchup)(void *ctx, bool begin, bool ok);
	int (*node)(void *ctx, const struct persist_node *n);
	int (*token)(void *ctx, const struct persist_token *t);
	/* a rollout record the controller wrote (run taken, or NULL), and
	 * the released version beside it when has_released */
	void (*rollout)(void *ctx, struct ro_run *run, bool has_released, uint64_t released);
	/* a relay's: a statement the upstream signed for (version, sub);
	 * and "send every node record again" (it reached an upstream) */
	void (*statement)(void *ctx, uint64_t version, const char *sub, const char *token);
	void (*resync)(void *ctx);
	/* another replica's version whose write overrode a guard (its log
	 * record has "override"): called before the version goes to store */
	void (*overridden)(void *ctx, uint64_t version);
	/* a relay's: every approval the upstream keeps (core/approvals.h),
	 * to replace what it had */
	void (*approvals)(void *ctx, const struct persist_approval *list, size_t n);
};

/* What a shared backend says about itself (for /metrics and heartbeats). */
struct persist_stats {
	bool shared;                       /* other replicas write too */
	bool writable;                     /* false: no quorum, writes get 503 */
	bool upstream_down;                /* a relay that lost its upstream */
	unsigned report_s;                 /* a relay: the traffic report interval its upstream's
					    * heartbeats ask for, in seconds (0: none) */
	uint64_t watch_opens, revisions, reloads, reload_listed, reload_fetched, reload_deleted, conflicts;
};

struct persist_ops {
	const char *name;
	void (*close)(struct persist *p);

	/* resources: every live resource and tombstone in ascending version
	 * order, the global version and the tombstone horizon */
	int (*load)(struct persist *p, persist_resource_cb cb, void *ctx, uint64_t *version, uint64_t *horizon,
		    char *err, size_t errlen);
	/* the history rows, each to cb; whether history is kept, and its pin */
	int (*load_history)(struct persist *p, persist_history_cb cb, void *ctx, bool *keep, uint64_t *pin,
			    char *err, size_t errlen);
	/* one version, durable before it returns; the hook runs inside */
	int (*commit)(struct persist *p, const struct persist_commit *c, char *err, size_t errlen);
	/* drops history no version >= floor needs (all when !keep); records the pin */
	int (*trim_history)(struct persist *p, bool keep, uint64_t floor, char *err, size_t errlen);

	/* the version log (NULL: the backend keeps none). log_floor: the
	 * oldest version whose state the log can rebuild; log_list: newest
	 * first, at most limit, only those touching name (NULL: all);
	 * log_get: one version and its changes (1 found, 0 not kept);
	 * log_after: per name changed in (v, upto], its first change there
	 * (whose before is the name's state at v) */
	int (*log_floor)(struct persist *p, uint64_t *floor, char *err, size_t errlen);
	int (*log_list)(struct persist *p, const char *name, size_t limit, persist_version_cb cb, void *ctx,
			char *err, size_t errlen);
	int (*log_get)(struct persist *p, uint64_t version, persist_version_cb vcb, persist_vchange_cb ccb,
		       void *ctx, char *err, size_t errlen);
	int (*log_after)(struct persist *p, uint64_t v, uint64_t upto, const char *name, persist_vchange_cb cb,
			 void *ctx, char *err, size_t errlen);
	/* log_trim: the age trim a commit makes, when no commit comes: drops
	 * the versions recorded before now - max_age (the newest too) and
	 * moves the floor; 0 also when another writer moved it first (the
	 * next call sees that) */
	int (*log_trim)(struct persist *p, int64_t now, int64_t max_age, char *err, size_t errlen);

	/* rollouts: a record (insert or replace) with the released version,
	 * durably; the same inside a commit; the newest max records; the
	 * released version (1 found, 0 never recorded, -1 error) */
	int (*rollout_save)(struct persist *p, const struct ro_run *run, uint64_t released, char *err,
			    size_t errlen);
	int (*txn_rollout)(struct persist_txn *tx, const struct ro_run *run, uint64_t released, char *err,
			   size_t errlen);
	int (*rollout_load)(struct persist *p, size_t max, bool with_members, struct ro_run **runs, size_t *n,
			    char *err, size_t errlen);
	int (*released)(struct persist *p, uint64_t *v);
	int (*set_released)(struct persist *p, uint64_t v, char *err, size_t errlen);

	/* node records: all of them; a batch written at once (not fsync'd:
	 * they survive a process crash, and the nodes report again) */
	int (*nodes_load)(struct persist *p, persist_node_cb cb, void *ctx, char *err, size_t errlen);
	int (*nodes_save)(struct persist *p, const struct persist_node *recs, size_t n, char *err, size_t errlen);

	/* token records: all of them; a new one and a revocation, durably */
	int (*tokens_load)(struct persist *p, persist_token_cb cb, void *ctx, char *err, size_t errlen);
	int (*token_add)(struct persist *p, const struct persist_token *t, char *err, size_t errlen);
	int (*token_revoke)(struct persist *p, const char *id, int64_t when, char *err, size_t errlen);
	/* an expired session's record dropped (NULL: nothing kept, as a
	 * relay's); dropping one already gone is not an error */
	int (*token_delete)(struct persist *p, const char *id, char *err, size_t errlen);

	/* approvals (NULL: kept in memory only, as a relay's): all of them;
	 * one more (a repeat of (version, sub, kid) replaces it), durably */
	int (*approvals_load)(struct persist *p, persist_approval_cb cb, void *ctx, char *err, size_t errlen);
	int (*approval_add)(struct persist *p, const struct persist_approval *a, char *err, size_t errlen);
	/* drops the approvals of versions below `below`, durably */
	int (*approvals_trim)(struct persist *p, uint64_t below, char *err, size_t errlen);

	/* the TLS session-ticket keys (NULL: the backend keeps none, as a
	 * relay's: its plane makes its own in memory). ticket_keys_load: 1
	 * with *k and *rev (the backend's revision of them), 0 none stored,
	 * PERSIST_MALFORMED with *rev when what is stored cannot be decoded;
	 * ticket_keys_swap stores k when what is stored is still at rev (0:
	 * none), else PERSIST_CONFLICT (another replica rotated first: load
	 * again); durably, and *rev gets the new revision */
	int (*ticket_keys_load)(struct persist *p, struct persist_ticket_keys *k, uint64_t *rev, char *err,
				size_t errlen);
	int (*ticket_keys_swap)(struct persist *p, const struct persist_ticket_keys *k, uint64_t *rev, char *err,
				size_t errlen);

	/* the freeze window (docs/protocol.md "Freeze windows"; NULL: the
	 * backend keeps none, as a relay's, which takes no write):
	 * freeze_load: 1 with *json (its record as JSON, freeze.h;
	 * allocated), 0 none stored; freeze_save: json stored (NULL: none,
	 * the freeze is off), durably, seen by every replica */
	int (*freeze_load)(struct persist *p, char **json, char *err, size_t errlen);
	int (*freeze_save)(struct persist *p, const char *json, char *err, size_t errlen);

	/* shared backends (NULL otherwise): follow what other replicas
	 * commit, from just after what load read; and the figures */
	int (*follow)(struct persist *p, const struct persist_follow *f, char *err, size_t errlen);
	/* stops following: no callback runs once it returns (at shutdown,
	 * before what the callbacks touch is freed) */
	void (*unfollow)(struct persist *p);
	void (*stats)(struct persist *p, struct persist_stats *st);
	/* whether this plane cannot vouch that it is current (NULL: it always
	 * can, the embedded store): true with since (wall seconds it went
	 * stale) and why; *recheck_ms: the monotonic time by which the answer
	 * may change without news (0: none) */
	bool (*stale)(struct persist *p, int64_t *since, char *why, size_t cap, int64_t *recheck_ms);

	/* replicas (NULL when there is only one): this replica's name;
	 * whether replica id is up; the rollout controller's election: lead
	 * campaigns from its first call on and says whether this replica is
	 * the controller now (the records a controller writes are fenced:
	 * PERSIST_FENCED once it is not); and what the election looks like */
	const char *(*replica)(struct persist *p);
	bool (*replica_up)(struct persist *p, const char *id);
	bool (*lead)(struct persist *p);
	void (*controller)(struct persist *p, char *holder, size_t cap, uint64_t *terms, size_t *replicas);

	/* relays (NULL otherwise): the upstream this plane follows (its URL
	 * now; *up: whether the stream is open), the plane where writes go;
	 * and a statement the upstream signed for (version, sub), fetched
	 * (new allocated; NULL with err) */
	const char *(*upstream)(struct persist *p, char *url, size_t cap, bool *up);
	char *(*statement)(struct persist *p, uint64_t version, const char *sub, char *err, size_t errlen);
};

/* The backends. plane.c opens the one --store (or --upstream) names;
 * each returns NULL with err. */
void persist_close(struct persist *p);

/* The embedded SQLite backend in dir (tests call it directly). */
struct persist *persist_sqlite_open(const char *dir, char *err, size_t errlen);

/* The etcd backend: a replica of a plane whose store etcd holds. */
struct persist_etcd_options {
	const char *endpoints;                 /* --etcd, comma-separated */
	const char *ca, *cert, *key, *token_file;
	const char *prefix;                    /* --etcd-prefix; NULL: "/tether/" */
	double lease_ttl;                      /* the replica's lease; 0: 10 s */
	const char *listen;                    /* part of the replica's name */
};
struct persist *persist_etcd_open(const struct persist_etcd_options *o, char *err, size_t errlen);

/* A relay's backend: the state of its upstream, in memory. */
struct persist_relay_options {
	const char *upstream;                  /* --upstream: the planes it follows, comma-separated */
	const char *relay_id;                  /* its name upstream; NULL: the host name */
	const char *token_file, *ca, *cert, *key;
};
struct persist *persist_relay_open(const struct persist_relay_options *o, char *err, size_t errlen);

/* Inside a commit's hook: adds a rollout record to the commit. */
int persist_txn_rollout(struct persist_txn *tx, const struct ro_run *run, uint64_t released, char *err,
			size_t errlen);

#endif
