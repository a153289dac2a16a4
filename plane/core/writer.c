/* core/writer.c: resource writes (see writer.h): the commit with its retries
 * and answer, and the writer thread that runs them for suspended
 * requests, in arrival order; and the reader thread beside it, for the
 * calls (writer_call) that only read. */
#include "core/writer.h"
#include "alive.h"
#include "core/core.h"
#include "core/events.h"
#include "core/freeze_state.h"
#include "core/freshness.h"
#include "core/guardcheck.h"
#include "core/hub.h"
#include "core/overrides.h"
#include "core/sealed.h"
#include "core/validate.h"
#include "freeze.h"
#include "log.h"
#include "util.h"
#include "xmalloc.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct write_job {
	struct writer *w;
	struct http_conn *c;
	struct store_change *ch;
	char **names;
	size_t n;
	bool must_exist;
	struct write_opts opts;      /* its strings the job's own */
	writer_fn fn;                /* a call (writer_call), not a write: fn(arg) */
	void *arg;
	void (*free_arg)(void *);
	bool done;                   /* res is ready (the writer resumed c) */
	bool forgotten;              /* the request went away: free when done */
	struct write_result res;
	struct write_job *next;
};

/* A thread and the jobs queued for it. */
struct queue {
	struct writer *w;
	pthread_t thread;
	bool running;
	struct write_job *head, *tail;
};

struct writer {
	struct core *p;
	void *ctx;                   /* what a call's fn gets */
	pthread_mutex_t lock;        /* both queues, the jobs' done and forgotten */
	pthread_cond_t cond;
	struct queue writes, reads;  /* the writer thread's; the reader thread's */
	bool stop;
};

/* How long a write waits for a stale replica to confirm it is current
 * before it is refused: two of the watch's checks. */
#define WRITE_FRESH_WAIT_MS 4000

void write_result_error(struct write_result *res, unsigned status, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	res->status = status;
	res->gzip_ok = false;
	buf_init(&res->body);
	res->error = xstrdup(msg);
}

/* A dry run's answer: what the changes would do to the store (under its
 * writer lock), compared as store_commit compares (the stored form). */
static void dry_run_answer(struct store *s, const struct store_change *ch, size_t n, const char *frozen,
			   struct write_result *res)
{
	res->status = HTTP_OK;
	res->gzip_ok = true;
	res->error = NULL;
	buf_init(&res->body);
	buf_printf(&res->body, "{\"dry_run\":true,\"version\":%llu,\"changes\":[",
		   (unsigned long long)store_version(s));
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		const struct store_entry *e = store_get(s, ch[i].name);
		size_t slen = 0;
		const char *cur = e && e->body ? store_stored(e, &slen) : NULL;
		const char *what;
		if (ch[i].body)
			what = !cur ? "create" : (slen == ch[i].body_len && memcmp(cur, ch[i].body, slen) == 0)
							 ? NULL : "update";
		else
			what = cur ? "delete" : NULL;
		if (!what)
			continue;
		buf_puts(&res->body, k++ ? ",{\"name\":" : "{\"name\":");
		buf_json_string(&res->body, ch[i].name);
		buf_printf(&res->body, ",\"change\":\"%s\"}", what);
	}
	buf_printf(&res->body, "],\"changed\":%s", k ? "true" : "false");
	if (frozen) {
		buf_puts(&res->body, ",\"frozen\":");
		buf_json_string(&res->body, frozen);
	}
	buf_putc(&res->body, '}');
}

void writer_commit(struct core *p, struct store_change *ch, size_t n, bool must_exist,
		   const struct write_opts *opts, struct write_result *res)
{
	writer_commit_revert(p, ch, n, must_exist, opts, 0, 0, res);
}

void writer_commit_revert(struct core *p, struct store_change *ch, size_t n, bool must_exist,
			  const struct write_opts *opts, uint64_t reverts_from, uint64_t reverts_to,
			  struct write_result *res)
{
	struct store_meta meta = { opts ? opts->author : NULL, opts ? opts->message : NULL, reverts_from, reverts_to,
				   NULL, opts && opts->emergency };
	char err[1024];
	uint64_t version = 0;
	bool changed = false;
	int rc;

	/* a replica cut off from its source cannot confirm it holds the
	 * newest version: it takes no write (freshness.h) */
	struct fresh_view fv;
	freshness_ask(p->persist, &fv);
	/* a replica that was only away a moment (paused, or its watch slow
	 * to check) confirms within a check or two: it is given that long */
	for (int64_t until = now_ms() + WRITE_FRESH_WAIT_MS; fv.stale && now_ms() < until;) {
		struct timespec ts = { 0, 50 * 1000000L };
		nanosleep(&ts, NULL);
		freshness_ask(p->persist, &fv);
	}
	if (fv.stale) {
		for (size_t i = 0; i < n; i++)
			free(ch[i].body);
		atomic_fetch_add(&p->ctr.write_errors, 1);
		char when[32];
		time_t t = (time_t)fv.since;
		struct tm tm;
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
		write_result_error(res, HTTP_SERVICE_UNAVAILABLE,
				   "this replica is stale since %s (%s): it cannot confirm that it holds the newest "
				   "version, so it takes no write; nothing was stored: write to another replica",
				   when, fv.why);
		return;
	}

	bool passed_freeze = false, would_freeze = false;
	char frozen[2048];
	unsigned fst;
	/* with replicas, another may commit first: validate again against
	 * its newer state and retry, a few times */
	for (int attempt = 0;; attempt++) {
		store_write_lock(p->store);
		/* a freeze window refuses it (423), unless an admin's override
		 * passes: asked under the writer lock, as a freeze is set
		 * (api/freeze.c), so no write checked before a freeze lands after it */
		fst = freeze_state_check(p->freeze, opts ? opts->override : NULL, opts && opts->admin, &passed_freeze,
					 frozen, sizeof(frozen));
		if (fst && opts && opts->dry_run) {
			fst = 0;    /* a dry run reports the freeze; it goes on checking */
			would_freeze = true;
		} else if (fst) {
			store_write_unlock(p->store);
			for (size_t i = 0; i < n; i++)
				free(ch[i].body);
			write_result_error(res, fst, "%s", frozen);
			return;
		}
		if (must_exist) {
			const struct store_entry *e = store_get(p->store, ch[0].name);
			if (!e || !e->body) {
				store_write_unlock(p->store);
				for (size_t i = 0; i < n; i++)
					free(ch[i].body);
				write_result_error(res, HTTP_NOT_FOUND, "no resource '%s'", ch[0].name);
				return;
			}
		}
		uint64_t seen = store_version(p->store);
		if (opts && opts->has_base && seen != opts->base) {
			store_write_unlock(p->store);
			for (size_t i = 0; i < n; i++)
				free(ch[i].body);
			write_result_error(res, HTTP_CONFLICT,
				     "the plane is at version %llu, not %llu: someone wrote in between; nothing was applied",
				     (unsigned long long)seen, (unsigned long long)opts->base);
			return;
		}
		rc = validate_candidate(p->store, ch, n, p->cfg.max_resources, err, sizeof(err));
		if (rc == 0)   /* sealed secrets: the checks, and the form the store keeps */
			rc = sealed_check(p->sealed, p->store, p->nodes, ch, n, opts && opts->revert, err, sizeof(err));
		/* guards (core/guardcheck.c): crossing one is a 422, unless overridden;
		 * an override is recorded, and marked before the version exists */
		const char *reason = opts ? opts->override : NULL;
		char *passed = NULL, *record = NULL;
		if (rc == 0)
			rc = guardcheck_write(p->store, ch, n, reason, &passed, err, sizeof(err));
		if (opts && opts->dry_run) {
			if (rc == 0)
				dry_run_answer(p->store, ch, n, would_freeze ? frozen : NULL, res);
			free(passed);
			store_write_unlock(p->store);
			for (size_t i = 0; i < n; i++)
				free(ch[i].body);
			if (rc != 0)
				write_result_error(res, HTTP_UNPROCESSABLE_CONTENT, "%s", err);
			return;
		}
		/* passed: the JSON array of what the override passed, "freeze"
		 * first when it passed a freeze window */
		if (rc == 0 && passed_freeze)
			passed = freeze_passed_add(passed);
		if (rc == 0 && (record = guardcheck_record(reason, passed)))
			overrides_note(p->overrides, seen + 1);
		meta.override = record;
		int cr = rc == 0 ? store_commit_meta(p->store, ch, n, opts ? opts->rows : NULL, opts ? opts->rows_ctx : NULL,
						     &meta, &version, &changed, err, sizeof(err)) : 0;
		if (record && (cr < 0 || !changed || version != seen + 1))
			overrides_forget(p->overrides, seen + 1);
		free(passed);
		free(record);
		store_write_unlock(p->store);
		if (cr == PERSIST_CONFLICT && attempt < 20) {
			store_wait_version(p->store, seen + 1, 2000);
			continue;
		}
		if (cr == PERSIST_UNAVAILABLE)
			rc = -3;
		else if (cr == PERSIST_FENCED)
			rc = -4;
		else if (cr < 0)
			rc = -2;
		break;
	}
	for (size_t i = 0; i < n; i++)
		free(ch[i].body);

	if (rc == -1) {
		atomic_fetch_add(&p->ctr.refused_writes, 1);
		write_result_error(res, HTTP_UNPROCESSABLE_CONTENT, "%s", err);
		return;
	}
	if (rc == -3) {
		atomic_fetch_add(&p->ctr.write_errors, 1);
		log_warn("store: write refused, the store is read-only: %s", err);
		write_result_error(res, HTTP_SERVICE_UNAVAILABLE,
			     "the store is read-only now (etcd has no quorum or cannot be reached); the write is not "
			     "confirmed (stored only if etcd took it before the link failed: read it back), try again: %s",
			     err);
		return;
	}
	if (rc == -4) {
		/* its rows may be written by the rollout controller only */
		log_warn("store: write refused, this replica stopped being the rollout controller: %s", err);
		write_result_error(res, HTTP_CONFLICT, "nothing was stored: %s; send it to the rollout controller", err);
		return;
	}
	if (rc == -2) {
		atomic_fetch_add(&p->ctr.write_errors, 1);
		log_error("store: write failed, nothing stored: %s", err);
		write_result_error(res, HTTP_INTERNAL_SERVER_ERROR, "store write failed, nothing was stored: %s", err);
		return;
	}
	if (changed) {
		atomic_fetch_add(&p->ctr.writes, 1);
		log_info("store: version %llu (%zu changes)", (unsigned long long)version, n);
		hub_notify(p->hub, version);
		events_version(p->events, version, ch, n, "write");
		core_step(p);   /* staged: the version becomes a rollout */
	}
	if (passed_freeze)
		freeze_state_passed(p->freeze, version, opts->author, opts->override);
	res->status = HTTP_OK;
	res->gzip_ok = false;
	res->error = NULL;
	res->version = version;
	res->changed = changed;
	buf_init(&res->body);
	buf_printf(&res->body, "{\"version\":%llu,\"changed\":%s", (unsigned long long)version,
		   changed ? "true" : "false");
	/* what its rollout does (an emergency revert's: its caller says) */
	if (changed && p->hooks.write_note && !(opts && opts->emergency))
		p->hooks.write_note(p->hooks.ctx, version, &res->body);
	buf_putc(&res->body, '}');
}

static void job_free(struct write_job *j)
{
	for (size_t i = 0; i < j->n; i++) {
		free(j->names[i]);
		free(j->ch[i].body);
	}
	free(j->names);
	free(j->ch);
	free((char *)j->opts.author);
	free((char *)j->opts.message);
	free((char *)j->opts.override);
	buf_release(&j->res.body);
	free(j->res.error);
	free(j);
}

/* Hands the answer over and wakes the request (or frees a forgotten job). */
static void finish(struct writer *w, struct write_job *j)
{
	pthread_mutex_lock(&w->lock);
	j->done = true;
	bool gone = j->forgotten;
	if (!gone)
		http_resume(j->c);
	pthread_mutex_unlock(&w->lock);
	if (gone)
		job_free(j);
}

/* The thread of one queue: its jobs in arrival order. */
static void *queue_main(void *arg)
{
	struct queue *q = arg;
	struct writer *w = q->w;
	alive_enter(q == &w->writes ? "writer" : "reader");
	pthread_mutex_lock(&w->lock);
	for (;;) {
		alive_park(-1);
		while (!w->stop && !q->head)
			pthread_cond_wait(&w->cond, &w->lock);
		alive_unpark();
		struct write_job *j = q->head;
		if (!j)
			break;   /* stopping, nothing queued */
		q->head = j->next;
		if (!q->head)
			q->tail = NULL;
		bool stopping = w->stop;
		pthread_mutex_unlock(&w->lock);
		if (stopping) {
			for (size_t i = 0; i < j->n; i++) {
				free(j->ch[i].body);
				j->ch[i].body = NULL;
			}
			write_result_error(&j->res, HTTP_SERVICE_UNAVAILABLE, "the plane is shutting down; nothing was %s",
				     q == &w->writes ? "stored" : "read");
		} else if (j->fn) {
			j->fn(w->ctx, j->arg, &j->res);
		} else {
			writer_commit(w->p, j->ch, j->n, j->must_exist, &j->opts, &j->res);
			for (size_t i = 0; i < j->n; i++)
				j->ch[i].body = NULL;   /* writer_commit freed them */
		}
		if (j->free_arg)
			j->free_arg(j->arg);
		j->arg = NULL;
		finish(w, j);
		pthread_mutex_lock(&w->lock);
	}
	pthread_mutex_unlock(&w->lock);
	alive_leave();
	return NULL;
}

struct writer *writer_start(struct core *p, void *ctx, char *err, size_t errlen)
{
	struct writer *w = xcalloc(1, sizeof(*w));
	w->p = p;
	w->ctx = ctx;
	w->writes.w = w->reads.w = w;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	struct queue *qs[] = { &w->writes, &w->reads };
	for (size_t i = 0; i < 2; i++) {
		if (pthread_create(&qs[i]->thread, NULL, queue_main, qs[i]) != 0) {
			snprintf(err, errlen, "cannot start the %s thread", i ? "reader" : "writer");
			writer_stop(w);
			return NULL;
		}
		qs[i]->running = true;
	}
	return w;
}

void writer_stop(struct writer *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	if (w->writes.running)
		pthread_join(w->writes.thread, NULL);
	if (w->reads.running)
		pthread_join(w->reads.thread, NULL);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->cond);
	free(w);
}

/* Suspends the request and queues its job. */
static void enqueue(struct writer *w, struct queue *q, struct write_job *j)
{
	http_suspend(j->c);
	pthread_mutex_lock(&w->lock);
	if (q->tail)
		q->tail->next = j;
	else
		q->head = j;
	q->tail = j;
	pthread_cond_broadcast(&w->cond);   /* one cond, two threads: the right one must wake */
	pthread_mutex_unlock(&w->lock);
}

struct write_job *writer_call(struct writer *w, struct http_conn *c, bool write, writer_fn fn, void *arg,
			      void (*free_arg)(void *))
{
	if (!w)
		return NULL;
	struct write_job *j = xcalloc(1, sizeof(*j));
	j->w = w;
	j->c = c;
	j->fn = fn;
	j->arg = arg;
	j->free_arg = free_arg;
	enqueue(w, write ? &w->writes : &w->reads, j);
	return j;
}

struct write_job *writer_submit(struct writer *w, struct http_conn *c, struct store_change *ch, size_t n,
				bool must_exist, const struct write_opts *opts)
{
	if (!w)
		return NULL;
	struct write_job *j = xcalloc(1, sizeof(*j));
	j->w = w;
	j->c = c;
	j->n = n;
	j->must_exist = must_exist;
	if (opts) {
		j->opts = *opts;
		j->opts.author = opts->author ? xstrdup(opts->author) : NULL;
		j->opts.message = opts->message ? xstrdup(opts->message) : NULL;
		j->opts.override = opts->override ? xstrdup(opts->override) : NULL;
	}
	j->ch = xcalloc(n ? n : 1, sizeof(*j->ch));
	j->names = xcalloc(n ? n : 1, sizeof(*j->names));
	for (size_t i = 0; i < n; i++) {
		j->ch[i] = ch[i];                       /* the body is the job's now */
		j->names[i] = xstrdup(ch[i].name);      /* the request's memory goes with it */
		j->ch[i].name = j->names[i];
		ch[i].body = NULL;
	}
	enqueue(w, &w->writes, j);
	return j;
}

bool writer_take(struct write_job *j, struct write_result *res)
{
	/* under the lock: finish() sets done and reads the job after */
	pthread_mutex_lock(&j->w->lock);
	bool done = j->done;
	pthread_mutex_unlock(&j->w->lock);
	if (!done)
		return false;
	*res = j->res;
	buf_init(&j->res.body);
	j->res.error = NULL;
	job_free(j);
	return true;
}

void writer_forget(struct writer *w, struct write_job *j)
{
	pthread_mutex_lock(&w->lock);
	bool done = j->done;
	j->forgotten = true;
	pthread_mutex_unlock(&w->lock);
	if (done)
		job_free(j);
}
