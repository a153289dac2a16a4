/* fuzz_freeze.c: libFuzzer target for the freeze window's parsers
 * (common/freeze.c): a stored record (freeze_rec_parse), PUT /v1/freeze's
 * body (freeze_body_parse) and tetherctl's TIME (freeze_parse_time).
 * Nothing crashes; a refusal has a message; an accepted record prints
 * back to JSON that parses to the same record; an accepted body holds a
 * freeze that passes its own checks; an accepted TIME is a duration from
 * now (no '-') or a time that prints back as the input. */
#include "buf.h"
#include "freeze.h"
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define NOW 1796515200

static void die(const char *what, const char *input)
{
	fprintf(stderr, "fuzz_freeze: %s\n  input: %.256s\n", what, input);
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	if (!s)
		abort();
	if (size)
		memcpy(s, data, size);
	s[size] = '\0';
	char err[512];

	struct freeze_rec f, back;
	err[0] = '\0';
	if (freeze_rec_parse(s, size, &f, err, sizeof(err)) == 0) {
		struct buf b = BUF_INIT;
		freeze_rec_json(&f, &b);
		if (freeze_rec_parse(b.data, b.len, &back, err, sizeof(err)) < 0)
			die("a record's own JSON does not parse", s);
		if (back.until != f.until || back.at != f.at || strcmp(back.message, f.message) != 0 ||
		    strcmp(back.by, f.by) != 0)
			die("a record changed through its JSON", s);
		buf_release(&b);
		char out[4096];
		freeze_refusal(&f, out, sizeof(out));
		freeze_hold_text(&f, out, sizeof(out));
	} else if (!err[0]) {
		die("a record refused without a message", s);
	}

	err[0] = '\0';
	if (freeze_body_parse(s, size, NOW, &f, err, sizeof(err)) == 0) {
		if (freeze_check(f.until, f.message, NOW, err, sizeof(err)) < 0)
			die("a body accepted that fails the checks", s);
	} else if (!err[0]) {
		die("a body refused without a message", s);
	}

	int64_t t;
	err[0] = '\0';
	if (freeze_parse_time(s, NOW, &t, err, sizeof(err)) == 0) {
		if (strchr(s, '-')) {
			char text[32];
			freeze_time_text(t, text);
			if (strcasecmp(text, s) != 0)
				die("a time does not print back as given", s);
		} else if (t < NOW) {
			die("a duration before now", s);
		}
	} else if (!err[0]) {
		die("a TIME refused without a message", s);
	}
	free(s);
	return 0;
}
