/* test_urllist.c: unit tests of common/urllist.c: splitting --plane and
 * --etcd lists, and every refusal with its message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "urllist.h"

static void test_one_and_several(void **state)
{
	(void)state;
	char *u[4], err[256];
	assert_int_equal(urllist_parse("http://a:1", u, 4, err, sizeof(err)), 1);
	assert_string_equal(u[0], "http://a:1");
	urllist_free(u, 1);
	assert_int_equal(urllist_parse(" http://a:1/ , https://b:2//,http://c", u, 4, err, sizeof(err)), 3);
	assert_string_equal(u[0], "http://a:1");
	assert_string_equal(u[1], "https://b:2");
	assert_string_equal(u[2], "http://c");
	urllist_free(u, 3);
}

static void refused(const char *list, int max, const char *why)
{
	char *u[4] = { NULL }, err[256] = "";
	assert_int_equal(urllist_parse(list, u, max, err, sizeof(err)), -1);
	if (!strstr(err, why))
		fail_msg("'%s': '%s' does not say '%s'", list, err, why);
}

static void test_refusals(void **state)
{
	(void)state;
	refused("", 4, "an empty URL");
	refused("http://a,,http://b", 4, "an empty URL");
	refused("http://a,", 4, "an empty URL");
	refused("ftp://a", 4, "must be an http:// or https:// URL");
	refused("a:7070", 4, "must be an http:// or https:// URL");
	refused("http://", 4, "must be an http:// or https:// URL");
	refused("https:///", 4, "must be an http:// or https:// URL");
	refused("http://a,http://A/", 4, "listed twice");
	refused("HTTP://a", 4, "must be an http:// or https:// URL");
	refused("http://a,http://b,http://c", 2, "more than 2 URLs");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_and_several),
		cmocka_unit_test(test_refusals),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
