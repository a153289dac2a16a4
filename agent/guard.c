/* guard.c: the drain guard (see guard.h): before an apply, the consumer's
 * old workers still draining are counted (consumer/drain.c) and the apply
 * is held while there are more than --max-draining, for at most
 * --max-defer; and the guard's metrics. */
#include "guard.h"
#include "agent_int.h"
#include "log.h"
#include "util.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RECOUNT_MS 250    /* while holding: old workers leave at any moment */
#define REFRESH_MS 1000   /* the metrics file's gauges while workers drain */

static const char proc_root[] = "/proc";

/* The consumer has workers the agent can count: a master in --pidfile. */
static bool watching(const struct agent *a)
{
	return a->cfg.pidfile && !a->cfg.reload && strcmp(a->cfg.consumer, "files") != 0;
}

static bool guarding(const struct agent *a)
{
	return watching(a) && !a->cfg.once && a->cfg.max_defer > 0;
}

static enum drain_kind kind_of(const struct agent *a)
{
	return strcmp(a->cfg.consumer, "haproxy") == 0 ? DRAIN_HAPROXY : DRAIN_NGINX;
}

/* When the agent last asked for a reload (just before the signal), in
 * clock ticks since boot (the unit of /proc's start times, taken on
 * CLOCK_BOOTTIME then, so a suspend since does not move it); 0: none yet. */
static uint64_t reloaded_ticks(const struct agent *a)
{
	long hz = sysconf(_SC_CLK_TCK);
	int64_t at = a->guard.reload_sent_boot;
	return at > 0 && hz > 0 ? (uint64_t)at * (uint64_t)hz / 1000 : 0;
}

void guard_reload_sent(struct agent *a)
{
	struct timespec bt;
	a->guard.reload_sent_ms = now_ms();
	a->guard.reload_sent_boot =
		clock_gettime(CLOCK_BOOTTIME, &bt) == 0 ? (int64_t)bt.tv_sec * 1000 + bt.tv_nsec / 1000000 : 0;
}

static uint64_t limit_of(const struct agent *a, const struct drain_count *dc)
{
	return a->cfg.max_draining == AGENT_DRAINING_AUTO ? 2 * (uint64_t)dc->live : a->cfg.max_draining;
}

static void lower(int64_t *wake, int64_t t)
{
	if (wake && t < *wake)
		*wake = t;
}

static double mib(uint64_t bytes)
{
	return (double)bytes / (1024.0 * 1024.0);
}

/* Counts now into a->guard.last. 1, or 0 when nothing was counted (no
 * master runs, or the count failed: said once). */
static int count(struct agent *a, int64_t now)
{
	struct guard *g = &a->guard;
	char err[512];
	struct drain_count dc;
	int rc = drain_count(proc_root, a->cfg.pidfile, kind_of(a), reloaded_ticks(a), &dc, err, sizeof(err));
	if (rc < 0 && !g->failed_logged)
		log_warn("drain guard: %s: the old workers are not counted, and reloads not held", err);
	g->failed_logged = rc < 0;
	g->counted = rc > 0;
	g->counted_ms = now;
	if (rc <= 0) {
		memset(&g->last, 0, sizeof(g->last));
		return 0;
	}
	/* a master whose workers /proc does not show (another user's,
	 * hidden by hidepid= from a user outside its gid= group) cannot be
	 * guarded */
	if (!dc.live && !dc.draining && !g->blind_logged)
		log_warn("drain guard: %s's master (pid %ld) shows no worker in %s: its old workers cannot be counted "
			 "(does hidepid= hide them from this user?)", a->cfg.consumer, dc.master, proc_root);
	g->blind_logged = !dc.live && !dc.draining;
	g->last = dc;
	g->limit = limit_of(a, &dc);
	return 1;
}

static void end_spell(struct agent *a, int64_t now)
{
	struct guard *g = &a->guard;
	if (!g->since_ms)
		return;
	g->held_s += (double)(now - g->since_ms) / 1000.0;
	g->since_ms = 0;
}

bool guard_hold(struct agent *a, int64_t *wake, bool (*no_reload)(struct agent *a))
{
	struct guard *g = &a->guard;
	int64_t now = now_ms();
	if (!guarding(a)) {
		end_spell(a, now);
		return false;
	}
	int64_t max_ms = (int64_t)(a->cfg.max_defer * 1000);
	if (g->since_ms && now < g->next_ms && now < g->since_ms + max_ms) {
		if (no_reload && no_reload(a)) {
			end_spell(a, now);   /* what is queued now reloads nothing: it goes */
			return false;
		}
		lower(wake, g->next_ms < g->since_ms + max_ms ? g->next_ms : g->since_ms + max_ms);
		return true;
	}
	uint64_t version = a->queue[a->nqueue - 1].version;
	if (!count(a, now) || g->last.draining <= g->limit) {
		if (g->since_ms)
			log_info("drain guard: %s's old workers still draining: %u, at most %llu: version %llu goes "
				 "live after %.1fs held", a->cfg.consumer, g->last.draining, (unsigned long long)g->limit,
				 (unsigned long long)version, (double)(now - g->since_ms) / 1000.0);
		end_spell(a, now);
		return false;
	}
	if (no_reload && no_reload(a)) {
		end_spell(a, now);   /* it would hold, but this apply reloads nothing */
		return false;
	}
	if (!g->since_ms) {
		g->since_ms = now;
		g->deferred++;
		log_info("drain guard: %s's old workers still draining: %u (%.1f MiB), more than %llu: version %llu "
			 "waits, for up to %gs (--max-defer)", a->cfg.consumer, g->last.draining,
			 mib(g->last.draining_bytes), (unsigned long long)g->limit, (unsigned long long)version,
			 a->cfg.max_defer);
		agent_set_state(a, ST_DEFERRED);
		agent_write_status(a);
	} else if (now >= g->since_ms + max_ms) {
		g->forced++;
		log_warn("drain guard: reloading after %gs (--max-defer) with %s's old workers still draining: %u "
			 "(%.1f MiB), more than %llu: version %llu goes live", a->cfg.max_defer, a->cfg.consumer,
			 g->last.draining, mib(g->last.draining_bytes), (unsigned long long)g->limit,
			 (unsigned long long)version);
		end_spell(a, now);
		return false;
	} else {
		metrics_write(a);   /* the count moved */
	}
	g->next_ms = now + RECOUNT_MS;
	lower(wake, g->next_ms < g->since_ms + max_ms ? g->next_ms : g->since_ms + max_ms);
	return true;
}

void guard_idle(struct agent *a, int64_t *wake)
{
	struct guard *g = &a->guard;
	int64_t now = now_ms();
	if (g->since_ms) {
		/* what was held went with a resync or a move: it comes again */
		end_spell(a, now);
		if (a->astate == ST_DEFERRED) {
			agent_set_state(a, a->state.version >= a->plane_version ? ST_SYNCED : ST_SYNCING);
			agent_write_status(a);
		}
	}
	/* a scrape counts for itself; the file is written on changes, so
	 * it is counted again while old workers drain, and after a reload */
	if (!wake || !a->cfg.metrics_file || !watching(a))
		return;
	if (!(g->counted && g->last.draining > 0) && g->reload_sent_ms < g->counted_ms)
		return;
	if (now >= g->next_ms) {
		count(a, now);
		metrics_write(a);
		g->next_ms = now + REFRESH_MS;
		if (!g->last.draining)
			return;
	}
	lower(wake, g->next_ms);
}

static void metric(struct buf *b, const char *name, const char *type, const char *help)
{
	buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s ", name, help, name, type, name);
}

void guard_metrics(const struct agent *a, struct buf *b, bool live)
{
	if (!watching(a))
		return;
	const struct guard *g = &a->guard;
	struct drain_count dc = g->last;
	bool have = g->counted;
	if (live) {
		char err[512];
		have = drain_count(proc_root, a->cfg.pidfile, kind_of(a), reloaded_ticks(a), &dc, err,
				   sizeof(err)) > 0;
	}
	if (!have)
		memset(&dc, 0, sizeof(dc));
	metric(b, "tetherd_live_workers", "gauge", "The consumer's workers serving the live generation.");
	buf_printf(b, "%u\n", dc.live);
	metric(b, "tetherd_draining_workers", "gauge", "The consumer's old workers still draining after a reload.");
	buf_printf(b, "%u\n", dc.draining);
	metric(b, "tetherd_draining_bytes", "gauge",
	       "Resident memory (VmRSS) of the old workers still draining, summed (shared pages in each).");
	buf_printf(b, "%llu\n", (unsigned long long)dc.draining_bytes);
	metric(b, "tetherd_draining_limit", "gauge",
	       "Old workers draining above which a reload is held (--max-draining, or twice the live workers).");
	buf_printf(b, "%llu\n", (unsigned long long)limit_of(a, &dc));
	metric(b, "tetherd_reloads_deferred_total", "counter",
	       "Applies held while too many old workers drained (each spell once).");
	buf_printf(b, "%llu\n", (unsigned long long)g->deferred);
	metric(b, "tetherd_reloads_forced_total", "counter",
	       "Reloads made after --max-defer while too many old workers still drained.");
	buf_printf(b, "%llu\n", (unsigned long long)g->forced);
	double held = g->held_s + (g->since_ms ? (double)(now_ms() - g->since_ms) / 1000.0 : 0);
	metric(b, "tetherd_reload_defer_seconds_total", "counter", "Seconds applies were held for draining workers.");
	buf_printf(b, "%.3f\n", held);
}
