/* traffic_count.c: what counting one request of the access log costs the
 * agent (traffic-aware gates), on this machine. Times the code tetherd runs
 * per datagram (agent/traffic/syslog.c, agent/traffic/count.c,
 * common/traffic.c), each in a loop of about --ms milliseconds, over a mix
 * of lines as nginx and haproxy send them (--routes routes, statuses and
 * latencies varied):
 *
 *   parse        tsl_parse: the syslog header and the five fields
 *   count        traffic_count_datagram: parse, the route's lookup,
 *                traffic_observe (the counters and the histogram bucket)
 *   recv_count   the same behind the socket: datagrams sent over loopback
 *                UDP and read back by tsl_drain (recvmmsg, 512 a turn),
 *                each counted; the sending is not timed
 *
 * Prints key=value lines, nanoseconds of this thread's CPU time per
 * request. Usage:
 *   bench/traffic_count [--ms N] [--routes N] */
#include "traffic/count.h"
#include "traffic/syslog.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define LINES 256
#define GEN "0123456789abcdef"

/* This thread's CPU time (user and system): what the agent spends, not
 * what a busy machine adds by running others meanwhile. */
static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static char lines[LINES][256];
static size_t lens[LINES];
static volatile unsigned sink;

static void make_lines(unsigned routes)
{
	static const unsigned statuses[] = { 200, 200, 200, 201, 204, 301, 404, 500, 502, 200 };
	for (unsigned i = 0; i < LINES; i++) {
		char route[32];
		if (i % 17 == 0)
			snprintf(route, sizeof(route), "-");
		else
			snprintf(route, sizeof(route), "route/service-%u", i % routes);
		unsigned st = statuses[i % 10];
		int n;
		if (i % 2)
			n = snprintf(lines[i], sizeof(lines[i]), "<190>Dec  2 03:30:00 tether: tether1 " GEN " %u %u.%03us %s",
				     st, i % 3, (i * 37) % 1000, route);
		else
			n = snprintf(lines[i], sizeof(lines[i]), "<190>Dec  2 03:30:00 haproxy[4242]: tether1 " GEN
				     " %u %ums %s\n", st, (i * 13) % 2000, route);
		lens[i] = (size_t)n;
	}
}

static void on_dgram(void *ctx, const char *data, size_t len)
{
	traffic_count_datagram(ctx, data, len);
}

int main(int argc, char **argv)
{
	double ms = 1000;
	unsigned routes = 8;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--ms") == 0)
			ms = atof(argv[i + 1]);
		else if (strcmp(argv[i], "--routes") == 0)
			routes = (unsigned)atoi(argv[i + 1]);
	}
	if (ms <= 0 || routes < 1 || routes > 120) {
		fprintf(stderr, "usage: traffic_count [--ms N] [--routes 1..120]\n");
		return 2;
	}
	make_lines(routes);
	for (unsigned i = 0; i < LINES; i++) {
		struct tsl_line l;
		if (tsl_parse(lines[i], lens[i], &l) < 0) {
			fprintf(stderr, "traffic_count: line %u refused: %s\n", i, lines[i]);
			return 1;
		}
	}
	printf("routes=%u\n", routes);

	uint64_t n = 0;
	double t0 = now_s(), t = t0;
	while (t - t0 < ms / 1000.0) {
		for (unsigned i = 0; i < LINES; i++) {
			struct tsl_line l;
			sink += (unsigned)tsl_parse(lines[i], lens[i], &l) + l.status;
		}
		n += LINES;
		t = now_s();
	}
	printf("parse_ns=%.1f\nparse_n=%" PRIu64 "\n", (t - t0) * 1e9 / (double)n, n);

	struct traffic_count c;
	traffic_count_init(&c);
	traffic_count_live(&c, GEN, 1, 0);
	n = 0;
	t0 = now_s();
	t = t0;
	while (t - t0 < ms / 1000.0) {
		for (unsigned i = 0; i < LINES; i++)
			traffic_count_datagram(&c, lines[i], lens[i]);
		n += LINES;
		t = now_s();
	}
	printf("count_ns=%.1f\ncount_n=%" PRIu64 "\n", (t - t0) * 1e9 / (double)n, n);
	uint64_t total = traffic_total(&c.t);
	if (total != n || c.other_gen || c.t.dropped) {
		fprintf(stderr, "traffic_count: counted %" PRIu64 " of %" PRIu64 "\n", total, n);
		return 1;
	}

	/* behind the socket: send a batch, then time reading and counting it */
	int port = 0, fd = -1;
	char spec[64], err[256];
	for (int tries = 0; tries < 50 && fd < 0; tries++) {
		port = 20000 + (int)((unsigned long long)(now_s() * 1e9 + getpid() + tries * 7919) % 30000);
		snprintf(spec, sizeof(spec), "127.0.0.1:%d", port);
		fd = tsl_open(spec, err, sizeof(err));
	}
	if (fd < 0) {
		fprintf(stderr, "traffic_count: %s\n", err);
		return 1;
	}
	int out = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	double spent = 0;
	n = 0;
	uint64_t before = traffic_total(&c.t);
	for (double start = now_s(); now_s() - start < ms / 1000.0;) {
		for (unsigned i = 0; i < 512; i++)
			if (sendto(out, lines[i % LINES], lens[i % LINES], 0, (struct sockaddr *)&to, sizeof(to)) < 0)
				break;
		double r0 = now_s();
		size_t got;
		while ((got = tsl_drain(fd, TRAFFIC_SYSLOG_BATCH, on_dgram, &c)) > 0)
			n += got;
		spent += now_s() - r0;
	}
	printf("recv_count_ns=%.1f\nrecv_count_n=%" PRIu64 "\n", n ? spent * 1e9 / (double)n : 0.0, n);
	if (traffic_total(&c.t) - before != n) {
		fprintf(stderr, "traffic_count: read %" PRIu64 ", counted %" PRIu64 "\n", n, traffic_total(&c.t) - before);
		return 1;
	}
	close(out);
	close(fd);
	traffic_count_release(&c);
	return (int)(sink & 0);
}
