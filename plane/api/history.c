/* api/history.c: the version log over HTTP (docs/protocol.md "History"):
 * the versions (who, when, why, what), one version's changes, a diff of
 * two versions, a resource as it was, and a revert to an earlier state as
 * a new version (a write like any other: staged rollouts stage it). Reads
 * need a reader; secrets are redacted for non-admins as in
 * /v1/resources. Each handler checks its input on the request's thread,
 * then computes its answer from the backend in a job (a *_run function):
 * with a shared backend on the reader thread (the revert on the writer
 * thread), the request suspended meanwhile (writer_call), else at once. */
#include "api/api.h"
#include "core/approvals.h"
#include "core/core.h"
#include "core/store.h"
#include "core/validate.h"
#include "core/writer.h"
#include "http/auth.h"
#include "http/http.h"
#include "json.h"
#include "log.h"
#include "rollout/rollout.h"
#include "util.h"
#include "xmalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MESSAGE_MAX 1024
#define LIST_MAX 10000

int history_message_check(const char *m, char *err, size_t errlen)
{
	size_t n = strlen(m);
	if (n > MESSAGE_MAX) {
		snprintf(err, errlen, "longer than %d bytes", MESSAGE_MAX);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)m[i];
		if (ch < 0x20 || ch == 0x7f) {
			snprintf(err, errlen, "must be printable (a control character at byte %zu)", i);
			return -1;
		}
	}
	return 0;
}

int api_override(struct http_conn *c, const struct principal *who, struct write_opts *opts, char *err,
		 size_t errlen)
{
	char why[256];
	opts->admin = auth_sees_secrets(who);
	opts->override = http_header(c, "X-Tether-Override");
	if (!opts->override)
		return 0;
	if (!opts->override[0]) {
		snprintf(err, errlen, "X-Tether-Override: give a reason (tetherctl --override REASON)");
		return -1;
	}
	if (history_message_check(opts->override, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "X-Tether-Override: %s", why);
		return -1;
	}
	return 0;
}

static bool has_log(struct api *p, struct http_conn *c, enum http_result *ret)
{
	if (p->core->persist->ops->log_list)
		return true;
	*ret = http_send_error(c, HTTP_NOT_IMPLEMENTED, "the %s store keeps no version history",
			       p->core->persist->ops->name);
	return false;
}

static void put_version(struct buf *b, const struct persist_version *v)
{
	buf_printf(b, "{\"version\":%llu,\"author\":", (unsigned long long)v->version);
	buf_json_string(b, v->author ? v->author : "");
	buf_printf(b, ",\"time\":%lld,\"message\":", (long long)v->time);
	buf_json_string(b, v->message ? v->message : "");
	buf_printf(b, ",\"names\":%s,\"reverted_by\":%llu", v->names ? v->names : "[]",
		   (unsigned long long)v->reverted_by);
	if (v->override)   /* {"passed":[GUARD...],"reason":R}, as the writer recorded it */
		buf_printf(b, ",\"override\":%s", v->override);
	if (v->emergency)   /* tetherctl revert --now */
		buf_puts(b, ",\"emergency\":true");
}

struct listing {
	struct buf *b;
	size_t n;
	const struct principal *who;
	struct approvals *approvals;   /* a version's approvals (core/approvals.h), or NULL */
};

static int list_cb(void *ctx, const struct persist_version *v)
{
	struct listing *l = ctx;
	if (l->n++)
		buf_putc(l->b, ',');
	put_version(l->b, v);
	if (l->approvals)
		approvals_log_json(l->approvals, v->version, l->b);
	buf_putc(l->b, '}');
	return 0;
}

static void put_state(struct buf *b, const struct principal *who, const char *name, const char *body, size_t len)
{
	if (body)
		api_append_body(b, who, name, body, len);
	else
		buf_puts(b, "null");
}

static int version_cb(void *ctx, const struct persist_version *v)
{
	struct listing *l = ctx;
	put_version(l->b, v);
	if (l->approvals)
		approvals_log_json(l->approvals, v->version, l->b);
	buf_puts(l->b, ",\"changes\":[");
	return 0;
}

static int change_cb(void *ctx, const struct persist_vchange *ch)
{
	struct listing *l = ctx;
	if (l->n++)
		buf_putc(l->b, ',');
	buf_puts(l->b, "{\"name\":");
	buf_json_string(l->b, ch->name);
	buf_puts(l->b, ",\"before\":");
	put_state(l->b, l->who, ch->name, ch->before, ch->before_len);
	buf_puts(l->b, ",\"after\":");
	put_state(l->b, l->who, ch->name, ch->after, ch->after_len);
	buf_putc(l->b, '}');
	return 0;
}

/* 0 fine; else res holds the answer: V is past what is kept (410) or
 * beyond the store's version (404); cur: the store's version as read. */
static int check_kept(uint64_t v, uint64_t floor, uint64_t cur, struct write_result *res)
{
	if (v > cur) {
		write_result_error(res, HTTP_NOT_FOUND, "no version %llu: the plane is at version %llu",
				   (unsigned long long)v, (unsigned long long)cur);
		return -1;
	}
	if (v < floor) {
		write_result_error(res, HTTP_GONE,
				   "version %llu is past the history kept (the oldest kept is %llu; see "
				   "--history-keep and --history-max-age)", (unsigned long long)v,
				   (unsigned long long)floor);
		return -1;
	}
	return 0;
}

static int parse_version(const char *s, uint64_t *v)
{
	return s && *s && parse_u64(s, v) == 0 ? 0 : -1;
}

/* A JSON answer (b taken). */
static void answer_json(struct write_result *res, struct buf *b)
{
	buf_putc(b, '\n');
	res->status = HTTP_OK;
	res->error = NULL;
	res->body = *b;
	res->gzip_ok = true;
	buf_init(b);
}

/* Runs fn(p, arg) off the request's thread when the plane has a writer
 * (a shared backend), else here; free_arg(arg) after. */
enum http_result api_run(struct api *p, struct http_conn *c, struct request *r, bool write, writer_fn fn,
			 void *arg, void (*free_arg)(void *))
{
	r->job = writer_call(p->core->writer, c, write, fn, arg, free_arg);
	if (r->job)
		return HTTP_YES;
	struct write_result res = { 0 };
	fn(p, arg, &res);
	free_arg(arg);
	return http_send_result(c, &res);
}

/* GET /v1/history and /v1/history/{V}: what the job needs. */
struct history_job {
	struct principal who;
	char *name;                  /* NULL: all */
	uint64_t limit;
	bool one;                    /* /v1/history/{V} */
	uint64_t v;
};

static void history_job_free(void *arg)
{
	struct history_job *j = arg;
	free(j->name);
	free(j);
}

static void history_run(void *ctx, void *arg, struct write_result *res)
{
	struct api *p = ctx;
	struct history_job *j = arg;
	const struct persist_ops *ops = p->core->persist->ops;
	char err[512];
	struct buf b = BUF_INIT;
	struct listing l = { &b, 0, &j->who, p->core->approvals };
	uint64_t floor = 0;
	store_rdlock(p->core->store);
	uint64_t cur = store_version(p->core->store);
	store_rdunlock(p->core->store);
	if (ops->log_floor(p->core->persist, &floor, err, sizeof(err)) < 0) {
		write_result_error(res, HTTP_INTERNAL_SERVER_ERROR, "history: %s", err);
		return;
	}
	if (!j->one) {
		buf_printf(&b, "{\"version\":%llu,\"floor\":%llu,\"versions\":[", (unsigned long long)cur,
			   (unsigned long long)floor);
		if (ops->log_list(p->core->persist, j->name, (size_t)j->limit, list_cb, &l, err, sizeof(err)) < 0) {
			buf_release(&b);
			write_result_error(res, HTTP_INTERNAL_SERVER_ERROR, "history: %s", err);
			return;
		}
		buf_puts(&b, "]}");
		answer_json(res, &b);
		return;
	}
	/* a version's record is kept when the state before it is */
	if (check_kept(j->v, j->v ? floor + 1 : 1, cur, res) < 0)
		return;
	int rc = ops->log_get(p->core->persist, j->v, version_cb, change_cb, &l, err, sizeof(err));
	if (rc <= 0) {
		buf_release(&b);
		if (rc < 0)
			write_result_error(res, HTTP_INTERNAL_SERVER_ERROR, "history: %s", err);
		else
			write_result_error(res, HTTP_GONE, "version %llu is past the history kept",
					   (unsigned long long)j->v);
		return;
	}
	buf_puts(&b, "]}");
	answer_json(res, &b);
}

enum http_result api_history(struct api *p, struct http_conn *c, struct request *r, const char *version)
{
	struct principal who;
	enum http_result ret;
	char err[512];
	if (!auth_allow(p->auth, c, ROLE_READER, &who, &ret) || !has_log(p, c, &ret))
		return ret;
	struct history_job *j = xcalloc(1, sizeof(*j));
	j->who = who;
	if (!version) {
		const char *name = http_query(c, "name");
		const char *lim = http_query(c, "limit");
		j->limit = 20;
		if (lim && (parse_u64(lim, &j->limit) < 0 || j->limit < 1 || j->limit > LIST_MAX)) {
			history_job_free(j);
			return http_send_error(c, HTTP_BAD_REQUEST, "limit: must be an integer in 1..%d", LIST_MAX);
		}
		if (name && resource_fullname_check(name, err, sizeof(err)) < 0) {
			history_job_free(j);
			return http_send_error(c, HTTP_BAD_REQUEST, "name: %s", err);
		}
		j->name = name ? xstrdup(name) : NULL;
	} else {
		j->one = true;
		if (parse_version(version, &j->v) < 0) {
			history_job_free(j);
			return http_send_error(c, HTTP_BAD_REQUEST, "history: '%.40s' is not a version", version);
		}
	}
	return api_run(p, c, r, false, history_run, j, history_job_free);
}

/* The states of names at a version, as the log rebuilds them. */
struct state {
	char *name;
	char *body;       /* NULL: absent */
	size_t len;
	bool from_log;
};
struct states {
	struct state *s;
	size_t n, cap;
};

static int states_cb(void *ctx, const struct persist_vchange *ch)
{
	struct states *st = ctx;
	if (st->n == st->cap) {
		st->cap = st->cap ? st->cap * 2 : 16;
		st->s = xrealloc(st->s, st->cap * sizeof(*st->s));
	}
	struct state *x = &st->s[st->n++];
	x->name = xstrdup(ch->name);
	x->body = ch->before ? xstrndup(ch->before, ch->before_len) : NULL;
	x->len = ch->before ? ch->before_len : 0;
	x->from_log = true;
	return 0;
}

static void states_release(struct states *st)
{
	for (size_t i = 0; i < st->n; i++) {
		free(st->s[i].name);
		free(st->s[i].body);
	}
	free(st->s);
	memset(st, 0, sizeof(*st));
}

static const struct state *states_find(const struct states *st, const char *name)
{
	for (size_t i = 0; i < st->n; i++)
		if (strcmp(st->s[i].name, name) == 0)
			return &st->s[i];
	return NULL;
}

/* The log's states at v of the names changed in (v, cur] (only name's,
 * when given), cur being the store's version they match: the backend is
 * read without the store's lock (an etcd read must not hold up a commit),
 * and on success the read lock is held, the store still at *cur, so the
 * caller takes the other names' states from memory. A commit landing
 * meanwhile means reading again. -1 with err, the lock not held. */
static int log_states(struct api *p, uint64_t v, const char *name, struct states *st, uint64_t *cur, char *err,
		      size_t errlen)
{
	for (int attempt = 0; attempt < 8; attempt++) {
		store_rdlock(p->core->store);
		uint64_t c = store_version(p->core->store);
		store_rdunlock(p->core->store);
		if (v < c && p->core->persist->ops->log_after(p->core->persist, v, c, name, states_cb, st, err, errlen) < 0) {
			states_release(st);
			return -1;
		}
		store_rdlock(p->core->store);
		if (store_version(p->core->store) == c) {
			*cur = c;
			return 0;
		}
		store_rdunlock(p->core->store);
		states_release(st);
	}
	snprintf(err, errlen, "the store kept moving while the history was read; try again");
	return -1;
}

/* GET /v1/resources/{name}?at=V: what the job needs. */
struct at_job {
	struct principal who;
	char *name;
	uint64_t v;
};

static void at_job_free(void *arg)
{
	struct at_job *j = arg;
	free(j->name);
	free(j);
}

static void get_at_run(void *ctx, void *arg, struct write_result *res)
{
	struct api *p = ctx;
	struct at_job *j = arg;
	char err[512];
	uint64_t floor = 0, cur = 0;
	if (p->core->persist->ops->log_floor(p->core->persist, &floor, err, sizeof(err)) < 0) {
		write_result_error(res, HTTP_INTERNAL_SERVER_ERROR, "history: %s", err);
		return;
	}
	struct states st = { 0 };
	if (log_states(p, j->v, j->name, &st, &cur, err, sizeof(err)) < 0) {
		write_result_error(res, HTTP_SERVICE_UNAVAILABLE, "history: %s", err);
		return;
	}
	char *body = NULL;
	size_t len = 0;
	int rc = check_kept(j->v, floor, cur, res);
	if (rc == 0 && st.n) {
		body = st.s[0].body;
		len = st.s[0].len;
		st.s[0].body = NULL;
	} else if (rc == 0) {
		const struct store_entry *e = store_get(p->core->store, j->name);
		const char *live = e && e->body ? store_stored(e, &len) : NULL;
		body = live ? xstrndup(live, len) : NULL;
		len = live ? len : 0;
	}
	store_rdunlock(p->core->store);
	states_release(&st);
	if (rc < 0)
		return;
	if (!body) {
		write_result_error(res, HTTP_NOT_FOUND, "no resource '%s' at version %llu", j->name,
				   (unsigned long long)j->v);
		return;
	}
	struct buf b = BUF_INIT;
	buf_puts(&b, "{\"name\":");
	buf_json_string(&b, j->name);
	buf_printf(&b, ",\"at\":%llu,\"body\":", (unsigned long long)j->v);
	api_append_body(&b, &j->who, j->name, body, len);
	buf_putc(&b, '}');
	free(body);
	answer_json(res, &b);
}

enum http_result api_history_get_at(struct api *p, struct http_conn *c, struct request *r,
				   const struct principal *who, const char *name, const char *at)
{
	enum http_result ret;
	uint64_t v;
	if (parse_version(at, &v) < 0)
		return http_send_error(c, HTTP_BAD_REQUEST, "at: '%.40s' is not a version", at);
	if (!has_log(p, c, &ret))
		return ret;
	struct at_job *j = xcalloc(1, sizeof(*j));
	j->who = *who;
	j->name = xstrdup(name);
	j->v = v;
	return api_run(p, c, r, false, get_at_run, j, at_job_free);
}

/* Per name changed in (a, b] (b <= the store's version): its state at a
 * (before) and at b (after). Takes the store's read lock. */
static int diff_states(struct api *p, uint64_t a, uint64_t b, struct states *before, struct states *after,
		       char *err, size_t errlen)
{
	/* versions up to b are the past: no lock needed for them */
	if (p->core->persist->ops->log_after(p->core->persist, a, b, NULL, states_cb, before, err, errlen) < 0)
		return -1;
	struct states later = { 0 };
	uint64_t cur;
	if (log_states(p, b, NULL, &later, &cur, err, errlen) < 0)
		return -1;
	for (size_t i = 0; i < before->n; i++) {
		const char *name = before->s[i].name;
		const struct state *l = states_find(&later, name);
		struct persist_vchange ch = { .name = name };
		if (l) {
			ch.before = l->body;
			ch.before_len = l->len;
		} else {
			const struct store_entry *e = store_get(p->core->store, name);
			ch.before = e && e->body ? store_stored(e, &ch.before_len) : NULL;
			if (!ch.before)
				ch.before_len = 0;
		}
		states_cb(after, &ch);
	}
	store_rdunlock(p->core->store);
	states_release(&later);
	return 0;
}

/* GET /v1/diff: what the job needs. */
struct diff_job {
	struct principal who;
	uint64_t a, b;
};

static void diff_run(void *ctx, void *arg, struct write_result *res)
{
	struct api *p = ctx;
	struct diff_job *j = arg;
	char err[512];
	uint64_t a = j->a, b = j->b, floor = 0;
	if (p->core->persist->ops->log_floor(p->core->persist, &floor, err, sizeof(err)) < 0) {
		write_result_error(res, HTTP_INTERNAL_SERVER_ERROR, "history: %s", err);
		return;
	}
	uint64_t lo = a < b ? a : b, hi = a < b ? b : a;
	struct states sa = { 0 }, sb = { 0 };
	store_rdlock(p->core->store);
	uint64_t cur = store_version(p->core->store);
	store_rdunlock(p->core->store);
	if (check_kept(lo, floor, cur, res) < 0 || check_kept(hi, floor, cur, res) < 0)
		return;
	if (diff_states(p, lo, hi, &sa, &sb, err, sizeof(err)) < 0) {
		states_release(&sa);
		states_release(&sb);
		write_result_error(res, HTTP_INTERNAL_SERVER_ERROR, "history: %s", err);
		return;
	}
	/* from a to b: when a > b, what undoing the versions between would do */
	struct states *from = a <= b ? &sa : &sb, *to = a <= b ? &sb : &sa;
	struct buf out = BUF_INIT;
	buf_printf(&out, "{\"from\":%llu,\"to\":%llu,\"changes\":[", (unsigned long long)a, (unsigned long long)b);
	size_t k = 0;
	for (size_t i = 0; i < from->n; i++) {
		const struct state *x = &from->s[i], *y = &to->s[i];
		if ((!x->body && !y->body) ||
		    (x->body && y->body && x->len == y->len && memcmp(x->body, y->body, x->len) == 0))
			continue;   /* changed and changed back */
		if (k++)
			buf_putc(&out, ',');
		buf_puts(&out, "{\"name\":");
		buf_json_string(&out, x->name);
		buf_puts(&out, ",\"before\":");
		put_state(&out, &j->who, x->name, x->body, x->len);
		buf_puts(&out, ",\"after\":");
		put_state(&out, &j->who, y->name, y->body, y->len);
		buf_putc(&out, '}');
	}
	buf_puts(&out, "]}");
	states_release(&sa);
	states_release(&sb);
	answer_json(res, &out);
}

enum http_result api_diff(struct api *p, struct http_conn *c, struct request *r)
{
	struct principal who;
	enum http_result ret;
	uint64_t a, b;
	if (!auth_allow(p->auth, c, ROLE_READER, &who, &ret) || !has_log(p, c, &ret))
		return ret;
	if (parse_version(http_query(c, "from"), &a) < 0 || parse_version(http_query(c, "to"), &b) < 0)
		return http_send_error(c, HTTP_BAD_REQUEST, "diff: from and to must be versions");
	struct diff_job *j = xcalloc(1, sizeof(*j));
	j->who = who;
	j->a = a;
	j->b = b;
	return api_run(p, c, r, false, diff_run, j, free);
}

/* POST /v1/revert: what the job needs. */
struct revert_job {
	uint64_t v;
	char *message;
	char *override;
	bool admin;
	bool now;                    /* an emergency revert: every node at once */
	char author[320];
};

static void revert_job_free(void *arg)
{
	struct revert_job *j = arg;
	free(j->message);
	free(j->override);
	free(j);
}

/* An emergency revert by an operator (not an admin) goes back only to
 * the baseline of the current or last rollout: the version released
 * before it. Checked while the rollout holds (rollout_emergency_begin):
 * on refusal, 403 and the hold ended. */
static int operator_may(struct api *p, const struct revert_job *j, struct rollout_emergency **em, int *status,
			char *err, size_t errlen)
{
	uint64_t base = 0, id = 0;
	bool have = rollout_baseline(p->rollout, &base, &id);
	if (j->admin || (have && base == j->v))
		return 0;
	rollout_emergency_end(p->rollout, *em, 0, NULL);
	*em = NULL;
	*status = HTTP_FORBIDDEN;
	if (have)
		snprintf(err, errlen, "revert --now: version %llu: an operator may revert at once only to version %llu, "
			 "the baseline of rollout %llu (the version released before it); another version needs the "
			 "admin role", (unsigned long long)j->v, (unsigned long long)base, (unsigned long long)id);
	else
		snprintf(err, errlen, "revert --now: version %llu: an operator may revert at once only to the baseline "
			 "of a rollout, and there has been none%s; this needs the admin role", (unsigned long long)j->v,
			 rollout_staged(p->rollout) ? "" : " (the plane runs with --rollout immediate)");
	log_info("revert --now: %s refused: %s", j->author, err);
	return -1;
}

/* The state at j->v from the log, committed against the version it was
 * read at (a write in between: 409). */
static void revert_run(void *ctx, void *arg, struct write_result *res)
{
	struct api *p = ctx;
	struct revert_job *j = arg;
	char err[1024];
	uint64_t v = j->v, floor = 0;
	if (p->core->persist->ops->log_floor(p->core->persist, &floor, err, sizeof(err)) < 0) {
		write_result_error(res, HTTP_INTERNAL_SERVER_ERROR, "history: %s", err);
		return;
	}
	/* read without the store's lock: the write is made against cur (a
	 * write in between is 409) */
	struct states st = { 0 };
	store_rdlock(p->core->store);
	uint64_t cur = store_version(p->core->store);
	store_rdunlock(p->core->store);
	if (check_kept(v, floor, cur, res) < 0)
		return;
	if (v < cur && p->core->persist->ops->log_after(p->core->persist, v, cur, NULL, states_cb, &st, err, sizeof(err)) < 0) {
		states_release(&st);
		write_result_error(res, HTTP_INTERNAL_SERVER_ERROR, "history: %s", err);
		return;
	}
	struct store_change *ch = xcalloc(st.n ? st.n : 1, sizeof(*ch));
	size_t n = 0;
	for (size_t i = 0; i < st.n; i++) {
		ch[n].name = st.s[i].name;
		if (st.s[i].body) {
			cJSON *body = json_decode(st.s[i].body, st.s[i].len, NULL, err, sizeof(err));
			if (!body || validate_upsert(st.s[i].name, body, &ch[n], err, sizeof(err)) < 0) {
				cJSON_Delete(body);
				for (size_t k = 0; k < n; k++)
					free(ch[k].body);
				free(ch);
				write_result_error(res, HTTP_UNPROCESSABLE_CONTENT,
						   "revert: %s as of version %llu no longer passes the checks: %s",
						   st.s[i].name, (unsigned long long)v, err);
				states_release(&st);
				return;
			}
			cJSON_Delete(body);
		}
		n++;
	}
	struct write_opts opts = { .author = j->author, .message = j->message, .has_base = true, .base = cur,
				   .revert = true, .override = j->override, .admin = j->admin, .emergency = j->now };
	/* an emergency revert holds the rollout while it commits, then
	 * supersedes the one in progress and goes to every node at once */
	int status = 0;
	struct rollout_emergency *em = NULL;
	if (j->now && (rollout_emergency_begin(p->rollout, &em, &status, err, sizeof(err)) < 0 ||
		       operator_may(p, j, &em, &status, err, sizeof(err)) < 0)) {
		for (size_t k = 0; k < n; k++)
			free(ch[k].body);
		free(ch);
		states_release(&st);
		write_result_error(res, (unsigned)status, "%s", err);
		return;
	}
	/* the versions after v up to cur are reverted by this one: log's
	 * REVERTED BY names it, as for a rollout's revert */
	if (em) {   /* the rollout's records land in the revert's own commit */
		opts.rows = rollout_emergency_rows;
		opts.rows_ctx = em;
	}
	writer_commit_revert(p->core, ch, n, false, &opts, v, v < cur ? cur : 0, res);
	if (j->now) {
		/* the answer {"version","changed"} gains what the rollout did */
		bool done = res->status == HTTP_OK && !res->error && res->changed && res->body.len &&
			    res->body.data[res->body.len - 1] == '}';
		uint64_t rv = done ? res->version : 0;
		struct buf note = BUF_INIT;
		rollout_emergency_end(p->rollout, em, rv, &note);
		if (rv && note.len) {
			res->body.len--;
			buf_append(&res->body, note.data, note.len);
			buf_putc(&res->body, '}');
		}
		buf_release(&note);
		if (rv)
			log_warn("revert --now: version %llu, the state of version %llu, by %s", (unsigned long long)rv,
				 (unsigned long long)v, j->author);
	}
	free(ch);
	states_release(&st);
}

/* POST /v1/revert {"version":V,"message":M}: the state at V committed as
 * a new version, against the version it was computed on (a write in
 * between: 409, try again). */
enum http_result api_revert(struct api *p, struct http_conn *c, struct request *r)
{
	struct principal who;
	enum http_result ret;
	char err[1024];
	if (!auth_allow(p->auth, c, ROLE_OPERATOR, &who, &ret) || !has_log(p, c, &ret))
		return ret;
	struct json_limits lim = { 64 * 1024, 4 };
	cJSON *doc = json_decode(r->body.data ? r->body.data : "", r->body.len, &lim, err, sizeof(err));
	if (!doc)
		return http_send_error(c, HTTP_BAD_REQUEST, "revert: %s", err);
	const cJSON *jv = cJSON_GetObjectItemCaseSensitive(doc, "version");
	const cJSON *jm = cJSON_GetObjectItemCaseSensitive(doc, "message");
	const cJSON *jn = cJSON_GetObjectItemCaseSensitive(doc, "now");
	for (const cJSON *f = cJSON_IsObject(doc) ? doc->child : NULL; f; f = f->next) {
		if (strcmp(f->string, "version") != 0 && strcmp(f->string, "message") != 0 &&
		    strcmp(f->string, "now") != 0) {
			/* the answer first: the field's name is the document's */
			ret = http_send_error(c, HTTP_UNPROCESSABLE_CONTENT,
					      "revert: unknown field '%.64s' (expected version, message, now)", f->string);
			cJSON_Delete(doc);
			return ret;
		}
	}
	if (jn && !cJSON_IsBool(jn)) {
		cJSON_Delete(doc);
		return http_send_error(c, HTTP_UNPROCESSABLE_CONTENT, "revert: now must be true or false");
	}
	bool now = cJSON_IsTrue(jn);
	/* an operator may stop the bleeding (an emergency revert); any other
	 * revert is a write: admin */
	if (!now && !auth_allow(p->auth, c, ROLE_ADMIN, &who, &ret)) {
		cJSON_Delete(doc);
		return ret;
	}
	if (!cJSON_IsNumber(jv) || jv->valuedouble < 0 || jv->valuedouble > 9007199254740991.0 ||
	    jv->valuedouble != (double)(uint64_t)jv->valuedouble) {
		cJSON_Delete(doc);
		return http_send_error(c, HTTP_UNPROCESSABLE_CONTENT, "revert: version must be an integer >= 0");
	}
	uint64_t v = (uint64_t)jv->valuedouble;
	char message[MESSAGE_MAX + 64];
	if (jm && (!cJSON_IsString(jm) || history_message_check(jm->valuestring, err, sizeof(err)) < 0)) {
		cJSON_Delete(doc);
		return http_send_error(c, HTTP_UNPROCESSABLE_CONTENT, "revert: message %s",
				       cJSON_IsString(jm) ? err : "must be a string");
	}
	if (jm && jm->valuestring[0])
		snprintf(message, sizeof(message), "%srevert to version %llu: %s", now ? "emergency " : "",
			 (unsigned long long)v, jm->valuestring);
	else
		snprintf(message, sizeof(message), "%srevert to version %llu", now ? "emergency " : "",
			 (unsigned long long)v);
	cJSON_Delete(doc);
	struct revert_job *j = xcalloc(1, sizeof(*j));
	j->v = v;
	j->now = now;
	j->message = xstrdup(message);
	auth_author(p->auth, c, &who, j->author, sizeof(j->author));
	struct write_opts ov = { 0 };
	if (api_override(c, &who, &ov, err, sizeof(err)) < 0) {
		revert_job_free(j);
		return http_send_error(c, HTTP_BAD_REQUEST, "%s", err);
	}
	j->override = ov.override ? xstrdup(ov.override) : NULL;
	j->admin = ov.admin;
	/* on the writer thread with a shared backend: in order with the writes */
	return api_run(p, c, r, true, revert_run, j, revert_job_free);
}
