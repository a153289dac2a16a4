/* test_gate.c: unit tests of plane/rollout/gate.c, the traffic-aware gates of
 * staged rollouts, driven with real struct traffic reports (counted with
 * traffic_observe, cumulative as agents send them): a bad canary caught on
 * its error rate (absolute and Nx) and on its p99 (ten times slower), the
 * reason's crossings worst first, a good canary that passes, too little
 * traffic (low_traffic after the bake), the marks (a baseline's cumulative
 * counters count only after the stage started), an older report ignored,
 * a generation that restarts, the last stage judged against the baseline
 * kept from the one before, and the options. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "buf.h"
#include "rollout/gate.h"
#include "plane.h"
#include "traffic.h"
#include "util.h"
#include "xmalloc.h"

static struct plane_config cfg;

/* The gates' options as the plane hands them over. */
static const struct gate_options *go_of(const struct plane_config *c)
{
	static struct gate_options o;
	o = plane_gate_options(c);
	return &o;
}

static struct gate *make_gate(const char *rollout, const char *err_rate, const char *p99, uint64_t min)
{
	char err[256] = "x";
	plane_config_defaults(&cfg);
	free(cfg.rollout);
	cfg.rollout = xstrdup(rollout);
	cfg.gate_error_rate = err_rate ? xstrdup(err_rate) : NULL;
	cfg.gate_latency_p99 = p99 ? xstrdup(p99) : NULL;
	cfg.gate_min_requests = min;
	struct gate_options go = plane_gate_options(&cfg);
	struct gate *g = gate_new(&go, err, sizeof(err));
	if (!g)
		fail_msg("gate_new: %s", err);
	gate_set_judge_interval(g, 0);   /* every report judged at once */
	return g;
}

static void release_cfg(void)
{
	options_release(plane_options, &cfg);
}

static double wall(void)
{
	return (double)wall_ms() / 1000.0;
}

/* One route's cumulative counters: ok answers at ok_ms, errors (500) at
 * err_ms. */
struct counts {
	const char *route;
	unsigned ok, errors;
	double ok_ms, err_ms;
};

/* A node's report: version, generation, its window, and its routes. */
static void report(struct gate *g, const char *node, uint64_t version, const char *gen, double since, double until,
		   const struct counts *c, size_t n)
{
	struct traffic t;
	traffic_init(&t);
	t.version = version;
	snprintf(t.gen, sizeof(t.gen), "%s", gen);
	t.since = since;
	t.until = until;
	for (size_t i = 0; i < n; i++) {
		struct traffic_route *r = traffic_route(&t, c[i].route, strlen(c[i].route));
		assert_non_null(r);
		for (unsigned k = 0; k < c[i].ok; k++)
			traffic_observe(r, 200, c[i].ok_ms);
		for (unsigned k = 0; k < c[i].errors; k++)
			traffic_observe(r, 500, c[i].err_ms);
	}
	gate_report(g, node, &t);
	traffic_release(&t);
}

static void report1(struct gate *g, const char *node, uint64_t version, const char *gen, double since, double until,
		    unsigned ok, unsigned errors, double ms)
{
	struct counts c = { "route/api", ok, errors, ms, ms };
	report(g, node, version, gen, since, until, &c, 1);
}

/* A stage: reached members and which ACKed. */
struct stage {
	struct gate_stage_view v;
	char *names[8];
	bool acked[8];
};

static void stage_init(struct stage *s, uint64_t run, size_t idx, unsigned pct, double started, const char *const *names,
		       size_t n)
{
	memset(s, 0, sizeof(*s));
	for (size_t i = 0; i < n; i++)
		s->names[i] = (char *)names[i];
	s->v = (struct gate_stage_view){ .run = run, .stage = idx, .percent = pct, .started = started, .from = 1,
					 .to = 2, .reached = s->names, .acked = s->acked, .nreached = n };
}

static enum gate_verdict judge(struct gate *g, struct stage *s, char **reason)
{
	*reason = NULL;
	return gate_judge(g, &s->v, reason);
}

/* The stage begins: stage_init at the wall clock's now, judged once (the
 * gate sees the stage); returns its start. */
static double stage_begin(struct gate *g, struct stage *s, uint64_t run, size_t idx, unsigned pct,
			  const char *const *names, size_t n)
{
	char *reason;
	double start = wall();
	stage_init(s, run, idx, pct, start, names, n);
	assert_int_equal(judge(g, s, &reason), GATE_JUDGING);
	return start;
}

/* The stage's JSON as the rollout shows it. */
static cJSON *gate_doc(struct gate *g, uint64_t run)
{
	struct buf b = BUF_INIT;
	buf_putc(&b, '{');
	buf_puts(&b, "\"x\":1");
	gate_json(g, run, true, &b);
	buf_putc(&b, '}');
	buf_putc(&b, 0);
	cJSON *doc = cJSON_Parse(b.data);
	if (!doc)
		fail_msg("gate_json is not JSON: %s", b.data);
	buf_release(&b);
	return cJSON_GetObjectItem(doc, "gate") ? doc : NULL;
}

static double num_at(cJSON *doc, size_t stage, const char *route, const char *side, const char *field)
{
	cJSON *stages = cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "gate"), "stages");
	cJSON *st = cJSON_GetArrayItem(stages, (int)stage);
	assert_non_null(st);
	cJSON *r;
	cJSON_ArrayForEach(r, cJSON_GetObjectItem(st, "routes"))
	{
		if (strcmp(cJSON_GetObjectItem(r, "route")->valuestring, route) == 0)
			return cJSON_GetObjectItem(cJSON_GetObjectItem(r, side), field)->valuedouble;
	}
	fail_msg("no route %s in stage %zu", route, stage);
	return -1;
}

static const char *str_at(cJSON *doc, size_t stage, const char *field)
{
	cJSON *st = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "gate"), "stages"), (int)stage);
	cJSON *v = cJSON_GetObjectItem(st, field);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void expect_in(const char *text, const char *want)
{
	if (!text || !strstr(text, want))
		fail_msg("'%s' not in '%s'", want, text ? text : "(null)");
}

/* Three baseline nodes (version 1, live long before the stage) report
 * once after the stage started (the mark: 10000 requests, their errors
 * included), then again with `more` requests (`errs` of them errors) at
 * `ms`. */
static void baseline(struct gate *g, double start, unsigned more, unsigned errs, double ms, unsigned old_errors)
{
	static const char *const b[] = { "b1", "b2", "b3" };
	for (int i = 0; i < 3; i++)
		report1(g, b[i], 1, "g1", start - 3600, start + 0.5, 10000 - old_errors, old_errors, ms);
	for (int i = 0; i < 3; i++) {
		struct counts c[2] = { { "route/api", 10000 - old_errors, old_errors, ms, ms },
				       { "route/api", more - errs, errs, ms, ms } };
		/* cumulative: the old counts and the new, one route */
		struct traffic t;
		traffic_init(&t);
		t.version = 1;
		snprintf(t.gen, sizeof(t.gen), "g1");
		t.since = start - 3600;
		t.until = start + 10.7;
		struct traffic_route *r = traffic_route(&t, "route/api", 9);
		for (int k = 0; k < 2; k++) {
			for (unsigned j = 0; j < c[k].ok; j++)
				traffic_observe(r, 200, c[k].ok_ms);
			for (unsigned j = 0; j < c[k].errors; j++)
				traffic_observe(r, 503, c[k].err_ms);
		}
		gate_report(g, b[i], &t);
		traffic_release(&t);
	}
}

/* ---- a bad canary -------------------------------------------------------- */

static void test_error_rate_absolute(void **state)
{
	(void)state;
	struct gate *g = make_gate("staged", "0.01", NULL, 100);
	static const char *const members[] = { "n1", "n2" };
	struct stage s;
	double start = wall();
	stage_init(&s, 7, 0, 10, start, members, 2);
	char *reason;
	assert_int_equal(judge(g, &s, &reason), GATE_JUDGING);   /* the stage begins */
	assert_true(gate_wants_reports(g) == false);
	gate_set_running(g, true);
	assert_true(gate_wants_reports(g));

	baseline(g, start, 510, 0, 5, 0);
	/* n1 healthy, n2 answers 41.2% 5xx on route/api; both on version 2 */
	report1(g, "n1", 2, "g2a", start + 0.4, start + 12.5, 500, 0, 5);
	report1(g, "n2", 2, "g2b", start + 0.4, start + 12.5, 294, 206, 5);
	s.acked[0] = true;
	assert_int_equal(judge(g, &s, &reason), GATE_JUDGING);   /* n2 has not ACKed: not a member yet */
	assert_null(reason);
	s.acked[1] = true;
	assert_int_equal(judge(g, &s, &reason), GATE_FAIL);
	expect_in(reason, "gate: route/api on node n2: error rate 41.2% (206 of 500 requests, 12.1 s)");
	expect_in(reason, "vs baseline 0.0% (0 of 1530, 10.2 s, 3 nodes)");
	expect_in(reason, "above --gate-error-rate 0.01");
	free(reason);
	/* decided: it stays failed, without a second reason */
	assert_int_equal(judge(g, &s, &reason), GATE_FAIL);
	assert_null(reason);

	cJSON *doc = gate_doc(g, 7);
	assert_string_equal(str_at(doc, 0, "verdict"), "fail");
	assert_true(num_at(doc, 0, "route/api", "canary", "requests") == 1000);
	assert_true(num_at(doc, 0, "route/api", "canary", "errors") == 206);
	assert_true(num_at(doc, 0, "route/api", "canary", "nodes") == 2);
	assert_true(num_at(doc, 0, "route/api", "baseline", "requests") == 1530);
	assert_true(num_at(doc, 0, "route/api", "baseline", "nodes") == 3);
	cJSON_Delete(doc);
	/* another run shows no stage of this one */
	doc = gate_doc(g, 8);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "gate"), "stages")), 0);
	cJSON_Delete(doc);

	struct buf m = BUF_INIT;
	gate_metrics(g, &m);
	buf_putc(&m, 0);
	expect_in(m.data, "tether_gate_failures_total 1\n");
	expect_in(m.data, "tether_gate_low_traffic_total 0\n");
	expect_in(m.data, "tether_gate_error_rate{route=\"route/api\",group=\"canary\"} 0.206\n");
	expect_in(m.data, "tether_gate_error_rate{route=\"route/api\",group=\"baseline\"} 0\n");
	buf_release(&m);
	gate_free(g);
	release_cfg();
}

static void test_error_rate_multiple(void **state)
{
	(void)state;
	static const char *const members[] = { "n1" };
	char *reason;
	/* the baseline fails 1% of its requests; 2x allows up to 2% */
	struct gate *g = make_gate("staged", "2x", NULL, 100);
	struct stage s;
	double start = stage_begin(g, &s, 1, 0, 10, members, 1);
	baseline(g, start, 1000, 10, 5, 0);
	s.acked[0] = true;
	report1(g, "n1", 2, "g2", start + 0.2, start + 10, 485, 15, 5);   /* 3% */
	assert_int_equal(judge(g, &s, &reason), GATE_FAIL);
	expect_in(reason, "error rate 3.0% (15 of 500 requests");
	expect_in(reason, "vs baseline 1.0% (30 of 3000");
	expect_in(reason, "above --gate-error-rate 2x (limit 2.00%)");
	free(reason);
	gate_free(g);
	release_cfg();

	/* 1.5% under 2x of 1% passes the bake */
	g = make_gate("staged", "2x", NULL, 100);
	start = stage_begin(g, &s, 1, 0, 10, members, 1);
	baseline(g, start, 1000, 10, 5, 0);
	s.acked[0] = true;
	report1(g, "n1", 2, "g2", start + 0.2, start + 10, 985, 15, 5);
	assert_int_equal(judge(g, &s, &reason), GATE_JUDGING);
	s.v.baked = true;
	assert_int_equal(judge(g, &s, &reason), GATE_PASS);
	assert_null(reason);
	gate_free(g);
	release_cfg();

	/* a clean baseline: the floor (1/min-requests = 1%) times 2 allows
	 * 2%, not 0 */
	g = make_gate("staged", "2x", NULL, 100);
	start = stage_begin(g, &s, 1, 0, 10, members, 1);
	baseline(g, start, 1000, 0, 5, 0);
	s.acked[0] = true;
	report1(g, "n1", 2, "g2", start + 0.2, start + 10, 990, 10, 5);   /* 1%: under the floor's 2% */
	assert_int_equal(judge(g, &s, &reason), GATE_JUDGING);
	report1(g, "n1", 2, "g2", start + 0.2, start + 11, 1950, 50, 5);  /* 2.5% */
	assert_int_equal(judge(g, &s, &reason), GATE_FAIL);
	free(reason);
	gate_free(g);
	release_cfg();

	/* Nx without a baseline to compare with: skipped, noted, passes */
	g = make_gate("staged", "2x", NULL, 100);
	start = stage_begin(g, &s, 1, 0, 10, members, 1);
	s.acked[0] = true;
	report1(g, "n1", 2, "g2", start + 0.2, start + 10, 100, 400, 5);
	assert_int_equal(judge(g, &s, &reason), GATE_JUDGING);
	s.v.baked = true;
	assert_int_equal(judge(g, &s, &reason), GATE_PASS);
	cJSON *doc = gate_doc(g, 1);
	cJSON *route = cJSON_GetArrayItem(
		cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "gate"), "stages"), 0),
				    "routes"),
		0);
	expect_in(cJSON_GetObjectItem(route, "note")->valuestring, "the Nx gates skip this route");
	cJSON_Delete(doc);
	gate_free(g);
	release_cfg();
}

static void test_p99_ten_times_slower(void **state)
{
	(void)state;
	static const char *const members[] = { "n1" };
	char *reason;
	struct gate *g = make_gate("staged", NULL, "2x", 100);
	struct stage s;
	double start = stage_begin(g, &s, 3, 0, 10, members, 1);
	baseline(g, start, 600, 0, 5, 0);
	s.acked[0] = true;
	report1(g, "n1", 2, "g2", start + 0.2, start + 10, 500, 0, 50);
	assert_int_equal(judge(g, &s, &reason), GATE_FAIL);
	expect_in(reason, "gate: route/api on node n1: p99 ");
	expect_in(reason, "above --gate-latency-p99 2x");
	free(reason);
	cJSON *doc = gate_doc(g, 3);
	double cp = num_at(doc, 0, "route/api", "canary", "p99"), bp = num_at(doc, 0, "route/api", "baseline", "p99");
	assert_true(cp / bp > 6 && cp / bp < 15);
	cJSON_Delete(doc);
	gate_free(g);
	release_cfg();

	/* absolute: 50 ms above a 5 ms baseline fails, 30 ms does not */
	g = make_gate("staged", NULL, "40", 100);
	start = stage_begin(g, &s, 3, 0, 10, members, 1);
	baseline(g, start, 600, 0, 5, 0);
	s.acked[0] = true;
	report1(g, "n1", 2, "g2", start + 0.2, start + 10, 500, 0, 30);
	assert_int_equal(judge(g, &s, &reason), GATE_JUDGING);
	report1(g, "n1", 2, "g2b", start + 5, start + 10, 500, 0, 80);
	assert_int_equal(judge(g, &s, &reason), GATE_FAIL);
	expect_in(reason, "above --gate-latency-p99 40 (limit ");
	free(reason);
	gate_free(g);
	release_cfg();
}

/* ---- a good canary, and too little traffic ------------------------------- */

/* Every crossing is judged, the worst first: error rates before
 * latencies, each by how far over its limit; three shown, the rest
 * counted. (A route a little slow on a loaded machine must not hide the
 * route that answers 500.) */
static void test_reason_worst_first(void **state)
{
	(void)state;
	static const char *const members[] = { "n1" };
	char *reason;
	struct gate *g = make_gate("staged", "0.05", "150", 30);
	struct stage s;
	double start = stage_begin(g, &s, 4, 0, 25, members, 1);
	s.acked[0] = true;
	/* in the node's route order: a mildly slow route, a slower one, a
	 * route that answers 500, one with some errors, another mildly slow */
	struct counts c[] = { { "route/a-web", 100, 0, 170, 0 },
			      { "route/b-slow", 100, 0, 600, 0 },
			      { "route/c-api", 0, 100, 1, 1 },
			      { "route/d-some", 90, 10, 1, 1 },
			      { "route/e-web", 100, 0, 180, 0 } };
	report(g, "n1", 2, "g2", start + 0.2, start + 5, c, 5);
	assert_int_equal(judge(g, &s, &reason), GATE_FAIL);
	const char *api = strstr(reason, "gate: route/c-api on node n1: error rate 100.0%");
	const char *some = strstr(reason, "; also gate: route/d-some on node n1: error rate 10.0%");
	const char *slow = strstr(reason, "; also gate: route/b-slow on node n1: p99 ");
	if (api != reason || !some || !slow || !(some < slow))
		fail_msg("not worst first: %s", reason);
	expect_in(reason, "; and 2 more");
	assert_null(strstr(reason, "route/a-web"));
	free(reason);
	gate_free(g);
	release_cfg();
}

static void test_good_canary_passes(void **state)
{
	(void)state;
	static const char *const members[] = { "n1", "n2" };
	char *reason;
	struct gate *g = make_gate("staged", "0.01", "2x", 100);
	struct stage s;
	double start = stage_begin(g, &s, 2, 0, 10, members, 2);
	baseline(g, start, 800, 4, 5, 0);
	s.acked[0] = s.acked[1] = true;
	report1(g, "n1", 2, "g2", start + 0.2, start + 10, 497, 3, 6);
	report1(g, "n2", 2, "g2", start + 0.2, start + 10, 600, 2, 4);
	assert_int_equal(judge(g, &s, &reason), GATE_JUDGING);
	s.v.baked = true;
	assert_int_equal(judge(g, &s, &reason), GATE_PASS);
	assert_null(reason);
	cJSON *doc = gate_doc(g, 2);
	assert_string_equal(str_at(doc, 0, "verdict"), "pass");
	assert_null(str_at(doc, 0, "reason"));
	cJSON_Delete(doc);
	gate_free(g);
	release_cfg();
}

static void test_low_traffic(void **state)
{
	(void)state;
	static const char *const members[] = { "n1", "n2" };
	char *reason;
	struct gate *g = make_gate("staged", "0.01", NULL, 100);
	struct stage s;
	double start = stage_begin(g, &s, 4, 1, 50, members, 2);
	baseline(g, start, 800, 0, 5, 0);
	s.acked[0] = s.acked[1] = true;
	report1(g, "n1", 2, "g2", start + 0.2, start + 10, 500, 0, 5);
	/* n2: 60 requests, 30 of them errors: too few to judge, not a failure */
	struct counts c[2] = { { "route/api", 30, 30, 5, 5 }, { "route/web", 20, 0, 5, 5 } };
	report(g, "n2", 2, "g2", start + 0.2, start + 10, c, 2);
	assert_int_equal(judge(g, &s, &reason), GATE_JUDGING);
	s.v.baked = true;
	assert_int_equal(judge(g, &s, &reason), GATE_LOW_TRAFFIC);
	assert_null(reason);
	cJSON *doc = gate_doc(g, 4);
	assert_string_equal(str_at(doc, 0, "verdict"), "low_traffic");
	expect_in(str_at(doc, 0, "reason"), "node n2 served 80 requests in 9.8 s, fewer than --gate-min-requests 100");
	assert_true(num_at(doc, 0, "route/web", "canary", "requests") == 20);
	cJSON_Delete(doc);
	struct buf m = BUF_INIT;
	gate_metrics(g, &m);
	buf_putc(&m, 0);
	expect_in(m.data, "tether_gate_low_traffic_total 1\n");
	buf_release(&m);
	gate_free(g);
	release_cfg();

	/* a member that ACKed and counts, but whose reports are all of the
	 * version before, counts as too little (never reporting at all is
	 * unjudged: test_unjudged) */
	g = make_gate("staged", "0.01", NULL, 100);
	start = stage_begin(g, &s, 5, 0, 10, members, 2);
	s.acked[0] = s.acked[1] = true;
	s.v.baked = true;
	report1(g, "n1", 2, "g2", start + 0.2, start + 10, 500, 0, 5);
	report1(g, "n2", 1, "g1", start - 5, start + 10, 500, 0, 5);
	assert_int_equal(judge(g, &s, &reason), GATE_LOW_TRAFFIC);
	doc = gate_doc(g, 5);
	expect_in(str_at(doc, 0, "reason"), "too little traffic to judge: node n2 sent no report of version 2");
	cJSON_Delete(doc);
	gate_free(g);
	release_cfg();

	/* several: counted; and a stage the rollout left before its verdict
	 * (a NACK, an abort) shows "ended" once the run is over */
	static const char *const three[] = { "n1", "n2", "n3" };
	g = make_gate("staged", "0.01", NULL, 100);
	start = stage_begin(g, &s, 6, 0, 10, three, 3);
	s.acked[0] = s.acked[1] = s.acked[2] = true;
	report1(g, "n1", 2, "g2", start + 0.2, start + 10, 500, 0, 5);
	report1(g, "n2", 1, "g1", start - 5, start + 10, 500, 0, 5);
	report1(g, "n3", 2, "g2", start + 0.2, start + 10, 5, 0, 5);
	s.v.baked = true;
	assert_int_equal(judge(g, &s, &reason), GATE_LOW_TRAFFIC);
	doc = gate_doc(g, 6);
	expect_in(str_at(doc, 0, "reason"), "too little traffic to judge on 2 of 3 nodes: node n2 sent no report");
	cJSON_Delete(doc);
	s.v.stage = 1;
	s.v.baked = false;
	judge(g, &s, &reason);
	struct buf b = BUF_INIT;
	gate_json(g, 6, false, &b);
	buf_putc(&b, 0);
	expect_in(b.data, "\"stage\":1,\"percent\":10,\"verdict\":\"low_traffic\"");
	expect_in(b.data, "\"stage\":2,\"percent\":10,\"verdict\":\"ended\"");
	buf_release(&b);
	gate_free(g);
	release_cfg();
}

/* ---- unjudged: members without counts ---------------------------------------------- */

static struct gate *make_gate_unjudged(const char *unjudged)
{
	char err[256] = "x";
	plane_config_defaults(&cfg);
	free(cfg.rollout);
	cfg.rollout = xstrdup("staged");
	cfg.gate_error_rate = xstrdup("0.01");
	cfg.gate_unjudged = unjudged ? xstrdup(unjudged) : NULL;
	struct gate_options go = plane_gate_options(&cfg);
	struct gate *g = gate_new(&go, err, sizeof(err));
	if (!g)
		fail_msg("gate_new: %s", err);
	gate_set_judge_interval(g, 0);
	return g;
}

static void expect_metric(struct gate *g, const char *want)
{
	struct buf m = BUF_INIT;
	gate_metrics(g, &m);
	buf_putc(&m, 0);
	expect_in(m.data, want);
	buf_release(&m);
}

/* Stage 1 of rollout run begun with members names, every one ACKed. */
static double stage_acked(struct gate *g, struct stage *s, uint64_t run, const char *const *names, size_t n)
{
	double start = stage_begin(g, s, run, 0, 10, names, n);
	for (size_t i = 0; i < n; i++)
		s->acked[i] = true;
	return start;
}

/* Stage 1 of rollout run, as the rollout's JSON shows it, has reason want. */
static void expect_reason(struct gate *g, uint64_t run, const char *want)
{
	cJSON *doc = gate_doc(g, run);
	assert_string_equal(str_at(doc, 0, "reason"), want);
	cJSON_Delete(doc);
}

static void test_unjudged(void **state)
{
	(void)state;
	static const char *const three[] = { "n1", "n2", "n3" };
	char *reason;
	struct stage s;
	/* hold (the default): n2 says it does not count, n3 never reported */
	struct gate *g = make_gate_unjudged(NULL);
	double start = stage_acked(g, &s, 7, three, 3);
	report1(g, "n1", 2, "g2", start + 0.2, start + 10, 500, 0, 5);
	gate_counts(g, "n2", false, "started with --traffic-listen off");
	/* not before the bake is over */
	assert_int_equal(judge(g, &s, &reason), GATE_JUDGING);
	s.v.baked = true;
	assert_int_equal(judge(g, &s, &reason), GATE_UNJUDGED);
	assert_null(reason);
	cJSON *doc = gate_doc(g, 7);
	assert_string_equal(str_at(doc, 0, "verdict"), "unjudged");
	assert_string_equal(str_at(doc, 0, "reason"), "held: unjudged: n2, n3 do not count traffic (n2: started with "
			    "--traffic-listen off; n3: sent no traffic report)");
	cJSON_Delete(doc);
	struct buf b = BUF_INIT;
	gate_json(g, 7, true, &b);
	buf_putc(&b, 0);
	expect_in(b.data, "\"unjudged\":\"hold\"");
	expect_in(b.data, "\"verdict\":\"unjudged\",\"held\":true");
	buf_release(&b);
	expect_metric(g, "tether_gate_unjudged_total 1\n");
	/* held: judged again, counted once */
	assert_int_equal(judge(g, &s, &reason), GATE_UNJUDGED);
	/* n3 reports (it counts, few requests): only n2 holds it now */
	report1(g, "n3", 2, "g2", start + 0.2, start + 10, 5, 0, 5);
	assert_int_equal(judge(g, &s, &reason), GATE_UNJUDGED);
	expect_reason(g, 7, "held: unjudged: n2 does not count traffic (started with --traffic-listen off)");
	expect_metric(g, "tether_gate_unjudged_total 1\n");
	/* n2 restarted counting (its report says so, without an ACK): judged,
	 * passes (flagged: n3 saw few) */
	report1(g, "n2", 2, "g2b", start + 1, start + 10, 300, 0, 5);
	assert_int_equal(judge(g, &s, &reason), GATE_LOW_TRAFFIC);
	b = (struct buf)BUF_INIT;
	gate_json(g, 7, true, &b);
	buf_putc(&b, 0);
	expect_in(b.data, "\"verdict\":\"low_traffic\",\"held\":false");
	buf_release(&b);
	gate_free(g);
	release_cfg();

	/* a member that counted, then stops counting mid-stage (restarted
	 * with --traffic-listen off, holding its version: its connection
	 * says so, no ACK): unjudged, not judged on what it counted before */
	g = make_gate_unjudged(NULL);
	start = stage_acked(g, &s, 12, three, 3);
	for (int i = 0; i < 3; i++)
		report1(g, three[i], 2, "g2", start + 0.2, start + 5, 500, 0, 5);
	gate_counts(g, "n3", false, "started with --traffic-listen off");
	s.v.baked = true;
	assert_int_equal(judge(g, &s, &reason), GATE_UNJUDGED);
	expect_reason(g, 12, "held: unjudged: n3 does not count traffic (started with --traffic-listen off)");
	gate_free(g);
	release_cfg();

	/* a crossing still fails the stage, unjudged members or not */
	g = make_gate_unjudged(NULL);
	start = stage_acked(g, &s, 8, three, 3);
	s.v.baked = true;
	report1(g, "n1", 2, "g2", start + 0.2, start + 10, 300, 200, 5);
	assert_int_equal(judge(g, &s, &reason), GATE_FAIL);
	expect_in(reason, "gate: route/api on node n1");
	free(reason);
	gate_free(g);
	release_cfg();

	/* revert: the rollout gets the reason */
	g = make_gate_unjudged("revert");
	start = stage_acked(g, &s, 9, three, 3);
	s.v.baked = true;
	for (int i = 0; i < 3; i++)
		gate_counts(g, three[i], false, "consumer files does not count traffic");
	assert_int_equal(judge(g, &s, &reason), GATE_FAIL);
	assert_string_equal(reason, "unjudged: n1, n2, n3 do not count traffic (consumer files does not count traffic)");
	free(reason);
	expect_metric(g, "tether_gate_unjudged_total 1\n");
	expect_metric(g, "tether_gate_failures_total 0\n");
	gate_free(g);
	release_cfg();

	/* pass: today's behaviour, flagged */
	g = make_gate_unjudged("pass");
	start = stage_acked(g, &s, 10, three, 3);
	s.v.baked = true;
	report1(g, "n1", 2, "g2", start + 0.2, start + 10, 500, 0, 5);
	report1(g, "n2", 2, "g2", start + 0.2, start + 10, 500, 0, 5);
	assert_int_equal(judge(g, &s, &reason), GATE_PASS);
	assert_null(reason);
	doc = gate_doc(g, 10);
	assert_string_equal(str_at(doc, 0, "verdict"), "unjudged");
	expect_in(str_at(doc, 0, "reason"), "unjudged: n3 does not count traffic (sent no traffic report); passed "
		  "(--gate-unjudged pass)");
	cJSON_Delete(doc);
	assert_int_equal(judge(g, &s, &reason), GATE_PASS);
	gate_free(g);
	release_cfg();

	/* more than five: the first five named, and how many more */
	static const char *const seven[] = { "a", "b", "c", "d", "e", "f", "g" };
	g = make_gate_unjudged(NULL);
	stage_acked(g, &s, 11, seven, 7);
	s.v.baked = true;
	assert_int_equal(judge(g, &s, &reason), GATE_UNJUDGED);
	expect_reason(g, 11, "held: unjudged: a, b, c, d, e and 2 more do not count traffic (sent no traffic report)");
	gate_free(g);
	release_cfg();
}

/* ---- windows ---------------------------------------------------------------- */

static void test_marks_count_after_the_stage_start(void **state)
{
	(void)state;
	static const char *const members[] = { "n1" };
	char *reason;
	struct gate *g = make_gate("staged", "0.05", NULL, 100);
	/* before the stage: the baseline failed half its requests (an old
	 * incident, in its cumulative counters) */
	double early = wall();
	report1(g, "b1", 1, "g1", early - 3600, early, 5000, 5000, 5);
	usleep(5000);
	struct stage s;
	double start = stage_begin(g, &s, 9, 0, 10, members, 1);
	/* after it: the first report is the mark, the next one counts 1000
	 * clean requests */
	report1(g, "b1", 1, "g1", early - 3600, start + 1, 5100, 5000, 5);
	report1(g, "b1", 1, "g1", early - 3600, start + 11, 6100, 5000, 5);
	s.acked[0] = true;
	/* the canary fails 30%: against the whole counters (50%) it would
	 * pass; against the window (0%) it fails */
	report1(g, "n1", 2, "g2", start + 0.5, start + 11, 350, 150, 5);
	assert_int_equal(judge(g, &s, &reason), GATE_FAIL);
	expect_in(reason, "vs baseline 0.0% (0 of 1000, 10.0 s, 1 node)");
	free(reason);
	gate_free(g);
	release_cfg();

	/* a report seen after the start but before the gate learnt of the
	 * stage is the mark all the same */
	g = make_gate("staged", "0.05", NULL, 100);
	start = wall();
	report1(g, "b1", 1, "g1", start - 3600, start + 1, 5100, 5000, 5);
	stage_init(&s, 9, 0, 10, start, members, 1);
	judge(g, &s, &reason);
	report1(g, "b1", 1, "g1", start - 3600, start + 11, 6100, 5000, 5);
	s.acked[0] = true;
	report1(g, "n1", 2, "g2", start + 0.5, start + 11, 350, 150, 5);
	assert_int_equal(judge(g, &s, &reason), GATE_FAIL);
	expect_in(reason, "(0 of 1000, 10.0 s, 1 node)");
	free(reason);
	gate_free(g);
	release_cfg();

	/* the next stage marks again: what the baseline served during the
	 * first stage no longer counts */
	static const char *const two[] = { "n1", "n2" };
	g = make_gate("staged", "0.05", NULL, 100);
	start = stage_begin(g, &s, 9, 0, 10, members, 1);
	report1(g, "b1", 1, "g1", start - 3600, start + 1, 1000, 0, 5);
	report1(g, "b1", 1, "g1", start - 3600, start + 5, 2000, 0, 5);
	usleep(5000);
	double start2 = wall();
	stage_init(&s, 9, 1, 50, start2, two, 2);
	judge(g, &s, &reason);
	report1(g, "b1", 1, "g1", start - 3600, start2 + 6, 2000, 100, 5);
	report1(g, "b1", 1, "g1", start - 3600, start2 + 14, 2500, 600, 5);
	cJSON *doc = gate_doc(g, 9);
	s.acked[0] = true;
	report1(g, "n1", 2, "g2", start + 0.5, start2 + 14, 1000, 0, 5);
	judge(g, &s, &reason);
	cJSON_Delete(doc);
	doc = gate_doc(g, 9);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "gate"), "stages")), 2);
	assert_true(num_at(doc, 1, "route/api", "baseline", "requests") == 1000);
	assert_true(num_at(doc, 1, "route/api", "baseline", "errors") == 500);
	cJSON_Delete(doc);
	gate_free(g);
	release_cfg();
}

/* A report older than the node's last (another replica's records
 * replayed) is ignored: its lower counters are not a restart. */
static void test_older_report_ignored(void **state)
{
	(void)state;
	static const char *const members[] = { "n1" };
	char *reason;
	struct gate *g = make_gate("staged", "0.05", NULL, 100);
	struct stage s;
	double start = stage_begin(g, &s, 16, 0, 10, members, 1);
	s.acked[0] = true;
	report1(g, "n1", 2, "g2", start + 0.2, start + 10, 500, 0, 5);
	assert_int_equal(judge(g, &s, &reason), GATE_JUDGING);
	report1(g, "n1", 2, "g2", start + 0.2, start + 5, 200, 100, 5);   /* taken, a third would be errors */
	assert_int_equal(judge(g, &s, &reason), GATE_JUDGING);
	assert_null(reason);
	cJSON *doc = gate_doc(g, 16);
	assert_true(num_at(doc, 0, "route/api", "canary", "requests") == 500);
	cJSON_Delete(doc);
	/* an agent whose clock stepped back still counts up: taken */
	report1(g, "n1", 2, "g2", start + 0.2, start + 6, 700, 0, 5);
	judge(g, &s, &reason);
	doc = gate_doc(g, 16);
	assert_true(num_at(doc, 0, "route/api", "canary", "requests") == 700);
	cJSON_Delete(doc);
	gate_free(g);
	release_cfg();
}

static void test_generation_restart(void **state)
{
	(void)state;
	static const char *const members[] = { "n1" };
	char *reason;
	struct gate *g = make_gate("staged", "0.01", NULL, 100);
	struct stage s;
	double start = stage_begin(g, &s, 11, 0, 10, members, 1);
	baseline(g, start, 800, 0, 5, 0);
	s.acked[0] = true;
	/* n1's first generation of version 2 answers errors, but fewer than
	 * min-requests; then it goes live again (another generation) clean */
	report1(g, "n1", 2, "g2", start + 0.2, start + 3, 0, 60, 5);
	assert_int_equal(judge(g, &s, &reason), GATE_JUDGING);
	report1(g, "n1", 2, "g2-again", start + 4, start + 10, 500, 0, 5);
	assert_int_equal(judge(g, &s, &reason), GATE_JUDGING);
	cJSON *doc = gate_doc(g, 11);
	assert_true(num_at(doc, 0, "route/api", "canary", "requests") == 500);
	assert_true(num_at(doc, 0, "route/api", "canary", "errors") == 0);
	cJSON_Delete(doc);
	/* the same generation id counting again from zero (the agent
	 * restarted): whole, from the lower counters */
	report1(g, "n1", 2, "g2-again", start + 4, start + 12, 200, 0, 5);
	assert_int_equal(judge(g, &s, &reason), GATE_JUDGING);
	doc = gate_doc(g, 11);
	assert_true(num_at(doc, 0, "route/api", "canary", "requests") == 200);
	cJSON_Delete(doc);
	report1(g, "n1", 2, "g2-again", start + 4, start + 14, 400, 100, 5);
	assert_int_equal(judge(g, &s, &reason), GATE_FAIL);
	expect_in(reason, "(100 of 500 requests");
	free(reason);
	gate_free(g);
	release_cfg();

	/* a baseline node marked at 10000 that counts again from zero under
	 * the same generation id: counted whole from then on, also once its
	 * counters pass the old mark */
	g = make_gate("staged", "0.01", NULL, 100);
	start = stage_begin(g, &s, 13, 0, 10, members, 1);
	report1(g, "b1", 1, "g1", start - 3600, start + 1, 10000, 0, 5);
	report1(g, "b1", 1, "g1", start - 3600, start + 2, 10100, 0, 5);
	report1(g, "b1", 1, "g1", start + 3, start + 4, 200, 0, 5);
	report1(g, "b1", 1, "g1", start + 3, start + 9, 10500, 0, 5);
	judge(g, &s, &reason);
	doc = gate_doc(g, 13);
	assert_true(num_at(doc, 0, "route/api", "baseline", "requests") == 10500);
	cJSON_Delete(doc);
	gate_free(g);
	release_cfg();
}

static void test_last_stage_kept_baseline(void **state)
{
	(void)state;
	static const char *const first[] = { "n1" };
	static const char *const all[] = { "n1", "b1", "b2", "b3" };
	char *reason;
	struct gate *g = make_gate("staged", "2x", NULL, 100);
	struct stage s;
	double start = stage_begin(g, &s, 12, 0, 25, first, 1);
	baseline(g, start, 1000, 10, 5, 0);   /* 1% */
	s.acked[0] = true;
	s.v.baked = true;
	report1(g, "n1", 2, "g2", start + 0.2, start + 10, 995, 5, 5);
	assert_int_equal(judge(g, &s, &reason), GATE_PASS);

	/* the last stage: everyone is on version 2, no baseline is left */
	usleep(5000);
	double start2 = wall();
	stage_init(&s, 12, 1, 100, start2, all, 4);
	judge(g, &s, &reason);
	for (int i = 0; i < 4; i++)
		s.acked[i] = true;
	report1(g, "n1", 2, "g2", start + 0.2, start2 + 10, 1995, 5, 5);
	report1(g, "b1", 2, "g2", start2 + 0.1, start2 + 10, 990, 10, 5);
	report1(g, "b2", 2, "g2", start2 + 0.1, start2 + 10, 995, 5, 5);
	assert_int_equal(judge(g, &s, &reason), GATE_JUDGING);
	report1(g, "b3", 2, "g2", start2 + 0.1, start2 + 10, 900, 100, 5);   /* 10% against 1% kept */
	assert_int_equal(judge(g, &s, &reason), GATE_FAIL);
	expect_in(reason, "route/api on node b3: error rate 10.0%");
	expect_in(reason, "vs baseline 1.0% (30 of 3000, 10.2 s, 3 nodes, kept from stage 1)");
	free(reason);
	cJSON *doc = gate_doc(g, 12);
	cJSON *st = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "gate"), "stages"), 1);
	assert_int_equal(cJSON_GetObjectItem(st, "baseline_stage")->valueint, 1);
	assert_true(num_at(doc, 1, "route/api", "baseline", "requests") == 3000);
	cJSON_Delete(doc);
	gate_free(g);
	release_cfg();
}

/* Reports alone are judged again at most every interval; an ACK at once. */
static void test_judge_interval(void **state)
{
	(void)state;
	static const char *const members[] = { "n1", "n2" };
	char *reason;
	struct gate *g = make_gate("staged", "0.01", NULL, 100);
	gate_set_judge_interval(g, 300);
	struct stage s;
	double start = stage_begin(g, &s, 14, 0, 10, members, 2);
	baseline(g, start, 800, 0, 5, 0);
	s.acked[0] = true;
	report1(g, "n1", 2, "g2", start + 0.2, start + 5, 500, 0, 5);
	assert_int_equal(judge(g, &s, &reason), GATE_JUDGING);   /* an ACK: judged */
	report1(g, "n1", 2, "g2", start + 0.2, start + 6, 500, 100, 5);
	assert_int_equal(judge(g, &s, &reason), GATE_JUDGING);   /* a report alone, too soon */
	usleep(350 * 1000);
	assert_int_equal(judge(g, &s, &reason), GATE_FAIL);
	expect_in(reason, "node n1: error rate 16.7%");
	free(reason);
	gate_free(g);
	release_cfg();

	g = make_gate("staged", "0.01", NULL, 100);
	gate_set_judge_interval(g, 60000);
	start = stage_begin(g, &s, 15, 0, 10, members, 2);
	baseline(g, start, 800, 0, 5, 0);
	s.acked[0] = true;
	report1(g, "n1", 2, "g2", start + 0.2, start + 5, 500, 0, 5);
	assert_int_equal(judge(g, &s, &reason), GATE_JUDGING);
	report1(g, "n2", 2, "g2", start + 0.2, start + 5, 400, 100, 5);
	assert_int_equal(judge(g, &s, &reason), GATE_JUDGING);   /* n2 has not ACKed */
	s.acked[1] = true;
	assert_int_equal(judge(g, &s, &reason), GATE_FAIL);      /* its ACK: at once */
	free(reason);
	gate_free(g);
	release_cfg();
}

/* ---- options ------------------------------------------------------------------ */

static void expect_limit(const char *s, bool rate, enum gate_form form, double value)
{
	struct gate_limit l;
	char err[256] = "";
	if (gate_parse_limit("gate-x", s, rate, &l, err, sizeof(err)) != 0)
		fail_msg("'%s' refused: %s", s, err);
	assert_int_equal(l.form, form);
	assert_true(l.value == value);
}

static void expect_bad_limit(const char *s, bool rate, const char *want)
{
	struct gate_limit l;
	char err[256] = "";
	if (gate_parse_limit("gate-x", s, rate, &l, err, sizeof(err)) != -1)
		fail_msg("'%s' accepted", s ? s : "(null)");
	expect_in(err, "--gate-x: ");
	expect_in(err, want);
}

static void test_options(void **state)
{
	(void)state;
	expect_limit("0.01", true, GATE_ABS, 0.01);
	expect_limit("0", true, GATE_ABS, 0);
	expect_limit("1", true, GATE_ABS, 1);
	expect_limit("2x", true, GATE_MULT, 2);
	expect_limit("1.5x", true, GATE_MULT, 1.5);
	expect_limit("1x", false, GATE_MULT, 1);
	expect_limit("250", false, GATE_ABS, 250);
	expect_limit("0.5", false, GATE_ABS, 0.5);
	expect_bad_limit("1.5", true, "not a rate between 0 and 1");
	expect_bad_limit("0.5x", true, "1x to 1000x");
	expect_bad_limit("2000x", false, "1x to 1000x");
	expect_bad_limit("x", true, "is not a value");
	expect_bad_limit("", true, "is not a value");
	expect_bad_limit(NULL, true, "is not a value");
	expect_bad_limit("-1", false, "is not a value");
	expect_bad_limit("1e3", false, "is not a value");
	expect_bad_limit("nan", true, "is not a value");
	expect_bad_limit("0.01.2", true, "is not a value");
	expect_bad_limit("2 x", true, "is not a value");
	expect_bad_limit("2X", true, "is not a value");
	expect_bad_limit("99999999", false, "at most 3600000 ms");

	char err[256];
	/* none: no gate, no error */
	plane_config_defaults(&cfg);
	err[0] = 'x';
	assert_null(gate_new(go_of(&cfg), err, sizeof(err)));
	assert_string_equal(err, "");
	assert_false(gate_wants_reports(NULL));
	gate_report(NULL, "n1", NULL);
	/* any gate option without --rollout staged */
	cfg.gate_error_rate = xstrdup("0.01");
	assert_null(gate_new(go_of(&cfg), err, sizeof(err)));
	expect_in(err, "--gate-error-rate needs --rollout staged");
	assert_int_equal(gate_check_config(go_of(&cfg), err, sizeof(err)), -1);
	free(cfg.gate_error_rate);
	cfg.gate_error_rate = NULL;
	cfg.gate_min_requests = 10;
	assert_int_equal(gate_check_config(go_of(&cfg), err, sizeof(err)), -1);
	expect_in(err, "--gate-min-requests needs --rollout staged");
	free(cfg.rollout);
	cfg.rollout = xstrdup("staged");
	assert_int_equal(gate_check_config(go_of(&cfg), err, sizeof(err)), -1);
	expect_in(err, "--gate-min-requests needs a gate");
	/* a malformed value names its option */
	cfg.gate_latency_p99 = xstrdup("fast");
	assert_int_equal(gate_check_config(go_of(&cfg), err, sizeof(err)), -1);
	expect_in(err, "--gate-latency-p99: 'fast' is not a value");
	free(cfg.gate_latency_p99);
	cfg.gate_latency_p99 = xstrdup("2x");
	assert_int_equal(gate_check_config(go_of(&cfg), err, sizeof(err)), 0);
	/* --gate-unjudged: one of three, and only with a gate */
	cfg.gate_unjudged = xstrdup("ignore");
	assert_int_equal(gate_check_config(go_of(&cfg), err, sizeof(err)), -1);
	expect_in(err, "--gate-unjudged: 'ignore' is not pass, hold or revert");
	free(cfg.gate_unjudged);
	cfg.gate_unjudged = xstrdup("revert");
	assert_int_equal(gate_check_config(go_of(&cfg), err, sizeof(err)), 0);
	/* a relay judges nothing */
	cfg.upstream = xstrdup("http://127.0.0.1:1");
	assert_int_equal(gate_check_config(go_of(&cfg), err, sizeof(err)), -1);
	expect_in(err, "a relay");
	free(cfg.upstream);
	cfg.upstream = NULL;
	/* and through the plane's own checks */
	assert_int_equal(plane_config_check(&cfg, err, sizeof(err)), 0);
	free(cfg.rollout);
	cfg.rollout = xstrdup("immediate");
	assert_int_equal(plane_config_check(&cfg, err, sizeof(err)), -1);
	expect_in(err, "needs --rollout staged");
	release_cfg();
	plane_config_defaults(&cfg);
	cfg.gate_unjudged = xstrdup("hold");
	assert_int_equal(gate_check_config(go_of(&cfg), err, sizeof(err)), -1);
	expect_in(err, "--gate-unjudged needs a gate");
	release_cfg();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_error_rate_absolute),
		cmocka_unit_test(test_unjudged),
		cmocka_unit_test(test_error_rate_multiple),
		cmocka_unit_test(test_p99_ten_times_slower),
		cmocka_unit_test(test_reason_worst_first),
		cmocka_unit_test(test_good_canary_passes),
		cmocka_unit_test(test_low_traffic),
		cmocka_unit_test(test_marks_count_after_the_stage_start),
		cmocka_unit_test(test_older_report_ignored),
		cmocka_unit_test(test_generation_restart),
		cmocka_unit_test(test_last_stage_kept_baseline),
		cmocka_unit_test(test_judge_interval),
		cmocka_unit_test(test_options),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
