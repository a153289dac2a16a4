/* traffic_report.c: the live generation's traffic, for traffic-aware gates
 * (docs/gates.md). Two sources: the access log over local syslog
 * (--traffic-listen: traffic_syslog.c reads it, traffic_count.c counts
 * it), or haproxy's stats socket (--traffic-socket without
 * --traffic-listen: a reading when a generation goes live is the base,
 * later readings less it are its traffic). A new live generation (the
 * consumer's id of what serves) starts from zero. Every ACK carries the
 * traffic; while the plane's heartbeats ask ("report":S), a report is
 * posted to /v1/report every S seconds, one at a time, on the shared multi
 * handle. */
#include "agent_int.h"
#include "consumer.h"
#include "credentials.h"
#include "haproxy_stats.h"
#include "log.h"
#include "traffic_syslog.h"
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

int traffic_report_start(struct agent *a, char *err, size_t errlen)
{
	a->traffic.fd = -1;
	traffic_count_init(&a->traffic.count);
	traffic_init(&a->traffic.base);
	traffic_init(&a->traffic.last);
	a->traffic.from_socket = a->cfg.traffic_socket && !a->cfg.traffic_listen;
	a->traffic.on = a->cfg.traffic_listen || a->traffic.from_socket;
	if (!a->traffic.on)
		return 0;
	if (a->cfg.traffic_listen) {
		char inner[512];
		a->traffic.fd = tsl_open(a->cfg.traffic_listen, inner, sizeof(inner));
		if (a->traffic.fd < 0) {
			snprintf(err, errlen, "traffic-listen: %s", inner);
			return -1;
		}
		log_info("traffic: counting the access log sent to udp %s", a->cfg.traffic_listen);
	} else {
		log_info("traffic: reading haproxy's stats socket %s", a->cfg.traffic_socket);
	}
	traffic_report_live(a);
	return 0;
}

void traffic_report_release(struct agent *a)
{
	if (!a->traffic.on)
		return;
	if (a->traffic.h) {
		curl_multi_remove_handle(a->multi, a->traffic.h);
		curl_easy_cleanup(a->traffic.h);
		credentials_free_headers(a->traffic.headers);
	}
	if (a->traffic.fd >= 0)
		close(a->traffic.fd);
	traffic_count_release(&a->traffic.count);
	traffic_release(&a->traffic.base);
	traffic_release(&a->traffic.last);
	buf_release(&a->traffic.sent);
	buf_release(&a->traffic.resp);
	memset(&a->traffic, 0, sizeof(a->traffic));
	a->traffic.fd = -1;
}

/* ---- haproxy's stats socket --------------------------------------------------------- */

/* A reading of the stats socket into out; false (said once) when it fails. */
static bool socket_read(struct agent *a, struct traffic *out)
{
	char err[512];
	if (haproxy_stats_read(a->cfg.traffic_socket, SOCKET_TIMEOUT_S, out, err, sizeof(err)) < 0) {
		if (!a->traffic.socket_failing)
			log_warn("traffic: %s", err);
		else
			log_debug("traffic: %s", err);
		a->traffic.socket_failing = true;
		return false;
	}
	if (a->traffic.socket_failing)
		log_info("traffic: haproxy's stats socket answers again");
	a->traffic.socket_failing = false;
	out->until = wall_now();
	return true;
}

/* The live generation's traffic from a new reading, into a->traffic.last. */
static void socket_refresh(struct agent *a)
{
	struct traffic now;
	traffic_init(&now);
	if (socket_read(a, &now)) {
		traffic_diff(&now, &a->traffic.base, &a->traffic.last);
		snprintf(a->traffic.last.gen, sizeof(a->traffic.last.gen), "%s", a->traffic.live);
		a->traffic.last.since = a->traffic.live_since;
		a->traffic.last.until = now.until;
	}
	a->traffic.last.version = a->state.version;
	traffic_release(&now);
}

/* ---- the live generation ----------------------------------------------------------- */

void traffic_report_live(struct agent *a)
{
	if (!a->traffic.on || !a->cons)
		return;
	const char *gen = a->cons->ops->live ? a->cons->ops->live(a->cons) : NULL;
	if (!gen)
		gen = "";
	double now = wall_now();
	if (!a->traffic.from_socket) {
		if (traffic_count_live(&a->traffic.count, gen, a->state.version, now))
			log_debug("traffic: generation %s (version %llu) live: counting from zero", *gen ? gen : "(none)",
				  (unsigned long long)a->state.version);
		return;
	}
	if (strcmp(gen, a->traffic.live) == 0)
		return;
	/* what haproxy counted so far belongs to the generations before */
	snprintf(a->traffic.live, sizeof(a->traffic.live), "%s", gen);
	a->traffic.live_since = now;
	traffic_clear(&a->traffic.base);
	a->traffic.base.gen[0] = '\0';
	socket_read(a, &a->traffic.base);
	traffic_clear(&a->traffic.last);
	snprintf(a->traffic.last.gen, sizeof(a->traffic.last.gen), "%s", gen);
	a->traffic.last.since = a->traffic.last.until = now;
	a->traffic.last.version = a->state.version;
}

int traffic_report_fd(const struct agent *a)
{
	return a->traffic.on && now_ms() >= a->traffic.next_read_ms ? a->traffic.fd : -1;
}

static void on_datagram(void *ctx, const char *data, size_t len)
{
	traffic_count_datagram(ctx, data, len);
}

void traffic_report_read(struct agent *a)
{
	if (!a->traffic.on || a->traffic.fd < 0)
		return;
	int64_t now = now_ms();
	if (now < a->traffic.next_read_ms)
		return;
	traffic_report_live(a);   /* a datagram of a new generation counts for it */
	size_t got = tsl_drain(a->traffic.fd, TRAFFIC_SYSLOG_BATCH, on_datagram, &a->traffic.count);
	/* waking the loop for each request would cost far more than counting
	 * it: the socket's buffer holds them meanwhile (a full batch: more
	 * wait, read again at once) */
	if (got > 0 && got < TRAFFIC_SYSLOG_BATCH)
		a->traffic.next_read_ms = now + (got < TRAFFIC_READ_BUSY ? TRAFFIC_READ_EVERY_MS : TRAFFIC_READ_BUSY_MS);
}

const struct traffic *traffic_report_view(const struct agent *a)
{
	if (!a->traffic.on)
		return NULL;
	return a->traffic.from_socket ? &a->traffic.last : &a->traffic.count.t;
}

bool traffic_report_now(struct agent *a, struct traffic *out)
{
	if (!a->traffic.on)
		return false;
	traffic_report_live(a);
	if (a->traffic.from_socket) {
		socket_refresh(a);
		traffic_copy(out, &a->traffic.last);
		return true;
	}
	a->traffic.count.t.version = a->state.version;
	traffic_copy(out, &a->traffic.count.t);
	out->until = wall_now();
	return true;
}

void traffic_report_ack(struct agent *a, struct buf *b)
{
	struct traffic t;
	struct buf j = BUF_INIT;
	traffic_init(&t);
	if (traffic_report_now(a, &t)) {
		traffic_to_json(&t, &j);
		if (j.len <= ACK_TRAFFIC_MAX) {
			buf_puts(b, ",\"traffic\":");
			buf_append(b, j.data, j.len);
		} else {
			log_debug("traffic: %zu bytes of it, too many for an ACK (%zu routes): left to the reports",
				  j.len, t.n);
		}
	}
	buf_release(&j);
	traffic_release(&t);
}

/* ---- reports ------------------------------------------------------------------------ */

void traffic_report_heartbeat(struct agent *a, const cJSON *hb)
{
	if (!a->traffic.on)
		return;
	const cJSON *r = cJSON_GetObjectItemCaseSensitive(hb, "report");
	double s = cJSON_IsNumber(r) ? r->valuedouble : 0;
	if (!(s >= REPORT_MIN_S && s <= REPORT_MAX_S)) {
		if (r && !cJSON_IsNull(r))
			log_debug("traffic: a heartbeat's report interval is not a number in %g..%g: ignored",
				  REPORT_MIN_S, REPORT_MAX_S);
		if (a->traffic.report_s > 0)
			log_info("traffic: the plane no longer asks for reports");
		a->traffic.report_s = 0;
		return;
	}
	int64_t now = now_ms();
	double hb_s = a->heartbeat_s > 0 ? a->heartbeat_s : DEFAULT_HEARTBEAT_S;
	if (a->traffic.report_s <= 0) {
		log_info("traffic: the plane asks for a report every %gs", s);
		a->traffic.next_report_ms = now;   /* the first at once */
	} else if (s != a->traffic.report_s) {
		log_info("traffic: the plane asks for a report every %gs now", s);
		if (a->traffic.next_report_ms > now + (int64_t)(s * 1000))
			a->traffic.next_report_ms = now + (int64_t)(s * 1000);
	}
	a->traffic.report_s = s;
	a->traffic.report_until_ms = now + (int64_t)(REPORT_LAPSE * hb_s * 1000);
}

static void report_start(struct agent *a)
{
	struct traffic t;
	traffic_init(&t);
	traffic_report_now(a, &t);
	buf_reset(&a->traffic.sent);
	buf_puts(&a->traffic.sent, "{\"node\":");
	buf_json_string(&a->traffic.sent, a->cfg.node);
	buf_printf(&a->traffic.sent, ",\"version\":%llu,\"traffic\":", (unsigned long long)a->state.version);
	traffic_to_json(&t, &a->traffic.sent);
	buf_putc(&a->traffic.sent, '}');
	log_debug("traffic: sending a report (version %llu, %zu routes, %zu bytes)", (unsigned long long)t.version,
		  t.n, a->traffic.sent.len);
	traffic_release(&t);
	a->traffic.h = agent_post(a, "/v1/report", &a->traffic.sent, &a->traffic.resp, 10000L, &a->traffic.headers);
}

void traffic_report_done(struct agent *a, CURLcode code)
{
	long status = 0;
	curl_easy_getinfo(a->traffic.h, CURLINFO_RESPONSE_CODE, &status);
	curl_multi_remove_handle(a->multi, a->traffic.h);
	curl_easy_cleanup(a->traffic.h);
	credentials_free_headers(a->traffic.headers);
	a->traffic.h = NULL;
	a->traffic.headers = NULL;
	const char *body = a->traffic.resp.data ? a->traffic.resp.data : "";
	if (code == CURLE_OK && status >= 200 && status < 300) {
		if (a->traffic.report_failing)
			log_info("traffic: reports are delivered again");
		a->traffic.report_failing = false;
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
		if (!a->traffic.report_failing)
			log_warn("traffic: the plane refused the report (%ld): %.300s", status, body);
		a->traffic.report_failing = true;
		return;
	}
	if (!a->traffic.report_failing)
		log_warn("traffic: a report was not delivered (%s%.300s); the next goes at its time",
			 code != CURLE_OK ? curl_easy_strerror(code) : "plane error: ", code != CURLE_OK ? "" : body);
	a->traffic.report_failing = true;
}

void traffic_report_tick(struct agent *a, int64_t *wake)
{
	if (!a->traffic.on)
		return;
	int64_t now = now_ms();
	if (a->traffic.fd >= 0 && a->traffic.next_read_ms > now && a->traffic.next_read_ms < *wake)
		*wake = a->traffic.next_read_ms;
	if (now >= a->traffic.next_refresh_ms) {
		/* what the metrics show moves with the traffic, not the state */
		if (a->traffic.from_socket && (a->cfg.metrics_listen || a->cfg.metrics_file))
			socket_refresh(a);
		metrics_write(a);
		a->traffic.next_refresh_ms = now + REFRESH_MS;
	}
	if (a->cfg.metrics_file && a->traffic.next_refresh_ms < *wake)
		*wake = a->traffic.next_refresh_ms;
	if (a->traffic.report_s <= 0)
		return;
	if (now >= a->traffic.report_until_ms) {
		log_info("traffic: no heartbeat renewed the request for reports: stopping them");
		a->traffic.report_s = 0;
		return;
	}
	if (!a->traffic.h && now >= a->traffic.next_report_ms) {
		report_start(a);
		a->traffic.next_report_ms = now + (int64_t)(a->traffic.report_s * 1000);
	}
	if (a->traffic.next_report_ms < *wake)
		*wake = a->traffic.next_report_ms;
	if (a->traffic.report_until_ms < *wake)
		*wake = a->traffic.report_until_ms;
}
