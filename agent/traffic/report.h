/* traffic/report.h: the live generation's traffic, for traffic-aware gates
 * (docs/gates.md): counted from the access log over local syslog
 * (--traffic-listen) or read from haproxy's stats socket
 * (--traffic-socket), carried in every ACK, and posted as reports while
 * the plane's heartbeats ask. What it needs of the agent -- the version
 * applied, the consumer's live generation, the way to the plane, the
 * metrics -- the core lends it (struct traffic_report_host). */
#ifndef TETHER_TRAFFIC_REPORT_H
#define TETHER_TRAFFIC_REPORT_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "buf.h"
#include "traffic.h"
#include "traffic/count.h"

/* What the core lends the traffic: filled in before traffic_report_start. */
struct traffic_report_host {
	void *ctx;                   /* the agent: passed back to each */
	CURLM *multi;                /* the shared multi handle the reports go on */
	/* The version applied now. */
	uint64_t (*version)(void *ctx);
	/* The id of the consumer's live generation ("": none known; NULL:
	 * no consumer, nothing to follow). */
	const char *(*live)(void *ctx);
	/* POSTs body (JSON) to path on the plane dialled now, with the node's
	 * credentials, on multi; the answer's body goes into answer. The
	 * handle, or NULL; *headers is the caller's to free
	 * (credentials_free_headers) with it. */
	CURL *(*post)(void *ctx, const char *path, const struct buf *body, struct buf *answer, long timeout_ms,
		      struct curl_slist **headers);
	/* Writes --metrics-file when what it says changed. */
	void (*metrics_write)(void *ctx);
};

/* With --traffic-listen or --traffic-socket. */
struct traffic_report {
	struct traffic_report_host host;
	bool on;
	bool from_socket;            /* haproxy's stats socket is the source */
	char *socket;                /* its path */
	int fd;                      /* the syslog listener (-1: none) */
	int64_t next_read_ms;        /* datagrams are read in batches: not before */
	struct traffic_count count;  /* the syslog source's counters */
	char live[TRAFFIC_GEN_LEN];  /* stats socket: the live generation ... */
	double live_since;           /* ... since when (wall seconds) */
	struct traffic base;         /* ... haproxy's reading when it went live */
	struct traffic last;         /* ... the last reading less base */
	bool socket_failing;         /* a failed reading was said (once) */
	int64_t next_refresh_ms;     /* the metrics' next reading or write */
	/* reports, while the plane's heartbeats ask for them ("report":S) */
	double report_s;             /* 0: not asked */
	int64_t report_until_ms;     /* the request lapses without a heartbeat renewing it */
	int64_t next_report_ms;
	CURL *h;                     /* the report in flight */
	struct curl_slist *headers;
	struct buf sent, resp;
	bool report_failing;         /* a failure was said (once) */
	/* why nothing is collected (when !on), for the ACKs' "counts_reason":
	 * static text the core sets before traffic_report_start */
	const char *why_off;
};

/* Opens the listen socket (--traffic-listen, "ADDR:PORT"; fd >= 0: bound
 * on it already, traffic/auto.c's, taken), or reads haproxy's stats socket
 * at socket (--traffic-socket, without --traffic-listen); neither: nothing
 * is collected. Not for --once. 0, or -1 with err. */
int traffic_report_start(struct traffic_report *t, const struct traffic_report_host *host, const char *listen,
			 int fd, const char *socket, char *err, size_t errlen);
void traffic_report_release(struct traffic_report *t);
/* Follows the consumer's live generation: a new one counts from zero. */
void traffic_report_live(struct traffic_report *t);
/* The live generation serves something else from now without being
 * another one (haproxy's runtime API changed its servers): its traffic is
 * counted from zero, since now. */
void traffic_report_restart(struct traffic_report *t);
/* The descriptor the event loop waits on (-1: none, or not yet: datagrams
 * are read every TRAFFIC_READ_EVERY_MS, a batch a wake-up). */
int traffic_report_fd(const struct traffic_report *t);
/* Reads the datagrams waiting, TRAFFIC_SYSLOG_BATCH at most, when it is
 * time. */
void traffic_report_read(struct traffic_report *t);
/* The live generation's traffic until now into out (initialised); false
 * when none is collected. */
bool traffic_report_now(struct traffic_report *t, struct traffic *out);
/* Whether the node counts traffic: ,"counts":true, or ,"counts":false,
 * "counts_reason":"..." (why_off) -- so the plane's gates tell a node
 * that cannot be judged from one that saw few requests. */
void traffic_report_counts(const struct traffic_report *t, struct buf *b);
/* An ACK's counts (above) and ,"traffic":{...} (nothing when none is
 * collected). */
void traffic_report_ack(struct traffic_report *t, struct buf *b);
/* A heartbeat's "report":S (seconds): report every S seconds while the
 * heartbeats keep saying so; heartbeat_s: their interval (0: unknown). */
void traffic_report_heartbeat(struct traffic_report *t, const cJSON *hb, double heartbeat_s);
/* Posts a report (of node) when one is due, and refreshes what the
 * metrics show (metrics: --metrics-listen or --metrics-file is on;
 * metrics_file: --metrics-file is); lowers *wake to when it must come
 * back. */
void traffic_report_tick(struct traffic_report *t, const char *node, bool metrics, bool metrics_file,
			 int64_t *wake);
void traffic_report_done(struct traffic_report *t, CURLcode code);
/* The live generation's traffic as last counted or read (no I/O); NULL
 * when none is collected. */
const struct traffic *traffic_report_view(const struct traffic_report *t);

#endif
