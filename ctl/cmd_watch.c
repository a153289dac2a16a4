/* cmd_watch.c: tetherctl watch [--json]: follows GET /v1/events and prints
 * each event as it comes: one readable line (coloured on a terminal), or
 * with --json one JSON object a line ({"id","event","data"}). A stream
 * that ends or goes silent is opened again (on the next plane of --plane
 * A,B) with Last-Event-ID, so nothing is missed while the ring holds it. */
#include "commands.h"
#include "credentials.h"
#include "ctl.h"
#include "json.h"
#include "output.h"
#include "request.h"
#include "sse_parser.h"
#include "xmalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WATCH_IDLE_S 35L       /* three heartbeats of the default 10 s, and some */
#define WATCH_RETRY_S 2
#define WATCH_LINE_MAX 65536   /* a longer line is not the plane's */
#define WATCH_EVENT_MAX (1u << 20)

struct watch {
	bool json, color;
	struct sse_parser sse;     /* keeps the last id across reconnects */
	bool got;                  /* any byte since the (re)connect */
	const char *url;           /* the plane of this connection */
};

static const char *paint(const struct watch *w, const char *code)
{
	return w->color ? code : "";
}

/* s as one printable line (owned). */
static char *text(const cJSON *obj, const char *key)
{
	const char *s = json_get_string(obj, key);
	return cell_text(s ? s : "", 400);
}

static unsigned long long num(const cJSON *obj, const char *key)
{
	uint64_t v = 0;
	json_get_u64(cJSON_GetObjectItemCaseSensitive(obj, key), &v);
	return (unsigned long long)v;
}

static int print_event(void *ctx, const struct sse_event *ev)
{
	struct watch *w = ctx;
	if (strcmp(ev->type, "heartbeat") == 0)
		return 0;
	struct json_limits lim = { 1 << 24, 64 };
	char err[256];
	cJSON *d = json_decode(ev->data, ev->data_len, &lim, err, sizeof(err));
	if (!d)
		return 0;
	if (w->json) {
		struct buf b = BUF_INIT;
		buf_puts(&b, "{\"id\":");
		buf_json_string(&b, ev->last_id);
		buf_puts(&b, ",\"event\":");
		buf_json_string(&b, ev->type);
		buf_puts(&b, ",\"data\":");
		buf_append(&b, ev->data, ev->data_len);
		buf_puts(&b, "}\n");
		fwrite(b.data, 1, b.len, stdout);
		buf_release(&b);
		fflush(stdout);
		cJSON_Delete(d);
		return 0;
	}
	char when[16];
	time_t now = time(NULL);
	struct tm tm;
	strftime(when, sizeof(when), "%H:%M:%S", localtime_r(&now, &tm));
	const char *red = paint(w, "\033[31m"), *green = paint(w, "\033[32m"), *yellow = paint(w, "\033[33m"),
		   *bold = paint(w, "\033[1m"), *off = paint(w, "\033[0m");
	char *node = text(d, "node");
	if (strcmp(ev->type, "version") == 0) {
		struct buf names = BUF_INIT;
		const cJSON *arr = cJSON_GetObjectItemCaseSensitive(d, "names"), *it;
		cJSON_ArrayForEach(it, arr) {
			if (cJSON_IsString(it))
				buf_printf(&names, "%s%s", names.len ? ", " : "", it->valuestring);
		}
		char *shown = cell_text(names.data ? names.data : "", 200);
		char *origin = text(d, "origin");
		printf("%s %sversion %llu%s: %llu changes (%s)%s%s\n", when, bold, num(d, "version"), off,
		       num(d, "changes"), origin, *shown ? ": " : "", shown);
		free(shown);
		free(origin);
		buf_release(&names);
	} else if (strcmp(ev->type, "ack") == 0) {
		const cJSON *h = cJSON_GetObjectItemCaseSensitive(d, "healthy");
		printf("%s %sack%s  %s version %llu%s\n", when, green, off, node, num(d, "version"),
		       cJSON_IsFalse(h) ? " (unhealthy)" : "");
	} else if (strcmp(ev->type, "nack") == 0) {
		char *e = text(d, "error");
		printf("%s %snack%s %s version %llu: %s\n", when, red, off, node, num(d, "version"), e);
		free(e);
	} else if (strcmp(ev->type, "rollout") == 0) {
		char *st = text(d, "state"), *reason = text(d, "reason");
		char rv[48] = "";
		if (num(d, "revert_version"))
			snprintf(rv, sizeof(rv), ", reverted by %llu", num(d, "revert_version"));
		printf("%s %srollout%s %llu: %s at stage %llu%% (version %llu -> %llu, %llu/%llu ACKed%s)%s%s\n", when,
		       yellow, off, num(d, "id"), st, num(d, "stage"), num(d, "from_version"), num(d, "to_version"),
		       num(d, "acked"), num(d, "reached"), rv, *reason ? ": " : "", reason);
		free(st);
		free(reason);
	} else if (strcmp(ev->type, "gate") == 0) {
		/* a traffic gate failed a stage, or a stage passed flagged, or
		 * could not be judged (its reason says so: "held: unjudged: ...") */
		char *verdict = text(d, "verdict"), *reason = text(d, "reason");
		bool own = strcmp(verdict, "unjudged") == 0 && *reason;
		printf("%s %sgate%s rollout %llu stage %llu (%llu%%): %s%s%s\n", when,
		       strcmp(verdict, "fail") == 0 ? red : yellow, off, num(d, "rollout"), num(d, "stage"),
		       num(d, "percent"), own ? "" : verdict, *reason && !own ? ": " : "", reason);
		free(verdict);
		free(reason);
	} else if (strcmp(ev->type, "freeze") == 0 || strcmp(ev->type, "thaw") == 0) {
		/* a freeze window set, or ended (by --off, or by its time) */
		char *by = text(d, "by"), *msg = text(d, "message"), *ended = text(d, "ended");
		char *until = time_local_text((double)num(d, "until"));
		if (ev->type[0] == 'f')
			printf("%s %sfreeze%s until %s by %s: %s\n", when, red, off, until, by, msg);
		else
			printf("%s %sthaw%s: the freeze until %s by %s ended (%s)\n", when, green, off, until, by, ended);
		free(until);
		free(by);
		free(msg);
		free(ended);
	} else if (strcmp(ev->type, "freeze_passed") == 0) {
		char *by = text(d, "by"), *reason = text(d, "reason");
		printf("%s %sfreeze passed%s: version %llu by %s, override: %s\n", when, yellow, off, num(d, "version"),
		       by, reason);
		free(by);
		free(reason);
	} else if (strcmp(ev->type, "node") == 0) {
		printf("%s node %s %s\n", when, node,
		       cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(d, "connected")) ? "connected" : "disconnected");
	} else if (strcmp(ev->type, "reset") == 0) {
		printf("%s %sreset%s: events were missed (the plane restarted or the gap is too old)\n", when, yellow,
		       off);
	} else {
		char *type = cell_text(ev->type, 32);
		printf("%s %s\n", when, type);
		free(type);
	}
	free(node);
	fflush(stdout);
	cJSON_Delete(d);
	return 0;
}

static int on_chunk(void *ctx, const char *data, size_t len)
{
	struct watch *w = ctx;
	if (!w->got)   /* the plane's first bytes: subscribed, events from now on */
		fprintf(stderr, "tetherctl: watching %s/v1/events (Ctrl-C ends it)\n", w->url);
	w->got = true;
	return sse_parser_feed(&w->sse, data, len, print_event, w) == 0 ? 0 : -1;
}

int cmd_watch(const struct ctl_ctx *cx, int argc, char **argv)
{
	(void)argc;
	(void)argv;
	char *token = NULL, *urls[CLIENT_MAX_PLANES];
	int n, rc = 1;
	struct watch w = { .json = cx->json };
	const char *nc = getenv("NO_COLOR");
	w.color = !cx->json && isatty(STDOUT_FILENO) && !(nc && *nc);
	sse_parser_init(&w.sse, WATCH_LINE_MAX, WATCH_EVENT_MAX);
	struct credentials cr;
	if ((n = ctl_planes(cx, urls, &token, &cr)) < 0) {
		n = 0;
		goto out;
	}
	for (int i = 0;; i = (i + 1) % n) {
		struct client *c = client_new(urls[i], &cr);
		if (!c) {
			ctl_error("cannot set up an HTTP client (libcurl)");
			goto out;
		}
		char header[64] = "";
		const char *last = w.sse.last_id.data;
		/* the plane's ids are numbers: anything else is not sent back */
		bool has_last = last && *last && strlen(last) < 32 && strspn(last, "0123456789") == strlen(last);
		if (has_last)
			snprintf(header, sizeof(header), "Last-Event-ID: %s", last);
		struct client_answer ans;
		w.got = false;
		w.url = urls[i];
		sse_parser_reset(&w.sse);
		int r = client_stream(c, "/v1/events", header[0] ? header : NULL, WATCH_IDLE_S, on_chunk, &w, &ans);
		long status = ans.status;
		buf_release(&ans.body);
		if (r < 0 && status >= 400 && status < 500) {
			/* refused (a token, a role, an old plane): asking again will not help */
			ctl_error("%s", client_error(c));
			client_free(c);
			goto out;
		}
		if (r < 0)
			fprintf(stderr, "tetherctl: %s; reconnecting\n", client_error(c));
		else
			fprintf(stderr, "tetherctl: the event stream ended; reconnecting\n");
		client_free(c);
		if (!w.got || n == 1)
			sleep(WATCH_RETRY_S);
	}
out:
	sse_parser_release(&w.sse);
	client_planes_free(urls, n);
	credentials_forget(token);
	return rc;
}
