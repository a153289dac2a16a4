/* cmd_freeze.c: tetherctl freeze (the freeze window, docs/protocol.md
 * "Freeze windows"): show it, set it (--until TIME --message TEXT) or end
 * it (--off); and the line `tetherctl rollout status` prints while one
 * holds. */
#include "buf.h"
#include "commands.h"
#include "ctl.h"
#include "freeze.h"
#include "output.h"
#include "request.h"
#include "util.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The freeze of an answer {"freeze": record or null, "ended": bool}: 1
 * with *f, 0 none (*ended: a DELETE ended one; may be NULL), -1 after
 * saying why. */
static int answer_freeze(const struct client_answer *ans, struct freeze_rec *f, bool *ended)
{
	cJSON *doc = ctl_answer_json(ans);
	if (!doc)
		return -1;
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(doc, "freeze");
	if (ended)
		*ended = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(doc, "ended"));
	int rc = 0;
	if (cJSON_IsObject(v)) {
		char *text = cJSON_PrintUnformatted(v), err[256];
		rc = text && freeze_rec_parse(text, strlen(text), f, err, sizeof(err)) == 0 ? 1 : -1;
		if (rc < 0)
			ctl_error("the plane's freeze record cannot be read: %s", text ? err : "out of memory");
		cJSON_free(text);
	} else if (!cJSON_IsNull(v)) {
		ctl_error("the plane's answer has no freeze member");
		rc = -1;
	}
	cJSON_Delete(doc);
	return rc;
}

/* "frozen until 2026-12-06T18:00:00+01:00 by alice: MESSAGE" (local time). */
static void print_line(const struct freeze_rec *f)
{
	char *until = time_local_text((double)f->until);
	printf("frozen until %s by %s: %s\n", until, f->by[0] ? f->by : "unknown", f->message);
	free(until);
}

int cmd_freeze(const struct ctl_ctx *cx, int argc, char **argv)
{
	(void)argc, (void)argv;
	struct client_answer ans = { 0, BUF_INIT, "" };
	struct buf body = BUF_INIT;
	const char *method = "GET";
	if (cx->off && (cx->until || cx->message)) {
		ctl_error("freeze: --off ends the freeze; give it alone (no --until, --message)");
		return CTL_EXIT_USAGE;
	}
	if (cx->until || cx->message) {
		char err[512];
		int64_t until, now = wall_seconds();
		if (!cx->until) {
			ctl_error("freeze: --until TIME is missing (2026-12-06T18:00:00Z, or a duration: 90m, 2h, 1d)");
			return CTL_EXIT_USAGE;
		}
		if (freeze_parse_time(cx->until, now, &until, err, sizeof(err)) < 0) {
			ctl_error("freeze: --until: %s", err);
			return CTL_EXIT_USAGE;
		}
		if (!cx->message || !*cx->message) {
			ctl_error("freeze: --message TEXT is missing: say why the changes stop");
			return CTL_EXIT_USAGE;
		}
		/* the plane judges the window (it may differ on the time): its
		 * answer says what is wrong */
		buf_printf(&body, "{\"until\":%lld,\"message\":", (long long)until);
		buf_json_string(&body, cx->message);
		buf_putc(&body, '}');
		method = "PUT";
	} else if (cx->off) {
		method = "DELETE";
	}
	int rc = CTL_EXIT_FAILED;
	if (ctl_call(cx, method, "/v1/freeze", body.len ? body.data : NULL, body.len, &ans) == 0) {
		if (cx->json) {
			print_raw(&ans);
			rc = CTL_EXIT_OK;
		} else {
			struct freeze_rec f;
			bool ended = false;
			int got = answer_freeze(&ans, &f, &ended);
			if (got == 1) {
				print_line(&f);
				rc = CTL_EXIT_OK;
			} else if (got == 0) {
				puts(ended ? "freeze ended: writes and rollouts go on" : "no freeze");
				rc = CTL_EXIT_OK;
			}
		}
	}
	buf_release(&body);
	buf_release(&ans.body);
	return rc;
}

void ctl_print_freeze_line(const struct ctl_ctx *cx)
{
	struct client_answer ans = { 0, BUF_INIT, "" };
	char refusal[512];
	struct freeze_rec f;
	/* an older plane has no /v1/freeze: nothing to say */
	if (ctl_call_refusal(cx, "GET", "/v1/freeze", NULL, 0, &ans, refusal, sizeof(refusal)) == 0 &&
	    answer_freeze(&ans, &f, NULL) == 1)
		print_line(&f);
	buf_release(&ans.body);
}
