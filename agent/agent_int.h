/* agent_int.h: tetherd's internal state, shared by its parts -- agent.c
 * (life: boot, loop, signals, status), sync.c (the stream or poll to the
 * plane), apply.c (pushes: queue, merge, validate, stage, check, swap,
 * reload, confirm, persist), ack.c (ACKs and NACKs), trust.c (signed
 * statements: verification, rollback, freshness), fresh.c (whether the
 * plane is current, and the move to one that is) and metrics.c. The wings
 * below (consumer/, traffic/, state/) never see it: the core hands them
 * their own options and callbacks. Not a public API. */
#ifndef TETHER_AGENT_INT_H
#define TETHER_AGENT_INT_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent_config.h"
#include "buf.h"
#include "fresh.h"
#include "guard.h"
#include "keys.h"
#include "lthash.h"
#include "nodekey.h"
#include "sse_parser.h"
#include "state/push.h"
#include "state/sealed.h"
#include "state/state.h"
#include "status.h"
#include "sub.h"
#include "traffic/report.h"
#include "wraps.h"

#define ERRLEN 4096
#define ACK_VERIFY_MAX 16

enum sync_kind { SYNC_NONE, SYNC_STREAM, SYNC_POLL };

/* Why trust.c refused something, for the counters. */
enum trust_fail {
	TF_UNSIGNED, TF_MALFORMED, TF_UNKNOWN_KEY, TF_BAD_SIGNATURE, TF_EXPIRED, TF_ROLLBACK, TF_MISMATCH,
	TF_DIGEST, TF_APPROVALS, TF_N
};

/* Why the consumer was reloaded (tetherd_reloads_total{reason}): a change
 * without --runtime-api; with it, a change that is not only endpoints, or
 * the runtime update's fallbacks; at boot; back onto the old output. */
enum reload_reason {
	RR_NO_RUNTIME_API, RR_CHANGE, RR_TEMPLATE_EXHAUSTED, RR_RUNTIME_FAILED, RR_READBACK_DIFFERS, RR_BOOT,
	RR_REVERT, RR_N
};

/* An apply's phases, for the duration histogram (metrics.c). */
enum apply_phase { PHASE_STAGE, PHASE_CHECK, PHASE_RELOAD, PHASE_PERSIST, APPLY_PHASES };
#define APPLY_HIST_BUCKETS 14
struct apply_hist {
	uint64_t bucket[APPLY_HIST_BUCKETS];   /* cumulative when written, not here */
	uint64_t count;
	double sum;                            /* seconds */
};

struct agent {
	bool unacked;                    /* since boot, no ACK of what it holds: it asks the plane for a
					  * push of it to ACK (unacked=1), sent if the plane has no ACK */
	struct agent_config cfg;
	int argc;
	char **argv;
	struct state state;
	struct lastgood *lg;
	struct consumer *cons;

	enum agent_state astate;
	char last_error[ERRLEN];
	int64_t last_sync, started;
	uint64_t plane_version, applied, rejected;
	uint64_t guard_refused, guard_overridden;   /* pushes a guard refused, or let through under an override */
	struct status written;          /* what status.json says now */
	bool status_valid;

	CURLM *multi;
	/* the TLS sessions every transfer to the plane shares: a reconnect
	 * (after a restart of the plane, or to another replica under the
	 * same name) offers the last one and resumes it, not a full
	 * handshake. One thread uses it: no locks. */
	CURLSH *share;
	/* the one before a flush, freed once no handle holds it */
	CURLSH *share_old;
	/* --cert's and --key's mtimes and sizes when last read: a change
	 * flushes the sessions */
	uint64_t cred_stamp;

	/* sync.c */
	CURL *sync;
	enum sync_kind kind;
	struct curl_slist *sync_headers;
	char sync_err[CURL_ERROR_SIZE];  /* libcurl's detail of a failure (TLS: why) */
	struct sse_parser sse;
	struct buf body;                 /* a poll answer, or an error body */
	char etag[160], resp_etag[160];
	struct buf resp_statement;       /* a poll answer's Tether-Statement header */
	struct plane_stale resp_stale;   /* a poll answer's Tether-Stale header (on: present) */
	int64_t last_byte_ms;
	int64_t last_event_ms;           /* the last complete event (or the connection) */
	uint64_t event_bytes;            /* bytes read since that event */
	double heartbeat_s;              /* advertised by the plane */
	bool resync;                     /* close the stream and start over */
	bool got_event;
	bool offline_logged;             /* said once per outage */
	unsigned attempt;
	int64_t next_sync_ms;
	size_t plane_idx;                /* cfg.planes[plane_idx]: the plane dialled now */
	unsigned plane_failures;         /* failed attempts in a row, over the planes */

	/* apply.c */
	struct push *queue;              /* decoded pushes not applied yet */
	size_t nqueue, capqueue;
	int64_t last_reload_ms;
	bool runtime_failing;            /* the last runtime update fell back (failed, differs) */
	int live_healthy;                /* the live generation's last probe: -1 unknown */
	int64_t retry_at_ms;             /* resync to retry a push that failed on I/O */
	unsigned io_failures;
	struct guard guard;              /* guard.c: applies held while old workers drain */

	/* trust.c (with --trust) */
	struct {
		bool on;
		struct trust keys;
		struct sub sub;              /* ours, canonical: what statements must name */
		uint64_t hwm;                /* the highest version verified: lower is a rollback */
		struct lthash digest;        /* of the applied state */
		char *statement;             /* the applied state's statement (kept in last-good) */
		char kid[KEY_ID_LEN + 1];    /* ... and the key that signed it */
		int64_t issued;              /* ... and when */
		uint64_t held;               /* the highest version a verified push brought */
		int64_t behind_since_ms;     /* a verified target above ours and no push for it */
		unsigned resyncs;            /* in a row, for the backoff */
		int64_t fresh_until;         /* wall seconds the newest statement vouches until */
		int64_t newest_issued;
		bool stale;
		bool want_snapshot;          /* after a digest mismatch: ask for a snapshot */
		unsigned mismatches;         /* in a row, for the backoff */
		uint64_t failures[TF_N];
		struct trust approvers;      /* approve.c: --approvers (with --approvals K) */
	} trust;

	/* ack.c */
	struct {
		struct buf pending;          /* the newest ACK not yet taken */
		bool has_pending;
		/* NACKs of failed verifications: each is delivered (the plane
		 * counts every one), not replaced by a newer ACK */
		struct buf vq[ACK_VERIFY_MAX];
		size_t nvq;
		bool sent_verify;            /* what is in flight came from vq */
		CURL *h;
		struct curl_slist *headers;
		struct buf sent, resp;
		unsigned attempt;
		int64_t next_ms;
		bool hold;                   /* moved to another plane: wait until it answered */
	} ack;

	/* fresh.c: whether the plane dialled now is current (it says "stale"
	 * when it is not), and the probes of the others while it is not */
	struct {
		struct plane_stale now;      /* what the plane dialled now last said of itself */
		unsigned epoch;              /* bumped when the plane or the list changes: a round of
					      * an older epoch is void */
		bool probe_due;              /* a round of probes starts at probe_at_ms */
		int64_t probe_at_ms;
		bool round;                  /* a round is under way: order[next..norder) to probe */
		unsigned round_epoch;
		size_t order[AGENT_MAX_PLANES];
		size_t norder, next;
		unsigned round_down;         /* planes of the round that did not answer */
		CURL *h;                     /* the probe in flight: GET /healthz of planes[probing] */
		size_t probing;
		struct curl_slist *headers;
		struct buf resp;
		int64_t seen_stale_ms[AGENT_MAX_PLANES];   /* by cfg.planes index: when it last said
							    * stale (monotonic ms; 0 never) */
		int64_t moves_ms[FRESH_MOVES_KEPT];         /* the last moves off a stale plane (a ring) */
		size_t nmove;
		bool staying_logged;         /* "every plane listed is stale" said, once a spell */
	} fresh;

	/* seal.c and keyreg.c: sealed secrets -- the node's key, the wraps
	 * its secrets open with, and the key's registration */
	struct {
		struct node_key key;         /* STATE_DIR/node.key */
		struct node_key prev;        /* node.key.old: the key a rotation replaces */
		bool has_prev;
		struct node_key older;       /* node.key.older: the key before prev, kept while
					      * applied wraps are for it (a second --rotate-key) */
		bool has_older;
		bool prev_gone;              /* ... node.key.old removed (prev kept in memory only) */
		bool prev_taken;             /* ... the plane took the new key (a 200, or a wrap for it) */
		int64_t upgrade_at_ms;       /* when to ask for the new key's wraps again (a rotation) */
		unsigned verify_failures;    /* in a row, for the backoff */
		uint64_t bad_version;        /* the last version whose wrap or ciphertext did not verify */
		int64_t bad_until_ms;        /* ... not fetched again before */
		char bad_err[1024];          /* ... and why */
		struct wraps wraps;          /* STATE_DIR/wraps.json */
		struct sealed_opener opener; /* what the renderers open sealed secrets with */
		bool undumpable;             /* PR_SET_DUMPABLE 0 done */
		bool dir_noted;              /* the secrets directory's file system said */
		uint64_t held_version;       /* the last version held for want of a wrap (NACKed once) */
		uint64_t fetch_failed_version;   /* the last version whose wraps could not be fetched */
		CURL *reg_h;                 /* the registration in flight */
		struct curl_slist *reg_headers;
		struct buf reg_body, reg_resp;
		bool reg_prev;               /* ... it carries prev's endorsement */
		bool reg_conn;               /* registered (or tried) on this connection */
		bool reg_due;                /* ... to start at the loop's next turn */
		int64_t reg_retry_ms;        /* a failed one is tried again then (0: none) */
		unsigned reg_failures;       /* in a row, for the backoff */
		char reg_said[1024];         /* the last thing said of it */
	} seal;

	/* traffic/report.c (with --traffic-listen or --traffic-socket): the
	 * live generation's traffic, in ACKs and reports */
	struct traffic_report traffic;
	/* counting by default (traffic/auto.c): without --traffic-listen, the
	 * loopback address bound ("": none) and its socket until
	 * traffic_report_start takes it (-1: none) */
	char traffic_addr[64];
	int traffic_auto_fd;

	/* metrics.c: what --metrics-file and --metrics-listen report */
	struct {
		uint64_t merged;             /* pushes folded into a later one's apply */
		uint64_t stream_opens;       /* streams opened: all but the first are reconnects */
		uint64_t plane_moves;        /* moves to another plane of --plane's list (every move) */
		uint64_t stale_moves;        /* ... of them, moves off a plane that said it was stale */
		int64_t last_contact;        /* wall seconds the plane last confirmed what runs */
		uint64_t runtime_updates;    /* changes made over haproxy's runtime API, no reload */
		uint64_t reloads[RR_N];      /* the consumer reloaded, by reason */
		struct apply_hist phase[APPLY_PHASES];
	} m;
};

/* agent.c */
void agent_set_state(struct agent *a, enum agent_state st);
void agent_write_status(struct agent *a);
double agent_rand01(void);

/* sync.c */
/* Sets the plane's CA, our client certificate, our token (read from
 * --token-file now, so a new one is used at the next connection) and the
 * shared TLS session cache on h;
 * returns headers with the Authorization line added. */ 
struct curl_slist *agent_credentials(struct agent *a, CURL *h, struct curl_slist *headers);
/* Empties the shared TLS session cache: the next connection is a full
 * handshake (after a refusal, or new --cert/--key files). */
void agent_flush_sessions(struct agent *a, const char *why);
/* POSTs body (JSON) to path on the plane dialled now, with our
 * credentials, on the shared multi handle; the answer's body goes into
 * answer. The handle, or NULL; *headers is the caller's to free
 * (credentials_free_headers) with it. */
CURL *agent_post(struct agent *a, const char *path, const struct buf *body, struct buf *answer, long timeout_ms,
		 struct curl_slist **headers);
/* GETs path from the plane dialled now, with our credentials, and waits
 * for it (at most timeout_ms): the HTTP status with the body in answer, or
 * -1 with err. */
long agent_get_now(struct agent *a, const char *path, struct buf *answer, long timeout_ms, char *err,
		   size_t errlen);
void sync_start(struct agent *a);
void sync_stop(struct agent *a);
void sync_done(struct agent *a, CURLcode code);
/* Schedules the next connection: at once, or after a backoff. */
void sync_schedule(struct agent *a, bool failed);
double sync_stream_timeout_s(const struct agent *a);
/* When (monotonic ms) the open stream counts as dead: silent for the
 * timeout, or an event arriving slower than MIN_EVENT_RATE for longer than
 * the timeout (a trickled event is no progress either). */
int64_t sync_stream_deadline(const struct agent *a);
void sync_went_offline(struct agent *a, const char *why);
/* The plane dialled now (and the one ACKs go to): one of cfg.planes. */
const char *sync_plane(const struct agent *a);
/* The open stream is dead (silent, or stalled): closes it and moves on
 * as after any failure (why: for the log). */
void sync_dead(struct agent *a, const char *why);
/* SIGHUP, before nc replaces a->cfg: the plane dialled now stays when nc
 * lists it; otherwise nc's first is next. */
void sync_carry_plane(struct agent *a, const struct agent_config *nc);
/* Moves to cfg.planes[idx] at once (why: for the log): the stream or poll
 * is closed, the queue dropped, the ACKs follow, and the new plane is
 * dialled from the applied version (a delta, as any reconnect). Counts a
 * move. Not from inside a transfer's callback. */
void sync_move_to(struct agent *a, size_t idx, const char *why);

/* apply.c */
/* PUSH_DISTRUSTED: refused by --trust's checks -- the same version, signed
 * right, may come again (an ETag names the content, not its signature). */
enum push_result { PUSH_QUEUED, PUSH_RESYNC, PUSH_DISTRUSTED };
/* Decodes a push and queues it (pushes that cannot apply are NACKed or
 * make a resync at once). stream: it came on the stream, and what it says
 * of the plane's staleness is heard (fresh_heard). */
enum push_result apply_enqueue(struct agent *a, const char *text, size_t len, bool stream);
/* Applies the queued pushes as one (merged) change when it is time;
 * *wake gets when to come back if they must wait (--min-reload-interval). */
void apply_pending(struct agent *a, int64_t *wake);
void apply_drop_queue(struct agent *a);
/* The consumer's reload after boot changed its output (best effort). */
void apply_boot_reload(struct agent *a);
/* Boot, after last-good is loaded and before the consumer's boot: an
 * apply the agent did not live to commit (lastgood.pending) is finished
 * when its candidate went live -- checked, reloaded and probed again, then
 * committed (a->state moves to it) -- or, when it did not go live or is
 * refused, dropped (the refusal reported in status.json): the consumer's
 * boot then puts last-good back. Never ACKs. */
void apply_resume(struct agent *a);

/* apply_runtime.c */
/* After the swap of c's generation: with --runtime-api, when c changes only
 * clusters' endpoints, makes the running haproxy hold them over its runtime
 * API and reads them back. true: the change serves without a reload (the
 * consumer still serves the generation it loaded: no_reload). false: it
 * takes a reload, *why says why (a fallback is logged, one line). */
bool apply_runtime(struct agent *a, const struct candidate *c, enum reload_reason *why);
/* The name of a reload's reason, for the metrics, the ACK and the log. */
const char *reload_reason_name(enum reload_reason r);
/* The consumer was reloaded (when the agent has a way to: --reload or
 * --pidfile), for reason r: counted. */
void apply_reloaded(struct agent *a, enum reload_reason r);

/* ack.c */
/* A NACK of a push the node holds (no wrap for a sealed secret): "held":
 * true, which the plane neither counts as a NACK nor lets fail a rollout. */
void ack_queue_held(struct agent *a, uint64_t version, const char *nonce, const char *error);
/* Queues the ACK (error NULL) or NACK of a push; healthy: -1 unknown;
 * verify: the NACK is a failed verification (the plane counts those even
 * when their nonce is stale: a replay shows); applied: how an ACKed change
 * reached the consumer ("runtime", "reload"; NULL: it did not touch it),
 * reason: a reload's (reload_reason_name; NULL: none). */
void ack_queue(struct agent *a, uint64_t version, const char *nonce, const char *error, int healthy, bool verify,
	       const char *applied, const char *reason);
void ack_start(struct agent *a);
/* Whether an ACK or NACK waits to be sent (and may go: after a move to
 * another plane they wait until it answered). */
bool ack_waiting(const struct agent *a);
/* The agent moved to another plane: what is in flight is taken back, and
 * everything waiting goes to the new plane once it answered. */
void ack_plane_moved(struct agent *a);
/* The plane dialled now answered (a stream's first event, a poll). */
void ack_plane_answered(struct agent *a);
void ack_done(struct agent *a, CURLcode code);
void ack_release(struct agent *a);

/* seal.c */
/* Loads (or makes) STATE_DIR/node.key, and node.key.old of a rotation
 * under way; --rotate-key rotates; loads STATE_DIR/wraps.json. 0, or -1
 * with err. */
int seal_init(struct agent *a, char *err, size_t errlen);
/* The keys (wiped) and the wraps; keyreg_release ends the registration. */
void seal_release(struct agent *a);
/* STATE_DIR/node.key (old: node.key.old), malloc'd. */
char *seal_key_path(const struct agent *a, bool old);
/* The renderers' opener (struct sealed_opener, ctx: the agent). */
int seal_open(void *ctx, const struct res *r, cJSON **body, char *err, size_t errlen);
/* SEAL_HELD: a secret has no wrap for this node's key (a held NACK);
 * SEAL_VERIFY: one does not open (a verification NACK); SEAL_FAILED: the
 * wraps could not be fetched or kept (I/O: tried again). */
enum seal_result { SEAL_OK, SEAL_HELD, SEAL_VERIFY, SEAL_FAILED };
/* Before a (verified) candidate is staged: every sealed secret of the
 * state it makes has a wrap that opens (fetched with one GET /v1/wraps
 * when missing), and STATE_DIR/wraps.json holds them. err names the
 * secret and what failed. */
enum seal_result seal_prepare(struct agent *a, const struct candidate *c, char *err, size_t errlen);
/* A push that did not validate: when it holds the plane's marker of a
 * damaged stored body ({"sealed":null}), err becomes what that means and
 * what the operator does (the schema's words say neither). */
void seal_damaged_marker(const struct push *m, char *err, size_t errlen);
/* After a commit: the wraps are pruned to the state's secrets and kept;
 * node.key.old goes when a rotation is done. */
void seal_committed(struct agent *a);
/* After an apply failed (or at boot, once an interrupted one was settled):
 * the candidate's wraps go, the applied state's stay. */
void seal_abandoned(struct agent *a);
/* The plane answered 200 to a registration endorsed by node.key.old. */
void seal_key_taken(struct agent *a);
/* The event loop's turn: after a rotation, asks (once a backoff) for the
 * applied state's wraps for the new key. */
void seal_tick(struct agent *a);
/* Boot: whether every sealed secret of a->state opens. 0, or -1 with err. */
int seal_check_state(struct agent *a, char *err, size_t errlen);

/* keyreg.c */
/* The plane or relay dialled answered (a stream's first event, a poll's
 * answer): the node key is registered once on this connection (due: the
 * loop's keyreg_tick starts it; this runs inside transfer callbacks). */
void keyreg_answered(struct agent *a);
/* The connection was lost, or a new one opens (a failure, a move, each
 * stream): the next answer registers again. */
void keyreg_lost(struct agent *a);
/* The event loop's turn: starts a registration that is due. */
void keyreg_tick(struct agent *a);
void keyreg_start(struct agent *a);
void keyreg_done(struct agent *a, CURLcode code);
void keyreg_release(struct agent *a);

/* metrics.c: writes --metrics-file when what it says changed. */
void metrics_write(struct agent *a);
void metrics_release(void);
/* The Prometheus text into b; live adds what only a scrape can say (the
 * age of the last sync, which a file would freeze). */
void metrics_text(const struct agent *a, struct buf *b, bool live);
/* One successful apply's phases, in microseconds (stage, check, reload,
 * persist: enum apply_phase order). */
void metrics_observe_apply(struct agent *a, const int64_t us[APPLY_PHASES]);
/* The plane confirmed what runs (an apply, a heartbeat, a 304). */
void metrics_contact(struct agent *a);

/* fresh.c */
/* What the plane dialled now said of itself (a heartbeat, a stream's
 * push, a poll answer): stale since (wall seconds, 0 unknown) for why, or
 * fresh. Turning stale is logged (and, with other planes listed,
 * fresh_tick then looks for a fresh one); saying nothing any more is fresh
 * again. Runs inside transfer callbacks: starts and ends no transfer.
 * Nothing with --once. */
void fresh_heard(struct agent *a, bool stale, int64_t since, const char *why);
/* The plane dialled now changed (a failure moved on, SIGHUP, a move off a
 * stale plane): the new one is judged by its own first answer; a probe in
 * flight is void. Starts and ends no transfer. */
void fresh_plane_changed(struct agent *a);
/* SIGHUP, before nc replaces a->cfg (and before sync_carry_plane): what
 * is known of each plane follows its URL into nc's list; a round under
 * way starts over. */
void fresh_carry(struct agent *a, const struct agent_config *nc);
/* The event loop's turn: starts a round of probes when one is due, ends a
 * probe that is void; lowers *wake to when it must come back. */
void fresh_tick(struct agent *a, int64_t *wake);
/* A probe ended: moves to the plane if it answered fresh (and the plane
 * dialled now still says stale), else probes the next. */
void fresh_done(struct agent *a, CURLcode code);
void fresh_release(struct agent *a);

/* approve.c: --approvers FILE --approvals K */
/* Loads the approver keys (K must not exceed them). 0, or -1 with err. */
int approve_init(struct agent *a, char *err, size_t errlen);
/* SIGHUP: reads --approvers again, with keys the statement keys about to
 * be trusted; on failure the old approver keys stay. -1 (said why) when
 * neither the new nor the old approver keys are apart from keys: the
 * caller keeps its old statement keys. */
int approve_reload(struct agent *a, const struct trust *keys);
/* A verified statement's push: at least K distinct approver keys signed
 * exactly (version, our subscription, digest) among the push's
 * "approvals". 0, or -1 with err (the NACK's reason). Without --approvals: 0. */
int approve_check(struct agent *a, const struct push *p, uint64_t version, const unsigned char *digest, char *err,
		  size_t errlen);

/* trust.c */
/* Loads --trust (and our subscription's canonical form). 0, or -1 with err. */
int trust_init(struct agent *a, char *err, size_t errlen);
void trust_release(struct agent *a);
/* SIGHUP: reads --trust again (keys rotate); on failure the old keys stay. */
void trust_reload(struct agent *a);
/* Checks a decoded push's statement: present, signed by a trusted key, for
 * this push's version and our subscription, not expired, not below the
 * high-water mark. 0, or -1 with err (the NACK's reason). */
int trust_check_push(struct agent *a, struct push *p, char *err, size_t errlen);
/* Checks that the candidate's state (the applied state with c applied,
 * digested in O(changed)) is what statement signs; *out gets its digest.
 * 0, or -1 with err ("state digest mismatch"). */
int trust_check_candidate(struct agent *a, const struct push *m, const struct candidate *c, struct lthash *out,
			  char *err, size_t errlen);
/* After a push failed validation: whether, applied as sent, it is the
 * state its statement signs. 0 (it is: a signed change the node refuses),
 * or -1 with err (it is not: it was changed in transit). */
int trust_check_unvalidated(struct agent *a, struct push *m, char *err, size_t errlen);
/* Boot: an interrupted apply's candidate (lastgood.pending) with the
 * statement kept with it (m->statement, m->version): the statement must
 * verify (a trusted key, this version, our subscription, not a rollback;
 * expiry is not required, as for last-good) and sign the candidate's
 * state; m->verified and *out are filled as for a push. 0, or -1 with
 * err. Without --trust: 0. */
int trust_check_resumed(struct agent *a, struct push *m, const struct candidate *c, struct lthash *out,
			char *err, size_t errlen);
/* After a verified candidate was applied. */
void trust_applied(struct agent *a, const struct push *m, const struct lthash *digest);
/* A heartbeat's (or a 304's) statement: freshness, and a new key's
 * statement of our state is persisted (a key rotation). */
void trust_heartbeat(struct agent *a, const char *token, size_t len);
/* Notices staleness; *wake gets when to look again. */
void trust_tick(struct agent *a, int64_t *wake);
/* lastgood_load's check of a loaded generation (ctx: the agent). */
int trust_boot_verify(void *ctx, const struct state *s, const char *statement, char *err, size_t errlen);
/* The refusal counters' names, for metrics. */
const char *trust_fail_name(enum trust_fail f);
#endif
