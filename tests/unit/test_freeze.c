/* test_freeze.c: unit tests of the freeze window: TIME (RFC 3339 UTC and
 * durations, every refusal), the checks on a freeze (past, 30 days,
 * message), the record's JSON both ways and PUT's body (common/freeze.c);
 * and the plane's keeping of it (plane/core/freeze_state.c over the SQLite
 * backend): stored and read back across a reopen, the write check (423
 * without an override, an admin's override passes, another's does not),
 * a freeze that ended, the hold's words. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "core/freeze_state.h"
#include "freeze.h"
#include "persist/persist.h"
#include "tmpdir.h"
#include "util.h"

#define NOW 1796515200   /* 2026-12-06T00:00:00Z */

/* ---- TIME ------------------------------------------------------------------ */

static void test_time_rfc3339(void **state)
{
	(void)state;
	char err[256];
	int64_t t = 0;
	assert_int_equal(freeze_parse_time("2026-12-06T18:00:00Z", NOW, &t, err, sizeof(err)), 0);
	assert_int_equal(t, 1796580000);
	assert_int_equal(freeze_parse_time("2026-12-06t18:00:00z", NOW, &t, err, sizeof(err)), 0);
	assert_int_equal(t, 1796580000);
	assert_int_equal(freeze_parse_time("1970-01-01T00:00:00Z", NOW, &t, err, sizeof(err)), 0);
	assert_int_equal(t, 0);
	assert_int_equal(freeze_parse_time("2028-02-29T23:59:59Z", NOW, &t, err, sizeof(err)), 0);   /* a leap day */
	char text[32];
	freeze_time_text(1796580000, text);
	assert_string_equal(text, "2026-12-06T18:00:00Z");

	static const char *const bad[] = {
		"2026-12-06T18:00:00",      /* no zone */
		"2026-12-06T18:00:00+01:00",/* not UTC */
		"2026-12-06 18:00:00Z",     /* a space */
		"2026-12-06T18:00:00.5Z",   /* fractions */
		"2026-13-06T18:00:00Z",     /* month 13 */
		"2027-02-29T00:00:00Z",     /* not a leap year */
		"2026-02-30T00:00:00Z",
		"2026-12-06T24:00:00Z",
		"2026-12-06T18:60:00Z",
		"2026-12-06T18:00:60Z",
		"1969-12-31T23:59:59Z",
		"+026-12-06T18:00:00Z",
		"2026-1-06T18:00:00Z",
		"-",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(freeze_parse_time(bad[i], NOW, &t, err, sizeof(err)), -1);
		assert_non_null(strstr(err, "RFC 3339"));
	}
}

static void test_time_duration(void **state)
{
	(void)state;
	char err[256];
	int64_t t = 0;
	struct {
		const char *s;
		int64_t d;
	} ok[] = { { "90m", 5400 }, { "2h", 7200 }, { "1d", 86400 }, { "45s", 45 }, { "1h30m", 5400 },
		   { "0s", 0 }, { "1d2h3m4s", 93784 }, { "007m", 420 } };
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		assert_int_equal(freeze_parse_time(ok[i].s, NOW, &t, err, sizeof(err)), 0);
		assert_int_equal(t, NOW + ok[i].d);
	}
	static const char *const bad[] = { "", "m", "90", "2x", "h2", "1.5h", " 2h", "2h ", "2H", "99999999999d",
					   "3700d", "1d1" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(freeze_parse_time(bad[i], NOW, &t, err, sizeof(err)), -1);
		assert_true(err[0] != '\0');
	}
	assert_int_equal(freeze_parse_time(NULL, NOW, &t, err, sizeof(err)), -1);
}

/* ---- the checks ---------------------------------------------------------------- */

static void test_check(void **state)
{
	(void)state;
	char err[512], big[FREEZE_MESSAGE_MAX + 2];
	assert_int_equal(freeze_check(NOW + 60, "release week", NOW, err, sizeof(err)), 0);
	assert_int_equal(freeze_check(NOW + FREEZE_MAX_AHEAD, "m", NOW, err, sizeof(err)), 0);
	assert_int_equal(freeze_check(NOW, "m", NOW, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not in the future"));
	assert_int_equal(freeze_check(NOW - 5, "m", NOW, err, sizeof(err)), -1);
	assert_int_equal(freeze_check(NOW + FREEZE_MAX_AHEAD + 1, "m", NOW, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "30 days"));
	assert_int_equal(freeze_check(NOW + 60, NULL, NOW, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "message is missing"));
	assert_int_equal(freeze_check(NOW + 60, "", NOW, err, sizeof(err)), -1);
	assert_int_equal(freeze_check(NOW + 60, "two\nlines", NOW, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "one line"));
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(freeze_check(NOW + 60, big, NOW, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "at most 1024"));
	big[FREEZE_MESSAGE_MAX] = '\0';
	assert_int_equal(freeze_check(NOW + 60, big, NOW, err, sizeof(err)), 0);
}

/* ---- the record's JSON and PUT's body ------------------------------------------------ */

static void test_record_json(void **state)
{
	(void)state;
	struct freeze_rec f = { .until = NOW + 3600, .at = NOW }, back;
	strcpy(f.message, "release \"week\" \xc3\xa9");
	strcpy(f.by, "alice (admin)");
	struct buf b = BUF_INIT;
	freeze_rec_json(&f, &b);
	buf_putc(&b, '\0');
	assert_string_equal(b.data, "{\"at\":1796515200,\"by\":\"alice (admin)\",\"message\":\"release \\\"week\\\" "
				    "\xc3\xa9\",\"until\":1796518800}");
	char err[256];
	assert_int_equal(freeze_rec_parse(b.data, strlen(b.data), &back, err, sizeof(err)), 0);
	assert_int_equal(back.until, f.until);
	assert_int_equal(back.at, f.at);
	assert_string_equal(back.message, f.message);
	assert_string_equal(back.by, f.by);
	buf_release(&b);

	static const char *const bad[] = {
		"", "[]", "null", "{", "{\"until\":1,\"at\":1,\"message\":\"m\"}",
		"{\"until\":1,\"at\":1,\"message\":\"m\",\"by\":\"b\",\"x\":1}",
		"{\"until\":-1,\"at\":1,\"message\":\"m\",\"by\":\"b\"}",
		"{\"until\":1.5,\"at\":1,\"message\":\"m\",\"by\":\"b\"}",
		"{\"until\":\"1\",\"at\":1,\"message\":\"m\",\"by\":\"b\"}",
		"{\"until\":1,\"at\":1,\"message\":\"\",\"by\":\"b\"}",
		"{\"until\":1,\"at\":1,\"message\":7,\"by\":\"b\"}",
		"{\"until\":1,\"until\":2,\"at\":1,\"message\":\"m\",\"by\":\"b\"}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(freeze_rec_parse(bad[i], strlen(bad[i]), &back, err, sizeof(err)), -1);
		assert_non_null(strstr(err, "freeze record"));
	}
}

static void test_body(void **state)
{
	(void)state;
	char err[512], text[256];
	struct freeze_rec f;
	snprintf(text, sizeof(text), "{\"until\":%d,\"message\":\"release week\"}", NOW + 600);
	assert_int_equal(freeze_body_parse(text, strlen(text), NOW, &f, err, sizeof(err)), 0);
	assert_int_equal(f.until, NOW + 600);
	assert_string_equal(f.message, "release week");

	struct {
		const char *body, *says;
	} bad[] = {
		{ "{\"until\":1796515260}", "message is missing" },
		{ "{\"message\":\"m\"}", "until is missing" },
		{ "{\"until\":1796515100,\"message\":\"m\"}", "not in the future" },
		{ "{\"until\":1799200000,\"message\":\"m\"}", "30 days" },
		{ "{\"until\":\"soon\",\"message\":\"m\"}", "whole number" },
		{ "{\"until\":1796515260,\"message\":5}", "must be a string" },
		{ "{\"until\":1796515260,\"message\":\"m\",\"by\":\"eve\"}", "unknown member 'by'" },
		{ "[1]", "must be an object" },
		{ "not json", "not JSON" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(freeze_body_parse(bad[i].body, strlen(bad[i].body), NOW, &f, err, sizeof(err)), -1);
		if (!strstr(err, bad[i].says))
			fail_msg("%s: '%s' does not say '%s'", bad[i].body, err, bad[i].says);
	}
}

static void test_words(void **state)
{
	(void)state;
	struct freeze_rec f = { .until = 1796580000, .at = NOW };
	strcpy(f.message, "release week");
	strcpy(f.by, "alice");
	char out[512];
	freeze_refusal(&f, out, sizeof(out));
	assert_string_equal(out, "frozen until 2026-12-06T18:00:00Z by alice: release week (an admin may pass with "
				 "--override REASON)");
	freeze_hold_text(&f, out, sizeof(out));
	assert_string_equal(out, "held: frozen until 2026-12-06T18:00:00Z by alice: release week");
	assert_true(freeze_active(&f, 1796579999));
	assert_false(freeze_active(&f, 1796580000));
	assert_false(freeze_active(NULL, 0));
}

static void test_passed_add(void **state)
{
	(void)state;
	char *p = freeze_passed_add(NULL);
	assert_string_equal(p, "[\"freeze\"]");
	free(p);
	p = freeze_passed_add(strdup("[]"));
	assert_string_equal(p, "[\"freeze\"]");
	free(p);
	p = freeze_passed_add(strdup("[\"guard/shrink\"]"));
	assert_string_equal(p, "[\"freeze\",\"guard/shrink\"]");
	free(p);
	p = freeze_passed_add(strdup("[ \"guard/a\", \"guard/b\"]"));
	assert_string_equal(p, "[\"freeze\",\"guard/a\", \"guard/b\"]");
	free(p);
}

/* ---- the plane's keeping of it --------------------------------------------------- */


static struct freeze_rec rec_in(int64_t seconds, const char *message)
{
	struct freeze_rec f = { .until = wall_seconds() + seconds, .at = wall_seconds() };
	snprintf(f.message, sizeof(f.message), "%s", message);
	strcpy(f.by, "alice (admin token)");
	return f;
}

static void test_state_sqlite(void **state)
{
	(void)state;
	char dir[64], err[512];
	assert_int_equal(test_tmpdir_make(dir, sizeof(dir), "freeze"), 0);
	struct persist *ps = persist_sqlite_open(dir, err, sizeof(err));
	assert_non_null(ps);
	struct freeze_state *f = freeze_state_new(ps, NULL);
	struct freeze_rec got;
	assert_false(freeze_state_now(f, &got));
	assert_int_equal(freeze_state_read(f, &got, err, sizeof(err)), 0);

	/* no freeze: a write goes */
	bool passed = true;
	char msg[2048];
	assert_int_equal(freeze_state_check(f, NULL, false, &passed, msg, sizeof(msg)), 0);
	assert_false(passed);

	struct freeze_rec want = rec_in(3600, "release week");
	assert_int_equal(freeze_state_set(f, &want, NULL, err, sizeof(err)), 0);
	assert_true(freeze_state_now(f, &got));
	assert_string_equal(got.message, "release week");
	char why[2048];
	assert_true(freeze_state_holds(f, why, sizeof(why)));
	assert_non_null(strstr(why, "held: frozen until "));
	struct buf b = BUF_INIT;
	freeze_state_member(f, &b);
	buf_putc(&b, '\0');
	assert_non_null(strstr(b.data, ",\"freeze\":{\"at\":"));
	buf_release(&b);
	freeze_state_metrics(f, &b);
	buf_putc(&b, '\0');
	assert_non_null(strstr(b.data, "\ntether_frozen 1\n"));
	buf_release(&b);

	/* refused: 423 with the words */
	assert_int_equal(freeze_state_check(f, NULL, false, &passed, msg, sizeof(msg)), 423);
	assert_non_null(strstr(msg, "frozen until "));
	assert_non_null(strstr(msg, "by alice (admin token): release week (an admin may pass with --override REASON); "
				    "nothing was stored"));

	/* an override without the admin role: still refused, and told why */
	assert_int_equal(freeze_state_check(f, "hotfix", false, &passed, msg, sizeof(msg)), 423);
	assert_false(passed);
	assert_non_null(strstr(msg, "only for an admin"));

	/* an admin's override passes, and says so */
	assert_int_equal(freeze_state_check(f, "hotfix", true, &passed, msg, sizeof(msg)), 0);
	assert_true(passed);
	freeze_state_passed(f, 7, "root", "hotfix");
	/* an admin without an override is refused like anybody */
	assert_int_equal(freeze_state_check(f, NULL, true, &passed, msg, sizeof(msg)), 423);
	assert_false(passed);

	/* kept across a reopen */
	freeze_state_free(f);
	persist_close(ps);
	ps = persist_sqlite_open(dir, err, sizeof(err));
	assert_non_null(ps);
	f = freeze_state_new(ps, NULL);
	assert_true(freeze_state_now(f, &got));
	assert_int_equal(got.until, want.until);
	assert_string_equal(got.by, want.by);

	/* off */
	assert_int_equal(freeze_state_set(f, NULL, "bob", err, sizeof(err)), 0);
	assert_false(freeze_state_now(f, NULL));
	assert_int_equal(freeze_state_read(f, &got, err, sizeof(err)), 0);
	freeze_state_metrics(f, &b);
	buf_putc(&b, '\0');
	assert_non_null(strstr(b.data, "\ntether_frozen 0\n"));
	buf_release(&b);

	/* a freeze whose time passed holds no more (stored, but over) */
	struct freeze_rec over = rec_in(-10, "over");
	assert_int_equal(freeze_state_set(f, &over, NULL, err, sizeof(err)), 0);
	assert_false(freeze_state_now(f, NULL));
	assert_false(freeze_state_holds(f, why, sizeof(why)));
	assert_int_equal(freeze_state_read(f, &got, err, sizeof(err)), 0);
	assert_int_equal(freeze_state_check(f, NULL, false, &passed, msg, sizeof(msg)), 0);
	freeze_state_tick(f);

	/* another replica's freeze, stored behind this one's back: the
	 * rollout's check asks the store, not this plane's view */
	struct freeze_rec other = rec_in(600, "from another replica");
	freeze_rec_json(&other, &b);
	buf_putc(&b, '\0');
	assert_int_equal(ps->ops->freeze_save(ps, b.data, err, sizeof(err)), 0);
	buf_release(&b);
	assert_false(freeze_state_now(f, NULL));
	assert_true(freeze_state_blocks(f));
	assert_true(freeze_state_now(f, NULL));   /* and the view follows */
	assert_int_equal(ps->ops->freeze_save(ps, NULL, err, sizeof(err)), 0);
	assert_false(freeze_state_blocks(f));
	assert_false(freeze_state_now(f, NULL));

	/* NULL: never refused, never held */
	assert_false(freeze_state_blocks(NULL));
	assert_int_equal(freeze_state_check(NULL, NULL, false, &passed, msg, sizeof(msg)), 0);
	assert_false(freeze_state_holds(NULL, why, sizeof(why)));

	freeze_state_free(f);
	persist_close(ps);
	test_tmpdir_remove(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_time_rfc3339), cmocka_unit_test(test_time_duration),
		cmocka_unit_test(test_check),        cmocka_unit_test(test_record_json),
		cmocka_unit_test(test_body),         cmocka_unit_test(test_words),
		cmocka_unit_test(test_passed_add),
		cmocka_unit_test(test_state_sqlite),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
