/* api/resources.c: the admin API over resources: get, put, delete, list
 * and batch. Writes (admins) are validated on the candidate state and
 * committed as one version, durable before the answer. Reads need a
 * reader; only admins see a secret's key material. */
#include "api/api.h"
#include "core/core.h"
#include "core/hub.h"
#include "core/store.h"
#include "core/validate.h"
#include "core/writer.h"
#include "envelope.h"
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

#define ERRLEN 1024

static struct json_limits limits(struct api *p, size_t max_bytes)
{
	struct json_limits l = { max_bytes, (int)p->cfg.max_depth };
	return l;
}

/* A snippet is raw configuration for the nodes' proxies (snippet.h): only
 * the operator and admin roles may write one. Every resource write needs
 * admin today (auth_allow below); the rule stays explicit here, where the
 * write's role is known, should writes ever open to another role. An
 * anonymous caller of an --insecure plane without an admin token writes
 * what any write of such a lab may (docs/security.md). */
static int snippet_role(const struct principal *who, const char *name, const cJSON *body, char *err,
			size_t errlen)
{
	if (!cJSON_IsObject(body) || !cJSON_GetObjectItemCaseSensitive(body, "snippet"))
		return 0;
	if (who->anonymous || who->role == ROLE_ADMIN || who->role == ROLE_OPERATOR)
		return 0;
	snprintf(err, errlen, "%s: snippet: needs the operator or admin role", name);
	return -1;
}

/* Validates and commits changes; answers the request. Frees the bodies.
 * must_exist: a single DELETE, 404 when the name is not live (checked under
 * the write lock, so two concurrent deletes cannot both succeed). With a
 * writer thread (a shared backend) the request waits suspended and is
 * answered when it is resumed (http.c). */
static enum http_result commit_and_answer(struct api *p, struct http_conn *c, struct request *r,
					 struct store_change *ch, size_t n, bool must_exist,
					 const struct write_opts *opts)
{
	r->job = writer_submit(p->core->writer, c, ch, n, must_exist, opts);
	if (r->job)
		return HTTP_YES;
	struct write_result res = { 0 };
	writer_commit(p->core, ch, n, must_exist, opts, &res);
	return http_send_result(c, &res);
}

/* How a client's write is validated (core/validate.h). */
static unsigned write_flags(const struct api *p)
{
	return p->cfg.allow_unknown_fields ? 0 : VALIDATE_STRICT;
}

#define REDACTED "[redacted]"

/* Appends a body as who may see it: a secret's members other than its
 * certificate (the key, and whatever a newer plane may add) are replaced
 * by "[redacted]" for everybody but admins. */
static void append_body(struct buf *b, const struct principal *who, const char *name, const char *body, size_t len)
{
	if (auth_sees_secrets(who) || resource_type_of(name) != RES_SECRET) {
		buf_append(b, body, len);
		return;
	}
	char err[128];
	cJSON *v = json_decode(body, len, NULL, err, sizeof(err));
	if (!v || !cJSON_IsObject(v)) {
		cJSON_Delete(v);
		buf_puts(b, "{}");
		return;
	}
	if (envelope_is_sealed(v)) {
		/* a sealed secret: nothing in it opens without a key */
		cJSON_Delete(v);
		buf_append(b, body, len);
		return;
	}
	/* in place: each member's value becomes a string (keys are unique) */
	for (cJSON *m = v->child; m; m = m->next) {
		if (strcmp(m->string, "cert") == 0)
			continue;
		cJSON *val = cJSON_CreateString(REDACTED);
		val->string = m->string;   /* the key moves to the new item */
		m->string = NULL;
		cJSON_ReplaceItemViaPointer(v, m, val);
		m = val;
	}
	char *out = json_encode_canonical(v);
	buf_puts(b, out);
	cJSON_free(out);
	cJSON_Delete(v);
}

void api_append_body(struct buf *b, const struct principal *who, const char *name, const char *body, size_t len)
{
	append_body(b, who, name, body, len);
}

static enum http_result get_one(struct api *p, struct http_conn *c, const struct principal *who,
			       const char *name)
{
	struct buf b = BUF_INIT;
	store_rdlock(p->core->store);
	const struct store_entry *e = store_get(p->core->store, name);
	if (e && e->body) {
		buf_puts(&b, "{\"name\":");
		buf_json_string(&b, e->name);
		buf_printf(&b, ",\"version\":%llu,\"body\":", (unsigned long long)e->version);
		size_t len;
		const char *body = store_stored(e, &len);   /* a sealed secret's with its wraps */
		append_body(&b, who, e->name, body, len);
		buf_putc(&b, '}');
	}
	store_rdunlock(p->core->store);
	if (!b.len)
		return http_send_error(c, HTTP_NOT_FOUND, "no resource '%s'", name);
	return http_send_json(c, HTTP_OK, &b);
}

enum http_result api_resource(struct api *p, struct http_conn *c, struct request *r,
			     const char *method, const char *name)
{
	char err[ERRLEN];
	enum http_result ret;
	struct principal who;
	bool read = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;

	if (!auth_allow(p->auth, c, read ? ROLE_READER : ROLE_ADMIN, &who, &ret))
		return ret;
	if (resource_fullname_check(name, err, sizeof(err)) < 0)
		return http_send_error(c, HTTP_BAD_REQUEST, "%s", err);
	if (read) {
		const char *at = http_query(c, "at");
		return at ? api_history_get_at(p, c, r, &who, name, at) : get_one(p, c, &who, name);
	}

	/* a dry run is a batch's: a PUT or DELETE that asks for one must not
	 * be taken for a write */
	if (http_query(c, "dry_run"))
		return http_send_error(c, HTTP_BAD_REQUEST, "%s: dry runs are POST /v1/batch?dry_run=1 (a batch of "
				       "one upsert or remove); nothing was stored", name);
	/* the version log's record: who, and the message of X-Tether-Message */
	char author[320];
	auth_author(p->auth, c, &who, author, sizeof(author));
	struct write_opts opts = { .author = author, .message = http_header(c, "X-Tether-Message") };
	if (opts.message && history_message_check(opts.message, err, sizeof(err)) < 0)
		return http_send_error(c, HTTP_BAD_REQUEST, "X-Tether-Message: %s", err);
	if (api_override(c, &who, &opts, err, sizeof(err)) < 0)
		return http_send_error(c, HTTP_BAD_REQUEST, "%s", err);
	if (strcmp(method, "DELETE") == 0) {
		struct store_change ch = { .name = name };
		return commit_and_answer(p, c, r, &ch, 1, true, &opts);
	}

	/* PUT */
	if (r->body.len > p->cfg.max_body)
		return http_send_error(c, HTTP_CONTENT_TOO_LARGE, "%s: body of %zu bytes exceeds %llu (max-body)",
				       name, r->body.len, (unsigned long long)p->cfg.max_body);
	struct json_limits lim = limits(p, p->cfg.max_body);
	cJSON *body = json_decode(r->body.data ? r->body.data : "", r->body.len, &lim, err, sizeof(err));
	if (!body)
		return http_send_error(c, HTTP_BAD_REQUEST, "%s: %s", name, err);
	if (snippet_role(&who, name, body, err, sizeof(err)) < 0) {
		cJSON_Delete(body);
		return http_send_error(c, HTTP_FORBIDDEN, "%s", err);
	}
	struct store_change ch;
	if (validate_write(name, body, write_flags(p), &ch, err, sizeof(err)) < 0) {
		atomic_fetch_add(&p->core->ctr.refused_writes, 1);
		cJSON_Delete(body);
		return http_send_error(c, HTTP_UNPROCESSABLE_CONTENT, "%s", err);
	}
	cJSON_Delete(body);
	return commit_and_answer(p, c, r, &ch, 1, false, &opts);
}

static int cmp_entry(const void *a, const void *b)
{
	return strcmp((*(const struct store_entry *const *)a)->name, (*(const struct store_entry *const *)b)->name);
}

enum http_result api_resources_list(struct api *p, struct http_conn *c)
{
	struct principal who;
	enum http_result ret;
	if (!auth_allow(p->auth, c, ROLE_READER, &who, &ret))
		return ret;
	const char *prefix = http_query(c, "prefix");
	const char *bodies = http_query(c, "bodies");
	bool with_body = !bodies || strcmp(bodies, "0") != 0;
	size_t plen = prefix ? strlen(prefix) : 0;
	if (plen > RES_FULLNAME_MAX)
		return http_send_error(c, HTTP_BAD_REQUEST, "prefix: longer than %d bytes", RES_FULLNAME_MAX);

	struct buf b = BUF_INIT;
	store_rdlock(p->core->store);
	size_t n = 0, cap = store_count(p->core->store);
	const struct store_entry **all = xmalloc((cap ? cap : 1) * sizeof(*all));
	for (const struct store_entry *e = store_oldest(p->core->store); e; e = e->next)
		if (e->body && (!plen || strncmp(e->name, prefix, plen) == 0) && n < cap)
			all[n++] = e;
	qsort(all, n, sizeof(*all), cmp_entry);
	buf_printf(&b, "{\"version\":%llu,\"resources\":[", (unsigned long long)store_version(p->core->store));
	for (size_t i = 0; i < n; i++) {
		if (i)
			buf_putc(&b, ',');
		buf_puts(&b, "{\"name\":");
		buf_json_string(&b, all[i]->name);
		buf_printf(&b, ",\"version\":%llu", (unsigned long long)all[i]->version);
		if (with_body) {
			buf_puts(&b, ",\"body\":");
			size_t len;
			const char *body = store_stored(all[i], &len);
			append_body(&b, &who, all[i]->name, body, len);
		}
		buf_putc(&b, '}');
	}
	buf_puts(&b, "]}");
	store_rdunlock(p->core->store);
	free(all);
	return http_send_json(c, HTTP_OK, &b);
}

static bool dry_run_asked(struct http_conn *c)
{
	const char *dry = http_query(c, "dry_run");
	return dry && strcmp(dry, "1") == 0;
}

/* A batch: {"upserts":[{"name":N,"body":{...}}], "removes":[N], "message":M,
 * "base":V}; the message may come as X-Tether-Message and the base as
 * If-Match too. */
enum http_result api_batch(struct api *p, struct http_conn *c, struct request *r)
{
	char err[ERRLEN];
	enum http_result ret;
	struct principal who;
	if (!auth_allow(p->auth, c, ROLE_ADMIN, &who, &ret))
		return ret;

	struct json_limits lim = limits(p, p->cfg.max_request);
	/* {"upserts":[{"body": ...}]}: three levels of envelope, so a body may
	 * nest as deep in a batch as in a PUT */
	lim.max_depth += 3;
	cJSON *doc = json_decode(r->body.data ? r->body.data : "", r->body.len, &lim, err, sizeof(err));
	if (!doc)
		return http_send_error(c, HTTP_BAD_REQUEST, "batch: %s", err);
	struct store_change *ch = NULL;
	size_t n = 0;
	unsigned status = HTTP_UNPROCESSABLE_CONTENT;

	if (!cJSON_IsObject(doc)) {
		snprintf(err, sizeof(err), "batch: body must be a JSON object");
		goto fail;
	}
	for (const cJSON *f = doc->child; f; f = f->next) {
		if (strcmp(f->string, "upserts") != 0 && strcmp(f->string, "removes") != 0 &&
		    strcmp(f->string, "message") != 0 && strcmp(f->string, "base") != 0) {
			snprintf(err, sizeof(err), "batch: unknown field '%.64s' (expected upserts, removes, message, base)",
				 f->string);
			goto fail;
		}
	}
	char author[320];
	auth_author(p->auth, c, &who, author, sizeof(author));
	struct write_opts opts = { .author = author, .message = http_header(c, "X-Tether-Message") };
	/* ?dry_run=1: every check of the write, nothing stored (writer.h) */
	const char *dry = http_query(c, "dry_run");
	if (dry && strcmp(dry, "1") != 0 && strcmp(dry, "0") != 0) {
		snprintf(err, sizeof(err), "batch: dry_run must be 1 or 0");
		status = HTTP_BAD_REQUEST;
		goto fail;
	}
	opts.dry_run = dry && strcmp(dry, "1") == 0;
	if (api_override(c, &who, &opts, err, sizeof(err)) < 0)
		goto fail;
	const cJSON *msg = cJSON_GetObjectItemCaseSensitive(doc, "message");
	if (msg) {
		if (!cJSON_IsString(msg)) {
			snprintf(err, sizeof(err), "batch: message must be a string");
			goto fail;
		}
		opts.message = msg->valuestring;
	}
	if (opts.message && history_message_check(opts.message, err + 16, sizeof(err) - 16) < 0) {
		memcpy(err, "batch: message: ", 16);   /* the check wrote after it */
		goto fail;
	}
	const cJSON *base = cJSON_GetObjectItemCaseSensitive(doc, "base");
	const char *ifm = http_header(c, "If-Match");
	if (base) {
		if (!cJSON_IsNumber(base) || base->valuedouble < 0 || base->valuedouble > 9007199254740991.0 ||
		    base->valuedouble != (double)(uint64_t)base->valuedouble) {
			snprintf(err, sizeof(err), "batch: base must be a version (an integer >= 0)");
			goto fail;
		}
		opts.has_base = true;
		opts.base = (uint64_t)base->valuedouble;
	} else if (ifm) {
		const char *v = ifm;
		size_t vl = strlen(v);
		if (vl >= 2 && v[0] == '"' && v[vl - 1] == '"') {
			char tmp[32];
			snprintf(tmp, sizeof(tmp), "%.*s", (int)(vl - 2), v + 1);
			if (parse_u64(tmp, &opts.base) < 0)
				vl = 0;
		} else if (parse_u64(v, &opts.base) < 0) {
			vl = 0;
		}
		if (!vl) {
			snprintf(err, sizeof(err), "batch: If-Match must be a version (an integer >= 0)");
			goto fail;
		}
		opts.has_base = true;
	}
	const cJSON *ups = cJSON_GetObjectItemCaseSensitive(doc, "upserts");
	const cJSON *rms = cJSON_GetObjectItemCaseSensitive(doc, "removes");
	if (ups && !cJSON_IsArray(ups)) {
		snprintf(err, sizeof(err), "batch: upserts must be an array");
		goto fail;
	}
	if (rms && !cJSON_IsArray(rms)) {
		snprintf(err, sizeof(err), "batch: removes must be an array");
		goto fail;
	}
	/* the request size bounds the item count; the result's resource count
	 * is checked on the candidate (a batch may swap every resource) */
	size_t total = (size_t)cJSON_GetArraySize(ups) + (size_t)cJSON_GetArraySize(rms);
	ch = xcalloc(total ? total : 1, sizeof(*ch));
	int i = 0;
	for (cJSON *u = ups ? ups->child : NULL; u; u = u->next, i++) {
		if (!cJSON_IsObject(u)) {
			snprintf(err, sizeof(err), "batch: upserts[%d] must be an object", i);
			goto fail;
		}
		for (const cJSON *f = u->child; f; f = f->next) {
			if (strcmp(f->string, "name") != 0 && strcmp(f->string, "body") != 0) {
				snprintf(err, sizeof(err), "batch: upserts[%d]: unknown field '%.64s' (expected name, body)",
					 i, f->string);
				goto fail;
			}
		}
		const char *name = json_get_string(u, "name");
		cJSON *body = cJSON_GetObjectItemCaseSensitive(u, "body");
		if (!name) {
			snprintf(err, sizeof(err), "batch: upserts[%d].name must be a string", i);
			goto fail;
		}
		if (!body) {
			snprintf(err, sizeof(err), "batch: upserts[%d].body is missing", i);
			goto fail;
		}
		if (snippet_role(&who, name, body, err, sizeof(err)) < 0) {
			status = HTTP_FORBIDDEN;
			goto fail;
		}
		if (validate_write(name, body, write_flags(p), &ch[n], err, sizeof(err)) < 0)
			goto fail;
		if (ch[n].body_len > p->cfg.max_body) {
			snprintf(err, sizeof(err), "%s: body of %zu bytes exceeds %llu (max-body)", name,
				 ch[n].body_len, (unsigned long long)p->cfg.max_body);
			n++;
			status = HTTP_CONTENT_TOO_LARGE;
			goto fail;
		}
		n++;
	}
	i = 0;
	for (const cJSON *rm = rms ? rms->child : NULL; rm; rm = rm->next, i++) {
		if (!cJSON_IsString(rm)) {
			snprintf(err, sizeof(err), "batch: removes[%d] must be a string", i);
			goto fail;
		}
		if (resource_fullname_check(rm->valuestring, err, sizeof(err)) < 0)
			goto fail;
		ch[n].name = rm->valuestring;
		n++;
	}
	ret = commit_and_answer(p, c, r, ch, n, false, &opts);
	free(ch);
	cJSON_Delete(doc);
	return ret;
fail:
	for (size_t k = 0; k < n; k++)
		free(ch[k].body);
	free(ch);
	cJSON_Delete(doc);
	if (status == HTTP_UNPROCESSABLE_CONTENT && !dry_run_asked(c))
		atomic_fetch_add(&p->core->ctr.refused_writes, 1);
	return http_send_error(c, status, "%s", err);
}
