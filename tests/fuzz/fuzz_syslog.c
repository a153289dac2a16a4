/* fuzz_syslog.c: libFuzzer target for the access log line parser
 * (agent/traffic/syslog.c, tsl_parse) and the counting behind it
 * (agent/traffic/count.c): every datagram a local process may send the
 * agent's UDP port. Properties:
 *  - nothing crashes, and nothing is read outside the datagram;
 *  - an accepted line's fields are within it and in range: the generation
 *    1..71 bytes of [A-Za-z0-9._-], the status 100..599, the latency a
 *    finite number >= 0, the route "-" or "route/" and 1..200 name bytes;
 *  - an accepted line holds "tether1 " right before its generation, and
 *    ends with its route (and at most a newline): nothing trails it;
 *  - the same fields, printed in the canonical form behind another
 *    header, parse to the same fields (the latency to within its
 *    printing's rounding);
 *  - over the bound it is refused, whatever it holds;
 *  - counted for a live generation, a datagram is exactly one of: a
 *    request of the live generation, a line of another, a drop by reason. */
#include "fuzz.h"
#include "traffic/count.h"
#include "traffic/syslog.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what, const uint8_t *data, size_t size)
{
	fprintf(stderr, "fuzz_syslog: %s\n  input (%zu bytes): %.*s\n", what, size, (int)(size > 300 ? 300 : size),
		(const char *)data);
	abort();
}

static bool name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
	       c == '-';
}

static bool within(const char *p, size_t n, const uint8_t *data, size_t size)
{
	return p >= (const char *)data && p + n <= (const char *)data + size;
}

static void check_line(const struct tsl_line *l, const uint8_t *data, size_t size)
{
	if (!within(l->gen, l->gen_len, data, size) || !within(l->route, l->route_len, data, size))
		die("a field points outside the datagram", data, size);
	if (l->gen_len < 1 || l->gen_len > 71)
		die("the generation's length is out of range", data, size);
	for (size_t i = 0; i < l->gen_len; i++)
		if (!name_char(l->gen[i]))
			die("the generation holds a character it may not", data, size);
	if ((const char *)l->gen - (const char *)data < 8 || memcmp(l->gen - 8, "tether1 ", 8) != 0)
		die("no \"tether1 \" before the generation", data, size);
	if (l->status < 100 || l->status > 599)
		die("the status is out of range", data, size);
	if (!isfinite(l->ms) || l->ms < 0)
		die("the latency is not a finite number >= 0", data, size);
	if (l->route_len == 1) {
		if (l->route[0] != '-')
			die("a one-byte route that is not \"-\"", data, size);
	} else {
		if (l->route_len < 7 || l->route_len > 206 || memcmp(l->route, "route/", 6) != 0)
			die("the route is not route/NAME", data, size);
		for (size_t i = 6; i < l->route_len; i++)
			if (!name_char(l->route[i]))
				die("the route's name holds a character it may not", data, size);
	}
	size_t tail = (size_t)((const char *)data + size - (l->route + l->route_len));
	if (tail > 1 || (tail == 1 && data[size - 1] != '\n'))
		die("bytes trail the route", data, size);
}

/* The canonical form of l behind haproxy's header parses to the same. */
static void check_round_trip(const struct tsl_line *l, const uint8_t *data, size_t size)
{
	char line[600];
	int n = snprintf(line, sizeof(line), "<134>Jan 31 23:59:59 host haproxy[7]: tether1 %.*s %u %.6fs %.*s\n",
			 (int)l->gen_len, l->gen, l->status, l->ms / 1000.0, (int)l->route_len, l->route);
	if (n < 0 || (size_t)n >= sizeof(line))
		die("the canonical form does not fit", data, size);
	struct tsl_line r;
	if (l->ms / 1000.0 >= 1e9) {
		return;   /* more seconds than the format's 9 digits: not printable in seconds */
	}
	if (tsl_parse(line, (size_t)n, &r) < 0)
		die("the canonical form of an accepted line is refused", data, size);
	if (r.gen_len != l->gen_len || memcmp(r.gen, l->gen, l->gen_len) != 0 || r.status != l->status ||
	    r.route_len != l->route_len || memcmp(r.route, l->route, l->route_len) != 0 ||
	    fabs(r.ms - l->ms) > 0.001)
		die("the canonical form parses to other fields", data, size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tsl_line l;
	int rc = tsl_parse((const char *)data, size, &l);
	if (rc == 0) {
		if (size > TRAFFIC_SYSLOG_MAX)
			die("a datagram over the bound is accepted", data, size);
		check_line(&l, data, size);
		check_round_trip(&l, data, size);
	} else if (rc != -1) {
		die("tsl_parse returns neither 0 nor -1", data, size);
	}

	/* counted for a live generation: the line's own, when it has one */
	struct traffic_count c;
	traffic_count_init(&c);
	char gen[72] = "g";
	if (rc == 0 && size % 2 == 0)
		snprintf(gen, sizeof(gen), "%.*s", (int)l.gen_len, l.gen);
	traffic_count_live(&c, gen, 1, 0);
	traffic_count_datagram(&c, (const char *)data, size);
	uint64_t requests = 0, drops = 0;
	for (size_t i = 0; i < c.t.n; i++)
		requests += c.t.routes[i].requests;
	for (int d = 0; d < TD_N; d++)
		drops += c.dropped[d];
	if (requests + c.other_gen + drops != 1 || c.t.dropped != drops)
		die("a datagram is not counted exactly once", data, size);
	if ((rc == 0) != (drops == 0))
		die("a drop disagrees with the parser", data, size);
	if (requests && (c.t.n != 1 || c.t.routes[0].errors != (l.status >= 500)))
		die("a request is counted wrong", data, size);
	traffic_count_release(&c);
	return 0;
}
