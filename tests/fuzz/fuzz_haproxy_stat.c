/* fuzz_haproxy_stat.c: libFuzzer target for the parser of haproxy's
 * stats socket answers (agent/traffic/haproxy_answer.c): `show stat` CSV and
 * `show info`. The socket's other end may be anything; the parser must
 * refuse with a message or give counts that hold together, never crash.
 *
 * Checks on what haproxy_answer_stat accepts: every route is
 * "cluster/NAME" (a valid name, no name twice), its 5xx answers are at
 * most its requests, its histogram is empty or holds all its requests in
 * one bucket, and it is approx; on a refusal, the message is printable and
 * no route is left. Parsing again gives the same result. A Pid accepted
 * by haproxy_answer_pid is positive. */
#include "fuzz.h"
#include "traffic/haproxy_answer.h"
#include "traffic.h"

#include <stdlib.h>
#include <string.h>

static void check_routes(const struct traffic *t)
{
	for (size_t i = 0; i < t->n; i++) {
		const struct traffic_route *r = &t->routes[i];
		size_t nl = strlen(r->name);
		if (strncmp(r->name, "cluster/", 8) != 0 || !traffic_route_name_ok(r->name, nl) || !r->approx ||
		    r->errors > r->requests)
			abort();
		for (size_t k = 0; k < i; k++)
			if (strcmp(t->routes[k].name, r->name) == 0)
				abort();
		uint64_t sum = 0;
		size_t used = 0;
		for (size_t b = 0; b < TRAFFIC_BUCKETS; b++) {
			sum += r->hist[b];
			used += r->hist[b] != 0;
		}
		if (used > 1 || sum != r->requests)
			abort();
	}
}

static void check_err(const char *err)
{
	if (!err[0])
		abort();
	for (const char *p = err; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	char err[256] = "";
	struct traffic t, again;
	traffic_init(&t);
	traffic_init(&again);
	int rc = haproxy_answer_stat(text, size, &t, err, sizeof(err));
	if (rc == 0) {
		check_routes(&t);
		char err2[256];
		if (haproxy_answer_stat(text, size, &again, err2, sizeof(err2)) != 0 || again.n != t.n ||
		    (t.n && memcmp(again.routes, t.routes, t.n * sizeof(*t.routes)) != 0))
			abort();
	} else {
		check_err(err);
		if (t.n)
			abort();
	}
	traffic_release(&t);
	traffic_release(&again);

	long pid = 0;
	err[0] = '\0';
	if (haproxy_answer_pid(text, size, &pid, err, sizeof(err)) == 0) {
		if (pid <= 0)
			abort();
	} else {
		check_err(err);
	}
	return 0;
}
