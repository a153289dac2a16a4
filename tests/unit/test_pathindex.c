/* test_pathindex.c: unit tests of common/pathindex.c: owners of paths and
 * counts of files under nested directories through adds and removes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pathindex.h"

static void test_empty(void **state)
{
	(void)state;
	struct pathindex pi;
	pathindex_init(&pi);
	assert_null(pathindex_file_at(&pi, "a"));
	assert_int_equal(pathindex_files_under(&pi, "a"), 0);
	assert_int_equal(pathindex_files_under(&pi, ""), 0);
	pathindex_remove(&pi, "a/b");   /* absent: nothing happens */
	assert_int_equal(pathindex_files_under(&pi, "a"), 0);
	pathindex_release(&pi);
}

static void test_nested_directories(void **state)
{
	(void)state;
	struct pathindex pi;
	pathindex_init(&pi);
	pathindex_add(&pi, "a/b/c", "file/x");
	assert_string_equal(pathindex_file_at(&pi, "a/b/c"), "file/x");
	assert_null(pathindex_file_at(&pi, "a/b"));
	assert_null(pathindex_file_at(&pi, "a"));
	assert_int_equal(pathindex_files_under(&pi, "a"), 1);
	assert_int_equal(pathindex_files_under(&pi, "a/b"), 1);
	assert_int_equal(pathindex_files_under(&pi, "a/b/c"), 0);
	assert_int_equal(pathindex_files_under(&pi, "b"), 0);
	assert_int_equal(pathindex_files_under(&pi, "a/"), 0);

	pathindex_add(&pi, "a/b/d", "file/y");
	pathindex_add(&pi, "a/e", "file/z");
	pathindex_add(&pi, "f", "file/w");
	pathindex_add(&pi, "ab/x", "file/v");
	assert_int_equal(pathindex_files_under(&pi, "a"), 3);
	assert_int_equal(pathindex_files_under(&pi, "a/b"), 2);
	assert_int_equal(pathindex_files_under(&pi, "ab"), 1);
	assert_int_equal(pathindex_files_under(&pi, "f"), 0);
	assert_string_equal(pathindex_file_at(&pi, "f"), "file/w");
	assert_string_equal(pathindex_file_at(&pi, "a/e"), "file/z");
	assert_null(pathindex_file_at(&pi, "a/b/c/d"));
	assert_null(pathindex_file_at(&pi, "a/e/"));
	pathindex_release(&pi);
}

static void test_readd_keeps_counts(void **state)
{
	(void)state;
	struct pathindex pi;
	pathindex_init(&pi);
	/* keys are borrowed: use heap copies to see which one is held */
	char *p1 = strdup("d/e/f"), *p2 = strdup("d/e/f");
	assert_non_null(p1);
	assert_non_null(p2);
	pathindex_add(&pi, p1, "file/one");
	pathindex_add(&pi, p2, "file/two");
	/* the same path again: a new owner, no second count */
	assert_string_equal(pathindex_file_at(&pi, "d/e/f"), "file/two");
	assert_int_equal(pathindex_files_under(&pi, "d"), 1);
	assert_int_equal(pathindex_files_under(&pi, "d/e"), 1);
	/* the index now holds p2: p1 may go (valgrind checks the rest) */
	free(p1);
	assert_string_equal(pathindex_file_at(&pi, "d/e/f"), "file/two");
	pathindex_remove(&pi, "d/e/f");
	assert_null(pathindex_file_at(&pi, "d/e/f"));
	assert_int_equal(pathindex_files_under(&pi, "d"), 0);
	free(p2);
	/* and back again after the removal */
	pathindex_add(&pi, "d/e/f", "file/three");
	assert_int_equal(pathindex_files_under(&pi, "d"), 1);
	assert_int_equal(pathindex_files_under(&pi, "d/e"), 1);
	assert_string_equal(pathindex_file_at(&pi, "d/e/f"), "file/three");
	pathindex_release(&pi);
}

static void test_remove_last_file_under_directory(void **state)
{
	(void)state;
	struct pathindex pi;
	pathindex_init(&pi);
	pathindex_add(&pi, "a/b/c", "file/x");
	pathindex_add(&pi, "a/b/d", "file/y");
	pathindex_add(&pi, "a/e", "file/z");
	pathindex_remove(&pi, "a/b/c");
	assert_int_equal(pathindex_files_under(&pi, "a"), 2);
	assert_int_equal(pathindex_files_under(&pi, "a/b"), 1);
	assert_null(pathindex_file_at(&pi, "a/b/c"));
	assert_string_equal(pathindex_file_at(&pi, "a/b/d"), "file/y");
	/* the last one under a/b: the directory is gone from the counts */
	pathindex_remove(&pi, "a/b/d");
	assert_int_equal(pathindex_files_under(&pi, "a/b"), 0);
	assert_int_equal(pathindex_files_under(&pi, "a"), 1);
	assert_int_equal(pi.dirs.len, 1);
	/* removing it again changes nothing */
	pathindex_remove(&pi, "a/b/d");
	assert_int_equal(pathindex_files_under(&pi, "a"), 1);
	/* nor does removing a directory's path, which is no file */
	pathindex_remove(&pi, "a");
	assert_int_equal(pathindex_files_under(&pi, "a"), 1);
	pathindex_remove(&pi, "a/e");
	assert_int_equal(pathindex_files_under(&pi, "a"), 0);
	assert_int_equal(pi.dirs.len, 0);
	assert_int_equal(pi.files.len, 0);
	/* the directory may now be a file's path */
	pathindex_add(&pi, "a", "file/a");
	assert_string_equal(pathindex_file_at(&pi, "a"), "file/a");
	assert_int_equal(pathindex_files_under(&pi, "a"), 0);
	pathindex_release(&pi);
}

static void test_many_files(void **state)
{
	(void)state;
	enum { N = 2000 };
	static char paths[N][32];
	struct pathindex pi;
	pathindex_init(&pi);
	for (int i = 0; i < N; i++) {
		snprintf(paths[i], sizeof(paths[i]), "d%d/s%d/f%d", i % 10, i % 7, i);
		pathindex_add(&pi, paths[i], paths[i]);
	}
	assert_int_equal(pi.files.len, N);
	for (int d = 0; d < 10; d++) {
		char dir[16];
		snprintf(dir, sizeof(dir), "d%d", d);
		assert_int_equal(pathindex_files_under(&pi, dir), N / 10);
	}
	/* d3/s5 holds i with i%10==3 and i%7==5: one in every 70 */
	assert_int_equal(pathindex_files_under(&pi, "d3/s5"), N / 70 + (N % 70 > 33 ? 1 : 0));
	/* remove the even ones, then the odd ones */
	for (int i = 0; i < N; i += 2)
		pathindex_remove(&pi, paths[i]);
	assert_int_equal(pathindex_files_under(&pi, "d1"), N / 10);
	assert_int_equal(pathindex_files_under(&pi, "d2"), 0);
	assert_null(pathindex_file_at(&pi, paths[0]));
	assert_ptr_equal(pathindex_file_at(&pi, paths[1]), paths[1]);
	for (int i = 1; i < N; i += 2)
		pathindex_remove(&pi, paths[i]);
	assert_int_equal(pi.files.len, 0);
	assert_int_equal(pi.dirs.len, 0);
	pathindex_release(&pi);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_nested_directories),
		cmocka_unit_test(test_readd_keeps_counts),
		cmocka_unit_test(test_remove_last_file_under_directory),
		cmocka_unit_test(test_many_files),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
