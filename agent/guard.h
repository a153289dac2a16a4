/* guard.h: the drain guard. A reload leaves the consumer's old workers
 * draining their connections; under long-lived connections reloads would
 * outrun them and they pile up. So before an apply (which reloads) the
 * core counts them (consumer/drain.c) and, while more drain than
 * --max-draining (default: twice the live workers), holds the apply:
 * pushes arriving meanwhile queue and are merged into the one apply that
 * follows, and its ACK waits for it. The state shows `deferred`; the loop
 * comes back to count again on its own (a wake time, never a busy loop).
 * After --max-defer the apply goes anyway, with a warning and
 * tetherd_reloads_forced_total. No guard for the files consumer, a
 * --reload command, a master that does not run, --once or --max-defer 0. */
#ifndef TETHER_GUARD_H
#define TETHER_GUARD_H

#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "consumer/drain.h"

struct agent;

/* The guard's part of struct agent. */
struct guard {
	int64_t since_ms;          /* holding the queue since (monotonic ms); 0: not holding */
	int64_t next_ms;           /* the next count, while holding or while workers drain */
	bool counted;              /* last holds a count */
	int64_t counted_ms;        /* when it was taken (monotonic ms) */
	int64_t reload_sent_ms;    /* just before the last reload was asked for (monotonic ms); 0: none */
	int64_t reload_sent_boot;  /* the same on CLOCK_BOOTTIME (ms), /proc's clock for start times */
	struct drain_count last;   /* the last count: the gauges of --metrics-file */
	uint64_t limit;            /* the limit of the last count */
	uint64_t deferred;         /* spells of holding */
	uint64_t forced;           /* spells ended by --max-defer with workers still draining */
	double held_s;             /* seconds held, over the spells that ended */
	bool blind_logged;         /* "no worker visible" said */
	bool failed_logged;        /* a count that failed, said */
};

/* Before the queued pushes are applied: true while they must wait
 * (*wake, if not NULL, lowered to when to count again); false to apply
 * now. no_reload, asked only when it would hold: whether the apply of what
 * is queued reloads nothing (haproxy's runtime API), so it need not wait
 * (NULL: every apply reloads). */
bool guard_hold(struct agent *a, int64_t *wake, bool (*no_reload)(struct agent *a));
/* Just before a reload is asked for: what the counts compare the
 * workers' start times with. */
void guard_reload_sent(struct agent *a);
/* Nothing is queued: a spell of holding ends (the queue went with a
 * resync); with --metrics-file, while old workers drain, counts again now
 * and then so the file's gauges follow them (*wake lowered). */
void guard_idle(struct agent *a, int64_t *wake);
/* The guard's metrics; live (a scrape) counts afresh. */
void guard_metrics(const struct agent *a, struct buf *b, bool live);

#endif
