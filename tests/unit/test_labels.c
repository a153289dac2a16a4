/* test_labels.c: unit tests of common/labels.c: parsing "k=v,k2=v2" node
 * label lists into JSON objects, and every refusal with its message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "labels.h"

static char *repeat(char c, size_t n)
{
	char *s = malloc(n + 1);
	assert_non_null(s);
	memset(s, c, n);
	s[n] = '\0';
	return s;
}

/* Parses s and compares its compact print with want. */
static void expect_json(const char *s, const char *want)
{
	char err[256] = "";
	cJSON *v = labels_parse(s, err, sizeof(err));
	if (!v)
		fail_msg("labels '%s' refused: %s", s ? s : "(null)", err);
	char *txt = cJSON_PrintUnformatted(v);
	assert_string_equal(txt, want);
	free(txt);
	cJSON_Delete(v);
}

static void expect_err(const char *s, const char *want)
{
	char err[256] = "";
	cJSON *v = labels_parse(s, err, sizeof(err));
	if (v) {
		cJSON_Delete(v);
		fail_msg("labels '%s' accepted, want: %s", s, want);
	}
	assert_string_equal(err, want);
}

static void test_empty(void **state)
{
	(void)state;
	expect_json("", "{}");
	expect_json(NULL, "{}");
	expect_json(",", "{}");
	expect_json(",,,", "{}");
}

static void test_pairs(void **state)
{
	(void)state;
	expect_json("env=prod", "{\"env\":\"prod\"}");
	expect_json("env=prod,zone=eu-west-1", "{\"env\":\"prod\",\"zone\":\"eu-west-1\"}");
	expect_json("k=", "{\"k\":\"\"}");
	expect_json("a=1,,b=2,", "{\"a\":\"1\",\"b\":\"2\"}");
	expect_json(",a=1", "{\"a\":\"1\"}");
	expect_json("topology.kubernetes.io/zone=z_1.a-b", "{\"topology.kubernetes.io/zone\":\"z_1.a-b\"}");
	expect_json("A=B,a=b", "{\"A\":\"B\",\"a\":\"b\"}");   /* keys are case-sensitive */
}

static void test_malformed(void **state)
{
	(void)state;
	expect_err("env", "label 'env' must be key=value");
	expect_err("a=1,b", "label 'b' must be key=value");
	expect_err("=v", "label '=v': keys are 1..63 bytes, values 0..63");
	expect_err("k y=v", "label key 'k y' may hold only [A-Za-z0-9._/-]");
	expect_err("k*=v", "label key 'k*' may hold only [A-Za-z0-9._/-]");
	expect_err("k=v/x", "label value 'v/x' may hold only [A-Za-z0-9._-]");
	expect_err("k=a=b", "label value 'a=b' may hold only [A-Za-z0-9._-]");
	expect_err("k=v v", "label value 'v v' may hold only [A-Za-z0-9._-]");
	expect_err("k=\"v\"", "label value '\"v\"' may hold only [A-Za-z0-9._-]");
	expect_err("k=v\n", "label value 'v\n' may hold only [A-Za-z0-9._-]");
	expect_err("a=1,a=2", "label 'a' given twice");
	expect_err("a=1,b=2,a=1", "label 'a' given twice");
}

static void test_lengths(void **state)
{
	(void)state;
	char *k63 = repeat('k', 63), *k64 = repeat('k', 64), *v63 = repeat('v', 63), *v64 = repeat('v', 64);
	char in[200], want[300];
	snprintf(in, sizeof(in), "%s=%s", k63, v63);
	snprintf(want, sizeof(want), "{\"%s\":\"%s\"}", k63, v63);
	expect_json(in, want);

	char err[256];
	snprintf(in, sizeof(in), "%s=v", k64);
	cJSON *v = labels_parse(in, err, sizeof(err));
	assert_null(v);
	assert_non_null(strstr(err, "keys are 1..63 bytes, values 0..63"));
	snprintf(in, sizeof(in), "k=%s", v64);
	v = labels_parse(in, err, sizeof(err));
	assert_null(v);
	assert_non_null(strstr(err, "keys are 1..63 bytes, values 0..63"));
	/* a long label is quoted cut to 64 bytes */
	char *huge = repeat('x', 150);
	huge[10] = '=';
	v = labels_parse(huge, err, sizeof(err));
	assert_null(v);
	assert_int_equal(strlen(err), strlen("label '': keys are 1..63 bytes, values 0..63") + 64);
	free(huge);
	free(k63);
	free(k64);
	free(v63);
	free(v64);
}

static void test_count_limit(void **state)
{
	(void)state;
	char in[512];
	size_t len = 0;
	in[0] = '\0';
	for (int i = 0; i < LABELS_MAX; i++)
		len += (size_t)snprintf(in + len, sizeof(in) - len, "%sk%d=%d", i ? "," : "", i, i);
	char err[256];
	cJSON *v = labels_parse(in, err, sizeof(err));
	assert_non_null(v);
	assert_int_equal(cJSON_GetArraySize(v), LABELS_MAX);
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(v, "k31")->valuestring, "31");
	cJSON_Delete(v);
	snprintf(in + len, sizeof(in) - len, ",k%d=x", LABELS_MAX);
	expect_err(in, "more than 32 labels");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_pairs),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_lengths),
		cmocka_unit_test(test_count_limit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
