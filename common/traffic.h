/* traffic.h: what a consumer's traffic looked like over a window: per
 * route, requests, 5xx answers and a latency histogram. The agent counts
 * it for the generation it serves (traffic_observe) and reports it as JSON
 * in its ACKs and reports; the plane decodes it (untrusted input), takes
 * differences over a window and merges nodes to compare a canary stage
 * with the baseline (traffic-aware gates). */
#ifndef TETHER_TRAFFIC_H
#define TETHER_TRAFFIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "buf.h"

/* Bucket i holds latencies up to traffic_bucket_ms(i) (0.1 ms times 1.4^i:
 * 0.1 ms .. 50 s); the last holds everything above. */
#define TRAFFIC_BUCKETS 40
#define TRAFFIC_ROUTES_MAX 128
#define TRAFFIC_ROUTE_LEN 208     /* a route's name, NUL included */
#define TRAFFIC_GEN_LEN 72
/* the most a report (or an ACK carrying one) may hold: 128 routes of 40
 * buckets; the plane's POST /v1/ack and /v1/report and a relay's changes
 * take this much */
#define TRAFFIC_REPORT_MAX (256 * 1024)

struct traffic_route {
	char name[TRAFFIC_ROUTE_LEN]; /* "route/api" */
	uint64_t requests;
	uint64_t errors;              /* 5xx answers */
	uint64_t hist[TRAFFIC_BUCKETS];
	bool approx;                  /* the latency is the consumer's mean, not a distribution */
};

struct traffic {
	uint64_t version;             /* the state version the generation serves */
	char gen[TRAFFIC_GEN_LEN];    /* the generation's id ("" when unknown) */
	double since, until;          /* the window: wall seconds */
	uint64_t dropped;             /* input that could not be counted */
	struct traffic_route *routes; /* in the order first seen */
	size_t n, cap;
};

void traffic_init(struct traffic *t);
void traffic_release(struct traffic *t);
/* Forgets the routes and counters (the window and ids stay). */
void traffic_clear(struct traffic *t);
void traffic_copy(struct traffic *dst, const struct traffic *src);

/* Whether name (len bytes) can name a route: [A-Za-z0-9._/+:-], 1 to
 * TRAFFIC_ROUTE_LEN - 1 bytes. */
bool traffic_route_name_ok(const char *name, size_t len);
/* The route called name (len bytes), added when new; NULL when the name
 * is not valid or TRAFFIC_ROUTES_MAX routes are counted already. */
struct traffic_route *traffic_route(struct traffic *t, const char *name, size_t len);
/* Counts one request: its HTTP status and its latency in ms. */
void traffic_observe(struct traffic_route *r, unsigned status, double ms);

size_t traffic_bucket(double ms);
double traffic_bucket_ms(size_t i);
/* The q-quantile (0 < q < 1) of a histogram in ms, interpolated within its
 * bucket; 0 when it is empty. */
double traffic_quantile(const uint64_t hist[TRAFFIC_BUCKETS], double q);
uint64_t traffic_total(const struct traffic *t);
/* Whether t is an older report than the last one taken of the same
 * generation and version (gen, version, until, and its total requests):
 * earlier and with no more requests, as a report replayed from another
 * plane's record is. (An agent whose clock stepped back still counts
 * up: its reports are not older.) */
bool traffic_replayed(const struct traffic *t, const char *gen, uint64_t version, double until, uint64_t total);

/* {"version","gen","since","until","dropped","routes":[{"route",
 * "requests","errors","p50","p99","hist":[[bucket,count],...]}]} */
void traffic_to_json(const struct traffic *t, struct buf *out);
/* Decodes what traffic_to_json wrote (p50 and p99 are recomputed, not
 * read). 0, or -1 with err naming the field. t must be initialised; it is
 * cleared first. */
int traffic_from_json(const cJSON *j, struct traffic *t, char *err, size_t errlen);

/* out = now - base, route by route, over base.until .. now.until. A route
 * base lacks counts from zero; when now's counters are below base's, or
 * the generations differ, the consumer started counting again: now counts
 * whole. An approx route's window puts its requests where the mean is now;
 * a histogram never counts more than its requests. out must be
 * initialised. */
void traffic_diff(const struct traffic *now, const struct traffic *base, struct traffic *out);
/* Adds x's routes into acc (the window widens to cover both). */
void traffic_merge(struct traffic *acc, const struct traffic *x);
/* Adds every route of t into one (the whole of t's traffic). */
void traffic_sum_routes(const struct traffic *t, struct traffic_route *out);

#endif
