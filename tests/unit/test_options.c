/* test_options.c: unit tests of common/options.c with a small table of our
 * own: every kind, the INI file, the command line winning, and the errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "options.h"

struct cfg {
	char *name;
	uint64_t count;
	double timeout;
	bool verbose;
	char *mode;
};

static const char *const modes[] = { "fast", "slow", NULL };

static const struct opt_def defs[] = {
	{ "name", 'n', OPT_STRING, offsetof(struct cfg, name), 0, 0, NULL, "NAME", "the name" },
	{ "max-count", 0, OPT_UINT, offsetof(struct cfg, count), 1, 100, NULL, "N", "how many" },
	{ "stream-timeout", 't', OPT_SECONDS, offsetof(struct cfg, timeout), 0.5, 60, NULL, "SECONDS", "idle limit" },
	{ "verbose", 'v', OPT_FLAG, offsetof(struct cfg, verbose), 0, 0, NULL, NULL, "say more" },
	{ "mode", 0, OPT_CHOICE, offsetof(struct cfg, mode), 0, 0, modes, "fast|slow", "how" },
	{ NULL, 0, OPT_STRING, 0, 0, 0, NULL, NULL, NULL },
};

struct fixture {
	char dir[64];
	char path[128];
	struct cfg cfg;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/tether-options-XXXXXX");
	if (!mkdtemp(f->dir)) {
		free(f);
		return -1;
	}
	snprintf(f->path, sizeof(f->path), "%s/test.conf", f->dir);
	f->cfg.count = 5;
	f->cfg.timeout = 30;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	options_release(defs, &f->cfg);
	unlink(f->path);
	int rc = rmdir(f->dir);
	free(f);
	return rc;
}

static void write_file(const char *path, const char *text)
{
	FILE *fp = fopen(path, "w");
	assert_non_null(fp);
	assert_int_equal(fputs(text, fp) >= 0, 1);
	assert_int_equal(fclose(fp), 0);
}

static void test_set_every_kind(void **state)
{
	struct fixture *f = *state;
	char err[256] = "";
	assert_int_equal(options_set(defs, &f->cfg, "name", "web-1", err, sizeof(err)), 0);
	assert_string_equal(f->cfg.name, "web-1");
	assert_int_equal(options_set(defs, &f->cfg, "name", "web-2", err, sizeof(err)), 0);   /* replaces, no leak */
	assert_string_equal(f->cfg.name, "web-2");
	assert_int_equal(options_set(defs, &f->cfg, "max-count", "100", err, sizeof(err)), 0);
	assert_int_equal(f->cfg.count, 100);
	assert_int_equal(options_set(defs, &f->cfg, "stream-timeout", "0.5", err, sizeof(err)), 0);
	assert_true(f->cfg.timeout == 0.5);
	assert_int_equal(options_set(defs, &f->cfg, "verbose", "yes", err, sizeof(err)), 0);
	assert_true(f->cfg.verbose);
	assert_int_equal(options_set(defs, &f->cfg, "verbose", "off", err, sizeof(err)), 0);
	assert_false(f->cfg.verbose);
	assert_int_equal(options_set(defs, &f->cfg, "mode", "slow", err, sizeof(err)), 0);
	assert_string_equal(f->cfg.mode, "slow");
}

static void test_dashes_and_underscores(void **state)
{
	struct fixture *f = *state;
	char err[256] = "";
	assert_int_equal(options_set(defs, &f->cfg, "max_count", "7", err, sizeof(err)), 0);
	assert_int_equal(f->cfg.count, 7);
	assert_int_equal(options_set(defs, &f->cfg, "stream_timeout", "2", err, sizeof(err)), 0);
	assert_true(f->cfg.timeout == 2.0);
	assert_int_equal(options_set(defs, &f->cfg, "maxcount", "7", err, sizeof(err)), -1);
	assert_string_equal(err, "unknown option 'maxcount'");
	assert_int_equal(options_set(defs, &f->cfg, "max-count-x", "7", err, sizeof(err)), -1);
	assert_string_equal(err, "unknown option 'max-count-x'");
	assert_int_equal(options_set(defs, &f->cfg, "max", "7", err, sizeof(err)), -1);
	assert_string_equal(err, "unknown option 'max'");
	assert_int_equal(f->cfg.count, 7);
}

static void test_range_errors(void **state)
{
	struct fixture *f = *state;
	char err[256] = "";
	static const char *const bad_uint[] = { "0", "101", "-1", "1.5", "ten", "", " 5", "18446744073709551616" };
	for (size_t i = 0; i < sizeof(bad_uint) / sizeof(bad_uint[0]); i++) {
		char want[128];
		snprintf(want, sizeof(want), "max-count: '%s' is not an integer in 1..100", bad_uint[i]);
		assert_int_equal(options_set(defs, &f->cfg, "max-count", bad_uint[i], err, sizeof(err)), -1);
		assert_string_equal(err, want);
	}
	assert_int_equal(f->cfg.count, 5);   /* untouched */
	assert_int_equal(options_set(defs, &f->cfg, "stream-timeout", "0.4", err, sizeof(err)), -1);
	assert_string_equal(err, "stream-timeout: '0.4' is not a number of seconds in 0.5..60");
	assert_int_equal(options_set(defs, &f->cfg, "stream-timeout", "61", err, sizeof(err)), -1);
	assert_string_equal(err, "stream-timeout: '61' is not a number of seconds in 0.5..60");
	assert_int_equal(options_set(defs, &f->cfg, "stream-timeout", "1s", err, sizeof(err)), -1);
	assert_true(f->cfg.timeout == 30.0);
	assert_int_equal(options_set(defs, &f->cfg, "verbose", "maybe", err, sizeof(err)), -1);
	assert_string_equal(err, "verbose: 'maybe' is not yes or no");
	assert_int_equal(options_set(defs, &f->cfg, "mode", "medium", err, sizeof(err)), -1);
	assert_string_equal(err, "mode: 'medium' is not one of fast, slow");
	assert_int_equal(options_set(defs, &f->cfg, "mode", "Fast", err, sizeof(err)), -1);
	assert_null(f->cfg.mode);
}

static void test_load_file(void **state)
{
	struct fixture *f = *state;
	write_file(f->path,
		   "# a comment\n"
		   "; another\n"
		   "[test]\n"
		   "name = from-file\n"
		   "max_count = 42\n"
		   "stream-timeout=2.5\n"
		   "verbose = yes\n"
		   "\n"
		   "mode = slow\n");
	char err[512] = "";
	assert_int_equal(options_load_file(defs, &f->cfg, f->path, "test", err, sizeof(err)), 0);
	assert_string_equal(f->cfg.name, "from-file");
	assert_int_equal(f->cfg.count, 42);
	assert_true(f->cfg.timeout == 2.5);
	assert_true(f->cfg.verbose);
	assert_string_equal(f->cfg.mode, "slow");
}

static void expect_file_error(struct fixture *f, const char *text, int line, const char *msg)
{
	char err[512] = "", want[512];
	write_file(f->path, text);
	assert_int_equal(options_load_file(defs, &f->cfg, f->path, "test", err, sizeof(err)), -1);
	snprintf(want, sizeof(want), "%s:%d: %s", f->path, line, msg);
	assert_string_equal(err, want);
}

static void test_file_errors_name_the_line(void **state)
{
	struct fixture *f = *state;
	expect_file_error(f, "[test]\nname = a\n\nbogus = 1\nname = b\n", 4, "unknown option 'bogus'");
	expect_file_error(f, "[test]\nname = a\n[other]\nname = b\n", 4, "unknown section [other] (expected [test])");
	expect_file_error(f, "# no section yet\nname = a\n", 2, "unknown section [] (expected [test])");
	expect_file_error(f, "[test]\n# range\n\nmax-count = 500\n", 4, "max-count: '500' is not an integer in 1..100");
	expect_file_error(f, "[test]\nverbose = sometimes\n", 2, "verbose: 'sometimes' is not yes or no");
	expect_file_error(f, "[test]\nmode = medium\n", 2, "mode: 'medium' is not one of fast, slow");
	expect_file_error(f, "[test]\nname = a\njust words\n", 3, "syntax error");
	/* the first error wins: a later one does not overwrite it */
	expect_file_error(f, "[test]\nbogus = 1\nmax-count = 0\n", 2, "unknown option 'bogus'");
}

static void test_missing_file(void **state)
{
	struct fixture *f = *state;
	char err[512] = "", want[512];
	assert_int_equal(options_load_file(defs, &f->cfg, f->path, "test", err, sizeof(err)), -1);
	snprintf(want, sizeof(want), "cannot read config file '%s'", f->path);
	assert_string_equal(err, want);
}

static void test_parse_command_line_wins(void **state)
{
	struct fixture *f = *state;
	write_file(f->path, "[test]\nname = from-file\nmax-count = 42\nstream-timeout = 2.5\nmode = slow\n");
	/* the command-line option comes before -c and still wins */
	char *argv[] = { "prog", "--name", "from-cli", "-c", f->path, "--max-count", "9", "-v", "operand", "--mode",
			 "fast", NULL };
	int argc = (int)(sizeof(argv) / sizeof(argv[0])) - 1;
	int first = -1;
	char err[512] = "";
	int rc = options_parse(defs, &f->cfg, argc, argv, "test", "[OPTIONS]", "1.0", &first, err, sizeof(err));
	if (rc != 0)
		fail_msg("options_parse: %d %s", rc, err);
	assert_string_equal(f->cfg.name, "from-cli");
	assert_int_equal(f->cfg.count, 9);
	assert_true(f->cfg.timeout == 2.5);          /* only in the file */
	assert_true(f->cfg.verbose);
	assert_string_equal(f->cfg.mode, "slow");    /* "--mode fast" is after the first operand */
	assert_int_equal(first, 8);
	assert_string_equal(argv[first], "operand");
}

static void test_parse_short_options(void **state)
{
	struct fixture *f = *state;
	char *argv[] = { "prog", "-n", "short", "-t", "1.25", "-v", NULL };
	int first = -1;
	char err[256] = "";
	assert_int_equal(options_parse(defs, &f->cfg, 6, argv, "test", "", "1.0", &first, err, sizeof(err)), 0);
	assert_string_equal(f->cfg.name, "short");
	assert_true(f->cfg.timeout == 1.25);
	assert_true(f->cfg.verbose);
	assert_int_equal(first, 6);
}

static void test_parse_errors(void **state)
{
	struct fixture *f = *state;
	char err[512] = "";
	int first = -1;
	char *a1[] = { "prog", "--bogus", NULL };
	assert_int_equal(options_parse(defs, &f->cfg, 2, a1, "test", "", "1.0", &first, err, sizeof(err)), -1);
	assert_string_equal(err, "unknown option or missing value: --bogus");
	char *a2[] = { "prog", "--max-count", "0", NULL };
	assert_int_equal(options_parse(defs, &f->cfg, 3, a2, "test", "", "1.0", &first, err, sizeof(err)), -1);
	assert_string_equal(err, "max-count: '0' is not an integer in 1..100");
	char *a3[] = { "prog", "--name", NULL };
	assert_int_equal(options_parse(defs, &f->cfg, 2, a3, "test", "", "1.0", &first, err, sizeof(err)), -1);
	assert_string_equal(err, "unknown option or missing value: --name");
	char *a4[] = { "prog", "-x", NULL };
	assert_int_equal(options_parse(defs, &f->cfg, 2, a4, "test", "", "1.0", &first, err, sizeof(err)), -1);
	assert_string_equal(err, "unknown option or missing value: -x");
	/* a bad config file fails the parse with the file's message */
	write_file(f->path, "[test]\nbogus = 1\n");
	char *a5[] = { "prog", "-c", f->path, NULL };
	assert_int_equal(options_parse(defs, &f->cfg, 3, a5, "test", "", "1.0", &first, err, sizeof(err)), -1);
	char want[512];
	snprintf(want, sizeof(want), "%s:2: unknown option 'bogus'", f->path);
	assert_string_equal(err, want);
	assert_int_equal(first, -1);
	assert_null(f->cfg.name);
}

/* Runs options_parse with stdout sent to a file; returns what was printed. */
static char *parse_capturing(struct fixture *f, int argc, char **argv, int *rc)
{
	char out[160];
	snprintf(out, sizeof(out), "%s/stdout", f->dir);
	fflush(stdout);
	int saved = dup(STDOUT_FILENO);
	int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(saved >= 0 && fd >= 0);
	dup2(fd, STDOUT_FILENO);
	close(fd);
	int first = -1;
	char err[256] = "";
	*rc = options_parse(defs, &f->cfg, argc, argv, "test", "[OPTIONS] FILE", "tether 9.9", &first, err, sizeof(err));
	fflush(stdout);
	dup2(saved, STDOUT_FILENO);
	close(saved);
	FILE *fp = fopen(out, "r");
	assert_non_null(fp);
	char *text = calloc(1, 8192);
	assert_non_null(text);
	size_t n = fread(text, 1, 8191, fp);
	text[n] = '\0';
	fclose(fp);
	unlink(out);
	return text;
}

static void test_help_and_version_return_1(void **state)
{
	struct fixture *f = *state;
	int rc = -9;
	char *argv[] = { "prog", "--help", NULL };
	char *text = parse_capturing(f, 2, argv, &rc);
	assert_int_equal(rc, 1);
	assert_true(strncmp(text, "usage: prog [OPTIONS] FILE\n", 27) == 0);
	assert_non_null(strstr(text, "  -n, --name NAME"));
	assert_non_null(strstr(text, "      --max-count N"));
	assert_non_null(strstr(text, "-v, --verbose "));
	assert_non_null(strstr(text, "idle limit\n"));
	free(text);

	char *argv2[] = { "prog", "-V", NULL };
	text = parse_capturing(f, 2, argv2, &rc);
	assert_int_equal(rc, 1);
	assert_string_equal(text, "tether 9.9\n");
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_set_every_kind, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dashes_and_underscores, setup, teardown),
		cmocka_unit_test_setup_teardown(test_range_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_load_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_file_errors_name_the_line, setup, teardown),
		cmocka_unit_test_setup_teardown(test_missing_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_parse_command_line_wins, setup, teardown),
		cmocka_unit_test_setup_teardown(test_parse_short_options, setup, teardown),
		cmocka_unit_test_setup_teardown(test_parse_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_help_and_version_return_1, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
