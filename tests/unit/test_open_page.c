/* test_open_page.c: the private page of tetherctl ui --open (ctl/open_page.c):
 * its modes, the link in it escaped for both places it lands (a script's
 * string and an attribute), a refusal when the directory cannot be made,
 * and its removal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "open_page.h"
#include "tmpdir.h"
#include "xmalloc.h"

static char dir[256];

static int setup(void **state)
{
	(void)state;
	return test_tmpdir_make(dir, sizeof(dir), "open_page");
}

static int teardown(void **state)
{
	(void)state;
	return test_tmpdir_remove(dir);
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	char *s = xcalloc(1, 65536);
	size_t n = fread(s, 1, 65535, f);
	s[n] = 0;
	fclose(f);
	return s;
}

static void test_modes_and_link(void **state)
{
	(void)state;
	char *d = NULL, *page = NULL, err[256] = "";
	const char *link = "http://127.0.0.1:7070/ui/#s=tt1_0123456789ab_AbC-_x";
	assert_int_equal(open_page_write(dir, link, &d, &page, err, sizeof(err)), 0);
	struct stat st;
	assert_int_equal(stat(d, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	assert_int_equal(stat(page, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_true(strncmp(d, dir, strlen(dir)) == 0);
	char *s = slurp(page);
	assert_non_null(strstr(s, "location.replace(\"http://127.0.0.1:7070/ui/#s=tt1_0123456789ab_AbC-_x\")"));
	assert_non_null(strstr(s, "url=http://127.0.0.1:7070/ui/#s=tt1_0123456789ab_AbC-_x\""));
	assert_non_null(strstr(s, "<meta name=\"referrer\" content=\"no-referrer\">"));
	free(s);
	open_page_remove(d, page);
	assert_int_equal(access(page, F_OK), -1);
	assert_int_equal(access(d, F_OK), -1);
	free(d);
	free(page);
}

/* A --plane URL is the user's, but nothing in it ends the script's string,
 * the script, or the attribute. */
static void test_escaped(void **state)
{
	(void)state;
	char *d = NULL, *page = NULL, err[256] = "";
	const char *link = "http://h/</script><script>alert(1)</script>\"'&\\\n#s=x";
	assert_int_equal(open_page_write(dir, link, &d, &page, err, sizeof(err)), 0);
	char *s = slurp(page);
	assert_null(strstr(s, "alert(1)</script>"));
	assert_null(strstr(s, "<script>alert"));
	assert_non_null(strstr(s, "\\u003c/script\\u003e\\u003cscript\\u003ealert(1)"));
	assert_non_null(strstr(s, "\\u0022\\u0027\\u0026\\u005c\\u000a#s=x\");"));
	assert_non_null(strstr(s, "&#60;/script&#62;&#60;script&#62;alert(1)&#60;/script&#62;&#34;&#39;&#38;\\&#10;#s=x\""));
	/* one script element only: the page's own */
	const char *first = strstr(s, "<script>");
	assert_non_null(first);
	assert_null(strstr(first + 1, "<script>"));
	free(s);
	open_page_remove(d, page);
	free(d);
	free(page);
}

static void test_no_directory(void **state)
{
	(void)state;
	char *d = NULL, *page = NULL, err[256] = "", missing[300];
	snprintf(missing, sizeof(missing), "%s/not/there", dir);
	assert_int_equal(open_page_write(missing, "http://h/ui/#s=x", &d, &page, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "cannot make a private directory in"));
	assert_non_null(strstr(err, "TMPDIR"));
	assert_null(d);
	assert_null(page);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_modes_and_link, setup, teardown),
		cmocka_unit_test_setup_teardown(test_escaped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_directory, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
