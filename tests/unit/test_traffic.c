/* test_traffic.c: unit tests of common/traffic.c: buckets and quantiles,
 * route names and the route limit, the JSON round trip and its refusals,
 * windows (diff, a restarted generation), merges, and what is a replayed
 * report. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "traffic.h"

static struct traffic_route *route(struct traffic *t, const char *name)
{
	return traffic_route(t, name, strlen(name));
}

static void test_buckets(void **state)
{
	(void)state;
	assert_int_equal(traffic_bucket(0), 0);
	assert_int_equal(traffic_bucket(-3), 0);
	assert_int_equal(traffic_bucket(NAN), 0);
	assert_int_equal(traffic_bucket(0.1), 0);
	assert_int_equal(traffic_bucket(0.11), 1);
	assert_int_equal(traffic_bucket(0.14), 1);
	assert_int_equal(traffic_bucket(1e9), TRAFFIC_BUCKETS - 1);
	/* every bucket's bound falls in it, a little more in the next */
	for (size_t i = 0; i + 1 < TRAFFIC_BUCKETS; i++) {
		assert_int_equal(traffic_bucket(traffic_bucket_ms(i)), i);
		assert_int_equal(traffic_bucket(traffic_bucket_ms(i) * 1.01), i + 1);
	}
	assert_true(traffic_bucket_ms(TRAFFIC_BUCKETS - 2) > 10000);
}

static void test_quantiles(void **state)
{
	(void)state;
	uint64_t h[TRAFFIC_BUCKETS] = { 0 };
	assert_true(traffic_quantile(h, 0.99) == 0);
	/* 990 fast (2 ms), 10 slow (200 ms): p50 near 2, p99 near 2, p99.9 slow */
	h[traffic_bucket(2)] = 990;
	h[traffic_bucket(200)] = 10;
	double p50 = traffic_quantile(h, 0.5), p99 = traffic_quantile(h, 0.99), p999 = traffic_quantile(h, 0.999);
	assert_true(p50 > 1.4 && p50 <= 2.2);
	assert_true(p99 > 1.4 && p99 <= 2.2);
	assert_true(p999 > 140 && p999 <= 280);
	/* ten times slower is seen as about ten times */
	uint64_t s[TRAFFIC_BUCKETS] = { 0 };
	s[traffic_bucket(20)] = 1000;
	double r = traffic_quantile(s, 0.99) / traffic_quantile(h, 0.99);
	assert_true(r > 6 && r < 15);
}

static void test_observe_and_names(void **state)
{
	(void)state;
	struct traffic t;
	traffic_init(&t);
	struct traffic_route *a = route(&t, "route/api");
	assert_non_null(a);
	traffic_observe(a, 200, 1.0);
	traffic_observe(a, 503, 1.0);
	traffic_observe(a, 404, 1.0);
	traffic_observe(a, 600, 1.0);
	assert_int_equal(a->requests, 4);
	assert_int_equal(a->errors, 1);
	assert_ptr_equal(route(&t, "route/api"), a);
	/* a prefix is another route */
	assert_true(route(&t, "route/ap") != a);
	assert_null(route(&t, ""));
	assert_null(route(&t, "route/a b"));
	assert_null(route(&t, "route/\"x"));
	char longname[TRAFFIC_ROUTE_LEN + 1];
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	assert_null(route(&t, longname));
	longname[TRAFFIC_ROUTE_LEN - 1] = '\0';
	assert_non_null(route(&t, longname));
	for (int i = 0; i < 2 * TRAFFIC_ROUTES_MAX; i++) {
		char n[32];
		snprintf(n, sizeof(n), "route/r%d", i);
		route(&t, n);
	}
	assert_int_equal(t.n, TRAFFIC_ROUTES_MAX);
	assert_null(route(&t, "route/one-more"));
	assert_non_null(route(&t, "route/api"));
	traffic_release(&t);
}

static void test_json_round_trip(void **state)
{
	(void)state;
	struct traffic t, u;
	traffic_init(&t);
	traffic_init(&u);
	t.version = 42;
	snprintf(t.gen, sizeof(t.gen), "g-abc123");
	t.since = 1000.5;
	t.until = 1010.25;
	t.dropped = 3;
	struct traffic_route *a = route(&t, "route/api"), *b = route(&t, "route/web");
	for (int i = 0; i < 100; i++)
		traffic_observe(a, i < 7 ? 500 : 200, 1.0 + i);
	traffic_observe(b, 200, 0.5);
	b->approx = true;
	struct buf j = BUF_INIT;
	traffic_to_json(&t, &j);
	char err[256];
	cJSON *doc = json_decode(j.data, j.len, NULL, err, sizeof(err));
	assert_non_null(doc);
	assert_int_equal(traffic_from_json(doc, &u, err, sizeof(err)), 0);
	assert_int_equal(u.version, 42);
	assert_string_equal(u.gen, "g-abc123");
	assert_true(fabs(u.since - 1000.5) < 1e-6 && fabs(u.until - 1010.25) < 1e-6);
	assert_int_equal(u.dropped, 3);
	assert_int_equal(u.n, 2);
	assert_string_equal(u.routes[0].name, "route/api");
	assert_int_equal(u.routes[0].requests, 100);
	assert_int_equal(u.routes[0].errors, 7);
	assert_memory_equal(u.routes[0].hist, a->hist, sizeof(a->hist));
	assert_false(u.routes[0].approx);
	assert_true(u.routes[1].approx);
	/* the same bytes again */
	struct buf k = BUF_INIT;
	traffic_to_json(&u, &k);
	assert_int_equal(j.len, k.len);
	assert_memory_equal(j.data, k.data, j.len);
	cJSON_Delete(doc);
	buf_release(&j);
	buf_release(&k);
	traffic_release(&t);
	traffic_release(&u);
}

static void refuse(const char *text, const char *want)
{
	char err[300];
	struct traffic t;
	traffic_init(&t);
	cJSON *doc = json_decode(text, strlen(text), NULL, err, sizeof(err));
	assert_non_null(doc);
	assert_int_equal(traffic_from_json(doc, &t, err, sizeof(err)), -1);
	if (!strstr(err, want))
		fail_msg("'%s': error '%s' lacks '%s'", text, err, want);
	cJSON_Delete(doc);
	traffic_release(&t);
}

#define OK_HEAD "{\"version\":1,\"since\":1,\"until\":2,\"routes\":"

static void test_json_refusals(void **state)
{
	(void)state;
	refuse("[]", "must be an object");
	refuse("{\"since\":1,\"until\":2,\"routes\":[]}", "traffic.version");
	refuse("{\"version\":-1,\"since\":1,\"until\":2,\"routes\":[]}", "traffic.version");
	refuse("{\"version\":1,\"since\":3,\"until\":2,\"routes\":[]}", "since <= until");
	refuse("{\"version\":1,\"since\":\"1\",\"until\":2,\"routes\":[]}", "since");
	refuse("{\"version\":1,\"gen\":\"a b\",\"since\":1,\"until\":2,\"routes\":[]}", "traffic.gen");
	refuse("{\"version\":1,\"gen\":7,\"since\":1,\"until\":2,\"routes\":[]}", "traffic.gen");
	refuse(OK_HEAD "{}}", "traffic.routes must be an array");
	refuse(OK_HEAD "[1]}", "routes[0] must be an object");
	refuse(OK_HEAD "[{\"route\":\"../x y\",\"requests\":1,\"errors\":0,\"hist\":[]}]}", "routes[0].route");
	refuse(OK_HEAD "[{\"route\":\"r\",\"requests\":1,\"errors\":2,\"hist\":[]}]}", "exceed requests");
	refuse(OK_HEAD "[{\"route\":\"r\",\"requests\":1.5,\"errors\":0,\"hist\":[]}]}", "non-negative integers");
	refuse(OK_HEAD "[{\"route\":\"r\",\"requests\":1,\"errors\":0,\"hist\":[[40,1]]}]}", "hist[0]");
	refuse(OK_HEAD "[{\"route\":\"r\",\"requests\":1,\"errors\":0,\"hist\":[[1]]}]}", "hist[0]");
	refuse(OK_HEAD "[{\"route\":\"r\",\"requests\":1,\"errors\":0,\"hist\":[[1,1],[1,0]]}]}", "twice");
	refuse(OK_HEAD "[{\"route\":\"r\",\"requests\":1,\"errors\":0,\"hist\":[[1,1],[2,1]]}]}", "more than");
	refuse(OK_HEAD "[{\"route\":\"r\",\"requests\":1,\"errors\":0,\"hist\":[],\"approx\":1}]}", "approx");
	refuse(OK_HEAD "[{\"route\":\"r\",\"requests\":1,\"errors\":0,\"hist\":[]},"
		       "{\"route\":\"r\",\"requests\":1,\"errors\":0,\"hist\":[]}]}",
	       "appears twice");
	refuse("{\"version\":1,\"since\":1,\"until\":2,\"dropped\":\"x\",\"routes\":[]}", "dropped");
}

/* An older report of the same generation and version, with no more
 * requests, is a replay; a later one, another generation or version, or
 * an earlier one that counts more (an agent clock stepped back) is not. */
static void test_replayed(void **state)
{
	(void)state;
	struct traffic t;
	traffic_init(&t);
	snprintf(t.gen, sizeof(t.gen), "g2");
	t.version = 7;
	t.until = 100;
	struct traffic_route *r = traffic_route(&t, "route/api", 9);
	for (int i = 0; i < 40; i++)
		traffic_observe(r, 200, 3);
	assert_true(traffic_replayed(&t, "g2", 7, 105, 50));    /* earlier, fewer */
	assert_true(traffic_replayed(&t, "g2", 7, 105, 40));    /* earlier, as many */
	assert_false(traffic_replayed(&t, "g2", 7, 100, 50));   /* not earlier */
	assert_false(traffic_replayed(&t, "g2", 7, 95, 50));    /* later */
	assert_false(traffic_replayed(&t, "g2", 7, 105, 30));   /* earlier but counts more: a clock stepped back */
	assert_false(traffic_replayed(&t, "g1", 7, 105, 50));   /* another generation */
	assert_false(traffic_replayed(&t, "g2", 6, 105, 50));   /* another version */
	traffic_release(&t);
}

static void test_diff_and_merge(void **state)
{
	(void)state;
	struct traffic base, now, d, acc;
	traffic_init(&base);
	traffic_init(&now);
	traffic_init(&d);
	traffic_init(&acc);
	base.version = now.version = 5;
	snprintf(base.gen, sizeof(base.gen), "g1");
	snprintf(now.gen, sizeof(now.gen), "g1");
	base.since = now.since = 100;
	base.until = 110;
	now.until = 120;
	for (int i = 0; i < 10; i++)
		traffic_observe(route(&base, "route/a"), 200, 1);
	for (int i = 0; i < 10; i++)
		traffic_observe(route(&now, "route/a"), 200, 1);
	for (int i = 0; i < 5; i++)
		traffic_observe(route(&now, "route/a"), 502, 30);
	traffic_observe(route(&now, "route/b"), 200, 1);
	traffic_diff(&now, &base, &d);
	assert_true(d.since == 110 && d.until == 120);
	assert_int_equal(d.n, 2);
	assert_int_equal(d.routes[0].requests, 5);
	assert_int_equal(d.routes[0].errors, 5);
	assert_int_equal(d.routes[0].hist[traffic_bucket(1)], 0);
	assert_int_equal(d.routes[0].hist[traffic_bucket(30)], 5);
	assert_int_equal(d.routes[1].requests, 1);

	/* another generation: now counts whole */
	snprintf(now.gen, sizeof(now.gen), "g2");
	traffic_diff(&now, &base, &d);
	assert_int_equal(d.routes[0].requests, 15);
	assert_true(d.since == 100);
	/* counters below the base: restarted too */
	snprintf(now.gen, sizeof(now.gen), "g1");
	route(&base, "route/a")->requests = 1000;
	traffic_diff(&now, &base, &d);
	assert_int_equal(d.routes[0].requests, 15);

	/* a mean that moved to another bucket (haproxy's ttime): the
	 * window's requests all sit where the mean is now, never more */
	struct traffic hb, hn, hd;
	traffic_init(&hb);
	traffic_init(&hn);
	traffic_init(&hd);
	snprintf(hb.gen, sizeof(hb.gen), "pid7");
	snprintf(hn.gen, sizeof(hn.gen), "pid7");
	struct traffic_route *x = route(&hb, "cluster/c");
	x->approx = true;
	x->requests = 100;
	x->hist[traffic_bucket(2)] = 100;
	x = route(&hn, "cluster/c");
	x->approx = true;
	x->requests = 150;
	x->errors = 3;
	x->hist[traffic_bucket(40)] = 150;
	traffic_diff(&hn, &hb, &hd);
	assert_int_equal(hd.routes[0].requests, 50);
	assert_int_equal(hd.routes[0].hist[traffic_bucket(40)], 50);
	assert_int_equal(hd.routes[0].hist[traffic_bucket(2)], 0);
	/* exact histograms whose counts ran ahead of the requests: clamped */
	x = route(&hb, "route/e");
	x->requests = 10;
	x->hist[traffic_bucket(1)] = 10;
	x = route(&hn, "route/e");
	x->requests = 12;
	x->hist[traffic_bucket(1)] = 10;
	x->hist[traffic_bucket(5)] = 4;
	x->hist[traffic_bucket(50)] = 3;
	traffic_diff(&hn, &hb, &hd);
	assert_int_equal(hd.routes[1].requests, 2);
	assert_int_equal(hd.routes[1].hist[traffic_bucket(5)], 2);
	assert_int_equal(hd.routes[1].hist[traffic_bucket(50)], 0);
	struct buf j = BUF_INIT;
	char err[200];
	traffic_to_json(&hd, &j);
	cJSON *doc = json_decode(j.data, j.len, NULL, err, sizeof(err));
	assert_int_equal(traffic_from_json(doc, &hb, err, sizeof(err)), 0);
	cJSON_Delete(doc);
	buf_release(&j);
	traffic_release(&hb);
	traffic_release(&hn);
	traffic_release(&hd);

	traffic_merge(&acc, &now);
	traffic_merge(&acc, &base);
	assert_int_equal(acc.n, 2);
	assert_int_equal(route(&acc, "route/a")->requests, 1015);
	assert_true(acc.since == 100 && acc.until == 120);
	struct traffic_route all;
	traffic_sum_routes(&acc, &all);
	assert_int_equal(all.requests, 1016);
	assert_int_equal(traffic_total(&acc), 1016);
	assert_int_equal(all.errors, 5);

	/* copy into a smaller one grows it */
	traffic_copy(&d, &acc);
	assert_int_equal(d.n, 2);
	traffic_release(&base);
	traffic_release(&now);
	traffic_release(&d);
	traffic_release(&acc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_buckets),
		cmocka_unit_test(test_quantiles),
		cmocka_unit_test(test_observe_and_names),
		cmocka_unit_test(test_json_round_trip),
		cmocka_unit_test(test_json_refusals),
		cmocka_unit_test(test_replayed),
		cmocka_unit_test(test_diff_and_merge),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
