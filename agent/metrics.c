/* metrics.c: --metrics-file, Prometheus text for node_exporter's textfile
 * collector, written atomically (temp file, rename) whenever what it says
 * changed: the versions, the state, pushes applied and refused, and with
 * --trust the verification figures (staleness, refusals by reason). */
#include "agent_int.h"
#include "log.h"
#include "util.h"
#include "xmalloc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct buf last;   /* what the file says now */

static void gauge(struct buf *b, const char *name, const char *help, long long v)
{
	buf_printf(b, "# HELP %s %s\n# TYPE %s gauge\n%s %lld\n", name, help, name, name, v);
}

static void counter(struct buf *b, const char *name, const char *help, unsigned long long v)
{
	buf_printf(b, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", name, help, name, name, v);
}

void metrics_write(struct agent *a)
{
	if (!a->cfg.metrics_file)
		return;
	struct buf b = BUF_INIT;
	gauge(&b, "tetherd_version", "The version this node runs.", (long long)a->state.version);
	gauge(&b, "tetherd_plane_version", "The newest version the plane announced.", (long long)a->plane_version);
	gauge(&b, "tetherd_resources", "Resources in the applied state.", (long long)a->state.count);
	counter(&b, "tetherd_pushes_applied_total", "Pushes applied.", a->applied);
	counter(&b, "tetherd_pushes_rejected_total", "Pushes refused (NACKed).", a->rejected);
	buf_puts(&b, "# HELP tetherd_state The agent's state (1 for the current one).\n# TYPE tetherd_state gauge\n");
	enum agent_state shown = a->written.state;
	for (int s = ST_BOOTING; s <= ST_STALE; s++)
		buf_printf(&b, "tetherd_state{state=\"%s\"} %d\n", status_state_name((enum agent_state)s), s == (int)shown);
	if (a->trust.on) {
		gauge(&b, "tetherd_stale", "1 when no valid signed statement vouches for what runs.", a->trust.stale);
		gauge(&b, "tetherd_statement_fresh_until_seconds",
		      "Until when the newest valid statement vouches (seconds since the epoch).", a->trust.fresh_until);
		gauge(&b, "tetherd_verified_version", "The highest version verified (lower is a rollback).",
		      (long long)a->trust.hwm);
		buf_puts(&b, "# HELP tetherd_verify_failures_total Statements and pushes refused, by reason.\n"
			     "# TYPE tetherd_verify_failures_total counter\n");
		for (int f = 0; f < TF_N; f++)
			buf_printf(&b, "tetherd_verify_failures_total{reason=\"%s\"} %llu\n",
				   trust_fail_name((enum trust_fail)f), (unsigned long long)a->trust.failures[f]);
	}
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
