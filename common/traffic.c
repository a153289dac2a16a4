/* traffic.c: per-route request counters and latency histograms (see
 * traffic.h): counting, quantiles, JSON both ways, windows and merges. */
#include "traffic.h"
#include "json.h"
#include "xmalloc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUCKET_BASE_MS 0.1
#define BUCKET_GROWTH 1.4

void traffic_init(struct traffic *t)
{
	memset(t, 0, sizeof(*t));
}

void traffic_release(struct traffic *t)
{
	free(t->routes);
	traffic_init(t);
}

void traffic_clear(struct traffic *t)
{
	t->n = 0;
	t->dropped = 0;
}

void traffic_copy(struct traffic *dst, const struct traffic *src)
{
	if (dst == src)
		return;
	struct traffic_route *keep = dst->routes;
	size_t cap = dst->cap;
	if (cap < src->n) {
		keep = xrealloc(keep, src->n * sizeof(*keep));
		cap = src->n;
	}
	*dst = *src;
	dst->routes = keep;
	dst->cap = cap;
	if (src->n)
		memcpy(dst->routes, src->routes, src->n * sizeof(*keep));
}

bool traffic_route_name_ok(const char *name, size_t len)
{
	if (len == 0 || len >= TRAFFIC_ROUTE_LEN)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
		      c == '_' || c == '/' || c == '+' || c == ':' || c == '-'))
			return false;
	}
	return true;
}

struct traffic_route *traffic_route(struct traffic *t, const char *name, size_t len)
{
	for (size_t i = 0; i < t->n; i++)
		if (strncmp(t->routes[i].name, name, len) == 0 && t->routes[i].name[len] == '\0')
			return &t->routes[i];
	if (!traffic_route_name_ok(name, len) || t->n == TRAFFIC_ROUTES_MAX)
		return NULL;
	if (t->n == t->cap) {
		t->cap = t->cap ? 2 * t->cap : 8;
		t->routes = xrealloc(t->routes, t->cap * sizeof(*t->routes));
	}
	struct traffic_route *r = &t->routes[t->n++];
	memset(r, 0, sizeof(*r));
	memcpy(r->name, name, len);
	return r;
}

size_t traffic_bucket(double ms)
{
	if (!(ms > BUCKET_BASE_MS))   /* NaN and negatives too */
		return 0;
	double i = ceil(log(ms / BUCKET_BASE_MS) / log(BUCKET_GROWTH) - 1e-9);
	return i >= TRAFFIC_BUCKETS - 1 ? TRAFFIC_BUCKETS - 1 : (size_t)i;
}

double traffic_bucket_ms(size_t i)
{
	return BUCKET_BASE_MS * pow(BUCKET_GROWTH, (double)i);
}

void traffic_observe(struct traffic_route *r, unsigned status, double ms)
{
	r->requests++;
	if (status >= 500 && status <= 599)
		r->errors++;
	r->hist[traffic_bucket(ms)]++;
}

double traffic_quantile(const uint64_t hist[TRAFFIC_BUCKETS], double q)
{
	uint64_t total = 0;
	for (size_t i = 0; i < TRAFFIC_BUCKETS; i++)
		total += hist[i];
	if (total == 0)
		return 0;
	double want = q * (double)total, seen = 0;
	for (size_t i = 0; i < TRAFFIC_BUCKETS; i++) {
		if (hist[i] == 0)
			continue;
		if (seen + (double)hist[i] >= want) {
			/* geometric interpolation within the bucket */
			double lo = i ? traffic_bucket_ms(i - 1) : 0, hi = traffic_bucket_ms(i);
			double f = (want - seen) / (double)hist[i];
			if (i == 0)
				return hi * f;
			return lo * pow(hi / lo, f);
		}
		seen += (double)hist[i];
	}
	return traffic_bucket_ms(TRAFFIC_BUCKETS - 1);
}

uint64_t traffic_total(const struct traffic *t)
{
	uint64_t n = 0;
	for (size_t i = 0; i < t->n; i++)
		n += t->routes[i].requests;
	return n;
}

bool traffic_replayed(const struct traffic *t, const char *gen, uint64_t version, double until, uint64_t total)
{
	return strcmp(t->gen, gen) == 0 && t->version == version && t->until < until && traffic_total(t) <= total;
}

void traffic_to_json(const struct traffic *t, struct buf *out)
{
	buf_printf(out, "{\"version\":%llu,\"gen\":", (unsigned long long)t->version);
	buf_json_string(out, t->gen);
	buf_printf(out, ",\"since\":%.3f,\"until\":%.3f,\"dropped\":%llu,\"routes\":[", t->since, t->until,
		   (unsigned long long)t->dropped);
	for (size_t i = 0; i < t->n; i++) {
		const struct traffic_route *r = &t->routes[i];
		buf_puts(out, i ? ",{\"route\":" : "{\"route\":");
		buf_json_string(out, r->name);
		buf_printf(out, ",\"requests\":%llu,\"errors\":%llu,\"p50\":%.3f,\"p99\":%.3f,\"hist\":[",
			   (unsigned long long)r->requests, (unsigned long long)r->errors,
			   traffic_quantile(r->hist, 0.5), traffic_quantile(r->hist, 0.99));
		bool first = true;
		for (size_t b = 0; b < TRAFFIC_BUCKETS; b++) {
			if (!r->hist[b])
				continue;
			buf_printf(out, "%s[%zu,%llu]", first ? "" : ",", b, (unsigned long long)r->hist[b]);
			first = false;
		}
		buf_puts(out, r->approx ? "],\"approx\":true}" : "]}");
	}
	buf_puts(out, "]}");
}

static bool get_seconds(const cJSON *o, const char *key, double *out)
{
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!cJSON_IsNumber(f) || !isfinite(f->valuedouble) || f->valuedouble < 0 || f->valuedouble > 1e11)
		return false;
	*out = f->valuedouble;
	return true;
}

static int route_from_json(const cJSON *o, size_t idx, struct traffic *t, char *err, size_t errlen)
{
	if (!cJSON_IsObject(o)) {
		snprintf(err, errlen, "routes[%zu] must be an object", idx);
		return -1;
	}
	const char *name = json_get_string(o, "route");
	if (!name || !traffic_route_name_ok(name, strlen(name))) {
		snprintf(err, errlen, "routes[%zu].route must be a name of [A-Za-z0-9._/+:-], 1..%d bytes", idx,
			 TRAFFIC_ROUTE_LEN - 1);
		return -1;
	}
	for (size_t i = 0; i < t->n; i++) {
		if (strcmp(t->routes[i].name, name) == 0) {
			snprintf(err, errlen, "routes[%zu].route '%s' appears twice", idx, name);
			return -1;
		}
	}
	struct traffic_route *r = traffic_route(t, name, strlen(name));
	if (!r) {
		snprintf(err, errlen, "routes: at most %d", TRAFFIC_ROUTES_MAX);
		return -1;
	}
	if (!json_get_u64(cJSON_GetObjectItemCaseSensitive(o, "requests"), &r->requests) ||
	    !json_get_u64(cJSON_GetObjectItemCaseSensitive(o, "errors"), &r->errors)) {
		snprintf(err, errlen, "routes[%zu]: requests and errors must be non-negative integers", idx);
		return -1;
	}
	if (r->errors > r->requests) {
		snprintf(err, errlen, "routes[%zu]: errors (%llu) exceed requests (%llu)", idx,
			 (unsigned long long)r->errors, (unsigned long long)r->requests);
		return -1;
	}
	const cJSON *h = cJSON_GetObjectItemCaseSensitive(o, "hist");
	if (!cJSON_IsArray(h)) {
		snprintf(err, errlen, "routes[%zu].hist must be an array of [bucket,count]", idx);
		return -1;
	}
	uint64_t sum = 0;
	size_t k = 0;
	for (const cJSON *e = h->child; e; e = e->next, k++) {
		uint64_t b, c;
		if (!cJSON_IsArray(e) || cJSON_GetArraySize(e) != 2 || !json_get_u64(e->child, &b) ||
		    !json_get_u64(e->child->next, &c) || b >= TRAFFIC_BUCKETS) {
			snprintf(err, errlen, "routes[%zu].hist[%zu] must be [bucket 0..%d, count]", idx, k,
				 TRAFFIC_BUCKETS - 1);
			return -1;
		}
		if (r->hist[b]) {
			snprintf(err, errlen, "routes[%zu].hist: bucket %llu appears twice", idx, (unsigned long long)b);
			return -1;
		}
		r->hist[b] = c;
		sum += c;
		if (sum > r->requests) {
			snprintf(err, errlen, "routes[%zu].hist counts more than its %llu requests", idx,
				 (unsigned long long)r->requests);
			return -1;
		}
	}
	const cJSON *ap = cJSON_GetObjectItemCaseSensitive(o, "approx");
	if (ap && !cJSON_IsBool(ap)) {
		snprintf(err, errlen, "routes[%zu].approx must be true or false", idx);
		return -1;
	}
	r->approx = cJSON_IsTrue(ap);
	return 0;
}

int traffic_from_json(const cJSON *j, struct traffic *t, char *err, size_t errlen)
{
	traffic_clear(t);
	t->gen[0] = '\0';
	if (!cJSON_IsObject(j)) {
		snprintf(err, errlen, "traffic must be an object");
		return -1;
	}
	if (!json_get_u64(cJSON_GetObjectItemCaseSensitive(j, "version"), &t->version)) {
		snprintf(err, errlen, "traffic.version must be a non-negative integer");
		return -1;
	}
	const cJSON *g = cJSON_GetObjectItemCaseSensitive(j, "gen");
	if (g && !cJSON_IsNull(g)) {
		if (!cJSON_IsString(g) || strlen(g->valuestring) >= TRAFFIC_GEN_LEN ||
		    (*g->valuestring && !traffic_route_name_ok(g->valuestring, strlen(g->valuestring)))) {
			snprintf(err, errlen, "traffic.gen must be a string of [A-Za-z0-9._/+:-], at most %d bytes",
				 TRAFFIC_GEN_LEN - 1);
			return -1;
		}
		snprintf(t->gen, sizeof(t->gen), "%s", g->valuestring);
	}
	if (!get_seconds(j, "since", &t->since) || !get_seconds(j, "until", &t->until) || t->until < t->since) {
		snprintf(err, errlen, "traffic.since and traffic.until must be times in seconds, since <= until");
		return -1;
	}
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(j, "dropped");
	if (d && !json_get_u64(d, &t->dropped)) {
		snprintf(err, errlen, "traffic.dropped must be a non-negative integer");
		return -1;
	}
	const cJSON *rs = cJSON_GetObjectItemCaseSensitive(j, "routes");
	if (!cJSON_IsArray(rs)) {
		snprintf(err, errlen, "traffic.routes must be an array");
		return -1;
	}
	size_t i = 0;
	for (const cJSON *r = rs->child; r; r = r->next, i++) {
		char rerr[300];
		if (route_from_json(r, i, t, rerr, sizeof(rerr)) < 0) {
			snprintf(err, errlen, "traffic.%s", rerr);
			return -1;
		}
	}
	return 0;
}

static const struct traffic_route *find(const struct traffic *t, const char *name)
{
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->routes[i].name, name) == 0)
			return &t->routes[i];
	return NULL;
}

void traffic_diff(const struct traffic *now, const struct traffic *base, struct traffic *out)
{
	traffic_copy(out, now);
	bool restarted = strcmp(now->gen, base->gen) != 0 || now->version != base->version;
	for (size_t i = 0; i < now->n && !restarted; i++) {
		const struct traffic_route *b = find(base, now->routes[i].name);
		if (b && (b->requests > now->routes[i].requests || b->errors > now->routes[i].errors))
			restarted = true;
	}
	if (restarted)
		return;
	out->since = base->until;
	out->dropped = now->dropped >= base->dropped ? now->dropped - base->dropped : now->dropped;
	for (size_t i = 0; i < out->n; i++) {
		struct traffic_route *r = &out->routes[i];
		const struct traffic_route *b = find(base, r->name);
		if (!b)
			continue;
		r->requests -= b->requests;
		r->errors -= b->errors;
		if (r->approx) {
			/* a mean, not a distribution: the window's requests all
			 * go where the mean is now */
			size_t top = 0;
			for (size_t k = 1; k < TRAFFIC_BUCKETS; k++)
				top = r->hist[k] > r->hist[top] ? k : top;
			memset(r->hist, 0, sizeof(r->hist));
			r->hist[top] = r->requests;
			continue;
		}
		uint64_t sum = 0;
		for (size_t k = 0; k < TRAFFIC_BUCKETS; k++) {
			r->hist[k] = r->hist[k] >= b->hist[k] ? r->hist[k] - b->hist[k] : 0;
			sum += r->hist[k];
		}
		/* never more latencies than requests (a consumer's counters
		 * need not move together): the excess off the slowest */
		for (size_t k = TRAFFIC_BUCKETS; k-- > 0 && sum > r->requests;) {
			uint64_t cut = sum - r->requests < r->hist[k] ? sum - r->requests : r->hist[k];
			r->hist[k] -= cut;
			sum -= cut;
		}
	}
}

static void add_route(struct traffic_route *acc, const struct traffic_route *x)
{
	acc->requests += x->requests;
	acc->errors += x->errors;
	for (size_t k = 0; k < TRAFFIC_BUCKETS; k++)
		acc->hist[k] += x->hist[k];
	acc->approx |= x->approx;
}

void traffic_merge(struct traffic *acc, const struct traffic *x)
{
	if (acc->n == 0 && acc->since == 0 && acc->until == 0) {
		acc->since = x->since;
		acc->until = x->until;
	} else {
		acc->since = x->since < acc->since ? x->since : acc->since;
		acc->until = x->until > acc->until ? x->until : acc->until;
	}
	acc->dropped += x->dropped;
	for (size_t i = 0; i < x->n; i++) {
		struct traffic_route *r = traffic_route(acc, x->routes[i].name, strlen(x->routes[i].name));
		if (r)
			add_route(r, &x->routes[i]);
		else
			acc->dropped += x->routes[i].requests;
	}
}

void traffic_sum_routes(const struct traffic *t, struct traffic_route *out)
{
	memset(out, 0, sizeof(*out));
	snprintf(out->name, sizeof(out->name), "*");
	for (size_t i = 0; i < t->n; i++)
		add_route(out, &t->routes[i]);
}
