/* apply.c: what the agent does with pushes. Each is decoded with bounds and
 * queued; the queue is applied as one change (a consumer reloads once for
 * a burst of pushes, and not sooner than --min-reload-interval after the
 * last reload): the pushes are merged in order, the result is validated
 * whole against the applied state, then apply_candidate runs the pipeline:
 *
 *   stage     the consumer's output rendered aside
 *   check     the operator's --check, else the consumer's own (nginx -t,
 *             haproxy -c), on what is staged
 *   prepare   last-good's write readied (a full state directory refuses
 *             the push here, nothing live touched)
 *   journal   the apply in flight, durably: the candidate and the
 *             generation it goes live as (lastgood.pending, fdatasync'd)
 *   swap      the staged output made live (the way back kept)
 *   runtime   haproxy --runtime-api, a change of clusters' endpoints only:
 *             set over haproxy's runtime API and read back, in place of
 *             the reload and the confirm (apply_runtime.c); else, or when
 *             that fails, the reload
 *   reload    the consumer told (--reload, or the signal to --pidfile)
 *   confirm   the marker shows the new generation serving
 *   probe     --health
 *   commit    last-good holds the candidate (journal record appended and
 *             fsync'd, or a new generation renamed in), which voids the
 *             journal of the apply in flight; then the state moves and
 *             the ACK is queued: the plane hears only of what is durable
 *
 * Sealed secrets (seal.c): after --trust's checks and before the stage,
 * each sealed secret of the candidate's state needs a wrap for this node's
 * key that opens it: missing ones come from one GET /v1/wraps; none is a
 * held push (a NACK with "held", once per version), one that does not
 * open a verification NACK. The renderers open them in memory.
 *
 * A failure before the swap changes nothing; one after it voids the
 * journal (durably) first, then puts the old output back and reloads onto
 * it; either way the newest push is NACKed. Only an applied push moves
 * the version.
 *
 * A crash is finished at boot, not undone (apply_resume, before the
 * consumer boots on last-good): when the journal names an apply in flight
 * on exactly the last-good loaded and the consumer finds its candidate
 * live (the `current` generation is the journal's; the files consumer's
 * files are the candidate's, all of them), the swap happened, and the
 * candidate is checked again, reloaded onto (unless the marker shows it
 * serving already) and probed again; passing, it is committed and becomes
 * last-good, and the consumer is never reloaded backwards. When it did not
 * go live (or only part of it), or it is refused now, or the journal is
 * torn or damaged, the journal is dropped and last-good comes back, as it
 * did before; a refusal shows in status.json (degraded, last_error). Boot
 * sends no ACK: the plane learns the version from the node's sync, and a
 * refused version is NACKed when the plane pushes it again. */
#include "agent_int.h"
#include "consumer/consumer.h"
#include "consumer/reload.h"
#include "consumer/runtime.h"
#include "fault.h"
#include "guard.h"
#include "guardcheck.h"
#include "lastgood.h"
#include "log.h"
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
		ack_queue(a, version, nonce, why, healthy, verify, NULL, NULL);
	agent_write_status(a);
}

static void reject(struct agent *a, uint64_t version, const char *nonce, const char *why, int healthy)
{
	reject_as(a, version, nonce, why, healthy, false);
}

/* A push that waits for a wrap of a sealed secret (seal.c): not refused,
 * held -- the node keeps serving what it has, and tells the plane once
 * per version (a NACK with "held"), which holds the node until a writer
 * seals to its key; the version that brings the wrap applies. */
static void hold(struct agent *a, const struct push *m, const char *why)
{
	if (a->seal.held_version == m->version) {
		log_debug("push %llu still held: %s", (unsigned long long)m->version, why);
		return;
	}
	a->seal.held_version = m->version;
	log_warn("push %llu held: %s; serving version %llu", (unsigned long long)m->version, why,
		 (unsigned long long)a->state.version);
	snprintf(a->last_error, sizeof(a->last_error), "version %llu held: %.4000s", (unsigned long long)m->version, why);
	if (m->nonce[0])
		ack_queue_held(a, m->version, m->nonce, why);
	agent_write_status(a);
}

/* The wraps of a push's sealed secrets could not be fetched: said (once
 * per version; again at debug) and shown in status.json, never NACKed. */
static void fetch_failed(struct agent *a, uint64_t version, const char *why)
{
	if (a->seal.fetch_failed_version == version) {
		log_debug("push %llu waits for its wraps: %s", (unsigned long long)version, why);
	} else {
		a->seal.fetch_failed_version = version;
		log_warn("push %llu waits for its wraps: %s; serving version %llu", (unsigned long long)version, why,
			 (unsigned long long)a->state.version);
	}
	snprintf(a->last_error, sizeof(a->last_error), "version %llu waits for its wraps: %.4000s",
		 (unsigned long long)version, why);
	agent_write_status(a);
}

/* A push that failed for a reason not its own (I/O): asked for again a
 * little later, backing off. */
static void retry_later(struct agent *a, uint64_t version)
{
	a->io_failures++;
	double cap = a->cfg.backoff_min * pow(2.0, a->io_failures > 20 ? 20 : a->io_failures);
	if (cap > a->cfg.backoff_max)
		cap = a->cfg.backoff_max;
	int64_t w = (int64_t)((0.5 + 0.5 * agent_rand01()) * cap * 1000.0);
	a->retry_at_ms = now_ms() + w;
	log_info("push %llu failed on I/O: retrying it in %.1fs", (unsigned long long)version, (double)w / 1000.0);
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

enum push_result apply_enqueue(struct agent *a, const char *text, size_t len, bool stream)
{
	char err[ERRLEN];
	struct push p;
	struct json_limits lim = { (size_t)a->cfg.max_push_bytes, (int)a->cfg.max_depth };
	if (push_decode(text, len, &lim, &p, err, sizeof(err)) < 0) {
		reject(a, p.version, p.nonce, err, -1);
		return PUSH_QUEUED;
	}
	if (stream) {
		/* a stream's push says whether the plane is stale (a poll's
		 * answer says it in a header) */
		struct plane_stale ps;
		fresh_stale_from_json(p.stale, &ps);
		fresh_heard(a, ps.on, ps.since, ps.why);
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
	if (!p.full && p.base != tip && a->nqueue && p.base == a->state.version && p.version >= tip) {
		/* a delta from the applied version while pushes wait (a poll's
		 * answer while the drain guard holds them) carries all they do */
		apply_drop_queue(a);
		tip = queue_tip(a);
	}
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
	for (size_t i = 0; i < a->nqueue; i++)   /* the newest override among them */
		if (a->queue[i].overridden > m->overridden)
			m->overridden = a->queue[i].overridden;
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

/* What the hooks and the reload take of the options (read at each use:
 * SIGHUP changes them). */
static struct reload_options reload_opts(const struct agent *a)
{
	return (struct reload_options){ .output_dir = a->cfg.output_dir, .command_timeout = a->cfg.command_timeout,
					.reload = a->cfg.reload, .pidfile = a->cfg.pidfile, .signal = a->cfg.signal };
}

/* After reverting: the consumer goes back to what it served (best effort). */
static void reload_back(struct agent *a)
{
	char e2[1024];
	struct reload_options ro = reload_opts(a);
	guard_reload_sent(a);
	if (reload_consumer(&ro, a->state.version, NULL, e2, sizeof(e2)) < 0)
		log_error("apply: reload after putting the old output back failed: %s", e2);
	else
		apply_reloaded(a, RR_REVERT);
}

/* Where an apply spent its time, for the log, the metrics and the
 * benchmarks (microseconds), and how it reached the consumer. */
struct phases {
	int64_t stage, check, reload, persist;
	const char *applied;        /* "runtime", "reload", or NULL: the consumer was not touched */
	enum reload_reason why;     /* a reload's */
};

/* Stages, checks, journals, swaps, reloads, confirms, probes, persists and
 * commits c. On failure everything live is as it was and err says why. */
static enum apply_result apply_candidate(struct agent *a, struct candidate *c, int *healthy, struct phases *ph,
					 char *err, size_t errlen)
{
	const struct consumer_ops *ops = a->cons->ops;
	struct reload_options ro = reload_opts(a);
	enum apply_result why = APPLY_FAILED;
	int staged = 1;
	bool pending = false;
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
	fault_point("staged");
	if (staged == 0) {
		const char *dir = ops->staging_dir(a->cons);
		why = APPLY_REFUSED;
		if (a->cfg.check) {
			if (hook_run(&ro, "check", a->cfg.check, c->version, dir, err, errlen) < 0)
				goto fail;
		} else if (ops->check && ops->check(a->cons, a->cfg.command_timeout, err, errlen) < 0) {
			goto fail;
		}
		ph->check = now_us() - t - ph->stage;
	}
	fault_point("checked");
	/* the last-good write readied (and its room taken) before anything
	 * goes live: a full state directory refuses the push here, with the
	 * consumer untouched */
	why = APPLY_FAILED;
	int64_t tp = now_us();
	if (lastgood_prepare(a->lg, &a->state, c, err, errlen) < 0)
		goto fail;
	fault_point("prepared");
	if (staged == 0) {
		/* journaled before it goes live: the candidate and the
		 * generation it goes live as, so that a boot after a crash
		 * from here to the commit finishes this apply (apply_resume) */
		pending = true;
		if (lastgood_pending(a->lg, &a->state, c, ops->staged_id ? ops->staged_id(a->cons) : NULL, err,
				     errlen) < 0)
			goto fail;
	}
	ph->persist = now_us() - tp;
	if (staged == 0) {
		fault_point("pending");
		const char *dir = ops->staging_dir(a->cons);
		if (ops->swap(a->cons, err, errlen) < 0)
			goto revert;
		fault_point("swapped");
		why = APPLY_REFUSED;
		int rr = 0;
		if (apply_runtime(a, c, &ph->why)) {
			ph->applied = "runtime";
			goto served;   /* no reload: the read-back confirmed it */
		}
		a->last_reload_ms = now_ms();
		guard_reload_sent(a);
		rr = reload_consumer(&ro, c->version, dir, err, errlen);
		if (rr < 0)
			goto revert;
		if (rr == 0 && (a->cfg.reload || a->cfg.pidfile)) {
			ph->applied = "reload";
			apply_reloaded(a, ph->why);
		}
		if (rr == 1)
			log_warn("%s is not running (no process for %s): version %llu is live for when it starts",
				 a->cfg.consumer, a->cfg.pidfile, (unsigned long long)c->version);
		fault_point("reloaded");
		const char *gen = ops->generation ? ops->generation(a->cons) : NULL;
		if (rr == 0 && gen && reload_confirm(a->cfg.marker, gen, a->cfg.reload_timeout, err, errlen) < 0)
			goto revert;
		fault_point("confirmed");
served:
		if (a->cfg.health && rr == 0) {   /* nothing to probe while it is not running */
			if (reload_health(a->cfg.health, a->cfg.health_timeout, (unsigned)a->cfg.health_retries, err,
					  errlen) < 0) {
				*healthy = 0;
				goto revert;
			}
			*healthy = 1;
		}
		fault_point("probed");
		why = APPLY_FAILED;
		ph->reload = now_us() - t - ph->stage - ph->check - ph->persist;
	}
	/* the commit: last-good holds c (and the journal of the apply in
	 * flight is void); only now may the plane hear of it (the ACK) */
	tp = now_us();
	if (lastgood_commit(a->lg, err, errlen) < 0) {
		if (staged == 0)
			goto revert;
		goto fail;
	}
	ph->persist += now_us() - tp;
	fault_point("committed");
	state_commit(&a->state, c);
	seal_committed(a);   /* the wraps kept: the state's secrets only */
	ops->finish(a->cons);
	return APPLY_OK;
revert:;
	/* refused: void the journal first (durably), so that a crash while
	 * the old output comes back is never finished forward at boot */
	lastgood_pending_drop(a->lg);
	pending = false;
	char e2[1024];
	if (ops->revert(a->cons, e2, sizeof(e2)) < 0)
		log_error("apply: cannot put the old output back: %s", e2);
	else
		reload_back(a);
fail:
	if (pending)
		lastgood_pending_drop(a->lg);
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

/* With --runtime-api: whether what is queued, merged, changes only
 * clusters' endpoints (consumer/runtime.c's plan), so that it goes over
 * haproxy's runtime API and reloads nothing. Builds the candidate once
 * more, only with the option. */
static bool queued_goes_runtime(struct agent *a)
{
	/* after a runtime update that fell back (a dead socket, one below
	 * admin, a read-back that differs) the next is likely to reload too:
	 * guarded like any reload until one goes through again */
	if (!a->cfg.runtime_api || a->runtime_failing)
		return false;
	char err[ERRLEN];
	struct push m;
	merge(a, &m);
	struct candidate c;
	bool yes = false;
	if (candidate_build(&a->state, &m, a->cfg.strict ? STATE_STRICT : 0, &c, err, sizeof(err)) == 0) {
		struct rt_plan plan;
		yes = runtime_plan(&a->state, &c, &plan, err, sizeof(err)) == 1;
		if (yes)
			runtime_plan_release(&plan);
		candidate_release(&c);
	}
	push_release(&m);
	return yes;
}

void apply_pending(struct agent *a, int64_t *wake)
{
	if (!a->nqueue) {
		guard_idle(a, wake);
		return;
	}
	int64_t now = now_ms();
	int64_t ready = a->last_reload_ms + (int64_t)(a->cfg.min_reload_interval * 1000);
	if (wake && a->last_reload_ms && now < ready) {
		if (ready < *wake)
			*wake = ready;   /* too soon after a reload: merge what comes meanwhile */
		return;
	}
	/* the drain guard: no reload while too many old workers still drain
	 * (what arrives meanwhile is merged into this apply); an apply that
	 * goes over haproxy's runtime API reloads nothing, so it never waits */
	if (guard_hold(a, wake, queued_goes_runtime))
		return;
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
		seal_damaged_marker(&m, err, sizeof(err));
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
	/* guards (guardcheck.c): the candidate's own guards against what this
	 * node serves; crossing one without an override is refused */
	if (guardcheck_push(a, &m, &c, err, sizeof(err)) < 0) {
		candidate_release(&c);
		reject(a, m.version, m.nonce, err, -1);
		goto out;
	}
	c.statement = m.statement;
	/* sealed secrets, once the candidate is verified: each has a wrap
	 * for this node's key (fetched when missing) that opens it */
	enum seal_result sr = seal_prepare(a, &c, err, sizeof(err));
	if (sr != SEAL_OK) {
		candidate_release(&c);
		seal_abandoned(a);
		if (sr == SEAL_HELD) {
			hold(a, &m, err);
		} else if (sr == SEAL_VERIFY) {
			reject_as(a, m.version, m.nonce, err, -1, true);
			/* asked for again after a backoff, as a digest mismatch */
			if (!a->retry_at_ms || a->retry_at_ms > a->seal.bad_until_ms)
				a->retry_at_ms = a->seal.bad_until_ms;
		} else {
			/* the wraps could not be fetched (the plane or relay
			 * unreachable, a 5xx): not the push's fault, and no
			 * NACK -- a rollout stage never fails for an outage of
			 * a moment; the push is asked for again after a
			 * backoff, and status.json says why meanwhile */
			fetch_failed(a, m.version, err);
			retry_later(a, m.version);
		}
		goto out;
	}
	size_t changes = c.n;
	int healthy;
	struct phases ph;
	enum apply_result ar = apply_candidate(a, &c, &healthy, &ph, err, sizeof(err));
	candidate_release(&c);
	if (ar != APPLY_OK) {
		seal_abandoned(a);   /* the candidate's wraps go; last-good's stay */
		reject(a, m.version, m.nonce, err, healthy);
		if (ar == APPLY_FAILED)
			retry_later(a, m.version);   /* not the push's fault: ask for it again a little later */
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
	char how[64] = "";   /* with --runtime-api: how it went live */
	if (a->cfg.runtime_api && ph.applied && strcmp(ph.applied, "runtime") == 0)
		snprintf(how, sizeof(how), "; over the runtime API");
	else if (a->cfg.runtime_api && ph.applied)
		snprintf(how, sizeof(how), "; reloaded: %s", reload_reason_name(ph.why));
	log_info("applied version %llu (%s, %s%zu changes, %lld ms, %.3f ms cpu; stage %lld, check %lld, "
		 "reload %lld, persist %lld ms%s)", (unsigned long long)a->state.version, m.full ? "snapshot" : "delta",
		 merged, changes, (long long)(now_ms() - t0), cpu_ms, (long long)ph.stage / 1000,
		 (long long)ph.check / 1000, (long long)ph.reload / 1000, (long long)ph.persist / 1000, how);
	const int64_t us[APPLY_PHASES] = { ph.stage, ph.check, ph.reload, ph.persist };
	metrics_observe_apply(a, us);
	if (npushes > 1)
		a->m.merged += npushes - 1;
	metrics_contact(a);
	a->applied++;
	a->last_error[0] = '\0';
	a->last_sync = wall_seconds();
	agent_set_state(a, a->state.version >= a->plane_version ? ST_SYNCED : ST_SYNCING);
	/* after a runtime update the traffic counts start over: the
	 * generation haproxy loaded serves the new endpoints from now */
	if (ph.applied && strcmp(ph.applied, "runtime") == 0)
		traffic_report_restart(&a->traffic);
	ack_queue(a, m.version, m.nonce, NULL, healthy, false, ph.applied,
		  ph.applied && strcmp(ph.applied, "reload") == 0 ? reload_reason_name(ph.why) : NULL);
	agent_write_status(a);
	fault_point("applied");
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
	struct reload_options ro = reload_opts(a);
	guard_reload_sent(a);
	int rr = reload_consumer(&ro, a->state.version, NULL, err, sizeof(err));
	if (rr == 0)
		apply_reloaded(a, RR_BOOT);
	if (rr < 0)
		log_warn("boot: reload of the consumer failed: %s", err);
	else if (rr == 1)
		log_info("boot: %s is not running yet (%s): it will read the output when it starts", a->cfg.consumer,
			 a->cfg.pidfile);
	else
		a->last_reload_ms = now_ms();
}

/* ---- finishing an apply at boot ---------------------------------------------- */

/* The consumer serves generation gen already (its marker says so, several
 * times in a row): a reload would change nothing. */
static bool serves_already(const struct agent *a, const char *gen)
{
	char e[512];
	return gen && a->cfg.marker && strcmp(a->cfg.marker, "off") != 0 &&
	       reload_confirm(a->cfg.marker, gen, 0, e, sizeof(e)) == 0;
}

/* The re-check of a resumed candidate, as the apply would have done it
 * from the check on: --check (or the consumer's own) on it, the reload
 * onto it (unless the marker shows it serving), the marker, --health.
 * 0, or -1 with err (a refusal); *healthy as in apply_candidate. */
static int resume_check(struct agent *a, const struct candidate *c, int *healthy, char *err, size_t errlen)
{
	const struct consumer_ops *ops = a->cons->ops;
	struct reload_options ro = reload_opts(a);
	const char *dir = ops->staging_dir(a->cons);
	*healthy = -1;
	if (a->cfg.check) {
		if (hook_run(&ro, "check", a->cfg.check, c->version, dir, err, errlen) < 0)
			return -1;
	} else if (ops->check && ops->check(a->cons, a->cfg.command_timeout, err, errlen) < 0) {
		return -1;
	}
	fault_point("boot-checked");
	const char *gen = ops->generation ? ops->generation(a->cons) : NULL;
	int rr = 0;
	if (serves_already(a, gen)) {
		log_info("boot: the consumer serves generation %s already: no reload", gen);
	} else {
		a->last_reload_ms = now_ms();
		guard_reload_sent(a);
		rr = reload_consumer(&ro, c->version, dir, err, errlen);
		if (rr < 0)
			return -1;
		if (rr == 0)
			apply_reloaded(a, RR_BOOT);
		if (rr == 1)
			log_info("boot: %s is not running yet (%s): version %llu is live for when it starts",
				 a->cfg.consumer, a->cfg.pidfile, (unsigned long long)c->version);
		if (rr == 0 && gen && reload_confirm(a->cfg.marker, gen, a->cfg.reload_timeout, err, errlen) < 0)
			return -1;
	}
	if (a->cfg.health && rr == 0) {
		if (reload_health(a->cfg.health, a->cfg.health_timeout, (unsigned)a->cfg.health_retries, err,
				  errlen) < 0) {
			*healthy = 0;
			return -1;
		}
		*healthy = 1;
	}
	return 0;
}

/* An interrupted apply that is not finished after all: its record goes
 * (durably: it is never tried again), last-good comes back (the consumer's
 * boot puts its output back), and status.json says why. */
static void resume_refused(struct agent *a, uint64_t version, const char *what, const char *why)
{
	lastgood_pending_drop(a->lg);
	log_error("boot: version %llu %s: %s; last-good version %llu comes back", (unsigned long long)version, what,
		  why, (unsigned long long)a->state.version);
	snprintf(a->last_error, sizeof(a->last_error), "version %llu %s at boot: %.4000s",
		 (unsigned long long)version, what, why);
	agent_set_state(a, ST_DEGRADED);
}

void apply_resume(struct agent *a)
{
	const struct consumer_ops *ops = a->cons->ops;
	char err[ERRLEN];
	struct candidate c;
	char *statement = NULL, *gen = NULL;
	int rc = lastgood_pending_load(a->lg, &a->state, &c, &statement, &gen, err, sizeof(err));
	if (rc < 0)
		log_warn("boot: last-good in %s: %s; ignored: last-good version %llu stands", a->cfg.state_dir, err,
			 (unsigned long long)a->state.version);
	if (rc <= 0)
		return;
	uint64_t base = a->state.version, version = c.version;
	struct push m;   /* what trust.c needs of the push it came in */
	memset(&m, 0, sizeof(m));
	m.version = version;
	m.base = base;
	m.statement = statement;
	struct lthash digest;
	int healthy = -1;
	if (trust_check_resumed(a, &m, &c, &digest, err, sizeof(err)) < 0) {
		resume_refused(a, version, "does not verify", err);
		goto out;
	}
	rc = ops->resume ? ops->resume(a->cons, &a->state, &c, gen, err, sizeof(err)) : 0;
	if (rc <= 0) {
		if (rc < 0)
			log_error("boot: cannot tell whether version %llu went live: %s", (unsigned long long)version,
				  err);
		else
			log_info("boot: the apply of version %llu stopped before it went live: last-good version %llu "
				 "stands", (unsigned long long)version, (unsigned long long)base);
		lastgood_pending_drop(a->lg);
		goto out;
	}
	log_warn("boot: version %llu was live (%s%s) when the agent stopped, before it was committed: finishing "
		 "its apply (checked and probed again)", (unsigned long long)version, gen ? "generation " : "its files",
		 gen ? gen : "");
	if (resume_check(a, &c, &healthy, err, sizeof(err)) < 0) {
		/* refused now: reported (a refusal, counted), not NACKed: the
		 * plane pushes the version again and hears the NACK then */
		resume_refused(a, version, "refused", err);
		a->rejected++;
		goto out;
	}
	if (lastgood_save(a->lg, &a->state, &c, err, sizeof(err)) < 0) {
		resume_refused(a, version, "not kept in last-good", err);
		goto out;
	}
	state_commit(&a->state, &c);
	seal_committed(a);
	trust_applied(a, &m, &digest);
	if (healthy >= 0)
		a->live_healthy = healthy;
	ops->finish(a->cons);
	log_info("boot: finished the apply of version %llu: it is last-good (the plane hears of it from the "
		 "version this node syncs from, and sends a push of it to ACK)", (unsigned long long)version);
out:
	candidate_release(&c);
	free(statement);
	free(gen);
}
