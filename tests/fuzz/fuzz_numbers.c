/* fuzz_numbers.c: libFuzzer target for the strict number parsers of util.c
 * (every option and query parameter goes through them): nothing crashes,
 * parse_u64 agrees with an independent reference, the range and seconds
 * parsers honour their bounds, parse_bool knows exactly its eight words. */
#include "fuzz.h"
#include "util.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what, const char *input)
{
	fprintf(stderr, "fuzz_numbers: %s\n  input: %.256s\n", what, input);
	abort();
}

/* Reference: digits only, at least one, no overflow; written with the
 * compiler's overflow builtins rather than util.c's division test. */
static int ref_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	if (!*s)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		if (__builtin_mul_overflow(v, (uint64_t)10, &v) ||
		    __builtin_add_overflow(v, (uint64_t)(*s - '0'), &v))
			return -1;
	}
	*out = v;
	return 0;
}

static char ascii_lower(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

static int ref_bool(const char *s, bool *out)
{
	static const char *const words[] = { "1", "yes", "true", "on", "0", "no", "false", "off" };
	for (size_t i = 0; i < 8; i++) {
		const char *w = words[i], *p = s;
		while (*p && *w && ascii_lower(*p) == *w) {
			p++;
			w++;
		}
		if (!*p && !*w) {
			*out = i < 4;
			return 0;
		}
	}
	return -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint64_t ranges[][2] = {
		{ 0, UINT64_MAX }, { 1, 65535 }, { 0, 0 }, { 5, 5 }, { 10, 100 },
		{ 1, 9007199254740992ull }, { UINT64_MAX, UINT64_MAX }, { 7, 3 },
	};
	static const double sranges[][2] = {
		{ 0, 1e12 }, { 0.001, 3600 }, { 1, 1 }, { 0, 0 }, { 0.5, 86400 },
	};
	char *s = malloc(size + 1);
	if (!s)
		abort();
	if (size)
		memcpy(s, data, size);
	s[size] = '\0';

	/* parse_u64 against the reference */
	uint64_t got = 0xdeadbeef, want = 0xfeedface;
	int grc = parse_u64(s, &got), wrc = ref_u64(s, &want);
	if (grc != wrc)
		die(grc == 0 ? "parse_u64 accepted what the reference refuses"
			     : "parse_u64 refused what the reference accepts", s);
	if (grc == 0 && got != want)
		die("parse_u64 and the reference disagree on the value", s);
	if (grc != 0 && got != 0xdeadbeef)
		die("parse_u64 wrote its output on failure", s);

	/* parse_uint_range is parse_u64 plus bounds */
	for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
		uint64_t lo = ranges[i][0], hi = ranges[i][1], r = 0;
		int rrc = parse_uint_range(s, lo, hi, &r);
		bool expect = wrc == 0 && want >= lo && want <= hi;
		if ((rrc == 0) != expect)
			die("parse_uint_range disagrees with parse_u64 and its bounds", s);
		if (rrc == 0 && r != want)
			die("parse_uint_range changed the value", s);
	}

	/* parse_seconds: digits with at most one dot, within bounds, finite */
	bool grammar = *s != '\0';
	int dots = 0, digits = 0;
	for (const char *p = s; *p; p++) {
		if (*p == '.')
			dots++;
		else if (*p >= '0' && *p <= '9')
			digits++;
		else
			grammar = false;
	}
	grammar = grammar && dots <= 1 && digits >= 1;
	for (size_t i = 0; i < sizeof(sranges) / sizeof(sranges[0]); i++) {
		double lo = sranges[i][0], hi = sranges[i][1], d = -1;
		if (parse_seconds(s, lo, hi, &d) == 0) {
			if (!grammar)
				die("parse_seconds accepted a string outside digits[.digits]", s);
			if (!isfinite(d) || d < lo || d > hi)
				die("parse_seconds returned a value outside its bounds", s);
		}
	}
	/* a plain integer of a few digits is a number of seconds */
	if (wrc == 0 && strlen(s) <= 12) {
		double d = -1;
		if (parse_seconds(s, 0, 1e12, &d) != 0 || d != (double)want)
			die("parse_seconds disagrees with parse_u64 on an integer", s);
	}

	/* parse_bool knows eight words, any case */
	bool b1 = false, b2 = false;
	int b1rc = parse_bool(s, &b1), b2rc = ref_bool(s, &b2);
	if (b1rc != b2rc || (b1rc == 0 && b1 != b2))
		die("parse_bool disagrees with the reference", s);

	free(s);
	return 0;
}
