/* test_runcmd.c: unit tests of agent/consumer/runcmd.c: exit codes, bounded output,
 * environment, timeouts that kill the process group, runcmd_describe. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "consumer/runcmd.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void run(const char *cmd, const char *const *env, double timeout, struct runcmd_result *res)
{
	char err[256] = "";
	if (runcmd(cmd, env, timeout, res, err, sizeof(err)) != 0)
		fail_msg("runcmd '%s' did not start: %s", cmd, err);
}

/* The pid a command printed as its whole output. */
static pid_t printed_pid(const struct runcmd_result *res)
{
	char *end;
	errno = 0;
	long v = strtol(res->output, &end, 10);
	if (errno || end == res->output || *end || v <= 1)
		fail_msg("no pid in the output '%s'", res->output);
	return (pid_t)v;
}

/* Has pid exited? A zombie counts: it no longer runs. */
static bool exited(pid_t pid)
{
	char path[64], stat[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *fp = fopen(path, "r");
	if (!fp)
		return true;
	size_t n = fread(stat, 1, sizeof(stat) - 1, fp);
	fclose(fp);
	stat[n] = '\0';
	/* "pid (comm) S ...": the state follows the last ')' */
	const char *rp = strrchr(stat, ')');
	return !rp || rp[1] != ' ' || rp[2] == 'Z' || rp[2] == 'X';
}

/* Waits up to 10 s for pid to exit, polling /proc while yielding the CPU:
 * a killed process is gone within microseconds, and there is no sleep
 * (pidfd_open would do, but valgrind does not know it). */
static bool wait_gone(pid_t pid)
{
	double until = now_s() + 10;
	while (!exited(pid)) {
		if (now_s() > until)
			return false;
		sched_yield();
	}
	return true;
}

/* ---- exit codes ---------------------------------------------------------------- */

static void test_exit_codes(void **state)
{
	(void)state;
	struct runcmd_result res;
	static const struct {
		const char *cmd;
		int code;
	} cases[] = {
		{ "true", 0 }, { "exit 0", 0 }, { "false", 1 }, { "exit 3", 3 }, { "exit 42", 42 }, { "exit 255", 255 },
		{ "(exit 7); exit $?", 7 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memset(&res, 0x5a, sizeof(res));
		run(cases[i].cmd, NULL, 10, &res);
		assert_int_equal(res.exit_code, cases[i].code);
		assert_int_equal(res.signal, 0);
		assert_int_equal(res.timed_out, 0);
		assert_string_equal(res.output, "");
	}
	/* a command that is not there: the shell's 127 and its complaint */
	run("/nonexistent/tether-no-such-command", NULL, 10, &res);
	assert_int_equal(res.exit_code, 127);
	assert_non_null(strstr(res.output, "tether-no-such-command"));
}

static void test_killed_by_signal(void **state)
{
	(void)state;
	struct runcmd_result res;
	run("echo going >&2; kill -TERM $$", NULL, 10, &res);
	assert_int_equal(res.exit_code, -1);
	assert_int_equal(res.signal, SIGTERM);
	assert_int_equal(res.timed_out, 0);
	assert_string_equal(res.output, "going");
	run("kill -KILL $$", NULL, 10, &res);
	assert_int_equal(res.exit_code, -1);
	assert_int_equal(res.signal, SIGKILL);
}

/* ---- output --------------------------------------------------------------------- */

static void test_captured_output(void **state)
{
	(void)state;
	struct runcmd_result res;
	run("echo 'nginx: [emerg] unknown directive \"bogus\"' >&2; exit 1", NULL, 10, &res);
	assert_int_equal(res.exit_code, 1);
	assert_string_equal(res.output, "nginx: [emerg] unknown directive \"bogus\"");
	/* stdout is captured too, and white space around it is trimmed */
	run("printf '  \\n out\\n'; printf 'err  \\n\\n' >&2", NULL, 10, &res);
	assert_int_equal(res.exit_code, 0);
	assert_non_null(strstr(res.output, "out"));
	assert_non_null(strstr(res.output, "err"));
	assert_true(res.output[0] != ' ' && res.output[0] != '\n');
	size_t n = strlen(res.output);
	assert_true(res.output[n - 1] != '\n' && res.output[n - 1] != ' ');
	/* stdin is /dev/null: a command reading it does not hang */
	run("cat; echo done >&2", NULL, 10, &res);
	assert_string_equal(res.output, "done");
}

static void test_output_bounded(void **state)
{
	(void)state;
	struct runcmd_result res;
	/* far more than fits: the command is not blocked on a full pipe, and
	 * the output keeps its first RUNCMD_OUTPUT_MAX - 1 bytes */
	run("head -c 200000 /dev/zero | tr '\\000' x >&2; echo tail >&2; exit 4", NULL, 20, &res);
	assert_int_equal(res.exit_code, 4);
	assert_int_equal(res.timed_out, 0);
	assert_int_equal(strlen(res.output), RUNCMD_OUTPUT_MAX - 1);
	for (size_t i = 0; i < RUNCMD_OUTPUT_MAX - 1; i++)
		if (res.output[i] != 'x')
			fail_msg("byte %zu is '%c'", i, res.output[i]);
	/* exactly what fits is kept whole */
	run("head -c 4095 /dev/zero | tr '\\000' y >&2", NULL, 20, &res);
	assert_int_equal(strlen(res.output), RUNCMD_OUTPUT_MAX - 1);
	assert_int_equal(res.output[RUNCMD_OUTPUT_MAX - 2], 'y');
}

/* ---- environment -------------------------------------------------------------------- */

static void test_environment(void **state)
{
	(void)state;
	struct runcmd_result res;
	const char *env[] = { "TETHER_STAGING=/var/lib/tether/staging", "TETHER_OUTPUT=/etc/nginx/tether",
			      "TETHER_VERSION=42", NULL };
	run("printf '%s|%s|%s' \"$TETHER_STAGING\" \"$TETHER_OUTPUT\" \"$TETHER_VERSION\" >&2", env, 10, &res);
	assert_string_equal(res.output, "/var/lib/tether/staging|/etc/nginx/tether|42");
	/* the agent's own environment is inherited (PATH found "printf") */
	assert_int_equal(setenv("TETHER_RUNCMD_INHERITED", "yes", 1), 0);
	run("printf %s \"$TETHER_RUNCMD_INHERITED\" >&2", NULL, 10, &res);
	assert_string_equal(res.output, "yes");
	/* an added variable replaces one of the same name, once */
	assert_int_equal(setenv("TETHER_VERSION", "old", 1), 0);
	assert_int_equal(setenv("TETHER_VERSIONX", "other", 1), 0);
	run("printf '%s %s ' \"$TETHER_VERSION\" \"$TETHER_VERSIONX\" >&2; env | grep -c '^TETHER_VERSION=' >&2", env,
	    10, &res);
	assert_string_equal(res.output, "42 other 1");
	/* and ours is unchanged */
	assert_string_equal(getenv("TETHER_VERSION"), "old");
	unsetenv("TETHER_VERSION");
	unsetenv("TETHER_VERSIONX");
	unsetenv("TETHER_RUNCMD_INHERITED");
	/* an empty value is a value */
	const char *empty[] = { "TETHER_STAGING=", NULL };
	run("test -n \"${TETHER_STAGING+set}\" && test -z \"$TETHER_STAGING\" && echo ok >&2", empty, 10, &res);
	assert_string_equal(res.output, "ok");
}

/* ---- timeouts and children -------------------------------------------------------------- */

static void test_timeout_kills_group(void **state)
{
	(void)state;
	struct runcmd_result res;
	double t0 = now_s();
	/* the child prints its pid and waits on a background sleep */
	run("sleep 30 & echo $! >&2; wait", NULL, 0.5, &res);
	double took = now_s() - t0;
	assert_int_equal(res.timed_out, 1);
	assert_int_equal(res.exit_code, -1);
	assert_int_equal(res.signal, SIGKILL);
	assert_true(took >= 0.45);
	assert_true(took < 10);
	pid_t child = printed_pid(&res);
	/* the background sleep was in the group: it is gone too */
	if (!wait_gone(child)) {
		kill(child, SIGKILL);
		fail_msg("the command's child %d outlived the timeout", (int)child);
	}
	/* a command that ignores SIGTERM is killed all the same */
	t0 = now_s();
	run("trap '' TERM; while :; do :; done", NULL, 0.3, &res);
	assert_int_equal(res.timed_out, 1);
	assert_true(now_s() - t0 < 10);
}

static void test_background_child_does_not_block(void **state)
{
	(void)state;
	struct runcmd_result res;
	double t0 = now_s();
	/* a daemon-like child keeps stdout and stderr open after the shell
	 * exits: runcmd returns when the shell does, not at the timeout */
	run("sleep 30 & echo $! >&2; exit 0", NULL, 20, &res);
	double took = now_s() - t0;
	pid_t child = printed_pid(&res);
	kill(child, SIGKILL);
	assert_true(wait_gone(child));
	assert_int_equal(res.timed_out, 0);
	assert_int_equal(res.exit_code, 0);
	if (took >= 5)
		fail_msg("runcmd took %.1f s: it waited for the background child", took);
}

/* ---- describing --------------------------------------------------------------------------- */

static void test_describe(void **state)
{
	(void)state;
	struct runcmd_result res;
	char out[RUNCMD_OUTPUT_MAX + 64];
	memset(&res, 0, sizeof(res));
	res.exit_code = 1;
	snprintf(res.output, sizeof(res.output), "boom");
	runcmd_describe(&res, out, sizeof(out));
	assert_string_equal(out, "exit 1: boom");
	res.exit_code = 0;
	res.output[0] = '\0';
	runcmd_describe(&res, out, sizeof(out));
	assert_string_equal(out, "exit 0");
	res.exit_code = -1;
	res.signal = 9;
	runcmd_describe(&res, out, sizeof(out));
	assert_string_equal(out, "killed by signal 9");
	snprintf(res.output, sizeof(res.output), "segv");
	res.signal = 11;
	runcmd_describe(&res, out, sizeof(out));
	assert_string_equal(out, "killed by signal 11: segv");
	res.timed_out = 1;
	res.signal = 9;
	snprintf(res.output, sizeof(res.output), "partial");
	runcmd_describe(&res, out, sizeof(out));
	assert_string_equal(out, "timed out: partial");
	res.output[0] = '\0';
	runcmd_describe(&res, out, sizeof(out));
	assert_string_equal(out, "timed out");
	/* a small buffer truncates, always terminated */
	res.timed_out = 0;
	res.exit_code = 2;
	snprintf(res.output, sizeof(res.output), "a long message");
	char small[8];
	runcmd_describe(&res, small, sizeof(small));
	assert_string_equal(small, "exit 2:");
	/* and from a real run */
	run("echo 'bad config' >&2; exit 2", NULL, 10, &res);
	runcmd_describe(&res, out, sizeof(out));
	assert_string_equal(out, "exit 2: bad config");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exit_codes),
		cmocka_unit_test(test_killed_by_signal),
		cmocka_unit_test(test_captured_output),
		cmocka_unit_test(test_output_bounded),
		cmocka_unit_test(test_environment),
		cmocka_unit_test(test_timeout_kills_group),
		cmocka_unit_test(test_background_child_does_not_block),
		cmocka_unit_test(test_describe),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
