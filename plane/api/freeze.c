/* api/freeze.c: the freeze window (docs/protocol.md "Freeze windows"):
 * GET /v1/freeze (a reader), PUT /v1/freeze {"until": SECONDS, "message":
 * TEXT} and DELETE /v1/freeze (an operator or an admin). With a shared
 * backend they run off the HTTP threads, as the version log's do
 * (writer_call: the PUT and DELETE in order with the writes). */
#include "api/api.h"
#include "core/core.h"
#include "core/freeze_state.h"
#include "core/store.h"
#include "core/writer.h"
#include "freeze.h"
#include "http/auth.h"
#include "http/http.h"
#include "log.h"
#include "persist/persist.h"
#include "util.h"
#include "xmalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a job does: read (GET), set (PUT: rec) or end it (DELETE). */
enum freeze_op { FREEZE_GET, FREEZE_SET, FREEZE_OFF };

struct freeze_job {
	enum freeze_op op;
	struct freeze_rec rec;       /* FREEZE_SET: the new freeze */
	char who[320];               /* FREEZE_OFF: who ends it */
};

/* {"freeze": record or null} into res. */
static void answer(struct write_result *res, const struct freeze_rec *rec, const char *extra)
{
	res->status = HTTP_OK;
	res->gzip_ok = false;
	res->error = NULL;
	buf_init(&res->body);
	buf_puts(&res->body, "{\"freeze\":");
	if (rec)
		freeze_rec_json(rec, &res->body);
	else
		buf_puts(&res->body, "null");
	if (extra)
		buf_puts(&res->body, extra);
	buf_putc(&res->body, '}');
}

static void freeze_run(void *ctx, void *arg, struct write_result *res)
{
	struct api *p = ctx;
	struct freeze_job *j = arg;
	struct freeze_rec now;
	char err[512];
	int rc = freeze_state_read(p->core->freeze, &now, err, sizeof(err));
	if (rc < 0) {
		write_result_error(res, rc == PERSIST_UNAVAILABLE ? HTTP_SERVICE_UNAVAILABLE : HTTP_INTERNAL_SERVER_ERROR,
				   "freeze: cannot read the freeze window from the store: %s", err);
		return;
	}
	if (j->op == FREEZE_GET) {
		answer(res, rc == 1 ? &now : NULL, NULL);
		return;
	}
	/* under the store's writer lock, as writes check it (writer_commit):
	 * once the answer says frozen, no write checked before lands after */
	store_write_lock(p->core->store);
	int sr = freeze_state_set(p->core->freeze, j->op == FREEZE_SET ? &j->rec : NULL, j->who, err, sizeof(err));
	store_write_unlock(p->core->store);
	if (sr < 0) {
		write_result_error(res, sr == PERSIST_UNAVAILABLE ? HTTP_SERVICE_UNAVAILABLE : HTTP_INTERNAL_SERVER_ERROR,
				   "freeze: cannot store the freeze window, nothing changed: %s", err);
		return;
	}
	if (j->op == FREEZE_SET) {
		char when[32];
		freeze_time_text(j->rec.until, when);
		log_info("freeze: set until %s by %s", when, j->rec.by);
		answer(res, &j->rec, NULL);
	} else {
		if (rc == 1)
			log_info("freeze: ended by %s", j->who);
		answer(res, NULL, rc == 1 ? ",\"ended\":true" : ",\"ended\":false");
	}
}

enum http_result api_freeze(struct api *p, struct http_conn *c, struct request *r, const char *method)
{
	struct principal who;
	enum http_result ret;
	bool read = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
	if (!auth_allow(p->auth, c, read ? ROLE_READER : ROLE_OPERATOR, &who, &ret))
		return ret;
	if (!p->core->persist->ops->freeze_load || !p->core->persist->ops->freeze_save) {
		if (read) {   /* a relay takes no write: nothing is frozen here */
			struct buf b = BUF_INIT;
			buf_puts(&b, "{\"freeze\":null}");
			return http_send_json(c, HTTP_OK, &b);
		}
		return http_send_error(c, HTTP_NOT_IMPLEMENTED,
				       "freeze: the %s store keeps no freeze window: set it on the plane that takes writes",
				       p->core->persist->ops->name);
	}
	struct freeze_job *j = xcalloc(1, sizeof(*j));
	char err[1024];
	if (read) {
		j->op = FREEZE_GET;
	} else if (strcmp(method, "PUT") == 0) {
		j->op = FREEZE_SET;
		int64_t now = wall_seconds();
		if (freeze_body_parse(r->body.data ? r->body.data : "", r->body.len, now, &j->rec, err, sizeof(err)) < 0) {
			free(j);
			return http_send_error(c, HTTP_UNPROCESSABLE_CONTENT, "%s", err);
		}
		j->rec.at = now;
		auth_author(p->auth, c, &who, j->rec.by, sizeof(j->rec.by));
	} else {
		j->op = FREEZE_OFF;
		auth_author(p->auth, c, &who, j->who, sizeof(j->who));
	}
	r->job = writer_call(p->core->writer, c, j->op != FREEZE_GET, freeze_run, j, free);
	if (r->job)
		return HTTP_YES;
	struct write_result res = { 0 };
	freeze_run(p, j, &res);
	free(j);
	return http_send_result(c, &res);
}
