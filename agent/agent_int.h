/* agent_int.h: tetherd's internal state, shared by its parts -- agent.c
 * (life: boot, loop, signals, status), sync.c (the stream or poll to the
 * plane), apply.c (pushes: queue, merge, validate, stage, check, swap,
 * reload, confirm, persist) and ack.c (ACKs and NACKs). Not a public API. */
#ifndef TETHER_AGENT_INT_H
#define TETHER_AGENT_INT_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent_config.h"
#include "buf.h"
#include "push.h"
#include "sse_parser.h"
#include "state.h"
#include "status.h"

#define ERRLEN 4096

enum sync_kind { SYNC_NONE, SYNC_STREAM, SYNC_POLL };

struct agent {
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
	struct status written;          /* what status.json says now */
	bool status_valid;

	CURLM *multi;

	/* sync.c */
	CURL *sync;
	enum sync_kind kind;
	struct curl_slist *sync_headers;
	struct sse_parser sse;
	struct buf body;                 /* a poll answer, or an error body */
	char etag[160], resp_etag[160];
	int64_t last_byte_ms;
	double heartbeat_s;              /* advertised by the plane */
	bool resync;                     /* close the stream and start over */
	bool got_event;
	bool offline_logged;             /* said once per outage */
	unsigned attempt;
	int64_t next_sync_ms;

	/* apply.c */
	struct push *queue;              /* decoded pushes not applied yet */
	size_t nqueue, capqueue;
	int64_t last_reload_ms;
	int live_healthy;                /* the live generation's last probe: -1 unknown */
	int64_t retry_at_ms;             /* resync to retry a push that failed on I/O */
	unsigned io_failures;

	/* ack.c */
	struct {
		struct buf pending;          /* the newest ACK not yet taken */
		bool has_pending;
		CURL *h;
		struct curl_slist *headers;
		struct buf sent, resp;
		unsigned attempt;
		int64_t next_ms;
	} ack;
};

/* agent.c */
void agent_set_state(struct agent *a, enum agent_state st);
void agent_write_status(struct agent *a);
double agent_rand01(void);

/* sync.c */
void sync_start(struct agent *a);
void sync_stop(struct agent *a);
void sync_done(struct agent *a, CURLcode code);
/* Schedules the next connection: at once, or after a backoff. */
void sync_schedule(struct agent *a, bool failed);
double sync_stream_timeout_s(const struct agent *a);
void sync_went_offline(struct agent *a, const char *why);

/* apply.c */
enum push_result { PUSH_QUEUED, PUSH_RESYNC };
/* Decodes a push and queues it (pushes that cannot apply are NACKed or
 * make a resync at once). */
enum push_result apply_enqueue(struct agent *a, const char *text, size_t len);
/* Applies the queued pushes as one (merged) change when it is time;
 * *wake gets when to come back if they must wait (--min-reload-interval). */
void apply_pending(struct agent *a, int64_t *wake);
void apply_drop_queue(struct agent *a);
/* The consumer's reload after boot changed its output (best effort). */
void apply_boot_reload(struct agent *a);

/* ack.c */
/* Queues the ACK (error NULL) or NACK of a push; healthy: -1 unknown. */
void ack_queue(struct agent *a, uint64_t version, const char *nonce, const char *error, int healthy);
void ack_start(struct agent *a);
void ack_done(struct agent *a, CURLcode code);
void ack_release(struct agent *a);

#endif
