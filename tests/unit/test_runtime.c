/* test_runtime.c: unit tests of haproxy's runtime updates (tetherd
 * --runtime-api): agent/consumer/runtime.c's plan -- which candidates change
 * only clusters' endpoints (and what it says of those that do not) -- and
 * its commands for what the running haproxy holds; runtime_state.c's
 * parser of `show servers state` (a real answer of Debian's haproxy 2.6,
 * then every kind of bad answer) and its slot-by-slot comparison with what
 * the file says (addresses as addresses, host names by srv_fqdn, ports,
 * weights, maintenance and drain, free slots); and runtime_api.c against a
 * fake haproxy on a unix socket: applied and read back, an exhausted
 * template (nothing sent), a refused command, a read-back that differs, a
 * dead socket. The states are built the way the agent builds them: push
 * JSON, push_decode, candidate_build, state_commit. A real haproxy is
 * tests/integration/t0325-haproxy-runtime.sh's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "buf.h"
#include "consumer/runtime.h"
#include "state/push.h"
#include "state/state.h"
#include "tmpdir.h"

/* ---- states and candidates ------------------------------------------------------ */

#define ROUTE "{\"listener\":\"web\",\"cluster\":\"web\"}"
#define LISTENER "{\"address\":\"127.0.0.1\",\"port\":8080}"
#define WEB1 "{\"lb\":\"round_robin\",\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":80}]}"

/* s: version 1 holding cluster/web (body web), cluster/api, listener/web,
 * route/web, and the items extra (",{...}" or ""). */
static void base_state_with(struct state *s, const char *web, const char *extra)
{
	struct buf b = BUF_INIT;
	buf_printf(&b, "{\"version\":1,\"base\":0,\"full\":true,\"nonce\":\"n1\",\"removed\":[],\"upserts\":["
		       "{\"name\":\"cluster/web\",\"version\":1,\"body\":%s},"
		       "{\"name\":\"cluster/api\",\"version\":1,\"body\":{\"endpoints\":[{\"address\":\"10.0.1.1\",\"port\":81}]}},"
		       "{\"name\":\"listener/web\",\"version\":1,\"body\":" LISTENER "},"
		       "{\"name\":\"route/web\",\"version\":1,\"body\":" ROUTE "}%s]}",
		   web, extra);
	struct push p;
	struct candidate c;
	char err[512];
	state_init(s);
	if (push_decode(b.data, b.len, NULL, &p, err, sizeof(err)) < 0 || candidate_build(s, &p, 0, &c, err, sizeof(err)) < 0)
		fail_msg("base state: %s", err);
	state_commit(s, &c);
	candidate_release(&c);
	push_release(&p);
	buf_release(&b);
}

static void base_state(struct state *s, const char *web)
{
	base_state_with(s, web, "");
}

/* c: a delta on s upserting ups (",{...}" items, JSON without the leading
 * comma) and removing rm (a JSON array's inside). */
static void delta(const struct state *s, const char *ups, const char *rm, struct candidate *c)
{
	struct buf b = BUF_INIT;
	buf_printf(&b, "{\"version\":2,\"base\":1,\"full\":false,\"nonce\":\"n2\",\"removed\":[%s],\"upserts\":[%s]}", rm,
		   ups);
	struct push p;
	char err[512];
	if (push_decode(b.data, b.len, NULL, &p, err, sizeof(err)) < 0 || candidate_build(s, &p, 0, c, err, sizeof(err)) < 0)
		fail_msg("delta: %s\n%s", err, b.data);
	push_release(&p);
	buf_release(&b);
}

/* The plan of the delta ups/rm on a state whose cluster/web is web. */
static int plan_of(const char *web, const char *ups, const char *rm, struct rt_plan *p, char *why, size_t whylen)
{
	struct state s;
	struct candidate c;
	base_state(&s, web);
	delta(&s, ups, rm, &c);
	why[0] = '\0';
	int rc = runtime_plan(&s, &c, p, why, whylen);
	candidate_release(&c);
	state_release(&s);
	return rc;
}

static void not_eligible(const char *web, const char *ups, const char *rm, const char *want)
{
	struct rt_plan p;
	char why[512];
	assert_int_equal(plan_of(web, ups, rm, &p, why, sizeof(why)), 0);
	assert_string_equal(why, want);
	assert_int_equal(p.n, 0);
	assert_null(p.clusters);
}

static void test_plan_endpoints_only(void **state)
{
	(void)state;
	struct rt_plan p;
	char why[512];
	/* a port, an address and a weight changed, an endpoint added */
	assert_int_equal(plan_of(WEB1,
				 "{\"name\":\"cluster/web\",\"body\":{\"lb\":\"round_robin\",\"endpoints\":["
				 "{\"address\":\"10.0.0.2\",\"port\":8080,\"weight\":3},{\"address\":\"::1\",\"port\":9000},"
				 "{\"address\":\"backend.internal\",\"port\":9001}]}}",
				 "", &p, why, sizeof(why)),
			 1);
	assert_int_equal(p.n, 1);
	const struct rt_cluster *c = &p.clusters[0];
	assert_string_equal(c->name, "cluster/web");
	assert_string_equal(c->backend, "tether_c_web");
	assert_int_equal(c->nold, 1);
	assert_string_equal(c->old[0].addr, "10.0.0.1");
	assert_int_equal(c->old[0].port, 80);
	assert_int_equal(c->old[0].weight, 1);
	assert_int_equal(c->nwant, 3);
	assert_string_equal(c->want[0].addr, "10.0.0.2");
	assert_int_equal(c->want[0].port, 8080);
	assert_int_equal(c->want[0].weight, 3);
	assert_string_equal(c->want[1].addr, "::1");
	assert_int_equal(c->want[1].weight, 1);
	assert_string_equal(c->want[2].addr, "backend.internal");
	runtime_plan_release(&p);
	assert_null(p.clusters);

	/* every endpoint removed; two clusters at once */
	assert_int_equal(plan_of(WEB1,
				 "{\"name\":\"cluster/web\",\"body\":{\"lb\":\"round_robin\",\"endpoints\":[]}},"
				 "{\"name\":\"cluster/api\",\"body\":{\"endpoints\":[{\"address\":\"10.0.1.2\",\"port\":81}]}}",
				 "", &p, why, sizeof(why)),
			 1);
	assert_int_equal(p.n, 2);
	size_t web = strcmp(p.clusters[0].name, "cluster/web") == 0 ? 0 : 1;
	assert_int_equal(p.clusters[web].nwant, 0);
	assert_int_equal(p.clusters[web].nold, 1);
	assert_string_equal(p.clusters[1 - web].backend, "tether_c_api");
	assert_string_equal(p.clusters[1 - web].want[0].addr, "10.0.1.2");
	runtime_plan_release(&p);
}

/* A route with a haproxy backend of its own (a timeout, retries,
 * websocket: tether_r_NAME, its cluster's servers) is planned with its
 * cluster: the runtime API updates both backends alike. */
static void test_plan_route_backends(void **state)
{
	(void)state;
	struct state s;
	struct candidate c;
	struct rt_plan p;
	char why[256];
	base_state_with(&s, WEB1,
			",{\"name\":\"route/slow\",\"version\":1,\"body\":{\"listener\":\"web\",\"path\":\"/s\","
			"\"cluster\":\"web\",\"timeout\":{\"read\":1}}}"
			",{\"name\":\"route/ws\",\"version\":1,\"body\":{\"listener\":\"web\",\"path\":\"/w\","
			"\"cluster\":\"web\",\"websocket\":true}}"
			",{\"name\":\"route/hdr\",\"version\":1,\"body\":{\"listener\":\"web\",\"path\":\"/h\","
			"\"cluster\":\"web\",\"strip_prefix\":true}}"
			",{\"name\":\"route/other\",\"version\":1,\"body\":{\"listener\":\"web\",\"path\":\"/o\","
			"\"cluster\":\"api\",\"retries\":2}}");
	delta(&s, "{\"name\":\"cluster/web\",\"body\":{\"lb\":\"round_robin\",\"endpoints\":[{\"address\":\"10.0.0.2\","
		  "\"port\":80},{\"address\":\"10.0.0.3\",\"port\":80}]}}", "", &c);
	assert_int_equal(runtime_plan(&s, &c, &p, why, sizeof(why)), 1);
	assert_int_equal(p.n, 3);
	assert_string_equal(p.clusters[0].backend, "tether_c_web");
	bool slow = false, ws = false;
	for (size_t i = 1; i < p.n; i++) {
		assert_string_equal(p.clusters[i].name, "cluster/web");
		slow |= strcmp(p.clusters[i].backend, "tether_r_slow") == 0;
		ws |= strcmp(p.clusters[i].backend, "tether_r_ws") == 0;
		assert_int_equal(p.clusters[i].nold, 1);
		assert_string_equal(p.clusters[i].old[0].addr, "10.0.0.1");
		assert_int_equal(p.clusters[i].nwant, 2);
		assert_string_equal(p.clusters[i].want[1].addr, "10.0.0.3");
	}
	assert_true(slow && ws);
	struct rt_servers none = { 0 };
	struct buf cmds = BUF_INIT;
	runtime_commands(&p.clusters[1], &none, &cmds);
	assert_non_null(strstr(cmds.data, "set server tether_r_"));
	buf_release(&cmds);
	runtime_plan_release(&p);
	candidate_release(&c);
	state_release(&s);
}

static void test_plan_refusals(void **state)
{
	(void)state;
	/* another field of the cluster */
	not_eligible(WEB1, "{\"name\":\"cluster/web\",\"body\":{\"lb\":\"least_conn\",\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":80}]}}",
		     "", "cluster/web changes more than its endpoints");
	not_eligible(WEB1, "{\"name\":\"cluster/web\",\"body\":{\"lb\":\"random\",\"endpoints\":[{\"address\":\"10.0.0.9\",\"port\":80}]}}",
		     "", "cluster/web changes more than its endpoints");
	/* lb left out is another body, though it renders the same */
	not_eligible(WEB1, "{\"name\":\"cluster/web\",\"body\":{\"endpoints\":[{\"address\":\"10.0.0.9\",\"port\":80}]}}",
		     "", "cluster/web changes more than its endpoints");
	/* anything but a cluster */
	not_eligible(WEB1, "{\"name\":\"route/web\",\"body\":{\"listener\":\"web\",\"cluster\":\"api\"}}", "",
		     "route/web changes");
	not_eligible(WEB1, "{\"name\":\"listener/web\",\"body\":{\"address\":\"127.0.0.1\",\"port\":8081}}", "",
		     "listener/web changes");
	not_eligible(WEB1, "{\"name\":\"file/x\",\"body\":{\"path\":\"x\",\"content\":\"y\"}}", "", "file/x is added");
	/* a cluster added or removed */
	not_eligible(WEB1, "{\"name\":\"cluster/new\",\"body\":{\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":80}]}}",
		     "", "cluster/new is added");
	not_eligible(WEB1, "", "\"cluster/api\"", "cluster/api is removed");
	/* endpoints beside another change */
	not_eligible(WEB1,
		     "{\"name\":\"cluster/web\",\"body\":{\"lb\":\"round_robin\",\"endpoints\":[{\"address\":\"10.0.0.9\",\"port\":80}]}},"
		     "{\"name\":\"route/other\",\"body\":{\"listener\":\"web\",\"path\":\"/o\",\"cluster\":\"api\"}}",
		     "", "route/other is added");
	/* nothing at all */
	struct candidate c = { 0 };
	struct rt_plan p;
	char why[128];
	assert_int_equal(runtime_plan(NULL, &c, &p, why, sizeof(why)), 0);
	assert_string_equal(why, "nothing changes");
}

/* ---- show servers state ---------------------------------------------------------- */

#define HEADER                                                                                                    \
	"# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight srv_iweight "              \
	"srv_time_since_last_change srv_check_status srv_check_result srv_check_health srv_check_state "              \
	"srv_agent_state bk_f_forced_id srv_f_forced_id srv_fqdn srv_port srvrecord srv_use_ssl srv_check_port "      \
	"srv_check_addr srv_agent_addr srv_agent_port\n"

/* haproxy 2.6.12 (Debian 12): e0 ready, e1 configured by a host name and
 * set to another address, e2 made ready at runtime (weight 7), e3 an IPv6
 * address in maintenance, e4 and e5 free (disabled) */
static const char real_state[] =
	"1\n" HEADER
	"3 tether_c_web 1 e0 127.0.0.1 2 0 1 1 1 1 0 2 0 0 0 0 - 18432 - 0 0 - - 0\n"
	"3 tether_c_web 2 e1 127.0.0.9 2 0 2 2 7 1 0 2 0 0 0 0 localhost 99 - 0 0 - - 0\n"
	"3 tether_c_web 3 e2 127.0.0.2 2 4 7 1 2 1 0 0 8 0 0 0 - 8080 - 0 0 - - 0\n"
	"3 tether_c_web 4 e3 ::1 0 5 1 1 7 1 0 0 8 0 0 0 - 80 - 0 0 - - 0\n"
	"3 tether_c_web 5 e4 127.0.0.1 0 5 1 1 7 1 0 0 8 0 0 0 - 1 - 0 0 - - 0\n"
	"3 tether_c_web 6 e5 127.0.0.1 0 5 1 1 7 1 0 0 8 0 0 0 - 1 - 0 0 - - 0\n"
	"\n";

static void parse_ok(const char *text, struct rt_servers *s)
{
	char err[256] = "";
	if (runtime_servers_parse(text, strlen(text), "tether_c_web", s, err, sizeof(err)) < 0)
		fail_msg("refused: %s", err);
}

static void refused(const char *text, size_t len, const char *want)
{
	struct rt_servers s;
	char err[256] = "";
	assert_int_equal(runtime_servers_parse(text, len, "tether_c_web", &s, err, sizeof(err)), -1);
	if (!strstr(err, want))
		fail_msg("expected '%s' in '%s'", want, err);
	assert_int_equal(s.n, 0);
	assert_null(s.v);
}

static void refused_s(const char *text, const char *want)
{
	refused(text, strlen(text), want);
}

static void test_parse_real(void **state)
{
	(void)state;
	struct rt_servers s;
	parse_ok(real_state, &s);
	assert_int_equal(s.n, 6);
	assert_int_equal(runtime_slots(&s), 6);
	const struct rt_server *e1 = runtime_slot(&s, 1);
	assert_non_null(e1);
	assert_string_equal(e1->name, "e1");
	assert_string_equal(e1->addr, "127.0.0.9");
	assert_string_equal(e1->fqdn, "localhost");
	assert_int_equal(e1->port, 99);
	assert_int_equal(e1->uweight, 2);
	assert_int_equal(e1->admin, 0);
	assert_string_equal(runtime_slot(&s, 0)->fqdn, "");
	assert_int_equal(runtime_slot(&s, 2)->admin, 4);
	assert_int_equal(runtime_slot(&s, 2)->uweight, 7);
	assert_string_equal(runtime_slot(&s, 3)->addr, "::1");
	assert_int_equal(runtime_slot(&s, 5)->admin, 5);
	assert_null(runtime_slot(&s, 6));
	runtime_servers_release(&s);
	assert_null(s.v);

	/* the columns found by name, in any order; srv_fqdn may be absent */
	parse_ok("1\n# srv_port srv_uweight srv_admin_state srv_addr srv_name be_name\n"
		 "8080 3 0 10.0.0.1 e0 tether_c_web\n"
		 "1 1 5 127.0.0.1 e2 tether_c_web\n"
		 "80 1 0 10.0.0.3 backup tether_c_web\n"
		 "80 1 0 10.0.0.4 e01 tether_c_web\n",
		 &s);
	assert_int_equal(s.n, 4);
	assert_int_equal(runtime_slot(&s, 0)->port, 8080);
	assert_int_equal(runtime_slot(&s, 0)->uweight, 3);
	assert_string_equal(runtime_slot(&s, 0)->fqdn, "");
	assert_int_equal(s.v[2].slot, -1);   /* not ours */
	assert_int_equal(s.v[3].slot, -1);   /* a leading zero is another name */
	assert_int_equal(runtime_slots(&s), 1);   /* e1 is missing: e0 only */
	assert_non_null(runtime_slot(&s, 2));
	runtime_servers_release(&s);

	/* a backend with no server */
	parse_ok("1\n" HEADER "\n", &s);
	assert_int_equal(s.n, 0);
	assert_int_equal(runtime_slots(&s), 0);
	runtime_servers_release(&s);
}

static void test_parse_refused(void **state)
{
	(void)state;
	refused_s("", "the answer is empty");
	refused_s("\n\n", "the answer is empty");
	refused_s("Can't find backend.\n\n", "haproxy answered 'Can't find backend.', not a servers state");
	refused_s("Permission denied\n", "haproxy answered 'Permission denied'");
	refused_s("2\n" HEADER, "haproxy answered '2'");
	refused_s("1\n", "the answer ends before its header");
	refused_s("1\nbe_id be_name\n", "the second line is not the header");
	refused_s("1\n# be_name srv_name srv_addr srv_admin_state srv_uweight\n", "the header has no srv_port column");
	refused_s("1\n# be_name srv_name srv_name srv_addr srv_admin_state srv_uweight srv_port\n",
		  "the header names srv_name twice");
	refused_s("1\n#  be_name\n", "the second line is not the header");
	const char *rows[][2] = {
		{ "3 tether_c_web 1 e0 127.0.0.1 2 0 1 1 1 1 0 2 0 0 0 0 - 18432 - 0 0 - -\n", "line 3 has not the 25 columns" },
		{ "3 tether_c_web 1 e0 127.0.0.1 2 0 1 1 1 1 0 2 0 0 0 0 - 18432 - 0 0 - - 0 9\n", "line 3 has not the 25 columns" },
		{ "3 tether_c_web 1 e0 127.0.0.1 2 0 1 1 1 1 0 2 0 0 0 0 - 18432 - 0 0 - -  0\n", "line 3 has not the 25 columns" },
		{ "3 tether_c_api 1 e0 127.0.0.1 2 0 1 1 1 1 0 2 0 0 0 0 - 18432 - 0 0 - - 0\n", "line 3 is of backend 'tether_c_api'" },
		{ "3 tether_c_web 1 e0 127.0.0.1 2 0 1 1 1 1 0 2 0 0 0 0 - 70000 - 0 0 - - 0\n", "srv_port, srv_uweight or srv_admin_state" },
		{ "3 tether_c_web 1 e0 127.0.0.1 2 0 300 1 1 1 0 2 0 0 0 0 - 80 - 0 0 - - 0\n", "srv_port, srv_uweight or srv_admin_state" },
		{ "3 tether_c_web 1 e0 127.0.0.1 2 256 1 1 1 1 0 2 0 0 0 0 - 80 - 0 0 - - 0\n", "srv_port, srv_uweight or srv_admin_state" },
		{ "3 tether_c_web 1 e0 127.0.0.1 2 -1 1 1 1 1 0 2 0 0 0 0 - 80 - 0 0 - - 0\n", "srv_port, srv_uweight or srv_admin_state" },
		{ "3 tether_c_web 1 e0 127.0.0.1 2 0x1 1 1 1 1 0 2 0 0 0 0 - 80 - 0 0 - - 0\n", "srv_port, srv_uweight or srv_admin_state" },
		{ "3 tether_c_web 1 e0 127.0.0.1 2 0 1 1 1 1 0 2 0 0 0 0 - 80 - 0 0 - - 0\n"
		  "3 tether_c_web 2 e0 127.0.0.2 2 0 1 1 1 1 0 2 0 0 0 0 - 80 - 0 0 - - 0\n", "line 4: server e0 is listed twice" },
		{ "3 tether_c_web 1 e0 127.0.0.1\t2 0 1 1 1 1 0 2 0 0 0 0 - 80 - 0 0 - - 0\n", "line 3 holds a byte that is not printable" },
		{ "3 tether_c_web 1 e0 127.0.0.1 2 0 1 1 1 1 0 2 0 0 0 0 - 80 - 0 0 - - \x80\n", "line 3 holds a byte that is not printable" },
		{ "3 tether_c_web 1 e0 1234567890123456789012345678901234567890123456789012345678901234567890 2 0 1 1 1 1 0 2 0 0 0 0 - 80 - 0 0 - - 0\n",
		  "line 3: a name or an address is too long" },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct buf b = BUF_INIT;
		buf_printf(&b, "1\n" HEADER "%s", rows[i][0]);
		refused(b.data, b.len, rows[i][1]);
		buf_release(&b);
	}
	/* a NUL byte, and a line over RT_LINE_MAX */
	char nul[] = "1\n# be_name srv_name srv_addr srv_admin_state srv_uweight srv_port\ntether_c_web e0 1.2.3.4 0 1 8\0\n";
	refused(nul, sizeof(nul) - 1, "line 3 holds a byte that is not printable");
	struct buf b = BUF_INIT;
	buf_puts(&b, "1\n" HEADER);
	for (int i = 0; i < RT_LINE_MAX + 1; i++)
		buf_putc(&b, 'x');
	buf_putc(&b, '\n');
	refused(b.data, b.len, "line 3 is longer than 4096 bytes");
	buf_release(&b);
}

/* ---- the comparison -------------------------------------------------------------- */

static struct rt_endpoint ep(const char *addr, unsigned port, unsigned weight)
{
	struct rt_endpoint e = { .port = port, .weight = weight };
	snprintf(e.addr, sizeof(e.addr), "%s", addr);
	return e;
}

/* A cluster of backend tether_c_web: old and want endpoints (borrowed). */
static struct rt_cluster cluster(struct rt_endpoint *old, size_t nold, struct rt_endpoint *want, size_t nwant)
{
	struct rt_cluster c = { .name = (char *)"cluster/web", .backend = (char *)"tether_c_web", .old = old,
				.nold = nold, .want = want, .nwant = nwant };
	return c;
}

static void differs(const struct rt_cluster *c, const char *text, const char *want)
{
	struct rt_servers s;
	char err[256] = "";
	parse_ok(text, &s);
	assert_int_equal(runtime_compare(c, &s, err, sizeof(err)), -1);
	assert_string_equal(err, want);
	runtime_servers_release(&s);
}

static void same(const struct rt_cluster *c, const char *text)
{
	struct rt_servers s;
	char err[256] = "";
	parse_ok(text, &s);
	if (runtime_compare(c, &s, err, sizeof(err)) < 0)
		fail_msg("differs: %s", err);
	runtime_servers_release(&s);
}

#define SMALL "1\n# be_name srv_name srv_addr srv_admin_state srv_uweight srv_port srv_fqdn\n"

static void test_compare(void **state)
{
	(void)state;
	struct rt_endpoint want[] = { ep("127.0.0.1", 18432, 1), ep("localhost", 99, 2), ep("127.0.0.2", 8080, 7) };
	struct rt_cluster c = cluster(NULL, 0, want, 3);
	/* the real answer: e3 is in maintenance, e4 and e5 free */
	same(&c, real_state);
	/* the same with e3 in service: a slot the file has free */
	differs(&c,
		SMALL "tether_c_web e0 127.0.0.1 0 1 18432 -\ntether_c_web e1 1.1.1.1 0 2 99 localhost\n"
		      "tether_c_web e2 127.0.0.2 4 7 8080 -\ntether_c_web e3 ::1 0 1 80 -\n",
		"tether_c_web/e3: haproxy has it in service (::1, admin state 0x0), the file has it free");
	/* drained, in maintenance */
	differs(&c,
		SMALL "tether_c_web e0 127.0.0.1 8 1 18432 -\ntether_c_web e1 1.1.1.1 0 2 99 localhost\n"
		      "tether_c_web e2 127.0.0.2 0 7 8080 -\n",
		"tether_c_web/e0: haproxy has it draining (admin state 0x8), the file has it ready");
	differs(&c,
		SMALL "tether_c_web e0 127.0.0.1 1 1 18432 -\ntether_c_web e1 1.1.1.1 0 2 99 localhost\n"
		      "tether_c_web e2 127.0.0.2 0 7 8080 -\n",
		"tether_c_web/e0: haproxy has it in maintenance (admin state 0x1), the file has it ready");
	/* an address, a port, a weight */
	differs(&c,
		SMALL "tether_c_web e0 127.0.0.3 0 1 18432 -\ntether_c_web e1 1.1.1.1 0 2 99 localhost\n"
		      "tether_c_web e2 127.0.0.2 0 7 8080 -\n",
		"tether_c_web/e0: haproxy has address 127.0.0.3, the file 127.0.0.1");
	differs(&c,
		SMALL "tether_c_web e0 127.0.0.1 0 1 18432 -\ntether_c_web e1 1.1.1.1 0 2 99 otherhost\n"
		      "tether_c_web e2 127.0.0.2 0 7 8080 -\n",
		"tether_c_web/e1: haproxy has address 1.1.1.1 named otherhost, the file localhost");
	differs(&c,
		SMALL "tether_c_web e0 127.0.0.1 0 1 18433 -\ntether_c_web e1 1.1.1.1 0 2 99 localhost\n"
		      "tether_c_web e2 127.0.0.2 0 7 8080 -\n",
		"tether_c_web/e0: haproxy has port 18433, the file 18432");
	differs(&c,
		SMALL "tether_c_web e0 127.0.0.1 0 1 18432 -\ntether_c_web e1 1.1.1.1 0 2 99 localhost\n"
		      "tether_c_web e2 127.0.0.2 0 6 8080 -\n",
		"tether_c_web/e2: haproxy has weight 6, the file 7");
	/* a slot the file wants and haproxy has not */
	differs(&c, SMALL "tether_c_web e0 127.0.0.1 0 1 18432 -\ntether_c_web e1 1.1.1.1 0 2 99 localhost\n",
		"tether_c_web/e2: haproxy has no such server");
	/* addresses compare as addresses; host names without case */
	struct rt_endpoint v6[] = { ep("0:0::1", 80, 1), ep("::ffff:10.0.0.1", 81, 1), ep("Backend.Internal", 82, 1) };
	struct rt_cluster c6 = cluster(NULL, 0, v6, 3);
	same(&c6, SMALL "tether_c_web e0 ::1 0 1 80 -\ntether_c_web e1 10.0.0.1 0 1 81 -\n"
			"tether_c_web e2 10.9.9.9 0 1 82 backend.internal\n");
	differs(&c6,
		SMALL "tether_c_web e0 ::2 0 1 80 -\ntether_c_web e1 10.0.0.1 0 1 81 -\n"
		      "tether_c_web e2 10.9.9.9 0 1 82 backend.internal\n",
		"tether_c_web/e0: haproxy has address ::2, the file 0:0::1");
	differs(&c6,
		SMALL "tether_c_web e0 ::1 0 1 80 -\ntether_c_web e1 10.0.0.1 0 1 81 -\ntether_c_web e2 10.9.9.9 0 1 82 -\n",
		"tether_c_web/e2: haproxy has address 10.9.9.9, the file Backend.Internal");
	/* no endpoint: every slot free */
	struct rt_cluster none = cluster(NULL, 0, NULL, 0);
	same(&none, SMALL "tether_c_web e0 127.0.0.1 1 1 1 -\ntether_c_web e1 127.0.0.1 5 1 1 -\n");
	differs(&none, SMALL "tether_c_web e0 127.0.0.1 1 1 1 -\ntether_c_web e1 127.0.0.1 4 1 1 -\n",
		"tether_c_web/e1: haproxy has it in service (127.0.0.1, admin state 0x4), the file has it free");
}

/* ---- the commands ---------------------------------------------------------------- */

static void commands(const struct rt_cluster *c, const char *text, const char *want)
{
	struct rt_servers s;
	struct buf b = BUF_INIT;
	parse_ok(text, &s);
	size_t n = runtime_commands(c, &s, &b);
	assert_string_equal(b.data ? b.data : "", want);
	size_t lines = 0;
	for (size_t i = 0; i < b.len; i++)
		lines += b.data[i] == '\n';
	assert_int_equal(n, lines);
	buf_release(&b);
	runtime_servers_release(&s);
}

/* e0 10.0.0.1:80 ready, e1..e3 free */
#define ONE                                                                                                      \
	SMALL "tether_c_web e0 10.0.0.1 0 1 80 -\ntether_c_web e1 127.0.0.1 5 1 1 -\n"                                \
	      "tether_c_web e2 127.0.0.1 5 1 1 -\ntether_c_web e3 127.0.0.1 5 1 1 -\n"

static void test_commands(void **state)
{
	(void)state;
	struct rt_endpoint old[] = { ep("10.0.0.1", 80, 1) };
	/* a port */
	struct rt_endpoint port[] = { ep("10.0.0.1", 81, 1) };
	struct rt_cluster c = cluster(old, 1, port, 1);
	commands(&c, ONE, "set server tether_c_web/e0 addr 10.0.0.1 port 81\n");
	/* a weight */
	struct rt_endpoint weight[] = { ep("10.0.0.1", 80, 4) };
	c = cluster(old, 1, weight, 1);
	commands(&c, ONE, "set server tether_c_web/e0 weight 4\n");
	/* added: into free slots, new ones ready after their address and weight */
	struct rt_endpoint added[] = { ep("10.0.0.1", 80, 1), ep("::1", 8080, 2), ep("10.0.0.3", 80, 1) };
	c = cluster(old, 1, added, 3);
	commands(&c, ONE,
		 "set server tether_c_web/e1 addr ::1 port 8080\n"
		 "set server tether_c_web/e1 weight 2\n"
		 "set server tether_c_web/e1 state ready\n"
		 "set server tether_c_web/e2 addr 10.0.0.3 port 80\n"
		 "set server tether_c_web/e2 weight 1\n"
		 "set server tether_c_web/e2 state ready\n");
	/* removed: changes first, then drained, then in maintenance */
	struct rt_endpoint three[] = { ep("10.0.0.1", 80, 1), ep("10.0.0.2", 80, 1), ep("10.0.0.3", 80, 1) };
	struct rt_endpoint two[] = { ep("10.0.0.3", 80, 1) };
	c = cluster(three, 3, two, 1);
	commands(&c,
		 SMALL "tether_c_web e0 10.0.0.1 0 1 80 -\ntether_c_web e1 10.0.0.2 0 1 80 -\n"
		       "tether_c_web e2 10.0.0.3 0 1 80 -\ntether_c_web e3 127.0.0.1 5 1 1 -\n",
		 "set server tether_c_web/e0 addr 10.0.0.3 port 80\n"
		 "set server tether_c_web/e1 state drain\n"
		 "set server tether_c_web/e1 state maint\n"
		 "set server tether_c_web/e2 state drain\n"
		 "set server tether_c_web/e2 state maint\n");
	/* what haproxy holds differs from the state (someone changed it):
	 * set back, though the state did not change there */
	struct rt_endpoint both[] = { ep("10.0.0.1", 80, 1), ep("10.0.0.2", 80, 1) };
	struct rt_endpoint both2[] = { ep("10.0.0.1", 80, 1), ep("10.0.0.9", 80, 1) };
	c = cluster(both, 2, both2, 2);
	commands(&c,
		 SMALL "tether_c_web e0 10.0.0.7 9 3 80 -\ntether_c_web e1 10.0.0.2 0 1 80 -\n"
		       "tether_c_web e2 10.0.0.5 0 1 80 -\n",
		 "set server tether_c_web/e0 addr 10.0.0.1 port 80\n"
		 "set server tether_c_web/e0 weight 1\n"
		 "set server tether_c_web/e0 state ready\n"
		 "set server tether_c_web/e1 addr 10.0.0.9 port 80\n"
		 "set server tether_c_web/e2 state drain\n"
		 "set server tether_c_web/e2 state maint\n");
	/* a host name: left alone while the state keeps it and haproxy was
	 * configured with it; set (and refused by haproxy) when it changed */
	struct rt_endpoint h_old[] = { ep("backend.internal", 80, 1), ep("10.0.0.2", 80, 1) };
	struct rt_endpoint h_keep[] = { ep("backend.internal", 80, 1), ep("10.0.0.3", 80, 1) };
	c = cluster(h_old, 2, h_keep, 2);
	commands(&c, SMALL "tether_c_web e0 10.1.1.1 0 1 80 backend.internal\ntether_c_web e1 10.0.0.2 0 1 80 -\n",
		 "set server tether_c_web/e1 addr 10.0.0.3 port 80\n");
	struct rt_endpoint h_new[] = { ep("10.0.0.2", 80, 1), ep("backend.internal", 80, 1) };
	struct rt_endpoint h_was[] = { ep("10.0.0.2", 80, 1), ep("10.0.0.5", 80, 1) };
	c = cluster(h_was, 2, h_new, 2);
	commands(&c, SMALL "tether_c_web e0 10.0.0.2 0 1 80 -\ntether_c_web e1 10.0.0.5 0 1 80 backend.internal\n",
		 "set server tether_c_web/e1 addr backend.internal port 80\n");
	/* nothing to do */
	c = cluster(old, 1, old, 1);
	commands(&c, ONE, "");
}

/* ---- runtime_apply against a fake haproxy -------------------------------------------- */

static char dir[256];

static int setup(void **state)
{
	(void)state;
	return test_tmpdir_make(dir, sizeof(dir), "runtime");
}

static int teardown(void **state)
{
	(void)state;
	test_tmpdir_remove(dir);
	return 0;
}

/* The fake haproxy: a child serving the socket at path, one command a
 * connection: `show servers state` answers states[k] (the k-th time; the
 * last one again after), `set server` answers "" -- or refusal when the
 * command holds refuse -- and every command is logged to dir/commands. */
static pid_t fake(const char *path, const char *const *states, size_t nstates, const char *refuse,
		  const char *refusal)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	unlink(path);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 16), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid > 0) {
		close(fd);
		return pid;
	}
	char log[300];
	snprintf(log, sizeof(log), "%s/commands", dir);
	size_t shown = 0;
	for (;;) {
		int c = accept(fd, NULL, NULL);
		if (c < 0)
			_exit(1);
		char cmd[1024];
		ssize_t n = read(c, cmd, sizeof(cmd) - 1);
		cmd[n > 0 ? n : 0] = '\0';
		FILE *f = fopen(log, "a");
		if (f) {
			fputs(cmd, f);
			fclose(f);
		}
		const char *ans = "\n";
		if (strncmp(cmd, "show servers state", 18) == 0)
			ans = states[shown < nstates ? shown++ : nstates - 1];
		else if (refuse && strstr(cmd, refuse))
			ans = refusal;
		if (write(c, ans, strlen(ans)) < 0)
			_exit(1);
		close(c);
	}
}

static void stop(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static char *commands_sent(void)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/commands", dir);
	FILE *f = fopen(path, "r");
	struct buf b = BUF_INIT;
	char chunk[512];
	size_t n;
	while (f && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		buf_append(&b, chunk, n);
	if (f)
		fclose(f);
	unlink(path);
	return b.data ? buf_detach(&b, NULL) : strdup("");
}

#define STATE_BEFORE SMALL "tether_c_web e0 10.0.0.1 0 1 80 -\ntether_c_web e1 127.0.0.1 5 1 1 -\n"
#define STATE_AFTER SMALL "tether_c_web e0 10.0.0.1 0 1 80 -\ntether_c_web e1 10.0.0.2 4 1 80 -\n"

static void test_apply(void **state)
{
	(void)state;
	char sock[300], err[512];
	snprintf(sock, sizeof(sock), "%s/admin.sock", dir);
	struct rt_endpoint old[] = { ep("10.0.0.1", 80, 1) };
	struct rt_endpoint want[] = { ep("10.0.0.1", 80, 1), ep("10.0.0.2", 80, 1) };
	struct rt_cluster c = cluster(old, 1, want, 2);
	struct rt_plan p = { &c, 1 };
	struct runtime_options o = { .socket = sock, .timeout_s = 2 };
	size_t sent;

	/* applied and read back */
	const char *ok_states[] = { STATE_BEFORE, STATE_AFTER };
	pid_t pid = fake(sock, ok_states, 2, NULL, NULL);
	assert_int_equal(runtime_apply(&o, &p, &sent, err, sizeof(err)), RUNTIME_APPLIED);
	assert_int_equal(sent, 3);
	stop(pid);
	char *cmds = commands_sent();
	assert_string_equal(cmds, "show servers state tether_c_web\n"
				  "set server tether_c_web/e1 addr 10.0.0.2 port 80\n"
				  "set server tether_c_web/e1 weight 1\n"
				  "set server tether_c_web/e1 state ready\n"
				  "show servers state tether_c_web\n");
	free(cmds);

	/* read back, haproxy holds something else */
	const char *other[] = { STATE_BEFORE, SMALL "tether_c_web e0 10.0.0.1 0 5 80 -\ntether_c_web e1 10.0.0.2 4 1 80 -\n" };
	pid = fake(sock, other, 2, NULL, NULL);
	assert_int_equal(runtime_apply(&o, &p, &sent, err, sizeof(err)), RUNTIME_DIFFERS);
	assert_string_equal(err, "tether_c_web/e0: haproxy has weight 5, the file 1");
	stop(pid);
	free(commands_sent());

	/* more endpoints than slots: nothing is sent */
	struct rt_endpoint three[] = { ep("10.0.0.1", 80, 1), ep("10.0.0.2", 80, 1), ep("10.0.0.3", 80, 1) };
	struct rt_cluster c3 = cluster(old, 1, three, 3);
	struct rt_plan p3 = { &c3, 1 };
	pid = fake(sock, ok_states, 1, NULL, NULL);
	assert_int_equal(runtime_apply(&o, &p3, &sent, err, sizeof(err)), RUNTIME_EXHAUSTED);
	assert_string_equal(err, "cluster/web: 3 endpoints, and haproxy's running configuration has 2 slots in tether_c_web");
	assert_int_equal(sent, 0);
	stop(pid);
	cmds = commands_sent();
	assert_string_equal(cmds, "show servers state tether_c_web\n");
	free(cmds);

	/* a refused command: what came before it was taken, nothing after */
	pid = fake(sock, ok_states, 2, "weight", "Backend is using a static LB algorithm and only accepts weights '0%' and '100%'.\n\n");
	assert_int_equal(runtime_apply(&o, &p, &sent, err, sizeof(err)), RUNTIME_FAILED);
	assert_int_equal(sent, 1);
	assert_string_equal(err, "haproxy refused 'set server tether_c_web/e1 weight 1': Backend is using a static LB "
				 "algorithm and only accepts weights '0%' and '100%'.");
	stop(pid);
	cmds = commands_sent();
	assert_null(strstr(cmds, "state ready"));
	free(cmds);

	/* a backend haproxy does not have */
	const char *none[] = { "Can't find backend.\n\n" };
	pid = fake(sock, none, 1, NULL, NULL);
	assert_int_equal(runtime_apply(&o, &p, &sent, err, sizeof(err)), RUNTIME_FAILED);
	char want_err[600];
	snprintf(want_err, sizeof(want_err), "%s: show servers state tether_c_web: haproxy answered 'Can't find backend.', "
		 "not a servers state of format 1", sock);
	assert_string_equal(err, want_err);
	stop(pid);
	free(commands_sent());

	/* a dead socket */
	unlink(sock);
	assert_int_equal(runtime_apply(&o, &p, &sent, err, sizeof(err)), RUNTIME_FAILED);
	snprintf(want_err, sizeof(want_err), "%s: connect: No such file or directory", sock);
	assert_string_equal(err, want_err);
	assert_int_equal(sent, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plan_endpoints_only),
		cmocka_unit_test(test_plan_route_backends),
		cmocka_unit_test(test_plan_refusals),
		cmocka_unit_test(test_parse_real),
		cmocka_unit_test(test_parse_refused),
		cmocka_unit_test(test_compare),
		cmocka_unit_test(test_commands),
		cmocka_unit_test_setup_teardown(test_apply, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
