/* consumer/drain.h: the old workers of the consumer's master still
 * draining, and their memory: what the drain guard (the core's
 * agent/guard.c) weighs before it lets a reload go. Each reload leaves the
 * workers it replaces shutting down until their connections end; under
 * long-lived connections they pile up, and the guard holds the next reload
 * while too many are left.
 *
 * The master is the process in --pidfile; its workers are its children
 * (the ppid of /proc/PID/stat). nginx names them in its title
 * (/proc/PID/cmdline): "worker process" serves the live generation,
 * "worker process is shutting down" is an old one draining (cache manager
 * and loader are neither). haproxy (master-worker, -W) names them no way:
 * its workers are forks of the master (the same comm; a `program` section's
 * process is not) and on a reload the master re-executes itself under the
 * same pid and forks the new worker, so the old workers stay its children
 * while they drain: the newest child (the latest start time) is the live
 * worker, the others are old. Memory is each draining worker's VmRSS from
 * /proc/PID/status, summed: pages shared with the master or between workers
 * count in each, so the sum is an upper bound; it is what an unprivileged
 * reader may see (Pss in smaps_rollup needs ptrace access). */
#ifndef TETHER_DRAIN_H
#define TETHER_DRAIN_H

#include <stddef.h>
#include <stdint.h>

enum drain_kind { DRAIN_NGINX, DRAIN_HAPROXY };

struct drain_count {
	long master;                /* the master's pid */
	unsigned live;              /* workers of the live generation */
	unsigned draining;          /* old workers still shutting down */
	uint64_t draining_bytes;    /* their resident memory (VmRSS), summed */
};

/* Counts the workers of the master named by pidfile, reading proc_root
 * ("/proc"; a tree of the same shape in the unit tests). reloaded: when
 * the last reload was signalled, in clock ticks since boot (the unit of
 * /proc/PID/stat's start time; 0: not known): once a worker started since
 * (the reload took), an nginx worker started before it is old though its
 * title may not say so yet (the master retitles the old workers only
 * after it has forked the new ones), so two reloads in quick succession
 * cannot hide one. 1 when counted; 0
 * when the master is not running (no pidfile, or no such process: there is
 * nothing to guard); -1 with err when the pidfile or proc_root cannot be
 * read. */
int drain_count(const char *proc_root, const char *pidfile, enum drain_kind kind, uint64_t reloaded,
		struct drain_count *out, char *err, size_t errlen);

#endif
