/* api/rollouts.c: the rollout endpoints: GET /v1/rollouts (history),
 * GET /v1/rollouts/current and POST /v1/rollouts/current/abort. */
#include "api/api.h"
#include "core/core.h"
#include "http/auth.h"
#include "http/http.h"
#include "rollout/rollout.h"
#include "util.h"

#include "log.h"

#include <stdio.h>

#define HISTORY_DEFAULT 20
#define HISTORY_MAX 1000

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

/* The current rollout's JSON (after the caller's check). */
static enum http_result current(struct api *p, struct http_conn *c)
{
	struct buf b = BUF_INIT;
	if (rollout_current_json(p->rollout, &b) < 0) {
		buf_release(&b);
		if (!rollout_staged(p->rollout))
			return http_send_error(c, HTTP_NOT_FOUND, "no rollout: the plane runs with --rollout %s",
					       p->cfg.rollout);
		return http_send_error(c, HTTP_NOT_FOUND, "no rollout yet");
	}
	return http_send_json(c, HTTP_OK, &b);
}

enum http_result api_rollout_current(struct api *p, struct http_conn *c)
{
	struct principal who;
	enum http_result ret;
	if (!auth_allow(p->auth, c, ROLE_READER, &who, &ret))
		return ret;
	return current(p, c);
}

enum http_result api_rollout_abort(struct api *p, struct http_conn *c)
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
	return current(p, c);
}
