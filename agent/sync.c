/* sync.c: the agent's line to the plane: one Server-Sent Events stream (or
 * an ETag long-poll) on libcurl's multi handle. Pushes go to apply.c's
 * queue; heartbeats only tell (the plane's version, the interval that sets
 * the dead-stream timeout) and never move the resume point, which is the
 * applied version. Reconnects back off with full jitter. With several
 * planes (--plane A,B,...) a failed attempt moves to the next one, which
 * is dialled from the same applied version: a move is a reconnect, never
 * a reason for a snapshot. What the plane says of its staleness (a
 * heartbeat's or push's "stale", a poll answer's Tether-Stale) goes to
 * fresh.c, which may move the agent off it (sync_move_to). */
#include "agent_int.h"
#include "credentials.h"
#include "json.h"
#include "log.h"
#include "statement.h"
#include "util.h"
#include "xmalloc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#define DEFAULT_HEARTBEAT_S 10.0
#define MIN_EVENT_RATE 16384     /* bytes a second an event must at least arrive at */

/* Full jitter: uniform in [0, min(cap, base * 2^attempt)]. */
static int64_t backoff_ms(struct agent *a)
{
	double base = a->cfg.backoff_min;
	if (a->sse.retry_ms >= 0) {
		/* the server's retry, clamped to our bounds */
		double r = (double)a->sse.retry_ms / 1000.0;
		base = r < a->cfg.backoff_min ? a->cfg.backoff_min : r > a->cfg.backoff_max ? a->cfg.backoff_max : r;
	}
	double cap = base * pow(2.0, a->attempt > 30 ? 30 : a->attempt);
	if (cap > a->cfg.backoff_max)
		cap = a->cfg.backoff_max;
	return (int64_t)(agent_rand01() * cap * 1000.0);
}

void sync_schedule(struct agent *a, bool failed)
{
	if (failed) {
		a->attempt++;
		a->next_sync_ms = now_ms() + backoff_ms(a);
	} else {
		a->next_sync_ms = now_ms();
	}
}

const char *sync_plane(const struct agent *a)
{
	return a->cfg.planes[a->plane_idx < a->cfg.nplanes ? a->plane_idx : 0];
}

/* Moves to the next plane of the list (after the last, the first); the
 * ACKs waiting follow. Nothing with a single plane. */
static void move_on(struct agent *a, const char *why)
{
	if (a->cfg.nplanes < 2)
		return;
	const char *from = sync_plane(a);
	a->plane_idx = (a->plane_idx + 1) % a->cfg.nplanes;
	keyreg_lost(a);
	a->m.plane_moves++;
	fresh_plane_changed(a);
	/* the first move of an outage is news; later rounds over planes
	 * that are all down are not */
	if (a->plane_failures <= 1)
		log_warn("plane: moving from %s to %s after %s", from, sync_plane(a), why);
	else
		log_info("plane: moving from %s to %s after %s", from, sync_plane(a), why);
	ack_plane_moved(a);
	agent_write_status(a);
}

/* The plane dialled now answered: the outage, if any, is over. */
static void answered(struct agent *a)
{
	a->attempt = 0;
	a->plane_failures = 0;
	ack_plane_answered(a);
	keyreg_answered(a);
}

/* An attempt that did not work (a connection that failed, an error
 * answer, a stream that gave nothing): the next plane is tried -- at once
 * while this round of the list has planes not tried yet, after the backoff
 * once every plane failed in a row. So a dead replica costs one attempt,
 * not a backoff cycle, and a fleet whose planes are all down still backs
 * off. A single plane backs off after every failure, as always. */
static void attempt_failed(struct agent *a, const char *why)
{
	sync_went_offline(a, why);
	a->plane_failures++;
	move_on(a, why);
	size_t n = a->cfg.nplanes;
	sync_schedule(a, n < 2 || a->plane_failures % n == 0);
}

/* A stream that worked (it brought events) and then ended or died: the
 * plane that served us until now failed; the next one is dialled. */
static void stream_lost(struct agent *a, const char *why)
{
	a->plane_failures = 1;
	move_on(a, why);
}

void sync_dead(struct agent *a, const char *why)
{
	bool worked = a->got_event;
	sync_stop(a);
	apply_drop_queue(a);
	if (worked) {
		/* it served until it went silent: reconnect at once */
		stream_lost(a, why);
		sync_schedule(a, false);
	} else {
		attempt_failed(a, why);
	}
}

void sync_carry_plane(struct agent *a, const struct agent_config *nc)
{
	const char *now = sync_plane(a);
	for (size_t i = 0; i < nc->nplanes; i++) {
		if (strcmp(nc->planes[i], now) == 0) {
			a->plane_idx = i;
			return;
		}
	}
	log_info("SIGHUP: %s is no longer listed: moving to %s", now, nc->planes[0]);
	a->plane_idx = 0;
	a->plane_failures = 0;
	fresh_plane_changed(a);
	ack_plane_moved(a);
}

void sync_move_to(struct agent *a, size_t idx, const char *why)
{
	if (idx >= a->cfg.nplanes || idx == a->plane_idx)
		return;
	log_warn("plane: moving from %s to %s: %s", sync_plane(a), a->cfg.planes[idx], why);
	sync_stop(a);
	/* what waits is dropped as after a dead stream: the new plane sends
	 * the gap from the applied version again */
	apply_drop_queue(a);
	a->plane_idx = idx;
	keyreg_lost(a);
	a->m.plane_moves++;
	a->plane_failures = 0;
	a->attempt = 0;
	fresh_plane_changed(a);
	ack_plane_moved(a);
	sync_schedule(a, false);
	agent_write_status(a);
}

double sync_stream_timeout_s(const struct agent *a)
{
	if (a->cfg.stream_timeout > 0)
		return a->cfg.stream_timeout;
	return 3 * (a->heartbeat_s > 0 ? a->heartbeat_s : DEFAULT_HEARTBEAT_S);
}

int64_t sync_stream_deadline(const struct agent *a)
{
	int64_t timeout = (int64_t)(sync_stream_timeout_s(a) * 1000);
	int64_t silent = a->last_byte_ms + timeout;
	if (!a->event_bytes)
		return silent;   /* nothing of an event pending: only silence counts */
	/* a big push over a slow link gets the time its bytes need at the
	 * minimum rate; a line that never ends does not */
	int64_t stalled = a->last_event_ms + timeout + (int64_t)(a->event_bytes * 1000 / MIN_EVENT_RATE);
	return silent < stalled ? silent : stalled;
}

void agent_flush_sessions(struct agent *a, const char *why)
{
	if (!a->share)
		return;
	if (a->share_old) {
		if (curl_share_cleanup(a->share_old) != CURLSHE_OK)
			return;   /* a handle still holds the one flushed before */
		a->share_old = NULL;
	}
	CURLSH *s = curl_share_init();
	if (!s || curl_share_setopt(s, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION) != CURLSHE_OK) {
		if (s)
			curl_share_cleanup(s);
		return;
	}
	/* each transfer sets its share anew (agent_credentials): the old
	 * cache is left by every handle at its next transfer */
	a->share_old = a->share;
	a->share = s;
	log_info("TLS: the shared session cache is emptied (%s): the next connection is a full handshake", why);
}

/* --cert's and --key's mtimes and sizes together (0: none, or unreadable). */
static uint64_t cred_stamp(const struct agent *a)
{
	uint64_t h = 0;
	const char *files[2] = { a->cfg.cert, a->cfg.key };
	for (int i = 0; i < 2; i++) {
		struct stat st;
		if (!files[i] || stat(files[i], &st) != 0)
			continue;
		h = h * 1000003u ^ (uint64_t)st.st_mtim.tv_sec;
		h = h * 1000003u ^ (uint64_t)st.st_mtim.tv_nsec;
		h = h * 1000003u ^ (uint64_t)st.st_size;
	}
	return h;
}

struct curl_slist *agent_credentials(struct agent *a, CURL *h, struct curl_slist *headers)
{
	char err[512];
	if (a->cfg.cert) {
		uint64_t stamp = cred_stamp(a);
		if (a->cred_stamp && stamp != a->cred_stamp)
			agent_flush_sessions(a, "--cert or --key changed");
		a->cred_stamp = stamp;
	}
	if (a->share_old && curl_share_cleanup(a->share_old) == CURLSHE_OK)
		a->share_old = NULL;
	if (a->share)
		curl_easy_setopt(h, CURLOPT_SHARE, a->share);
	char *token = NULL;
	if (a->cfg.token_file && !(token = credentials_read_token(a->cfg.token_file, err, sizeof(err))))
		log_warn("plane %s: %s; connecting without a token", sync_plane(a), err);
	struct credentials cr = { a->cfg.ca_file, a->cfg.cert, a->cfg.key, token };
	headers = credentials_apply(h, &cr, headers);
	credentials_forget(token);
	return headers;
}

/* An answer's body, its first 64 KiB (an ACK's or a report's is short). */
static size_t collect_answer(char *ptr, size_t size, size_t n, void *ud)
{
	struct buf *b = ud;
	size_t len = size * n;
	if (b->len < 65536)
		buf_append(b, ptr, len);
	return len;
}

/* What every request to the plane sets: the URL (path on the plane the
 * agent is on), headers, where the answer goes, timeouts, the agent's name;
 * answer is emptied first. */
static void request_setup(struct agent *a, CURL *h, const char *path, struct curl_slist *headers,
			  curl_write_callback collect, struct buf *answer, long timeout_ms)
{
	buf_reset(answer);
	char *url = xasprintf("%s%s", sync_plane(a), path);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, answer);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(a->cfg.connect_timeout * 1000));
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "tetherd/" PACKAGE_VERSION);
	free(url);
}

CURL *agent_post(struct agent *a, const char *path, const struct buf *body, struct buf *answer, long timeout_ms,
		 struct curl_slist **headers)
{
	CURL *h = curl_easy_init();
	if (!h)
		return NULL;
	*headers = curl_slist_append(NULL, "Content-Type: application/json");
	*headers = agent_credentials(a, h, *headers);
	request_setup(a, h, path, *headers, collect_answer, answer, timeout_ms);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body->data);
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)body->len);
	curl_multi_add_handle(a->multi, h);
	return h;
}

/* A GET's answer, up to 64 MiB (the wraps of many secrets). */
static size_t collect_big(char *ptr, size_t size, size_t n, void *ud)
{
	struct buf *b = ud;
	size_t len = size * n;
	if (b->len + len > (64u << 20))
		return 0;   /* the transfer fails: too large */
	buf_append(b, ptr, len);
	return len;
}

long agent_get_now(struct agent *a, const char *path, struct buf *answer, long timeout_ms, char *err,
		   size_t errlen)
{
	CURL *h = curl_easy_init();
	if (!h) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	struct curl_slist *headers = agent_credentials(a, h, NULL);
	char cerr[CURL_ERROR_SIZE] = "";
	request_setup(a, h, path, headers, collect_big, answer, timeout_ms);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
	CURLcode code = curl_easy_perform(h);
	long status = -1;
	if (code == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	else
		snprintf(err, errlen, "%s", cerr[0] ? cerr : curl_easy_strerror(code));
	curl_easy_cleanup(h);
	credentials_free_headers(headers);
	return status;
}

static void on_heartbeat(struct agent *a, const char *data, size_t len)
{
	char err[256];
	struct json_limits lim = { 16384, 4 };
	cJSON *v = json_decode(data, len, &lim, err, sizeof(err));
	if (!v) {
		log_warn("stream: heartbeat ignored: %s", err);
		return;
	}
	uint64_t version;
	/* with --trust only a signed statement says where the plane is */
	if (!a->trust.on && json_get_u64(cJSON_GetObjectItemCaseSensitive(v, "version"), &version))
		a->plane_version = version;
	const char *stmt = json_get_string(v, "statement");
	if (a->trust.on && stmt)
		trust_heartbeat(a, stmt, strlen(stmt));
	const cJSON *iv = cJSON_GetObjectItemCaseSensitive(v, "interval");
	if (cJSON_IsNumber(iv) && iv->valuedouble >= 0.05 && iv->valuedouble <= 3600)
		a->heartbeat_s = iv->valuedouble;
	/* "report":S asks for traffic reports every S seconds */
	traffic_report_heartbeat(&a->traffic, v, a->heartbeat_s);
	/* "stale":{...} while the plane is cut off from its source; absent:
	 * fresh */
	struct plane_stale ps;
	fresh_stale_from_json(cJSON_GetObjectItemCaseSensitive(v, "stale"), &ps);
	cJSON_Delete(v);
	fresh_heard(a, ps.on, ps.since, ps.why);
	/* a heartbeat only tells; it never moves our version */
	if (a->astate != ST_DEGRADED && !a->nqueue)
		agent_set_state(a, a->state.version >= a->plane_version ? ST_SYNCED : ST_SYNCING);
	if (a->astate == ST_SYNCED && !a->last_sync)
		a->last_sync = wall_seconds();
	if (a->astate == ST_SYNCED)
		metrics_contact(a);
	agent_write_status(a);
}

static int on_event(void *ctx, const struct sse_event *ev)
{
	struct agent *a = ctx;
	a->last_event_ms = now_ms();
	a->event_bytes = 0;
	if (!a->got_event) {
		a->got_event = true;
		answered(a);
		if (a->offline_logged)
			log_info("plane %s: connected again", sync_plane(a));
		a->offline_logged = false;
	}
	if (strcmp(ev->type, "push") == 0) {
		if (apply_enqueue(a, ev->data, ev->data_len, true) == PUSH_RESYNC) {
			a->resync = true;
			return 1;
		}
	} else if (strcmp(ev->type, "heartbeat") == 0) {
		on_heartbeat(a, ev->data, ev->data_len);
	}
	return 0;
}

static size_t on_data(char *ptr, size_t size, size_t n, void *ud)
{
	struct agent *a = ud;
	size_t len = size * n;
	long status = 0;
	a->last_byte_ms = now_ms();
	curl_easy_getinfo(a->sync, CURLINFO_RESPONSE_CODE, &status);
	if (status != 200 || a->kind == SYNC_POLL) {
		if (a->body.len + len > a->cfg.max_push_bytes)
			return 0;   /* too big: abort */
		buf_append(&a->body, ptr, len);
		return len;
	}
	a->event_bytes += len;
	int rc = sse_parser_feed(&a->sse, ptr, len, on_event, a);
	if (rc < 0) {
		log_error("stream: an event exceeds %llu bytes: closing", (unsigned long long)a->cfg.max_push_bytes);
		return 0;
	}
	return rc ? 0 : len;
}

/* The value of header name in the line ptr[0..len), trimmed; NULL when the
 * line is another header. */
static const char *header_value(const char *ptr, size_t len, const char *name, size_t *vlen)
{
	size_t nl = strlen(name);
	if (len <= nl || strncasecmp(ptr, name, nl) != 0 || ptr[nl] != ':')
		return NULL;
	size_t s = nl + 1;
	while (s < len && (ptr[s] == ' ' || ptr[s] == '\t'))
		s++;
	size_t e = len;
	while (e > s && (ptr[e - 1] == '\r' || ptr[e - 1] == '\n' || ptr[e - 1] == ' '))
		e--;
	*vlen = e - s;
	return ptr + s;
}

static size_t on_header(char *ptr, size_t size, size_t n, void *ud)
{
	struct agent *a = ud;
	size_t len = size * n;
	size_t vl;
	const char *v;
	a->last_byte_ms = now_ms();
	if ((v = header_value(ptr, len, "Tether-Statement", &vl)) && vl <= STATEMENT_MAX) {
		buf_reset(&a->resp_statement);
		buf_append(&a->resp_statement, v, vl);
	}
	/* a poll answer's: the plane is stale (absent: fresh) */
	if ((v = header_value(ptr, len, "Tether-Stale", &vl)))
		fresh_stale_from_header(v, vl, &a->resp_stale);
	if (len > 5 && strncasecmp(ptr, "ETag:", 5) == 0) {
		size_t s = 5;
		while (s < len && (ptr[s] == ' ' || ptr[s] == '\t'))
			s++;
		size_t e = len;
		while (e > s && (ptr[e - 1] == '\r' || ptr[e - 1] == '\n' || ptr[e - 1] == ' '))
			e--;
		if (e - s < sizeof(a->resp_etag))
			snprintf(a->resp_etag, sizeof(a->resp_etag), "%.*s", (int)(e - s), ptr + s);
	}
	return len;
}

static void append_param(struct buf *url, CURL *h, const char *key, const char *val)
{
	char *esc = curl_easy_escape(h, val, 0);
	buf_printf(url, "&%s=%s", key, esc ? esc : "");
	curl_free(esc);
}

void sync_start(struct agent *a)
{
	CURL *h = curl_easy_init();
	if (!h) {
		sync_schedule(a, true);
		return;
	}
	bool poll = strcmp(a->cfg.transport, "poll") == 0;
	struct buf url = BUF_INIT;
	buf_printf(&url, "%s/v1/%s?node=", sync_plane(a), poll ? "config" : "stream");
	char *node = curl_easy_escape(h, a->cfg.node, 0);
	buf_puts(&url, node ? node : "");
	curl_free(node);
	/* after a digest mismatch, version 0 asks for a snapshot (the
	 * rollback check still holds: it is against what we verified) */
	buf_printf(&url, "&version=%llu", a->trust.want_snapshot ? 0ULL : (unsigned long long)a->state.version);
	if (a->cfg.labels)
		append_param(&url, h, "labels", a->cfg.labels);
	if (a->cfg.sub)
		append_param(&url, h, "sub", a->cfg.sub);
	if (poll && a->cfg.poll_wait > 0)
		buf_printf(&url, "&wait=%u", (unsigned)a->cfg.poll_wait);
	if (a->unacked)
		buf_puts(&url, "&unacked=1");
	if (a->cfg.approvals)   /* the plane holds us at versions K approvers approved */
		buf_printf(&url, "&approvals=%llu", (unsigned long long)a->cfg.approvals);
	/* whether it counts its traffic, at every connection: a node that
	 * holds its version already gets no push to ACK (the gates) */
	if (a->traffic.on)
		buf_puts(&url, "&counts=1");
	else {
		buf_puts(&url, "&counts=0");
		append_param(&url, h, "counts_reason", a->traffic.why_off ? a->traffic.why_off : "it collects no traffic");
	}

	a->sync_headers = agent_credentials(a, h, NULL);
	if (poll) {
		if (a->etag[0]) {
			char *inm = xasprintf("If-None-Match: %s", a->etag);
			a->sync_headers = curl_slist_append(a->sync_headers, inm);
			free(inm);
		}
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)((a->cfg.poll_wait + 30) * 1000));
	} else {
		a->m.stream_opens++;
		a->sync_headers = curl_slist_append(a->sync_headers, "Accept: text/event-stream");
		a->sync_headers = curl_slist_append(a->sync_headers, "Cache-Control: no-cache");
	}
	curl_easy_setopt(h, CURLOPT_URL, url.data);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, a->sync_headers);
	a->sync_err[0] = '\0';
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, a->sync_err);
	curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, a);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, a);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(a->cfg.connect_timeout * 1000));
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "tetherd/" PACKAGE_VERSION);
	log_debug("sync: %s", url.data);
	buf_release(&url);

	a->sync = h;
	a->kind = poll ? SYNC_POLL : SYNC_STREAM;
	a->resync = false;
	a->got_event = false;
	a->resp_etag[0] = '\0';
	buf_reset(&a->resp_statement);
	memset(&a->resp_stale, 0, sizeof(a->resp_stale));
	buf_shrink(&a->body, 64u << 10);
	sse_parser_reset(&a->sse);
	a->last_byte_ms = now_ms();
	a->last_event_ms = a->last_byte_ms;
	a->event_bytes = 0;
	curl_multi_add_handle(a->multi, h);
	/* each stream is a connection: its first event registers the node
	 * key (a poller's first answer after a failure or a move) */
	if (!poll)
		keyreg_lost(a);
}

void sync_stop(struct agent *a)
{
	if (!a->sync)
		return;
	curl_multi_remove_handle(a->multi, a->sync);
	curl_easy_cleanup(a->sync);
	credentials_free_headers(a->sync_headers);
	a->sync = NULL;
	a->sync_headers = NULL;
	a->kind = SYNC_NONE;
}

void sync_went_offline(struct agent *a, const char *why)
{
	keyreg_lost(a);   /* the next connection registers the node key again */
	if (!a->offline_logged)
		log_warn("plane %s: %s; serving version %llu, retrying", sync_plane(a), why,
			 (unsigned long long)a->state.version);
	else
		log_debug("plane %s: %s", sync_plane(a), why);
	a->offline_logged = true;
	if (a->astate != ST_DEGRADED)
		agent_set_state(a, ST_OFFLINE);
	agent_write_status(a);
}

void sync_done(struct agent *a, CURLcode code)
{
	long status = 0;
	curl_easy_getinfo(a->sync, CURLINFO_RESPONSE_CODE, &status);
	enum sync_kind kind = a->kind;
	sync_stop(a);
	if (a->resync) {
		apply_drop_queue(a);
		sync_schedule(a, false);
		return;
	}
	if (kind == SYNC_POLL && code == CURLE_OK && (status == 200 || status == 304)) {
		answered(a);
		fresh_heard(a, a->resp_stale.on, a->resp_stale.since, a->resp_stale.why);
		/* a 304's statement says the plane still stands by its
		 * target: freshness for a node that polls */
		if (status == 304 && a->resp_statement.len)
			trust_heartbeat(a, a->resp_statement.data, a->resp_statement.len);
		if (status == 200) {
			/* If-None-Match names the last answer taken, applied or
			 * refused: a refused version is not fetched again, the poll
			 * waits for a newer one (a retry after an I/O failure clears
			 * it) */
			snprintf(a->etag, sizeof(a->etag), "%s", a->resp_etag);
			enum push_result pr = apply_enqueue(a, a->body.data ? a->body.data : "", a->body.len, false);
			if (pr == PUSH_QUEUED) {
				apply_pending(a, NULL);
			} else {
				a->etag[0] = '\0';
				/* distrusted: the same version may come again signed
				 * right (a key rotation); ask again, not at once */
				if (pr == PUSH_DISTRUSTED) {
					sync_schedule(a, true);
					return;
				}
			}
		} else if (a->astate != ST_DEGRADED && !a->nqueue) {
			agent_set_state(a, ST_SYNCED);
			if (!a->last_sync)
				a->last_sync = wall_seconds();
			metrics_contact(a);
			agent_write_status(a);
		}
		/* a long-poll paces itself; a plain poll (behind an HTTP cache)
		 * waits its interval, never a busy loop */
		sync_schedule(a, false);
		if (a->cfg.poll_wait <= 0)
			a->next_sync_ms += (int64_t)(a->cfg.poll_interval * 1000);
		return;
	}
	char why[512];
	if (code != CURLE_OK)
		snprintf(why, sizeof(why), "%s", a->sync_err[0] ? a->sync_err : curl_easy_strerror(code));
	else if (status != 200)
		snprintf(why, sizeof(why), "HTTP %ld: %.300s", status, a->body.data ? a->body.data : "");
	else
		snprintf(why, sizeof(why), "the stream ended");
	if (code == CURLE_OK && (status == 401 || status == 403)) {
		/* not an outage but a configuration problem: said at every
		 * refusal, and in status.json, even when another plane takes us
		 * (a replica whose credentials differ must not go unnoticed) */
		log_error("plane %s refused this node's credentials (%s): check --token-file, --cert and --key",
			  sync_plane(a), why);
		snprintf(a->last_error, sizeof(a->last_error), "plane %s: %s", sync_plane(a), why);
		/* no session from before (other credentials, another plane's
		 * ticket) into the next attempt */
		agent_flush_sessions(a, "the plane refused this node's credentials");
	}
	if (a->got_event) {
		/* a stream that worked and ended: come back soon (not at once:
		 * planes that drop every stream must not make a busy loop),
		 * from our version */
		log_info("stream: %s; reconnecting from version %llu", why, (unsigned long long)a->state.version);
		a->attempt = 0;
		stream_lost(a, why);
		sync_schedule(a, true);
	} else {
		attempt_failed(a, why);
	}
}
