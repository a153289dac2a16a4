/* agent.c: tetherd's event loop, its apply pipeline and its ACKs (see
 * agent.h). The resume point is the applied version, and only applying a
 * push moves it: never a timeout, a reconnect or a heartbeat. */
#include "agent.h"
#include "buf.h"
#include "consumer.h"
#include "json.h"
#include "lastgood.h"
#include "log.h"
#include "push.h"
#include "runcmd.h"
#include "sse_parser.h"
#include "state.h"
#include "status.h"
#include "util.h"
#include "xmalloc.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define ERRLEN 4096
#define ACK_ERROR_MAX 4000
#define DEFAULT_HEARTBEAT_S 10.0

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
	int64_t retry_at_ms;             /* resync to retry a push that failed on I/O */
	unsigned io_failures;
	unsigned attempt;
	int64_t next_sync_ms;

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

static int sig_pipe[2] = { -1, -1 };
static volatile sig_atomic_t got_term, got_hup;

static void on_signal(int sig)
{
	int e = errno;
	if (sig == SIGHUP)
		got_hup = 1;
	else
		got_term = 1;
	if (sig_pipe[1] >= 0) {
		ssize_t w = write(sig_pipe[1], "x", 1);
		(void)w;
	}
	errno = e;
}

/* ---- status ------------------------------------------------------------- */

static void set_state(struct agent *a, enum agent_state st)
{
	a->astate = st;
}

static void write_status(struct agent *a)
{
	struct status s = {
		.node = a->cfg.node, .version = a->state.version, .state = a->astate,
		.last_error = a->last_error, .last_sync = a->last_sync, .plane = a->cfg.plane,
		.transport = a->cfg.transport, .consumer = a->cfg.consumer, .plane_version = a->plane_version,
		.resources = a->state.count, .state_bytes = a->state.raw_bytes, .applied = a->applied, .rejected = a->rejected, .started = a->started,
	};
	/* only real changes are written: heartbeats alone do not touch disk */
	if (a->status_valid && a->written.version == s.version && a->written.state == s.state &&
	    a->written.last_sync == s.last_sync && a->written.applied == s.applied &&
	    a->written.rejected == s.rejected && strcmp(a->written.last_error, s.last_error) == 0)
		return;
	char err[512];
	if (status_write(a->cfg.state_dir, &s, err, sizeof(err)) < 0) {
		log_warn("status: %s", err);
		return;
	}
	free((char *)a->written.last_error);
	a->written = s;
	a->written.last_error = xstrdup(s.last_error);
	a->status_valid = true;
}

/* ---- backoff ------------------------------------------------------------- */

static double rand01(void)
{
	uint32_t r;
	if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
		r = (uint32_t)now_ms() * 2654435761u;
	return (double)r / 4294967296.0;
}

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
	return (int64_t)(rand01() * cap * 1000.0);
}

static void schedule_sync(struct agent *a, bool failed)
{
	if (failed) {
		a->attempt++;
		a->next_sync_ms = now_ms() + backoff_ms(a);
	} else {
		a->next_sync_ms = now_ms();
	}
}

/* ---- ACKs ------------------------------------------------------------------ */

static void queue_ack(struct agent *a, uint64_t version, const char *nonce, const char *error)
{
	struct buf *b = &a->ack.pending;
	buf_reset(b);
	buf_puts(b, "{\"node\":");
	buf_json_string(b, a->cfg.node);
	buf_printf(b, ",\"version\":%llu,\"nonce\":", (unsigned long long)version);
	buf_json_string(b, nonce);
	if (error) {
		char cut[ACK_ERROR_MAX + 1];
		snprintf(cut, sizeof(cut), "%s", error);
		buf_puts(b, ",\"status\":\"nack\",\"error\":");
		buf_json_string(b, cut);
	} else {
		buf_puts(b, ",\"status\":\"ack\"");
	}
	buf_putc(b, '}');
	a->ack.has_pending = true;
	a->ack.attempt = 0;
	a->ack.next_ms = now_ms();
}

static size_t collect(char *ptr, size_t size, size_t n, void *ud)
{
	struct buf *b = ud;
	size_t len = size * n;
	if (b->len < 65536)
		buf_append(b, ptr, len);
	return len;
}

static void start_ack(struct agent *a)
{
	CURL *h = curl_easy_init();
	if (!h)
		return;
	buf_reset(&a->ack.sent);
	buf_append(&a->ack.sent, a->ack.pending.data, a->ack.pending.len);
	a->ack.has_pending = false;
	buf_reset(&a->ack.resp);
	char *url = xasprintf("%s/v1/ack", a->cfg.plane);
	a->ack.headers = curl_slist_append(NULL, "Content-Type: application/json");
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, a->ack.sent.data);
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)a->ack.sent.len);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, a->ack.headers);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &a->ack.resp);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(a->cfg.connect_timeout * 1000));
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 30000L);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "tetherd/" PACKAGE_VERSION);
	free(url);
	a->ack.h = h;
	curl_multi_add_handle(a->multi, h);
}

static void ack_done(struct agent *a, CURLcode code)
{
	long status = 0;
	curl_easy_getinfo(a->ack.h, CURLINFO_RESPONSE_CODE, &status);
	curl_multi_remove_handle(a->multi, a->ack.h);
	curl_easy_cleanup(a->ack.h);
	curl_slist_free_all(a->ack.headers);
	a->ack.h = NULL;
	a->ack.headers = NULL;
	if (code == CURLE_OK && status == 200) {
		log_debug("ack: %s", a->ack.resp.data ? a->ack.resp.data : "");
		a->ack.attempt = 0;
		return;
	}
	if (code == CURLE_OK && status >= 400 && status < 500) {
		/* the plane will never take it (it forgot us, or it is stale) */
		log_warn("ack: the plane refused it (%ld): %s", status, a->ack.resp.data ? a->ack.resp.data : "");
		return;
	}
	/* retry this one unless a newer one is waiting */
	if (!a->ack.has_pending) {
		buf_reset(&a->ack.pending);
		buf_append(&a->ack.pending, a->ack.sent.data, a->ack.sent.len);
		a->ack.has_pending = true;
		a->ack.attempt++;
		double cap = a->cfg.backoff_min * pow(2.0, a->ack.attempt > 20 ? 20 : a->ack.attempt);
		if (cap > a->cfg.backoff_max)
			cap = a->cfg.backoff_max;
		a->ack.next_ms = now_ms() + (int64_t)(rand01() * cap * 1000.0);
		log_info("ack: not delivered (%s); retrying", code != CURLE_OK ? curl_easy_strerror(code) : "plane error");
	}
}

/* ---- applying ------------------------------------------------------------------ */

static int run_hook(struct agent *a, const char *what, const char *cmd, uint64_t version, char *err, size_t errlen)
{
	char staging[4200], output[4200], ver[64];
	const char *sdir = a->cons->ops->staging_dir(a->cons);
	snprintf(staging, sizeof(staging), "TETHER_STAGING=%s", sdir ? sdir : "");
	snprintf(output, sizeof(output), "TETHER_OUTPUT=%s", a->cfg.output_dir);
	snprintf(ver, sizeof(ver), "TETHER_VERSION=%llu", (unsigned long long)version);
	const char *env[] = { staging, output, ver, NULL };
	struct runcmd_result res;
	if (runcmd(cmd, env, a->cfg.command_timeout, &res, err, errlen) < 0)
		return -1;
	if (res.exit_code == 0 && !res.timed_out)
		return 0;
	char how[RUNCMD_OUTPUT_MAX + 64];
	runcmd_describe(&res, how, sizeof(how));
	snprintf(err, errlen, "%s command failed (%.3000s)", what, how);
	return -1;
}

enum apply_result {
	APPLY_OK,
	APPLY_REFUSED,    /* the consumer's check or reload said no: final */
	APPLY_FAILED,     /* an I/O error here (disk full, ...): worth a retry */
};

/* Stages, checks, swaps, reloads, persists and commits c. On failure
 * everything live is as it was and err says why. */
static enum apply_result apply_candidate(struct agent *a, struct candidate *c, char *err, size_t errlen)
{
	const struct consumer_ops *ops = a->cons->ops;
	enum apply_result why = APPLY_FAILED;
	int staged = 1;
	if (c->n) {
		staged = ops->stage(a->cons, &a->state, c, err, errlen);
		if (staged < 0)
			goto fail;
	}
	if (staged == 0) {
		if (a->cfg.check && run_hook(a, "check", a->cfg.check, c->version, err, errlen) < 0) {
			why = APPLY_REFUSED;
			goto fail;
		}
		if (ops->swap(a->cons, err, errlen) < 0)
			goto revert;
		if (a->cfg.reload && run_hook(a, "reload", a->cfg.reload, c->version, err, errlen) < 0) {
			why = APPLY_REFUSED;
			goto revert;
		}
	}
	if (lastgood_save(a->lg, &a->state, c, err, errlen) < 0) {
		if (staged == 0)
			goto revert;
		goto fail;
	}
	state_commit(&a->state, c);
	ops->finish(a->cons);
	return APPLY_OK;
revert:;
	char e2[1024];
	if (ops->revert(a->cons, e2, sizeof(e2)) < 0)
		log_error("apply: cannot put the old output back: %s", e2);
	if (a->cfg.reload && run_hook(a, "reload", a->cfg.reload, a->state.version, e2, sizeof(e2)) < 0)
		log_error("apply: reload after putting the old output back failed: %s", e2);
fail:
	ops->finish(a->cons);
	return why;
}

static void reject(struct agent *a, uint64_t version, const char *nonce, const char *why)
{
	log_error("push %llu refused: %s", (unsigned long long)version, why);
	snprintf(a->last_error, sizeof(a->last_error), "version %llu refused: %s", (unsigned long long)version, why);
	a->rejected++;
	set_state(a, ST_DEGRADED);
	if (nonce && *nonce)
		queue_ack(a, version, nonce, why);
	write_status(a);
}

enum push_result { PUSH_DONE, PUSH_RESYNC };

/* A large message leaves its decoding garbage spread over the heap: give
 * the free pages back, so an idle agent holds about its state, not its
 * largest push. */
static void trim_after(size_t message_bytes)
{
	if (message_bytes >= (1u << 20))
		malloc_trim(0);
}

/* Handles one push message. */
static enum push_result handle_push(struct agent *a, const char *text, size_t len)
{
	char err[ERRLEN];
	struct push p;
	struct json_limits lim = { (size_t)a->cfg.max_push_bytes, (int)a->cfg.max_depth };
	if (push_decode(text, len, &lim, &p, err, sizeof(err)) < 0) {
		reject(a, p.version, p.nonce, err);
		return PUSH_DONE;
	}
	if (p.version > a->plane_version)
		a->plane_version = p.version;
	if (p.version < a->state.version) {
		snprintf(err, sizeof(err), "push version %llu is older than the applied version %llu",
			 (unsigned long long)p.version, (unsigned long long)a->state.version);
		reject(a, p.version, p.nonce, err);
		push_release(&p);
		return PUSH_DONE;
	}
	if (!p.full && p.base != a->state.version) {
		log_warn("push %llu applies on version %llu, not on ours (%llu): resyncing",
			 (unsigned long long)p.version, (unsigned long long)p.base, (unsigned long long)a->state.version);
		push_release(&p);
		return PUSH_RESYNC;
	}
	struct candidate c;
	int64_t t0 = now_ms();
	struct timespec cpu0, cpu1;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu0);
	if (candidate_build(&a->state, &p, a->cfg.strict ? STATE_STRICT : 0, &c, err, sizeof(err)) < 0) {
		reject(a, p.version, p.nonce, err);
		push_release(&p);
		return PUSH_DONE;
	}
	size_t changes = c.n;
	enum apply_result ar = apply_candidate(a, &c, err, sizeof(err));
	if (ar != APPLY_OK) {
		candidate_release(&c);
		reject(a, p.version, p.nonce, err);
		if (ar == APPLY_FAILED) {
			/* not the push's fault: ask for it again a little later */
			a->io_failures++;
			double cap = a->cfg.backoff_min * pow(2.0, a->io_failures > 20 ? 20 : a->io_failures);
			if (cap > a->cfg.backoff_max)
				cap = a->cfg.backoff_max;
			int64_t wait = (int64_t)((0.5 + 0.5 * rand01()) * cap * 1000.0);
			a->retry_at_ms = now_ms() + wait;
			log_info("push %llu failed on I/O: retrying it in %.1fs", (unsigned long long)p.version,
				 (double)wait / 1000.0);
		}
		push_release(&p);
		return PUSH_DONE;
	}
	a->io_failures = 0;
	a->retry_at_ms = 0;
	candidate_release(&c);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu1);
	double cpu_ms = (double)(cpu1.tv_sec - cpu0.tv_sec) * 1e3 + (double)(cpu1.tv_nsec - cpu0.tv_nsec) / 1e6;
	log_info("applied version %llu (%s, %zu changes, %lld ms, %.3f ms cpu)", (unsigned long long)a->state.version,
		 p.full ? "snapshot" : "delta", changes, (long long)(now_ms() - t0), cpu_ms);
	a->applied++;
	a->last_error[0] = '\0';
	a->last_sync = wall_seconds();
	set_state(a, a->state.version >= a->plane_version ? ST_SYNCED : ST_SYNCING);
	queue_ack(a, p.version, p.nonce, NULL);
	write_status(a);
	push_release(&p);
	trim_after(len);
	return PUSH_DONE;
}

/* ---- the stream ------------------------------------------------------------- */

static void on_heartbeat(struct agent *a, const char *data, size_t len)
{
	char err[256];
	struct json_limits lim = { 4096, 4 };
	cJSON *v = json_decode(data, len, &lim, err, sizeof(err));
	if (!v) {
		log_warn("stream: heartbeat ignored: %s", err);
		return;
	}
	uint64_t version;
	if (json_get_u64(cJSON_GetObjectItemCaseSensitive(v, "version"), &version))
		a->plane_version = version;
	const cJSON *iv = cJSON_GetObjectItemCaseSensitive(v, "interval");
	if (cJSON_IsNumber(iv) && iv->valuedouble >= 0.05 && iv->valuedouble <= 3600)
		a->heartbeat_s = iv->valuedouble;
	cJSON_Delete(v);
	/* a heartbeat only tells; it never moves our version */
	if (a->astate != ST_DEGRADED)
		set_state(a, a->state.version >= a->plane_version ? ST_SYNCED : ST_SYNCING);
	if (a->astate == ST_SYNCED && !a->last_sync)
		a->last_sync = wall_seconds();
	write_status(a);
}

static int on_event(void *ctx, const struct sse_event *ev)
{
	struct agent *a = ctx;
	if (!a->got_event) {
		a->got_event = true;
		a->attempt = 0;
		if (a->offline_logged)
			log_info("plane %s: connected again", a->cfg.plane);
		a->offline_logged = false;
	}
	if (strcmp(ev->type, "push") == 0) {
		if (handle_push(a, ev->data, ev->data_len) == PUSH_RESYNC) {
			a->resync = true;
			return 1;
		}
	} else if (strcmp(ev->type, "heartbeat") == 0) {
		on_heartbeat(a, ev->data, ev->data_len);
	}
	return 0;
}

static size_t on_sync_data(char *ptr, size_t size, size_t n, void *ud)
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
	int rc = sse_parser_feed(&a->sse, ptr, len, on_event, a);
	if (rc < 0) {
		log_error("stream: an event exceeds %llu bytes: closing", (unsigned long long)a->cfg.max_push_bytes);
		return 0;
	}
	return rc ? 0 : len;
}

static size_t on_sync_header(char *ptr, size_t size, size_t n, void *ud)
{
	struct agent *a = ud;
	size_t len = size * n;
	a->last_byte_ms = now_ms();
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

static void start_sync(struct agent *a)
{
	CURL *h = curl_easy_init();
	if (!h) {
		schedule_sync(a, true);
		return;
	}
	bool poll = strcmp(a->cfg.transport, "poll") == 0;
	struct buf url = BUF_INIT;
	buf_printf(&url, "%s/v1/%s?node=", a->cfg.plane, poll ? "config" : "stream");
	char *node = curl_easy_escape(h, a->cfg.node, 0);
	buf_puts(&url, node ? node : "");
	curl_free(node);
	buf_printf(&url, "&version=%llu", (unsigned long long)a->state.version);
	if (a->cfg.labels)
		append_param(&url, h, "labels", a->cfg.labels);
	if (a->cfg.sub)
		append_param(&url, h, "sub", a->cfg.sub);
	if (poll && a->cfg.poll_wait > 0)
		buf_printf(&url, "&wait=%u", (unsigned)a->cfg.poll_wait);

	a->sync_headers = NULL;
	if (poll) {
		if (a->etag[0]) {
			char *inm = xasprintf("If-None-Match: %s", a->etag);
			a->sync_headers = curl_slist_append(a->sync_headers, inm);
			free(inm);
		}
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)((a->cfg.poll_wait + 30) * 1000));
	} else {
		a->sync_headers = curl_slist_append(a->sync_headers, "Accept: text/event-stream");
		a->sync_headers = curl_slist_append(a->sync_headers, "Cache-Control: no-cache");
	}
	curl_easy_setopt(h, CURLOPT_URL, url.data);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, a->sync_headers);
	curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_sync_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, a);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_sync_header);
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
	buf_shrink(&a->body, 64u << 10);
	sse_parser_reset(&a->sse);
	a->last_byte_ms = now_ms();
	curl_multi_add_handle(a->multi, h);
}

static void stop_sync(struct agent *a)
{
	if (!a->sync)
		return;
	curl_multi_remove_handle(a->multi, a->sync);
	curl_easy_cleanup(a->sync);
	curl_slist_free_all(a->sync_headers);
	a->sync = NULL;
	a->sync_headers = NULL;
	a->kind = SYNC_NONE;
}

static void went_offline(struct agent *a, const char *why)
{
	if (!a->offline_logged)
		log_warn("plane %s: %s; serving version %llu, retrying", a->cfg.plane, why,
			 (unsigned long long)a->state.version);
	else
		log_debug("plane %s: %s", a->cfg.plane, why);
	a->offline_logged = true;
	if (a->astate != ST_DEGRADED)
		set_state(a, ST_OFFLINE);
	write_status(a);
}

static void sync_done(struct agent *a, CURLcode code)
{
	long status = 0;
	curl_easy_getinfo(a->sync, CURLINFO_RESPONSE_CODE, &status);
	enum sync_kind kind = a->kind;
	stop_sync(a);
	if (a->resync) {
		schedule_sync(a, false);
		return;
	}
	if (kind == SYNC_POLL && code == CURLE_OK && (status == 200 || status == 304)) {
		a->attempt = 0;
		if (status == 200) {
			char etag[sizeof(a->resp_etag)];
			snprintf(etag, sizeof(etag), "%s", a->resp_etag);
			uint64_t before = a->rejected;
			if (handle_push(a, a->body.data ? a->body.data : "", a->body.len) == PUSH_RESYNC)
				a->etag[0] = '\0';
			else if (a->rejected == before)
				snprintf(a->etag, sizeof(a->etag), "%s", etag);
		} else if (a->astate != ST_DEGRADED) {
			set_state(a, ST_SYNCED);
			if (!a->last_sync)
				a->last_sync = wall_seconds();
			write_status(a);
		}
		schedule_sync(a, false);
		return;
	}
	char why[512];
	if (code != CURLE_OK)
		snprintf(why, sizeof(why), "%s", curl_easy_strerror(code));
	else if (status != 200)
		snprintf(why, sizeof(why), "HTTP %ld: %.300s", status, a->body.data ? a->body.data : "");
	else
		snprintf(why, sizeof(why), "the stream ended");
	if (a->got_event) {
		/* a stream that worked and ended: come back soon, from our version */
		log_info("stream: %s; reconnecting from version %llu", why, (unsigned long long)a->state.version);
		a->attempt = 0;
		schedule_sync(a, true);
	} else {
		went_offline(a, why);
		schedule_sync(a, true);
	}
}

static double stream_timeout_s(const struct agent *a)
{
	if (a->cfg.stream_timeout > 0)
		return a->cfg.stream_timeout;
	return 3 * (a->heartbeat_s > 0 ? a->heartbeat_s : DEFAULT_HEARTBEAT_S);
}

/* ---- boot, loop, SIGHUP ------------------------------------------------------- */

static int agent_boot(struct agent *a, char *err, size_t errlen)
{
	a->started = wall_seconds();
	set_state(a, ST_BOOTING);
	state_init(&a->state);
	a->lg = lastgood_open(a->cfg.state_dir, err, errlen);
	if (!a->lg)
		return -1;
	write_status(a);
	a->cons = consumer_new(a->cfg.consumer, a->cfg.output_dir, err, errlen);
	if (!a->cons)
		return -1;
	char lerr[1024];
	int loaded = lastgood_load(a->lg, &a->state, lerr, sizeof(lerr));
	if (loaded < 0) {
		log_error("last-good: %s; starting empty (the plane will send a snapshot)", lerr);
		snprintf(a->last_error, sizeof(a->last_error), "last-good unusable: %s", lerr);
	} else if (loaded == 0) {
		log_info("last-good: none yet in %s", a->cfg.state_dir);
	}
	/* render last-good before dialling: the consumer runs on it offline */
	if (a->cons->ops->boot(a->cons, &a->state, err, errlen) < 0)
		return -1;
	set_state(a, ST_OFFLINE);
	malloc_trim(0);   /* loading last-good used twice its size for a moment */
	return 0;
}

static void reload_config(struct agent *a)
{
	struct agent_config nc;
	char err[1024];
	int first;
	agent_config_defaults(&nc);
	int rc = options_parse(agent_options, &nc, a->argc, a->argv, "agent", "", "", &first, err, sizeof(err));
	if (rc != 0 || agent_config_check(&nc, err, sizeof(err)) < 0) {
		log_error("SIGHUP: %s; keeping the running configuration", rc == 1 ? "unexpected --help" : err);
		agent_config_release(&nc);
		return;
	}
	if (strcmp(nc.state_dir, a->cfg.state_dir) || strcmp(nc.output_dir, a->cfg.output_dir) ||
	    strcmp(nc.consumer, a->cfg.consumer))
		log_warn("SIGHUP: state-dir, output-dir and consumer change only on restart");
	bool redial = strcmp(nc.plane, a->cfg.plane) || strcmp(nc.node, a->cfg.node) ||
		      strcmp(nc.transport, a->cfg.transport) || (nc.labels == NULL) != (a->cfg.labels == NULL) ||
		      (nc.labels && strcmp(nc.labels, a->cfg.labels)) || (nc.sub == NULL) != (a->cfg.sub == NULL) ||
		      (nc.sub && strcmp(nc.sub, a->cfg.sub));
	/* keep the parts that only a restart changes */
	char *keep[3] = { nc.state_dir, nc.output_dir, nc.consumer };
	nc.state_dir = a->cfg.state_dir;
	nc.output_dir = a->cfg.output_dir;
	nc.consumer = a->cfg.consumer;
	a->cfg.state_dir = keep[0];
	a->cfg.output_dir = keep[1];
	a->cfg.consumer = keep[2];
	agent_config_release(&a->cfg);
	a->cfg = nc;
	enum log_level lvl;
	if (log_parse_level(a->cfg.log_level, &lvl) == 0)
		log_set_level(lvl);
	log_info("SIGHUP: configuration reloaded%s", redial ? "; reconnecting" : "");
	if (redial) {
		stop_sync(a);
		a->etag[0] = '\0';
		schedule_sync(a, false);
	}
}

static void agent_free(struct agent *a)
{
	stop_sync(a);
	if (a->ack.h) {
		curl_multi_remove_handle(a->multi, a->ack.h);
		curl_easy_cleanup(a->ack.h);
		curl_slist_free_all(a->ack.headers);
	}
	if (a->multi)
		curl_multi_cleanup(a->multi);
	consumer_free(a->cons);
	lastgood_close(a->lg);
	state_release(&a->state);
	sse_parser_release(&a->sse);
	buf_release(&a->body);
	buf_release(&a->ack.pending);
	buf_release(&a->ack.sent);
	buf_release(&a->ack.resp);
	free((char *)a->written.last_error);
}

/* Runs the one transfer in flight to its end; returns its result. */
static CURLcode run_until_done(struct agent *a)
{
	int running = 1;
	while (running) {
		curl_multi_poll(a->multi, NULL, 0, 1000, NULL);
		curl_multi_perform(a->multi, &running);
	}
	CURLMsg *m;
	int left;
	CURLcode code = CURLE_OK;
	while ((m = curl_multi_info_read(a->multi, &left)))
		if (m->msg == CURLMSG_DONE)
			code = m->data.result;
	return code;
}

/* --once: one poll, apply, ACK (a few tries), exit status. */
static int run_once(struct agent *a)
{
	char *saved = a->cfg.transport;
	double saved_wait = a->cfg.poll_wait;
	a->cfg.transport = xstrdup("poll");
	a->cfg.poll_wait = 0;
	int rc = 1;
	for (int tries = 0; tries < 3 && rc != 0; tries++) {
		uint64_t rejected = a->rejected;
		if (tries) {
			int64_t wait = a->next_sync_ms - now_ms();
			if (wait > 0)
				curl_multi_poll(a->multi, NULL, 0, (int)wait, NULL);
		}
		start_sync(a);
		CURLcode code = run_until_done(a);
		long status = 0;
		curl_easy_getinfo(a->sync, CURLINFO_RESPONSE_CODE, &status);
		sync_done(a, code);
		if (a->rejected > rejected) {
			rc = 1;
			break;
		}
		if (code == CURLE_OK && (status == 200 || status == 304))
			rc = 0;
		else
			log_error("once: cannot sync with %s (%s)", a->cfg.plane,
				  code != CURLE_OK ? curl_easy_strerror(code) : "HTTP error");
	}
	/* deliver the ACK or NACK before leaving */
	for (int tries = 0; tries < 5 && a->ack.has_pending; tries++) {
		start_ack(a);
		ack_done(a, run_until_done(a));
	}
	free(a->cfg.transport);
	a->cfg.transport = saved;
	a->cfg.poll_wait = saved_wait;
	write_status(a);
	log_info("once: %s at version %llu", rc == 0 ? "synced" : "failed", (unsigned long long)a->state.version);
	return rc;
}

int agent_run(struct agent_config *cfg, int argc, char **argv)
{
	struct agent a;
	char err[ERRLEN];
	int code = 0;
	memset(&a, 0, sizeof(a));
	a.cfg = *cfg;
	memset(cfg, 0, sizeof(*cfg));
	a.argc = argc;
	a.argv = argv;
	sse_parser_init(&a.sse, (size_t)a.cfg.max_push_bytes + 64, (size_t)a.cfg.max_push_bytes);
	buf_init(&a.body);

	if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		fatal("cannot create a pipe: %s", strerror(errno));
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	curl_global_init(strncmp(a.cfg.plane, "https:", 6) == 0 ? CURL_GLOBAL_DEFAULT : CURL_GLOBAL_NOTHING);
	a.multi = curl_multi_init();

	if (agent_boot(&a, err, sizeof(err)) < 0) {
		log_error("%s", err);
		code = 1;
		goto out;
	}
	write_status(&a);
	log_info("node %s at version %llu (%zu resources); plane %s over %s", a.cfg.node,
		 (unsigned long long)a.state.version, a.state.count, a.cfg.plane, a.cfg.transport);
	if (a.cfg.once) {
		code = run_once(&a);
		goto out;
	}

	schedule_sync(&a, false);
	while (!got_term) {
		int64_t now = now_ms();
		if (!a.sync && now >= a.next_sync_ms)
			start_sync(&a);
		if (a.sync && a.kind == SYNC_STREAM && now - a.last_byte_ms > (int64_t)(stream_timeout_s(&a) * 1000)) {
			/* silence is not progress: resume from what we applied */
			log_warn("stream: silent for %.1fs (timeout %.1fs): reconnecting from version %llu",
				 (double)(now - a.last_byte_ms) / 1000.0, stream_timeout_s(&a),
				 (unsigned long long)a.state.version);
			bool worked = a.got_event;
			stop_sync(&a);
			if (!worked)
				went_offline(&a, "no answer");
			schedule_sync(&a, !worked);
		}
		if (a.ack.has_pending && !a.ack.h && now >= a.ack.next_ms)
			start_ack(&a);
		if (a.retry_at_ms && now >= a.retry_at_ms) {
			/* resync: the plane sends the gap from our version again */
			a.retry_at_ms = 0;
			a.etag[0] = '\0';
			if (a.sync && a.kind == SYNC_STREAM) {
				stop_sync(&a);
				schedule_sync(&a, false);
			}
		}

		int64_t wake = now + 1000;
		if (a.retry_at_ms && a.retry_at_ms < wake)
			wake = a.retry_at_ms;
		if (!a.sync && a.next_sync_ms < wake)
			wake = a.next_sync_ms;
		if (a.sync && a.kind == SYNC_STREAM) {
			int64_t dead = a.last_byte_ms + (int64_t)(stream_timeout_s(&a) * 1000) + 1;
			if (dead < wake)
				wake = dead;
		}
		if (a.ack.has_pending && !a.ack.h && a.ack.next_ms < wake)
			wake = a.ack.next_ms;
		int timeout = (int)(wake > now ? wake - now : 0);
		struct curl_waitfd wfd = { sig_pipe[0], CURL_WAIT_POLLIN, 0 };
		curl_multi_poll(a.multi, &wfd, 1, timeout, NULL);
		char drain[64];
		while (read(sig_pipe[0], drain, sizeof(drain)) > 0)
			;
		if (got_hup) {
			got_hup = 0;
			reload_config(&a);
		}
		int running;
		curl_multi_perform(a.multi, &running);
		CURLMsg *m;
		int left;
		while ((m = curl_multi_info_read(a.multi, &left))) {
			if (m->msg != CURLMSG_DONE)
				continue;
			if (m->easy_handle == a.sync)
				sync_done(&a, m->data.result);
			else if (m->easy_handle == a.ack.h)
				ack_done(&a, m->data.result);
		}
	}
	log_info("stopping at version %llu", (unsigned long long)a.state.version);
out:
	agent_free(&a);
	agent_config_release(&a.cfg);
	curl_global_cleanup();
	close(sig_pipe[0]);
	close(sig_pipe[1]);
	sig_pipe[0] = sig_pipe[1] = -1;
	return code;
}
