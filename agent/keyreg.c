/* keyreg.c: the node's key registration (POST /v1/nodes/{id}/key, body
 * nodekey_registration()): once per connection to a plane or relay (each
 * stream; a poller's first poll after a failure or a move), once the plane
 * answered (it knows the node then), so a plane that lost it, or a new
 * replica, has it. During a rotation (node.key.old present) the
 * registration carries the old key's endorsement; the plane's 200 tells
 * seal.c the new key was taken (node.key.old goes once no wrap of the
 * applied state needs it). A failure that may pass (no answer, 5xx, 429,
 * 401) is tried again after a backoff (--backoff-min doubling up to
 * --backoff-max), also on a connection that stays up (a poller); a
 * refusal (403, 409) and a 400 are errors the operator must act on, with
 * the plane's own words, tried again only at the next connection -- but a
 * 409 that carries the plane's mark ("key_at": its registration's at was
 * not above the newest the plane took for this node, e.g. a --rotate-key
 * started in the same second as the last registration) is made again, with
 * a new at, as soon as the node's clock is past the mark. Each outcome is
 * said once (the same one again only at debug). */
#include "agent_int.h"
#include "credentials.h"
#include "json.h"
#include "log.h"
#include "util.h"
#include "xmalloc.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void reg_close(struct agent *a)
{
	curl_multi_remove_handle(a->multi, a->seal.reg_h);
	curl_easy_cleanup(a->seal.reg_h);
	credentials_free_headers(a->seal.reg_headers);
	a->seal.reg_h = NULL;
	a->seal.reg_headers = NULL;
}

void keyreg_start(struct agent *a)
{
	if (a->seal.reg_h)
		return;   /* one in flight already */
	bool endorse = a->seal.has_prev && !a->seal.prev_gone;
	char *text = nodekey_registration(a->cfg.node, &a->seal.key, endorse ? &a->seal.prev : NULL, wall_seconds());
	if (!text)
		return;
	buf_reset(&a->seal.reg_body);
	buf_puts(&a->seal.reg_body, text);
	free(text);
	CURL *esc_h = curl_easy_init();
	char *node = esc_h ? curl_easy_escape(esc_h, a->cfg.node, 0) : NULL;
	char *path = xasprintf("/v1/nodes/%s/key", node ? node : a->cfg.node);
	curl_free(node);
	if (esc_h)
		curl_easy_cleanup(esc_h);
	a->seal.reg_prev = endorse;
	a->seal.reg_h = agent_post(a, path, &a->seal.reg_body, &a->seal.reg_resp, 30000L, &a->seal.reg_headers);
	free(path);
	log_debug("key: registering node key %s with %s", a->seal.key.kid, sync_plane(a));
}

void keyreg_answered(struct agent *a)
{
	if (!a->seal.reg_conn) {
		a->seal.reg_conn = true;
		a->seal.reg_due = true;   /* started by keyreg_tick, outside the transfer's callback */
	}
}

void keyreg_lost(struct agent *a)
{
	a->seal.reg_conn = false;
}

void keyreg_tick(struct agent *a)
{
	if (a->seal.reg_h)
		return;
	if (a->seal.reg_retry_ms && now_ms() >= a->seal.reg_retry_ms && a->seal.reg_conn) {
		a->seal.reg_retry_ms = 0;
		a->seal.reg_due = true;
	}
	if (a->seal.reg_due) {
		a->seal.reg_due = false;
		keyreg_start(a);
	}
}

/* A failure that may pass: tried again after a backoff. */
static void retry_later(struct agent *a)
{
	a->seal.reg_failures++;
	double cap = a->cfg.backoff_min * pow(2.0, a->seal.reg_failures > 20 ? 20 : a->seal.reg_failures);
	if (cap > a->cfg.backoff_max)
		cap = a->cfg.backoff_max;
	double w = (0.5 + 0.5 * agent_rand01()) * cap;
	a->seal.reg_retry_ms = now_ms() + (int64_t)(w * 1000.0);
}

/* The plane takes no at further ahead of its clock than this (its
 * NODEKEYS_SKEW_MAX): a mark further off is this node's clock's fault,
 * and the wait for it is no longer. */
#define MARK_WAIT_MAX 600

/* A 409 with the plane's mark: registered again (keyreg_start takes a new
 * at) once the node's clock is past it, a backoff at the least; false when
 * the answer has no mark. */
static bool retry_after_mark(struct agent *a, const struct buf *resp, uint64_t *markp)
{
	char e[64];
	uint64_t mark = 0;
	cJSON *v = resp->len ? json_decode(resp->data, resp->len, NULL, e, sizeof(e)) : NULL;
	bool has = v && json_get_u64(cJSON_GetObjectItemCaseSensitive(v, "key_at"), &mark) && mark > 0;
	cJSON_Delete(v);
	if (!has)
		return false;
	retry_later(a);
	int64_t past = ((int64_t)mark + 1) * 1000 - wall_ms();   /* ms until the clock's second is above it */
	if (past > (int64_t)MARK_WAIT_MAX * 1000)
		past = (int64_t)MARK_WAIT_MAX * 1000;   /* a mark far ahead: the node's clock is off */
	if (now_ms() + past > a->seal.reg_retry_ms)
		a->seal.reg_retry_ms = now_ms() + past;
	*markp = mark;
	return true;
}

/* Says what happened, once: the same words again go to debug. */
static void say(struct agent *a, enum log_level lvl, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(struct agent *a, enum log_level lvl, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (strcmp(line, a->seal.reg_said) == 0) {
		log_debug("%s", line);
		return;
	}
	snprintf(a->seal.reg_said, sizeof(a->seal.reg_said), "%s", line);
	log_msg(lvl, "%s", line);
}

/* The plane's own error message of an answer, or its first bytes. */
static void plane_error(const struct buf *resp, char *out, size_t cap)
{
	char e[64];
	cJSON *v = resp->len ? json_decode(resp->data, resp->len, NULL, e, sizeof(e)) : NULL;
	const char *msg = v ? json_get_string(v, "error") : NULL;
	snprintf(out, cap, "%.600s", msg ? msg : resp->data ? resp->data : "");
	cJSON_Delete(v);
}

void keyreg_done(struct agent *a, CURLcode code)
{
	long status = 0;
	curl_easy_getinfo(a->seal.reg_h, CURLINFO_RESPONSE_CODE, &status);
	reg_close(a);
	char msg[700];
	if (code != CURLE_OK) {
		retry_later(a);
		say(a, LOG_LVL_WARN, "key: cannot register node key %s with %s (%s); trying again after a backoff",
		    a->seal.key.kid, sync_plane(a), curl_easy_strerror(code));
		return;
	}
	plane_error(&a->seal.reg_resp, msg, sizeof(msg));
	if (status == 200) {
		a->seal.reg_failures = 0;
		a->seal.reg_retry_ms = 0;
		char e[64];
		cJSON *v = json_decode(a->seal.reg_resp.data ? a->seal.reg_resp.data : "", a->seal.reg_resp.len, NULL, e,
				       sizeof(e));
		const char *st = v ? json_get_string(v, "status") : NULL;
		say(a, LOG_LVL_INFO, "key: node key %s %s at %s", a->seal.key.kid, st ? st : "registered",
		    sync_plane(a));
		cJSON_Delete(v);
		/* the plane holds the new key: the old one goes once no wrap
		 * of the applied state needs it (seal.c) */
		if (a->seal.reg_prev)
			seal_key_taken(a);
		return;
	}
	if (status == 202) {
		/* a relay took it and sends it up: the origin's answer is
		 * not ours to see; a rotation is known taken once the relay
		 * serves wraps for the new key (seal.c) */
		a->seal.reg_failures = 0;
		say(a, LOG_LVL_INFO, "key: node key %s forwarded by %s to its upstream", a->seal.key.kid, sync_plane(a));
		return;
	}
	uint64_t mark;
	if (status == 409 && retry_after_mark(a, &a->seal.reg_resp, &mark)) {
		say(a, LOG_LVL_INFO, "key: %s refused node key %s for now (HTTP 409): it took a registration of this node "
		    "stamped %llu, not older than this one; registering again once this node's clock is past it",
		    sync_plane(a), a->seal.key.kid, (unsigned long long)mark);
		return;
	}
	if (status == 403 || status == 409) {
		say(a, LOG_LVL_ERROR, "key: %s refused node key %s (HTTP %ld): %s%s", sync_plane(a), a->seal.key.kid,
		    status, msg, status == 403 && a->seal.has_prev && !a->seal.prev_gone
				? " (node.key.old, of an unfinished rotation, goes with the next tetherd --rotate-key)"
				: "");
		return;
	}
	if (status == 400) {
		say(a, LOG_LVL_ERROR, "key: %s refused the registration of node key %s (HTTP 400): %s (a clock far "
		    "off? check the node's time)", sync_plane(a), a->seal.key.kid, msg);
		return;
	}
	if (status == 404 || status == 405) {
		say(a, LOG_LVL_INFO, "key: %s takes no node keys (HTTP %ld): sealed secrets cannot reach this node "
		    "through it", sync_plane(a), status);
		return;
	}
	retry_later(a);
	say(a, LOG_LVL_WARN, "key: %s did not take node key %s (HTTP %ld: %s); trying again after a backoff",
	    sync_plane(a), a->seal.key.kid, status, msg);
}

void keyreg_release(struct agent *a)
{
	if (a->seal.reg_h)
		reg_close(a);
	buf_release(&a->seal.reg_body);
	buf_release(&a->seal.reg_resp);
}
