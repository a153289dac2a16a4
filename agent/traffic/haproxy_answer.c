/* traffic/haproxy_answer.c: parses haproxy's answers to `show stat` (CSV) and
 * `show info` (see traffic/haproxy_answer.h): pure functions of the text,
 * strict (a field of the wrong type, a row of the wrong width, a count out of
 * range is an error naming it) and bounded (HAPROXY_ANSWER_MAX bytes, lines
 * of HAPROXY_LINE_MAX, HAPROXY_COLUMNS_MAX columns, the routes struct traffic
 * holds). Nothing is allocated but out's routes. */
#include "traffic/haproxy_answer.h"

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define BACKEND_PREFIX "tether_c_"

struct span {
	const char *p;
	size_t len;
};

/* s as a printable excerpt for an error message (at most 48 bytes, bytes
 * outside printable ASCII as '?'): what haproxy said is untrusted. */
static const char *excerpt(struct span s, char *out, size_t cap)
{
	size_t n = s.len < 48 ? s.len : 48, o = 0;
	for (size_t i = 0; i < n && o + 1 < cap; i++)
		out[o++] = s.p[i] >= 0x20 && s.p[i] < 0x7f ? s.p[i] : '?';
	if (n < s.len && o + 4 < cap) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o] = '\0';
	return out;
}

static bool span_is(struct span s, const char *word)
{
	return s.len == strlen(word) && memcmp(s.p, word, s.len) == 0;
}

/* Splits one CSV line into at most max fields (a field in double quotes
 * may hold commas, "" is a quote; the span is what is inside the quotes).
 * Returns the number of fields, or -1 with err. */
static int split(struct span line, struct span *f, size_t max, char *err, size_t errlen)
{
	size_t n = 0, i = 0;
	for (;;) {
		if (n == max) {
			snprintf(err, errlen, "more than %zu columns", max);
			return -1;
		}
		if (i < line.len && line.p[i] == '"') {
			size_t start = ++i;
			for (;; i++) {
				if (i == line.len) {
					snprintf(err, errlen, "a quoted field is not closed");
					return -1;
				}
				if (line.p[i] == '"') {
					if (i + 1 < line.len && line.p[i + 1] == '"') {
						i++;
						continue;
					}
					break;
				}
			}
			f[n++] = (struct span){ line.p + start, i - start };
			i++;
			if (i < line.len && line.p[i] != ',') {
				snprintf(err, errlen, "text after a quoted field");
				return -1;
			}
		} else {
			size_t start = i;
			while (i < line.len && line.p[i] != ',' && line.p[i] != '"')
				i++;
			if (i < line.len && line.p[i] == '"') {
				snprintf(err, errlen, "a quote inside a field");
				return -1;
			}
			f[n++] = (struct span){ line.p + start, i - start };
		}
		if (i == line.len)
			return (int)n;
		i++; /* the comma */
	}
}

/* A counter: decimal digits, at most UINT64_MAX; an empty field is 0
 * (haproxy leaves out what does not apply). -1 when it is not one. */
static int counter(struct span s, uint64_t *out)
{
	uint64_t v = 0;
	for (size_t i = 0; i < s.len; i++) {
		if (s.p[i] < '0' || s.p[i] > '9')
			return -1;
		unsigned d = (unsigned)(s.p[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

enum col { C_PXNAME, C_SVNAME, C_REQ_TOT, C_5XX, C_TTIME, C_1XX, C_2XX, C_3XX, C_4XX, C_OTHER, C_COUNT };
static const char *const col_names[C_COUNT] = { "pxname",   "svname",   "req_tot",  "hrsp_5xx",  "ttime",
						"hrsp_1xx", "hrsp_2xx", "hrsp_3xx", "hrsp_4xx", "hrsp_other" };
/* the columns an answer must have (the hrsp_* others only when a req_tot
 * is empty) */
#define C_REQUIRED C_1XX

/* One BACKEND row of a tether cluster into out. */
static int backend_row(const struct span *f, const int *col, size_t row, struct traffic *out, char *err,
		       size_t errlen)
{
	char ex[64], name[TRAFFIC_ROUTE_LEN];
	struct span px = f[col[C_PXNAME]];
	struct span bare = { px.p + strlen(BACKEND_PREFIX), px.len - strlen(BACKEND_PREFIX) };
	int nl = snprintf(name, sizeof(name), "cluster/%.*s", (int)bare.len, bare.p);
	size_t before = out->n;
	struct traffic_route *r = bare.len && nl > 0 && (size_t)nl < sizeof(name) ? traffic_route(out, name, (size_t)nl)
										    : NULL;
	if (!r) {
		snprintf(err, errlen, "line %zu: backend '%s': %s", row, excerpt(px, ex, sizeof(ex)),
			 out->n == TRAFFIC_ROUTES_MAX ? "more backends than the routes counted" : "not a cluster's name");
		return -1;
	}
	if (out->n == before) {
		snprintf(err, errlen, "line %zu: backend '%s' a second time", row, excerpt(px, ex, sizeof(ex)));
		return -1;
	}
	uint64_t v[C_COUNT] = { 0 };
	for (int c = C_REQ_TOT; c < C_COUNT; c++) {
		if (col[c] < 0)
			continue;
		if (counter(f[col[c]], &v[c]) < 0) {
			snprintf(err, errlen, "line %zu: backend '%s': %s '%s' is not a count", row,
				 excerpt(px, ex, sizeof(ex)), col_names[c], excerpt(f[col[c]], name, sizeof(name)));
			return -1;
		}
	}
	uint64_t requests = v[C_REQ_TOT];
	if (f[col[C_REQ_TOT]].len == 0) {
		/* older answers: the responses by class */
		requests = 0;
		for (int c = C_1XX; c <= C_OTHER; c++) {
			if (col[c] < 0) {
				snprintf(err, errlen, "line %zu: req_tot is empty and there is no %s column", row,
					 col_names[c]);
				return -1;
			}
			if (requests > UINT64_MAX - v[c]) {
				snprintf(err, errlen, "line %zu: backend '%s': the responses add up past 2^64", row,
					 excerpt(px, ex, sizeof(ex)));
				return -1;
			}
			requests += v[c];
		}
		if (requests > UINT64_MAX - v[C_5XX]) {
			snprintf(err, errlen, "line %zu: backend '%s': the responses add up past 2^64", row,
				 excerpt(px, ex, sizeof(ex)));
			return -1;
		}
		requests += v[C_5XX];
	}
	if (v[C_5XX] > requests) {
		snprintf(err, errlen, "line %zu: backend '%s': %llu 5xx answers of %llu requests", row,
			 excerpt(px, ex, sizeof(ex)), (unsigned long long)v[C_5XX], (unsigned long long)requests);
		return -1;
	}
	r->requests = requests;
	r->errors = v[C_5XX];
	r->approx = true;
	if (requests)
		r->hist[traffic_bucket((double)v[C_TTIME])] = requests;
	return 0;
}

static int parse_stat(const char *text, size_t len, struct traffic *out, char *err, size_t errlen)
{
	struct span f[HAPROXY_COLUMNS_MAX];
	char ex[64];
	if (len == 0) {
		snprintf(err, errlen, "an empty answer");
		return -1;
	}
	if (len > HAPROXY_ANSWER_MAX) {
		snprintf(err, errlen, "an answer of more than %u bytes", HAPROXY_ANSWER_MAX);
		return -1;
	}
	if (text[len - 1] != '\n') {
		snprintf(err, errlen, "the answer does not end with a newline (cut short?)");
		return -1;
	}
	int col[C_COUNT];
	size_t ncols = 0;
	bool header = false;
	size_t row = 0;
	for (const char *p = text, *end = text + len; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		struct span line = { p, (size_t)(nl - p) };
		p = nl + 1;
		row++;
		if (line.len == 0)
			continue;
		if (line.len > HAPROXY_LINE_MAX) {
			snprintf(err, errlen, "line %zu: longer than %u bytes", row, HAPROXY_LINE_MAX);
			return -1;
		}
		if (memchr(line.p, '\0', line.len)) {
			snprintf(err, errlen, "line %zu: a NUL byte", row);
			return -1;
		}
		char why[64];
		if (line.len >= 2 && line.p[0] == '#' && line.p[1] == ' ') {
			if (header) {
				snprintf(err, errlen, "line %zu: a second header", row);
				return -1;
			}
			line.p += 2;
			line.len -= 2;
			int n = split(line, f, HAPROXY_COLUMNS_MAX, why, sizeof(why));
			if (n < 0) {
				snprintf(err, errlen, "the header: %s", why);
				return -1;
			}
			ncols = (size_t)n;
			for (int c = 0; c < C_COUNT; c++) {
				col[c] = -1;
				for (int k = 0; k < n && col[c] < 0; k++)
					if (span_is(f[k], col_names[c]))
						col[c] = k;
				if (c < C_REQUIRED && col[c] < 0) {
					snprintf(err, errlen, "the header has no %s column", col_names[c]);
					return -1;
				}
			}
			header = true;
			continue;
		}
		if (!header) {
			/* an error message, or another command's answer */
			snprintf(err, errlen, "not a `show stat` answer: '%s'", excerpt(line, ex, sizeof(ex)));
			return -1;
		}
		int n = split(line, f, HAPROXY_COLUMNS_MAX, why, sizeof(why));
		if (n < 0) {
			snprintf(err, errlen, "line %zu: %s", row, why);
			return -1;
		}
		if ((size_t)n != ncols) {
			snprintf(err, errlen, "line %zu: %d fields where the header has %zu", row, n, ncols);
			return -1;
		}
		struct span px = f[col[C_PXNAME]];
		if (!span_is(f[col[C_SVNAME]], "BACKEND") || px.len < strlen(BACKEND_PREFIX) ||
		    memcmp(px.p, BACKEND_PREFIX, strlen(BACKEND_PREFIX)) != 0)
			continue;
		if (backend_row(f, col, row, out, err, errlen) < 0)
			return -1;
	}
	if (!header) {
		snprintf(err, errlen, "not a `show stat` answer: no header line");
		return -1;
	}
	return 0;
}

int haproxy_answer_stat(const char *text, size_t len, struct traffic *out, char *err, size_t errlen)
{
	traffic_clear(out);
	if (parse_stat(text, len, out, err, errlen) < 0) {
		traffic_clear(out);
		return -1;
	}
	return 0;
}

int haproxy_answer_pid(const char *text, size_t len, long *pid, char *err, size_t errlen)
{
	static const char key[] = "Pid: ";
	const size_t kl = sizeof(key) - 1;
	if (len > HAPROXY_ANSWER_MAX) {
		snprintf(err, errlen, "an answer of more than %u bytes", HAPROXY_ANSWER_MAX);
		return -1;
	}
	long found = -1;
	for (const char *p = text, *end = text + len; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		struct span line = { p, nl ? (size_t)(nl - p) : (size_t)(end - p) };
		p = nl ? nl + 1 : end;
		if (line.len < kl || memcmp(line.p, key, kl) != 0)
			continue;
		struct span v = { line.p + kl, line.len - kl };
		uint64_t n;
		char ex[64];
		if (v.len == 0 || v.len > 10 || counter(v, &n) < 0 || n == 0 || n > INT_MAX) {
			snprintf(err, errlen, "show info: Pid '%s' is not a process id", excerpt(v, ex, sizeof(ex)));
			return -1;
		}
		if (found >= 0) {
			snprintf(err, errlen, "show info: two Pid lines");
			return -1;
		}
		found = (long)n;
	}
	if (found < 0) {
		char ex[64];
		struct span first = { text, 0 };
		while (first.len < len && text[first.len] != '\n')
			first.len++;
		snprintf(err, errlen, "not a `show info` answer (no Pid): '%s'", excerpt(first, ex, sizeof(ex)));
		return -1;
	}
	*pid = found;
	return 0;
}
