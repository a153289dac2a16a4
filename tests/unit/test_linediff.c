/* test_linediff.c: unit tests of ctl/linediff.c: equal texts, pure
 * additions and removals, a change in the middle with context, hunks
 * apart and merged, colours, and the fallback for huge middles. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "linediff.h"
#include "xmalloc.h"

static char *diff(const char *a, const char *b, int ctx, bool color, size_t *changed)
{
	struct buf out = BUF_INIT;
	*changed = linediff(a, b, ctx, color, &out);
	buf_puts(&out, "");
	return buf_detach(&out, NULL);
}

static void test_equal(void **state)
{
	(void)state;
	size_t n;
	char *d = diff("a\nb\n", "a\nb\n", 3, false, &n);
	assert_int_equal(n, 0);
	assert_string_equal(d, "");
	free(d);
	d = diff("", "", 3, false, &n);
	assert_int_equal(n, 0);
	assert_string_equal(d, "");
	free(d);
	/* a missing final newline is not a difference */
	d = diff("a\nb", "a\nb\n", 3, false, &n);
	assert_int_equal(n, 0);
	free(d);
}

static void test_create_and_delete(void **state)
{
	(void)state;
	size_t n;
	char *d = diff("", "{\n  \"a\": 1\n}\n", 3, false, &n);
	assert_int_equal(n, 3);
	assert_string_equal(d, "@@ -0,0 +1,3 @@\n+{\n+  \"a\": 1\n+}\n");
	free(d);
	d = diff("x\ny\n", "", 3, false, &n);
	assert_int_equal(n, 2);
	assert_string_equal(d, "@@ -1,2 +0,0 @@\n-x\n-y\n");
	free(d);
}

static void test_change_with_context(void **state)
{
	(void)state;
	size_t n;
	const char *a = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";
	const char *b = "1\n2\n3\n4\nfive\n6\n7\n8\n9\n";
	char *d = diff(a, b, 2, false, &n);
	assert_int_equal(n, 2);
	assert_string_equal(d, "@@ -3,5 +3,5 @@\n 3\n 4\n-5\n+five\n 6\n 7\n");
	free(d);
	/* an insertion keeps the lines around it */
	d = diff("a\nc\n", "a\nb\nc\n", 1, false, &n);
	assert_int_equal(n, 1);
	assert_string_equal(d, "@@ -1,2 +1,3 @@\n a\n+b\n c\n");
	free(d);
}

static void test_hunks(void **state)
{
	(void)state;
	size_t n;
	/* changes at lines 1 and 10, context 1: two hunks */
	const char *a = "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n";
	const char *b = "A\nb\nc\nd\ne\nf\ng\nh\ni\nJ\n";
	char *d = diff(a, b, 1, false, &n);
	assert_int_equal(n, 4);
	assert_string_equal(d, "@@ -1,2 +1,2 @@\n-a\n+A\n b\n@@ -9,2 +9,2 @@\n i\n-j\n+J\n");
	free(d);
	/* context 4: they are within 2*4 lines, one hunk */
	d = diff(a, b, 4, false, &n);
	assert_int_equal(n, 4);
	assert_non_null(strstr(d, "@@ -1,10 +1,10 @@\n"));
	assert_null(strstr(d + 1, "@@ -"));
	free(d);
}

static void test_lcs_keeps_common_lines(void **state)
{
	(void)state;
	size_t n;
	char *d = diff("x\na\ny\nb\nz\n", "a\nq\nb\n", 0, false, &n);
	/* a and b are kept; x, y, z go; q comes */
	assert_int_equal(n, 4);
	assert_null(strstr(d, "-a\n"));
	assert_null(strstr(d, "-b\n"));
	assert_non_null(strstr(d, "-x\n"));
	assert_non_null(strstr(d, "-y\n"));
	assert_non_null(strstr(d, "+q\n"));
	assert_non_null(strstr(d, "-z\n"));
	free(d);
}

static void test_color(void **state)
{
	(void)state;
	size_t n;
	char *d = diff("a\n", "b\n", 3, true, &n);
	assert_string_equal(d, "\033[36m@@ -1,1 +1,1 @@\033[0m\n\033[31m-a\033[0m\n\033[32m+b\033[0m\n");
	free(d);
}

static void test_huge_middle(void **state)
{
	(void)state;
	/* 3000 x 3000 lines that all differ: past LINEDIFF_MAX_CELLS, the
	 * middle is removed then added whole */
	struct buf a = BUF_INIT, b = BUF_INIT;
	for (int i = 0; i < 3000; i++) {
		buf_printf(&a, "a%d\n", i);
		buf_printf(&b, "b%d\n", i);
	}
	size_t n;
	char *d = diff(a.data, b.data, 3, false, &n);
	assert_int_equal(n, 6000);
	assert_non_null(strstr(d, "@@ -1,3000 +1,3000 @@\n-a0\n"));
	free(d);
	buf_release(&a);
	buf_release(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_equal),
		cmocka_unit_test(test_create_and_delete),
		cmocka_unit_test(test_change_with_context),
		cmocka_unit_test(test_hunks),
		cmocka_unit_test(test_lcs_keeps_common_lines),
		cmocka_unit_test(test_color),
		cmocka_unit_test(test_huge_middle),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
