/* test_haproxy_stats.c: unit tests of agent/traffic/haproxy_answer.c (haproxy's
 * `show stat` and `show info` answers: a real answer of Debian's haproxy
 * 2.6, then every kind of bad answer) and of agent/traffic/haproxy_stats.c (the
 * base configuration's `stats socket` line; reading a socket that is
 * absent, silent or not haproxy, within the timeout; the commands' order:
 * a reload between them, an endless answer). The reading of a
 * real haproxy is tests/integration/t0952-haproxy-stats.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "traffic/haproxy_answer.h"
#include "traffic/haproxy_stats.h"
#include "tmpdir.h"
#include "traffic.h"

/* `show stat` of haproxy 2.6.12 (Debian 12) after GET /ok twice (200),
 * /bad (500) and /zz (404, tether_not_found) */
static const char real_stat[] =
	"# pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,dreq,dresp,ereq,econ,eresp,wretr,wredis,status,weight,act,bck,chkfail,chkdown,lastchg,downtime,qlimit,pid,iid,sid,throttle,lbtot,tracked,type,rate,rate_lim,rate_max,check_status,check_code,check_duration,hrsp_1xx,hrsp_2xx,hrsp_3xx,hrsp_4xx,hrsp_5xx,hrsp_other,hanafail,req_rate,req_rate_max,req_tot,cli_abrt,srv_abrt,comp_in,comp_out,comp_byp,comp_rsp,lastsess,last_chk,last_agt,qtime,ctime,rtime,ttime,agent_status,agent_code,agent_duration,check_desc,agent_desc,check_rise,check_fall,check_health,agent_rise,agent_fall,agent_health,addr,cookie,mode,algo,conn_rate,conn_rate_max,conn_tot,intercepted,dcon,dses,wrew,connect,reuse,cache_lookups,cache_hits,srv_icur,src_ilim,qtime_max,ctime_max,rtime_max,ttime_max,eint,idle_conn_cur,safe_conn_cur,used_conn_cur,need_conn_est,uweight,agg_server_status,agg_server_check_status,agg_check_status,-,ssl_sess,ssl_reused_sess,ssl_failed_handshake,h2_headers_rcvd,h2_data_rcvd,h2_settings_rcvd,h2_rst_stream_rcvd,h2_goaway_rcvd,h2_detected_conn_protocol_errors,h2_detected_strm_protocol_errors,h2_rst_stream_resp,h2_goaway_resp,h2_open_connections,h2_backend_open_streams,h2_total_connections,h2_backend_total_streams,h1_open_connections,h1_open_streams,h1_total_connections,h1_total_streams,h1_bytes_in,h1_bytes_out,h1_spliced_bytes_in,h1_spliced_bytes_out,\n"
	"tether_l_web,FRONTEND,,,0,1,9985,4,339,329,0,0,0,,,,,OPEN,,,,,,,,,1,2,0,,,,0,0,0,4,,,,0,2,0,1,1,0,,0,4,4,,,0,0,0,0,,,,,,,,,,,,,,,,,,,,,http,,0,4,4,0,0,0,0,,,0,0,,,,,,,0,,,,,,,,,-,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,4,4,327,301,0,0,\n"
	"tether_c_ok,BACKEND,0,0,0,1,999,2,170,148,0,0,,0,0,0,0,UP,0,0,0,,0,7,,,1,3,0,,0,,1,0,,2,,,,0,2,0,0,0,0,,,,2,0,0,0,0,0,0,-1,,,0,0,0,0,,,,,,,,,,,,,,http,,,,,,,,0,0,0,0,0,,,0,0,0,0,0,,,,,0,0,0,0,-,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,\n"
	"tether_c_bad,BACKEND,0,0,0,1,999,1,85,94,0,0,,0,0,0,0,UP,0,0,0,,0,7,,,1,4,0,,0,,1,0,,1,,,,0,0,0,0,1,0,,,,1,0,0,0,0,0,0,-1,,,0,0,0,0,,,,,,,,,,,,,,http,,,,,,,,0,0,0,0,0,,,0,0,0,0,0,,,,,0,0,0,0,-,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,\n"
	"tether_not_found,BACKEND,0,0,0,1,999,1,84,87,0,0,,0,0,0,0,UP,0,0,0,,0,7,,,1,5,0,,0,,1,0,,1,,,,0,0,0,1,0,0,,,,1,0,0,0,0,0,0,-1,,,0,0,0,0,,,,,,,,,,,,,,http,,,,,,,,0,0,0,0,0,,,0,0,0,0,0,,,,,0,0,0,0,-,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,\n"
	"\n";

#define HEADER "# pxname,svname,req_tot,hrsp_1xx,hrsp_2xx,hrsp_3xx,hrsp_4xx,hrsp_5xx,hrsp_other,ttime,\n"

static const struct traffic_route *find(const struct traffic *t, const char *name)
{
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->routes[i].name, name) == 0)
			return &t->routes[i];
	return NULL;
}

static void parse_ok(const char *text, struct traffic *t)
{
	char err[256] = "";
	int rc = haproxy_answer_stat(text, strlen(text), t, err, sizeof(err));
	if (rc != 0)
		fail_msg("refused: %s", err);
}

/* text is refused with a message containing want, and leaves no route */
static void refused(const char *text, size_t len, const char *want)
{
	struct traffic t;
	traffic_init(&t);
	char err[256] = "";
	assert_int_equal(haproxy_answer_stat(text, len, &t, err, sizeof(err)), -1);
	if (!strstr(err, want))
		fail_msg("error '%s' does not say '%s'", err, want);
	assert_int_equal(t.n, 0);
	traffic_release(&t);
}

static void refused_s(const char *text, const char *want)
{
	refused(text, strlen(text), want);
}

static void test_real_answer(void **st)
{
	(void)st;
	struct traffic t;
	traffic_init(&t);
	strcpy(t.gen, "kept");
	t.version = 7;
	parse_ok(real_stat, &t);
	/* tether_not_found, the frontend are not clusters */
	assert_int_equal(t.n, 2);
	const struct traffic_route *ok = find(&t, "cluster/ok"), *bad = find(&t, "cluster/bad");
	assert_non_null(ok);
	assert_non_null(bad);
	assert_int_equal(ok->requests, 2);
	assert_int_equal(ok->errors, 0);
	assert_true(ok->approx);
	assert_int_equal(ok->hist[traffic_bucket(0)], 2);
	assert_int_equal(bad->requests, 1);
	assert_int_equal(bad->errors, 1);
	/* the ids and the window are the caller's */
	assert_string_equal(t.gen, "kept");
	assert_int_equal(t.version, 7);
	traffic_release(&t);
}

static void test_columns_by_name(void **st)
{
	(void)st;
	struct traffic t;
	traffic_init(&t);
	/* another order, unknown columns, a quoted field with a comma */
	parse_ok("# ttime,x,hrsp_5xx,svname,req_tot,pxname,check_desc\n"
		 "25,?,3,BACKEND,10,tether_c_api,\"Layer4 \"\"ok\"\", fine\"\n"
		 "1,,1,e0,1,tether_c_api,\n"
		 "\n",
		 &t);
	assert_int_equal(t.n, 1);
	assert_string_equal(t.routes[0].name, "cluster/api");
	assert_int_equal(t.routes[0].requests, 10);
	assert_int_equal(t.routes[0].errors, 3);
	/* all the requests in the bucket of the mean */
	assert_int_equal(t.routes[0].hist[traffic_bucket(25)], 10);
	uint64_t sum = 0;
	for (size_t i = 0; i < TRAFFIC_BUCKETS; i++)
		sum += t.routes[0].hist[i];
	assert_int_equal(sum, 10);
	/* parsing again replaces the routes */
	parse_ok(HEADER "tether_c_b,BACKEND,4,,,,,,,7,\n", &t);
	assert_int_equal(t.n, 1);
	assert_string_equal(t.routes[0].name, "cluster/b");
	assert_int_equal(t.routes[0].hist[traffic_bucket(7)], 4);
	/* no requests: no latency */
	parse_ok(HEADER "tether_c_c,BACKEND,0,,,,,,,0,\n", &t);
	for (size_t i = 0; i < TRAFFIC_BUCKETS; i++)
		assert_int_equal(t.routes[0].hist[i], 0);
	/* a header and nothing else: no routes */
	parse_ok(HEADER "\n", &t);
	assert_int_equal(t.n, 0);
	traffic_release(&t);
}

static void test_req_tot_fallback(void **st)
{
	(void)st;
	struct traffic t;
	traffic_init(&t);
	parse_ok(HEADER "tether_c_a,BACKEND,,1,5,2,4,3,1,12,\n", &t);
	assert_int_equal(t.routes[0].requests, 16);
	assert_int_equal(t.routes[0].errors, 3);
	traffic_release(&t);
	refused_s("# pxname,svname,req_tot,hrsp_5xx,ttime\ntether_c_a,BACKEND,,3,1\n",
		  "req_tot is empty and there is no hrsp_1xx column");
	refused_s(HEADER "tether_c_a,BACKEND,,1,18446744073709551615,0,0,0,0,12,\n", "past 2^64");
	refused_s(HEADER "tether_c_a,BACKEND,,0,18446744073709551615,0,0,1,0,12,\n", "past 2^64");
}

static void test_missing_columns(void **st)
{
	(void)st;
	refused_s("# svname,req_tot,hrsp_5xx,ttime\nBACKEND,1,0,1\n", "no pxname column");
	refused_s("# pxname,req_tot,hrsp_5xx,ttime\ntether_c_a,1,0,1\n", "no svname column");
	refused_s("# pxname,svname,hrsp_5xx,ttime\ntether_c_a,BACKEND,0,1\n", "no req_tot column");
	refused_s("# pxname,svname,req_tot,ttime\ntether_c_a,BACKEND,1,1\n", "no hrsp_5xx column");
	refused_s("# pxname,svname,req_tot,hrsp_5xx\ntether_c_a,BACKEND,1,0\n", "no ttime column");
	/* a row of another width */
	refused_s(HEADER "tether_c_a,BACKEND,1,0,0,0,0,0,0,1\n", "10 fields where the header has 11");
	refused_s(HEADER "tether_c_a,BACKEND,1,0,0,0,0,0,0,1,,\n", "12 fields where the header has 11");
}

static void test_wrong_types(void **st)
{
	(void)st;
	refused_s(HEADER "tether_c_a,BACKEND,abc,,,,,0,,1,\n", "req_tot 'abc' is not a count");
	refused_s(HEADER "tether_c_a,BACKEND,-1,,,,,0,,1,\n", "req_tot '-1' is not a count");
	refused_s(HEADER "tether_c_a,BACKEND,1.5,,,,,0,,1,\n", "req_tot '1.5' is not a count");
	refused_s(HEADER "tether_c_a,BACKEND,1,,,,, 0,,1,\n", "hrsp_5xx ' 0' is not a count");
	refused_s(HEADER "tether_c_a,BACKEND,1,,,,,0,,0x10,\n", "ttime '0x10' is not a count");
	refused_s(HEADER "tether_c_a,BACKEND,1,,,,,0,,\"\",\n" "tether_c_a,BACKEND,1,,,,,0,,1\r,\n",
		  "a second time");
	refused_s(HEADER "tether_c_b,BACKEND,1,,,,,0,,1\r,\n", "ttime '1?' is not a count");
	/* a name that cannot be a cluster's, and an empty one */
	refused_s(HEADER "tether_c_a b,BACKEND,1,,,,,0,,1,\n", "backend 'tether_c_a b': not a cluster's name");
	refused_s(HEADER "tether_c_,BACKEND,1,,,,,0,,1,\n", "backend 'tether_c_': not a cluster's name");
	/* counts that do not hold together */
	refused_s(HEADER "tether_c_a,BACKEND,1,,,,,2,,1,\n", "2 5xx answers of 1 requests");
	refused_s(HEADER "tether_c_a,BACKEND,1,,,,,0,,1,\ntether_c_a,BACKEND,1,,,,,0,,1,\n",
		  "line 3: backend 'tether_c_a' a second time");
}

static void test_huge_numbers(void **st)
{
	(void)st;
	struct traffic t;
	traffic_init(&t);
	parse_ok(HEADER "tether_c_a,BACKEND,18446744073709551615,,,,,18446744073709551615,,"
			"18446744073709551615,\n",
		 &t);
	assert_true(t.routes[0].requests == UINT64_MAX);
	assert_true(t.routes[0].errors == UINT64_MAX);
	assert_true(t.routes[0].hist[TRAFFIC_BUCKETS - 1] == UINT64_MAX);
	traffic_release(&t);
	refused_s(HEADER "tether_c_a,BACKEND,18446744073709551616,,,,,0,,1,\n",
		  "req_tot '18446744073709551616' is not a count");
	refused_s(HEADER "tether_c_a,BACKEND,1,,,,,0,,99999999999999999999999999999999,\n", "is not a count");
}

static void test_bounds(void **st)
{
	(void)st;
	/* a row too long */
	size_t big = HAPROXY_LINE_MAX + 100;
	char *line = malloc(sizeof(HEADER) + big + 2);
	assert_non_null(line);
	strcpy(line, HEADER "tether_c_a,BACKEND,1,,,,,0,,1,");
	size_t l = strlen(line);
	memset(line + l, 'x', big - (l - strlen(HEADER)));
	l = strlen(HEADER) + big;
	line[l++] = '\n';
	line[l] = '\0';
	refused(line, l, "line 2: longer than 16384 bytes");
	free(line);
	/* too many columns */
	struct buf b = BUF_INIT;
	buf_puts(&b, "# pxname,svname,req_tot,hrsp_5xx,ttime");
	for (int i = 0; i < HAPROXY_COLUMNS_MAX; i++)
		buf_puts(&b, ",c");
	buf_puts(&b, "\n");
	refused(b.data, b.len, "the header: more than 1024 columns");
	buf_release(&b);
	/* an answer larger than the bound */
	size_t huge = HAPROXY_ANSWER_MAX + 1;
	char *h = malloc(huge);
	assert_non_null(h);
	memset(h, '\n', huge);
	memcpy(h, HEADER, strlen(HEADER));
	refused(h, huge, "an answer of more than");
	free(h);
	/* more clusters than the routes counted */
	buf_puts(&b, HEADER);
	for (int i = 0; i <= TRAFFIC_ROUTES_MAX; i++)
		buf_printf(&b, "tether_c_c%d,BACKEND,1,,,,,0,,1,\n", i);
	refused(b.data, b.len, "more backends than the routes counted");
	buf_release(&b);
	/* a NUL byte */
	static const char nul[] = HEADER "tether_c_a,BACKEND,1\0,,,,,0,,1,\n";
	refused(nul, sizeof(nul) - 1, "a NUL byte");
}

static void test_not_csv(void **st)
{
	(void)st;
	refused("", 0, "an empty answer");
	refused_s("Unknown command. Please enter one of the following commands only :\n",
		  "not a `show stat` answer: 'Unknown command. Please enter one of the followi...'");
	refused_s("Permission denied\n", "not a `show stat` answer: 'Permission denied'");
	refused_s("\n\n", "no header line");
	refused_s("\x01\xff\n", "not a `show stat` answer: '?" "?'");
	/* cut short */
	refused(real_stat, strlen(real_stat) - 5, "does not end with a newline");
	refused_s(HEADER HEADER, "line 2: a second header");
	refused_s(HEADER "tether_c_a,\"BACKEND,1,,,,,0,,1,\n", "line 2: a quoted field is not closed");
	refused_s(HEADER "tether_c_a,\"BACKEND\"x,1,,,,,0,,1,\n", "line 2: text after a quoted field");
	refused_s(HEADER "tether_c_a,BACK\"END,1,,,,,0,,1,\n", "line 2: a quote inside a field");
	refused_s("# \"pxname,svname\n", "the header: a quoted field is not closed");
}

static void test_pid(void **st)
{
	(void)st;
	char err[256] = "";
	long pid = 0;
	static const char info[] = "Name: HAProxy\nVersion: 2.6.12-1+deb12u4\nNbthread: 2\nPid: 28986\nUptime_sec: 6\n\n";
	assert_int_equal(haproxy_answer_pid(info, strlen(info), &pid, err, sizeof(err)), 0);
	assert_int_equal(pid, 28986);
	/* the last line without its newline */
	assert_int_equal(haproxy_answer_pid("Pid: 42", 7, &pid, err, sizeof(err)), 0);
	assert_int_equal(pid, 42);
	static const struct {
		const char *text, *want;
	} bad[] = {
		{ "", "not a `show info` answer (no Pid): ''" },
		{ "Permission denied\n", "not a `show info` answer (no Pid): 'Permission denied'" },
		{ "Pid: \n", "Pid '' is not a process id" },
		{ "Pid: abc\n", "Pid 'abc' is not a process id" },
		{ "Pid: 0\n", "Pid '0' is not a process id" },
		{ "Pid: -5\n", "Pid '-5' is not a process id" },
		{ "Pid: 99999999999\n", "Pid '99999999999' is not a process id" },
		{ "Pid: 1\nPid: 2\n", "two Pid lines" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(haproxy_answer_pid(bad[i].text, strlen(bad[i].text), &pid, err, sizeof(err)), -1);
		if (!strstr(err, bad[i].want))
			fail_msg("'%s': error '%s' does not say '%s'", bad[i].text, err, bad[i].want);
	}
}

/* ---- traffic/haproxy_stats.c --------------------------------------------- */

struct dir {
	char path[256];
};

static int setup(void **state)
{
	struct dir *d = calloc(1, sizeof(*d));
	if (!d || test_tmpdir_make(d->path, sizeof(d->path), "hapstats") < 0)
		return -1;
	*state = d;
	return 0;
}

static int teardown(void **state)
{
	struct dir *d = *state;
	test_tmpdir_remove(d->path);
	free(d);
	return 0;
}

static bool declared_in(const struct dir *d, const char *cfg, const char *sock)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/base.cfg", d->path);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(cfg, f);
	fclose(f);
	return haproxy_stats_declared(path, sock);
}

static void test_declared(void **state)
{
	const struct dir *d = *state;
	const char *s = "/run/tether/haproxy.sock";
	assert_true(declared_in(d, "global\n    stats socket /run/tether/haproxy.sock mode 600 level admin\n", s));
	assert_true(declared_in(d, "global\n\tstats   socket\t/run/tether/haproxy.sock\n", s));
	assert_true(declared_in(d, "global\nstats socket /run/tether/haproxy.sock # ours\n", s));
	assert_true(declared_in(d, "global\n    stats socket \"/run/tether/haproxy.sock\" level user\n", s));
	assert_true(declared_in(d, "global\n    stats socket unix@/run/tether/haproxy.sock\n", s));
	assert_true(declared_in(d, "global\n    stats socket /run/other.sock\n    stats socket /run/tether/haproxy.sock\n",
				s));
	assert_true(declared_in(d, "global\n    stats socket /run/tether/haproxy.sock", s)); /* no final newline */
	/* comments, other sockets, other directives */
	assert_false(declared_in(d, "global\n    # stats socket /run/tether/haproxy.sock\n", s));
	assert_false(declared_in(d, "global\n#stats socket /run/tether/haproxy.sock\n", s));
	assert_false(declared_in(d, "global\n    stats socket /run/tether/haproxy.sock.old\n", s));
	assert_false(declared_in(d, "global\n    stats socket /run/other.sock\n", s));
	assert_false(declared_in(d, "global\n    stats timeout 30s\n    stats socket\n", s));
	assert_false(declared_in(d, "global\n    log /run/tether/haproxy.sock local0\n", s));
	assert_false(declared_in(d, "", s));
	/* no file */
	char path[300];
	snprintf(path, sizeof(path), "%s/absent.cfg", d->path);
	assert_false(haproxy_stats_declared(path, s));
	assert_false(haproxy_stats_declared(NULL, s));
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* a listening unix socket at DIR/name */
static int listener(const struct dir *d, const char *name, char *path, size_t cap)
{
	snprintf(path, cap, "%s/%s", d->path, name);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 8), 0);
	return fd;
}

static void test_read_failures(void **state)
{
	const struct dir *d = *state;
	char path[300], err[256] = "";
	struct traffic t;
	traffic_init(&t);
	/* nothing there */
	snprintf(path, sizeof(path), "%s/absent.sock", d->path);
	assert_int_equal(haproxy_stats_read(path, 1, &t, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "absent.sock: connect: No such file or directory"));
	/* a path too long for a unix socket */
	char longp[200];
	memset(longp, 'a', sizeof(longp) - 1);
	longp[sizeof(longp) - 1] = '\0';
	assert_int_equal(haproxy_stats_read(longp, 1, &t, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "the path is too long for a unix socket"));
	/* a socket nobody answers on (a stuck haproxy): the timeout, not more */
	int fd = listener(d, "silent.sock", path, sizeof(path));
	double t0 = now_s();
	assert_int_equal(haproxy_stats_read(path, 0.3, &t, err, sizeof(err)), -1);
	double took = now_s() - t0;
	assert_true(took >= 0.25 && took < 2);
	assert_non_null(strstr(err, "the answer to 'show info': timed out"));
	close(fd);
	traffic_release(&t);
}

/* a socket that answers, once, what is not haproxy's answer (a child
 * process: one connection, then exits) */
static void test_read_not_haproxy(void **state)
{
	const struct dir *d = *state;
	char path[300], err[256] = "";
	int fd = listener(d, "other.sock", path, sizeof(path));
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int c = accept(fd, NULL, NULL);
		char in[64];
		ssize_t n = read(c, in, sizeof(in));
		(void)n;
		static const char say[] = "Pid: 4242\n";
		n = write(c, say, sizeof(say) - 1);
		close(c);
		c = accept(fd, NULL, NULL);
		n = read(c, in, sizeof(in));
		static const char what[] = "HTTP/1.1 400 Bad Request\r\n\r\n";
		n = write(c, what, sizeof(what) - 1);
		close(c);
		_exit(0);
	}
	close(fd);
	struct traffic t;
	traffic_init(&t);
	assert_int_equal(haproxy_stats_read(path, 2, &t, err, sizeof(err)), -1);
	if (!strstr(err, "not a `show stat` answer: 'HTTP/1.1 400 Bad Request?'"))
		fail_msg("error: %s", err);
	assert_int_equal(t.n, 0);
	assert_string_equal(t.gen, "");
	traffic_release(&t);
	int status;
	waitpid(pid, &status, 0);
}

/* A socket that gives each connection the next of answers (a child
 * process), as haproxy would without prompt mode: one command, one answer,
 * closed. Returns the child's pid. */
static pid_t serve(int fd, const char *const *answers, size_t n, size_t big)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid)
		return pid;
	for (size_t i = 0; i < n; i++) {
		int c = accept(fd, NULL, NULL);
		char in[64];
		ssize_t r = read(c, in, sizeof(in));
		(void)r;
		if (answers[i]) {
			r = write(c, answers[i], strlen(answers[i]));
		} else {
			/* big bytes of a header line that does not end */
			char chunk[65536];
			memset(chunk, 'x', sizeof(chunk));
			for (size_t w = 0; w < big; w += sizeof(chunk))
				if (write(c, chunk, sizeof(chunk)) < 0)
					break;
		}
		close(c);
	}
	_exit(0);
}

static void test_read_protocol(void **state)
{
	const struct dir *d = *state;
	char path[300], err[256] = "";
	struct traffic t;
	traffic_init(&t);
	int status;
	/* a whole read: the counters, named after the worker */
	int fd = listener(d, "good.sock", path, sizeof(path));
	static const char *const good[] = { "Pid: 77\n", HEADER "tether_c_a,BACKEND,5,,,,,1,,3,\n\n", "Pid: 77\n" };
	pid_t pid = serve(fd, good, 3, 0);
	if (haproxy_stats_read(path, 2, &t, err, sizeof(err)) != 0)
		fail_msg("refused: %s", err);
	assert_string_equal(t.gen, "pid77");
	assert_int_equal(t.n, 1);
	assert_string_equal(t.routes[0].name, "cluster/a");
	assert_int_equal(t.routes[0].requests, 5);
	assert_int_equal(t.routes[0].errors, 1);
	waitpid(pid, &status, 0);
	close(fd);
	/* another worker answered the second show info: a reload in between */
	fd = listener(d, "reload.sock", path, sizeof(path));
	static const char *const reload[] = { "Pid: 77\n", HEADER "tether_c_a,BACKEND,5,,,,,1,,3,\n", "Pid: 78\n" };
	pid = serve(fd, reload, 3, 0);
	assert_int_equal(haproxy_stats_read(path, 2, &t, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "haproxy reloaded while it was read (worker 77, then 78)"));
	assert_int_equal(t.n, 0);
	assert_string_equal(t.gen, "");
	waitpid(pid, &status, 0);
	close(fd);
	/* an endless answer: read up to the bound, then refused */
	fd = listener(d, "huge.sock", path, sizeof(path));
	static const char *const huge[] = { "Pid: 77\n", NULL };
	pid = serve(fd, huge, 2, HAPROXY_ANSWER_MAX + 65536);
	assert_int_equal(haproxy_stats_read(path, 5, &t, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "the answer to 'show stat' is longer than 4194304 bytes"));
	waitpid(pid, &status, 0);
	close(fd);
	traffic_release(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_real_answer),
		cmocka_unit_test(test_columns_by_name),
		cmocka_unit_test(test_req_tot_fallback),
		cmocka_unit_test(test_missing_columns),
		cmocka_unit_test(test_wrong_types),
		cmocka_unit_test(test_huge_numbers),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_not_csv),
		cmocka_unit_test(test_pid),
		cmocka_unit_test_setup_teardown(test_declared, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_failures, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_not_haproxy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_protocol, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
