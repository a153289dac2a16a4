/* core/store.h: the plane's resource store: live resources and tombstones, one
 * global monotonic version, an in-memory index ordered by change version
 * (so "everything since v" costs O(changed)), persisted through the
 * backend (persist.h) it was opened on.
 *
 * Locking: writers call store_write_lock() around validation and
 * store_commit(), so what was validated is what commits. Readers hold
 * store_rdlock() while they touch entries. The disk write (fsync) runs
 * before the in-memory swap and blocks no reader. */
#ifndef TETHER_STORE_H
#define TETHER_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lthash.h"
#include "persist/persist.h"
#include "resource.h"

struct wrapindex;

/* An older state of an entry, kept while a staged rollout may still send
 * nodes a version before its last change. */
struct store_hist {
	uint64_t version;           /* the version that made this state */
	char *body;                 /* NULL: deleted at that version */
	size_t body_len;
	char *stored;               /* a sealed secret's stored body (body: its push body); NULL: body */
	size_t stored_len;
	unsigned char elem[LTHASH_SEED_BYTES];   /* its digest element (bodies only) */
	struct store_hist *next;    /* older */
};

struct store_entry {
	char *name;
	char *body;                 /* canonical JSON; NULL for a tombstone. What nodes get: a sealed
				     * secret's push body (envelope_push_body), which the digest covers */
	size_t body_len;
	char *stored;               /* a sealed secret's stored body (with its wraps), as written and
				     * persisted, what the relay feed sends; NULL: the same as body */
	size_t stored_len;
	struct wrapindex *wraps;    /* stored's wraps by key id (NULL: none, or a damaged body) */
	char *gone_ids;             /* a deleted sealed secret's: its envelope ids (superseded and the
				     * last), comma-joined, for the replay check of its revival;
				     * memory only */
	uint64_t version;           /* version of the last change (upsert or delete) */
	unsigned char elem[LTHASH_SEED_BYTES];   /* digest element of (name, body); live only */
	int64_t deleted_at;         /* wall seconds; tombstones only */
	int rank;                   /* make-before-break order of its type */
	int nrefs;
	char **refs;                /* names the body references */
	uint32_t referrers;         /* live resources that reference this name */
	char *file_path;            /* a live file resource's output path */
	struct store_entry *prev, *next;    /* change order, oldest first */
	struct store_entry *tprev, *tnext;  /* tombstones, oldest first */
	struct store_entry *hnext;          /* hash chain */
	struct store_hist *hist;            /* older states, newest first */
};

struct store_opts {
	uint64_t tombstone_keep;    /* keep at most this many tombstones */
	int64_t tombstone_max_age;  /* seconds; 0 keeps them regardless of age */
	size_t max_resources;       /* live resources at most */
	uint64_t history_keep;      /* versions the log keeps (0: none) */
	int64_t history_max_age;    /* seconds; 0 keeps them regardless of age */
};

/* What the version log records of a commit besides its changes (all
 * optional): author and message (borrowed), and the versions a rollout's
 * revert reverts, (reverts_from, reverts_to]. */
struct store_meta {
	const char *author, *message;
	uint64_t reverts_from, reverts_to;
	const char *override;   /* the version log's override record (JSON), or NULL */
	bool emergency;         /* an emergency revert (revert --now): the version log says so */
};

/* One change of a write: body NULL removes the resource. The store takes
 * ownership of body (malloc'd canonical JSON) when it commits. A sealed
 * secret's body is its stored form: the store keeps it beside its push
 * body (store_entry). */
struct store_change {
	const char *name;
	char *body;
	size_t body_len;
	struct res_refs refs;
	unsigned char elem[LTHASH_SEED_BYTES];   /* filled by the commit */
};

struct store *store_open(struct persist *p, const struct store_opts *opts, char *err, size_t errlen);
void store_free(struct store *s);

void store_rdlock(struct store *s);
void store_rdunlock(struct store *s);
void store_write_lock(struct store *s);
/* Under the writer lock: readers wait from store_hold(s, true) to
 * store_hold(s, false), across the store_apply_remote calls between (a
 * relay's catch-up, one call per version: no reader sees a step). */
void store_hold(struct store *s, bool on);
void store_write_unlock(struct store *s);

/* Read accessors: hold the read lock, or the write lock. */
uint64_t store_version(struct store *s);
uint64_t store_horizon(struct store *s);
size_t store_count(struct store *s);
size_t store_tombstone_count(struct store *s);
const struct store_entry *store_get(struct store *s, const char *name);
/* The stored body of e (a sealed secret's with its wraps; else its body),
 * and the same as of version x (store_body_at's rules). */
/* A live sealed secret's envelope id and its wrap for node key kid (NULL:
 * none, or not a sealed secret), from the index made when it entered the
 * store: no parse. */
const char *store_envelope_id(const struct store_entry *e);
const char *store_wrap(const struct store_entry *e, const char *kid);
/* A tombstone's envelope ids of the sealed secret it deleted (NULL: none
 * known), comma-joined. */
const char *store_gone_ids(const struct store_entry *e);
const char *store_stored(const struct store_entry *e, size_t *len);
const char *store_stored_at(const struct store_entry *e, uint64_t x, size_t *len, uint64_t *version);
/* Newest change first: walk with ->prev; stop at version <= v. */
const struct store_entry *store_newest(struct store *s);
const struct store_entry *store_oldest(struct store *s);
const struct store_opts *store_options(struct store *s);
/* The live file resource whose path is path, or NULL. */
const char *store_file_at(struct store *s, const char *path);
/* How many live files lie under directory dir. */
uint32_t store_files_under(struct store *s, const char *dir);

/* Applies changes as one version. Hold the write lock. Upserts whose body
 * equals the current one and removals of absent names are dropped; when
 * nothing is left no version is made and *changed is false. On success
 * *version is the store's version after the call. Returns 0, or -1 with
 * err set when the write failed (nothing changed, in memory or on disk),
 * PERSIST_UNAVAILABLE when the backend cannot take writes now, or
 * PERSIST_CONFLICT when another replica wrote first (wait for its version,
 * validate again, retry). Bodies of dropped or failed changes stay with
 * the caller. */
int store_commit(struct store *s, struct store_change *changes, size_t n,
		 uint64_t *version, bool *changed, char *err, size_t errlen);
/* store_commit, with hook (persist.h) run inside the same backend commit
 * when there is a change to commit, with the new version: what it adds
 * lands with the change or not at all. */
int store_commit_hooked(struct store *s, struct store_change *changes, size_t n, persist_hook hook, void *ctx,
			uint64_t *version, bool *changed, char *err, size_t errlen);

/* store_commit_hooked, with the version log's record (meta may be NULL). */
int store_commit_meta(struct store *s, struct store_change *changes, size_t n, persist_hook hook, void *ctx,
		      const struct store_meta *meta, uint64_t *version, bool *changed, char *err, size_t errlen);

/* keep: keeps the states every version >= floor needs (a rollout's
 * baseline): from now on a commit keeps what it replaces, and history that
 * no version >= floor needs is dropped. !keep drops all history and keeps
 * none. Durable. Hold the write lock. Returns 0, or -1 with err. */
int store_set_pin(struct store *s, bool keep, uint64_t floor, char *err, size_t errlen);
/* The same in memory only: a replica following the rollout controller
 * keeps the history its targets need; the controller records the pin. */
void store_set_pin_local(struct store *s, bool keep, uint64_t floor);
/* Approvals' hold (core/approvals.c): on, the store keeps the states of
 * every version >= floor too, in memory, whatever the rollout's pin says
 * (a node that requires approvals may be held at an older version). Takes
 * the writer and index locks: call holding no store lock. */
void store_set_hold(struct store *s, bool on, uint64_t floor);
/* Whether history is kept, and from which version (*floor). Hold a lock. */
bool store_pinned(struct store *s, uint64_t *floor);
/* The oldest version whose states the store knows in full: the newest
 * when no history is kept, else the pin's floor -- or the version keeping
 * began at, when the floor was set below it. Hold a lock. */
uint64_t store_history_floor(struct store *s);
/* For loading only: appends an older state to name's history. */
int store_attach_history(struct store *s, const char *name, uint64_t version, const char *body, size_t len);
/* The body of e as of version x (NULL: absent then); *version gets the
 * version of that state (0: it did not exist). Hold the read lock. */
const char *store_body_at(const struct store_entry *e, uint64_t x, size_t *len, uint64_t *version);

/* What one committed change did to the digest elements: the element the
 * name had (NULL: absent) and the one it has now (NULL: removed). */
struct store_delta {
	const char *name;
	const unsigned char *old_elem, *new_elem;
};
/* Called by every commit that makes a version, with the store's index
 * write-locked (readers see the version and what the observer keeps
 * change together), after the in-memory swap. */
typedef void (*store_observer)(void *ctx, const struct store_delta *d, size_t n, uint64_t version);
void store_set_observer(struct store *s, store_observer fn, void *ctx);
/* The element of e as of version x (NULL: absent then). Same rules as
 * store_body_at. */
const unsigned char *store_elem_at(const struct store_entry *e, uint64_t x);

/* Applies what another replica committed (a shared backend's follower):
 * memory only. Changes at or below the store's version (our own, coming
 * back) are skipped; the others go in ascending version order, bodies
 * taken. *applied gets the store's version after. Hold the write lock. */
int store_apply_remote(struct store *s, struct persist_remote *ch, size_t n, char **pruned, size_t npruned,
		       uint64_t version, uint64_t horizon, uint64_t *applied);
/* Waits up to timeout_ms for the store to reach version v (after a
 * conflict: the winner's version arrives through the follower). */
void store_wait_version(struct store *s, uint64_t v, int timeout_ms);

/* Drops tombstones past their age. Hold the write lock. */
int store_prune_aged(struct store *s, int64_t now, char *err, size_t errlen);
/* Drops the version log's versions past --history-max-age when no commit
 * came to do it (the backend's log_trim; none without a log or an age
 * limit). Needs no lock: the backend serializes it with commits. */
int store_trim_log(struct store *s, int64_t now, char *err, size_t errlen);

#endif
