/* test_drain.c: unit tests of agent/consumer/procfs.c (stat lines with
 * awkward names, status without VmRSS, titles) and agent/consumer/drain.c
 * over a fake /proc tree: nginx's workers by their title, haproxy's by
 * their start time (a `program` process and zombies left out), a master
 * that does not run, a pidfile that is wrong; then over the real /proc,
 * with this test as the master of two forked workers. The counting of a
 * real nginx and haproxy is tests/integration/t0335-drain-guard.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "consumer/drain.h"
#include "consumer/procfs.h"
#include "tmpdir.h"

/* ---- consumer/procfs.c ---------------------------------------------------- */

static void test_parse_stat(void **state)
{
	(void)state;
	struct procfs_stat st;
	const char *line = "3547 (cat) R 3541 3541 31376 0 -1 4194304 102 0 0 0 0 0 0 0 20 0 1 0 2632733 3133440 383 "
			   "18446744073709551615 94289168310272 0\n";
	assert_int_equal(procfs_parse_stat(line, strlen(line), &st), 0);
	assert_int_equal(st.pid, 3547);
	assert_int_equal(st.ppid, 3541);
	assert_int_equal(st.state, 'R');
	assert_string_equal(st.comm, "cat");
	assert_int_equal(st.start, 2632733);

	/* a name with spaces and parentheses: up to the last ')' */
	line = "12 (a) b) (c) S 1 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 77 0";
	assert_int_equal(procfs_parse_stat(line, strlen(line), &st), 0);
	assert_string_equal(st.comm, "a) b) (c");
	assert_int_equal(st.ppid, 1);
	assert_int_equal(st.start, 77);

	/* the start time is the last field */
	line = "12 (x) S 1 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 18446744073709551615";
	assert_int_equal(procfs_parse_stat(line, strlen(line), &st), 0);
	assert_true(st.start == UINT64_MAX);

	static const char *const bad[] = {
		"",
		"12 x S 1",                                                           /* no parentheses */
		"12 (x S 1 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 77",                   /* no ')' */
		"0 (x) S 1 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 77",                   /* pid 0 */
		"-3 (x) S 1 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 77",                  /* a sign */
		"12(x) S 1 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 77",                   /* no space */
		"12 (x) S x1 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 77",                 /* ppid */
		"12 (x) S 99999999 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 77",           /* ppid too big */
		"12 (x) S 1 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0",                     /* no start */
		"12 (x) S 1 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 18446744073709551616", /* overflow */
		"12 (x) S 1 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 7x7",                 /* not a number */
		"12 (x)  S 1 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 77",                 /* two spaces */
		"12 (x) S 1 0 0 0 -1 0 0  0 0 0 0 0 0 20 0 1 0 77",                   /* an empty field */
		"12 (x) S",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (procfs_parse_stat(bad[i], strlen(bad[i]), &st) == 0)
			fail_msg("accepted: '%s'", bad[i]);
	/* a NUL inside is not the end */
	const char nul[] = "12 (x\0y) S 1 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 77";
	assert_int_equal(procfs_parse_stat(nul, sizeof(nul) - 1, &st), 0);
	assert_int_equal(st.start, 77);
	/* a long name is cut */
	char longname[300];
	snprintf(longname, sizeof(longname), "5 (%0200d) S 1 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 9", 0);
	assert_int_equal(procfs_parse_stat(longname, strlen(longname), &st), 0);
	assert_int_equal(strlen(st.comm), sizeof(st.comm) - 1);
}

static void test_parse_rss(void **state)
{
	(void)state;
	uint64_t b = 0;
	const char *status = "Name:\tnginx\nState:\tS (sleeping)\nVmPeak:\t   10000 kB\nVmHWM:\t    2088 kB\n"
			     "VmRSS:\t    2088 kB\nRssAnon:\t     152 kB\n";
	assert_int_equal(procfs_parse_rss(status, strlen(status), &b), 0);
	assert_int_equal(b, 2088 * 1024);
	const char *last = "Name:\tx\nVmRSS: 7 kB";
	assert_int_equal(procfs_parse_rss(last, strlen(last), &b), 0);
	assert_int_equal(b, 7 * 1024);
	static const char *const bad[] = {
		"Name:\tkthreadd\nState:\tS (sleeping)\n",     /* a kernel thread: none */
		"VmRSS:\t\n",
		"VmRSS:\t  12 MB\n",
		"VmRSS:\t  -12 kB\n",
		"VmRSS:\t  12 kB extra\n",
		"VmRSS:\t  99999999999999999999 kB\n",
		"VmRSS:\t  18014398509481984 kB\n",           /* bytes overflow */
		" VmRSS:\t  12 kB\n",
		"",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (procfs_parse_rss(bad[i], strlen(bad[i]), &b) == 0)
			fail_msg("accepted: '%s'", bad[i]);
}

static void test_title(void **state)
{
	(void)state;
	char t[64];
	const char raw[] = "nginx: worker process is shutting down\0\0\0\0";
	procfs_title(raw, sizeof(raw) - 1, t, sizeof(t));
	assert_string_equal(t, "nginx: worker process is shutting down");
	const char args[] = "haproxy\0-W\0-f\0a b.cfg\0";
	procfs_title(args, sizeof(args) - 1, t, sizeof(t));
	assert_string_equal(t, "haproxy -W -f a b.cfg");
	procfs_title("a\nb\x7f", 4, t, sizeof(t));
	assert_string_equal(t, "a?b?");
	procfs_title("abcdef", 6, t, 4);
	assert_string_equal(t, "abc");
	procfs_title("", 0, t, sizeof(t));
	assert_string_equal(t, "");
}

/* ---- consumer/drain.c over a fake /proc ------------------------------------ */

struct dir {
	char path[256];
};

static int setup(void **state)
{
	struct dir *d = calloc(1, sizeof(*d));
	if (!d || test_tmpdir_make(d->path, sizeof(d->path), "drain") < 0)
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

static void put(const char *dir, const char *name, const char *data, size_t len)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	fclose(f);
}

/* A process of the fake tree: its stat, cmdline (title) and status
 * (VmRSS in kB; 0: no such line). */
static void proc(const struct dir *d, long pid, const char *comm, char state, long ppid, unsigned long long start,
		 const char *title, unsigned rss_kb)
{
	char pd[300], buf[512];
	snprintf(pd, sizeof(pd), "%s/proc/%ld", d->path, pid);
	assert_int_equal(mkdir(pd, 0755), 0);
	int n = snprintf(buf, sizeof(buf), "%ld (%s) %c %ld %ld %ld 0 -1 4194624 10 0 0 0 1 2 0 0 20 0 1 0 %llu "
			 "5000000 300 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n", pid, comm, state, ppid,
			 ppid, ppid, start);
	put(pd, "stat", buf, (size_t)n);
	put(pd, "cmdline", title, strlen(title) + 1);   /* its NUL, as the kernel gives it */
	n = rss_kb ? snprintf(buf, sizeof(buf), "Name:\t%s\nState:\t%c\nVmHWM:\t%u kB\nVmRSS:\t%8u kB\n", comm, state,
			      rss_kb * 2, rss_kb)
		   : snprintf(buf, sizeof(buf), "Name:\t%s\nState:\t%c\n", comm, state);
	put(pd, "status", buf, (size_t)n);
}

static void pidfile(const struct dir *d, const char *text)
{
	put(d->path, "master.pid", text, strlen(text));
}

static int count_since(const struct dir *d, enum drain_kind kind, uint64_t reloaded, struct drain_count *dc,
		       char *err, size_t errlen)
{
	char root[300], pf[300];
	snprintf(root, sizeof(root), "%s/proc", d->path);
	snprintf(pf, sizeof(pf), "%s/master.pid", d->path);
	return drain_count(root, pf, kind, reloaded, dc, err, errlen);
}

static int count(const struct dir *d, enum drain_kind kind, struct drain_count *dc, char *err, size_t errlen)
{
	return count_since(d, kind, 0, dc, err, errlen);
}

static void make_root(const struct dir *d)
{
	char root[300];
	snprintf(root, sizeof(root), "%s/proc", d->path);
	assert_int_equal(mkdir(root, 0755), 0);
	snprintf(root, sizeof(root), "%s/proc/self", d->path);   /* not a pid: skipped */
	assert_int_equal(mkdir(root, 0755), 0);
}

static void test_nginx(void **state)
{
	struct dir *d = *state;
	make_root(d);
	proc(d, 100, "nginx", 'S', 1, 500, "nginx: master process nginx -c /etc/nginx/nginx.conf", 4000);
	proc(d, 101, "nginx", 'S', 100, 900, "nginx: worker process", 3000);
	proc(d, 107, "nginx", 'S', 100, 900, "nginx: worker process", 3000);
	proc(d, 102, "nginx", 'S', 100, 600, "nginx: worker process is shutting down", 2048);
	proc(d, 103, "nginx", 'S', 100, 700, "nginx: worker process is shutting down", 1024);
	proc(d, 104, "nginx", 'S', 100, 600, "nginx: cache manager process", 1000);
	proc(d, 105, "nginx", 'Z', 100, 600, "nginx: worker process is shutting down", 0);   /* gone */
	proc(d, 106, "nginx", 'S', 100, 600, "nginx: worker process is shutting down", 0);   /* no VmRSS */
	/* another nginx's workers, and a process that is not a child */
	proc(d, 200, "nginx", 'S', 1, 500, "nginx: master process", 4000);
	proc(d, 201, "nginx", 'S', 200, 600, "nginx: worker process is shutting down", 5000);
	proc(d, 300, "sh", 'S', 1, 500, "worker process is shutting down", 100);
	pidfile(d, "100\n");
	struct drain_count dc;
	char err[256] = "";
	assert_int_equal(count(d, DRAIN_NGINX, &dc, err, sizeof(err)), 1);
	assert_int_equal(dc.master, 100);
	assert_int_equal(dc.live, 2);
	assert_int_equal(dc.draining, 3);
	assert_int_equal(dc.draining_bytes, (2048 + 1024) * 1024);
	/* a reload signalled at tick 950 that has not taken yet (no worker
	 * started since): the titles say it all */
	assert_int_equal(count_since(d, DRAIN_NGINX, 950, &dc, err, sizeof(err)), 1);
	assert_int_equal(dc.live, 2);
	assert_int_equal(dc.draining, 3);
	/* it took (a worker started since) and the master has not retitled
	 * the ones it replaces yet: started before it, they are old already */
	proc(d, 108, "nginx", 'S', 100, 960, "nginx: worker process", 3000);
	assert_int_equal(count_since(d, DRAIN_NGINX, 950, &dc, err, sizeof(err)), 1);
	assert_int_equal(dc.live, 1);
	assert_int_equal(dc.draining, 5);
	assert_int_equal(dc.draining_bytes, (2048 + 1024 + 3000 + 3000) * 1024);
	/* a reload before every worker's start changes nothing */
	assert_int_equal(count_since(d, DRAIN_NGINX, 800, &dc, err, sizeof(err)), 1);
	assert_int_equal(dc.live, 3);
	assert_int_equal(dc.draining, 3);
	/* the other master */
	pidfile(d, "200");
	assert_int_equal(count(d, DRAIN_NGINX, &dc, err, sizeof(err)), 1);
	assert_int_equal(dc.live, 0);
	assert_int_equal(dc.draining, 1);
	assert_int_equal(dc.draining_bytes, 5000 * 1024);
}

static void test_haproxy(void **state)
{
	struct dir *d = *state;
	make_root(d);
	const char *args = "haproxy -W -p /run/haproxy.pid -f /etc/haproxy/haproxy.cfg";
	proc(d, 300, "haproxy", 'S', 1, 1000, args, 8000);
	proc(d, 310, "haproxy", 'S', 300, 2000, args, 7000);                 /* old */
	proc(d, 305, "haproxy", 'S', 300, 3000, "haproxy -sf 310 -x sockpair@3 -W", 7500);   /* old */
	proc(d, 320, "haproxy", 'S', 300, 4000, "haproxy -sf 305 310 -x sockpair@4 -W", 7600); /* live */
	proc(d, 321, "dataplaneapi", 'S', 300, 5000, "/usr/bin/dataplaneapi", 9000);        /* a program */
	proc(d, 322, "haproxy", 'Z', 300, 4500, "", 0);                                       /* reaped soon */
	pidfile(d, "300\n");
	struct drain_count dc;
	char err[256] = "";
	assert_int_equal(count(d, DRAIN_HAPROXY, &dc, err, sizeof(err)), 1);
	assert_int_equal(dc.master, 300);
	assert_int_equal(dc.live, 1);
	assert_int_equal(dc.draining, 2);
	assert_int_equal(dc.draining_bytes, (7000 + 7500) * 1024);
	/* two started in the same tick: the higher pid is the newer */
	proc(d, 330, "haproxy", 'S', 300, 4000, args, 100);
	assert_int_equal(count(d, DRAIN_HAPROXY, &dc, err, sizeof(err)), 1);
	assert_int_equal(dc.live, 1);
	assert_int_equal(dc.draining, 3);
	assert_int_equal(dc.draining_bytes, (7000 + 7500 + 7600) * 1024);
	/* a master alone: nothing live, nothing draining */
	proc(d, 400, "haproxy", 'S', 1, 1000, args, 8000);
	pidfile(d, "400");
	assert_int_equal(count(d, DRAIN_HAPROXY, &dc, err, sizeof(err)), 1);
	assert_int_equal(dc.live, 0);
	assert_int_equal(dc.draining, 0);
}

static void test_no_master(void **state)
{
	struct dir *d = *state;
	make_root(d);
	struct drain_count dc;
	char err[256] = "";
	/* no pidfile: nothing runs */
	assert_int_equal(count(d, DRAIN_NGINX, &dc, err, sizeof(err)), 0);
	/* a pid no process has */
	pidfile(d, "4321\n");
	assert_int_equal(count(d, DRAIN_NGINX, &dc, err, sizeof(err)), 0);
	/* a master that is a zombie */
	proc(d, 50, "nginx", 'Z', 1, 10, "", 0);
	pidfile(d, "50\n");
	assert_int_equal(count(d, DRAIN_NGINX, &dc, err, sizeof(err)), 0);
	/* a pid that is another process's (stat says so): not ours */
	char pd[300];
	snprintf(pd, sizeof(pd), "%s/proc/60", d->path);
	assert_int_equal(mkdir(pd, 0755), 0);
	put(pd, "stat", "61 (x) S 1 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 77", 50);
	pidfile(d, "60");
	assert_int_equal(count(d, DRAIN_NGINX, &dc, err, sizeof(err)), 0);
	/* a pidfile that holds no pid */
	static const char *const bad[] = { "", "abc\n", "1\n", "99999999\n", "12 13\n" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		pidfile(d, bad[i]);
		err[0] = '\0';
		assert_int_equal(count(d, DRAIN_NGINX, &dc, err, sizeof(err)), -1);
		assert_non_null(strstr(err, "master.pid' holds no pid"));
	}
	/* a /proc that cannot be opened */
	pidfile(d, "100");
	char pf[300];
	snprintf(pf, sizeof(pf), "%s/master.pid", d->path);
	assert_int_equal(drain_count("/nonexistent/proc", pf, DRAIN_NGINX, 0, &dc, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "cannot open '/nonexistent/proc'"));
}

/* ---- the real /proc: this test is the master of two workers --------------- */

static void test_real_proc(void **state)
{
	struct dir *d = *state;
	char pf[300], text[32];
	snprintf(pf, sizeof(pf), "%s/master.pid", d->path);
	snprintf(text, sizeof(text), "%ld\n", (long)getpid());
	pidfile(d, text);
	struct drain_count dc;
	char err[256] = "";
	assert_int_equal(drain_count("/proc", pf, DRAIN_HAPROXY, 0, &dc, err, sizeof(err)), 1);
	assert_int_equal(dc.master, getpid());
	assert_int_equal(dc.live + dc.draining, 0);
	pid_t kids[2];
	for (int i = 0; i < 2; i++) {
		kids[i] = fork();
		assert_true(kids[i] >= 0);
		if (kids[i] == 0) {
			for (;;)
				pause();
		}
	}
	assert_int_equal(drain_count("/proc", pf, DRAIN_HAPROXY, 0, &dc, err, sizeof(err)), 1);
	assert_int_equal(dc.live, 1);
	assert_int_equal(dc.draining, 1);
	assert_true(dc.draining_bytes > 0);
	/* they are no nginx workers by their title */
	assert_int_equal(drain_count("/proc", pf, DRAIN_NGINX, 0, &dc, err, sizeof(err)), 1);
	assert_int_equal(dc.live + dc.draining, 0);
	for (int i = 0; i < 2; i++) {
		kill(kids[i], SIGKILL);
		waitpid(kids[i], NULL, 0);
	}
	assert_int_equal(drain_count("/proc", pf, DRAIN_HAPROXY, 0, &dc, err, sizeof(err)), 1);
	assert_int_equal(dc.live + dc.draining, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_stat),
		cmocka_unit_test(test_parse_rss),
		cmocka_unit_test(test_title),
		cmocka_unit_test_setup_teardown(test_nginx, setup, teardown),
		cmocka_unit_test_setup_teardown(test_haproxy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_master, setup, teardown),
		cmocka_unit_test_setup_teardown(test_real_proc, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
