/* test_fresh.c: unit tests of agent/fresh.c: reading what a plane says of
 * its staleness (a heartbeat's or push's "stale" member, the Tether-Stale
 * header, a /healthz answer, the text kept), the decisions (the order of
 * the candidates, the back-off of moves, the wait before a probe), and the
 * agent's side over real transfers to fake planes on loopback: a move to
 * the first fresh plane, staying when none is, a plane back during the
 * probe, the back-off after a move, SIGHUP's list, status.json and the
 * metrics. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent_int.h"
#include "json.h"
#include "log.h"
#include "tmpdir.h"
#include "util.h"
#include "xmalloc.h"

/* ---- "stale" in a heartbeat or a push ----------------------------------- */

static void from_json(const char *text, struct plane_stale *out)
{
	char err[256];
	cJSON *v = json_decode(text, strlen(text), NULL, err, sizeof(err));
	assert_non_null(v);
	fresh_stale_from_json(cJSON_GetObjectItemCaseSensitive(v, "stale"), out);
	cJSON_Delete(v);
}

static void test_json_member(void **state)
{
	(void)state;
	struct plane_stale s;
	memset(&s, 0x5a, sizeof(s));
	from_json("{\"version\":3}", &s);
	assert_false(s.on);
	assert_int_equal(s.since, 0);
	assert_string_equal(s.why, "");
	from_json("{\"stale\":null}", &s);
	assert_false(s.on);
	from_json("{\"stale\":false}", &s);
	assert_false(s.on);

	from_json("{\"version\":3,\"stale\":{\"since\":1700000000,\"why\":\"etcd unreachable for 12 s\"}}", &s);
	assert_true(s.on);
	assert_int_equal(s.since, 1700000000);
	assert_string_equal(s.why, "etcd unreachable for 12 s");
	/* fields missing or of another type read 0 and "" */
	from_json("{\"stale\":{}}", &s);
	assert_true(s.on);
	assert_int_equal(s.since, 0);
	assert_string_equal(s.why, "");
	from_json("{\"stale\":{\"since\":-5,\"why\":7}}", &s);
	assert_true(s.on);
	assert_int_equal(s.since, 0);
	assert_string_equal(s.why, "");
	from_json("{\"stale\":{\"since\":1.5,\"why\":null}}", &s);
	assert_true(s.on);
	assert_int_equal(s.since, 0);
	/* anything else there says stale, if not how */
	from_json("{\"stale\":true}", &s);
	assert_true(s.on);
	from_json("{\"stale\":\"yes\"}", &s);
	assert_true(s.on);
	assert_string_equal(s.why, "");
	/* the reason is kept printable */
	from_json("{\"stale\":{\"since\":1,\"why\":\"a\\nb\\u0007c\\u00e9\"}}", &s);
	assert_string_equal(s.why, "a?b?c\xc3\xa9");
}

/* ---- Tether-Stale ------------------------------------------------------- */

static void from_header(const char *v, struct plane_stale *out)
{
	memset(out, 0x5a, sizeof(*out));
	fresh_stale_from_header(v, strlen(v), out);
}

static void test_header(void **state)
{
	(void)state;
	struct plane_stale s;
	from_header("1700000000 upstream https://up:8443 gone", &s);
	assert_true(s.on);
	assert_int_equal(s.since, 1700000000);
	assert_string_equal(s.why, "upstream https://up:8443 gone");
	from_header("1700000000", &s);
	assert_true(s.on);
	assert_int_equal(s.since, 1700000000);
	assert_string_equal(s.why, "");
	from_header("1700000000 ", &s);
	assert_int_equal(s.since, 1700000000);
	assert_string_equal(s.why, "");
	/* no SINCE: all of it is the reason */
	from_header("etcd unreachable", &s);
	assert_true(s.on);
	assert_int_equal(s.since, 0);
	assert_string_equal(s.why, "etcd unreachable");
	from_header("17x why", &s);
	assert_int_equal(s.since, 0);
	assert_string_equal(s.why, "17x why");
	/* more digits than fit are no SINCE either (no overflow) */
	from_header("12345678901234567890123 why", &s);
	assert_int_equal(s.since, 0);
	assert_string_equal(s.why, "12345678901234567890123 why");
	from_header("", &s);
	assert_true(s.on);
	assert_int_equal(s.since, 0);
	assert_string_equal(s.why, "");
	from_header("5 tab\there\x01", &s);
	assert_int_equal(s.since, 5);
	assert_string_equal(s.why, "tab?here?");
}

/* ---- the text kept ------------------------------------------------------ */

static void test_clean_text(void **state)
{
	(void)state;
	char out[8];
	fresh_clean_text(out, sizeof(out), "abc", 3);
	assert_string_equal(out, "abc");
	fresh_clean_text(out, sizeof(out), "abcdefghij", 10);
	assert_string_equal(out, "abcdefg");   /* 7 bytes and the NUL */
	/* a cut never splits a character: 3 x 2 bytes fit in 7, a 4th not */
	fresh_clean_text(out, sizeof(out), "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 8);
	assert_string_equal(out, "\xc3\xa9\xc3\xa9\xc3\xa9");
	fresh_clean_text(out, sizeof(out), "abcde\xe2\x82\xac", 8);   /* the euro sign does not fit */
	assert_string_equal(out, "abcde");
	/* not UTF-8: a stray continuation, a truncated sequence, an overlong
	 * form, a surrogate, a byte never in UTF-8 */
	fresh_clean_text(out, sizeof(out), "\x80" "a\xc3", 3);
	assert_string_equal(out, "?a?");
	fresh_clean_text(out, sizeof(out), "\xc0\xaf", 2);
	assert_string_equal(out, "??");
	fresh_clean_text(out, sizeof(out), "\xed\xa0\x80", 3);
	assert_string_equal(out, "???");
	fresh_clean_text(out, sizeof(out), "\xff\x7f", 2);
	assert_string_equal(out, "??");
	/* a NUL inside the length is a control character too */
	fresh_clean_text(out, sizeof(out), "a\0b", 3);
	assert_string_equal(out, "a?b");
	char one[1];
	fresh_clean_text(one, sizeof(one), "abc", 3);
	assert_string_equal(one, "");
	char big[FRESH_WHY_MAX];
	char src[FRESH_WHY_MAX * 2];
	memset(src, 'x', sizeof(src));
	fresh_clean_text(big, sizeof(big), src, sizeof(src));
	assert_int_equal(strlen(big), FRESH_WHY_MAX - 1);
}

/* ---- /healthz ----------------------------------------------------------- */

static enum fresh_verdict judge(long status, const char *body, struct plane_stale *s)
{
	return fresh_judge(status, body, body ? strlen(body) : 0, 9, s);
}

static void test_judge(void **state)
{
	(void)state;
	struct plane_stale s;
	assert_int_equal(judge(200, "{\"status\":\"ok\",\"version\":9}", &s), FRESH_UP);
	assert_false(s.on);
	/* a relay's answer, and a plane from before staleness */
	const char *relay = "{\"status\":\"ok\",\"version\":9,\"upstream\":\"http://u\",\"upstream_up\":true}";
	assert_int_equal(judge(200, relay, &s), FRESH_UP);
	/* not a plane's answer: not a candidate */
	assert_int_equal(judge(200, "", &s), FRESH_DOWN);
	assert_int_equal(judge(200, NULL, &s), FRESH_DOWN);
	assert_int_equal(judge(200, "not json", &s), FRESH_DOWN);
	assert_int_equal(judge(200, "{\"version\":9}", &s), FRESH_DOWN);
	assert_int_equal(judge(200, "{\"status\":\"ok\"}", &s), FRESH_DOWN);
	assert_int_equal(judge(200, "{\"status\":\"ok\",\"version\":9,\"stale\":null}", &s), FRESH_UP);
	/* behind the node (9): a snapshot, not a delta, would follow */
	assert_int_equal(judge(200, "{\"status\":\"ok\",\"version\":8}", &s), FRESH_DOWN);
	assert_int_equal(judge(200, "{\"status\":\"ok\",\"version\":10}", &s), FRESH_UP);
	/* stale */
	const char *stale = "{\"status\":\"stale\",\"version\":9,\"stale\":{\"since\":1700000001,\"why\":\"no etcd\"}}";
	assert_int_equal(judge(503, stale, &s), FRESH_STALE);
	assert_true(s.on);
	assert_int_equal(s.since, 1700000001);
	assert_string_equal(s.why, "no etcd");
	assert_int_equal(judge(503, "{\"status\":\"stale\"}", &s), FRESH_STALE);
	assert_true(s.on);
	assert_int_equal(judge(200, "{\"status\":\"stale\",\"version\":9}", &s), FRESH_STALE);
	assert_int_equal(judge(200, "{\"status\":\"ok\",\"stale\":{\"since\":1}}", &s), FRESH_STALE);
	/* anything else is not a candidate */
	assert_int_equal(judge(503, "{\"status\":\"starting\"}", &s), FRESH_DOWN);
	assert_int_equal(judge(503, "", &s), FRESH_DOWN);
	assert_int_equal(judge(500, "{\"status\":\"ok\"}", &s), FRESH_DOWN);
	assert_int_equal(judge(404, "{\"status\":\"ok\"}", &s), FRESH_DOWN);
	assert_int_equal(judge(401, NULL, &s), FRESH_DOWN);
	assert_int_equal(judge(0, NULL, &s), FRESH_DOWN);
	assert_int_equal(judge(204, NULL, &s), FRESH_DOWN);
}

/* ---- the decisions ------------------------------------------------------ */

static void test_order(void **state)
{
	(void)state;
	size_t out[AGENT_MAX_PLANES];
	int64_t seen[AGENT_MAX_PLANES] = { 0 };
	int64_t now = 1000000;
	/* list order, the current one skipped */
	assert_int_equal(fresh_order(4, 1, seen, now, out), 3);
	assert_int_equal(out[0], 0);
	assert_int_equal(out[1], 2);
	assert_int_equal(out[2], 3);
	assert_int_equal(fresh_order(1, 0, seen, now, out), 0);
	assert_int_equal(fresh_order(2, 0, seen, now, out), 1);
	assert_int_equal(out[0], 1);
	/* seen stale within 30 s: after every other, in list order */
	seen[0] = now - 1000;
	seen[2] = now - (FRESH_RECENT_STALE_MS - 1);
	seen[3] = now - FRESH_RECENT_STALE_MS;   /* 30 s ago: not recent any more */
	assert_int_equal(fresh_order(5, 1, seen, now, out), 4);
	assert_int_equal(out[0], 3);
	assert_int_equal(out[1], 4);
	assert_int_equal(out[2], 0);
	assert_int_equal(out[3], 2);
	/* the current plane is skipped whatever it was seen as */
	assert_int_equal(fresh_order(5, 0, seen, now, out), 4);
	assert_int_equal(out[0], 1);
	assert_int_equal(out[1], 3);
	assert_int_equal(out[2], 4);
	assert_int_equal(out[3], 2);
	/* every one recent: list order still */
	for (int i = 0; i < 5; i++)
		seen[i] = now;
	assert_int_equal(fresh_order(5, 4, seen, now, out), 4);
	for (size_t i = 0; i < 4; i++)
		assert_int_equal(out[i], i);
}

static void test_backoff(void **state)
{
	(void)state;
	int64_t moves[FRESH_MOVES_KEPT] = { 0 };
	int64_t now = 500000;
	assert_int_equal(fresh_backoff_ms(moves, FRESH_MOVES_KEPT, now), 0);
	moves[0] = now - 1;
	assert_int_equal(fresh_backoff_ms(moves, FRESH_MOVES_KEPT, now), FRESH_MOVE_PENALTY_MS);
	moves[1] = now - (FRESH_MOVE_WINDOW_MS - 1);
	moves[2] = now - FRESH_MOVE_WINDOW_MS;   /* 60 s ago: out of the window */
	moves[3] = now - 3 * FRESH_MOVE_WINDOW_MS;
	assert_int_equal(fresh_backoff_ms(moves, FRESH_MOVES_KEPT, now), 2 * FRESH_MOVE_PENALTY_MS);
	/* capped at 10 s */
	for (int i = 0; i < FRESH_MOVES_KEPT; i++)
		moves[i] = now - 10 * i;
	assert_int_equal(fresh_backoff_ms(moves, FRESH_MOVES_KEPT, now), FRESH_MOVE_PENALTY_MAX_MS);
	assert_int_equal(FRESH_MOVE_PENALTY_MAX_MS / FRESH_MOVE_PENALTY_MS <= FRESH_MOVES_KEPT, 1);
}

static void test_delay(void **state)
{
	(void)state;
	assert_int_equal(fresh_delay_ms(0, 2, 0, 0), 0);
	assert_int_equal(fresh_delay_ms(0, 2, 0.5, 0), 1000);
	assert_int_equal(fresh_delay_ms(0, 2, 0.75, 0), 1500);
	assert_int_equal(fresh_delay_ms(10, 2, 0.25, 0), 10500);
	assert_int_equal(fresh_delay_ms(10, 2, 0.25, 5000), 15500);
	assert_int_equal(fresh_delay_ms(0, 0, 0.7, 30000), 30000);
	assert_int_equal(fresh_delay_ms(-1, -1, -1, -1), 0);
}

/* ---- the agent, over real transfers ------------------------------------- */

/* A fake plane on loopback: answers GET /healthz with status and body, one
 * request a connection, served when the test turns it. */
struct fake {
	int lfd;
	int port;
	int status;
	const char *body;
	int hits;
	int cfd;
	char req[4096];
	size_t rlen;
	char url[64];
};

static void fake_open(struct fake *f, int status, const char *body)
{
	memset(f, 0, sizeof(*f));
	f->cfd = -1;
	f->status = status;
	f->body = body;
	f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	assert_true(f->lfd >= 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = 0 };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(f->lfd, 8), 0);
	socklen_t len = sizeof(sa);
	assert_int_equal(getsockname(f->lfd, (struct sockaddr *)&sa, &len), 0);
	f->port = ntohs(sa.sin_port);
	snprintf(f->url, sizeof(f->url), "http://127.0.0.1:%d", f->port);
}

/* A plane that does not answer: a port nobody listens on any more. */
static void fake_dead(struct fake *f)
{
	fake_open(f, 0, NULL);
	close(f->lfd);
	f->lfd = -1;
}

static void fake_close(struct fake *f)
{
	if (f->cfd >= 0)
		close(f->cfd);
	if (f->lfd >= 0)
		close(f->lfd);
	f->cfd = f->lfd = -1;
}

static void fake_turn(struct fake *f)
{
	if (f->lfd < 0)
		return;
	if (f->cfd < 0) {
		f->cfd = accept4(f->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		f->rlen = 0;
		if (f->cfd < 0)
			return;
	}
	ssize_t n = read(f->cfd, f->req + f->rlen, sizeof(f->req) - 1 - f->rlen);
	if (n > 0)
		f->rlen += (size_t)n;
	f->req[f->rlen] = '\0';
	if (!strstr(f->req, "\r\n\r\n")) {
		if (n == 0) {
			close(f->cfd);
			f->cfd = -1;
		}
		return;
	}
	assert_true(strncmp(f->req, "GET /healthz HTTP/1.1\r\n", 23) == 0);
	char resp[1024];
	int len = snprintf(resp, sizeof(resp),
			   "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
			   "Connection: close\r\n\r\n%s", f->status, strlen(f->body), f->body);
	if (write(f->cfd, resp, (size_t)len) == len)
		f->hits++;
	close(f->cfd);
	f->cfd = -1;
}

#define NFAKE 3
static const char *const BODY_OK = "{\"status\":\"ok\",\"version\":7}";
static const char *const BODY_STALE =
	"{\"status\":\"stale\",\"version\":7,\"stale\":{\"since\":1700000000,\"why\":\"no etcd\"}}";

struct fx {
	char dir[128];
	struct fake fk[NFAKE];
	struct agent *a;
};

/* An agent on fk[0] with the planes fk[0..n) (the agent never dials: only
 * the probes go out), move jitter 0. */
static struct agent *agent_make(struct fx *f, size_t n)
{
	struct agent *a = xcalloc(1, sizeof(*a));
	agent_config_defaults(&a->cfg);
	free(a->cfg.state_dir);
	a->cfg.state_dir = xstrdup(f->dir);
	a->cfg.node = xstrdup("n1");
	a->cfg.move_jitter = 0;
	a->cfg.connect_timeout = 2;
	a->cfg.planes = xcalloc(AGENT_MAX_PLANES, sizeof(*a->cfg.planes));
	struct buf joined = BUF_INIT;
	for (size_t i = 0; i < n; i++) {
		a->cfg.planes[i] = xstrdup(f->fk[i].url);
		buf_printf(&joined, "%s%s", i ? "," : "", f->fk[i].url);
	}
	a->cfg.nplanes = n;
	a->cfg.plane = buf_detach(&joined, NULL);
	a->multi = curl_multi_init();
	a->live_healthy = -1;
	a->traffic.fd = -1;
	state_init(&a->state);
	a->state.version = 7;
	agent_set_state(a, ST_SYNCED);
	return a;
}

static void agent_unmake(struct agent *a)
{
	if (!a)
		return;
	fresh_release(a);
	ack_release(a);
	curl_multi_cleanup(a->multi);
	state_release(&a->state);
	agent_config_release(&a->cfg);
	free((char *)a->written.last_error);
	free((char *)a->written.key_id);
	free((char *)a->written.plane);
	free((char *)a->written.plane_stale_why);
	free(a);
}

static int setup(void **state)
{
	struct fx *f = xcalloc(1, sizeof(*f));
	if (test_tmpdir_make(f->dir, sizeof(f->dir), "fresh") < 0)
		return -1;
	fake_dead(&f->fk[0]);   /* the plane the agent is on: never dialled */
	fake_open(&f->fk[1], 200, BODY_OK);
	fake_open(&f->fk[2], 200, BODY_OK);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	agent_unmake(f->a);
	for (int i = 0; i < NFAKE; i++)
		fake_close(&f->fk[i]);
	test_tmpdir_remove(f->dir);
	free(f);
	metrics_release();
	return 0;
}

static bool moved(const struct agent *a)
{
	return a->plane_idx != 0;
}

static bool moved_to_0(const struct agent *a)
{
	return a->plane_idx == 0;
}

static bool round_ended(const struct agent *a)
{
	return !a->fresh.round && !a->fresh.h;
}

/* The event loop's part for fresh.c, and the fakes, until done (or 10 s:
 * a failure). */
static void pump(struct fx *f, bool (*done)(const struct agent *))
{
	struct agent *a = f->a;
	int64_t end = now_ms() + 10000;
	while (now_ms() < end) {
		int64_t wake = now_ms() + 1000;
		fresh_tick(a, &wake);
		int running;
		curl_multi_perform(a->multi, &running);
		CURLMsg *m;
		int left;
		while ((m = curl_multi_info_read(a->multi, &left)))
			if (m->msg == CURLMSG_DONE && m->easy_handle == a->fresh.h)
				fresh_done(a, m->data.result);
		for (int i = 0; i < NFAKE; i++)
			fake_turn(&f->fk[i]);
		if (done(a))
			return;
		curl_multi_poll(a->multi, NULL, 0, 5, NULL);
	}
	fail_msg("fresh: not done within 10 s");
}

static char *status_json(const struct fx *f)
{
	char path[256];
	size_t len;
	snprintf(path, sizeof(path), "%s/status.json", f->dir);
	char *t = read_file_limited(path, 1 << 16, &len);
	assert_non_null(t);
	return t;
}

static bool metrics_has(const struct agent *a, const char *line)
{
	struct buf b = BUF_INIT;
	metrics_text(a, &b, false);
	bool has = strstr(b.data, line) != NULL;
	buf_release(&b);
	return has;
}

static void test_moves_to_first_fresh(void **state)
{
	struct fx *f = *state;
	f->fk[1].status = 503;
	f->fk[1].body = BODY_STALE;
	struct agent *a = f->a = agent_make(f, 3);
	agent_write_status(a);
	char *st = status_json(f);
	assert_non_null(strstr(st, "\"state\":\"synced\""));
	assert_non_null(strstr(st, "\"plane_stale\":null"));
	free(st);

	fresh_heard(a, true, 1700000000, "etcd unreachable");
	st = status_json(f);
	assert_non_null(strstr(st, "\"state\":\"stale\""));
	assert_non_null(strstr(st, "\"plane_stale\":{\"since\":1700000000,\"why\":\"etcd unreachable\"}"));
	free(st);
	assert_true(metrics_has(a, "\ntetherd_plane_stale 1\n"));
	assert_true(metrics_has(a, "\ntetherd_stale_moves_total 0\n"));

	pump(f, moved);
	/* the stale one answered, and was passed over; the fresh one taken */
	assert_int_equal(a->plane_idx, 2);
	assert_int_equal(f->fk[1].hits, 1);
	assert_int_equal(f->fk[2].hits, 1);
	assert_int_equal(a->m.stale_moves, 1);
	assert_int_equal(a->m.plane_moves, 1);
	assert_true(a->fresh.seen_stale_ms[0] > 0);
	assert_true(a->fresh.seen_stale_ms[1] > 0);
	assert_int_equal(a->fresh.seen_stale_ms[2], 0);
	/* the new plane is judged by its own answers; dialled at once, the
	 * ACKs waiting for it */
	assert_false(a->fresh.now.on);
	assert_true(a->next_sync_ms <= now_ms());
	assert_true(a->ack.hold);
	st = status_json(f);
	assert_non_null(strstr(st, "\"state\":\"synced\""));
	assert_non_null(strstr(st, "\"plane_stale\":null"));
	char want[128];
	snprintf(want, sizeof(want), "\"plane\":\"%s\"", f->fk[2].url);
	assert_non_null(strstr(st, want));
	free(st);
	assert_true(metrics_has(a, "\ntetherd_plane_stale 0\n"));
	assert_true(metrics_has(a, "\ntetherd_stale_moves_total 1\n"));
	assert_true(metrics_has(a, "\ntetherd_plane_moves_total 1\n"));
}

static void test_stays_when_none_fresh(void **state)
{
	struct fx *f = *state;
	f->fk[1].status = 503;
	f->fk[1].body = BODY_STALE;
	fake_close(&f->fk[2]);   /* and C does not answer */
	struct agent *a = f->a = agent_make(f, 3);
	fresh_heard(a, true, 0, "");
	pump(f, round_ended);
	assert_int_equal(a->plane_idx, 0);
	assert_int_equal(f->fk[1].hits, 1);
	assert_true(a->fresh.staying_logged);
	assert_int_equal(a->m.stale_moves, 0);
	/* the next round a heartbeat interval later (10 s before one said) */
	assert_true(a->fresh.probe_due);
	int64_t wait = a->fresh.probe_at_ms - now_ms();
	assert_true(wait > 9000 && wait <= 10000);
	char *st = status_json(f);
	assert_non_null(strstr(st, "\"state\":\"stale\""));
	assert_non_null(strstr(st, "\"plane_stale\":{\"since\":0,\"why\":\"\"}"));
	free(st);
	/* with the interval a heartbeat advertised */
	a->heartbeat_s = 3;
	a->fresh.probe_at_ms = now_ms();
	pump(f, round_ended);
	wait = a->fresh.probe_at_ms - now_ms();
	assert_true(wait > 2000 && wait <= 3000);
	assert_int_equal(f->fk[1].hits, 2);

	/* B comes back: the next round moves there */
	f->fk[1].status = 200;
	f->fk[1].body = BODY_OK;
	a->fresh.probe_at_ms = now_ms();
	pump(f, moved);
	assert_int_equal(a->plane_idx, 1);
	assert_int_equal(a->m.stale_moves, 1);
	assert_false(a->fresh.staying_logged);
}

static void test_back_during_probe(void **state)
{
	struct fx *f = *state;
	struct agent *a = f->a = agent_make(f, 3);
	fresh_heard(a, true, 1700000000, "no etcd");
	/* the probe of B goes out, unanswered (B is not turned) */
	int64_t wake = now_ms() + 1000;
	fresh_tick(a, &wake);
	assert_non_null(a->fresh.h);
	assert_int_equal(a->fresh.probing, 1);
	for (int i = 0; i < 5; i++) {
		int running;
		curl_multi_perform(a->multi, &running);
		curl_multi_poll(a->multi, NULL, 0, 5, NULL);
	}
	assert_non_null(a->fresh.h);
	/* the plane says it is current again (a heartbeat without "stale") */
	fresh_heard(a, false, 0, NULL);
	char *st = status_json(f);
	assert_non_null(strstr(st, "\"state\":\"synced\""));
	free(st);
	fresh_tick(a, &wake);
	assert_null(a->fresh.h);
	assert_false(a->fresh.round);
	assert_false(a->fresh.probe_due);
	for (int i = 0; i < 20; i++) {
		int running;
		curl_multi_perform(a->multi, &running);
		fresh_tick(a, &wake);
		assert_null(a->fresh.h);
		curl_multi_poll(a->multi, NULL, 0, 5, NULL);
	}
	assert_int_equal(a->plane_idx, 0);
	assert_int_equal(a->m.plane_moves, 0);

	/* a probe whose answer comes after another move is void */
	fresh_heard(a, true, 1700000000, "no etcd");
	fresh_tick(a, &wake);
	assert_non_null(a->fresh.h);
	fresh_plane_changed(a);   /* as a failure's move_on does */
	assert_false(a->fresh.now.on);
	fresh_tick(a, &wake);
	assert_null(a->fresh.h);
	assert_int_equal(a->plane_idx, 0);
	assert_int_equal(a->m.stale_moves, 0);
}

static void test_backoff_after_move(void **state)
{
	struct fx *f = *state;
	struct agent *a = f->a = agent_make(f, 3);
	fresh_heard(a, true, 1700000000, "no etcd");
	pump(f, moved);
	assert_int_equal(a->plane_idx, 1);
	/* B turns stale as well: the next look waits the jitter (0 here) and
	 * 2 s for the move of a moment ago */
	fresh_heard(a, true, 1700000100, "no etcd either");
	int64_t wake = now_ms() + 60000;
	fresh_tick(a, &wake);
	assert_true(a->fresh.probe_due);
	int64_t wait = a->fresh.probe_at_ms - now_ms();
	assert_true(wait > FRESH_MOVE_PENALTY_MS - 1000 && wait <= FRESH_MOVE_PENALTY_MS);
	assert_true(wake <= a->fresh.probe_at_ms);
	/* and A, stale a moment ago, comes after C */
	a->fresh.probe_at_ms = now_ms();
	fresh_tick(a, &wake);
	assert_true(a->fresh.round);
	assert_int_equal(a->fresh.norder, 2);
	assert_int_equal(a->fresh.order[0], 2);
	assert_int_equal(a->fresh.order[1], 0);
	pump(f, round_ended);
	assert_int_equal(a->plane_idx, 2);
	assert_int_equal(a->m.stale_moves, 2);
	assert_int_equal(a->m.plane_moves, 2);
}

static void test_single_plane_and_once(void **state)
{
	struct fx *f = *state;
	struct agent *a = f->a = agent_make(f, 1);
	fresh_heard(a, true, 1700000000, "no etcd");
	int64_t wake = now_ms() + 1000;
	fresh_tick(a, &wake);
	assert_null(a->fresh.h);
	assert_false(a->fresh.probe_due);
	char *st = status_json(f);
	assert_non_null(strstr(st, "\"state\":\"stale\""));
	free(st);
	/* degraded outranks stale */
	agent_set_state(a, ST_DEGRADED);
	agent_write_status(a);
	st = status_json(f);
	assert_non_null(strstr(st, "\"state\":\"degraded\""));
	assert_non_null(strstr(st, "\"plane_stale\":{"));
	free(st);
	agent_set_state(a, ST_SYNCED);
	fresh_heard(a, false, 0, NULL);
	assert_false(a->fresh.now.on);

	/* --once: nothing of this */
	a->cfg.once = true;
	fresh_heard(a, true, 1700000000, "no etcd");
	assert_false(a->fresh.now.on);
}

static void test_sighup_list(void **state)
{
	struct fx *f = *state;
	struct agent *a = f->a = agent_make(f, 3);
	fresh_heard(a, true, 1700000000, "no etcd");
	a->fresh.seen_stale_ms[1] = 111;
	a->fresh.seen_stale_ms[2] = 222;
	int64_t wake = now_ms() + 1000;
	fresh_tick(a, &wake);
	assert_non_null(a->fresh.h);
	unsigned epoch = a->fresh.epoch;
	/* the new list: C, A (B is gone) */
	struct agent_config nc;
	memset(&nc, 0, sizeof(nc));
	char *planes[2] = { f->fk[2].url, f->fk[0].url };
	nc.planes = planes;
	nc.nplanes = 2;
	fresh_carry(a, &nc);
	assert_int_equal(a->fresh.seen_stale_ms[0], 222);
	assert_true(a->fresh.seen_stale_ms[1] > 0);   /* A: stale now */
	assert_int_equal(a->fresh.seen_stale_ms[2], 0);
	assert_int_not_equal(a->fresh.epoch, epoch);
	assert_false(a->fresh.round);
	sync_carry_plane(a, &nc);
	assert_int_equal(a->plane_idx, 1);
	assert_true(a->fresh.now.on);   /* still on A, still stale */
	/* nc replaces the configuration (as reload_config does) */
	for (size_t i = 0; i < a->cfg.nplanes; i++)
		free(a->cfg.planes[i]);
	a->cfg.planes[0] = xstrdup(f->fk[2].url);
	a->cfg.planes[1] = xstrdup(f->fk[0].url);
	a->cfg.planes[2] = NULL;
	a->cfg.nplanes = 2;
	/* the probe of the old list's B is void; the round starts over on
	 * the new list */
	fresh_tick(a, &wake);
	assert_non_null(a->fresh.h);
	assert_int_equal(a->fresh.probing, 0);
	assert_int_equal(a->fresh.norder, 1);
	pump(f, moved_to_0);
	assert_int_equal(f->fk[2].hits, 1);
	assert_int_equal(f->fk[1].hits, 0);
	/* and a list without the plane dialled now resets its view */
	fresh_heard(a, true, 1700000000, "no etcd");
	char *other[1] = { f->fk[1].url };
	nc.planes = other;
	nc.nplanes = 1;
	fresh_carry(a, &nc);
	sync_carry_plane(a, &nc);
	assert_false(a->fresh.now.on);
}

int main(void)
{
	/* a fake plane may write to a probe that went away */
	signal(SIGPIPE, SIG_IGN);
	log_set_level(LOG_LVL_ERROR);
	curl_global_init(CURL_GLOBAL_NOTHING);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_json_member),
		cmocka_unit_test(test_header),
		cmocka_unit_test(test_clean_text),
		cmocka_unit_test(test_judge),
		cmocka_unit_test(test_order),
		cmocka_unit_test(test_backoff),
		cmocka_unit_test(test_delay),
		cmocka_unit_test_setup_teardown(test_moves_to_first_fresh, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stays_when_none_fresh, setup, teardown),
		cmocka_unit_test_setup_teardown(test_back_during_probe, setup, teardown),
		cmocka_unit_test_setup_teardown(test_backoff_after_move, setup, teardown),
		cmocka_unit_test_setup_teardown(test_single_plane_and_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sighup_list, setup, teardown),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	curl_global_cleanup();
	return rc;
}
