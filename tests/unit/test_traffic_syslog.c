/* test_traffic_syslog.c: unit tests of agent/traffic/syslog.c and
 * traffic/count.c: the line parser on lines as real nginx and haproxy send
 * them (RFC 3164 headers, with and without a host or a pid, both latency
 * units) and every refusal; the listener's address (loopback only); the
 * bounded reads over a real UDP socket (a batch at a time, an oversized
 * datagram flagged); the per-generation counting (a new generation starts
 * from zero, lines of another one are counted apart, drops by reason);
 * counting by default (traffic/auto.c): a free loopback port, kept in the
 * state directory and taken again, another when it is taken. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tmpdir.h"
#include "traffic/auto.h"
#include "traffic/count.h"
#include "traffic/syslog.h"

#define GEN "0123456789abcdef"
#define NGINX_HDR "<190>Dec  2 03:30:00 tether: "
#define HAPROXY_HDR "<190>Dec  2 03:30:00 haproxy[123]: "

static int parse(const char *text, struct tsl_line *l)
{
	memset(l, 0, sizeof(*l));
	return tsl_parse(text, strlen(text), l);
}

static void assert_line(const char *text, const char *gen, unsigned status, double ms, const char *route)
{
	struct tsl_line l;
	if (parse(text, &l) < 0)
		fail_msg("refused: '%s'", text);
	assert_int_equal(l.gen_len, strlen(gen));
	assert_memory_equal(l.gen, gen, l.gen_len);
	assert_int_equal(l.status, status);
	assert_float_equal(l.ms, ms, 1e-9);
	assert_int_equal(l.route_len, strlen(route));
	assert_memory_equal(l.route, route, l.route_len);
}

static void test_good_lines(void **st)
{
	(void)st;
	/* as nginx 1.22 sends them (seen on the wire) */
	assert_line(NGINX_HDR "tether1 " GEN " 200 0.003s route/api", GEN, 200, 3.0, "route/api");
	assert_line(NGINX_HDR "tether1 " GEN " 404 0.000s -", GEN, 404, 0.0, "-");
	assert_line(NGINX_HDR "tether1 " GEN " 502 12.345s route/a.b_c-d", GEN, 502, 12345.0, "route/a.b_c-d");
	/* as haproxy 2.6 sends them: a pid, a newline at the end */
	assert_line(HAPROXY_HDR "tether1 " GEN " 503 3ms route/api\n", GEN, 503, 3.0, "route/api");
	assert_line(HAPROXY_HDR "tether1 g 200 0ms -\n", "g", 200, 0.0, "-");
	assert_line(HAPROXY_HDR "tether1 g 200 1.5ms -", "g", 200, 1.5, "-");
	/* a host name before the tag, a two-digit day, the lowest PRI */
	assert_line("<0>Dec 12 23:59:59 web-1.example tether: tether1 x 100 1.000001s -", "x", 100, 1000.001, "-");
	assert_line("<13>Jan  1 00:00:00 host haproxy[1]: tether1 x 599 999999999ms -", "x", 599, 999999999.0, "-");
	/* the longest generation and route names */
	char gen[72], route[207], line[512];
	memset(gen, 'g', 71);
	gen[71] = '\0';
	memcpy(route, "route/", 6);
	memset(route + 6, 'r', 200);
	route[206] = '\0';
	snprintf(line, sizeof(line), NGINX_HDR "tether1 %s 200 0.001s %s", gen, route);
	assert_line(line, gen, 200, 1.0, route);
}

static void refused(const char *text)
{
	struct tsl_line l;
	if (parse(text, &l) == 0)
		fail_msg("accepted: '%s'", text);
}

static void test_refusals(void **st)
{
	(void)st;
	refused("");
	refused("tether1 " GEN " 200 0.003s -");                       /* no header */
	refused("<190> tether: tether1 g 200 0.003s -");               /* no timestamp */
	refused("190>Dec  2 03:30:00 tether: tether1 g 200 0.003s -");
	refused("<>Dec  2 03:30:00 tether: tether1 g 200 0.003s -");
	refused("<192>Dec  2 03:30:00 tether: tether1 g 200 0.003s -"); /* PRI out of range */
	refused("<1900>Dec  2 03:30:00 tether: tether1 g 200 0.003s -");
	refused("<19a>Dec  2 03:30:00 tether: tether1 g 200 0.003s -");
	refused("<190>Foo  2 03:30:00 tether: tether1 g 200 0.003s -"); /* month */
	refused("<190>Dec 2 03:30:00 tether: tether1 g 200 0.003s -");  /* day not padded */
	refused("<190>Dec  2 03-30:00 tether: tether1 g 200 0.003s -");
	refused("<190>Dec  2 03:30:0x tether: tether1 g 200 0.003s -");
	refused("<190>Dec  2 03:30:00 : tether1 g 200 0.003s -");      /* no tag */
	refused("<190>Dec  2 03:30:00 tether tether1 g 200 0.003s -"); /* no colon */
	refused("<190>Dec  2 03:30:00 tether:tether1 g 200 0.003s -");
	refused("<190>Dec  2 03:30:00 tether1 g 200 0.003s -");        /* no tag at all */
	refused("<190>Dec  2 03:30:00 haproxy[]: tether1 g 200 0.003s -");
	refused("<190>Dec  2 03:30:00 haproxy[12a]: tether1 g 200 0.003s -");
	refused("<190>Dec  2 03:30:00 haproxy[12345678901]: tether1 g 200 0.003s -");
	refused("<190>Dec  2 03:30:00 a b c: tether1 g 200 0.003s -");  /* two hosts */
	refused("<190>Dec  2 03:30:00 aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa: tether1 g 200 0.003s -");
	refused(NGINX_HDR "tether2 g 200 0.003s -");                   /* another format */
	refused(NGINX_HDR "tether1  g 200 0.003s -");                  /* double space */
	refused(NGINX_HDR "tether1 g/h 200 0.003s -");                 /* gen */
	refused(NGINX_HDR "tether1 g 20 0.003s -");                    /* status */
	refused(NGINX_HDR "tether1 g 2000 0.003s -");
	refused(NGINX_HDR "tether1 g 099 0.003s -");
	refused(NGINX_HDR "tether1 g 600 0.003s -");
	refused(NGINX_HDR "tether1 g 000 0.003s -");
	refused(NGINX_HDR "tether1 g abc 0.003s -");
	refused(NGINX_HDR "tether1 g 200  -");                         /* latency */
	refused(NGINX_HDR "tether1 g 200 0.003 -");
	refused(NGINX_HDR "tether1 g 200 1.s -");
	refused(NGINX_HDR "tether1 g 200 .5s -");
	refused(NGINX_HDR "tether1 g 200 1.1234567s -");
	refused(NGINX_HDR "tether1 g 200 1234567890ms -");
	refused(NGINX_HDR "tether1 g 200 -1ms -");
	refused(NGINX_HDR "tether1 g 200 3us -");
	refused(NGINX_HDR "tether1 g 200 3m -");
	refused(NGINX_HDR "tether1 g 200 0.003s");                     /* route */
	refused(NGINX_HDR "tether1 g 200 0.003s ");
	refused(NGINX_HDR "tether1 g 200 0.003s route/");
	refused(NGINX_HDR "tether1 g 200 0.003s routes/x");
	refused(NGINX_HDR "tether1 g 200 0.003s cluster/x");
	refused(NGINX_HDR "tether1 g 200 0.003s route/a/b");
	refused(NGINX_HDR "tether1 g 200 0.003s route/a b");
	refused(NGINX_HDR "tether1 g 200 0.003s -- ");
	refused(NGINX_HDR "tether1 g 200 0.003s - ");                  /* trailing bytes */
	refused(NGINX_HDR "tether1 g 200 0.003s -\r\n");
	refused(NGINX_HDR "tether1 g 200 0.003s -\n\n");
	refused(NGINX_HDR "tether1 g 200 0.003s - extra");
	/* too long names */
	char gen[73], line[600];
	memset(gen, 'g', 72);
	gen[72] = '\0';
	snprintf(line, sizeof(line), NGINX_HDR "tether1 %s 200 0.001s -", gen);
	refused(line);
	char route[208];
	memcpy(route, "route/", 6);
	memset(route + 6, 'r', 201);
	route[207] = '\0';
	snprintf(line, sizeof(line), NGINX_HDR "tether1 g 200 0.001s %s", route);
	refused(line);
	/* a NUL inside */
	struct tsl_line l;
	const char nul[] = NGINX_HDR "tether1 g 200 0.003s route/a\0b";
	assert_int_equal(tsl_parse(nul, sizeof(nul) - 1, &l), -1);
	/* over the bound, whatever it holds */
	char big[TRAFFIC_SYSLOG_MAX + 2];
	memset(big, 'x', sizeof(big));
	memcpy(big, NGINX_HDR "tether1 g 200 0.003s -", strlen(NGINX_HDR "tether1 g 200 0.003s -"));
	assert_int_equal(tsl_parse(big, TRAFFIC_SYSLOG_MAX + 1, &l), -1);
	/* every prefix of a good line is refused, but those that end inside
	 * the route's name ("route/a", "route/ap": good lines too) */
	const char *good = HAPROXY_HDR "tether1 " GEN " 200 0.003s route/api";
	size_t len = strlen(good);
	for (size_t n = 0; n <= len; n++)
		if ((tsl_parse(good, n, &l) == 0) != (n >= len - 2))
			fail_msg("a prefix of %zu bytes %s", n, n >= len - 2 ? "refused" : "accepted");
}

static void addr_ok(const char *spec, int family, unsigned port)
{
	struct sockaddr_storage sa;
	socklen_t len = 0;
	char err[256] = "";
	if (tsl_addr(spec, &sa, &len, err, sizeof(err)) < 0)
		fail_msg("'%s' refused: %s", spec, err);
	assert_int_equal(sa.ss_family, family);
	if (family == AF_INET)
		assert_int_equal(ntohs(((struct sockaddr_in *)&sa)->sin_port), port);
	else
		assert_int_equal(ntohs(((struct sockaddr_in6 *)&sa)->sin6_port), port);
}

static void addr_refused(const char *spec, const char *msg)
{
	struct sockaddr_storage sa;
	socklen_t len = 0;
	char err[256] = "";
	assert_int_equal(tsl_addr(spec, &sa, &len, err, sizeof(err)), -1);
	assert_string_equal(err, msg);
}

static void test_addresses(void **st)
{
	(void)st;
	addr_ok("127.0.0.1:514", AF_INET, 514);
	addr_ok("127.1.2.3:65535", AF_INET, 65535);
	addr_ok("[::1]:1", AF_INET6, 1);
	addr_refused("10.0.0.1:514", "'10.0.0.1:514' is not a loopback address: only 127.0.0.0/8 or [::1] (the "
				     "access log must not leave the host)");
	addr_refused("0.0.0.0:514", "'0.0.0.0:514' is not a loopback address: only 127.0.0.0/8 or [::1] (the "
				    "access log must not leave the host)");
	addr_refused("[::]:514", "'[::]:514' is not a loopback address: only 127.0.0.0/8 or [::1] (the access log "
				 "must not leave the host)");
	addr_refused("[::ffff:127.0.0.1]:514", "'[::ffff:127.0.0.1]:514' is not a loopback address: only "
					       "127.0.0.0/8 or [::1] (the access log must not leave the host)");
	addr_refused("localhost:514", "'localhost:514': the address must be numeric: in 127.0.0.0/8, or [::1] for IPv6");
	addr_refused("127.0.0.1:0", "'127.0.0.1:0': the port must be a number in 1..65535");
	addr_refused("127.0.0.1:65536", "'127.0.0.1:65536': the port must be a number in 1..65535");
	addr_refused("127.0.0.1:x", "'127.0.0.1:x': the port must be a number in 1..65535");
	addr_refused("127.0.0.1", "'127.0.0.1' is not ADDR:PORT ([::1]:PORT for IPv6)");
	addr_refused("[::1:514", "'[::1:514' is not ADDR:PORT ([::1]:PORT for IPv6)");
	addr_refused("[127.0.0.1]:514", "'[127.0.0.1]:514': the address must be numeric: in 127.0.0.0/8, or [::1] "
					"for IPv6");
	addr_refused("::1:514", "'::1:514': the address must be numeric: in 127.0.0.0/8, or [::1] for IPv6");
}

/* ---- reading a real socket ------------------------------------------------------------ */

static unsigned free_udp_port(void)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in in = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(in);
	assert_int_equal(bind(fd, (struct sockaddr *)&in, sizeof(in)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&in, &len), 0);
	close(fd);
	return ntohs(in.sin_port);
}

struct seen {
	size_t n, too_long;
	size_t lens[1024];
};

static void on_dgram(void *ctx, const char *data, size_t len)
{
	struct seen *s = ctx;
	(void)data;
	if (len > TRAFFIC_SYSLOG_MAX)
		s->too_long++;
	if (s->n < 1024)
		s->lens[s->n] = len;
	s->n++;
}

static void test_drain_bounded(void **st)
{
	(void)st;
	char spec[64], err[256] = "";
	unsigned port = free_udp_port();
	snprintf(spec, sizeof(spec), "127.0.0.1:%u", port);
	int fd = tsl_open(spec, err, sizeof(err));
	if (fd < 0)
		fail_msg("%s", err);
	/* a second bind of the same address fails with a message */
	char err2[256] = "";
	assert_int_equal(tsl_open(spec, err2, sizeof(err2)), -1);
	assert_non_null(strstr(err2, "cannot bind UDP"));
	int out = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	static char big[TRAFFIC_SYSLOG_MAX + 100];
	memset(big, 'x', sizeof(big));
	const char *line = NGINX_HDR "tether1 g 200 0.003s -";
	for (int i = 0; i < 700; i++) {
		const char *data = i == 3 ? big : line;
		size_t len = i == 3 ? sizeof(big) : (i == 4 ? TRAFFIC_SYSLOG_MAX : strlen(line));
		if (i == 4)
			data = big;
		assert_true(sendto(out, data, len, 0, (struct sockaddr *)&to, sizeof(to)) == (ssize_t)len);
	}
	struct seen s = { 0 };
	assert_int_equal(tsl_drain(fd, TRAFFIC_SYSLOG_BATCH, on_dgram, &s), TRAFFIC_SYSLOG_BATCH);
	assert_int_equal(s.n, TRAFFIC_SYSLOG_BATCH);
	assert_int_equal(s.too_long, 1);
	assert_true(s.lens[3] > TRAFFIC_SYSLOG_MAX);
	assert_int_equal(s.lens[4], TRAFFIC_SYSLOG_MAX);   /* at the bound: not too long */
	assert_int_equal(s.lens[0], strlen(line));
	assert_int_equal(tsl_drain(fd, TRAFFIC_SYSLOG_BATCH, on_dgram, &s), 700 - TRAFFIC_SYSLOG_BATCH);
	assert_int_equal(s.n, 700);
	/* nothing waits: it returns at once */
	assert_int_equal(tsl_drain(fd, TRAFFIC_SYSLOG_BATCH, on_dgram, &s), 0);
	close(out);
	close(fd);
}

/* ---- counting per generation ------------------------------------------------------------- */

static void feed(struct traffic_count *c, const char *gen, unsigned status, const char *lat, const char *route)
{
	char line[512];
	snprintf(line, sizeof(line), NGINX_HDR "tether1 %s %u %s %s", gen, status, lat, route);
	traffic_count_datagram(c, line, strlen(line));
}

static const struct traffic_route *route_of(const struct traffic_count *c, const char *name)
{
	for (size_t i = 0; i < c->t.n; i++)
		if (strcmp(c->t.routes[i].name, name) == 0)
			return &c->t.routes[i];
	return NULL;
}

static void test_count_generations(void **st)
{
	(void)st;
	struct traffic_count c;
	traffic_count_init(&c);
	/* no live generation known: nothing counts as its traffic */
	assert_false(traffic_count_live(&c, NULL, 1, 100.0));
	feed(&c, "aaa", 200, "0.001s", "route/x");
	assert_int_equal(c.other_gen, 1);
	assert_int_equal(c.t.n, 0);

	assert_true(traffic_count_live(&c, "aaa", 1, 110.0));
	assert_string_equal(c.t.gen, "aaa");
	assert_float_equal(c.t.since, 110.0, 0);
	feed(&c, "aaa", 200, "0.001s", "route/x");
	feed(&c, "aaa", 502, "12ms", "route/x");
	feed(&c, "aaa", 404, "0.000s", "-");
	feed(&c, "aa", 200, "0.001s", "route/x");     /* another generation: a prefix */
	feed(&c, "aaaa", 200, "0.001s", "route/x");   /* and a longer one */
	feed(&c, "bbb", 200, "0.001s", "route/x");
	assert_int_equal(c.other_gen, 4);
	const struct traffic_route *x = route_of(&c, "route/x");
	assert_non_null(x);
	assert_int_equal(x->requests, 2);
	assert_int_equal(x->errors, 1);
	assert_int_equal(route_of(&c, "-")->requests, 1);
	traffic_count_datagram(&c, "junk", 4);
	traffic_count_datagram(&c, "x", TRAFFIC_SYSLOG_MAX + 1);
	assert_int_equal(c.dropped[TD_MALFORMED], 1);
	assert_int_equal(c.dropped[TD_TOO_LONG], 1);
	assert_int_equal(c.t.dropped, 2);

	/* the same generation serving a newer version keeps its counters */
	assert_false(traffic_count_live(&c, "aaa", 2, 120.0));
	assert_int_equal(c.t.version, 2);
	assert_float_equal(c.t.since, 110.0, 0);
	assert_int_equal(route_of(&c, "route/x")->requests, 2);

	/* a new generation starts from zero; the old one's late lines are
	 * counted apart */
	assert_true(traffic_count_live(&c, "bbb", 3, 130.0));
	assert_string_equal(c.t.gen, "bbb");
	assert_int_equal(c.t.version, 3);
	assert_float_equal(c.t.since, 130.0, 0);
	assert_int_equal(c.t.n, 0);
	assert_int_equal(c.t.dropped, 0);
	assert_int_equal(c.dropped[TD_MALFORMED], 1);   /* the agent's counters stay */
	feed(&c, "aaa", 200, "0.001s", "route/x");
	assert_int_equal(c.other_gen, 5);
	feed(&c, "bbb", 200, "0.001s", "route/y");
	assert_int_equal(c.t.n, 1);
	assert_int_equal(route_of(&c, "route/y")->requests, 1);
	assert_null(route_of(&c, "route/x"));

	/* going back to a generation seen before is a new start too */
	assert_true(traffic_count_live(&c, "aaa", 4, 140.0));
	assert_int_equal(c.t.n, 0);
	traffic_count_release(&c);
}

static void test_count_full(void **st)
{
	(void)st;
	struct traffic_count c;
	traffic_count_init(&c);
	traffic_count_live(&c, GEN, 1, 1.0);
	char route[32];
	for (int i = 0; i < TRAFFIC_ROUTES_MAX; i++) {
		snprintf(route, sizeof(route), "route/r%d", i);
		feed(&c, GEN, 200, "1ms", route);
	}
	assert_int_equal(c.t.n, TRAFFIC_ROUTES_MAX);
	feed(&c, GEN, 200, "1ms", "route/one-more");
	assert_int_equal(c.dropped[TD_FULL], 1);
	feed(&c, GEN, 200, "1ms", "route/r0");   /* a known route still counts */
	assert_int_equal(route_of(&c, "route/r0")->requests, 2);
	assert_string_equal(traffic_drop_name(TD_MALFORMED), "malformed");
	assert_string_equal(traffic_drop_name(TD_TOO_LONG), "too_long");
	assert_string_equal(traffic_drop_name(TD_FULL), "full");
	traffic_count_release(&c);
}

/* The latency lands in the histogram bucket of its value in ms, whichever
 * the unit. */
static void test_count_latency_units(void **st)
{
	(void)st;
	struct traffic_count c;
	traffic_count_init(&c);
	traffic_count_live(&c, GEN, 1, 1.0);
	feed(&c, GEN, 200, "0.250s", "route/s");
	feed(&c, GEN, 200, "250ms", "route/ms");
	const struct traffic_route *s = route_of(&c, "route/s"), *ms = route_of(&c, "route/ms");
	assert_memory_equal(s->hist, ms->hist, sizeof(s->hist));
	assert_int_equal(s->hist[traffic_bucket(250.0)], 1);
	traffic_count_release(&c);
}

/* ---- counting by default: traffic/auto.c ------------------------------------ */

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void read_file(const char *path, char *out, size_t cap)
{
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	size_t n = fread(out, 1, cap - 1, f);
	out[n] = '\0';
	fclose(f);
}

/* The port an address spec names. */
static unsigned port_of(const char *spec)
{
	const char *colon = strrchr(spec, ':');
	assert_non_null(colon);
	return (unsigned)atoi(colon + 1);
}

static void test_auto_port(void **st)
{
	(void)st;
	char dir[256], path[512], addr[64], again[64], kept[128], err[512];
	assert_int_equal(test_tmpdir_make(dir, sizeof(dir), "auto"), 0);
	snprintf(path, sizeof(path), "%s/" TRAFFIC_AUTO_FILE, dir);
	/* the first start: a port the kernel picks, kept */
	int fd = traffic_auto_open(dir, addr, sizeof(addr), err, sizeof(err));
	if (fd < 0)
		fail_msg("traffic_auto_open: %s", err);
	assert_int_equal(strncmp(addr, "127.0.0.1:", 10), 0);
	assert_true(port_of(addr) > 0);
	read_file(path, kept, sizeof(kept));
	char want[80];
	snprintf(want, sizeof(want), "%s\n", addr);
	assert_string_equal(kept, want);
	/* it is bound: datagrams sent there arrive */
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port_of(addr)) };
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int out = socket(AF_INET, SOCK_DGRAM, 0);
	assert_true(sendto(out, "x", 1, 0, (struct sockaddr *)&to, sizeof(to)) == 1);
	char got[8];
	for (int i = 0; i < 200 && recv(fd, got, sizeof(got), 0) != 1; i++)
		usleep(5000);
	/* the next start (the first closed): the same port */
	close(fd);
	fd = traffic_auto_open(dir, again, sizeof(again), err, sizeof(err));
	assert_true(fd >= 0);
	assert_string_equal(again, addr);
	/* taken (the other still open): another, kept instead */
	int fd2 = traffic_auto_open(dir, again, sizeof(again), err, sizeof(err));
	assert_true(fd2 >= 0);
	assert_string_not_equal(again, addr);
	read_file(path, kept, sizeof(kept));
	snprintf(want, sizeof(want), "%s\n", again);
	assert_string_equal(kept, want);
	close(fd2);
	close(fd);
	/* what is not a loopback 127.0.0.1:PORT there is ignored: a fresh port */
	static const char *const junk[] = { "", "garbage\n", "10.0.0.1:5514\n", "127.0.0.1:0\n", "127.0.0.1:99999\n",
					    "[::1]:5514\n", "127.0.0.1:5514 trailing\n" };
	for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
		write_file(path, junk[i]);
		fd = traffic_auto_open(dir, again, sizeof(again), err, sizeof(err));
		assert_true(fd >= 0);
		assert_int_equal(strncmp(again, "127.0.0.1:", 10), 0);
		assert_true(port_of(again) > 0);
		close(fd);
	}
	close(out);
	/* a state directory it cannot write in: still a port, only not kept */
	char missing[300];
	snprintf(missing, sizeof(missing), "%s/none", dir);
	fd = traffic_auto_open(missing, again, sizeof(again), err, sizeof(err));
	assert_true(fd >= 0);
	close(fd);
	test_tmpdir_remove(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good_lines),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_addresses),
		cmocka_unit_test(test_drain_bounded),
		cmocka_unit_test(test_count_generations),
		cmocka_unit_test(test_count_full),
		cmocka_unit_test(test_count_latency_units),
		cmocka_unit_test(test_auto_port),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
