/* api/rollouts.c: the rollout endpoints: GET /v1/rollouts (history),
 * GET /v1/rollouts/current (with the versions queued behind it, from the
 * version log, and what a new version waits for) and POST
 * /v1/rollouts/current/abort. */
#include "api/api.h"
#include "core/core.h"
#include "core/writer.h"
#include "http/auth.h"
#include "http/http.h"
#include "persist/persist.h"
#include "rollout/rollout.h"
#include "util.h"
#include "xmalloc.h"

#include "log.h"

#include <stdio.h>
#include <stdlib.h>

#define HISTORY_DEFAULT 20
#define HISTORY_MAX 1000
#define QUEUE_MAX 100   /* the queue listed at most (its length is given) */

enum http_result api_rollouts(struct api *p, struct http_conn *c)
{
	struct principal who;
	enum http_result ret;
	if (!auth_allow(p->auth, c, ROLE_READER, &who, &ret))
		return ret;
	uint64_t limit = HISTORY_DEFAULT;
	const char *l = http_query(c, "limit");
	if (l && parse_uint_range(l, 1, HISTORY_MAX, &limit) < 0)
		return http_send_error(c, HTTP_BAD_REQUEST, "limit: '%.32s' is not 1..%d", l, HISTORY_MAX);
	char err[512];
	struct buf b = BUF_INIT;
	if (rollout_history_json(p->rollout, (size_t)limit, &b, err, sizeof(err)) < 0) {
		buf_release(&b);
		return http_send_error(c, HTTP_INTERNAL_SERVER_ERROR, "%s", err);
	}
	return http_send_json(c, HTTP_OK, &b);
}

/* The queue's versions, newest first from the log: kept oldest first. */
struct queue_list {
	uint64_t after;
	struct buf items[QUEUE_MAX];
	size_t n;
};

static int queue_cb(void *ctx, const struct persist_version *v)
{
	struct queue_list *q = ctx;
	if (v->version <= q->after || q->n == QUEUE_MAX)
		return 0;
	struct buf *b = &q->items[q->n++];
	buf_init(b);
	buf_printf(b, "{\"version\":%llu,\"author\":", (unsigned long long)v->version);
	buf_json_string(b, v->author ? v->author : "");
	buf_puts(b, ",\"message\":");
	buf_json_string(b, v->message ? v->message : "");
	buf_printf(b, ",\"since\":%lld}", (long long)v->time);
	return 0;
}

/* Appends ,"queue":[...] (oldest first) and ,"queued":N: the versions
 * committed that wait for a rollout (behind the one in progress, or
 * before the next starts). */
static void queue_json(struct api *p, struct buf *out)
{
	uint64_t after, newest;
	if (!rollout_queue(p->rollout, &after, &newest)) {
		buf_puts(out, ",\"queue\":[],\"queued\":0");
		return;
	}
	struct queue_list *q = xcalloc(1, sizeof(*q));
	q->after = after;
	uint64_t count = newest - after;
	const struct persist_ops *ops = p->core->persist->ops;
	char err[512];
	if (ops->log_list && ops->log_list(p->core->persist, NULL, count < QUEUE_MAX ? (size_t)count : QUEUE_MAX,
					   queue_cb, q, err, sizeof(err)) < 0)
		log_warn("rollouts: the queue's versions from the version log: %s", err);
	buf_puts(out, ",\"queue\":[");
	for (size_t i = q->n; i-- > 0;) {
		buf_append(out, q->items[i].data, q->items[i].len);
		if (i)
			buf_putc(out, ',');
		buf_release(&q->items[i]);
	}
	buf_printf(out, "],\"queued\":%llu", (unsigned long long)count);
	free(q);
}

/* The current rollout's JSON, its queue and what a new version waits
 * for; 404 only when there has been none and nothing waits. */
static void current_run(void *ctx, void *arg, struct write_result *res)
{
	struct api *p = ctx;
	(void)arg;
	struct buf b = BUF_INIT;
	uint64_t after, newest;
	struct rollout_wait w;
	if (rollout_current_json(p->rollout, &b) < 0) {
		buf_release(&b);
		if (!rollout_staged(p->rollout)) {
			write_result_error(res, HTTP_NOT_FOUND, "no rollout: the plane runs with --rollout %s",
					   p->cfg.rollout);
			return;
		}
		if (!rollout_queue(p->rollout, &after, &newest) && !rollout_waiting(p->rollout, &w)) {
			write_result_error(res, HTTP_NOT_FOUND, "no rollout yet");
			return;
		}
		buf_puts(&b, "{\"id\":null,\"state\":\"none\"}");
	}
	if (b.len && b.data[b.len - 1] == '}') {
		b.len--;
		rollout_waiting_json(p->rollout, &b);
		queue_json(p, &b);
		buf_putc(&b, '}');
	}
	buf_putc(&b, '\n');
	res->status = HTTP_OK;
	res->error = NULL;
	res->gzip_ok = true;
	res->body = b;
}

enum http_result api_rollout_current(struct api *p, struct http_conn *c, struct request *r)
{
	struct principal who;
	enum http_result ret;
	if (!auth_allow(p->auth, c, ROLE_READER, &who, &ret))
		return ret;
	return api_run(p, c, r, false, current_run, NULL, free);
}

enum http_result api_rollout_abort(struct api *p, struct http_conn *c, struct request *r)
{
	struct principal who;
	enum http_result ret;
	if (!auth_allow(p->auth, c, ROLE_OPERATOR, &who, &ret))
		return ret;
	log_info("rollout: abort asked by %s", who.who);
	char err[512];
	int status;
	if (rollout_abort(p->rollout, &status, err, sizeof(err)) < 0)
		return http_send_error(c, (unsigned)status, "%s", err);
	return api_run(p, c, r, false, current_run, NULL, free);
}
