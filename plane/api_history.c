/* api_history.c: the version log over HTTP (docs/protocol.md "History"):
 * the versions (who, when, why, what), one version's changes, a diff of
 * two versions, a resource as it was, and a revert to an earlier state as
 * a new version (a write like any other: staged rollouts stage it). Reads
 * need a reader; secrets are redacted for non-admins as in
 * /v1/resources. */
#include "auth.h"
#include "http.h"
#include "json.h"
#include "plane.h"
#include "store.h"
#include "util.h"
#include "validate.h"
#include "writer.h"
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

static bool has_log(struct plane *p, struct MHD_Connection *c, enum MHD_Result *ret)
{
	if (p->persist->ops->log_list)
		return true;
	*ret = http_send_error(c, MHD_HTTP_NOT_IMPLEMENTED, "the %s store keeps no version history",
			       p->persist->ops->name);
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
}

struct listing {
	struct buf *b;
	size_t n;
	const struct principal *who;
};

static int list_cb(void *ctx, const struct persist_version *v)
{
	struct listing *l = ctx;
	if (l->n++)
		buf_putc(l->b, ',');
	put_version(l->b, v);
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

/* 0 fine; else an answer was sent (*ret): V is past what is kept (410) or
 * beyond the store's version (404); cur: the store's version as read. */
static int check_kept(struct plane *p, struct MHD_Connection *c, uint64_t v, uint64_t floor, uint64_t cur,
		      enum MHD_Result *ret)
{
	if (v > cur) {
		*ret = http_send_error(c, MHD_HTTP_NOT_FOUND, "no version %llu: the plane is at version %llu",
				       (unsigned long long)v, (unsigned long long)cur);
		return -1;
	}
	if (v < floor) {
		*ret = http_send_error(c, MHD_HTTP_GONE,
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

enum MHD_Result api_history(struct plane *p, struct MHD_Connection *c, const char *version)
{
	struct principal who;
	enum MHD_Result ret;
	char err[512];
	if (!auth_allow(p, c, ROLE_READER, &who, &ret) || !has_log(p, c, &ret))
		return ret;
	struct buf b = BUF_INIT;
	struct listing l = { &b, 0, &who };
	const struct persist_ops *ops = p->persist->ops;
	if (!version) {
		const char *name = http_query(c, "name");
		const char *lim = http_query(c, "limit");
		uint64_t limit = 20;
		if (lim && (parse_u64(lim, &limit) < 0 || limit < 1 || limit > LIST_MAX))
			return http_send_error(c, MHD_HTTP_BAD_REQUEST, "limit: must be an integer in 1..%d", LIST_MAX);
		if (name && resource_fullname_check(name, err, sizeof(err)) < 0)
			return http_send_error(c, MHD_HTTP_BAD_REQUEST, "name: %s", err);
		uint64_t floor = 0;
		store_rdlock(p->store);
		uint64_t cur = store_version(p->store);
		store_rdunlock(p->store);
		if (ops->log_floor(p->persist, &floor, err, sizeof(err)) < 0)
			return http_send_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "history: %s", err);
		buf_printf(&b, "{\"version\":%llu,\"floor\":%llu,\"versions\":[", (unsigned long long)cur,
			   (unsigned long long)floor);
		if (ops->log_list(p->persist, name, (size_t)limit, list_cb, &l, err, sizeof(err)) < 0) {
			buf_release(&b);
			return http_send_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "history: %s", err);
		}
		buf_puts(&b, "]}");
		return http_send_json(c, MHD_HTTP_OK, &b);
	}
	uint64_t v, floor = 0;
	if (parse_version(version, &v) < 0)
		return http_send_error(c, MHD_HTTP_BAD_REQUEST, "history: '%.40s' is not a version", version);
	store_rdlock(p->store);
	uint64_t cur = store_version(p->store);
	store_rdunlock(p->store);
	if (ops->log_floor(p->persist, &floor, err, sizeof(err)) < 0)
		return http_send_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "history: %s", err);
	/* a version's record is kept when the state before it is */
	if (check_kept(p, c, v, v ? floor + 1 : 1, cur, &ret) < 0)
		return ret;
	int rc = ops->log_get(p->persist, v, version_cb, change_cb, &l, err, sizeof(err));
	if (rc < 0) {
		buf_release(&b);
		return http_send_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "history: %s", err);
	}
	if (rc == 0) {
		buf_release(&b);
		return http_send_error(c, MHD_HTTP_GONE, "version %llu is past the history kept",
				       (unsigned long long)v);
	}
	buf_puts(&b, "]}");
	return http_send_json(c, MHD_HTTP_OK, &b);
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
static int log_states(struct plane *p, uint64_t v, const char *name, struct states *st, uint64_t *cur, char *err,
		      size_t errlen)
{
	for (int attempt = 0; attempt < 8; attempt++) {
		store_rdlock(p->store);
		uint64_t c = store_version(p->store);
		store_rdunlock(p->store);
		if (v < c && p->persist->ops->log_after(p->persist, v, c, name, states_cb, st, err, errlen) < 0) {
			states_release(st);
			return -1;
		}
		store_rdlock(p->store);
		if (store_version(p->store) == c) {
			*cur = c;
			return 0;
		}
		store_rdunlock(p->store);
		states_release(st);
	}
	snprintf(err, errlen, "the store kept moving while the history was read; try again");
	return -1;
}

enum MHD_Result api_history_get_at(struct plane *p, struct MHD_Connection *c, const struct principal *who,
				   const char *name, const char *at)
{
	enum MHD_Result ret;
	char err[512];
	uint64_t v, floor = 0, cur = 0;
	if (parse_version(at, &v) < 0)
		return http_send_error(c, MHD_HTTP_BAD_REQUEST, "at: '%.40s' is not a version", at);
	if (!has_log(p, c, &ret))
		return ret;
	if (p->persist->ops->log_floor(p->persist, &floor, err, sizeof(err)) < 0)
		return http_send_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "history: %s", err);
	struct states st = { 0 };
	if (log_states(p, v, name, &st, &cur, err, sizeof(err)) < 0)
		return http_send_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "history: %s", err);
	char *body = NULL;
	size_t len = 0;
	int rc = check_kept(p, c, v, floor, cur, &ret);
	if (rc == 0 && st.n) {
		body = st.s[0].body;
		len = st.s[0].len;
		st.s[0].body = NULL;
	} else if (rc == 0) {
		const struct store_entry *e = store_get(p->store, name);
		body = e && e->body ? xstrndup(e->body, e->body_len) : NULL;
		len = e && e->body ? e->body_len : 0;
	}
	store_rdunlock(p->store);
	states_release(&st);
	if (rc < 0)
		return ret;
	if (!body)
		return http_send_error(c, MHD_HTTP_NOT_FOUND, "no resource '%s' at version %llu", name,
				       (unsigned long long)v);
	struct buf b = BUF_INIT;
	buf_puts(&b, "{\"name\":");
	buf_json_string(&b, name);
	buf_printf(&b, ",\"at\":%llu,\"body\":", (unsigned long long)v);
	api_append_body(&b, who, name, body, len);
	buf_putc(&b, '}');
	free(body);
	return http_send_json(c, MHD_HTTP_OK, &b);
}

/* Per name changed in (a, b] (b <= the store's version): its state at a
 * (before) and at b (after). Takes the store's read lock. */
static int diff_states(struct plane *p, uint64_t a, uint64_t b, struct states *before, struct states *after,
		       char *err, size_t errlen)
{
	/* versions up to b are the past: no lock needed for them */
	if (p->persist->ops->log_after(p->persist, a, b, NULL, states_cb, before, err, errlen) < 0)
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
			const struct store_entry *e = store_get(p->store, name);
			ch.before = e ? e->body : NULL;
			ch.before_len = e && e->body ? e->body_len : 0;
		}
		states_cb(after, &ch);
	}
	store_rdunlock(p->store);
	states_release(&later);
	return 0;
}

enum MHD_Result api_diff(struct plane *p, struct MHD_Connection *c)
{
	struct principal who;
	enum MHD_Result ret;
	char err[512];
	uint64_t a, b, floor = 0;
	if (!auth_allow(p, c, ROLE_READER, &who, &ret) || !has_log(p, c, &ret))
		return ret;
	if (parse_version(http_query(c, "from"), &a) < 0 || parse_version(http_query(c, "to"), &b) < 0)
		return http_send_error(c, MHD_HTTP_BAD_REQUEST, "diff: from and to must be versions");
	if (p->persist->ops->log_floor(p->persist, &floor, err, sizeof(err)) < 0)
		return http_send_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "history: %s", err);
	uint64_t lo = a < b ? a : b, hi = a < b ? b : a;
	struct states sa = { 0 }, sb = { 0 };
	store_rdlock(p->store);
	uint64_t cur = store_version(p->store);
	store_rdunlock(p->store);
	int rc = check_kept(p, c, lo, floor, cur, &ret);
	if (rc == 0)
		rc = check_kept(p, c, hi, floor, cur, &ret);
	if (rc == 0)
		rc = diff_states(p, lo, hi, &sa, &sb, err, sizeof(err)) < 0 ? -2 : 0;
	if (rc == -1)
		return ret;
	if (rc == -2) {
		states_release(&sa);
		states_release(&sb);
		return http_send_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "history: %s", err);
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
		put_state(&out, &who, x->name, x->body, x->len);
		buf_puts(&out, ",\"after\":");
		put_state(&out, &who, y->name, y->body, y->len);
		buf_putc(&out, '}');
	}
	buf_puts(&out, "]}");
	states_release(&sa);
	states_release(&sb);
	return http_send_json(c, MHD_HTTP_OK, &out);
}

/* POST /v1/revert {"version":V,"message":M}: the state at V committed as
 * a new version, against the version it was computed on (a write in
 * between: 409, try again). */
enum MHD_Result api_revert(struct plane *p, struct MHD_Connection *c, struct request *r)
{
	struct principal who;
	enum MHD_Result ret;
	char err[1024];
	if (!auth_allow(p, c, ROLE_ADMIN, &who, &ret) || !has_log(p, c, &ret))
		return ret;
	struct json_limits lim = { 64 * 1024, 4 };
	cJSON *doc = json_decode(r->body.data ? r->body.data : "", r->body.len, &lim, err, sizeof(err));
	if (!doc)
		return http_send_error(c, MHD_HTTP_BAD_REQUEST, "revert: %s", err);
	const cJSON *jv = cJSON_GetObjectItemCaseSensitive(doc, "version");
	const cJSON *jm = cJSON_GetObjectItemCaseSensitive(doc, "message");
	for (const cJSON *f = cJSON_IsObject(doc) ? doc->child : NULL; f; f = f->next) {
		if (strcmp(f->string, "version") != 0 && strcmp(f->string, "message") != 0) {
			cJSON_Delete(doc);
			return http_send_error(c, MHD_HTTP_UNPROCESSABLE_CONTENT,
					       "revert: unknown field '%.64s' (expected version, message)", f->string);
		}
	}
	if (!cJSON_IsNumber(jv) || jv->valuedouble < 0 || jv->valuedouble > 9007199254740991.0 ||
	    jv->valuedouble != (double)(uint64_t)jv->valuedouble) {
		cJSON_Delete(doc);
		return http_send_error(c, MHD_HTTP_UNPROCESSABLE_CONTENT, "revert: version must be an integer >= 0");
	}
	uint64_t v = (uint64_t)jv->valuedouble, floor = 0;
	char message[MESSAGE_MAX + 64];
	if (jm && (!cJSON_IsString(jm) || history_message_check(jm->valuestring, err, sizeof(err)) < 0)) {
		cJSON_Delete(doc);
		return http_send_error(c, MHD_HTTP_UNPROCESSABLE_CONTENT, "revert: message %s",
				       cJSON_IsString(jm) ? err : "must be a string");
	}
	if (jm && jm->valuestring[0])
		snprintf(message, sizeof(message), "revert to version %llu: %s", (unsigned long long)v, jm->valuestring);
	else
		snprintf(message, sizeof(message), "revert to version %llu", (unsigned long long)v);
	cJSON_Delete(doc);
	if (p->persist->ops->log_floor(p->persist, &floor, err, sizeof(err)) < 0)
		return http_send_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "history: %s", err);

	/* read without the store's lock: the write is made against cur (a
	 * write in between is 409) */
	struct states st = { 0 };
	store_rdlock(p->store);
	uint64_t cur = store_version(p->store);
	store_rdunlock(p->store);
	int rc = check_kept(p, c, v, floor, cur, &ret);
	if (rc == 0 && v < cur)
		rc = p->persist->ops->log_after(p->persist, v, cur, NULL, states_cb, &st, err, sizeof(err)) < 0 ? -2 : 0;
	if (rc == -1)
		return ret;
	if (rc == -2) {
		states_release(&st);
		return http_send_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "history: %s", err);
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
				states_release(&st);
				return http_send_error(c, MHD_HTTP_UNPROCESSABLE_CONTENT,
						       "revert: %s as of version %llu no longer passes the checks: %s",
						       st.s[i].name, (unsigned long long)v, err);
			}
			cJSON_Delete(body);
		}
		n++;
	}
	char author[320];
	auth_author(p, c, &who, author, sizeof(author));
	struct write_opts opts = { author, message, true, cur };
	r->job = writer_submit(p->writer, c, ch, n, false, &opts);
	if (r->job) {
		free(ch);
		states_release(&st);
		return MHD_YES;
	}
	struct write_result res;
	writer_commit(p, ch, n, false, &opts, &res);
	free(ch);
	states_release(&st);
	return http_send(c, res.status, "application/json", &res.body, false);
}
