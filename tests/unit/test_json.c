/* test_json.c: unit tests of common/json.c and common/json_syntax.c:
 * json_decode's limits and refusals (the raw text's grammar, escapes,
 * surrogates, control characters, numbers), canonical encoding, and the
 * typed getters. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "json_syntax.h"

/* Decodes text (of strlen bytes) expecting a refusal with exactly want. */
static void expect_refused(const char *text, const struct json_limits *lim, const char *want)
{
	char err[256] = "";
	cJSON *v = json_decode(text, strlen(text), lim, err, sizeof(err));
	if (v)
		cJSON_Delete(v);
	assert_null(v);
	assert_string_equal(err, want);
}

static char *repeat(char c, size_t n)
{
	char *s = malloc(n + 1);
	assert_non_null(s);
	memset(s, c, n);
	s[n] = '\0';
	return s;
}

static void test_decode_valid(void **state)
{
	(void)state;
	const char text[] = " {\"a\": [1, 2.5, \"x\"], \"b\": {\"c\": null, \"d\": true}} ";
	char err[128] = "";
	cJSON *v = json_decode(text, strlen(text), NULL, err, sizeof(err));
	assert_non_null(v);
	assert_string_equal(err, "");
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(v, "a");
	assert_true(cJSON_IsArray(a));
	assert_int_equal(cJSON_GetArraySize(a), 3);
	assert_string_equal(cJSON_GetArrayItem(a, 2)->valuestring, "x");
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(v, "b"), "d");
	assert_true(cJSON_IsTrue(d));
	cJSON_Delete(v);
}

static void test_decode_uses_only_len_bytes(void **state)
{
	(void)state;
	/* the text is not NUL-terminated where len ends: nothing past len is read */
	const char text[] = "[1,2]garbage";
	char err[128] = "";
	cJSON *v = json_decode(text, 5, NULL, err, sizeof(err));
	assert_non_null(v);
	assert_int_equal(cJSON_GetArraySize(v), 2);
	cJSON_Delete(v);
}

static void test_malformed_with_byte_position(void **state)
{
	(void)state;
	expect_refused("[1,2,x]", NULL, "malformed JSON at line 1, column 6 (byte 5): expected a value, found 'x'");
	expect_refused("{\"a\" 1}", NULL, "malformed JSON at line 1, column 6 (byte 5): expected ':' after the key, found '1'");
	expect_refused("[1,]", NULL, "malformed JSON at line 1, column 4 (byte 3): expected a value, found ']'");
	expect_refused("", NULL, "malformed JSON at line 1, column 1 (byte 0): expected a value, found the end of the text");
	expect_refused("{\"a\":1,}", NULL, "malformed JSON at line 1, column 8 (byte 7): expected a key in double quotes, found '}'");
	expect_refused("{1:2}", NULL, "malformed JSON at line 1, column 2 (byte 1): expected a key in double quotes or '}', found '1'");
	expect_refused("[1 2]", NULL, "malformed JSON at line 1, column 4 (byte 3): expected ',' or ']', found '2'");
	expect_refused("{\"a\":1]", NULL, "malformed JSON at line 1, column 7 (byte 6): expected ',' or '}', found ']'");
	expect_refused("[", NULL, "malformed JSON at line 1, column 2 (byte 1): expected a value or ']', found the end of the text");
	expect_refused("[tru]", NULL, "malformed JSON at line 1, column 2 (byte 1): expected a value or ']', found 't'");
	expect_refused("[\"abc", NULL, "malformed JSON at line 1, column 6 (byte 5): the text ends inside the string opened at line 1, column 2 (byte 1) (close it with '\"')");
	expect_refused("[\"a\\", NULL, "malformed JSON at line 1, column 5 (byte 4): the text ends inside an escape");
	expect_refused("{'a':1}", NULL, "malformed JSON at line 1, column 2 (byte 1): expected a key in double quotes or '}', found '''");
	expect_refused("[\xc3\xa9]", NULL, "malformed JSON at line 1, column 2 (byte 1): expected a value or ']', found byte 0xc3");
}

/* a file as an operator writes it: the line and the column (a character,
 * not a byte: é before the fault is one column), and what was expected */
static void test_malformed_line_and_column(void **state)
{
	(void)state;
	expect_refused("{\n  \"lb\": \"round_robin\",\n  \"endpoints\": [\"10.0.0.1:80\"\n}\n", NULL,
		       "malformed JSON at line 4, column 1 (byte 55): expected ',' or ']', found '}'");
	expect_refused("{\n\t\"a\": 1,\n\t\"b\" 2\n}", NULL,
		       "malformed JSON at line 3, column 6 (byte 16): expected ':' after the key, found '2'");
	expect_refused("{\"caf\xc3\xa9\": x}", NULL,
		       "malformed JSON at line 1, column 10 (byte 10): expected a value, found 'x'");
	expect_refused("[\r\n1,\r\n", NULL,
		       "malformed JSON at line 3, column 1 (byte 7): expected a value, found the end of the text");
	expect_refused("{\n\"a\": \"open", NULL,
		       "malformed JSON at line 2, column 11 (byte 12): the text ends inside the string opened at "
		       "line 2, column 6 (byte 7) (close it with '\"')");
	char at[JSON_WHERE_BUF];
	json_syntax_where("ab\ncd", 5, 99, at, sizeof(at));
	assert_string_equal(at, "line 2, column 3 (byte 5)");
	json_syntax_where("", 0, 0, at, sizeof(at));
	assert_string_equal(at, "line 1, column 1 (byte 0)");
	/* the NUL and UTF-8 checks say where too */
	char err[256];
	assert_null(json_decode("[1,\n\0]", 6, NULL, err, sizeof(err)));
	assert_string_equal(err, "JSON text contains a NUL byte at line 2, column 1 (byte 4)");
	assert_null(json_decode("[\n\"\xff\"]", 6, NULL, err, sizeof(err)));
	assert_string_equal(err, "JSON text is not valid UTF-8 at line 2, column 2 (byte 3)");
}

static void test_trailing_garbage_refused(void **state)
{
	(void)state;
	expect_refused("{\"a\":1} x", NULL,
		       "malformed JSON at line 1, column 9 (byte 8): expected the end of the text after the value, found 'x'");
	expect_refused("[1][2]", NULL, "malformed JSON at line 1, column 4 (byte 3): expected the end of the text after the value, found '['");
	/* trailing white space is fine */
	char err[64];
	cJSON *v = json_decode("[1]\n\t ", 6, NULL, err, sizeof(err));
	assert_non_null(v);
	cJSON_Delete(v);
}

static void test_over_max_bytes(void **state)
{
	(void)state;
	struct json_limits lim = { .max_bytes = 10, .max_depth = 0 };
	expect_refused("[1,2,3,4,5]", &lim, "JSON text of 11 bytes exceeds the limit of 10");
	char err[128];
	cJSON *v = json_decode("[1,2,3,45]", 10, &lim, err, sizeof(err));
	assert_non_null(v);   /* exactly at the limit */
	cJSON_Delete(v);
}

static void test_nesting_default_limit(void **state)
{
	(void)state;
	/* 32 levels pass, the 33rd '[' (byte 32) is refused */
	char *ok = malloc(65);
	char *deep = malloc(67);
	assert_non_null(ok);
	assert_non_null(deep);
	memset(ok, '[', 32);
	memset(ok + 32, ']', 32);
	ok[64] = '\0';
	memset(deep, '[', 33);
	memset(deep + 33, ']', 33);
	deep[66] = '\0';
	char err[128];
	cJSON *v = json_decode(ok, 64, NULL, err, sizeof(err));
	assert_non_null(v);
	cJSON_Delete(v);
	expect_refused(deep, NULL, "JSON nesting deeper than 32 at line 1, column 33 (byte 32)");
	free(ok);
	free(deep);
}

static void test_nesting_custom_limit_and_objects(void **state)
{
	(void)state;
	struct json_limits lim = { .max_bytes = 0, .max_depth = 3 };
	char err[128];
	cJSON *v = json_decode("{\"a\":[{}]}", 10, &lim, err, sizeof(err));
	assert_non_null(v);
	cJSON_Delete(v);
	expect_refused("{\"a\":[{\"b\":[]}]}", &lim, "JSON nesting deeper than 3 at line 1, column 12 (byte 11)");
	/* closing brackets lower the depth again: siblings do not add up */
	v = json_decode("[[[1]],[[2]],[[3]]]", 19, &lim, err, sizeof(err));
	assert_non_null(v);
	cJSON_Delete(v);
}

static void test_hundred_thousand_brackets(void **state)
{
	(void)state;
	/* refused by the pre-scan at the limit, before cJSON recurses */
	char *deep = repeat('[', 100000);
	expect_refused(deep, NULL, "JSON nesting deeper than 32 at line 1, column 33 (byte 32)");
	free(deep);

	/* brackets inside a string are not nesting: this decodes */
	char *s = malloc(100003);
	assert_non_null(s);
	s[0] = '"';
	memset(s + 1, '[', 100000);
	s[100001] = '"';
	s[100002] = '\0';
	char err[128];
	cJSON *v = json_decode(s, 100002, NULL, err, sizeof(err));
	assert_non_null(v);
	assert_true(cJSON_IsString(v));
	assert_int_equal(strlen(v->valuestring), 100000);
	cJSON_Delete(v);
	free(s);
}

static void test_duplicate_keys(void **state)
{
	(void)state;
	expect_refused("{\"a\":1,\"b\":2,\"a\":3}", NULL, "duplicate key 'a'");
	expect_refused("{\"x\":{\"k\":1,\"k\":2}}", NULL, "duplicate key 'k' in x");
	expect_refused("{\"x\":{\"y\":[0,{\"k\":1,\"z\":0,\"k\":2}]}}", NULL, "duplicate key 'k' in x.y[1]");
	expect_refused("[{},{\"q\":[{\"d\":1,\"d\":1}]}]", NULL, "duplicate key 'd' in [1].q[0]");
	/* the same key in different objects is fine */
	char err[128];
	const char ok[] = "{\"a\":{\"a\":1},\"b\":[{\"a\":1},{\"a\":2}]}";
	cJSON *v = json_decode(ok, strlen(ok), NULL, err, sizeof(err));
	assert_non_null(v);
	cJSON_Delete(v);
}

static void test_nul_byte_refused(void **state)
{
	(void)state;
	const char text[] = "{\"a\":\"x\0y\"}";
	char err[128] = "";
	cJSON *v = json_decode(text, sizeof(text) - 1, NULL, err, sizeof(err));
	assert_null(v);
	assert_string_equal(err, "JSON text contains a NUL byte at line 1, column 8 (byte 7)");
	/* a NUL after the value, inside len */
	v = json_decode("[1]\0", 4, NULL, err, sizeof(err));
	assert_null(v);
	assert_string_equal(err, "JSON text contains a NUL byte at line 1, column 4 (byte 3)");
}

static void test_escaped_nul_refused(void **state)
{
	(void)state;
	expect_refused("{\"a\":\"x\\u0000y\"}", NULL, "JSON string holds \\u0000 at line 1, column 8 (byte 7)");
	expect_refused("[\"\\u0000\"]", NULL, "JSON string holds \\u0000 at line 1, column 3 (byte 2)");
	expect_refused("{\"k\\u0000\":1}", NULL, "JSON string holds \\u0000 at line 1, column 4 (byte 3)");
	/* an escaped backslash followed by the text u0000 is not a NUL */
	char err[128];
	const char ok[] = "[\"\\\\u0000\"]";
	cJSON *v = json_decode(ok, strlen(ok), NULL, err, sizeof(err));
	assert_non_null(v);
	assert_string_equal(cJSON_GetArrayItem(v, 0)->valuestring, "\\u0000");
	cJSON_Delete(v);
	/* other control escapes are fine */
	const char ok2[] = "[\"\\u0001\"]";
	v = json_decode(ok2, strlen(ok2), NULL, err, sizeof(err));
	assert_non_null(v);
	assert_int_equal(cJSON_GetArrayItem(v, 0)->valuestring[0], 1);
	cJSON_Delete(v);
}

/* Decodes text expecting one string (alone in an array) of exactly want. */
static void decodes_to(const char *text, const char *want, size_t wantlen)
{
	char err[256] = "";
	cJSON *v = json_decode(text, strlen(text), NULL, err, sizeof(err));
	if (!v)
		fail_msg("%s refused: %s", text, err);
	const cJSON *s = cJSON_GetArrayItem(v, 0);
	assert_true(cJSON_IsString(s));
	assert_int_equal(strlen(s->valuestring), wantlen);
	assert_memory_equal(s->valuestring, want, wantlen);
	cJSON_Delete(v);
}

static void test_u_escapes_good(void **state)
{
	(void)state;
	decodes_to("[\"\\u0041\"]", "A", 1);
	decodes_to("[\"a\\u00e9b\"]", "a\xc3\xa9" "b", 4);
	decodes_to("[\"\\u00E9\\u00e9\"]", "\xc3\xa9\xc3\xa9", 4);
	decodes_to("[\"\\u20AC\"]", "\xe2\x82\xac", 3);
	decodes_to("[\"\\uFFFF\"]", "\xef\xbf\xbf", 3);
	decodes_to("[\"\\u0001\\u001f\"]", "\x01\x1f", 2);
	/* a surrogate pair, in either case, is one code point (U+1F600) */
	decodes_to("[\"\\uD83D\\uDE00\"]", "\xf0\x9f\x98\x80", 4);
	decodes_to("[\"\\ud83d\\ude00x\"]", "\xf0\x9f\x98\x80x", 5);
	decodes_to("[\"\\uDBFF\\uDFFF\"]", "\xf4\x8f\xbf\xbf", 4);
	/* the one-letter escapes */
	decodes_to("[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"]", "\"\\/\b\f\n\r\t", 8);
	/* an escaped backslash then "u12G4" is text, not an escape */
	decodes_to("[\"\\\\u12G4\"]", "\\u12G4", 6);
	/* in a key too */
	char err[128];
	cJSON *v = json_decode("{\"\\u006b\":1}", 12, NULL, err, sizeof(err));
	assert_non_null(v);
	assert_non_null(cJSON_GetObjectItemCaseSensitive(v, "k"));
	cJSON_Delete(v);
}

/* cJSON decodes a \u escape with a bad hex digit as U+0000 and keeps the
 * string cut there: "a\u12G4b" would be stored as "a". */
static void test_u_escape_bad_hex_refused(void **state)
{
	(void)state;
	const char *msg = "\\u escape without 4 hex digits after it (write \\uXXXX, X in 0-9 a-f A-F)";
	static const struct {
		const char *text;
		size_t at;
	} cases[] = {
		{ "[\"a\\u12G4b\"]", 3 },
		{ "[\"\\uZZZZ\"]", 2 },
		{ "[\"\\u004g\"]", 2 },
		{ "[\"\\u-123\"]", 2 },
		{ "[\"\\u 123\"]", 2 },
		{ "[\"\\u12\"]", 2 },      /* too short before the quote */
		{ "[\"\\u\"]", 2 },
		{ "[\"\\u12", 2 },          /* the text ends */
		{ "{\"k\\uXY00\":1}", 3 }, /* in a key */
		{ "{\"endpoints\":[],\"x\":\"\\u12G4\"}", 21 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char want[256];
		snprintf(want, sizeof(want), "malformed JSON at line 1, column %zu (byte %zu): %s", cases[i].at + 1, cases[i].at, msg);
		expect_refused(cases[i].text, NULL, want);
	}
}

static void test_unpaired_surrogates_refused(void **state)
{
	(void)state;
	const char *high = "\\u escape of a high surrogate (\\uD800-\\uDBFF) not followed by a \\u escape of a "
			   "low surrogate (\\uDC00-\\uDFFF)";
	const char *low = "\\u escape of a lone low surrogate (\\uDC00-\\uDFFF may only follow a high surrogate "
			  "\\uD800-\\uDBFF)";
	static const struct {
		const char *text;
		size_t at;
		bool is_high;
	} cases[] = {
		{ "[\"\\uD800\"]", 2, true },
		{ "[\"\\uDBFFx\"]", 2, true },
		{ "[\"\\ud800\\n\"]", 2, true },
		{ "[\"\\uD800\\u0041\"]", 2, true },        /* followed by another code point */
		{ "[\"\\uD800\\uD800\"]", 2, true },        /* two highs */
		{ "[\"\\uD83D \\uDE00\"]", 2, true },       /* not immediately */
		{ "[\"ab\\uD83D", 4, true },                 /* the text ends */
		{ "[\"\\uDC00\"]", 2, false },
		{ "[\"x\\uDFFF\"]", 3, false },
		{ "[\"\\uDE00\\uD83D\"]", 2, false },       /* a pair the wrong way round */
		{ "[\"\\uD83D\\uDE00\\uDE00\"]", 14, false }, /* a pair, then a lone low */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char want[256];
		snprintf(want, sizeof(want), "malformed JSON at line 1, column %zu (byte %zu): %s", cases[i].at + 1, cases[i].at,
			 cases[i].is_high ? high : low);
		expect_refused(cases[i].text, NULL, want);
	}
	/* a high surrogate followed by a \u with bad hex: the bad hex is named */
	expect_refused("[\"\\uD800\\uDCZZ\"]", NULL,
		       "malformed JSON at line 1, column 9 (byte 8): \\u escape without 4 hex digits after it (write \\uXXXX, X in "
		       "0-9 a-f A-F)");
}

static void test_invalid_escapes_refused(void **state)
{
	(void)state;
	const char *msg = "invalid escape in a string (a backslash must be followed by one of \" \\ / b f n r t u)";
	const char *cases[] = { "[\"\\x41\"]", "[\"\\U0041\"]", "[\"\\'\"]", "[\"\\0\"]", "[\"\\a\"]", "[\"\\ \"]" };
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char want[256];
		snprintf(want, sizeof(want), "malformed JSON at line 1, column 3 (byte 2): %s", msg);
		expect_refused(cases[i], NULL, want);
	}
}

/* RFC 8259: U+0000..U+001F must be escaped in a string; cJSON takes them raw. */
static void test_raw_control_characters_refused(void **state)
{
	(void)state;
	expect_refused("[\"a\tb\"]", NULL,
		       "malformed JSON at line 1, column 4 (byte 3): raw control character 0x09 in a string (escape it, as \\u0009 or "
		       "\\n, \\t, \\r)");
	expect_refused("[\"a\nb\"]", NULL,
		       "malformed JSON at line 1, column 4 (byte 3): raw control character 0x0a in a string (escape it, as \\u000a or "
		       "\\n, \\t, \\r)");
	expect_refused("{\"k\x01\":1}", NULL,
		       "malformed JSON at line 1, column 4 (byte 3): raw control character 0x01 in a string (escape it, as \\u0001 or "
		       "\\n, \\t, \\r)");
	expect_refused("[\"\x1f\"]", NULL,
		       "malformed JSON at line 1, column 3 (byte 2): raw control character 0x1f in a string (escape it, as \\u001f or "
		       "\\n, \\t, \\r)");
	/* DEL and everything above is allowed raw */
	decodes_to("[\"\x7f\xc3\xa9 ~\"]", "\x7f\xc3\xa9 ~", 5);
}

/* Outside strings only space, tab, CR and LF are white space (cJSON takes
 * every byte up to 0x20); a byte order mark first is allowed. */
static void test_white_space(void **state)
{
	(void)state;
	expect_refused("[1,\f2]", NULL, "malformed JSON at line 1, column 4 (byte 3): expected a value, found byte 0x0c");
	expect_refused("\x01[1]", NULL, "malformed JSON at line 1, column 1 (byte 0): expected a value, found byte 0x01");
	expect_refused("[1]\v", NULL,
		       "malformed JSON at line 1, column 4 (byte 3): expected the end of the text after the value, found byte 0x0b");
	char err[128];
	const char ok[] = " \t\r\n[ 1 ,\t2\r\n]\n";
	cJSON *v = json_decode(ok, strlen(ok), NULL, err, sizeof(err));
	assert_non_null(v);
	cJSON_Delete(v);
	v = json_decode("\xef\xbb\xbf{\"a\":1}", 10, NULL, err, sizeof(err));
	assert_non_null(v);
	cJSON_Delete(v);
	/* a byte order mark is skipped only first */
	expect_refused("[\xef\xbb\xbf]", NULL, "malformed JSON at line 1, column 2 (byte 1): expected a value or ']', found byte 0xef");
}

/* cJSON reads 01, 1. and 1.e5 (strtod); RFC 8259 does not. */
static void test_numbers_strict(void **state)
{
	(void)state;
	expect_refused("[01]", NULL,
		       "malformed JSON at line 1, column 2 (byte 1): a number cannot start with 0 followed by more digits (leading zero)");
	expect_refused("[-01]", NULL,
		       "malformed JSON at line 1, column 3 (byte 2): a number cannot start with 0 followed by more digits (leading zero)");
	expect_refused("[1.]", NULL, "malformed JSON at line 1, column 4 (byte 3): expected a digit after '.', found ']'");
	expect_refused("[1.e5]", NULL, "malformed JSON at line 1, column 4 (byte 3): expected a digit after '.', found 'e'");
	expect_refused("[1e]", NULL, "malformed JSON at line 1, column 4 (byte 3): expected a digit in the exponent, found ']'");
	expect_refused("[1E+]", NULL, "malformed JSON at line 1, column 5 (byte 4): expected a digit in the exponent, found ']'");
	expect_refused("[-]", NULL, "malformed JSON at line 1, column 3 (byte 2): expected a digit after '-', found ']'");
	expect_refused("-", NULL, "malformed JSON at line 1, column 2 (byte 1): expected a digit after '-', found the end of the text");
	expect_refused("[+1]", NULL, "malformed JSON at line 1, column 2 (byte 1): expected a value or ']', found '+'");
	expect_refused("[.5]", NULL, "malformed JSON at line 1, column 2 (byte 1): expected a value or ']', found '.'");
	expect_refused("[0x10]", NULL, "malformed JSON at line 1, column 3 (byte 2): expected ',' or ']', found 'x'");
	const char ok[] = "[0,-0,0.5,-0.25,10,1e5,1E+5,1e-05,-0.0e0,123456789012345678901234567890]";
	char err[128];
	cJSON *v = json_decode(ok, strlen(ok), NULL, err, sizeof(err));
	if (!v)
		fail_msg("%s", err);
	assert_int_equal(cJSON_GetArraySize(v), 10);
	assert_true(cJSON_GetArrayItem(v, 6)->valuedouble == 100000);
	assert_true(cJSON_GetArrayItem(v, 7)->valuedouble == 1e-5);
	cJSON_Delete(v);
}

/* json_syntax_check is what json_decode runs: the same verdicts on its own. */
static void test_syntax_check_alone(void **state)
{
	(void)state;
	char err[256] = "";
	const char ok[] = "{\"a\":[1,2.5e3,\"\\u00e9\\uD83D\\uDE00\",true,false,null,{}],\"b\":\"\"}";
	assert_int_equal(json_syntax_check(ok, strlen(ok), 0, err, sizeof(err)), 0);
	assert_string_equal(err, "");
	assert_int_equal(json_syntax_check("[\"\\uZZZZ\"]", 10, 0, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "at line 1, column 3 (byte 2): \\u escape without 4 hex digits"));
	/* max_depth 0 is the default, 32 */
	char *deep = repeat('[', 40);
	assert_int_equal(json_syntax_check(deep, 40, 0, err, sizeof(err)), -1);
	assert_string_equal(err, "JSON nesting deeper than 32 at line 1, column 33 (byte 32)");
	assert_int_equal(json_syntax_check(deep, 40, 2, err, sizeof(err)), -1);
	assert_string_equal(err, "JSON nesting deeper than 2 at line 1, column 3 (byte 2)");
	free(deep);
	/* a limit above the stack kept on the C stack (512) */
	char *s = malloc(2 * 600);
	assert_non_null(s);
	memset(s, '[', 600);
	memset(s + 600, ']', 600);
	assert_int_equal(json_syntax_check(s, 1200, 600, err, sizeof(err)), 0);
	assert_int_equal(json_syntax_check(s, 1200, 599, err, sizeof(err)), -1);
	assert_string_equal(err, "JSON nesting deeper than 599 at line 1, column 600 (byte 599)");
	free(s);
	/* a message is cut to errlen, never overrun */
	char small[8];
	assert_int_equal(json_syntax_check("[01]", 4, 0, small, sizeof(small)), -1);
	assert_string_equal(small, "malform");
}

static void test_numbers_out_of_range_refused(void **state)
{
	(void)state;
	expect_refused("{\"a\":1e999}", NULL, "number out of range at a");
	expect_refused("[1,{\"b\":[-1e400]}]", NULL, "number out of range at [1].b[0]");
	expect_refused("1e309", NULL, "number out of range");
}

static void test_canonical_keeps_numbers_exact(void **state)
{
	(void)state;
	char err[128];
	const char text[] = "{\"big\":9007199254740993,\"max\":1.7976931348623157e308,\"pi\":3.141592653589793,\"n\":80}";
	cJSON *v = json_decode(text, strlen(text), NULL, err, sizeof(err));
	assert_non_null(v);
	char *out = json_encode_canonical(v);
	/* each number reads back as the same double: a fixed point */
	cJSON *w = json_decode(out, strlen(out), NULL, err, sizeof(err));
	assert_non_null(w);
	assert_true(cJSON_GetObjectItem(w, "max")->valuedouble == cJSON_GetObjectItem(v, "max")->valuedouble);
	assert_true(cJSON_GetObjectItem(w, "big")->valuedouble == cJSON_GetObjectItem(v, "big")->valuedouble);
	assert_true(cJSON_GetObjectItem(w, "pi")->valuedouble == 3.141592653589793);
	char *again = json_encode_canonical(w);
	assert_string_equal(out, again);
	assert_non_null(strstr(out, "\"n\":80"));
	free(again);
	free(out);
	cJSON_Delete(w);
	cJSON_Delete(v);
}

static void test_canonical_sorts_recursively(void **state)
{
	(void)state;
	const char text[] = "{\"b\":1,\"a\":{\"d\":[{\"z\":1,\"y\":{\"n\":0,\"m\":0}}],\"c\":null},\"A\":\"s\"}";
	char err[128];
	cJSON *v = json_decode(text, strlen(text), NULL, err, sizeof(err));
	assert_non_null(v);
	char *s = json_encode_canonical(v);
	assert_string_equal(s, "{\"A\":\"s\",\"a\":{\"c\":null,\"d\":[{\"y\":{\"m\":0,\"n\":0},\"z\":1}]},\"b\":1}");
	free(s);
	cJSON_Delete(v);
}

static void test_canonical_same_bytes_for_reordered_input(void **state)
{
	(void)state;
	const char x[] = "{\"port\":80,\"address\":\"10.0.0.1\",\"tls\":{\"secret\":\"s\",\"alpn\":[\"h2\",\"http/1.1\"]}}";
	const char y[] = "{ \"tls\" : { \"alpn\" : [\"h2\", \"http/1.1\"], \"secret\" : \"s\" }, \"address\":\"10.0.0.1\", \"port\" : 80 }";
	char err[128];
	cJSON *a = json_decode(x, strlen(x), NULL, err, sizeof(err));
	cJSON *b = json_decode(y, strlen(y), NULL, err, sizeof(err));
	assert_non_null(a);
	assert_non_null(b);
	char *sa = json_encode_canonical(a);
	char *sb = json_encode_canonical(b);
	assert_string_equal(sa, sb);
	/* array order is data, not sorted */
	assert_non_null(strstr(sa, "[\"h2\",\"http/1.1\"]"));
	free(sa);
	free(sb);
	cJSON_Delete(a);
	cJSON_Delete(b);
}

static void test_sort_keeps_list_links(void **state)
{
	(void)state;
	/* cJSON appends through child->prev: after a sort it must be the last item */
	cJSON *v = cJSON_Parse("{\"c\":3,\"a\":1,\"b\":2}");
	assert_non_null(v);
	json_sort_keys(v);
	cJSON_AddNumberToObject(v, "0", 0);
	char *s = cJSON_PrintUnformatted(v);
	assert_string_equal(s, "{\"a\":1,\"b\":2,\"c\":3,\"0\":0}");
	free(s);
	cJSON_Delete(v);
}

static void test_get_u64(void **state)
{
	(void)state;
	static const struct {
		const char *text;
		bool ok;
		uint64_t want;
	} cases[] = {
		{ "0", true, 0 },
		{ "42", true, 42 },
		{ "1e3", true, 1000 },
		{ "9007199254740991", true, 9007199254740991ULL },   /* 2^53 - 1 */
		{ "-1", false, 0 },
		{ "-0.5", false, 0 },
		{ "1.5", false, 0 },
		{ "0.0001", false, 0 },
		{ "9007199254740993", false, 0 },   /* 2^53 + 1: reads as 2^53, not exact */
		{ "9007199254740994", false, 0 },   /* 2^53 + 2 */
		{ "18446744073709551616", false, 0 },
		{ "1e300", false, 0 },
		{ "\"7\"", false, 0 },
		{ "true", false, 0 },
		{ "null", false, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cJSON *v = cJSON_Parse(cases[i].text);
		assert_non_null(v);
		uint64_t out = 12345;
		bool ok = json_get_u64(v, &out);
		cJSON_Delete(v);
		if (ok != cases[i].ok)
			fail_msg("json_get_u64(%s) returned %d, want %d", cases[i].text, ok, cases[i].ok);
		if (ok)
			assert_int_equal(out, cases[i].want);
		else
			assert_int_equal(out, 12345);   /* untouched on refusal */
	}
	assert_false(json_get_u64(NULL, &(uint64_t){ 0 }));
}

static void test_get_string(void **state)
{
	(void)state;
	cJSON *v = cJSON_Parse("{\"s\":\"v\",\"n\":1,\"S\":\"upper\"}");
	assert_non_null(v);
	assert_string_equal(json_get_string(v, "s"), "v");
	assert_string_equal(json_get_string(v, "S"), "upper");
	assert_null(json_get_string(v, "n"));
	assert_null(json_get_string(v, "missing"));
	cJSON_Delete(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_decode_valid),
		cmocka_unit_test(test_decode_uses_only_len_bytes),
		cmocka_unit_test(test_malformed_with_byte_position),
		cmocka_unit_test(test_malformed_line_and_column),
		cmocka_unit_test(test_trailing_garbage_refused),
		cmocka_unit_test(test_over_max_bytes),
		cmocka_unit_test(test_nesting_default_limit),
		cmocka_unit_test(test_nesting_custom_limit_and_objects),
		cmocka_unit_test(test_hundred_thousand_brackets),
		cmocka_unit_test(test_duplicate_keys),
		cmocka_unit_test(test_nul_byte_refused),
		cmocka_unit_test(test_escaped_nul_refused),
		cmocka_unit_test(test_u_escapes_good),
		cmocka_unit_test(test_u_escape_bad_hex_refused),
		cmocka_unit_test(test_unpaired_surrogates_refused),
		cmocka_unit_test(test_invalid_escapes_refused),
		cmocka_unit_test(test_raw_control_characters_refused),
		cmocka_unit_test(test_white_space),
		cmocka_unit_test(test_numbers_strict),
		cmocka_unit_test(test_syntax_check_alone),
		cmocka_unit_test(test_numbers_out_of_range_refused),
		cmocka_unit_test(test_canonical_keeps_numbers_exact),
		cmocka_unit_test(test_canonical_sorts_recursively),
		cmocka_unit_test(test_canonical_same_bytes_for_reordered_input),
		cmocka_unit_test(test_sort_keeps_list_links),
		cmocka_unit_test(test_get_u64),
		cmocka_unit_test(test_get_string),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
