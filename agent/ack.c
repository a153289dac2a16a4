/* ack.c: the agent's ACKs and NACKs: only the newest matters (an older
 * nonce would be stale at the plane), it is posted after persisting, and
 * retried with backoff until the plane takes it or refuses it for good.
 * NACKs of failed verifications are the exception: each goes out (a few
 * at most are kept), so the plane sees every attack, not just the last.
 * They go to the plane the agent is on now: after a move to another plane
 * (--plane A,B) what was in flight is taken back, and what waits is sent
 * there once it answered (it knows the node then). Each carries the live
 * generation's traffic when the agent counts it (traffic/report.c), and an
 * ACK says how the change reached the consumer (over haproxy's runtime API,
 * or a reload and why). A NACK with "held" says the node waits for a wrap
 * of a sealed secret (seal.c), not that it refused the push. */
#include "agent_int.h"
#include "credentials.h"
#include "log.h"
#include "util.h"
#include "xmalloc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ACK_ERROR_MAX 4000

bool ack_waiting(const struct agent *a)
{
	return !a->ack.hold && (a->ack.has_pending || a->ack.nvq > 0);
}

static void queue(struct agent *a, uint64_t version, const char *nonce, const char *error, int healthy, bool verify,
		  bool held, const char *applied, const char *reason)
{
	struct buf *b = &a->ack.pending;
	if (!error && version >= a->state.version)
		a->unacked = false;   /* what it holds is ACKed now */
	if (verify && error) {
		if (a->ack.nvq == ACK_VERIFY_MAX) {
			/* keep the newest: drop the oldest */
			buf_release(&a->ack.vq[0]);
			memmove(&a->ack.vq[0], &a->ack.vq[1], (ACK_VERIFY_MAX - 1) * sizeof(a->ack.vq[0]));
			a->ack.nvq--;
		}
		b = &a->ack.vq[a->ack.nvq++];
		buf_init(b);
	}
	buf_reset(b);
	buf_puts(b, "{\"node\":");
	buf_json_string(b, a->cfg.node);
	buf_printf(b, ",\"version\":%llu,\"nonce\":", (unsigned long long)version);
	buf_json_string(b, nonce);
	if (error) {
		char cut[ACK_ERROR_MAX + 1];
		snprintf(cut, sizeof(cut), "%s", error);
		buf_puts(b, ",\"status\":\"nack\",\"error\":");
		buf_json_string(b, cut);
		/* the plane's next push starts from what we still run */
		buf_printf(b, ",\"current_version\":%llu", (unsigned long long)a->state.version);
		if (verify)
			buf_puts(b, ",\"verify\":true");
		/* held, not refused: no wrap for a sealed secret yet */
		if (held)
			buf_puts(b, ",\"held\":true");
	} else {
		buf_puts(b, ",\"status\":\"ack\"");
	}
	if (healthy >= 0)
		buf_printf(b, ",\"healthy\":%s", healthy ? "true" : "false");
	/* how it reached the consumer (docs/protocol.md): today's plane
	 * ignores fields it does not know and records neither */
	if (applied)
		buf_printf(b, ",\"applied\":\"%s\"", applied);
	if (reason)
		buf_printf(b, ",\"reload_reason\":\"%s\"", reason);
	/* the live generation's traffic (traffic-aware gates) */
	traffic_report_ack(&a->traffic, b);
	buf_putc(b, '}');
	if (b == &a->ack.pending)
		a->ack.has_pending = true;
	a->ack.attempt = 0;
	a->ack.next_ms = now_ms();
}

void ack_queue(struct agent *a, uint64_t version, const char *nonce, const char *error, int healthy, bool verify,
	       const char *applied, const char *reason)
{
	queue(a, version, nonce, error, healthy, verify, false, applied, reason);
}

void ack_queue_held(struct agent *a, uint64_t version, const char *nonce, const char *error)
{
	queue(a, version, nonce, error, -1, false, true, NULL, NULL);
}

static bool requeue_sent(struct agent *a);

void ack_start(struct agent *a)
{
	buf_reset(&a->ack.sent);
	a->ack.sent_verify = a->ack.nvq > 0;
	if (a->ack.sent_verify) {
		buf_append(&a->ack.sent, a->ack.vq[0].data, a->ack.vq[0].len);
		buf_release(&a->ack.vq[0]);
		memmove(&a->ack.vq[0], &a->ack.vq[1], (a->ack.nvq - 1) * sizeof(a->ack.vq[0]));
		a->ack.nvq--;
	} else {
		buf_append(&a->ack.sent, a->ack.pending.data, a->ack.pending.len);
		a->ack.has_pending = false;
	}
	log_debug("ack: posting %.600s", a->ack.sent.data ? a->ack.sent.data : "");   /* no secret in it */
	a->ack.h = agent_post(a, "/v1/ack", &a->ack.sent, &a->ack.resp, 30000L, &a->ack.headers);
	if (!a->ack.h)
		requeue_sent(a);
}

static void ack_close(struct agent *a)
{
	curl_multi_remove_handle(a->multi, a->ack.h);
	curl_easy_cleanup(a->ack.h);
	credentials_free_headers(a->ack.headers);
	a->ack.h = NULL;
	a->ack.headers = NULL;
}

/* Puts what was sent back: a verification NACK at the front of its
 * queue; another unless a newer one is waiting. Whether it was. */
static bool requeue_sent(struct agent *a)
{
	if (a->ack.sent_verify && a->ack.nvq < ACK_VERIFY_MAX) {
		memmove(&a->ack.vq[1], &a->ack.vq[0], a->ack.nvq * sizeof(a->ack.vq[0]));
		buf_init(&a->ack.vq[0]);
		buf_append(&a->ack.vq[0], a->ack.sent.data, a->ack.sent.len);
		a->ack.nvq++;
		return true;
	}
	if (!a->ack.sent_verify && !a->ack.has_pending) {
		buf_reset(&a->ack.pending);
		buf_append(&a->ack.pending, a->ack.sent.data, a->ack.sent.len);
		a->ack.has_pending = true;
		return true;
	}
	return false;
}

void ack_plane_moved(struct agent *a)
{
	/* the old plane may have taken it already: an ACK sent twice (the
	 * same nonce, the same version) moves nothing the first did not */
	if (a->ack.h) {
		ack_close(a);
		requeue_sent(a);
	}
	a->ack.hold = true;
	a->ack.attempt = 0;
}

void ack_plane_answered(struct agent *a)
{
	if (!a->ack.hold)
		return;
	a->ack.hold = false;
	a->ack.attempt = 0;
	a->ack.next_ms = now_ms();
}

void ack_done(struct agent *a, CURLcode code)
{
	long status = 0;
	curl_easy_getinfo(a->ack.h, CURLINFO_RESPONSE_CODE, &status);
	ack_close(a);
	if (code == CURLE_OK && status == 200) {
		log_debug("ack: %s", a->ack.resp.data ? a->ack.resp.data : "");
		a->ack.attempt = 0;
		return;
	}
	if (code == CURLE_OK && status >= 400 && status < 500) {
		/* the plane will never take it (it forgot us, or it is stale) */
		log_warn("ack: the plane refused it (%ld): %s", status, a->ack.resp.data ? a->ack.resp.data : "");
		return;
	}
	/* a verification NACK goes back to the front of its queue; another
	 * is retried unless a newer one is waiting */
	if (requeue_sent(a)) {
		a->ack.attempt++;
		double cap = a->cfg.backoff_min * pow(2.0, a->ack.attempt > 20 ? 20 : a->ack.attempt);
		if (cap > a->cfg.backoff_max)
			cap = a->cfg.backoff_max;
		a->ack.next_ms = now_ms() + (int64_t)(agent_rand01() * cap * 1000.0);
		log_info("ack: not delivered (%s); retrying", code != CURLE_OK ? curl_easy_strerror(code) : "plane error");
	}
}

void ack_release(struct agent *a)
{
	if (a->ack.h)
		ack_close(a);
	buf_release(&a->ack.pending);
	for (size_t i = 0; i < a->ack.nvq; i++)
		buf_release(&a->ack.vq[i]);
	a->ack.nvq = 0;
	buf_release(&a->ack.sent);
	buf_release(&a->ack.resp);
}
