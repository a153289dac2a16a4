/* api/approvals.c: POST /v1/approvals {"version":N,"approvals":[token,...]}
 * (operator or admin): each token verified (its signature, kid = id(pk),
 * the version, and the state digest against the plane's own for that
 * version and subscription) and kept; GET /v1/approvals?version=N (reader):
 * what is kept per subscription, and the subscriptions of the nodes that
 * require approvals (what `tetherctl approve` signs). docs/protocol.md,
 * "Approvals". */
#include "api/api.h"
#include "approval.h"
#include "core/approvals.h"
#include "core/core.h"
#include "core/digests.h"
#include "core/hub.h"
#include "core/store.h"
#include "core/writer.h"
#include "http/auth.h"
#include "http/http.h"
#include "json.h"
#include "log.h"
#include "sub.h"
#include "util.h"
#include "xmalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define APPROVALS_REQUEST_MAX (APPROVALS_MAX * (APPROVAL_MAX + 16) + 256)

/* What a POST keeps, once every token verified: on the writer thread
 * with a shared backend (an etcd write must not hold up an HTTP loop). */
struct keep_job {
	uint64_t version;
	size_t n;
	char *sub[APPROVALS_MAX], *kid[APPROVALS_MAX], *tok[APPROVALS_MAX];
};

static void keep_job_free(void *arg)
{
	struct keep_job *j = arg;
	for (size_t i = 0; i < j->n; i++) {
		free(j->sub[i]);
		free(j->kid[i]);
		free(j->tok[i]);
	}
	free(j);
}

static void keep_run(void *ctx, void *arg, struct write_result *res)
{
	struct api *p = ctx;
	struct keep_job *j = arg;
	char err[512];
	for (size_t i = 0; i < j->n; i++) {
		int rc = approvals_add(p->core->approvals, j->version, j->sub[i], j->kid[i], j->tok[i], err, sizeof(err));
		if (rc == -2) {
			write_result_error(res, HTTP_CONFLICT, "approvals: cannot keep the approval of version %llu by key "
					   "%s: %s", (unsigned long long)j->version, j->kid[i], err);
			return;
		}
		if (rc < 0) {
			write_result_error(res, HTTP_SERVICE_UNAVAILABLE, "approvals: cannot store the approval of version "
					   "%llu by key %s: %s", (unsigned long long)j->version, j->kid[i], err);
			return;
		}
		log_info("approvals: version %llu, subscription '%.200s': approved by key %s",
			 (unsigned long long)j->version, j->sub[i], j->kid[i]);
	}
	/* the hold moved: every stream looks at its target again */
	approvals_keep(p->core->approvals, p->core->store);
	hub_notify(p->core->hub, hub_version(p->core->hub));
	res->status = HTTP_OK;
	res->error = NULL;
	approvals_version_json(p->core->approvals, j->version, &res->body);
	buf_putc(&res->body, '\n');
}

/* One token: verified against the plane's own digest, then added to j.
 * 0, or -1 with *status and err. */
static int take(struct api *p, uint64_t version, const char *tok, size_t i, struct keep_job *j, unsigned *status,
		char *err, size_t errlen)
{
	struct approval ap;
	char inner[512];
	*status = HTTP_UNPROCESSABLE_CONTENT;
	if (approval_verify(tok, strlen(tok), &ap, inner, sizeof(inner)) < 0) {
		snprintf(err, errlen, "approvals[%zu]: %s", i, inner);
		return -1;
	}
	int rc = -1;
	struct sub sub;
	memset(&sub, 0, sizeof(sub));
	if (ap.version != version) {
		snprintf(err, errlen, "approvals[%zu]: signed for version %llu, not %llu (a token of another version)",
			 i, (unsigned long long)ap.version, (unsigned long long)version);
		goto out;
	}
	if (sub_parse(ap.sub, &sub, inner, sizeof(inner)) < 0 || strcmp(sub.canon ? sub.canon : "", ap.sub) != 0) {
		snprintf(err, errlen, "approvals[%zu]: sub '%.200s' is not a canonical subscription (prefixes sorted, "
			 "comma-joined)", i, ap.sub);
		goto out;
	}
	unsigned char d[LTHASH_DIGEST_BYTES];
	store_rdlock(p->core->store);
	uint64_t newest = store_version(p->core->store);
	int drc = version <= newest ? digests_at(p->core->digests, version, &sub, d) : -1;
	store_rdunlock(p->core->store);
	if (version > newest) {
		snprintf(err, errlen, "approvals[%zu]: version %llu does not exist yet (the newest is %llu)", i,
			 (unsigned long long)version, (unsigned long long)newest);
		goto out;
	}
	if (drc < 0) {
		*status = HTTP_CONFLICT;
		snprintf(err, errlen, "approvals[%zu]: the plane no longer keeps the state of version %llu (older than "
			 "its history): approve a newer version", i, (unsigned long long)version);
		goto out;
	}
	if (!lthash_digest_equal(d, ap.digest)) {
		snprintf(err, errlen, "approvals[%zu]: key %s signed a state of version %llu for subscription '%.200s' "
			 "that is not the plane's (digest differs): approve again from a fresh fetch", i, ap.kid,
			 (unsigned long long)version, ap.sub);
		goto out;
	}
	j->sub[j->n] = xstrdup(ap.sub);
	j->kid[j->n] = xstrdup(ap.kid);
	j->tok[j->n++] = xstrdup(tok);
	rc = 0;
out:
	sub_release(&sub);
	approval_release(&ap);
	return rc;
}

static enum http_result post(struct api *p, struct http_conn *c, struct request *r)
{
	char err[1024];
	if (!p->core->digests)
		return http_send_error(c, HTTP_CONFLICT, "approvals: this plane signs no statements (start it with "
				       "--signing-key): nodes that require approvals verify them with --trust");
	/* a relay answers 421 before this (a write: http/http.c) */
	struct json_limits lim = { APPROVALS_REQUEST_MAX, 3 };
	cJSON *doc = json_decode(r->body.data ? r->body.data : "", r->body.len, &lim, err, sizeof(err));
	if (!doc)
		return http_send_error(c, HTTP_BAD_REQUEST, "approvals: %s", err);
	enum http_result ret;
	uint64_t version = 0;
	const cJSON *toks = cJSON_GetObjectItemCaseSensitive(doc, "approvals");
	if (!cJSON_IsObject(doc) || !json_get_u64(cJSON_GetObjectItemCaseSensitive(doc, "version"), &version) ||
	    version == 0) {
		ret = http_send_error(c, HTTP_UNPROCESSABLE_CONTENT, "approvals: version must be a positive integer");
		goto out;
	}
	int n = cJSON_GetArraySize(toks);
	if (!cJSON_IsArray(toks) || n < 1 || n > APPROVALS_MAX) {
		ret = http_send_error(c, HTTP_UNPROCESSABLE_CONTENT,
				      "approvals: approvals must be an array of 1..%d tokens", APPROVALS_MAX);
		goto out;
	}
	/* all verified before any is kept: a refused request keeps nothing */
	struct keep_job *j = xcalloc(1, sizeof(*j));
	j->version = version;
	size_t i = 0;
	for (const cJSON *t = toks->child; t; t = t->next, i++) {
		unsigned status;
		if (!cJSON_IsString(t)) {
			keep_job_free(j);
			ret = http_send_error(c, HTTP_UNPROCESSABLE_CONTENT, "approvals[%zu]: must be a string", i);
			goto out;
		}
		if (take(p, version, t->valuestring, i, j, &status, err, sizeof(err)) < 0) {
			keep_job_free(j);
			ret = http_send_error(c, status, "%s", err);
			goto out;
		}
	}
	cJSON_Delete(doc);
	r->job = writer_call(p->core->writer, c, true, keep_run, j, keep_job_free);
	if (r->job)
		return HTTP_YES;
	struct write_result res = { 0 };
	keep_run(p, j, &res);
	keep_job_free(j);
	return http_send_result(c, &res);
out:
	cJSON_Delete(doc);
	return ret;
}

enum http_result api_approvals(struct api *p, struct http_conn *c, struct request *r, const char *method)
{
	struct principal who;
	enum http_result ret;
	if (strcmp(method, "POST") == 0) {
		if (!auth_allow(p->auth, c, ROLE_OPERATOR, &who, &ret))
			return ret;
		return post(p, c, r);
	}
	if (!auth_allow(p->auth, c, ROLE_READER, &who, &ret))
		return ret;
	const char *v = http_query(c, "version");
	uint64_t version;
	if (!v || parse_uint_range(v, 1, 9007199254740992ULL, &version) < 0)
		return http_send_error(c, HTTP_BAD_REQUEST, "approvals: ?version=N (a positive integer) is required");
	struct buf b = BUF_INIT;
	approvals_version_json(p->core->approvals, version, &b);
	return http_send_json(c, HTTP_OK, &b);
}
