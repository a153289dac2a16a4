/* apply.c: what the agent does with pushes. Each is decoded with bounds and
 * queued; the queue is applied as one change (a consumer reloads once for
 * a burst of pushes, and not sooner than --min-reload-interval after the
 * last reload): the pushes are merged in order, the result is validated
 * whole against the applied state, staged, checked (the operator's --check,
 * else the consumer's own: nginx -t, haproxy -c), swapped in, reloaded,
 * confirmed (the marker shows the new generation serving), probed
 * (--health), persisted, and committed; any failure puts the old output
 * back and NACKs the newest push. Only an applied push moves the version. */
#include "agent_int.h"
#include "consumer.h"
#include "lastgood.h"
#include "log.h"
#include "reload.h"
#include "strmap.h"
#include "util.h"
#include "xmalloc.h"

#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* healthy: the health probe's verdict on the refused version (1, 0), or -1
 * when it was not probed; the plane shows it with the NACK. verify: it
 * failed --trust's checks. */
static void reject_as(struct agent *a, uint64_t version, const char *nonce, const char *why, int healthy,
		      bool verify)
{
	log_error("push %llu refused: %s", (unsigned long long)version, why);
	snprintf(a->last_error, sizeof(a->last_error), "version %llu refused: %s", (unsigned long long)version, why);
	a->rejected++;
	agent_set_state(a, ST_DEGRADED);
	if (nonce && *nonce)
		ack_queue(a, version, nonce, why, healthy, verify);
	agent_write_status(a);
}

static void reject(struct agent *a, uint64_t version, const char *nonce, const char *why, int healthy)
{
	reject_as(a, version, nonce, why, healthy, false);
}

void apply_drop_queue(struct agent *a)
{
	for (size_t i = 0; i < a->nqueue; i++)
		push_release(&a->queue[i]);
	a->nqueue = 0;
}

/* The version the next queued push must apply on. */
static uint64_t queue_tip(const struct agent *a)
{
	return a->nqueue ? a->queue[a->nqueue - 1].version : a->state.version;
}

enum push_result apply_enqueue(struct agent *a, const char *text, size_t len)
{
	char err[ERRLEN];
	struct push p;
	struct json_limits lim = { (size_t)a->cfg.max_push_bytes, (int)a->cfg.max_depth };
	if (push_decode(text, len, &lim, &p, err, sizeof(err)) < 0) {
		reject(a, p.version, p.nonce, err, -1);
		return PUSH_QUEUED;
	}
	/* --trust: signed, by a trusted key, fresh, for this version and our
	 * subscription, not a rollback -- or it goes no further */
	if (trust_check_push(a, &p, err, sizeof(err)) < 0) {
		reject_as(a, p.version, p.nonce, err, -1, true);
		push_release(&p);
		return PUSH_DISTRUSTED;
	}
	if (p.version > a->plane_version)
		a->plane_version = p.version;
	uint64_t tip = queue_tip(a);
	if (p.version < tip) {
		snprintf(err, sizeof(err), "push version %llu is older than the applied version %llu",
			 (unsigned long long)p.version, (unsigned long long)tip);
		reject(a, p.version, p.nonce, err, -1);
		push_release(&p);
		return PUSH_QUEUED;
	}
	if (!p.full && p.base != tip) {
		log_warn("push %llu applies on version %llu, not on ours (%llu): resyncing",
			 (unsigned long long)p.version, (unsigned long long)p.base, (unsigned long long)tip);
		push_release(&p);
		return PUSH_RESYNC;
	}
	if (a->nqueue == a->capqueue) {
		a->capqueue = a->capqueue ? a->capqueue * 2 : 4;
		a->queue = xrealloc(a->queue, a->capqueue * sizeof(*a->queue));
	}
	a->queue[a->nqueue++] = p;
	return PUSH_QUEUED;
}

/* Folds the queue into one push (borrowing from the queued ones): later
 * changes of a name win; a snapshot starts over. */
static void merge(struct agent *a, struct push *m)
{
	const struct push *last = &a->queue[a->nqueue - 1];
	size_t first = 0;
	for (size_t i = 0; i < a->nqueue; i++)
		if (a->queue[i].full)
			first = i;
	memset(m, 0, sizeof(*m));
	m->version = last->version;
	m->base = a->queue[first].full ? 0 : a->queue[first].base;
	m->full = a->queue[first].full;
	snprintf(m->nonce, sizeof(m->nonce), "%s", last->nonce);
	m->statement = last->statement;   /* it signs the state after them all */
	m->verified = last->verified;
	size_t cap = 0;
	for (size_t i = first; i < a->nqueue; i++)
		cap += a->queue[i].nup + a->queue[i].nrm;
	m->up = xcalloc(cap ? cap : 1, sizeof(*m->up));
	m->removed = xcalloc(cap ? cap : 1, sizeof(*m->removed));
	struct strmap where;   /* name -> index + 1 in up (> 0) or -(index + 1) in removed */
	strmap_init(&where);
	for (size_t i = first; i < a->nqueue; i++) {
		const struct push *q = &a->queue[i];
		for (size_t k = 0; k < q->nup + q->nrm; k++) {
			bool up = k < q->nup;
			const char *name = up ? q->up[k].name : q->removed[k - q->nup];
			intptr_t *slot = strmap_ref(&where, name);
			if (*slot > 0) {
				/* drop the earlier upsert: move the last one into its place */
				size_t at = (size_t)*slot - 1;
				m->up[at] = m->up[--m->nup];
				if (at < m->nup)
					*strmap_ref(&where, m->up[at].name) = (intptr_t)at + 1;
			} else if (*slot < 0) {
				size_t at = (size_t)(-*slot) - 1;
				m->removed[at] = m->removed[--m->nrm];
				if (at < m->nrm)
					*strmap_ref(&where, m->removed[at]) = -(intptr_t)at - 1;
			}
			slot = strmap_ref(&where, name);
			if (up) {
				m->up[m->nup] = q->up[k];
				*slot = (intptr_t)++m->nup;
			} else {
				m->removed[m->nrm] = name;
				*slot = -(intptr_t)++m->nrm;
			}
		}
	}
	strmap_release(&where);
}

/* ---- making it live ----------------------------------------------------------- */

enum apply_result {
	APPLY_OK,
	APPLY_REFUSED,    /* a check, the consumer, or its health said no: final */
	APPLY_FAILED,     /* an I/O error here (disk full, ...): worth a retry */
};

/* After reverting: the consumer goes back to what it served (best effort). */
static void reload_back(struct agent *a)
{
	char e2[1024];
	if (reload_consumer(&a->cfg, a->state.version, NULL, e2, sizeof(e2)) < 0)
		log_error("apply: reload after putting the old output back failed: %s", e2);
}

/* Where an apply spent its time, for the log, the metrics and the
 * benchmarks (microseconds). */
struct phases {
	int64_t stage, check, reload, persist;
};

/* Stages, checks, swaps, reloads, confirms, probes, persists and commits c.
 * On failure everything live is as it was and err says why. */
static enum apply_result apply_candidate(struct agent *a, struct candidate *c, int *healthy, struct phases *ph,
					 char *err, size_t errlen)
{
	const struct consumer_ops *ops = a->cons->ops;
	enum apply_result why = APPLY_FAILED;
	int staged = 1;
	int64_t t = now_us();
	*healthy = -1;
	memset(ph, 0, sizeof(*ph));
	if (c->n) {
		staged = ops->stage(a->cons, &a->state, c, err, errlen);
		if (staged == -2)
			why = APPLY_REFUSED;
		if (staged < 0)
			goto fail;
	}
	ph->stage = now_us() - t;
	if (staged == 0) {
		const char *dir = ops->staging_dir(a->cons);
		why = APPLY_REFUSED;
		if (a->cfg.check) {
			if (hook_run(&a->cfg, "check", a->cfg.check, c->version, dir, err, errlen) < 0)
				goto fail;
		} else if (ops->check && ops->check(a->cons, a->cfg.command_timeout, err, errlen) < 0) {
			goto fail;
		}
		ph->check = now_us() - t - ph->stage;
	}
	/* the last-good write readied (and its room taken) before anything
	 * goes live: a full state directory refuses the push here, with the
	 * consumer untouched */
	why = APPLY_FAILED;
	int64_t tp = now_us();
	if (lastgood_prepare(a->lg, &a->state, c, err, errlen) < 0)
		goto fail;
	ph->persist = now_us() - tp;
	if (staged == 0) {
		const char *dir = ops->staging_dir(a->cons);
		if (ops->swap(a->cons, err, errlen) < 0)
			goto revert;
		why = APPLY_REFUSED;
		a->last_reload_ms = now_ms();
		int rr = reload_consumer(&a->cfg, c->version, dir, err, errlen);
		if (rr < 0)
			goto revert;
		if (rr == 1)
			log_warn("%s is not running (no process for %s): version %llu is live for when it starts",
				 a->cfg.consumer, a->cfg.pidfile, (unsigned long long)c->version);
		const char *gen = ops->generation ? ops->generation(a->cons) : NULL;
		if (rr == 0 && gen && reload_confirm(a->cfg.marker, gen, a->cfg.reload_timeout, err, errlen) < 0)
			goto revert;
		if (a->cfg.health && rr == 0) {   /* nothing to probe while it is not running */
			if (reload_health(a->cfg.health, a->cfg.health_timeout, (unsigned)a->cfg.health_retries, err,
					  errlen) < 0) {
				*healthy = 0;
				goto revert;
			}
			*healthy = 1;
		}
		why = APPLY_FAILED;
		ph->reload = now_us() - t - ph->stage - ph->check - ph->persist;
	}
	tp = now_us();
	if (lastgood_commit(a->lg, err, errlen) < 0) {
		if (staged == 0)
			goto revert;
		goto fail;
	}
	ph->persist += now_us() - tp;
	state_commit(&a->state, c);
	ops->finish(a->cons);
	return APPLY_OK;
revert:;
	char e2[1024];
	if (ops->revert(a->cons, e2, sizeof(e2)) < 0)
		log_error("apply: cannot put the old output back: %s", e2);
	else
		reload_back(a);
fail:
	lastgood_abandon(a->lg);
	ops->finish(a->cons);
	return why;
}

/* A large message leaves its decoding garbage spread over the heap: give
 * the free pages back, so an idle agent holds about its state, not its
 * largest push. */
static void trim_after(size_t changes)
{
	if (changes >= 10000)
		malloc_trim(0);
}

void apply_pending(struct agent *a, int64_t *wake)
{
	if (!a->nqueue)
		return;
	int64_t now = now_ms();
	int64_t ready = a->last_reload_ms + (int64_t)(a->cfg.min_reload_interval * 1000);
	if (wake && a->last_reload_ms && now < ready) {
		if (ready < *wake)
			*wake = ready;   /* too soon after a reload: merge what comes meanwhile */
		return;
	}
	char err[ERRLEN];
	struct push m;
	merge(a, &m);
	size_t npushes = a->nqueue;
	struct candidate c;
	int64_t t0 = now_ms();
	struct timespec cpu0, cpu1;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu0);
	struct lthash digest;
	bool built = candidate_build(&a->state, &m, a->cfg.strict ? STATE_STRICT : 0, &c, err, sizeof(err)) == 0;
	/* a push that does not validate is a refusal -- unless, with --trust,
	 * it is not what the plane signed either: then it was changed on the
	 * way, and is treated as such */
	if (!built && trust_check_unvalidated(a, &m, err, sizeof(err)) == 0) {
		reject(a, m.version, m.nonce, err, -1);
		goto out;
	}
	/* --trust: the candidate must be exactly the state the statement
	 * signs, before it goes near the consumer */
	if (!built || trust_check_candidate(a, &m, &c, &digest, err, sizeof(err)) < 0) {
		if (built)
			candidate_release(&c);
		reject_as(a, m.version, m.nonce, err, -1, true);
		/* ask for a snapshot, a little later each time it fails again */
		a->trust.want_snapshot = true;
		a->trust.mismatches++;
		double cap = a->cfg.backoff_min * pow(2.0, a->trust.mismatches > 20 ? 20 : a->trust.mismatches);
		if (cap > a->cfg.backoff_max)
			cap = a->cfg.backoff_max;
		a->retry_at_ms = now_ms() + (int64_t)((0.5 + 0.5 * agent_rand01()) * cap * 1000.0);
		goto out;
	}
	c.statement = m.statement;
	size_t changes = c.n;
	int healthy;
	struct phases ph;
	enum apply_result ar = apply_candidate(a, &c, &healthy, &ph, err, sizeof(err));
	candidate_release(&c);
	if (ar != APPLY_OK) {
		reject(a, m.version, m.nonce, err, healthy);
		if (ar == APPLY_FAILED) {
			/* not the push's fault: ask for it again a little later */
			a->io_failures++;
			double cap = a->cfg.backoff_min * pow(2.0, a->io_failures > 20 ? 20 : a->io_failures);
			if (cap > a->cfg.backoff_max)
				cap = a->cfg.backoff_max;
			int64_t w = (int64_t)((0.5 + 0.5 * agent_rand01()) * cap * 1000.0);
			a->retry_at_ms = now_ms() + w;
			log_info("push %llu failed on I/O: retrying it in %.1fs", (unsigned long long)m.version,
				 (double)w / 1000.0);
		}
		goto out;
	}
	a->io_failures = 0;
	a->retry_at_ms = 0;
	trust_applied(a, &m, &digest);
	/* an apply that did not probe (nothing to reload) reports the health
	 * of what still serves */
	if (healthy >= 0)
		a->live_healthy = healthy;
	else
		healthy = a->cfg.health ? a->live_healthy : -1;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu1);
	double cpu_ms = (double)(cpu1.tv_sec - cpu0.tv_sec) * 1e3 + (double)(cpu1.tv_nsec - cpu0.tv_nsec) / 1e6;
	char merged[48] = "";
	if (npushes > 1)
		snprintf(merged, sizeof(merged), "%zu pushes merged, ", npushes);
	log_info("applied version %llu (%s, %s%zu changes, %lld ms, %.3f ms cpu; stage %lld, check %lld, "
		 "reload %lld, persist %lld ms)", (unsigned long long)a->state.version, m.full ? "snapshot" : "delta",
		 merged, changes, (long long)(now_ms() - t0), cpu_ms, (long long)ph.stage / 1000,
		 (long long)ph.check / 1000, (long long)ph.reload / 1000, (long long)ph.persist / 1000);
	const int64_t us[APPLY_PHASES] = { ph.stage, ph.check, ph.reload, ph.persist };
	metrics_observe_apply(a, us);
	if (npushes > 1)
		a->m.merged += npushes - 1;
	metrics_contact(a);
	a->applied++;
	a->last_error[0] = '\0';
	a->last_sync = wall_seconds();
	agent_set_state(a, a->state.version >= a->plane_version ? ST_SYNCED : ST_SYNCING);
	ack_queue(a, m.version, m.nonce, NULL, healthy, false);
	agent_write_status(a);
	trim_after(changes);
out:
	push_release(&m);   /* its arrays; the bodies belong to the queue */
	apply_drop_queue(a);
}

void apply_boot_reload(struct agent *a)
{
	char err[1024];
	if (!a->cfg.reload && !a->cfg.pidfile)
		return;
	int rr = reload_consumer(&a->cfg, a->state.version, NULL, err, sizeof(err));
	if (rr < 0)
		log_warn("boot: reload of the consumer failed: %s", err);
	else if (rr == 1)
		log_info("boot: %s is not running yet (%s): it will read the output when it starts", a->cfg.consumer,
			 a->cfg.pidfile);
	else
		a->last_reload_ms = now_ms();
}
