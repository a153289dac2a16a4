/* sse_load.c: the load client of the fan-out and wire-bytes benchmarks
 * (bench/run.sh, bench/etcd.sh, bench/relay.sh). One thread, epoll,
 * non-blocking sockets: it opens N Server-Sent Events streams (GET
 * /v1/stream, distinct node ids) to one plane, spreading the source address
 * over 127.0.0.x so that the ephemeral ports of one address do not run
 * out, and parses just enough of each
 * response (status line, headers, chunked transfer encoding, optional gzip,
 * SSE fields) to see every complete event, its type and its id.
 *
 * Phase 1 waits until every stream has its first event and reports the
 * bytes that took. Then, with --wait-push V, round r (of --rounds R) waits
 * until every stream has a push with id >= V + r - 1 and reports each
 * arrival relative to a start time given with --start or read, one line per
 * round, from --start-file (a regular file or a FIFO). Every figure counts
 * raw bytes as read from the socket: HTTP headers, chunk-size lines and
 * CRLFs, gzip framing and SSE text. Results are key=value lines on stdout.
 *
 * With --ack each stream is a simulated node (the staged-rollout benchmark,
 * bench/rollout.sh): it ACKs every push it receives (POST /v1/ack echoing
 * the push's version and nonce) over a small pool of keep-alive connections
 * driven by the same epoll loop, NACKs instead a push whose data contains
 * --nack-marker (saying it still runs the version it held), and a round
 * then waits until every stream's ACK of a version >= the target was
 * accepted. --zones K gives stream i the label zone=z(i mod K).
 *
 * With --tls (or --ca-file) every stream is a TLS session of its own
 * (GnuTLS, non-blocking handshake driven by the same loop; the plane's
 * certificate is verified against --ca-file or the system's store, for
 * --tls-name or HOST; --cert/--key present a client certificate). The byte
 * figures then count the HTTP bytes inside TLS, not the records. A stream
 * that reconnects offers its last session's data (its ticket), as tetherd
 * does, unless --no-resume; the summary counts the offers and resumptions.
 *
 * With --failover HOST:PORT (bench/etcd.sh, t0820, t0840) the reconnects
 * go to that other plane (a replica), as tetherd's --plane A,B does, and so
 * do the ACKs once a stream or an ACK connection failed (those in flight
 * too).
 *
 * With --reconnect (bench/trust.sh) a stream that ends or fails after its
 * first event reconnects after a delay drawn uniformly from
 * 0..--reconnect-jitter ms (again after every failed attempt), claiming the
 * version of the newest push it got. After the rounds a last phase waits
 * until every stream was lost and is back with the first event of a new
 * connection, and reports when that was (epoch seconds), how many
 * attempts it took, and what each came back with: the kind of a new
 * connection's first event (heartbeat, delta, snapshot: a push whose data
 * says "full":true) and the snapshots received after a loss (bench/relay.sh
 * counts them at the nodes).
 *
 * With --etcd-watch PREFIX (bench/etcd.sh) each of the N connections is
 * instead a node watching etcd directly through its v3 JSON gateway, as
 * APISIX does: POST /v3/watch with {"create_request":{"key","range_end",
 * "start_revision"}} for every key under PREFIX (start_revision --version
 * + 1 when --version is given; from now otherwise), answered by a chunked
 * stream of newline-delimited JSON messages ({"result":{...}}). Each
 * message is one event of the same machinery: the first, "created":true,
 * ends phase 1 (every watch created); a message with events is a push whose
 * id is the largest mod_revision in it, so --wait-push REV waits, in round
 * r, for revision >= REV + r - 1 (consecutive puts under PREFIX with no
 * other write to the cluster between them: the caller checks the put's
 * revisions); a canceled watch (a compaction) or an {"error":...} message
 * fails the stream. Byte figures count the JSON lines as they count SSE
 * text. --gzip, --ack and --zones do not apply; --reconnect and
 * --failover resume from the newest revision seen + 1. */
#include "buf.h"
#include "util.h"
#include "xmalloc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <gnutls/gnutls.h>
#include <zlib.h>

#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT 24
#endif

#define LINE_KEEP 128         /* bytes of a line kept for parsing (a push's data: {"nonce":...) */
#define MAX_PENDING 4         /* events completed inside one chunk */
#define READ_BUF (64 * 1024)
#define INFLATE_BUF (64 * 1024)
#define MAX_CONNECT_TRIES 5
#define NONCE_KEEP 48          /* the plane's NONCE_MAX */
#define ACK_REQ_MAX 768
#define ACK_RESP_MAX 2048
#define ACK_MAX_TRIES 5
#define ACK_TAG (1ULL << 63)   /* epoll data of an ACK connection */
/* a push is a snapshot when its data says "full":true; the plane writes it
 * after the nonce, the statement (a few hundred bytes), version and base */
#define FULL_PAT "\"full\":true"
#define FULL_SCAN 4096         /* bytes of a line looked at for it */

enum st_state { ST_IDLE, ST_CONNECTING, ST_HANDSHAKE, ST_SENDREQ, ST_HEADERS, ST_BODY, ST_ENDED, ST_FAILED,
		ST_WAIT /* --reconnect: closed, waiting for its retry time */ };
/* --etcd-watch: what a line of the watch is scanned for */
enum { EP_MODREV, EP_CREATED, EP_CANCELED, EP_N };
enum body_mode { B_RAW, B_SIZE, B_DATA, B_DATA_CR, B_DATA_LF, B_TRAILER, B_END };

struct event {
	char type;            /* 'p' push, 'h' heartbeat, 'o' other */
	bool full;            /* a push that is a snapshot ("full":true) */
	uint64_t id;
	int64_t t_ns;         /* wall clock when the read that completed it returned */
	uint64_t sse_end;     /* decoded bytes up to its end */
};

struct stream {
	int fd;
	uint8_t state, bmode, tries;
	bool chunked, gzip, got_first, got_target, counted_inflight;
	bool live;            /* had the first event on its current connection */
	bool back;            /* --reconnect: lost, and live again (counted in n_back) */
	bool lost;            /* --reconnect: lost once (--failover: reconnects go to the other plane) */
	uint16_t status;
	uint32_t watching;    /* the epoll events asked for */
	gnutls_session_t tls; /* --tls: this connection's session */
	gnutls_datum_t resume; /* --tls: the last session's data (a ticket), offered on a reconnect */
	bool ticket_kept;     /* this connection's ticket is in resume */
	/* --reconnect: re-establishments (a first event on a new connection),
	 * attempts to reconnect, first loss and newest return (wall ns) */
	uint32_t est, attempts;
	int64_t lost_ns, back_ns;
	/* the current connection: TCP connected, TLS handshake done, response
	 * head read (wall ns; 0: not yet) */
	int64_t conn_ns, hs_ns, resp_ns;
	/* header and chunk-size lines */
	char hline[LINE_KEEP];
	uint32_t hlen;
	/* the current SSE line and event */
	char sline[LINE_KEEP];
	uint32_t slen;
	char ev_type;
	bool ev_data, ev_marked, ev_full;
	uint8_t mk;           /* --nack-marker: bytes of the marker matched so far */
	uint8_t fk;           /* bytes of "full":true matched so far in the line */
	uint64_t ev_id;
	char ev_nonce[NONCE_KEEP];
	/* --etcd-watch: KMP states of the patterns in the current line, the
	 * mod_revision being read (when e_num), the line's largest one and
	 * its events, created / canceled seen */
	uint8_t ek[EP_N];
	bool e_num, e_created, e_canceled;
	uint64_t e_acc, e_rev;
	uint32_t e_events;
	uint64_t chunk_left;
	z_stream *z;
	/* byte accounting */
	uint64_t pos;         /* raw bytes consumed */
	uint64_t sse_pos;     /* decoded body bytes consumed */
	uint64_t hdr_bytes;
	uint64_t mark_rx, mark_sse;
	struct event pend[MAX_PENDING];
	uint8_t npend;
	/* first event */
	char first_type;
	uint64_t first_id, first_wire, first_sse;
	int64_t first_ns;
	/* the newest push, and the one that met the current round's target */
	uint64_t last_id, last_wire, last_sse;
	int64_t last_ns;
	bool have_push;
	uint64_t arr_id, arr_wire, arr_sse;
	int64_t arr_ns;
	/* --ack: the version this node holds (what it last ACKed), and its
	 * newest accepted ACK: version, when the push came, when the ACK
	 * was answered */
	uint64_t held, acked_id;
	int64_t acked_push_ns, acked_ns;
	int64_t arr_ack_ns;
	uint32_t pushes, acks, nacks;
};

/* --ack: one ACK or NACK waiting to go out, or in flight */
struct ack_item {
	uint32_t stream;
	uint8_t tries;
	bool nack;
	uint64_t version, holds;
	int64_t push_ns;
	char nonce[NONCE_KEEP];
};

enum ackc_state { AC_CLOSED, AC_CONNECTING, AC_READY, AC_SENDING, AC_READING };

/* --ack: a keep-alive connection that carries ACKs one at a time */
struct ackc {
	int fd;
	uint8_t state;
	bool has_item;
	struct ack_item item;
	char out[ACK_REQ_MAX];
	size_t out_len, out_off;
	char in[ACK_RESP_MAX];
	size_t in_len;
};

struct config {
	struct sockaddr_in dst;
	struct sockaddr_in alt;      /* --failover: where lost streams come back */
	char host[64];
	unsigned port;
	uint64_t n, version, wait_push, rounds, concurrency, sources, timeout_s, linger_s;
	uint64_t zones, ack_conns, reconnect_jitter_ms;
	const char *prefix, *start_file, *start_arg, *nack_marker, *etcd_watch;
	const char *ca_file, *cert_file, *key_file, *tls_name, *tls_priority;
	bool gzip, per_stream, ack, tls, reconnect, failover, no_resume;
};

static struct config cfg;
static struct stream *streams;
static int ep = -1;
static uint64_t n_first, n_failed, n_inflight, n_target, next_connect;
/* streams that had their first event and are still open; of those, the
 * ones still waiting for the current round's push */
static uint64_t n_live, n_waiting;
static uint64_t target;           /* 0: not waiting for a push */
static char rbuf[READ_BUF];
static unsigned char zbuf[INFLATE_BUF];
/* --ack */
static struct ackc *ackcs;
static struct ack_item *aq;       /* ring of ACKs waiting for a connection */
static size_t aq_cap, aq_head, aq_len;
static uint64_t ack_sent, nack_sent, ack_accepted, ack_stale, ack_errors, ack_retries, pushes_total;
static size_t marker_len;
static uint8_t marker_fail[256];  /* KMP failure function of the marker */
/* --etcd-watch: the watch's key and range_end in base64, and the patterns
 * looked for in every line (KMP, like the marker) */
#define ETCD_PREFIX_MAX 200
static char etcd_key64[((ETCD_PREFIX_MAX + 2) / 3) * 4 + 1], etcd_end64[sizeof(etcd_key64)];
static struct {
	const char *s;
	uint8_t len;
	uint8_t fail[32];
} epat[EP_N] = {
	[EP_MODREV] = { "\"mod_revision\":\"", 0, { 0 } },
	[EP_CREATED] = { "\"created\":true", 0, { 0 } },
	[EP_CANCELED] = { "\"canceled\":true", 0, { 0 } },
};
/* --tls */
static gnutls_certificate_credentials_t tls_cred;
static gnutls_priority_t tls_prio;
/* like OpenSSL's clients (tetherd's libcurl): X25519 first, one key share */
#define TLS_PRIORITY_DEFAULT "NORMAL:-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1"
/* --reconnect: streams waiting to reconnect, a binary min-heap on their
 * retry time (monotonic ms); the counters of the last phase */
static int64_t *heap_at;
static uint32_t *heap_idx;
static size_t heap_len;
static uint64_t n_back, n_reest, n_lost, n_attempts, n_tls_streams;
static uint64_t n_tls_offered, n_tls_resumed;   /* sessions offered on a reconnect; resumed */
/* --reconnect: the first event of each new connection, by kind (a
 * heartbeat, a delta, a snapshot, anything else), and the snapshots
 * streams got on any connection after their first loss */
static uint64_t back_beat, back_delta, back_snap, back_other, snaps_after_loss;
static uint64_t f_connect, f_tls, f_http, f_closed;
static int64_t lost_first_ns, lost_last_ns, back_last_ns;
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

/* ---- small helpers ------------------------------------------------------- */

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("sse_load: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(2);
}

static void warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void warn(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("sse_load: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static int64_t wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A start time: SECONDS.FRACTION (bash's $EPOCHREALTIME), or an integer
 * read by magnitude as seconds, milliseconds, microseconds or nanoseconds
 * since the epoch (date +%s%N). Returns 0 or -1. */
static int parse_time_ns(const char *s, int64_t *out)
{
	char ip[32];
	const char *dot = strchr(s, '.');
	size_t il = dot ? (size_t)(dot - s) : strlen(s);
	uint64_t whole, frac = 0;
	if (il == 0 || il >= sizeof(ip))
		return -1;
	memcpy(ip, s, il);
	ip[il] = '\0';
	if (parse_u64(ip, &whole) < 0)
		return -1;
	if (dot) {
		const char *f = dot + 1;
		size_t fl = strlen(f);
		if (fl == 0 || fl > 9 || whole > 100000000000ULL)
			return -1;
		for (size_t i = 0; i < 9; i++) {
			unsigned d = 0;
			if (i < fl) {
				if (f[i] < '0' || f[i] > '9')
					return -1;
				d = (unsigned)(f[i] - '0');
			}
			frac = frac * 10 + d;
		}
		*out = (int64_t)(whole * 1000000000ULL + frac);
		return 0;
	}
	if (whole < 100000000000ULL)
		whole *= 1000000000ULL;
	else if (whole < 100000000000000ULL)
		whole *= 1000000ULL;
	else if (whole < 100000000000000000ULL)
		whole *= 1000ULL;
	*out = (int64_t)whole;
	return 0;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of a sorted array. */
static int64_t pct(const int64_t *v, size_t n, double p)
{
	if (!n)
		return 0;
	size_t k = (size_t)((p / 100.0) * (double)n + 0.999999);
	if (k < 1)
		k = 1;
	if (k > n)
		k = n;
	return v[k - 1];
}

/* Prints PREFIX.min/p50/mean/max of the values (sorted in place) divided
 * by scale, with the given decimals. */
static void print_stats(const char *prefix, int64_t *v, size_t n, double scale, int decimals)
{
	if (!n) {
		printf("%s.count=0\n", prefix);
		return;
	}
	qsort(v, n, sizeof(*v), cmp_i64);
	double sum = 0;
	for (size_t i = 0; i < n; i++)
		sum += (double)v[i];
	printf("%s.min=%.*f\n", prefix, decimals, (double)v[0] / scale);
	printf("%s.p50=%.*f\n", prefix, decimals, (double)pct(v, n, 50) / scale);
	printf("%s.mean=%.*f\n", prefix, decimals, sum / (double)n / scale);
	printf("%s.max=%.*f\n", prefix, decimals, (double)v[n - 1] / scale);
}

/* ---- stream life ----------------------------------------------------------- */

static void release_inflight(struct stream *st)
{
	if (st->counted_inflight) {
		st->counted_inflight = false;
		n_inflight--;
	}
}

static void stream_close(struct stream *st)
{
	if (st->tls) {
		gnutls_deinit(st->tls);
		st->tls = NULL;
	}
	if (st->fd >= 0) {
		epoll_ctl(ep, EPOLL_CTL_DEL, st->fd, NULL);
		close(st->fd);
		st->fd = -1;
	}
	st->watching = 0;
	if (st->z) {
		inflateEnd(st->z);
		free(st->z);
		st->z = NULL;
	}
}

/* ---- --reconnect: the retry heap ---------------------------------------------- */

static uint64_t rng_next(void)
{
	/* xorshift64*: jitter, not secrets */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dULL;
}

static void heap_swap(size_t a, size_t b)
{
	int64_t t = heap_at[a];
	uint32_t x = heap_idx[a];
	heap_at[a] = heap_at[b];
	heap_idx[a] = heap_idx[b];
	heap_at[b] = t;
	heap_idx[b] = x;
}

static void heap_push(int64_t at, uint32_t idx)
{
	size_t k = heap_len++;
	heap_at[k] = at;
	heap_idx[k] = idx;
	while (k && heap_at[(k - 1) / 2] > heap_at[k]) {
		heap_swap(k, (k - 1) / 2);
		k = (k - 1) / 2;
	}
}

static uint32_t heap_pop(void)
{
	uint32_t top = heap_idx[0];
	heap_len--;
	if (heap_len) {
		heap_at[0] = heap_at[heap_len];
		heap_idx[0] = heap_idx[heap_len];
		for (size_t k = 0;;) {
			size_t l = 2 * k + 1, r = l + 1, m = k;
			if (l < heap_len && heap_at[l] < heap_at[m])
				m = l;
			if (r < heap_len && heap_at[r] < heap_at[m])
				m = r;
			if (m == k)
				break;
			heap_swap(k, m);
			k = m;
		}
	}
	return top;
}

/* The stream's connection is gone: back to a fresh parser, and a retry
 * 0..--reconnect-jitter ms from now. */
static bool acks_to_alt;   /* --failover: the ACKs go to the other plane now */

static void schedule_reconnect(struct stream *st)
{
	stream_close(st);
	st->lost = true;
	if (cfg.failover)
		acks_to_alt = true;   /* as tetherd's ACKs follow it to the plane it is on */
	st->state = ST_WAIT;
	st->status = 0;
	st->hlen = st->slen = 0;
	st->chunked = st->gzip = false;
	st->bmode = B_RAW;
	st->chunk_left = 0;
	st->npend = 0;
	st->pos = st->sse_pos = st->mark_rx = st->mark_sse = 0;
	st->ev_type = 0;
	st->ev_data = st->ev_marked = st->ev_full = false;
	st->mk = st->fk = 0;
	memset(st->ek, 0, sizeof(st->ek));
	st->e_num = st->e_created = st->e_canceled = false;
	st->e_acc = st->e_rev = 0;
	st->e_events = 0;
	uint64_t j = cfg.reconnect_jitter_ms ? rng_next() % (cfg.reconnect_jitter_ms + 1) : 0;
	heap_push(mono_ms() + (int64_t)j, (uint32_t)(st - streams));
}

static void stream_fail(struct stream *st, const char *why)
{
	size_t i = (size_t)(st - streams);
	if (st->state == ST_FAILED || st->state == ST_ENDED || st->state == ST_WAIT)
		return;
	if (cfg.reconnect && st->got_first) {
		if (st->live) {
			/* an established stream lost */
			int64_t now = wall_ns();
			n_lost++;
			if (!lost_first_ns)
				lost_first_ns = now;
			lost_last_ns = now;
			if (!st->lost_ns)
				st->lost_ns = now;
			st->live = false;
			n_live--;
			if (target && !st->got_target)
				n_waiting--;
			if (st->back) {
				st->back = false;
				n_back--;
			}
		} else {
			/* an attempt to reconnect that failed: where */
			if (st->state == ST_CONNECTING || st->state == ST_IDLE)
				f_connect++;
			else if (st->state == ST_HANDSHAKE || st->state == ST_SENDREQ)
				f_tls++;
			else if (st->status && st->status != 200)
				f_http++;
			else
				f_closed++;
			if (st->state == ST_HANDSHAKE && f_tls <= 5)
				warn("stream %zu (%s%zu): reconnect: %s", i, cfg.prefix, i, why);
		}
		schedule_reconnect(st);
		return;
	}
	if (n_failed < 10)
		warn("stream %zu (%s%zu): %s", i, cfg.prefix, i, why);
	if (st->live) {
		st->live = false;
		n_live--;
		if (target && !st->got_target)
			n_waiting--;
	}
	st->state = ST_FAILED;
	n_failed++;
	release_inflight(st);
	stream_close(st);
}

static int stream_connect(struct stream *st, size_t i)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (cfg.sources) {
		int one = 1;
		setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
		struct sockaddr_in src = { .sin_family = AF_INET };
		/* 127.0.0.2 .. 127.0.0.(sources + 1) */
		src.sin_addr.s_addr = htonl(0x7f000002u + (uint32_t)(i % cfg.sources));
		if (bind(fd, (struct sockaddr *)&src, sizeof(src)) < 0) {
			close(fd);
			return -1;
		}
	}
	/* --failover: once a stream was lost, it comes back on the other plane */
	const struct sockaddr_in *to = st->lost && cfg.failover ? &cfg.alt : &cfg.dst;
	if (connect(fd, (const struct sockaddr *)to, sizeof(*to)) < 0 && errno != EINPROGRESS) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	struct epoll_event ev = { .events = EPOLLOUT | EPOLLIN, .data.u64 = i };
	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
		close(fd);
		return -1;
	}
	st->fd = fd;
	st->watching = EPOLLOUT | EPOLLIN;
	st->state = ST_CONNECTING;
	return 0;
}

static void stream_watch(struct stream *st, uint32_t events)
{
	if (st->watching == events)
		return;
	struct epoll_event ev = { .events = events, .data.u64 = (uint64_t)(st - streams) };
	epoll_ctl(ep, EPOLL_CTL_MOD, st->fd, &ev);
	st->watching = events;
}

/* --reconnect: the streams whose retry time came try again. */
static void reconnect_due(void)
{
	if (!heap_len)
		return;
	int64_t now = mono_ms();
	while (heap_len && heap_at[0] <= now) {
		size_t i = heap_pop();
		struct stream *st = &streams[i];
		st->attempts++;
		n_attempts++;
		if (stream_connect(st, i) < 0) {
			st->state = ST_IDLE;
			stream_fail(st, strerror(errno));
		}
	}
}

static void start_connects(void)
{
	while (next_connect < cfg.n && n_inflight < cfg.concurrency) {
		size_t i = (size_t)next_connect++;
		struct stream *st = &streams[i];
		st->tries++;
		if (stream_connect(st, i) < 0) {
			char why[128];
			snprintf(why, sizeof(why), "connect: %s", strerror(errno));
			st->state = ST_IDLE;
			stream_fail(st, why);
			continue;
		}
		st->counted_inflight = true;
		n_inflight++;
	}
}

/* --etcd-watch: the POST /v3/watch that creates the watch, resuming after
 * the newest revision seen (or --version) */
static int etcd_request(const struct stream *st, char *req, size_t cap)
{
	char body[512], from[64] = "";
	uint64_t held = st->have_push ? st->last_id : cfg.version;
	if (held)
		snprintf(from, sizeof(from), ",\"start_revision\":\"%" PRIu64 "\"", held + 1);
	int bl = snprintf(body, sizeof(body), "{\"create_request\":{\"key\":\"%s\",\"range_end\":\"%s\"%s}}",
			  etcd_key64, etcd_end64, from);
	if (bl < 0 || (size_t)bl >= sizeof(body))
		return -1;
	return snprintf(req, cap,
			"POST /v3/watch HTTP/1.1\r\n"
			"Host: %s:%u\r\n"
			"Content-Type: application/json\r\n"
			"Content-Length: %d\r\n"
			"\r\n"
			"%s",
			cfg.host, cfg.port, bl, body);
}

static void send_raw(struct stream *st, const char *req, size_t n);

static void send_request(struct stream *st, size_t i)
{
	char req[1024], labels[64] = "";
	if (cfg.etcd_watch) {
		int n = etcd_request(st, req, sizeof(req));
		if (n < 0 || (size_t)n >= sizeof(req)) {
			stream_fail(st, "request too long");
			return;
		}
		send_raw(st, req, (size_t)n);
		return;
	}
	if (cfg.zones)
		snprintf(labels, sizeof(labels), "&labels=zone%%3Dz%" PRIu64, (uint64_t)i % cfg.zones);
	/* a reconnecting stream claims the newest version it was pushed */
	uint64_t version = st->have_push ? st->last_id : cfg.version;
	int n = snprintf(req, sizeof(req),
			 "GET /v1/stream?node=%s%zu&version=%" PRIu64 "%s HTTP/1.1\r\n"
			 "Host: %s:%u\r\n"
			 "Accept: text/event-stream\r\n"
			 "%s"
			 "\r\n",
			 cfg.prefix, i, version, labels, cfg.host, cfg.port,
			 cfg.gzip ? "Accept-Encoding: gzip\r\n" : "");
	if (n < 0 || (size_t)n >= sizeof(req)) {
		stream_fail(st, "request too long");
		return;
	}
	send_raw(st, req, (size_t)n);
}

/* The request goes out on a fresh connection: at once, or (TLS) when the
 * socket takes it. */
static void send_raw(struct stream *st, const char *req, size_t n)
{
	if (st->tls) {
		ssize_t r = gnutls_record_send(st->tls, req, n);
		if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED) {
			/* the rest goes out when the socket takes it (same data: NULL, 0) */
			st->state = ST_SENDREQ;
			stream_watch(st, EPOLLOUT);
			return;
		}
		if (r != (ssize_t)n) {
			stream_fail(st, r < 0 ? gnutls_strerror((int)r) : "short write of the request");
			return;
		}
		stream_watch(st, EPOLLIN);
		st->state = ST_HEADERS;
		return;
	}
	ssize_t w = send(st->fd, req, n, MSG_NOSIGNAL);
	if (w != (ssize_t)n) {
		/* a fresh socket takes a few hundred bytes at once, or it is broken */
		stream_fail(st, w < 0 ? strerror(errno) : "short write of the request");
		return;
	}
	stream_watch(st, EPOLLIN);
	st->state = ST_HEADERS;
}

/* ---- TLS (--tls) ---------------------------------------------------------- */

static void tls_global_init(void)
{
	int rc = gnutls_certificate_allocate_credentials(&tls_cred);
	if (rc < 0)
		die("gnutls: %s", gnutls_strerror(rc));
	if (cfg.ca_file)
		rc = gnutls_certificate_set_x509_trust_file(tls_cred, cfg.ca_file, GNUTLS_X509_FMT_PEM);
	else
		rc = gnutls_certificate_set_x509_system_trust(tls_cred);
	if (rc <= 0)
		die("no CA certificate loaded from %s%s%s", cfg.ca_file ? cfg.ca_file : "the system's store",
		    rc < 0 ? ": " : "", rc < 0 ? gnutls_strerror(rc) : "");
	if (cfg.cert_file) {
		rc = gnutls_certificate_set_x509_key_file(tls_cred, cfg.cert_file, cfg.key_file,
							  GNUTLS_X509_FMT_PEM);
		if (rc < 0)
			die("cannot load %s / %s: %s", cfg.cert_file, cfg.key_file, gnutls_strerror(rc));
	}
	const char *where = NULL;
	const char *prio = cfg.tls_priority ? cfg.tls_priority : TLS_PRIORITY_DEFAULT;
	rc = gnutls_priority_init(&tls_prio, prio, &where);
	if (rc < 0)
		die("--tls-priority: %s at '%s'", gnutls_strerror(rc), where ? where : "");
}

/* Drives the handshake as far as the socket allows; sends the request
 * when it is done. */
static void tls_step(struct stream *st, size_t i)
{
	for (;;) {
		int rc = gnutls_handshake(st->tls);
		if (rc == GNUTLS_E_SUCCESS) {
			st->hs_ns = wall_ns();
			if (gnutls_session_is_resumed(st->tls))
				n_tls_resumed++;
			send_request(st, i);
			return;
		}
		if (rc == GNUTLS_E_AGAIN || rc == GNUTLS_E_INTERRUPTED) {
			stream_watch(st, gnutls_record_get_direction(st->tls) ? EPOLLOUT : EPOLLIN);
			return;
		}
		if (gnutls_error_is_fatal(rc)) {
			char why[256];
			snprintf(why, sizeof(why), "TLS handshake: %s", gnutls_strerror(rc));
			if (rc == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR) {
				gnutls_datum_t out;
				unsigned status = gnutls_session_get_verify_cert_status(st->tls);
				int pr = gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &out, 0);
				if (pr == 0) {
					snprintf(why, sizeof(why), "TLS handshake: %s", out.data);
					gnutls_free(out.data);
				}
			}
			stream_fail(st, why);
			return;
		}
		/* a warning alert: go on */
	}
}

/* The TCP connection is up: a TLS session, or the request at once. */
static void stream_connected(struct stream *st, size_t i)
{
	st->conn_ns = wall_ns();
	st->hs_ns = st->resp_ns = 0;
	if (!cfg.tls) {
		send_request(st, i);
		return;
	}
	int rc = gnutls_init(&st->tls, GNUTLS_CLIENT | GNUTLS_NONBLOCK | GNUTLS_KEY_SHARE_TOP);
	if (rc == 0)
		rc = gnutls_priority_set(st->tls, tls_prio);
	if (rc == 0)
		rc = gnutls_credentials_set(st->tls, GNUTLS_CRD_CERTIFICATE, tls_cred);
	if (rc < 0) {
		stream_fail(st, gnutls_strerror(rc));
		return;
	}
	const char *name = cfg.tls_name ? cfg.tls_name : cfg.host;
	struct in_addr a4;
	if (inet_pton(AF_INET, name, &a4) != 1)
		gnutls_server_name_set(st->tls, GNUTLS_NAME_DNS, name, strlen(name));
	gnutls_session_set_verify_cert(st->tls, name, 0);
	st->ticket_kept = false;
	if (st->resume.size && gnutls_session_set_data(st->tls, st->resume.data, st->resume.size) == 0)
		n_tls_offered++;
	gnutls_handshake_set_timeout(st->tls, GNUTLS_INDEFINITE_TIMEOUT);
	gnutls_transport_set_int(st->tls, st->fd);
	n_tls_streams++;
	st->state = ST_HANDSHAKE;
	tls_step(st, i);
}

/* ---- ACKs (--ack) ------------------------------------------------------------ */

static void aq_push(const struct ack_item *it, bool front)
{
	if (aq_len == aq_cap) {
		size_t ncap = aq_cap ? aq_cap * 2 : 1024;
		struct ack_item *n = xcalloc(ncap, sizeof(*n));
		for (size_t i = 0; i < aq_len; i++)
			n[i] = aq[(aq_head + i) % aq_cap];
		free(aq);
		aq = n;
		aq_cap = ncap;
		aq_head = 0;
	}
	if (front) {
		aq_head = (aq_head + aq_cap - 1) % aq_cap;
		aq[aq_head] = *it;
	} else {
		aq[(aq_head + aq_len) % aq_cap] = *it;
	}
	aq_len++;
}

static bool aq_pop(struct ack_item *out)
{
	if (!aq_len)
		return false;
	*out = aq[aq_head];
	aq_head = (aq_head + 1) % aq_cap;
	aq_len--;
	return true;
}

/* A push was dispatched on st: ACK it, or NACK it when it carries the
 * marker (the node then still runs the version it held). */
static void ack_enqueue(struct stream *st, uint64_t version, const char *nonce, bool nack, int64_t push_ns)
{
	struct ack_item it = { .stream = (uint32_t)(st - streams), .nack = nack, .version = version,
			       .holds = st->held, .push_ns = push_ns };
	snprintf(it.nonce, sizeof(it.nonce), "%s", nonce);
	st->pushes++;
	pushes_total++;
	if (nack) {
		st->nacks++;
		nack_sent++;
	} else {
		st->acks++;
		ack_sent++;
		st->held = version;
	}
	aq_push(&it, false);
}

static void ackc_close(struct ackc *a)
{
	if (a->fd >= 0) {
		epoll_ctl(ep, EPOLL_CTL_DEL, a->fd, NULL);
		close(a->fd);
		a->fd = -1;
	}
	a->state = AC_CLOSED;
	a->in_len = 0;
}

/* The connection broke: its ACK goes back to the front of the queue. */
static void ackc_drop(struct ackc *a, const char *why)
{
	ackc_close(a);
	if (cfg.failover)
		acks_to_alt = true;   /* the plane the ACKs went to fails: in-flight ones move too */
	if (!a->has_item)
		return;
	a->has_item = false;
	if (++a->item.tries < ACK_MAX_TRIES) {
		ack_retries++;
		aq_push(&a->item, true);
		return;
	}
	ack_errors++;
	warn("ack of version %" PRIu64 " for %s%u: %s; giving up", a->item.version, cfg.prefix, a->item.stream, why);
}

static void ackc_watch(struct ackc *a, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.u64 = ACK_TAG | (uint64_t)(a - ackcs) };
	epoll_ctl(ep, EPOLL_CTL_MOD, a->fd, &ev);
}

static void ackc_send(struct ackc *a)
{
	while (a->out_off < a->out_len) {
		ssize_t w = send(a->fd, a->out + a->out_off, a->out_len - a->out_off, MSG_NOSIGNAL);
		if (w > 0) {
			a->out_off += (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (a->state != AC_SENDING)
				ackc_watch(a, EPOLLIN | EPOLLOUT);
			a->state = AC_SENDING;
			return;
		}
		ackc_drop(a, w < 0 ? strerror(errno) : "send returned 0");
		return;
	}
	if (a->state == AC_SENDING)
		ackc_watch(a, EPOLLIN);
	a->state = AC_READING;
}

static int ackc_connect(struct ackc *a)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	const struct sockaddr_in *to = acks_to_alt ? &cfg.alt : &cfg.dst;
	if (connect(fd, (const struct sockaddr *)to, sizeof(*to)) < 0 && errno != EINPROGRESS) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	struct epoll_event ev = { .events = EPOLLOUT | EPOLLIN, .data.u64 = ACK_TAG | (uint64_t)(a - ackcs) };
	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
		close(fd);
		return -1;
	}
	a->fd = fd;
	a->state = AC_CONNECTING;
	return 0;
}

static void ackc_request(struct ackc *a)
{
	const struct ack_item *it = &a->item;
	char body[512];
	int bl;
	if (it->nack)
		bl = snprintf(body, sizeof(body),
			      "{\"node\":\"%s%u\",\"version\":%" PRIu64 ",\"nonce\":\"%s\",\"status\":\"nack\","
			      "\"error\":\"sse_load: the push carries the marker\",\"current_version\":%" PRIu64 "}",
			      cfg.prefix, it->stream, it->version, it->nonce, it->holds);
	else
		bl = snprintf(body, sizeof(body),
			      "{\"node\":\"%s%u\",\"version\":%" PRIu64 ",\"nonce\":\"%s\",\"status\":\"ack\"}",
			      cfg.prefix, it->stream, it->version, it->nonce);
	int n = snprintf(a->out, sizeof(a->out),
			 "POST /v1/ack HTTP/1.1\r\nHost: %s:%u\r\nContent-Type: application/json\r\n"
			 "Content-Length: %d\r\n\r\n%s",
			 cfg.host, cfg.port, bl, body);
	if (bl < 0 || (size_t)bl >= sizeof(body) || n < 0 || (size_t)n >= sizeof(a->out))
		die("ack request too long");
	a->out_len = (size_t)n;
	a->out_off = 0;
	a->in_len = 0;
}

/* The plane answered an ACK. */
static void ack_answered(const struct ack_item *it, unsigned status, const char *body, size_t blen)
{
	struct stream *st = &streams[it->stream];
	if (status != 200) {
		if (ack_errors < 10)
			warn("ack of version %" PRIu64 " for %s%u: HTTP %u: %.*s", it->version, cfg.prefix, it->stream,
			     status, (int)(blen > 200 ? 200 : blen), body);
		ack_errors++;
		return;
	}
	if (!memmem(body, blen, "accepted", 8)) {
		ack_stale++;
		return;
	}
	ack_accepted++;
	if (it->nack || it->version < st->acked_id)
		return;
	int64_t now = wall_ns();
	st->acked_id = it->version;
	st->acked_push_ns = it->push_ns;
	st->acked_ns = now;
	if (target && !st->got_target && it->version >= target && st->state == ST_BODY && st->got_first) {
		st->got_target = true;
		st->arr_id = it->version;
		st->arr_ns = it->push_ns;
		st->arr_ack_ns = now;
		n_target++;
		n_waiting--;
	}
}

/* Parses a complete response in a->in; returns 1 when one was handled,
 * 0 when more bytes are needed, -1 on garbage. */
static int ackc_response(struct ackc *a)
{
	const char *h = a->in;
	const char *end = memmem(h, a->in_len, "\r\n\r\n", 4);
	if (!end)
		return a->in_len >= sizeof(a->in) - 1 ? -1 : 0;
	size_t hl = (size_t)(end - h) + 4;
	if (hl < 12 || strncmp(h, "HTTP/1.", 7) != 0)
		return -1;
	unsigned status = (unsigned)((h[9] - '0') * 100 + (h[10] - '0') * 10 + (h[11] - '0'));
	size_t clen = 0;
	bool close_after = false;
	for (const char *l = h; l < end;) {
		const char *e = memmem(l, (size_t)(end - l) + 2, "\r\n", 2);
		size_t ll = (size_t)(e - l);
		if (ll > 15 && strncasecmp(l, "content-length:", 15) == 0)
			clen = strtoul(l + 15, NULL, 10);
		else if (ll > 11 && strncasecmp(l, "connection:", 11) == 0 && memmem(l, ll, "close", 5))
			close_after = true;
		l = e + 2;
	}
	if (hl + clen > sizeof(a->in) - 1)
		return -1;
	if (a->in_len < hl + clen)
		return 0;
	a->has_item = false;
	ack_answered(&a->item, status, h + hl, clen);
	a->in_len = 0;
	if (close_after) {
		ackc_close(a);
	} else {
		if (a->state == AC_SENDING)
			ackc_watch(a, EPOLLIN);   /* answered before the request was out: stop EPOLLOUT */
		a->state = AC_READY;
	}
	return 1;
}

static void ackc_readable(struct ackc *a)
{
	for (;;) {
		ssize_t r = recv(a->fd, a->in + a->in_len, sizeof(a->in) - 1 - a->in_len, 0);
		if (r > 0) {
			if (a->state != AC_READING && a->state != AC_SENDING) {
				ackc_drop(a, "bytes nobody asked for");
				return;
			}
			a->in_len += (size_t)r;
			int rc = ackc_response(a);
			if (rc < 0) {
				ackc_drop(a, "a response that does not parse");
				return;
			}
			if (rc > 0 || a->state != AC_READING)
				return;
			continue;
		}
		if (r == 0) {
			/* the plane closed it: an idle one is just gone */
			ackc_drop(a, "connection closed before the answer");
			return;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			ackc_drop(a, strerror(errno));
		return;
	}
}

static void ackc_event(struct ackc *a, uint32_t events)
{
	if (a->state == AC_CONNECTING) {
		int err = 0;
		socklen_t len = sizeof(err);
		getsockopt(a->fd, SOL_SOCKET, SO_ERROR, &err, &len);
		if (err) {
			ackc_drop(a, strerror(err));
			return;
		}
		if (!(events & EPOLLOUT))
			return;
		a->state = AC_SENDING;   /* EPOLLOUT is watched already */
		ackc_send(a);
		return;
	}
	if (a->state == AC_SENDING && (events & EPOLLOUT))
		ackc_send(a);
	if (a->fd >= 0 && (events & (EPOLLIN | EPOLLERR | EPOLLHUP)))
		ackc_readable(a);
}

/* Hands queued ACKs to idle connections, opening them as needed. */
static void ack_pump(void)
{
	if (!cfg.ack)
		return;
	for (size_t k = 0; k < cfg.ack_conns && aq_len; k++) {
		struct ackc *a = &ackcs[k];
		if (a->has_item || (a->state != AC_CLOSED && a->state != AC_READY))
			continue;
		aq_pop(&a->item);
		a->has_item = true;
		ackc_request(a);
		if (a->state == AC_CLOSED) {
			if (ackc_connect(a) < 0)
				ackc_drop(a, strerror(errno));
			continue;
		}
		a->state = AC_READING;
		ackc_send(a);
	}
}

/* ---- events ------------------------------------------------------------------ */

static void event_complete(struct stream *st, const struct event *e, uint64_t wire, uint64_t sse)
{
	if (!st->live) {
		st->live = true;
		n_live++;
		if (target && !st->got_target)
			n_waiting++;   /* not expected: a stream that opened during a round */
		if (st->got_first) {
			/* --reconnect: back, with the first event of a new connection */
			st->est++;
			n_reest++;
			if (e->type == 'h')
				back_beat++;
			else if (e->type == 'p' && e->full)
				back_snap++;
			else if (e->type == 'p')
				back_delta++;
			else
				back_other++;
			st->back_ns = e->t_ns;
			if (e->t_ns > back_last_ns)
				back_last_ns = e->t_ns;
			if (st->lost_ns && !st->back) {
				st->back = true;
				n_back++;
			}
		}
	}
	if (!st->got_first) {
		st->got_first = true;
		st->first_type = e->type;
		st->first_id = e->id;
		st->first_wire = wire;
		st->first_sse = sse;
		st->first_ns = e->t_ns;
		n_first++;
		release_inflight(st);
	}
	if (e->type != 'p')
		return;
	if (e->full && st->lost_ns)
		snaps_after_loss++;
	st->have_push = true;
	st->last_id = e->id;
	st->last_wire = wire;
	st->last_sse = sse;
	st->last_ns = e->t_ns;
	if (cfg.ack) {
		/* the round waits for the ACK (ack_answered); keep the bytes of
		 * the newest push that meets the target */
		if (target && !st->got_target && e->id >= target) {
			st->arr_wire = wire;
			st->arr_sse = sse;
		}
		return;
	}
	if (target && !st->got_target && e->id >= target) {
		st->got_target = true;
		st->arr_id = e->id;
		st->arr_wire = wire;
		st->arr_sse = sse;
		st->arr_ns = e->t_ns;
		n_target++;
		n_waiting--;
	}
}

/* The events completed since the last boundary end at raw position pos
 * (the end of the chunk that completed them): the first takes every raw
 * byte since the previous boundary, the others none. */
static void finalize(struct stream *st, uint64_t pos)
{
	for (uint8_t k = 0; k < st->npend; k++) {
		uint64_t wire = k == 0 ? pos - st->mark_rx : 0;
		uint64_t sse = st->pend[k].sse_end - st->mark_sse;
		st->mark_sse = st->pend[k].sse_end;
		event_complete(st, &st->pend[k], wire, sse);
	}
	if (st->npend)
		st->mark_rx = pos;
	st->npend = 0;
}

static void ack_enqueue(struct stream *st, uint64_t version, const char *nonce, bool nack, int64_t push_ns);

/* The nonce of a push's data, {"nonce":"...",...}, from the kept prefix
 * of the line. */
static void take_nonce(struct stream *st, const char *val, size_t vl)
{
	static const char key[] = "{\"nonce\":\"";
	size_t kl = sizeof(key) - 1;
	st->ev_nonce[0] = '\0';
	if (vl <= kl || memcmp(val, key, kl) != 0)
		return;
	const char *q = memchr(val + kl, '"', vl - kl);
	size_t nl = q ? (size_t)(q - (val + kl)) : 0;
	if (!q || nl == 0 || nl >= NONCE_KEEP)
		return;
	memcpy(st->ev_nonce, val + kl, nl);
	st->ev_nonce[nl] = '\0';
}

static void sse_line(struct stream *st, int64_t t)
{
	const char *l = st->sline;
	uint32_t kept = st->slen < LINE_KEEP - 1 ? st->slen : LINE_KEEP - 1;
	if (st->slen == 0) {
		/* a blank line dispatches; "retry:" alone has neither type nor data */
		if (st->ev_type || st->ev_data) {
			if (st->npend < MAX_PENDING) {
				struct event *e = &st->pend[st->npend++];
				e->type = st->ev_type ? st->ev_type : 'o';
				e->full = st->ev_type == 'p' && st->ev_full;
				e->id = st->ev_id;
				e->t_ns = t;
				e->sse_end = st->sse_pos;
			}
			if (cfg.ack && st->ev_type == 'p') {
				if (st->ev_nonce[0])
					ack_enqueue(st, st->ev_id, st->ev_nonce, st->ev_marked, t);
				else
					warn("stream %zu: a push without a nonce", (size_t)(st - streams));
			}
		}
		st->ev_type = 0;
		st->ev_data = false;
		st->ev_marked = false;
		st->ev_full = false;
		st->ev_nonce[0] = '\0';
		return;
	}
	if (l[0] == ':')
		return;
	const char *colon = memchr(l, ':', kept);
	size_t nl = colon ? (size_t)(colon - l) : kept;
	const char *val = colon ? colon + 1 : l + kept;
	if (*val == ' ')
		val++;
	size_t vl = (size_t)(l + kept - val);
	if (nl == 5 && memcmp(l, "event", 5) == 0) {
		if (vl == 4 && memcmp(val, "push", 4) == 0)
			st->ev_type = 'p';
		else if (vl == 9 && memcmp(val, "heartbeat", 9) == 0)
			st->ev_type = 'h';
		else
			st->ev_type = 'o';
	} else if (nl == 2 && memcmp(l, "id", 2) == 0) {
		char idb[32];
		uint64_t id;
		if (vl < sizeof(idb)) {
			memcpy(idb, val, vl);
			idb[vl] = '\0';
			if (parse_u64(idb, &id) == 0)
				st->ev_id = id;
		}
	} else if (nl == 4 && memcmp(l, "data", 4) == 0) {
		st->ev_data = true;
		if (cfg.ack)
			take_nonce(st, val, vl);
	}
}

/* --nack-marker: Knuth-Morris-Pratt over every byte of an event's lines */
static void marker_scan(struct stream *st, const char *p, size_t n)
{
	const unsigned char *m = (const unsigned char *)cfg.nack_marker;
	unsigned k = st->mk;
	for (size_t i = 0; i < n && !st->ev_marked; i++) {
		unsigned char c = (unsigned char)p[i];
		while (k && m[k] != c)
			k = marker_fail[k - 1];
		if (m[k] == c)
			k++;
		if (k == marker_len) {
			st->ev_marked = true;
			k = 0;
		}
	}
	st->mk = (uint8_t)k;
}

/* "full":true in the first FULL_SCAN bytes of a line (KMP: of the
 * pattern's prefixes only "full" with its closing quote has a border, the
 * quote, so a mismatch there falls back to 1 and everywhere else to 0) */
static void full_scan(struct stream *st, const char *p, size_t n)
{
	static const char pat[] = FULL_PAT;
	unsigned k = st->fk;
	for (size_t i = 0; i < n && !st->ev_full; i++) {
		while (k && p[i] != pat[k])
			k = k == 6 ? 1 : 0;
		if (p[i] == pat[k])
			k++;
		if (k == sizeof(pat) - 1) {
			st->ev_full = true;
			k = 0;
		}
	}
	st->fk = (uint8_t)k;
}

/* ---- --etcd-watch: the JSON gateway's lines ---------------------------------- */

/* The bytes of a line, as they come: KMP over the patterns, and the
 * digits of each "mod_revision":"N" (int64s are strings in the gateway's
 * JSON). */
static void etcd_scan(struct stream *st, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char c = p[i];
		if (st->e_num) {
			if (c >= '0' && c <= '9' && st->e_acc < UINT64_MAX / 10 - 10) {
				st->e_acc = st->e_acc * 10 + (uint64_t)(c - '0');
				continue;
			}
			st->e_num = false;
			if (c == '"') {
				st->e_events++;
				if (st->e_acc > st->e_rev)
					st->e_rev = st->e_acc;
			}
			continue;
		}
		for (unsigned j = 0; j < EP_N; j++) {
			unsigned k = st->ek[j];
			while (k && epat[j].s[k] != c)
				k = epat[j].fail[k - 1];
			if (epat[j].s[k] == c)
				k++;
			if (k == epat[j].len) {
				k = 0;
				if (j == EP_MODREV) {
					st->e_num = true;
					st->e_acc = 0;
				} else if (j == EP_CREATED) {
					st->e_created = true;
				} else {
					st->e_canceled = true;
				}
			}
			st->ek[j] = (uint8_t)k;
		}
		if (st->e_num)
			memset(st->ek, 0, sizeof(st->ek));
	}
}

/* A complete line: one message of the watch ({"result":{...}}), an event
 * of the machinery: 'c' created, 'p' events (id: the newest mod_revision),
 * 'o' anything else (a progress notification). */
static void etcd_line(struct stream *st, int64_t t)
{
	uint32_t kept = st->slen < LINE_KEEP - 1 ? st->slen : LINE_KEEP - 1;
	char type = st->e_events ? 'p' : st->e_created ? 'c' : 'o';
	bool canceled = st->e_canceled;
	uint64_t rev = st->e_rev;
	memset(st->ek, 0, sizeof(st->ek));
	st->e_num = st->e_created = st->e_canceled = false;
	st->e_acc = st->e_rev = 0;
	st->e_events = 0;
	if (st->slen == 0)
		return;
	if (kept >= 9 && memcmp(st->sline, "{\"error\":", 9) == 0) {
		char why[LINE_KEEP + 16];
		st->npend = 0;   /* the stream fails with this line */
		snprintf(why, sizeof(why), "etcd: %.*s", (int)kept, st->sline);
		stream_fail(st, why);
		return;
	}
	if (canceled) {
		char why[LINE_KEEP + 32];
		st->npend = 0;
		snprintf(why, sizeof(why), "etcd canceled the watch: %.*s", (int)kept, st->sline);
		stream_fail(st, why);
		return;
	}
	if (st->npend < MAX_PENDING) {
		struct event *e = &st->pend[st->npend++];
		e->type = type;
		e->id = type == 'p' ? rev : 0;
		e->t_ns = t;
		e->sse_end = st->sse_pos;
	}
}

/* Decoded body bytes: SSE lines, of which only a prefix is kept. */
static void sse_feed(struct stream *st, const char *p, size_t n, int64_t t)
{
	while (n) {
		const char *nlp = memchr(p, '\n', n);
		size_t k = nlp ? (size_t)(nlp - p) : n;
		if (st->slen < LINE_KEEP - 1) {
			size_t room = LINE_KEEP - 1 - st->slen, c = k < room ? k : room;
			memcpy(st->sline + st->slen, p, c);
		}
		if (marker_len)
			marker_scan(st, p, k);
		if (cfg.etcd_watch)
			etcd_scan(st, p, k);
		else if (st->slen < FULL_SCAN)
			full_scan(st, p, k < FULL_SCAN - st->slen ? k : FULL_SCAN - st->slen);
		st->slen += (uint32_t)k;
		st->sse_pos += k;
		p += k;
		n -= k;
		if (!nlp)
			break;
		st->sse_pos++;
		p++;
		n--;
		if (st->slen && st->slen <= LINE_KEEP - 1 && st->sline[st->slen - 1] == '\r')
			st->slen--;
		if (cfg.etcd_watch) {
			etcd_line(st, t);
			if (st->state != ST_BODY)
				return;   /* failed: the rest is not this stream's any more */
		} else {
			sse_line(st, t);
		}
		st->slen = 0;
		st->mk = st->fk = 0;
	}
}

static void body_feed(struct stream *st, const char *p, size_t n, int64_t t)
{
	if (!st->gzip) {
		sse_feed(st, p, n, t);
		return;
	}
	z_stream *z = st->z;
	z->next_in = (unsigned char *)(uintptr_t)p;
	z->avail_in = (uInt)n;
	bool full = false;
	while (z->avail_in || full) {
		z->next_out = zbuf;
		z->avail_out = sizeof(zbuf);
		int rc = inflate(z, Z_NO_FLUSH);
		size_t out = sizeof(zbuf) - z->avail_out;
		full = z->avail_out == 0;
		if (out)
			sse_feed(st, (const char *)zbuf, out, t);
		if (rc == Z_STREAM_END) {
			st->bmode = B_END;
			return;
		}
		if (rc != Z_OK && rc != Z_BUF_ERROR) {
			stream_fail(st, "bad gzip data");
			return;
		}
		if (rc == Z_BUF_ERROR && !out)
			break;
	}
}

static void header_line(struct stream *st)
{
	uint32_t kept = st->hlen < LINE_KEEP - 1 ? st->hlen : LINE_KEEP - 1;
	char *l = st->hline;
	l[kept] = '\0';
	if (kept && l[kept - 1] == '\r')
		l[--kept] = '\0';
	if (!st->status) {
		/* HTTP/1.1 200 OK */
		if (kept < 12 || strncmp(l, "HTTP/1.", 7) != 0) {
			stream_fail(st, "not an HTTP response");
			return;
		}
		st->status = (uint16_t)((l[9] - '0') * 100 + (l[10] - '0') * 10 + (l[11] - '0'));
		return;
	}
	if (kept == 0) {
		if (st->status != 200) {
			char why[64];
			snprintf(why, sizeof(why), "HTTP status %u", st->status);
			stream_fail(st, why);
			return;
		}
		st->state = ST_BODY;
		st->resp_ns = wall_ns();
		st->hdr_bytes = st->pos;
		st->mark_rx = st->pos;
		st->bmode = st->chunked ? B_SIZE : B_RAW;
		if (st->gzip) {
			st->z = xcalloc(1, sizeof(*st->z));
			if (inflateInit2(st->z, 16 + MAX_WBITS) != Z_OK)
				stream_fail(st, "inflateInit2 failed");
		}
		return;
	}
	if (strncasecmp(l, "transfer-encoding:", 18) == 0 && strcasestr(l + 18, "chunked"))
		st->chunked = true;
	else if (strncasecmp(l, "content-encoding:", 17) == 0)
		st->gzip = strcasestr(l + 17, "gzip") != NULL;
}

static bool hline_add(struct stream *st, char c)
{
	if (c == '\n')
		return true;
	if (st->hlen < LINE_KEEP - 1)
		st->hline[st->hlen] = c;
	st->hlen++;
	return false;
}

static int parse_chunk_size(struct stream *st, uint64_t *out)
{
	uint32_t kept = st->hlen < LINE_KEEP - 1 ? st->hlen : LINE_KEEP - 1;
	uint64_t v = 0;
	uint32_t k = 0;
	for (; k < kept; k++) {
		char c = st->hline[k];
		unsigned d;
		if (c >= '0' && c <= '9')
			d = (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			d = (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			d = (unsigned)(c - 'A' + 10);
		else
			break;
		if (v >> 56)
			return -1;
		v = v * 16 + d;
	}
	if (k == 0)
		return -1;
	*out = v;
	return 0;
}

/* Raw bytes from the socket. */
static void stream_feed(struct stream *st, const char *p, size_t n, int64_t t)
{
	size_t off = 0;
	while (off < n && (st->state == ST_HEADERS || st->state == ST_BODY)) {
		if (st->state == ST_HEADERS) {
			char c = p[off++];
			st->pos++;
			if (hline_add(st, c)) {
				header_line(st);
				st->hlen = 0;
			}
			continue;
		}
		switch (st->bmode) {
		case B_RAW: {
			size_t k = n - off;
			st->pos += k;
			body_feed(st, p + off, k, t);
			off = n;
			finalize(st, st->pos);
			break;
		}
		case B_SIZE: {
			char c = p[off++];
			st->pos++;
			if (hline_add(st, c)) {
				uint64_t size;
				if (parse_chunk_size(st, &size) < 0) {
					stream_fail(st, "bad chunk size");
					return;
				}
				st->hlen = 0;
				st->chunk_left = size;
				st->bmode = size ? B_DATA : B_TRAILER;
			}
			break;
		}
		case B_DATA: {
			size_t k = n - off;
			if (k > st->chunk_left)
				k = (size_t)st->chunk_left;
			st->pos += k;
			st->chunk_left -= k;
			body_feed(st, p + off, k, t);
			off += k;
			if (st->bmode == B_END)
				break;
			if (!st->chunk_left)
				st->bmode = B_DATA_CR;
			break;
		}
		case B_DATA_CR:
		case B_DATA_LF: {
			char c = p[off++];
			st->pos++;
			if (c == '\r' && st->bmode == B_DATA_CR) {
				st->bmode = B_DATA_LF;
			} else if (c == '\n') {
				finalize(st, st->pos);
				st->bmode = B_SIZE;
			} else {
				stream_fail(st, "bad chunk end");
				return;
			}
			break;
		}
		case B_TRAILER: {
			char c = p[off++];
			st->pos++;
			if (hline_add(st, c)) {
				bool empty = st->hlen == 0 || (st->hlen == 1 && st->hline[0] == '\r');
				st->hlen = 0;
				if (empty)
					st->bmode = B_END;
			}
			break;
		}
		case B_END:
			off = n;
			break;
		}
		if (st->bmode == B_END) {
			finalize(st, st->pos);
			break;
		}
	}
	if (st->state == ST_BODY && st->bmode == B_END) {
		/* the plane ended the stream */
		stream_fail(st, "the plane ended the stream");
	}
}

/* Keeps the connection's ticket once it came (a TLS 1.3 NewSessionTicket,
 * after the handshake), for the next connection: taken now, as a session
 * that fails (the plane killed) is no longer resumable. */
static void keep_ticket(struct stream *st)
{
	if (cfg.no_resume || st->ticket_kept || !(gnutls_session_get_flags(st->tls) & GNUTLS_SFLAGS_SESSION_TICKET))
		return;
	gnutls_datum_t d = { NULL, 0 };
	if (gnutls_session_get_data2(st->tls, &d) == 0 && d.size) {
		gnutls_free(st->resume.data);
		st->resume = d;
		st->ticket_kept = true;
	} else if (d.data) {
		gnutls_free(d.data);
	}
}

static void on_readable_tls(struct stream *st)
{
	for (;;) {
		ssize_t r = gnutls_record_recv(st->tls, rbuf, sizeof(rbuf));
		keep_ticket(st);
		if (r > 0) {
			stream_feed(st, rbuf, (size_t)r, wall_ns());
			if (st->state != ST_HEADERS && st->state != ST_BODY)
				return;
			continue;
		}
		if (r == 0 || r == GNUTLS_E_PREMATURE_TERMINATION) {
			stream_fail(st, "connection closed by the plane");
			return;
		}
		if (r == GNUTLS_E_AGAIN) {
			/* a post-handshake message may leave a record buffered */
			if (gnutls_record_check_pending(st->tls) > 0)
				continue;
			return;
		}
		if (r == GNUTLS_E_INTERRUPTED || !gnutls_error_is_fatal((int)r))
			continue;
		char why[128];
		snprintf(why, sizeof(why), "TLS: %s", gnutls_strerror((int)r));
		stream_fail(st, why);
		return;
	}
}

static void on_readable(struct stream *st)
{
	if (st->tls) {
		on_readable_tls(st);
		return;
	}
	for (;;) {
		ssize_t r = recv(st->fd, rbuf, sizeof(rbuf), 0);
		if (r > 0) {
			stream_feed(st, rbuf, (size_t)r, wall_ns());
			if (st->state != ST_HEADERS && st->state != ST_BODY)
				return;
			continue;
		}
		if (r == 0) {
			stream_fail(st, "connection closed by the plane");
			return;
		}
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return;
		if (errno == EINTR)
			continue;
		char why[128];
		snprintf(why, sizeof(why), "recv: %s", strerror(errno));
		stream_fail(st, why);
		return;
	}
}

static void on_event(const struct epoll_event *ev)
{
	if (ev->data.u64 & ACK_TAG) {
		ackc_event(&ackcs[ev->data.u64 & ~ACK_TAG], ev->events);
		return;
	}
	size_t i = (size_t)ev->data.u64;
	struct stream *st = &streams[i];
	if (st->state == ST_CONNECTING) {
		int err = 0;
		socklen_t len = sizeof(err);
		getsockopt(st->fd, SOL_SOCKET, SO_ERROR, &err, &len);
		if (err) {
			if (st->tries < MAX_CONNECT_TRIES && !st->got_first) {
				/* refused or reset while the plane's backlog overflowed: retry */
				stream_close(st);
				st->tries++;
				if (stream_connect(st, i) == 0)
					return;
				err = errno;
			}
			char why[128];
			snprintf(why, sizeof(why), "connect: %s", strerror(err));
			stream_fail(st, why);
			return;
		}
		if (!(ev->events & EPOLLOUT))
			return;
		stream_connected(st, i);
		return;
	}
	if (st->state == ST_HANDSHAKE) {
		tls_step(st, i);
		return;
	}
	if (st->state == ST_SENDREQ) {
		ssize_t r = gnutls_record_send(st->tls, NULL, 0);
		if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED)
			return;
		if (r < 0) {
			stream_fail(st, gnutls_strerror((int)r));
			return;
		}
		stream_watch(st, EPOLLIN);
		st->state = ST_HEADERS;
		return;
	}
	if (st->state == ST_HEADERS || st->state == ST_BODY)
		on_readable(st);
}

/* Runs the event loop until done() is true or the deadline (monotonic ms)
 * passes. Returns true when done. */
static bool run_until(bool (*done)(void), int64_t deadline)
{
	struct epoll_event evs[256];
	for (;;) {
		start_connects();
		reconnect_due();
		ack_pump();
		if (done())
			return true;
		int64_t now = mono_ms(), left = deadline - now;
		if (left <= 0)
			return false;
		int wait = left > 100 ? 100 : (int)left;
		if (heap_len && heap_at[0] - now < wait)
			wait = heap_at[0] > now ? (int)(heap_at[0] - now) : 0;
		int n = epoll_wait(ep, evs, 256, wait);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("epoll_wait: %s", strerror(errno));
		}
		for (int k = 0; k < n; k++)
			on_event(&evs[k]);
	}
}

static bool all_first(void)
{
	return next_connect >= cfg.n && n_inflight == 0;
}

static bool all_target(void)
{
	return n_waiting == 0;
}

static bool never(void)
{
	return false;
}

/* --reconnect: every stream that ever opened was lost and is live again */
static bool all_back(void)
{
	return n_first && n_back == n_first;
}

/* ---- start times ------------------------------------------------------------ */

static int start_fd = -1;
static bool start_is_fifo;
static struct buf start_buf = BUF_INIT;

static void start_open(void)
{
	if (!cfg.start_file)
		return;
	struct stat sb;
	if (stat(cfg.start_file, &sb) == 0 && S_ISFIFO(sb.st_mode)) {
		/* read-write: never blocks, never sees end-of-file between writers */
		start_fd = open(cfg.start_file, O_RDWR | O_NONBLOCK | O_CLOEXEC);
		if (start_fd < 0)
			die("cannot open %s: %s", cfg.start_file, strerror(errno));
		start_is_fifo = true;
	}
}

/* Line r (1-based) of the start file, into out. Returns 0 or -1. */
static int start_line(uint64_t r, char *out, size_t cap)
{
	if (start_is_fifo) {
		char tmp[4096];
		ssize_t k;
		while ((k = read(start_fd, tmp, sizeof(tmp))) > 0)
			buf_append(&start_buf, tmp, (size_t)k);
	} else {
		buf_reset(&start_buf);
		FILE *f = fopen(cfg.start_file, "r");
		if (!f)
			return -1;
		char tmp[4096];
		size_t k;
		while ((k = fread(tmp, 1, sizeof(tmp), f)) > 0)
			buf_append(&start_buf, tmp, k);
		fclose(f);
	}
	const char *p = start_buf.data;
	if (!p)
		return -1;
	for (uint64_t line = 1; *p; line++) {
		const char *e = strchr(p, '\n');
		if (!e)
			return -1;   /* not complete yet */
		if (line == r) {
			size_t l = (size_t)(e - p);
			while (l && (p[l - 1] == '\r' || p[l - 1] == ' '))
				l--;
			if (l >= cap)
				return -1;
			memcpy(out, p, l);
			out[l] = '\0';
			return 0;
		}
		p = e + 1;
	}
	return -1;
}

/* The start of round r in wall-clock ns, or -1 when none was given. */
static int64_t round_start(uint64_t r, int64_t deadline)
{
	int64_t t;
	if (cfg.start_arg) {
		if (parse_time_ns(cfg.start_arg, &t) < 0)
			die("--start: '%s' is not a time", cfg.start_arg);
		return t;
	}
	if (!cfg.start_file)
		return -1;
	char line[128];
	while (start_line(r, line, sizeof(line)) < 0) {
		if (mono_ms() >= deadline) {
			warn("round %" PRIu64 ": no start time in %s", r, cfg.start_file);
			return -1;
		}
		/* keep the streams serviced while waiting */
		run_until(never, mono_ms() + 10);
	}
	if (parse_time_ns(line, &t) < 0) {
		warn("round %" PRIu64 ": '%s' in %s is not a time", r, line, cfg.start_file);
		return -1;
	}
	return t;
}

/* ---- reports ------------------------------------------------------------------ */

/* The client's own CPU so far (it shares the machine with the plane). */
static void print_cpu(const char *prefix)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) < 0)
		return;
	printf("%s.cpu_user_ms=%.0f\n", prefix,
	       (double)ru.ru_utime.tv_sec * 1e3 + (double)ru.ru_utime.tv_usec / 1e3);
	printf("%s.cpu_sys_ms=%.0f\n", prefix,
	       (double)ru.ru_stime.tv_sec * 1e3 + (double)ru.ru_stime.tv_usec / 1e3);
}

static void print_epoch(const char *key, int64_t ns)
{
	printf("%s=%" PRId64 ".%06" PRId64 "\n", key, ns / 1000000000, ns % 1000000000 / 1000);
}

static void report_connect(int64_t began_ns, bool complete)
{
	int64_t *hdr = xcalloc(cfg.n + 1, sizeof(int64_t)), *wire = xcalloc(cfg.n + 1, sizeof(int64_t));
	int64_t *withh = xcalloc(cfg.n + 1, sizeof(int64_t)), *sse = xcalloc(cfg.n + 1, sizeof(int64_t));
	int64_t *lat = xcalloc(cfg.n + 1, sizeof(int64_t));
	size_t k = 0, pushes = 0, beats = 0, created = 0;
	uint64_t idmin = UINT64_MAX, idmax = 0, wire_sum = 0, withh_sum = 0;
	int64_t last = began_ns;
	for (size_t i = 0; i < cfg.n; i++) {
		struct stream *st = &streams[i];
		if (!st->got_first)
			continue;
		hdr[k] = (int64_t)st->hdr_bytes;
		wire[k] = (int64_t)st->first_wire;
		withh[k] = (int64_t)(st->first_wire + st->hdr_bytes);
		sse[k] = (int64_t)st->first_sse;
		lat[k] = st->first_ns - began_ns;
		wire_sum += st->first_wire;
		withh_sum += st->first_wire + st->hdr_bytes;
		if (st->first_ns > last)
			last = st->first_ns;
		if (st->first_type == 'p') {
			pushes++;
			if (st->first_id < idmin)
				idmin = st->first_id;
			if (st->first_id > idmax)
				idmax = st->first_id;
		} else if (st->first_type == 'h') {
			beats++;
		} else if (st->first_type == 'c') {
			created++;
		}
		k++;
	}
	printf("connect.streams=%" PRIu64 "\n", cfg.n);
	printf("connect.ok=%zu\n", k);
	printf("connect.failed=%" PRIu64 "\n", n_failed);
	printf("connect.complete=%d\n", complete ? 1 : 0);
	printf("connect.gzip=%d\n", cfg.gzip ? 1 : 0);
	printf("connect.etcd_watch=%d\n", cfg.etcd_watch ? 1 : 0);
	printf("connect.version=%" PRIu64 "\n", cfg.version);
	printf("connect.ms=%.1f\n", (double)(last - began_ns) / 1e6);
	printf("first.push=%zu\n", pushes);
	printf("first.heartbeat=%zu\n", beats);
	if (cfg.etcd_watch)
		printf("first.created=%zu\n", created);
	if (pushes) {
		printf("first.id_min=%" PRIu64 "\n", idmin);
		printf("first.id_max=%" PRIu64 "\n", idmax);
	}
	printf("first.wire_bytes.total=%" PRIu64 "\n", wire_sum);
	printf("first.wire_bytes_with_headers.total=%" PRIu64 "\n", withh_sum);
	print_stats("headers.bytes", hdr, k, 1, 0);
	print_stats("first.wire_bytes", wire, k, 1, 1);
	print_stats("first.wire_bytes_with_headers", withh, k, 1, 1);
	print_stats("first.sse_bytes", sse, k, 1, 1);
	print_stats("first.ms", lat, k, 1e6, 1);
	printf("connect.tls=%d\n", cfg.tls ? 1 : 0);
	print_cpu("connect");
	free(hdr);
	free(wire);
	free(withh);
	free(sse);
	free(lat);
}

/* The ACK counters so far, as PREFIX.acks.* (round.R.acks.* or acks.*). */
static void print_acks(char *prefix, size_t cap, uint64_t r)
{
	if (r)
		snprintf(prefix, cap, "round.%" PRIu64 ".acks", r);
	else
		snprintf(prefix, cap, "acks");
	printf("%s.pushes=%" PRIu64 "\n", prefix, pushes_total);
	printf("%s.sent=%" PRIu64 "\n", prefix, ack_sent);
	printf("%s.nacks_sent=%" PRIu64 "\n", prefix, nack_sent);
	printf("%s.accepted=%" PRIu64 "\n", prefix, ack_accepted);
	printf("%s.stale=%" PRIu64 "\n", prefix, ack_stale);
	printf("%s.errors=%" PRIu64 "\n", prefix, ack_errors);
	printf("%s.retries=%" PRIu64 "\n", prefix, ack_retries);
	printf("%s.queued=%zu\n", prefix, aq_len);
}

static void report_round(uint64_t r, int64_t start_ns, int64_t began_ns, bool complete)
{
	int64_t base = start_ns >= 0 ? start_ns : began_ns;
	int64_t *lat = xcalloc(cfg.n + 1, sizeof(int64_t)), *wire = xcalloc(cfg.n + 1, sizeof(int64_t));
	int64_t *sse = xcalloc(cfg.n + 1, sizeof(int64_t)), *ack = xcalloc(cfg.n + 1, sizeof(int64_t));
	size_t k = 0;
	uint64_t wire_sum = 0, id_min = UINT64_MAX, id_max = 0;
	int64_t last_push = 0, last_ack = 0;
	for (size_t i = 0; i < cfg.n; i++) {
		struct stream *st = &streams[i];
		if (!st->got_target)
			continue;
		lat[k] = st->arr_ns - base;
		wire[k] = (int64_t)st->arr_wire;
		sse[k] = (int64_t)st->arr_sse;
		ack[k] = st->arr_ack_ns - base;
		wire_sum += st->arr_wire;
		if (st->arr_id < id_min)
			id_min = st->arr_id;
		if (st->arr_id > id_max)
			id_max = st->arr_id;
		if (st->arr_ns > last_push)
			last_push = st->arr_ns;
		if (st->arr_ack_ns > last_ack)
			last_ack = st->arr_ack_ns;
		if (cfg.per_stream && cfg.ack)
			printf("stream=%zu node=%s%zu round=%" PRIu64 " id=%" PRIu64 " latency_ms=%.3f wire_bytes=%" PRIu64
			       " sse_bytes=%" PRIu64 " ack_ms=%.3f pushes=%u acks=%u nacks=%u\n",
			       i, cfg.prefix, i, r, st->arr_id, (double)lat[k] / 1e6, st->arr_wire, st->arr_sse,
			       (double)ack[k] / 1e6, st->pushes, st->acks, st->nacks);
		else if (cfg.per_stream)
			printf("stream=%zu node=%s%zu round=%" PRIu64 " id=%" PRIu64 " latency_ms=%.3f wire_bytes=%" PRIu64
			       " sse_bytes=%" PRIu64 "\n",
			       i, cfg.prefix, i, r, st->arr_id, (double)lat[k] / 1e6, st->arr_wire, st->arr_sse);
		k++;
	}
	printf("round.%" PRIu64 ".target=%" PRIu64 "\n", r, target);
	printf("round.%" PRIu64 ".start=%s\n", r, start_ns >= 0 ? "given" : "client");
	printf("round.%" PRIu64 ".live=%" PRIu64 "\n", r, n_live);
	printf("round.%" PRIu64 ".received=%zu\n", r, k);
	printf("round.%" PRIu64 ".missing=%" PRIu64 "\n", r, cfg.n - k);
	printf("round.%" PRIu64 ".failed=%" PRIu64 "\n", r, n_failed);
	printf("round.%" PRIu64 ".complete=%d\n", r, complete ? 1 : 0);
	printf("round.%" PRIu64 ".wire_bytes.total=%" PRIu64 "\n", r, wire_sum);
	char prefix[64];
	qsort(lat, k, sizeof(*lat), cmp_i64);
	printf("round.%" PRIu64 ".p50_ms=%.3f\n", r, (double)pct(lat, k, 50) / 1e6);
	printf("round.%" PRIu64 ".p99_ms=%.3f\n", r, (double)pct(lat, k, 99) / 1e6);
	printf("round.%" PRIu64 ".max_ms=%.3f\n", r, k ? (double)lat[k - 1] / 1e6 : 0.0);
	printf("round.%" PRIu64 ".min_ms=%.3f\n", r, k ? (double)lat[0] / 1e6 : 0.0);
	snprintf(prefix, sizeof(prefix), "round.%" PRIu64 ".wire_bytes", r);
	print_stats(prefix, wire, k, 1, 1);
	snprintf(prefix, sizeof(prefix), "round.%" PRIu64 ".sse_bytes", r);
	print_stats(prefix, sse, k, 1, 1);
	snprintf(prefix, sizeof(prefix), "round.%" PRIu64, r);
	print_cpu(prefix);
	if (cfg.ack) {
		/* latency_ms is the arrival of the push the stream ACKed; ack_*
		 * when the plane answered that ACK */
		qsort(ack, k, sizeof(*ack), cmp_i64);
		printf("round.%" PRIu64 ".ack_p50_ms=%.3f\n", r, (double)pct(ack, k, 50) / 1e6);
		printf("round.%" PRIu64 ".ack_p99_ms=%.3f\n", r, (double)pct(ack, k, 99) / 1e6);
		printf("round.%" PRIu64 ".ack_max_ms=%.3f\n", r, k ? (double)ack[k - 1] / 1e6 : 0.0);
		if (k) {
			printf("round.%" PRIu64 ".acked_id_min=%" PRIu64 "\n", r, id_min);
			printf("round.%" PRIu64 ".acked_id_max=%" PRIu64 "\n", r, id_max);
			printf("round.%" PRIu64 ".last_push_at=%" PRId64 ".%06" PRId64 "\n", r, last_push / 1000000000,
			       last_push % 1000000000 / 1000);
			printf("round.%" PRIu64 ".last_ack_at=%" PRId64 ".%06" PRId64 "\n", r, last_ack / 1000000000,
			       last_ack % 1000000000 / 1000);
		}
		print_acks(prefix, sizeof(prefix), r);
	}
	printf("round.%" PRIu64 ".done=1\n", r);
	free(lat);
	free(wire);
	free(sse);
	free(ack);
}

/* --reconnect: the last phase. Times are epoch seconds; back_ms are from
 * the first loss. */
static void report_reconnect(bool complete)
{
	int64_t *back = xcalloc(cfg.n + 1, sizeof(int64_t));
	size_t k = 0, lost = 0;
	uint64_t attempts_max = 0;
	for (size_t i = 0; i < cfg.n; i++) {
		struct stream *st = &streams[i];
		if (st->lost_ns)
			lost++;
		if (st->attempts > attempts_max)
			attempts_max = st->attempts;
		if (st->back)
			back[k++] = st->back_ns - lost_first_ns;
		if (cfg.per_stream)
			printf("rstream=%zu node=%s%zu est=%u attempts=%u lost_at=%.6f connected_at=%.6f tls_at=%.6f "
			       "response_at=%.6f back_at=%.6f live=%d\n",
			       i, cfg.prefix, i, st->est, st->attempts, (double)st->lost_ns / 1e9,
			       (double)st->conn_ns / 1e9, (double)st->hs_ns / 1e9, (double)st->resp_ns / 1e9,
			       (double)st->back_ns / 1e9, st->live ? 1 : 0);
	}
	printf("reconnect.streams=%" PRIu64 "\n", n_first);
	printf("reconnect.lost_streams=%zu\n", lost);
	printf("reconnect.back=%" PRIu64 "\n", n_back);
	printf("reconnect.complete=%d\n", complete ? 1 : 0);
	printf("reconnect.losses=%" PRIu64 "\n", n_lost);
	printf("reconnect.reestablished=%" PRIu64 "\n", n_reest);
	printf("reconnect.attempts=%" PRIu64 "\n", n_attempts);
	printf("reconnect.attempts_max=%" PRIu64 "\n", attempts_max);
	printf("reconnect.failed_connect=%" PRIu64 "\n", f_connect);
	printf("reconnect.failed_tls=%" PRIu64 "\n", f_tls);
	printf("reconnect.failed_http=%" PRIu64 "\n", f_http);
	printf("reconnect.failed_closed=%" PRIu64 "\n", f_closed);
	printf("reconnect.tls_sessions=%" PRIu64 "\n", n_tls_streams);
	printf("reconnect.tls_offered=%" PRIu64 "\n", n_tls_offered);
	printf("reconnect.tls_resumed=%" PRIu64 "\n", n_tls_resumed);
	printf("reconnect.first_heartbeat=%" PRIu64 "\n", back_beat);
	printf("reconnect.first_delta=%" PRIu64 "\n", back_delta);
	printf("reconnect.first_snapshot=%" PRIu64 "\n", back_snap);
	printf("reconnect.first_other=%" PRIu64 "\n", back_other);
	printf("reconnect.snapshots=%" PRIu64 "\n", snaps_after_loss);
	print_epoch("reconnect.lost_first_at", lost_first_ns);
	print_epoch("reconnect.lost_last_at", lost_last_ns);
	print_epoch("reconnect.back_last_at", back_last_ns);
	if (complete)
		printf("reconnect.all_back_ms=%.1f\n", (double)(back_last_ns - lost_first_ns) / 1e6);
	qsort(back, k, sizeof(*back), cmp_i64);
	printf("reconnect.back_ms.p50=%.1f\n", (double)pct(back, k, 50) / 1e6);
	printf("reconnect.back_ms.p99=%.1f\n", (double)pct(back, k, 99) / 1e6);
	printf("reconnect.back_ms.max=%.1f\n", k ? (double)back[k - 1] / 1e6 : 0.0);
	print_cpu("reconnect");
	printf("reconnect.done=1\n");
	free(back);
}

/* ---- main ---------------------------------------------------------------------- */

static void usage(void)
{
	fputs("usage: sse_load [options] HOST:PORT\n"
	      "  -n N               streams to open (default 100)\n"
	      "  --version V        the version each stream claims to hold (default 0)\n"
	      "  --gzip             ask for Content-Encoding: gzip\n"
	      "  --prefix P         node ids are P0, P1, ... (default load-)\n"
	      "  --sources K        spread source addresses over 127.0.0.2..K+1 (default 16 for 127.x, 0 = off)\n"
	      "  --concurrency C    streams connecting at once (default 256)\n"
	      "  --timeout S        seconds each phase may take (default 120)\n"
	      "  --wait-push V      then wait for a push with id >= V on every stream\n"
	      "  --rounds R         R rounds, round r waiting for id >= V + r - 1 (default 1)\n"
	      "  --start T          start time of the rounds: SECONDS.FRACTION or ns since the epoch\n"
	      "  --start-file PATH  line r holds round r's start time (regular file or FIFO)\n"
	      "  --per-stream       print one line per stream and round\n"
	      "  --linger S         keep the streams open S seconds after the last round\n"
	      "  --zones K          stream i connects with labels=zone=z(i mod K)\n"
	      "  --ack              ACK every push (POST /v1/ack); rounds wait for accepted ACKs\n"
	      "  --nack-marker STR  with --ack: NACK a push whose data contains STR\n"
	      "  --ack-conns C      keep-alive connections carrying the ACKs (default 16)\n"
	      "  --tls              HTTPS (one TLS session per stream)\n"
	      "  --ca-file FILE     implies --tls: the CAs that sign the plane's certificate (default: the system's)\n"
	      "  --tls-name NAME    the name the plane's certificate must carry (default HOST)\n"
	      "  --tls-priority P   GnuTLS priority string (default " TLS_PRIORITY_DEFAULT ")\n"
	      "  --cert FILE --key FILE  a client certificate for every stream\n"
	      "  --no-resume        a reconnecting stream does not offer its last TLS session (its ticket)\n"
	      "  --reconnect        a stream that ends or fails reconnects; a last phase waits until all are back\n"
	      "  --failover H:P     implies --reconnect: a lost stream comes back on this other plane\n"
	      "  --reconnect-jitter MS  wait before each reconnect attempt: uniform in 0..MS (default 1000)\n"
	      "  --etcd-watch PREFIX  each connection is an etcd v3 JSON-gateway watch of the keys under PREFIX\n"
	      "                     (POST /v3/watch); ids are revisions, --version the revision held\n",
	      stderr);
	exit(2);
}

static uint64_t num_arg(const char *opt, const char *v, uint64_t min, uint64_t max)
{
	uint64_t x;
	if (!v || parse_uint_range(v, min, max, &x) < 0)
		die("%s: expected a number in %" PRIu64 "..%" PRIu64, opt, min, max);
	return x;
}

static void parse_args(int argc, char **argv)
{
	const char *target_arg = NULL;
	bool sources_set = false;
	cfg.n = 100;
	cfg.prefix = "load-";
	cfg.concurrency = 256;
	cfg.timeout_s = 120;
	cfg.rounds = 1;
	cfg.ack_conns = 16;
	cfg.reconnect_jitter_ms = 1000;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "-n") == 0) {
			cfg.n = num_arg(a, v, 1, 1000000);
			i++;
		} else if (strcmp(a, "--version") == 0) {
			cfg.version = num_arg(a, v, 0, UINT64_MAX);
			i++;
		} else if (strcmp(a, "--gzip") == 0) {
			cfg.gzip = true;
		} else if (strcmp(a, "--prefix") == 0) {
			if (!v || strlen(v) > 100)
				die("--prefix: expected a short node id prefix");
			cfg.prefix = v;
			i++;
		} else if (strcmp(a, "--sources") == 0) {
			cfg.sources = num_arg(a, v, 0, 250);
			sources_set = true;
			i++;
		} else if (strcmp(a, "--concurrency") == 0) {
			cfg.concurrency = num_arg(a, v, 1, 1000000);
			i++;
		} else if (strcmp(a, "--timeout") == 0) {
			cfg.timeout_s = num_arg(a, v, 1, 86400);
			i++;
		} else if (strcmp(a, "--wait-push") == 0) {
			cfg.wait_push = num_arg(a, v, 1, UINT64_MAX / 2);
			i++;
		} else if (strcmp(a, "--rounds") == 0) {
			cfg.rounds = num_arg(a, v, 1, 1000000);
			i++;
		} else if (strcmp(a, "--start") == 0) {
			if (!v)
				usage();
			cfg.start_arg = v;
			i++;
		} else if (strcmp(a, "--start-file") == 0) {
			if (!v)
				usage();
			cfg.start_file = v;
			i++;
		} else if (strcmp(a, "--per-stream") == 0) {
			cfg.per_stream = true;
		} else if (strcmp(a, "--linger") == 0) {
			cfg.linger_s = num_arg(a, v, 0, 86400);
			i++;
		} else if (strcmp(a, "--zones") == 0) {
			cfg.zones = num_arg(a, v, 1, 1000000);
			i++;
		} else if (strcmp(a, "--ack") == 0) {
			cfg.ack = true;
		} else if (strcmp(a, "--nack-marker") == 0) {
			if (!v || !*v || strlen(v) > 64)
				die("--nack-marker: expected 1..64 bytes");
			cfg.nack_marker = v;
			i++;
		} else if (strcmp(a, "--ack-conns") == 0) {
			cfg.ack_conns = num_arg(a, v, 1, 1024);
			i++;
		} else if (strcmp(a, "--tls") == 0) {
			cfg.tls = true;
		} else if (strcmp(a, "--no-resume") == 0) {
			cfg.no_resume = true;
		} else if (strcmp(a, "--ca-file") == 0 || strcmp(a, "--cert") == 0 || strcmp(a, "--key") == 0 ||
			   strcmp(a, "--tls-name") == 0 || strcmp(a, "--tls-priority") == 0) {
			if (!v)
				usage();
			if (strcmp(a, "--ca-file") == 0)
				cfg.ca_file = v;
			else if (strcmp(a, "--cert") == 0)
				cfg.cert_file = v;
			else if (strcmp(a, "--key") == 0)
				cfg.key_file = v;
			else if (strcmp(a, "--tls-name") == 0)
				cfg.tls_name = v;
			else
				cfg.tls_priority = v;
			cfg.tls = true;
			i++;
		} else if (strcmp(a, "--reconnect") == 0) {
			cfg.reconnect = true;
		} else if (strcmp(a, "--failover") == 0) {
			const char *c2 = strrchr(v, ':');
			if (!c2)
				die("--failover: '%s' is not HOST:PORT", v);
			char h2[64];
			if ((size_t)(c2 - v) >= sizeof(h2))
				die("--failover: '%s' is not HOST:PORT", v);
			memcpy(h2, v, (size_t)(c2 - v));
			h2[c2 - v] = '\0';
			cfg.alt.sin_family = AF_INET;
			cfg.alt.sin_port = htons((uint16_t)num_arg(a, c2 + 1, 1, 65535));
			if (inet_pton(AF_INET, h2, &cfg.alt.sin_addr) != 1)
				die("--failover: '%s' is not an IPv4 address", h2);
			cfg.failover = true;
			cfg.reconnect = true;
			i++;
		} else if (strcmp(a, "--etcd-watch") == 0) {
			if (!v || !*v || strlen(v) > ETCD_PREFIX_MAX)
				die("--etcd-watch: expected a key prefix of 1..%d bytes", ETCD_PREFIX_MAX);
			cfg.etcd_watch = v;
			i++;
		} else if (strcmp(a, "--reconnect-jitter") == 0) {
			cfg.reconnect_jitter_ms = num_arg(a, v, 0, 3600000);
			i++;
		} else if (a[0] == '-') {
			usage();
		} else if (!target_arg) {
			target_arg = a;
		} else {
			usage();
		}
	}
	if (!target_arg)
		usage();
	const char *colon = strrchr(target_arg, ':');
	if (!colon || (size_t)(colon - target_arg) >= sizeof(cfg.host))
		die("'%s' is not HOST:PORT", target_arg);
	memcpy(cfg.host, target_arg, (size_t)(colon - target_arg));
	cfg.host[colon - target_arg] = '\0';
	cfg.port = (unsigned)num_arg("port", colon + 1, 1, 65535);
	cfg.dst.sin_family = AF_INET;
	cfg.dst.sin_port = htons((uint16_t)cfg.port);
	if (inet_pton(AF_INET, cfg.host, &cfg.dst.sin_addr) != 1)
		die("'%s' is not an IPv4 address", cfg.host);
	bool loopback = (ntohl(cfg.dst.sin_addr.s_addr) >> 24) == 127;
	if (!sources_set)
		cfg.sources = loopback ? 16 : 0;
	if (cfg.sources && !loopback)
		die("--sources needs a 127.x.x.x destination");
	if (cfg.start_arg && cfg.start_file)
		die("give --start or --start-file, not both");
	if (cfg.nack_marker && !cfg.ack)
		die("--nack-marker needs --ack");
	if (!cfg.cert_file != !cfg.key_file)
		die("--cert and --key go together");
	if (cfg.etcd_watch && (cfg.gzip || cfg.ack || cfg.zones))
		die("--etcd-watch: --gzip, --ack and --zones do not apply");
}

/* Standard base64 with padding of n bytes into out (room for
 * 4 * ceil(n / 3) + 1). */
static void base64(const unsigned char *in, size_t n, char *out)
{
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t o = 0;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16;
		if (i + 1 < n)
			v |= (uint32_t)in[i + 1] << 8;
		if (i + 2 < n)
			v |= in[i + 2];
		out[o++] = tab[(v >> 18) & 63];
		out[o++] = tab[(v >> 12) & 63];
		out[o++] = i + 1 < n ? tab[(v >> 6) & 63] : '=';
		out[o++] = i + 2 < n ? tab[v & 63] : '=';
	}
	out[o] = '\0';
}

/* --etcd-watch: the key and range_end of "every key under PREFIX" (etcd's
 * prefix rule: the last byte that is not 0xff, plus one, ends the range;
 * "\0" when there is none), and the patterns' failure functions */
static void etcd_init(void)
{
	unsigned char end[ETCD_PREFIX_MAX];
	size_t n = strlen(cfg.etcd_watch), m = n;
	memcpy(end, cfg.etcd_watch, n);
	while (m && end[m - 1] == 0xff)
		m--;
	if (m) {
		end[m - 1]++;
	} else {
		end[0] = 0;
		m = 1;
	}
	base64((const unsigned char *)cfg.etcd_watch, n, etcd_key64);
	base64(end, m, etcd_end64);
	for (unsigned j = 0; j < EP_N; j++) {
		const char *s = epat[j].s;
		size_t len = strlen(s);
		epat[j].len = (uint8_t)len;
		epat[j].fail[0] = 0;
		for (size_t i = 1, k = 0; i < len; i++) {
			while (k && s[i] != s[k])
				k = epat[j].fail[k - 1];
			if (s[i] == s[k])
				k++;
			epat[j].fail[i] = (uint8_t)k;
		}
	}
}

static void raise_nofile(void)
{
	struct rlimit rl;
	rlim_t want = (rlim_t)cfg.n + (cfg.ack ? (rlim_t)cfg.ack_conns : 0) + 64;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	if (rl.rlim_cur >= want)
		return;
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want) {
		struct rlimit r2 = { want, want };
		if (setrlimit(RLIMIT_NOFILE, &r2) == 0)
			return;
		rl.rlim_cur = rl.rlim_max;
	} else {
		rl.rlim_cur = want;
	}
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur < want)
		warn("open files limited to %llu; %" PRIu64 " streams need %llu", (unsigned long long)rl.rlim_cur,
		     cfg.n, (unsigned long long)want);
}

int main(int argc, char **argv)
{
	parse_args(argc, argv);
	raise_nofile();
	start_open();
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		die("epoll_create1: %s", strerror(errno));
	if (cfg.tls)
		tls_global_init();
	if (cfg.etcd_watch)
		etcd_init();
	streams = xcalloc(cfg.n, sizeof(*streams));
	for (size_t i = 0; i < cfg.n; i++) {
		streams[i].fd = -1;
		streams[i].held = cfg.version;
	}
	if (cfg.reconnect) {
		heap_at = xcalloc(cfg.n, sizeof(*heap_at));
		heap_idx = xcalloc(cfg.n, sizeof(*heap_idx));
		rng_state ^= (uint64_t)wall_ns() ^ ((uint64_t)getpid() << 32);
	}
	if (cfg.ack) {
		ackcs = xcalloc(cfg.ack_conns, sizeof(*ackcs));
		for (size_t k = 0; k < cfg.ack_conns; k++)
			ackcs[k].fd = -1;
	}
	if (cfg.nack_marker) {
		const unsigned char *m = (const unsigned char *)cfg.nack_marker;
		marker_len = strlen(cfg.nack_marker);
		marker_fail[0] = 0;
		for (size_t i = 1, k = 0; i < marker_len; i++) {
			while (k && m[i] != m[k])
				k = marker_fail[k - 1];
			if (m[i] == m[k])
				k++;
			marker_fail[i] = (uint8_t)k;
		}
	}

	int64_t began = wall_ns();
	bool ok = run_until(all_first, mono_ms() + (int64_t)cfg.timeout_s * 1000);
	report_connect(began, ok);
	printf("ready=1\n");
	fflush(stdout);
	int rc = ok && n_failed == 0 ? 0 : 1;

	for (uint64_t r = 1; cfg.wait_push && r <= cfg.rounds; r++) {
		int64_t deadline = mono_ms() + (int64_t)cfg.timeout_s * 1000;
		target = cfg.wait_push + r - 1;
		n_target = 0;
		for (size_t i = 0; i < cfg.n; i++) {
			struct stream *st = &streams[i];
			st->got_target = false;
			if (cfg.ack) {
				/* an ACK accepted before the round counts with its own times */
				if (st->acked_id >= target) {
					st->got_target = true;
					st->arr_id = st->acked_id;
					st->arr_ns = st->acked_push_ns;
					st->arr_ack_ns = st->acked_ns;
					n_target++;
				}
				continue;
			}
			/* a push that came before the round counts with its own time */
			if (st->have_push && st->last_id >= target) {
				st->got_target = true;
				st->arr_id = st->last_id;
				st->arr_wire = st->last_wire;
				st->arr_sse = st->last_sse;
				st->arr_ns = st->last_ns;
				n_target++;
			}
		}
		n_waiting = 0;
		for (size_t i = 0; i < cfg.n; i++)
			if (streams[i].state == ST_BODY && streams[i].live && !streams[i].got_target)
				n_waiting++;
		int64_t round_began = wall_ns();
		bool done = run_until(all_target, deadline);
		int64_t start = round_start(r, deadline);
		report_round(r, start, round_began, done);
		fflush(stdout);
		if (!done)
			rc = 1;
	}
	if (cfg.reconnect) {
		/* the streams are lost (the plane restarts) and come back */
		printf("reconnect.waiting=1\n");
		fflush(stdout);
		bool back = run_until(all_back, mono_ms() + (int64_t)cfg.timeout_s * 1000);
		report_reconnect(back);
		fflush(stdout);
		if (!back)
			rc = 1;
	}
	if (cfg.linger_s) {
		printf("lingering=1\n");
		fflush(stdout);
		run_until(never, mono_ms() + (int64_t)cfg.linger_s * 1000);
	}
	if (cfg.ack) {
		char prefix[64];
		print_acks(prefix, sizeof(prefix), 0);
		if (ack_errors)
			rc = 1;
	}
	printf("finished=1\n");
	fflush(stdout);
	for (size_t i = 0; i < cfg.n; i++)
		stream_close(&streams[i]);
	free(streams);
	free(heap_at);
	free(heap_idx);
	if (tls_cred)
		gnutls_certificate_free_credentials(tls_cred);
	if (tls_prio)
		gnutls_priority_deinit(tls_prio);
	for (size_t k = 0; cfg.ack && k < cfg.ack_conns; k++)
		ackc_close(&ackcs[k]);
	free(ackcs);
	free(aq);
	buf_release(&start_buf);
	close(ep);
	if (start_fd >= 0)
		close(start_fd);
	return rc;
}
