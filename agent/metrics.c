/* metrics.c: the agent's Prometheus text: --metrics-file for
 * node_exporter's textfile collector, written atomically (temp file,
 * rename) whenever what it says changed, and the same text for
 * --metrics-listen (metrics_http.c). The versions, the state, pushes
 * applied, refused and merged, apply time by phase, runtime updates and
 * reloads by reason, the last sync,
 * reconnects, moves between planes, whether the plane says it is stale,
 * last-good's size, the drain guard's counts (guard.c), with --trust the
 * verification figures (staleness, refusals by reason), and with traffic stats the live
 * generation's requests, 5xx answers and latency per route. */
#include "agent_int.h"
#include "lastgood.h"
#include "log.h"
#include "util.h"
#include "xmalloc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct buf last;   /* what the file says now */

/* upper bounds in seconds; the last bucket, +Inf, is the count */
static const double bounds[APPLY_HIST_BUCKETS] = { 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
						     0.1, 0.25, 0.5, 1, 2.5, 5, 10 };
static const char *const phase_names[APPLY_PHASES] = { "stage", "check", "reload", "persist" };

static void gauge(struct buf *b, const char *name, const char *help, long long v)
{
	buf_printf(b, "# HELP %s %s\n# TYPE %s gauge\n%s %lld\n", name, help, name, name, v);
}

static void counter(struct buf *b, const char *name, const char *help, unsigned long long v)
{
	buf_printf(b, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", name, help, name, name, v);
}

void metrics_observe_apply(struct agent *a, const int64_t us[APPLY_PHASES])
{
	for (int p = 0; p < APPLY_PHASES; p++) {
		struct apply_hist *h = &a->m.phase[p];
		double s = (double)(us[p] > 0 ? us[p] : 0) / 1e6;
		for (int i = 0; i < APPLY_HIST_BUCKETS; i++)
			if (s <= bounds[i]) {
				h->bucket[i]++;
				break;
			}
		h->count++;
		h->sum += s;
	}
}

void metrics_contact(struct agent *a)
{
	a->m.last_contact = wall_seconds();
}

static void histogram(struct buf *b, const struct agent *a)
{
	const char *n = "tetherd_apply_duration_seconds";
	buf_printf(b, "# HELP %s Time a successful apply spent in each phase.\n# TYPE %s histogram\n", n, n);
	for (int p = 0; p < APPLY_PHASES; p++) {
		const struct apply_hist *h = &a->m.phase[p];
		uint64_t cum = 0;
		for (int i = 0; i < APPLY_HIST_BUCKETS; i++) {
			cum += h->bucket[i];
			buf_printf(b, "%s_bucket{phase=\"%s\",le=\"%g\"} %llu\n", n, phase_names[p], bounds[i],
				   (unsigned long long)cum);
		}
		buf_printf(b, "%s_bucket{phase=\"%s\",le=\"+Inf\"} %llu\n", n, phase_names[p],
			   (unsigned long long)h->count);
		buf_printf(b, "%s_sum{phase=\"%s\"} %.6f\n%s_count{phase=\"%s\"} %llu\n", n, phase_names[p], h->sum, n,
			   phase_names[p], (unsigned long long)h->count);
	}
}

/* The live generation's traffic, per route (traffic/report.c). */
static void traffic_metrics(const struct agent *a, struct buf *b)
{
	const struct traffic *t = traffic_report_view(&a->traffic);
	if (!t)
		return;
	static const struct {
		const char *name, *type, *help;
	} m[4] = {
		{ "tetherd_traffic_requests_total", "counter", "Requests the live generation served, by route." },
		{ "tetherd_traffic_errors_total", "counter", "5xx answers of the live generation, by route." },
		{ "tetherd_traffic_latency_p50_ms", "gauge",
		  "The live generation's median latency by route (ms; haproxy's stats socket: its mean)." },
		{ "tetherd_traffic_latency_p99_ms", "gauge",
		  "The live generation's 99th percentile latency by route (ms; haproxy's stats socket: its mean)." },
	};
	for (int k = 0; k < 4; k++) {
		buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", m[k].name, m[k].help, m[k].name, m[k].type);
		for (size_t i = 0; i < t->n; i++) {
			const struct traffic_route *r = &t->routes[i];
			buf_printf(b, "%s{route=\"%s\"} ", m[k].name, r->name);
			if (k == 0)
				buf_printf(b, "%llu\n", (unsigned long long)r->requests);
			else if (k == 1)
				buf_printf(b, "%llu\n", (unsigned long long)r->errors);
			else
				buf_printf(b, "%.3f\n", traffic_quantile(r->hist, k == 2 ? 0.5 : 0.99));
		}
	}
	gauge(b, "tetherd_traffic_generation_since_seconds",
	      "When the live generation went live (seconds since the epoch), its counters' start.", (long long)t->since);
	if (a->traffic.from_socket)
		return;
	buf_puts(b, "# HELP tetherd_traffic_dropped_total Access log datagrams dropped, by reason.\n"
		    "# TYPE tetherd_traffic_dropped_total counter\n");
	for (int d = 0; d < TD_N; d++)
		buf_printf(b, "tetherd_traffic_dropped_total{reason=\"%s\"} %llu\n", traffic_drop_name((enum traffic_drop)d),
			   (unsigned long long)a->traffic.count.dropped[d]);
	counter(b, "tetherd_traffic_other_generation_total",
		"Access log lines of another generation than the live one (not counted as its traffic).",
		a->traffic.count.other_gen);
}

void metrics_text(const struct agent *a, struct buf *b, bool live)
{
	gauge(b, "tetherd_version", "The version this node runs.", (long long)a->state.version);
	gauge(b, "tetherd_plane_version", "The newest version the plane announced.", (long long)a->plane_version);
	gauge(b, "tetherd_resources", "Resources in the applied state.", (long long)a->state.count);
	counter(b, "tetherd_pushes_applied_total", "Pushes applied.", a->applied);
	counter(b, "tetherd_pushes_rejected_total", "Pushes refused (NACKed).", a->rejected);
	counter(b, "tetherd_guard_refusals_total", "Pushes refused because a change crosses a guard.", a->guard_refused);
	counter(b, "tetherd_guard_overrides_total",
		"Pushes applied although a change crosses a guard, under the plane's override.", a->guard_overridden);
	counter(b, "tetherd_pushes_merged_total",
		"Pushes that arrived while another waited and were applied with it, as one change.", a->m.merged);
	histogram(b, a);
	counter(b, "tetherd_runtime_updates_total",
		"Changes applied over haproxy's runtime API (--runtime-api), without a reload.", a->m.runtime_updates);
	buf_puts(b, "# HELP tetherd_reloads_total Reloads of the consumer, by reason.\n"
		    "# TYPE tetherd_reloads_total counter\n");
	for (int r = 0; r < RR_N; r++)
		buf_printf(b, "tetherd_reloads_total{reason=\"%s\"} %llu\n", reload_reason_name((enum reload_reason)r),
			   (unsigned long long)a->m.reloads[r]);
	gauge(b, "tetherd_last_sync_timestamp_seconds",
	      "When the plane last confirmed what this node runs (seconds since the epoch; 0: never).",
	      (long long)a->m.last_contact);
	if (live)
		gauge(b, "tetherd_last_sync_age_seconds",
		      "Seconds since the plane last confirmed what this node runs (-1: never).",
		      a->m.last_contact ? (long long)(wall_seconds() - a->m.last_contact) : -1LL);
	counter(b, "tetherd_stream_reconnects_total", "Streams opened again after the first.",
		a->m.stream_opens > 1 ? a->m.stream_opens - 1 : 0);
	counter(b, "tetherd_plane_moves_total",
		"Moves to another plane of the list (after a failure, or off a plane that says it is stale).",
		a->m.plane_moves);
	counter(b, "tetherd_stale_moves_total", "Moves off a plane that said it was stale to one that was not.",
		a->m.stale_moves);
	gauge(b, "tetherd_plane_stale", "1 while the plane dialled now says it is stale (cut off from its source).",
	      a->fresh.now.on);
	struct lastgood_info li = { 0 };
	if (a->lg)
		lastgood_info(a->lg, &li);
	gauge(b, "tetherd_lastgood_bytes", "Bytes of last-good on disk (snapshot and journal).",
	      (long long)(li.snapshot_bytes + li.journal_bytes));
	buf_puts(b, "# HELP tetherd_state The agent's state (1 for the current one).\n# TYPE tetherd_state gauge\n");
	enum agent_state shown = a->written.state;
	for (int s = ST_BOOTING; s <= ST_DEFERRED; s++)
		buf_printf(b, "tetherd_state{state=\"%s\"} %d\n", status_state_name((enum agent_state)s), s == (int)shown);
	if (a->trust.on) {
		gauge(b, "tetherd_stale", "1 when no valid signed statement vouches for what runs.", a->trust.stale);
		gauge(b, "tetherd_statement_fresh_until_seconds",
		      "Until when the newest valid statement vouches (seconds since the epoch).", a->trust.fresh_until);
		gauge(b, "tetherd_verified_version", "The highest version verified (lower is a rollback).",
		      (long long)a->trust.hwm);
		buf_puts(b, "# HELP tetherd_verify_failures_total Statements and pushes refused, by reason.\n"
			    "# TYPE tetherd_verify_failures_total counter\n");
		for (int f = 0; f < TF_N; f++)
			buf_printf(b, "tetherd_verify_failures_total{reason=\"%s\"} %llu\n",
				   trust_fail_name((enum trust_fail)f), (unsigned long long)a->trust.failures[f]);
	}
	guard_metrics(a, b, live);
	traffic_metrics(a, b);
}

void metrics_write(struct agent *a)
{
	if (!a->cfg.metrics_file)
		return;
	struct buf b = BUF_INIT;
	metrics_text(a, &b, false);
	if (last.data && last.len == b.len && memcmp(last.data, b.data, b.len) == 0) {
		buf_release(&b);
		return;
	}
	/* a collector reads it while we write: whole or not at all (no
	 * fsync: after a crash the next change writes it again) */
	if (write_file_replace(a->cfg.metrics_file, b.data, b.len, 0644, false) < 0) {
		log_warn("metrics: cannot write '%s': %s", a->cfg.metrics_file, strerror(errno));
		buf_release(&b);
	} else {
		buf_release(&last);
		last = b;
	}
}

void metrics_release(void)
{
	buf_release(&last);
}
