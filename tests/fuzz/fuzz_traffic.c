/* fuzz_traffic.c: libFuzzer target for common/traffic.c's decoder, what
 * the plane runs on every node's report and ACK (untrusted input). Each
 * input is JSON (through json_decode, as the plane decodes bodies) decoded
 * by traffic_from_json. A refusal says why and leaves the traffic usable;
 * what it accepts holds its invariants (at most TRAFFIC_ROUTES_MAX routes
 * with valid, distinct names, errors <= requests, histogram counts <=
 * requests, since <= until), encodes to JSON that decodes to the same
 * counters and encodes to the same bytes again, and survives a window
 * (traffic_diff against itself: nothing left) and a merge (counts
 * doubled). */
#include "fuzz.h"
#include "json.h"
#include "traffic.h"

#include <stdlib.h>
#include <string.h>

static void invariants(const struct traffic *t)
{
	if (t->n > TRAFFIC_ROUTES_MAX || t->until < t->since)
		abort();
	for (size_t i = 0; i < t->n; i++) {
		const struct traffic_route *r = &t->routes[i];
		if (!traffic_route_name_ok(r->name, strlen(r->name)) || r->errors > r->requests)
			abort();
		uint64_t sum = 0;
		for (size_t k = 0; k < TRAFFIC_BUCKETS; k++)
			sum += t->routes[i].hist[k];
		if (sum > r->requests)
			abort();
		for (size_t j = 0; j < i; j++)
			if (strcmp(t->routes[j].name, r->name) == 0)
				abort();
		double p99 = traffic_quantile(r->hist, 0.99);
		if (!(p99 >= 0) || p99 > traffic_bucket_ms(TRAFFIC_BUCKETS - 1))
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[512];
	struct json_limits lim = { 256 * 1024, 8 };
	cJSON *doc = json_decode((const char *)data, size, &lim, err, sizeof(err));
	if (!doc)
		return 0;
	struct traffic t, u, d;
	traffic_init(&t);
	traffic_init(&u);
	traffic_init(&d);
	err[0] = '\0';
	if (traffic_from_json(doc, &t, err, sizeof(err)) < 0) {
		if (!err[0])
			abort();   /* a refusal says why */
		goto out;
	}
	invariants(&t);
	/* the round trip: the same counters, then the same bytes */
	struct buf j1 = BUF_INIT, j2 = BUF_INIT;
	traffic_to_json(&t, &j1);
	cJSON *again = json_decode(j1.data, j1.len, &lim, err, sizeof(err));
	if (!again || traffic_from_json(again, &u, err, sizeof(err)) < 0)
		abort();
	cJSON_Delete(again);
	if (u.n != t.n || u.version != t.version || u.dropped != t.dropped || strcmp(u.gen, t.gen) != 0)
		abort();
	for (size_t i = 0; i < t.n; i++)
		if (strcmp(u.routes[i].name, t.routes[i].name) != 0 || u.routes[i].requests != t.routes[i].requests ||
		    u.routes[i].errors != t.routes[i].errors || u.routes[i].approx != t.routes[i].approx ||
		    memcmp(u.routes[i].hist, t.routes[i].hist, sizeof(t.routes[i].hist)) != 0)
			abort();
	traffic_to_json(&u, &j2);
	if (j1.len != j2.len || memcmp(j1.data, j2.data, j1.len) != 0)
		abort();
	buf_release(&j1);
	buf_release(&j2);
	/* a window over itself is empty; a merge with itself doubles */
	traffic_diff(&t, &t, &d);
	for (size_t i = 0; i < d.n; i++)
		if (d.routes[i].requests || d.routes[i].errors)
			abort();
	traffic_copy(&u, &t);
	traffic_merge(&u, &t);
	if (u.n != t.n || traffic_total(&u) != 2 * traffic_total(&t))
		abort();
out:
	traffic_release(&t);
	traffic_release(&u);
	traffic_release(&d);
	cJSON_Delete(doc);
	return 0;
}
