/* json_syntax.c: RFC 8259's grammar checked on the raw text before cJSON
 * decodes it (see json_syntax.h). One pass, no allocation below 512
 * levels of nesting; messages name the problem, its line and column (and
 * byte offset) and what was expected there, and
 * never quote a string's bytes (a string may be a key). */
#include "json_syntax.h"
#include "json.h"
#include "util.h"
#include "xmalloc.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* JSON text is UTF-8 (RFC 8259). cJSON copies string bytes through
 * unchecked, so invalid UTF-8 would be stored and served as invalid JSON.
 * Refuses bad lead and continuation bytes, overlong forms, surrogates and
 * code points above U+10FFFF. Returns the offset of the first bad byte, or
 * len when the text is valid. */
static size_t utf8_check(const unsigned char *s, size_t len)
{
	size_t i = 0;
	while (i < len) {
		unsigned char c = s[i];
		size_t n;
		uint32_t cp, min;
		if (c < 0x80) {
			i++;
			continue;
		}
		if ((c & 0xe0) == 0xc0) {
			n = 1, cp = c & 0x1f, min = 0x80;
		} else if ((c & 0xf0) == 0xe0) {
			n = 2, cp = c & 0x0f, min = 0x800;
		} else if ((c & 0xf8) == 0xf0) {
			n = 3, cp = c & 0x07, min = 0x10000;
		} else {
			return i;
		}
		if (len - i <= n)
			return i;
		for (size_t k = 1; k <= n; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return i;
			cp = (cp << 6) | (s[i + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return i;
		i += n + 1;
	}
	return len;
}

/* What the reader expects next. */
enum want {
	WANT_VALUE,            /* after ':' or ',' in an array, or at the start */
	WANT_VALUE_OR_CLOSE,   /* after '[' */
	WANT_KEY,              /* after ',' in an object */
	WANT_KEY_OR_CLOSE,     /* after '{' */
	WANT_COLON,            /* after a key */
	WANT_NEXT,             /* after a value: ',', the container's close, or the end */
};

struct reader {
	const unsigned char *t;
	size_t len;
	char *err;
	size_t errlen;
};

void json_syntax_where(const char *text, size_t len, size_t pos, char *out, size_t cap)
{
	size_t line = 1, col = 1;
	if (pos > len)
		pos = len;
	for (size_t k = 0; k < pos; k++) {
		unsigned char c = (unsigned char)text[k];
		if (c == '\n')
			line++, col = 1;
		else if ((c & 0xc0) != 0x80)
			col++;   /* a character's first byte (continuation bytes are not new columns) */
	}
	snprintf(out, cap, "line %zu, column %zu (byte %zu)", line, col, pos);
}

static const char *where(const struct reader *r, size_t pos, char *out, size_t cap)
{
	json_syntax_where((const char *)r->t, r->len, pos, out, cap);
	return out;
}

static int fail_at(struct reader *r, size_t pos, const char *what)
{
	char at[JSON_WHERE_BUF];
	snprintf(r->err, r->errlen, "malformed JSON at %s: %s", where(r, pos, at, sizeof(at)), what);
	return -1;
}

/* "expected X, found Y" at pos, Y being what is there. Outside strings. */
static int unexpected(struct reader *r, size_t pos, const char *expected)
{
	char found[32];
	if (pos >= r->len)
		snprintf(found, sizeof(found), "the end of the text");
	else if (r->t[pos] > 0x20 && r->t[pos] < 0x7f)
		snprintf(found, sizeof(found), "'%c'", r->t[pos]);
	else
		snprintf(found, sizeof(found), "byte 0x%02x", r->t[pos]);
	char at[JSON_WHERE_BUF];
	snprintf(r->err, r->errlen, "malformed JSON at %s: expected %s, found %s", where(r, pos, at, sizeof(at)),
		 expected, found);
	return -1;
}

/* The 4 hex digits after "\u" at pos (the backslash), or -1 when there are
 * fewer than 4 before the text ends or a non-hex byte comes first. */
static long hex4(const struct reader *r, size_t pos)
{
	if (r->len - pos < 6)
		return -1;
	long v = 0;
	for (size_t k = 2; k < 6; k++) {
		int h = hex_digit(r->t[pos + k]);
		if (h < 0)
			return -1;
		v = v << 4 | h;
	}
	return v;
}

/* A \u escape at *i (the backslash): 4 hex digits, not U+0000, a high
 * surrogate with its low one right after, no lone low surrogate. Moves *i
 * past it. */
static int u_escape(struct reader *r, size_t *i)
{
	size_t at = *i;
	long cp = hex4(r, at);
	if (cp < 0)
		return fail_at(r, at, "\\u escape without 4 hex digits after it (write \\uXXXX, X in 0-9 a-f A-F)");
	if (cp == 0) {
		char pl[JSON_WHERE_BUF];
		snprintf(r->err, r->errlen, "JSON string holds \\u0000 at %s", where(r, at, pl, sizeof(pl)));
		return -1;
	}
	if (cp >= 0xdc00 && cp <= 0xdfff)
		return fail_at(r, at, "\\u escape of a lone low surrogate (\\uDC00-\\uDFFF may only follow a "
			       "high surrogate \\uD800-\\uDBFF)");
	if (cp >= 0xd800 && cp <= 0xdbff) {
		size_t lo = at + 6;
		if (r->len - lo < 2 || r->t[lo] != '\\' || r->t[lo + 1] != 'u')
			return fail_at(r, at, "\\u escape of a high surrogate (\\uD800-\\uDBFF) not followed by a "
				       "\\u escape of a low surrogate (\\uDC00-\\uDFFF)");
		long cp2 = hex4(r, lo);
		if (cp2 < 0)
			return fail_at(r, lo, "\\u escape without 4 hex digits after it (write \\uXXXX, X in "
				       "0-9 a-f A-F)");
		if (cp2 < 0xdc00 || cp2 > 0xdfff)
			return fail_at(r, at, "\\u escape of a high surrogate (\\uD800-\\uDBFF) not followed by a "
				       "\\u escape of a low surrogate (\\uDC00-\\uDFFF)");
		*i = lo + 6;
		return 0;
	}
	*i = at + 6;
	return 0;
}

/* A string whose opening quote is at *i; moves *i past the closing one.
 * Bytes from 0x80 on were checked as UTF-8 already. */
static int string(struct reader *r, size_t *i)
{
	size_t open = *i, p = open + 1;
	for (;;) {
		if (p >= r->len) {
			char what[192], at[JSON_WHERE_BUF];
			snprintf(what, sizeof(what), "the text ends inside the string opened at %s (close it with '\"')",
				 where(r, open, at, sizeof(at)));
			return fail_at(r, r->len, what);
		}
		unsigned char c = r->t[p];
		if (c == '"') {
			*i = p + 1;
			return 0;
		}
		if (c < 0x20) {
			char what[112];
			snprintf(what, sizeof(what), "raw control character 0x%02x in a string (escape it, as \\u%04x "
				 "or \\n, \\t, \\r)", c, c);
			return fail_at(r, p, what);
		}
		if (c != '\\') {
			p++;
			continue;
		}
		if (p + 1 >= r->len)
			return fail_at(r, r->len, "the text ends inside an escape");
		switch (r->t[p + 1]) {
		case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
			p += 2;
			break;
		case 'u':
			if (u_escape(r, &p) < 0)
				return -1;
			break;
		default:
			return fail_at(r, p, "invalid escape in a string (a backslash must be followed by one of "
				       "\" \\ / b f n r t u)");
		}
	}
}

static bool is_digit(const struct reader *r, size_t p)
{
	return p < r->len && r->t[p] >= '0' && r->t[p] <= '9';
}

/* A number at *i: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static int number(struct reader *r, size_t *i)
{
	size_t p = *i;
	if (r->t[p] == '-')
		p++;
	if (!is_digit(r, p))
		return unexpected(r, p, "a digit after '-'");
	if (r->t[p] == '0' && is_digit(r, p + 1))
		return fail_at(r, p, "a number cannot start with 0 followed by more digits (leading zero)");
	while (is_digit(r, p))
		p++;
	if (p < r->len && r->t[p] == '.') {
		p++;
		if (!is_digit(r, p))
			return unexpected(r, p, "a digit after '.'");
		while (is_digit(r, p))
			p++;
	}
	if (p < r->len && (r->t[p] == 'e' || r->t[p] == 'E')) {
		p++;
		if (p < r->len && (r->t[p] == '+' || r->t[p] == '-'))
			p++;
		if (!is_digit(r, p))
			return unexpected(r, p, "a digit in the exponent");
		while (is_digit(r, p))
			p++;
	}
	*i = p;
	return 0;
}

static bool literal(const struct reader *r, size_t p, const char *word)
{
	size_t n = strlen(word);
	return r->len - p >= n && memcmp(r->t + p, word, n) == 0;
}

/* The grammar, iteratively: stack[d] is 1 for an object, 0 for an array. */
static int grammar(struct reader *r, int max_depth)
{
	unsigned char small[512];
	unsigned char *stack = (size_t)max_depth <= sizeof(small) ? small : xmalloc((size_t)max_depth);
	int depth = 0, rc = -1;
	enum want want = WANT_VALUE;
	size_t i = 0;
	if (literal(r, 0, "\xef\xbb\xbf"))
		i = 3;   /* a byte order mark: RFC 8259 lets a parser ignore it, and cJSON does */
	for (;;) {
		while (i < r->len && (r->t[i] == ' ' || r->t[i] == '\t' || r->t[i] == '\n' || r->t[i] == '\r'))
			i++;
		if (i >= r->len && want == WANT_NEXT && depth == 0) {
			rc = 0;
			goto out;
		}
		unsigned char c = i < r->len ? r->t[i] : 0;
		switch (want) {
		case WANT_VALUE_OR_CLOSE:
			if (c == ']' && i < r->len) {
				depth--, i++, want = WANT_NEXT;
				continue;
			}
			/* fall through */
		case WANT_VALUE:
			if (i >= r->len) {
				unexpected(r, i, want == WANT_VALUE ? "a value" : "a value or ']'");
				goto out;
			}
			if (c == '{' || c == '[') {
				if (depth >= max_depth) {
					char at[JSON_WHERE_BUF];
					snprintf(r->err, r->errlen, "JSON nesting deeper than %d at %s", max_depth,
						 where(r, i, at, sizeof(at)));
					goto out;
				}
				stack[depth++] = c == '{';
				i++;
				want = c == '{' ? WANT_KEY_OR_CLOSE : WANT_VALUE_OR_CLOSE;
				continue;
			}
			if (c == '"') {
				if (string(r, &i) < 0)
					goto out;
			} else if (c == '-' || (c >= '0' && c <= '9')) {
				if (number(r, &i) < 0)
					goto out;
			} else if (literal(r, i, "true") || literal(r, i, "null")) {
				i += 4;
			} else if (literal(r, i, "false")) {
				i += 5;
			} else {
				unexpected(r, i, want == WANT_VALUE ? "a value" : "a value or ']'");
				goto out;
			}
			want = WANT_NEXT;
			continue;
		case WANT_KEY_OR_CLOSE:
			if (c == '}' && i < r->len) {
				depth--, i++, want = WANT_NEXT;
				continue;
			}
			/* fall through */
		case WANT_KEY:
			if (c != '"' || i >= r->len) {
				unexpected(r, i, want == WANT_KEY ? "a key in double quotes"
								  : "a key in double quotes or '}'");
				goto out;
			}
			if (string(r, &i) < 0)
				goto out;
			want = WANT_COLON;
			continue;
		case WANT_COLON:
			if (c != ':' || i >= r->len) {
				unexpected(r, i, "':' after the key");
				goto out;
			}
			i++;
			want = WANT_VALUE;
			continue;
		case WANT_NEXT:
			if (depth == 0) {
				unexpected(r, i, "the end of the text after the value");
				goto out;
			}
			bool obj = stack[depth - 1];
			if (c == ',' && i < r->len) {
				i++;
				want = obj ? WANT_KEY : WANT_VALUE;
			} else if (c == (obj ? '}' : ']') && i < r->len) {
				depth--, i++;
			} else {
				unexpected(r, i, obj ? "',' or '}'" : "',' or ']'");
				goto out;
			}
			continue;
		}
	}
out:
	if (stack != small)
		free(stack);
	return rc;
}

int json_syntax_check(const char *text, size_t len, int max_depth, char *err, size_t errlen)
{
	char at[JSON_WHERE_BUF];
	const char *nul = memchr(text, '\0', len);
	if (nul) {
		json_syntax_where(text, len, (size_t)(nul - text), at, sizeof(at));
		snprintf(err, errlen, "JSON text contains a NUL byte at %s", at);
		return -1;
	}
	size_t bad = utf8_check((const unsigned char *)text, len);
	if (bad < len) {
		json_syntax_where(text, len, bad, at, sizeof(at));
		snprintf(err, errlen, "JSON text is not valid UTF-8 at %s", at);
		return -1;
	}
	struct reader r = { (const unsigned char *)text, len, err, errlen };
	return grammar(&r, max_depth > 0 ? max_depth : JSON_DEFAULT_MAX_DEPTH);
}
