/* traffic/report.c: the live generation's traffic, for traffic-aware gates
 * (docs/gates.md). Two sources: the access log over local syslog
 * (--traffic-listen: traffic/syslog.c reads it, traffic/count.c counts
 * it), or haproxy's stats socket (--traffic-socket without
 * --traffic-listen: a reading when a generation goes live is the base,
 * later readings less it are its traffic). A new live generation (the
 * consumer's id of what serves) starts from zero. Every ACK carries the
 * traffic; while the plane's heartbeats ask ("report":S), a report is
 * posted to /v1/report every S seconds, one at a time, on the shared multi
 * handle. */
#include "traffic/report.h"
#include "credentials.h"
#include "log.h"
#include "traffic/haproxy_stats.h"
#include "traffic/syslog.h"
#include "util.h"
#include "xmalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SOCKET_TIMEOUT_S 1.0
#define REFRESH_MS 5000          /* the metrics' reading (stats socket) and file */
#define REPORT_MIN_S 0.05
#define REPORT_MAX_S 3600.0
#define REPORT_LAPSE 3           /* heartbeat intervals a request lasts */
#define DEFAULT_HEARTBEAT_S 10.0
/* The most bytes of traffic an ACK carries: the plane takes ACKs and
 * reports of up to 256 KiB (an older one, ACKs of 64 KiB: a bigger ACK it
 * would refuse whole); more goes in reports only. */
#define ACK_TRAFFIC_MAX 32768

static double wall_now(void)
{
	return (double)wall_ms() / 1000.0;
}

int traffic_report_start(struct traffic_report *t, const struct traffic_report_host *host, const char *listen,
			 int fd, const char *socket, char *err, size_t errlen)
{
	t->host = *host;
	t->fd = -1;
	traffic_count_init(&t->count);
	traffic_init(&t->base);
	traffic_init(&t->last);
	t->from_socket = socket && !listen;
	t->on = listen || t->from_socket;
	if (!t->on) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	if (listen) {
		char inner[512];
		t->fd = fd >= 0 ? fd : tsl_open(listen, inner, sizeof(inner));
		if (t->fd < 0) {
			snprintf(err, errlen, "traffic-listen: %s", inner);
			return -1;
		}
		log_info("traffic: counting the access log sent to udp %s%s", listen,
			 fd >= 0 ? " (a free port picked: --traffic-listen off disables counting)" : "");
	} else {
		t->socket = xstrdup(socket);
		log_info("traffic: reading haproxy's stats socket %s", socket);
	}
	traffic_report_live(t);
	return 0;
}

void traffic_report_release(struct traffic_report *t)
{
	if (!t->on)
		return;
	if (t->h) {
		curl_multi_remove_handle(t->host.multi, t->h);
		curl_easy_cleanup(t->h);
		credentials_free_headers(t->headers);
	}
	if (t->fd >= 0)
		close(t->fd);
	free(t->socket);
	traffic_count_release(&t->count);
	traffic_release(&t->base);
	traffic_release(&t->last);
	buf_release(&t->sent);
	buf_release(&t->resp);
	memset(t, 0, sizeof(*t));
	t->fd = -1;
}

/* ---- haproxy's stats socket --------------------------------------------------------- */

/* A reading of the stats socket into out; false (said once) when it fails. */
static bool socket_read(struct traffic_report *t, struct traffic *out)
{
	char err[512];
	if (haproxy_stats_read(t->socket, SOCKET_TIMEOUT_S, out, err, sizeof(err)) < 0) {
		if (!t->socket_failing)
			log_warn("traffic: %s", err);
		else
			log_debug("traffic: %s", err);
		t->socket_failing = true;
		return false;
	}
	if (t->socket_failing)
		log_info("traffic: haproxy's stats socket answers again");
	t->socket_failing = false;
	out->until = wall_now();
	return true;
}

/* The live generation's traffic from a new reading, into t->last. */
static void socket_refresh(struct traffic_report *t)
{
	struct traffic now;
	traffic_init(&now);
	if (socket_read(t, &now)) {
		traffic_diff(&now, &t->base, &t->last);
		snprintf(t->last.gen, sizeof(t->last.gen), "%s", t->live);
		t->last.since = t->live_since;
		t->last.until = now.until;
	}
	t->last.version = t->host.version(t->host.ctx);
	traffic_release(&now);
}

/* ---- the live generation ----------------------------------------------------------- */

void traffic_report_live(struct traffic_report *t)
{
	if (!t->on)
		return;
	const char *gen = t->host.live(t->host.ctx);
	if (!gen)
		return;
	uint64_t version = t->host.version(t->host.ctx);
	double now = wall_now();
	if (!t->from_socket) {
		if (traffic_count_live(&t->count, gen, version, now))
			log_debug("traffic: generation %s (version %llu) live: counting from zero", *gen ? gen : "(none)",
				  (unsigned long long)version);
		return;
	}
	if (strcmp(gen, t->live) == 0)
		return;
	/* what haproxy counted so far belongs to the generations before */
	snprintf(t->live, sizeof(t->live), "%s", gen);
	t->live_since = now;
	traffic_clear(&t->base);
	t->base.gen[0] = '\0';
	socket_read(t, &t->base);
	traffic_clear(&t->last);
	snprintf(t->last.gen, sizeof(t->last.gen), "%s", gen);
	t->last.since = t->last.until = now;
	t->last.version = version;
}

void traffic_report_restart(struct traffic_report *t)
{
	if (!t->on)
		return;
	double now = wall_now();
	if (!t->from_socket) {
		traffic_count_restart(&t->count, now);
		return;
	}
	/* what haproxy counted so far was served before the change */
	t->live_since = now;
	traffic_clear(&t->base);
	t->base.gen[0] = '\0';
	socket_read(t, &t->base);
	traffic_clear(&t->last);
	snprintf(t->last.gen, sizeof(t->last.gen), "%s", t->live);
	t->last.since = t->last.until = now;
	t->last.version = t->host.version(t->host.ctx);
}

int traffic_report_fd(const struct traffic_report *t)
{
	return t->on && now_ms() >= t->next_read_ms ? t->fd : -1;
}

static void on_datagram(void *ctx, const char *data, size_t len)
{
	traffic_count_datagram(ctx, data, len);
}

void traffic_report_read(struct traffic_report *t)
{
	if (!t->on || t->fd < 0)
		return;
	int64_t now = now_ms();
	if (now < t->next_read_ms)
		return;
	traffic_report_live(t);   /* a datagram of a new generation counts for it */
	size_t got = tsl_drain(t->fd, TRAFFIC_SYSLOG_BATCH, on_datagram, &t->count);
	/* waking the loop for each request would cost far more than counting
	 * it: the socket's buffer holds them meanwhile (a full batch: more
	 * wait, read again at once) */
	if (got > 0 && got < TRAFFIC_SYSLOG_BATCH)
		t->next_read_ms = now + (got < TRAFFIC_READ_BUSY ? TRAFFIC_READ_EVERY_MS : TRAFFIC_READ_BUSY_MS);
}

const struct traffic *traffic_report_view(const struct traffic_report *t)
{
	if (!t->on)
		return NULL;
	return t->from_socket ? &t->last : &t->count.t;
}

bool traffic_report_now(struct traffic_report *t, struct traffic *out)
{
	if (!t->on)
		return false;
	traffic_report_live(t);
	if (t->from_socket) {
		socket_refresh(t);
		traffic_copy(out, &t->last);
		return true;
	}
	t->count.t.version = t->host.version(t->host.ctx);
	traffic_copy(out, &t->count.t);
	out->until = wall_now();
	return true;
}

void traffic_report_counts(const struct traffic_report *t, struct buf *b)
{
	if (t->on) {
		buf_puts(b, ",\"counts\":true");
		return;
	}
	buf_puts(b, ",\"counts\":false,\"counts_reason\":");
	buf_json_string(b, t->why_off ? t->why_off : "it collects no traffic");
}

void traffic_report_ack(struct traffic_report *t, struct buf *b)
{
	traffic_report_counts(t, b);
	struct traffic now;
	struct buf j = BUF_INIT;
	traffic_init(&now);
	if (traffic_report_now(t, &now)) {
		traffic_to_json(&now, &j);
		if (j.len <= ACK_TRAFFIC_MAX) {
			buf_puts(b, ",\"traffic\":");
			buf_append(b, j.data, j.len);
		} else {
			log_debug("traffic: %zu bytes of it, too many for an ACK (%zu routes): left to the reports",
				  j.len, now.n);
		}
	}
	buf_release(&j);
	traffic_release(&now);
}

/* ---- reports ------------------------------------------------------------------------ */

void traffic_report_heartbeat(struct traffic_report *t, const cJSON *hb, double heartbeat_s)
{
	if (!t->on)
		return;
	const cJSON *r = cJSON_GetObjectItemCaseSensitive(hb, "report");
	double s = cJSON_IsNumber(r) ? r->valuedouble : 0;
	if (!(s >= REPORT_MIN_S && s <= REPORT_MAX_S)) {
		if (r && !cJSON_IsNull(r))
			log_debug("traffic: a heartbeat's report interval is not a number in %g..%g: ignored",
				  REPORT_MIN_S, REPORT_MAX_S);
		if (t->report_s > 0)
			log_info("traffic: the plane no longer asks for reports");
		t->report_s = 0;
		return;
	}
	int64_t now = now_ms();
	double hb_s = heartbeat_s > 0 ? heartbeat_s : DEFAULT_HEARTBEAT_S;
	if (t->report_s <= 0) {
		log_info("traffic: the plane asks for a report every %gs", s);
		t->next_report_ms = now;   /* the first at once */
	} else if (s != t->report_s) {
		log_info("traffic: the plane asks for a report every %gs now", s);
		if (t->next_report_ms > now + (int64_t)(s * 1000))
			t->next_report_ms = now + (int64_t)(s * 1000);
	}
	t->report_s = s;
	t->report_until_ms = now + (int64_t)(REPORT_LAPSE * hb_s * 1000);
}

static void report_start(struct traffic_report *t, const char *node)
{
	struct traffic now;
	traffic_init(&now);
	traffic_report_now(t, &now);
	buf_reset(&t->sent);
	buf_puts(&t->sent, "{\"node\":");
	buf_json_string(&t->sent, node);
	buf_printf(&t->sent, ",\"version\":%llu,\"traffic\":", (unsigned long long)t->host.version(t->host.ctx));
	traffic_to_json(&now, &t->sent);
	buf_putc(&t->sent, '}');
	log_debug("traffic: sending a report (version %llu, %zu routes, %zu bytes)", (unsigned long long)now.version,
		  now.n, t->sent.len);
	traffic_release(&now);
	t->h = t->host.post(t->host.ctx, "/v1/report", &t->sent, &t->resp, 10000L, &t->headers);
}

void traffic_report_done(struct traffic_report *t, CURLcode code)
{
	long status = 0;
	curl_easy_getinfo(t->h, CURLINFO_RESPONSE_CODE, &status);
	curl_multi_remove_handle(t->host.multi, t->h);
	curl_easy_cleanup(t->h);
	credentials_free_headers(t->headers);
	t->h = NULL;
	t->headers = NULL;
	const char *body = t->resp.data ? t->resp.data : "";
	if (code == CURLE_OK && status >= 200 && status < 300) {
		if (t->report_failing)
			log_info("traffic: reports are delivered again");
		t->report_failing = false;
		log_debug("traffic: report delivered");
		return;
	}
	if (code == CURLE_OK && (status == 404 || status == 405 || status == 421)) {
		/* a plane (or a relay) that does not take reports: nothing to retry */
		log_debug("traffic: the plane refused the report (%ld): %.300s", status, body);
		return;
	}
	if (code == CURLE_OK && status >= 400 && status < 500) {
		/* refused as wrong: worth saying, once per run of them */
		if (!t->report_failing)
			log_warn("traffic: the plane refused the report (%ld): %.300s", status, body);
		t->report_failing = true;
		return;
	}
	if (!t->report_failing)
		log_warn("traffic: a report was not delivered (%s%.300s); the next goes at its time",
			 code != CURLE_OK ? curl_easy_strerror(code) : "plane error: ", code != CURLE_OK ? "" : body);
	t->report_failing = true;
}

void traffic_report_tick(struct traffic_report *t, const char *node, bool metrics, bool metrics_file,
			 int64_t *wake)
{
	if (!t->on)
		return;
	int64_t now = now_ms();
	if (t->fd >= 0 && t->next_read_ms > now && t->next_read_ms < *wake)
		*wake = t->next_read_ms;
	if (now >= t->next_refresh_ms) {
		/* what the metrics show moves with the traffic, not the state */
		if (t->from_socket && metrics)
			socket_refresh(t);
		t->host.metrics_write(t->host.ctx);
		t->next_refresh_ms = now + REFRESH_MS;
	}
	if (metrics_file && t->next_refresh_ms < *wake)
		*wake = t->next_refresh_ms;
	if (t->report_s <= 0)
		return;
	if (now >= t->report_until_ms) {
		log_info("traffic: no heartbeat renewed the request for reports: stopping them");
		t->report_s = 0;
		return;
	}
	if (!t->h && now >= t->next_report_ms) {
		report_start(t, node);
		t->next_report_ms = now + (int64_t)(t->report_s * 1000);
	}
	if (t->next_report_ms < *wake)
		*wake = t->next_report_ms;
	if (t->report_until_ms < *wake)
		*wake = t->report_until_ms;
}
