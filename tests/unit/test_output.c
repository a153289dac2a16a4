/* test_output.c: unit tests of tetherctl's words for people (ctl/output.c,
 * ctl/rollout_text.c): local ISO 8601 times under two time zones,
 * durations and ages in words, objects as words (never JSON), and a
 * rollout's lines: counts in words, its queue and what it waits for. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "output.h"
#include "rollout_text.h"
#include "xmalloc.h"

static void set_tz(const char *tz)
{
	setenv("TZ", tz, 1);
	tzset();
}

static void test_time_local(void **state)
{
	(void)state;
	set_tz("Asia/Kolkata");
	char *t = time_local_text(1796530323.0);   /* 2026-12-06T04:12:03Z */
	assert_string_equal(t, "2026-12-06T09:42:03+05:30");
	free(t);
	set_tz("UTC");
	t = time_local_text(1796530323.9);
	assert_string_equal(t, "2026-12-06T04:12:03+00:00");
	free(t);
	set_tz("America/New_York");
	t = time_local_text(1796530323.0);
	assert_string_equal(t, "2026-12-05T23:12:03-05:00");
	free(t);
	t = time_local_text(0);
	assert_string_equal(t, "-");
	free(t);
	t = time_local_text(1e300);   /* past the year 9999 */
	assert_string_equal(t, "-");
	free(t);
	set_tz("UTC");
}

static void test_durations(void **state)
{
	(void)state;
	static const struct {
		double s;
		const char *want;
	} cases[] = {
		{ 0, "0 s" }, { 19.4, "19 s" }, { 119, "119 s" }, { 120, "2 min" }, { 3599, "59 min" },
		{ 7200, "2 h 0 min" }, { 7500, "2 h 5 min" }, { 172800, "2 days" }, { -5, "0 s" },
		{ 1e300, "11574074 days" },   /* a plane's nonsense: capped, never undefined */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *d = duration_text(cases[i].s);
		assert_string_equal(d, cases[i].want);
		free(d);
	}
	double now = (double)time(NULL);
	char *nan = duration_text(0.0 / 0.0);
	assert_string_equal(nan, "0 s");
	free(nan);
	char *a = ago_text(now - 130);
	assert_string_equal(a, "2 min ago");
	free(a);
	a = ago_text(now + 30);
	assert_true(strncmp(a, "in ", 3) == 0);
	free(a);
	a = ago_text(now);
	assert_string_equal(a, "just now");
	free(a);
}

static char *text_of(const char *json)
{
	cJSON *v = cJSON_Parse(json);
	assert_non_null(v);
	char *t = value_text(v);
	cJSON_Delete(v);
	return t;
}

static void test_values_as_words(void **state)
{
	(void)state;
	static const struct {
		const char *json, *want;
	} cases[] = {
		{ "\"x\"", "x" }, { "null", "-" }, { "true", "yes" }, { "12", "12" }, { "1.5", "1.5" },
		{ "[1,2]", "1, 2" }, { "[]", "-" }, { "{}", "-" },
		{ "{\"members\":3,\"acked\":2}", "members 3, acked 2" },
		{ "[{\"a\":1},{\"a\":2}]", "a 1; a 2" },
		{ "{\"gate\":{\"verdict\":\"pass\"},\"n\":[1]}", "gate (verdict pass), n 1" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *t = text_of(cases[i].json);
		assert_string_equal(t, cases[i].want);
		assert_null(strchr(t, '{'));
		free(t);
	}
}

/* The lines a rollout prints, as "label: value" joined by newlines. */
static char *rollout_lines(const char *json)
{
	cJSON *doc = cJSON_Parse(json);
	assert_non_null(doc);
	struct fields f = { 0, NULL, NULL };
	rollout_text_fields(&f, doc);
	cJSON_Delete(doc);
	char *out = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&out, &len);
	assert_non_null(mem);
	for (size_t i = 0; i < f.n; i++)
		fprintf(mem, "%s: %s\n", f.label[i], f.value[i]);
	fclose(mem);
	for (size_t i = 0; i < f.n; i++) {
		free(f.label[i]);
		free(f.value[i]);
	}
	free(f.label);
	free(f.value);
	return out;
}

static void test_rollout_words(void **state)
{
	(void)state;
	set_tz("UTC");
	char *out = rollout_lines(
		"{\"id\":5,\"state\":\"in_progress\",\"stage\":10,\"stage_index\":2,\"stages\":[1,10,100],"
		"\"from_version\":11,\"to_version\":12,\"revert_version\":0,\"parent\":0,\"touched\":3,\"members\":10,"
		"\"reached\":3,\"acked\":2,\"stage_counts\":[{\"members\":1,\"reached\":true,\"acked\":1,\"unhealthy\":0,"
		"\"nacked\":0,\"pending\":0},{\"members\":2,\"reached\":true,\"acked\":1,\"unhealthy\":0,\"nacked\":1,"
		"\"pending\":0},{\"members\":7,\"reached\":false,\"acked\":0,\"unhealthy\":0,\"nacked\":0,\"pending\":0}],"
		"\"reason\":null,\"started_at\":1796530323.5,\"stage_started_at\":1796530330,\"finished_at\":null,"
		"\"bake\":60,\"messages\":3,\"revert_messages\":0,\"version_only_messages\":0,"
		"\"queue\":[{\"version\":13,\"author\":\"alice\",\"message\":\"the fix\",\"since\":1796530340}],"
		"\"queued\":2}");
	assert_non_null(strstr(out, "rollout: 5 (in progress): version 11 -> 12\n"));
	assert_non_null(strstr(out, "stage: 2 of 3 (10%): 3 of 10 nodes reached\n"));
	assert_non_null(strstr(out, "nodes: 2 of 3 ACKed, 1 NACKed, 0 unhealthy, 0 pending\n"));
	assert_non_null(strstr(out, "stages: 1%: 1 node, 1 ACKed; 10%: 2 nodes, 1 ACKed, 1 NACKed; 100%: 7 nodes, "
				    "not reached yet\n"));
	assert_non_null(strstr(out, "started: 2026-12-06T04:12:03+00:00 ("));
	assert_non_null(strstr(out, "bake: 60 s\n"));
	assert_non_null(strstr(out, "queued: version 13 (alice, "));
	assert_non_null(strstr(out, "): \"the fix\"\n"));
	assert_non_null(strstr(out, "queued: 1 more version\n"));
	assert_null(strchr(out, '{'));
	free(out);

	out = rollout_lines("{\"id\":null,\"state\":\"none\",\"waiting\":{\"for\":\"nodes\",\"version\":12,\"back\":3,"
			    "\"expected\":10,\"until\":1796530342},\"queue\":[],\"queued\":0}");
	assert_non_null(strstr(out, "rollout: none yet\n"));
	assert_non_null(strstr(out, "waiting: version 12 waits for nodes to reconnect: 3 of 10 back, up to "));
	assert_non_null(strstr(out, "(until 2026-12-06T04:12:22+00:00)\n"));
	assert_non_null(strstr(out, "queued: nothing\n"));
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_time_local),
		cmocka_unit_test(test_durations),
		cmocka_unit_test(test_values_as_words),
		cmocka_unit_test(test_rollout_words),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
