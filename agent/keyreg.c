/* keyreg.c: the node's key registration (POST /v1/nodes/{id}/key, body
 * nodekey_registration()): once per connection to a plane or relay (each
 * stream; a poller's first poll after a failure or a move), once the plane
 * answered (it knows the node then), so a plane that lost it, or a new
 * replica, has it. During a rotation (node.key.old
 * present) the registration carries the old key's endorsement, and
 * node.key.old goes once the plane answered 200. A failure is said once
 * (the same one again only at debug) and tried again at the next
 * connection; a refusal (403, 409) is an error the operator must act on,
 * with the plane's own words. */
#include "agent_int.h"
#include "credentials.h"
#include "json.h"
#include "log.h"
#include "util.h"
#include "xmalloc.h"

#include <errno.h>
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
	if (a->seal.reg_due && !a->seal.reg_h) {
		a->seal.reg_due = false;
		keyreg_start(a);
	}
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
		say(a, LOG_LVL_WARN, "key: cannot register node key %s with %s (%s); trying again at the next connection",
		    a->seal.key.kid, sync_plane(a), curl_easy_strerror(code));
		keyreg_lost(a);
		return;
	}
	plane_error(&a->seal.reg_resp, msg, sizeof(msg));
	if (status == 200) {
		char e[64];
		cJSON *v = json_decode(a->seal.reg_resp.data ? a->seal.reg_resp.data : "", a->seal.reg_resp.len, NULL, e,
				       sizeof(e));
		const char *st = v ? json_get_string(v, "status") : NULL;
		say(a, LOG_LVL_INFO, "key: node key %s %s at %s", a->seal.key.kid, st ? st : "registered",
		    sync_plane(a));
		cJSON_Delete(v);
		if (a->seal.reg_prev && !a->seal.prev_gone) {
			/* the plane holds the new key: the old one may go (its
			 * wraps still open while this process runs) */
			char *old = seal_key_path(a, true);
			if (unlink(old) < 0)
				log_warn("key: cannot remove %s: %s", old, strerror(errno));
			else
				log_info("key: the rotation from %s to %s is registered; %s removed", a->seal.prev.kid,
					 a->seal.key.kid, old);
			free(old);
			a->seal.prev_gone = true;
		}
		return;
	}
	if (status == 202) {
		/* a relay took it and sends it up: the origin's answer is
		 * not ours to see, so node.key.old stays until a 200 */
		say(a, LOG_LVL_INFO, "key: node key %s forwarded by %s to its upstream", a->seal.key.kid, sync_plane(a));
		return;
	}
	if (status == 403 || status == 409) {
		say(a, LOG_LVL_ERROR, "key: %s refused node key %s (HTTP %ld): %s", sync_plane(a), a->seal.key.kid,
		    status, msg);
		return;
	}
	if (status == 404 || status == 405)
		say(a, LOG_LVL_INFO, "key: %s takes no node keys (HTTP %ld): sealed secrets cannot reach this node "
		    "through it", sync_plane(a), status);
	else
		say(a, LOG_LVL_WARN, "key: %s did not take node key %s (HTTP %ld: %s); trying again at the next "
		    "connection", sync_plane(a), a->seal.key.kid, status, msg);
}

void keyreg_release(struct agent *a)
{
	if (a->seal.reg_h)
		reg_close(a);
	buf_release(&a->seal.reg_body);
	buf_release(&a->seal.reg_resp);
}
