/* test_log.c: log.c writes one line per message: control characters in a
 * message (a tool's multi-line output, a peer's text) are escaped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "log.h"

static void test_escape(void **state)
{
	(void)state;
	char out[64];
	assert_int_equal(log_escape("plain text, \\u escapes kept", out, sizeof(out)), 27);
	assert_string_equal(out, "plain text, \\u escapes kept");
	log_escape("nginx: [emerg] a\nnginx: test failed\r\n", out, sizeof(out));
	assert_string_equal(out, "nginx: [emerg] a\\nnginx: test failed\\r\\n");
	log_escape("a\tb\x01" "c\x1b[31md\x7f", out, sizeof(out));
	assert_string_equal(out, "a\\tb\\x01c\\x1b[31md\\x7f");
	/* UTF-8 passes through */
	log_escape("caf\xc3\xa9", out, sizeof(out));
	assert_string_equal(out, "caf\xc3\xa9");
	/* never half an escape: "ab\n" in 4 bytes keeps "ab" */
	assert_int_equal(log_escape("ab\ncd", out, 4), 2);
	assert_string_equal(out, "ab");
	assert_int_equal(log_escape("ab\ncd", out, 5), 4);
	assert_string_equal(out, "ab\\n");
	assert_int_equal(log_escape("x", out, 1), 0);
	assert_string_equal(out, "");
}

/* log_msg's real output, through a pipe in place of stderr: one line for
 * a message with newlines, and the long one still ends with its newline */
static void test_one_line_per_message(void **state)
{
	(void)state;
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	int saved = dup(STDERR_FILENO);
	assert_true(saved >= 0);
	assert_int_equal(dup2(fds[1], STDERR_FILENO), STDERR_FILENO);
	log_init("test_log", LOG_LVL_INFO);
	log_warn("secret/site: cert: %s", "nginx: [emerg] cannot load certificate\nnginx: configuration file test failed");
	char *big = malloc(6000);
	assert_non_null(big);
	memset(big, '\n', 5999);
	big[5999] = '\0';
	log_error("many: %s", big);
	free(big);
	fflush(stderr);
	assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
	close(saved);
	close(fds[1]);
	char buf[16384];
	size_t got = 0;
	ssize_t r;
	while ((r = read(fds[0], buf + got, sizeof(buf) - 1 - got)) > 0)
		got += (size_t)r;
	close(fds[0]);
	buf[got] = '\0';
	char *nl = strchr(buf, '\n');
	assert_non_null(nl);
	*nl = '\0';
	assert_non_null(strstr(buf, " warn: secret/site: cert: nginx: [emerg] cannot load certificate\\nnginx: "
				    "configuration file test failed"));
	char *second = nl + 1;
	nl = strchr(second, '\n');
	assert_non_null(nl);
	assert_string_equal(nl + 1, "");   /* exactly two lines */
	assert_non_null(strstr(second, " error: many: \\n\\n"));
	assert_true(strlen(second) <= 4096);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_escape),
		cmocka_unit_test(test_one_line_per_message),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
