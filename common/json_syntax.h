/* json_syntax.h: the check of a raw JSON text against RFC 8259 that
 * json_decode runs before cJSON sees it. cJSON is lenient where leniency
 * loses data: a \u escape with bad hex digits decodes as U+0000 and cuts
 * the string short, raw control characters in strings and numbers like 01
 * or 1. are taken, any byte below 0x21 counts as white space. */
#ifndef TETHER_JSON_SYNTAX_H
#define TETHER_JSON_SYNTAX_H

#include <stddef.h>

/* Checks text[0..len): no NUL byte, valid UTF-8, RFC 8259's grammar (one
 * value, white space only space, tab, CR and LF; a UTF-8 byte order mark
 * first is skipped, as cJSON does), strings whose escapes are the eight
 * one-letter ones or \u with exactly 4 hex digits, a high surrogate
 * followed by a \u low surrogate, no lone low surrogate, no \u0000, no raw
 * control character; nesting at most max_depth deep (0: the default,
 * JSON_DEFAULT_MAX_DEPTH), checked as the text is read (a deep input
 * costs O(n), never a deep stack). Returns 0, or -1 with a message naming
 * the problem, where it is ("line 3, column 12 (byte 40)": lines and
 * columns from 1, a column per character, bytes from 0) and, for a
 * grammar error, what was expected and what was found. When it returns 0, cJSON
 * parses the text and keeps every string whole (tests/fuzz/fuzz_json.c
 * checks both). */
/* "line L, column C (byte P)" for byte offset pos of text[0..len) (pos
 * past the end: the end), into out[cap]; JSON_WHERE_BUF is enough. */
#define JSON_WHERE_BUF 96   /* three 20-digit numbers and the words */
void json_syntax_where(const char *text, size_t len, size_t pos, char *out, size_t cap);

int json_syntax_check(const char *text, size_t len, int max_depth, char *err, size_t errlen);

#endif
