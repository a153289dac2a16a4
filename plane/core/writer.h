/* core/writer.h: resource writes off the HTTP threads, for a backend
 * whose commit may wait seconds (etcd electing a leader): the request is
 * suspended, one writer thread validates and commits, and the request is
 * resumed with the answer. With the embedded store writes stay on the
 * request's thread (a commit is one fsync). Other work of a request that
 * waits on such a backend (the version log's reads, a revert) goes the
 * same way through writer_call: a revert on the writer thread, in order
 * with the writes; a read on a reader thread of its own. */
#ifndef TETHER_WRITER_H
#define TETHER_WRITER_H

#include "net/httpd.h"
#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "core/store.h"

struct core;

/* One write's (or call's) answer: a status and a JSON body, or a status
 * and an error message (http/ writes it as every error answer). */
struct write_result {
	unsigned status;
	struct buf body;             /* JSON */
	bool gzip_ok;                /* may be sent compressed (when the client takes it) */
	char *error;                 /* NULL: none */
	uint64_t version;            /* a write's: the version it made (changed) or found */
	bool changed;
};
/* An error answer: status and message. */
void write_result_error(struct write_result *res, unsigned status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* What the version log records of a write, and the version it was made
 * against: with has_base, a store at another version refuses it (409) and
 * applies nothing. Strings borrowed (a suspended job copies them). */
struct write_opts {
	const char *author, *message;
	bool has_base;
	uint64_t base;
	bool revert;                 /* tetherctl revert: sealed_check's revert */
	/* X-Tether-Override (tetherctl --override REASON): the reason a write
	 * passes a guard or (admin only) a freeze; the version log keeps it */
	const char *override;
	bool admin;                  /* the writer holds the admin role */
	/* POST /v1/batch?dry_run=1: every check a write runs (freshness,
	 * base, schema, references, sealed secrets, guards), nothing stored;
	 * a freeze window does not refuse it (the answer says it would) */
	bool dry_run;
	/* tetherctl revert --now: the version log marks it an emergency */
	bool emergency;
	/* run inside the commit's transaction with its version (NULL: none):
	 * what it records lands with the write or not at all; PERSIST_FENCED
	 * from it is 409 (rollout_emergency_rows) */
	persist_hook rows;
	void *rows_ctx;
};

/* Validates and commits changes (bodies taken, names borrowed), retrying
 * when another replica wrote first; fills res. With opts->dry_run
 * nothing is committed: res is {"dry_run":true,"version":V,"changed":B,
 * "changes":[{"name":N,"change":"create"|"update"|"delete"}]} (and
 * "frozen":WHY when a freeze window would refuse the write), or the
 * error the write would get. must_exist: a single
 * DELETE, 404 when the name is not live. opts may be NULL. Any thread. */
void writer_commit(struct core *p, struct store_change *ch, size_t n, bool must_exist,
		   const struct write_opts *opts, struct write_result *res);
/* writer_commit for tetherctl revert V made at version cur: the log marks
 * the versions it reverts, (reverts_from, reverts_to] = (V, cur], reverted
 * by the new version, as a rollout's revert does (log's REVERTED BY). */
void writer_commit_revert(struct core *p, struct store_change *ch, size_t n, bool must_exist,
			  const struct write_opts *opts, uint64_t reverts_from, uint64_t reverts_to,
			  struct write_result *res);

struct writer;
/* ctx: what a call's fn gets (writer_call). */
struct writer *writer_start(struct core *p, void *ctx, char *err, size_t errlen);
/* Finishes the write in hand; those still queued are answered 503. */
void writer_stop(struct writer *w);

/* A suspended write: changes copied (names too), the connection suspended
 * until the answer is ready; NULL when there is no writer (answer at once
 * with writer_commit). */
struct write_job;
struct write_job *writer_submit(struct writer *w, struct http_conn *c, struct store_change *ch, size_t n,
				bool must_exist, const struct write_opts *opts);
/* Other work for a suspended request: fn computes the answer from arg
 * (on the writer thread when write, in order with the writes, else on the
 * reader thread), then free_arg(arg). NULL when there is no writer: the
 * caller runs fn on its own thread. */
typedef void (*writer_fn)(void *ctx, void *arg, struct write_result *res);
struct write_job *writer_call(struct writer *w, struct http_conn *c, bool write, writer_fn fn, void *arg,
			      void (*free_arg)(void *));

/* After the resume: the answer, if the job is done (true), and the job
 * freed. */
bool writer_take(struct write_job *j, struct write_result *res);
/* A request completed while its job was queued (the client left). */
void writer_forget(struct writer *w, struct write_job *j);

#endif
