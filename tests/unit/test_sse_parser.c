/* test_sse_parser.c: unit tests of common/sse_parser.c against the WHATWG
 * event-stream rules, its bounds, reset, and split invariance. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "sse_parser.h"

/* ---- recording events ------------------------------------------------- */

#define MAX_EVENTS 64

struct rec_event {
	char type[64];
	char data[512];
	size_t data_len;
	char last_id[64];
};

struct rec {
	struct rec_event ev[MAX_EVENTS];
	size_t n;
	int stop_after;           /* >0: return stop_rc after this many events */
	int stop_rc;
	struct buf log;           /* every event serialised, for comparisons */
};

static int on_event(void *ctx, const struct sse_event *ev)
{
	struct rec *r = ctx;
	assert_non_null(ev->type);
	assert_non_null(ev->data);
	assert_non_null(ev->last_id);
	/* data is NUL-terminated after data_len bytes */
	assert_int_equal(ev->data[ev->data_len], '\0');
	/* the first events are kept for expect_event (the random streams of
	 * the split tests may exceed these sizes: they compare the log) */
	if (r->n < MAX_EVENTS) {
		struct rec_event *e = &r->ev[r->n];
		size_t keep = ev->data_len < sizeof(e->data) ? ev->data_len : sizeof(e->data) - 1;
		snprintf(e->type, sizeof(e->type), "%s", ev->type);
		memcpy(e->data, ev->data, keep);
		e->data[keep] = '\0';
		e->data_len = ev->data_len;
		snprintf(e->last_id, sizeof(e->last_id), "%s", ev->last_id);
	}
	r->n++;
	/* "type" US "len:data" US "id" RS: unambiguous */
	buf_printf(&r->log, "%s\x1f%zu:", ev->type, ev->data_len);
	buf_append(&r->log, ev->data, ev->data_len);
	buf_printf(&r->log, "\x1f%s\x1e", ev->last_id);
	if (r->stop_after > 0 && (int)r->n >= r->stop_after)
		return r->stop_rc;
	return 0;
}

static void rec_init(struct rec *r)
{
	memset(r, 0, sizeof(*r));
	buf_init(&r->log);
}

/* Feeds all of s (a C string) at once to a default parser. */
static size_t parse_str(const char *s, struct rec *r)
{
	struct sse_parser p;
	sse_parser_init(&p, 0, 0);
	rec_init(r);
	assert_int_equal(sse_parser_feed(&p, s, strlen(s), on_event, r), 0);
	sse_parser_release(&p);
	buf_release(&r->log);
	return r->n;
}

static int feed_str(struct sse_parser *p, const char *s, struct rec *r)
{
	return sse_parser_feed(p, s, strlen(s), on_event, r);
}

static void expect_event(const struct rec *r, size_t i, const char *type, const char *data, const char *id)
{
	assert_true(i < r->n);
	assert_true(i < MAX_EVENTS);
	assert_string_equal(r->ev[i].type, type);
	assert_int_equal(r->ev[i].data_len, strlen(data));
	assert_memory_equal(r->ev[i].data, data, strlen(data));
	assert_string_equal(r->ev[i].last_id, id);
}

/* ---- line ends ----------------------------------------------------------- */

static void test_lf_line_ends(void **state)
{
	(void)state;
	struct rec r;
	assert_int_equal(parse_str("data: a\n\ndata: b\n\n", &r), 2);
	expect_event(&r, 0, "message", "a", "");
	expect_event(&r, 1, "message", "b", "");
}

static void test_cr_line_ends(void **state)
{
	(void)state;
	struct rec r;
	assert_int_equal(parse_str("data: a\r\rdata: b\rdata: c\r\r", &r), 2);
	expect_event(&r, 0, "message", "a", "");
	expect_event(&r, 1, "message", "b\nc", "");
}

static void test_crlf_line_ends(void **state)
{
	(void)state;
	struct rec r;
	assert_int_equal(parse_str("data: a\r\n\r\ndata: b\r\ndata: c\r\n\r\n", &r), 2);
	expect_event(&r, 0, "message", "a", "");
	expect_event(&r, 1, "message", "b\nc", "");
}

static void test_mixed_line_ends(void **state)
{
	(void)state;
	struct rec r;
	/* CR LF is one end; LF CR is two (a line end, then a blank line) */
	assert_int_equal(parse_str("data: a\rdata: b\ndata: c\r\ndata: d\n\rdata: e\r\n\n", &r), 2);
	expect_event(&r, 0, "message", "a\nb\nc\nd", "");
	expect_event(&r, 1, "message", "e", "");
}

static void test_crlf_split_across_feeds(void **state)
{
	(void)state;
	struct sse_parser p;
	struct rec r;
	sse_parser_init(&p, 0, 0);
	rec_init(&r);
	assert_int_equal(sse_parser_feed(&p, "data: a\r", 8, on_event, &r), 0);
	assert_int_equal(r.n, 0);
	/* this LF belongs to the CR before it: it is not a blank line */
	assert_int_equal(sse_parser_feed(&p, "\n", 1, on_event, &r), 0);
	assert_int_equal(r.n, 0);
	assert_int_equal(sse_parser_feed(&p, "data: b\r", 8, on_event, &r), 0);
	assert_int_equal(r.n, 0);
	assert_int_equal(sse_parser_feed(&p, "\n\r", 2, on_event, &r), 0);
	/* the CR ends a blank line at once, without waiting for an LF */
	assert_int_equal(r.n, 1);
	expect_event(&r, 0, "message", "a\nb", "");
	/* and the LF that follows it is swallowed, not a second blank line */
	assert_int_equal(sse_parser_feed(&p, "\ndata: c\n\n", 10, on_event, &r), 0);
	assert_int_equal(r.n, 2);
	expect_event(&r, 1, "message", "c", "");
	sse_parser_release(&p);
	buf_release(&r.log);
}

static void test_lone_cr_then_data_in_next_feed(void **state)
{
	(void)state;
	struct sse_parser p;
	struct rec r;
	sse_parser_init(&p, 0, 0);
	rec_init(&r);
	assert_int_equal(sse_parser_feed(&p, "data: a\r", 8, on_event, &r), 0);
	/* not an LF: the CR alone was the line end, "data" starts a new line */
	assert_int_equal(sse_parser_feed(&p, "data: b\r\r", 9, on_event, &r), 0);
	assert_int_equal(r.n, 1);
	expect_event(&r, 0, "message", "a\nb", "");
	sse_parser_release(&p);
	buf_release(&r.log);
}

/* ---- the byte order mark ---------------------------------------------------- */

static void test_leading_bom_dropped(void **state)
{
	(void)state;
	struct rec r;
	assert_int_equal(parse_str("\xEF\xBB\xBF" "data: a\n\n", &r), 1);
	expect_event(&r, 0, "message", "a", "");
}

static void test_leading_bom_split(void **state)
{
	(void)state;
	struct sse_parser p;
	struct rec r;
	sse_parser_init(&p, 0, 0);
	rec_init(&r);
	assert_int_equal(sse_parser_feed(&p, "\xEF", 1, on_event, &r), 0);
	assert_int_equal(sse_parser_feed(&p, "\xBB", 1, on_event, &r), 0);
	assert_int_equal(sse_parser_feed(&p, "\xBF" "da", 3, on_event, &r), 0);
	assert_int_equal(sse_parser_feed(&p, "ta: a\n\n", 7, on_event, &r), 0);
	assert_int_equal(r.n, 1);
	expect_event(&r, 0, "message", "a", "");
	sse_parser_release(&p);
	buf_release(&r.log);
}

static void test_second_bom_is_data(void **state)
{
	(void)state;
	struct rec r;
	/* a second BOM makes the field name "\xEF\xBB\xBF" "data": unknown */
	assert_int_equal(parse_str("\xEF\xBB\xBF\xEF\xBB\xBF" "data: a\n\ndata: b\n\n", &r), 1);
	expect_event(&r, 0, "message", "b", "");
	/* a BOM after the first line is a line byte too */
	assert_int_equal(parse_str("data: a\n\n\xEF\xBB\xBF" "data: b\n\n", &r), 1);
	expect_event(&r, 0, "message", "a", "");
	/* and inside a value it is kept as data */
	assert_int_equal(parse_str("data: \xEF\xBB\xBFx\n\n", &r), 1);
	expect_event(&r, 0, "message", "\xEF\xBB\xBFx", "");
}

static void test_partial_bom_is_data(void **state)
{
	(void)state;
	struct rec r;
	/* two bytes of a BOM and then something else: they stay line bytes */
	assert_int_equal(parse_str("\xEF\xBB" "data: a\n\ndata: b\n\n", &r), 1);
	expect_event(&r, 0, "message", "b", "");
	assert_int_equal(parse_str("\xEF" "data: a\n\ndata: b\n\n", &r), 1);
	expect_event(&r, 0, "message", "b", "");
	/* "\xEF\xEF\xBB\xBF": the first byte is not a BOM, so neither is the rest */
	assert_int_equal(parse_str("\xEF\xEF\xBB\xBF" "data: a\n\ndata: b\n\n", &r), 1);
	expect_event(&r, 0, "message", "b", "");
	/* a partial BOM ended by a line end: an unknown field, then data */
	assert_int_equal(parse_str("\xEF\xBB\ndata: c\n\n", &r), 1);
	expect_event(&r, 0, "message", "c", "");
}

/* ---- fields ------------------------------------------------------------------- */

static void test_comments(void **state)
{
	(void)state;
	struct rec r;
	assert_int_equal(parse_str(": hello\ndata: a\n:\n:data: no\n\n", &r), 1);
	expect_event(&r, 0, "message", "a", "");
	/* a comment alone is no event, and does not end one */
	assert_int_equal(parse_str(":keepalive\n\n:x\r\n\r\n", &r), 0);
	assert_int_equal(parse_str("data: a\n: c\ndata: b\n\n", &r), 1);
	expect_event(&r, 0, "message", "a\nb", "");
}

static void test_data_without_colon(void **state)
{
	(void)state;
	struct rec r;
	/* "data" alone is the data field with an empty value: an empty event */
	assert_int_equal(parse_str("data\n\n", &r), 1);
	expect_event(&r, 0, "message", "", "");
	assert_int_equal(parse_str("data\ndata\n\n", &r), 1);
	expect_event(&r, 0, "message", "\n", "");
	assert_int_equal(parse_str("data:\n\n", &r), 1);
	expect_event(&r, 0, "message", "", "");
	assert_int_equal(parse_str("data\ndata: x\n\n", &r), 1);
	expect_event(&r, 0, "message", "\nx", "");
}

static void test_one_space_dropped(void **state)
{
	(void)state;
	struct rec r;
	assert_int_equal(parse_str("data:x\n\n", &r), 1);
	expect_event(&r, 0, "message", "x", "");
	assert_int_equal(parse_str("data: x\n\n", &r), 1);
	expect_event(&r, 0, "message", "x", "");
	assert_int_equal(parse_str("data:  x\n\n", &r), 1);
	expect_event(&r, 0, "message", " x", "");
	assert_int_equal(parse_str("data: x \n\n", &r), 1);
	expect_event(&r, 0, "message", "x ", "");
	assert_int_equal(parse_str("data:\tx\n\n", &r), 1);
	expect_event(&r, 0, "message", "\tx", "");
	/* a colon in the value is data */
	assert_int_equal(parse_str("data: a:b: c\n\n", &r), 1);
	expect_event(&r, 0, "message", "a:b: c", "");
	assert_int_equal(parse_str("event:  sp\ndata: x\n\n", &r), 1);
	expect_event(&r, 0, " sp", "x", "");
}

static void test_multiline_data(void **state)
{
	(void)state;
	struct rec r;
	assert_int_equal(parse_str("data: a\ndata: b\ndata:\ndata: c\n\n", &r), 1);
	expect_event(&r, 0, "message", "a\nb\n\nc", "");
	/* only one trailing LF is removed */
	assert_int_equal(parse_str("data: a\ndata\ndata\n\n", &r), 1);
	expect_event(&r, 0, "message", "a\n\n", "");
}

static void test_empty_data_dispatches_nothing(void **state)
{
	(void)state;
	struct rec r;
	assert_int_equal(parse_str("\n\n\n\r\n\r\r", &r), 0);
	assert_int_equal(parse_str("event: x\n\n", &r), 0);
	assert_int_equal(parse_str("id: 1\n\nretry: 5\n\n", &r), 0);
	assert_int_equal(parse_str("foo: bar\n\n", &r), 0);
}

static void test_blank_line_resets_event_type(void **state)
{
	(void)state;
	struct rec r;
	assert_int_equal(parse_str("event: push\n\ndata: x\n\n", &r), 1);
	expect_event(&r, 0, "message", "x", "");
	/* and after a dispatch too */
	assert_int_equal(parse_str("event: push\ndata: 1\n\ndata: 2\n\n", &r), 2);
	expect_event(&r, 0, "push", "1", "");
	expect_event(&r, 1, "message", "2", "");
}

static void test_event_names(void **state)
{
	(void)state;
	struct rec r;
	assert_int_equal(parse_str("event: push\ndata: {}\n\nevent:heartbeat\ndata: {\"version\":3}\n\n", &r), 2);
	expect_event(&r, 0, "push", "{}", "");
	expect_event(&r, 1, "heartbeat", "{\"version\":3}", "");
	/* the last event field wins; it may come after the data */
	assert_int_equal(parse_str("event: a\nevent: b\ndata: x\nevent: c\n\n", &r), 1);
	expect_event(&r, 0, "c", "x", "");
	/* an empty name means "message" */
	assert_int_equal(parse_str("event: a\nevent\ndata: x\n\n", &r), 1);
	expect_event(&r, 0, "message", "x", "");
	assert_int_equal(parse_str("event:\ndata: x\n\n", &r), 1);
	expect_event(&r, 0, "message", "x", "");
	/* names are case-sensitive field names */
	assert_int_equal(parse_str("Event: a\ndata: x\n\n", &r), 1);
	expect_event(&r, 0, "message", "x", "");
}

static void test_id_persists(void **state)
{
	(void)state;
	struct rec r;
	assert_int_equal(parse_str("id: 7\ndata: a\n\ndata: b\n\nid: 8\n\ndata: c\n\n", &r), 3);
	expect_event(&r, 0, "message", "a", "7");
	expect_event(&r, 1, "message", "b", "7");
	/* an id line in an event with no data still sets the id */
	expect_event(&r, 2, "message", "c", "8");
	/* an id after the data counts for that event */
	assert_int_equal(parse_str("data: a\nid: 5\n\n", &r), 1);
	expect_event(&r, 0, "message", "a", "5");
	/* "id" with no value resets it */
	assert_int_equal(parse_str("id: 5\ndata: a\n\nid\ndata: b\n\nid: 6\ndata: c\n\nid:\ndata: d\n\n", &r), 4);
	expect_event(&r, 0, "message", "a", "5");
	expect_event(&r, 1, "message", "b", "");
	expect_event(&r, 2, "message", "c", "6");
	expect_event(&r, 3, "message", "d", "");
}

static void test_id_with_nul_ignored(void **state)
{
	(void)state;
	static const char s[] = "id: 9\ndata: a\n\nid: 1\0" "2\ndata: b\n\nid: \0\ndata: c\n\n";
	struct sse_parser p;
	struct rec r;
	sse_parser_init(&p, 0, 0);
	rec_init(&r);
	assert_int_equal(sse_parser_feed(&p, s, sizeof(s) - 1, on_event, &r), 0);
	assert_int_equal(r.n, 3);
	expect_event(&r, 0, "message", "a", "9");
	expect_event(&r, 1, "message", "b", "9");
	expect_event(&r, 2, "message", "c", "9");
	assert_int_equal(p.last_id.len, 1);
	sse_parser_release(&p);
	buf_release(&r.log);
}

static void test_data_with_nul_kept(void **state)
{
	(void)state;
	static const char s[] = "data: a\0b\n\n";
	struct sse_parser p;
	struct rec r;
	sse_parser_init(&p, 0, 0);
	rec_init(&r);
	assert_int_equal(sse_parser_feed(&p, s, sizeof(s) - 1, on_event, &r), 0);
	assert_int_equal(r.n, 1);
	assert_int_equal(r.ev[0].data_len, 3);
	assert_memory_equal(r.ev[0].data, "a\0b", 3);
	sse_parser_release(&p);
	buf_release(&r.log);
}

/* Feeds s to a fresh parser and returns its retry_ms. */
static int64_t retry_after(const char *s)
{
	struct sse_parser p;
	struct rec r;
	sse_parser_init(&p, 0, 0);
	rec_init(&r);
	assert_int_equal(sse_parser_feed(&p, s, strlen(s), on_event, &r), 0);
	int64_t v = p.retry_ms;
	assert_int_equal(r.n, 0);
	sse_parser_release(&p);
	buf_release(&r.log);
	return v;
}

static void test_retry(void **state)
{
	(void)state;
	assert_int_equal(retry_after(""), -1);
	assert_int_equal(retry_after("retry: 1000\n"), 1000);
	assert_int_equal(retry_after("retry:250\n"), 250);
	assert_int_equal(retry_after("retry: 0\n"), 0);
	assert_int_equal(retry_after("retry: 007\n"), 7);
	/* not all digits: ignored, the previous value stays */
	assert_int_equal(retry_after("retry: 1000\nretry: 1e3\n"), 1000);
	assert_int_equal(retry_after("retry: 1000\nretry: -1\n"), 1000);
	assert_int_equal(retry_after("retry: 1000\nretry:  5\n"), 1000);
	assert_int_equal(retry_after("retry: 1000\nretry: 5 \n"), 1000);
	assert_int_equal(retry_after("retry: 1000\nretry:\n"), 1000);
	assert_int_equal(retry_after("retry: 1000\nretry\n"), 1000);
	assert_int_equal(retry_after("retry: 1000\nretry: +5\n"), 1000);
	assert_int_equal(retry_after("retry: 1000\nretry: 5.0\n"), 1000);
	assert_int_equal(retry_after("retry: 1000\nretry: 0x10\n"), 1000);
	assert_int_equal(retry_after("retry: x\n"), -1);
	/* huge values saturate instead of wrapping */
	assert_int_equal(retry_after("retry: 9223372036854775807\n"), INT64_MAX);
	assert_int_equal(retry_after("retry: 9223372036854775808\n"), INT64_MAX);
	assert_int_equal(retry_after("retry: 99999999999999999999999999999999\n"), INT64_MAX);
	assert_int_equal(retry_after("retry: 922337203685477580\n"), INT64_C(922337203685477580));
	/* the last valid one wins; "Retry" is another field */
	assert_int_equal(retry_after("retry: 5\nretry: 6\nRetry: 7\n"), 6);
}

static void test_unknown_fields_ignored(void **state)
{
	(void)state;
	struct rec r;
	assert_int_equal(parse_str("foo: bar\ndata: a\nDATA: b\nData: c\ndatas: d\nx\n\n", &r), 1);
	expect_event(&r, 0, "message", "a", "");
}

static void test_field_name_with_space_ignored(void **state)
{
	(void)state;
	struct rec r;
	/* "data : x" is the field "data ", which is unknown */
	assert_int_equal(parse_str("data : x\n\n", &r), 0);
	assert_int_equal(parse_str("data :x\ndata: y\n\n", &r), 1);
	expect_event(&r, 0, "message", "y", "");
	assert_int_equal(parse_str(" data: x\n\n", &r), 0);
	assert_int_equal(parse_str("id : 5\ndata: y\n\n", &r), 1);
	expect_event(&r, 0, "message", "y", "");
}

static void test_partial_event_never_dispatched(void **state)
{
	(void)state;
	struct rec r;
	assert_int_equal(parse_str("data: a", &r), 0);
	assert_int_equal(parse_str("data: a\n", &r), 0);
	assert_int_equal(parse_str("data: a\r", &r), 0);
	assert_int_equal(parse_str("data: a\r\n", &r), 0);
	assert_int_equal(parse_str("data: a\ndata: b\n", &r), 0);
	assert_int_equal(parse_str("data: a\n\ndata: b\n", &r), 1);
	expect_event(&r, 0, "message", "a", "");
}

static void test_callback_stops_feed(void **state)
{
	(void)state;
	struct sse_parser p;
	struct rec r;
	sse_parser_init(&p, 0, 0);
	rec_init(&r);
	r.stop_after = 1;
	r.stop_rc = 7;
	const char *s = "data: a\n\ndata: b\n\n";
	assert_int_equal(sse_parser_feed(&p, s, strlen(s), on_event, &r), 7);
	assert_int_equal(r.n, 1);
	expect_event(&r, 0, "message", "a", "");
	sse_parser_release(&p);
	buf_release(&r.log);
}

/* ---- bounds ---------------------------------------------------------------- */

static void test_default_bounds(void **state)
{
	(void)state;
	struct sse_parser p;
	sse_parser_init(&p, 0, 0);
	assert_int_equal(p.max_line, SSE_DEFAULT_MAX_LINE);
	assert_int_equal(p.max_event, SSE_DEFAULT_MAX_EVENT);
	assert_int_equal(p.retry_ms, -1);
	sse_parser_release(&p);
}

static void test_max_line(void **state)
{
	(void)state;
	struct sse_parser p;
	struct rec r;
	/* exactly max_line bytes is fine */
	sse_parser_init(&p, 16, 1024);
	rec_init(&r);
	assert_int_equal(feed_str(&p, "data: 0123456789\n\n", &r), 0);
	assert_int_equal(r.n, 1);
	expect_event(&r, 0, "message", "0123456789", "");
	/* one more is not */
	assert_int_equal(feed_str(&p, "data: 0123456789a\n\n", &r), -1);
	assert_int_equal(r.n, 1);
	sse_parser_release(&p);
	buf_release(&r.log);

	/* across feeds, byte by byte, comments count too */
	sse_parser_init(&p, 16, 1024);
	rec_init(&r);
	const char *line = ":0123456789abcdefg";
	int rc = 0;
	size_t i;
	for (i = 0; line[i] && rc == 0; i++)
		rc = sse_parser_feed(&p, line + i, 1, on_event, &r);
	assert_int_equal(rc, -1);
	assert_int_equal(i, 17);
	sse_parser_release(&p);
	buf_release(&r.log);
}

static void test_max_event(void **state)
{
	(void)state;
	struct sse_parser p;
	struct rec r;
	/* data of 15 bytes plus its LF is exactly 16 */
	sse_parser_init(&p, 1024, 16);
	rec_init(&r);
	assert_int_equal(feed_str(&p, "data: 0123456\ndata: 0123456\n\n", &r), 0);
	assert_int_equal(r.n, 1);
	expect_event(&r, 0, "message", "0123456\n0123456", "");
	/* the bound is per event: the next one starts from zero */
	assert_int_equal(feed_str(&p, "data: 0123456789abcde\n\n", &r), 0);
	assert_int_equal(r.n, 2);
	/* many short lines add up */
	assert_int_equal(feed_str(&p, "data: 0123\ndata: 0123\ndata: 0123\ndata: 0\n", &r), -1);
	assert_int_equal(r.n, 2);
	sse_parser_release(&p);
	buf_release(&r.log);
}

/* ---- reset ----------------------------------------------------------------- */

static void test_reset_keeps_id_and_retry(void **state)
{
	(void)state;
	struct sse_parser p;
	struct rec r;
	sse_parser_init(&p, 0, 0);
	rec_init(&r);
	const char *a = "\xEF\xBB\xBFid: 5\nretry: 300\ndata: first\n\nevent: push\ndata: partial\nda";
	assert_int_equal(sse_parser_feed(&p, a, strlen(a), on_event, &r), 0);
	assert_int_equal(r.n, 1);
	expect_event(&r, 0, "message", "first", "5");
	sse_parser_reset(&p);
	assert_int_equal(p.retry_ms, 300);
	/* the partial event (its data, type and the half line) is gone, and a
	 * new stream may start with its own BOM */
	const char *b = "\xEF\xBB\xBF" "data: second\n\n";
	assert_int_equal(sse_parser_feed(&p, b, strlen(b), on_event, &r), 0);
	assert_int_equal(r.n, 2);
	expect_event(&r, 1, "message", "second", "5");
	assert_int_equal(p.retry_ms, 300);
	sse_parser_release(&p);
	buf_release(&r.log);
}

static void test_reset_mid_line_after_cr(void **state)
{
	(void)state;
	struct sse_parser p;
	struct rec r;
	sse_parser_init(&p, 0, 0);
	rec_init(&r);
	assert_int_equal(sse_parser_feed(&p, "data: a\r", 8, on_event, &r), 0);
	sse_parser_reset(&p);
	assert_int_equal(sse_parser_feed(&p, "data: b\n\n", 9, on_event, &r), 0);
	assert_int_equal(r.n, 1);
	expect_event(&r, 0, "message", "b", "");
	sse_parser_release(&p);
	buf_release(&r.log);
}

/* ---- split invariance -------------------------------------------------------- */

static uint64_t rng_state;

static uint64_t rng_next(void)
{
	/* splitmix64 */
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static size_t rng_below(size_t n)
{
	return (size_t)(rng_next() % n);
}

struct stream {
	const char *bytes;
	size_t len;
	size_t max_line, max_event;
};

struct outcome {
	struct buf log;
	int rc;
	size_t n;
	char last_id[64];
	int64_t retry_ms;
};

/* Feeds s in the pieces cuts[0..ncuts) delimit (sorted offsets); stops at
 * the first non-zero return. */
static void run_split(const struct stream *s, const size_t *cuts, size_t ncuts, struct outcome *o)
{
	struct sse_parser p;
	struct rec *r = calloc(1, sizeof(*r));
	assert_non_null(r);
	sse_parser_init(&p, s->max_line, s->max_event);
	buf_init(&r->log);
	size_t from = 0;
	o->rc = 0;
	for (size_t k = 0; k <= ncuts && o->rc == 0; k++) {
		size_t to = k < ncuts ? cuts[k] : s->len;
		o->rc = sse_parser_feed(&p, s->bytes + from, to - from, on_event, r);
		from = to;
	}
	o->log = r->log;
	o->n = r->n;
	snprintf(o->last_id, sizeof(o->last_id), "%s", p.last_id.len ? p.last_id.data : "");
	o->retry_ms = p.retry_ms;
	sse_parser_release(&p);
	free(r);
}

static int cmp_size(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	return x < y ? -1 : x > y;
}

static void expect_same(const struct outcome *want, const struct outcome *got, size_t si, const char *how)
{
	if (want->rc != got->rc || want->n != got->n || want->log.len != got->log.len ||
	    (want->log.len && memcmp(want->log.data, got->log.data, want->log.len) != 0) ||
	    strcmp(want->last_id, got->last_id) != 0 || want->retry_ms != got->retry_ms)
		fail_msg("stream %zu fed %s: rc %d/%d, %zu/%zu events, id '%s'/'%s', retry %lld/%lld", si, how,
			 want->rc, got->rc, want->n, got->n, want->last_id, got->last_id,
			 (long long)want->retry_ms, (long long)got->retry_ms);
}

#define STR(s) s, sizeof(s) - 1

static const struct stream fixed_streams[] = {
	{ STR("\xEF\xBB\xBF" "data: one\r\n\r\n:comment\rdata:two\r\rdata\n\nevent: e\ndata: 3\ndata:  4\n\n"), 0, 0 },
	{ STR("id: 1\ndata: a\r\n\r\nid\ndata: b\n\nid: x\0y\ndata: c\n\nid: 2\r\n\r\n"), 0, 0 },
	{ STR("retry: 10\nretry: 1e3\nretry:  5\nretry: 99999999999999999999999\ndata: r\n\nretry: -1\n"), 0, 0 },
	{ STR("\xEF\xBB\xBF\xEF\xBB\xBF" "data: second bom\n\ndata: ok\n\n"), 0, 0 },
	{ STR("\xEF\xBB" "data: partial bom\n\ndata: ok\r\r"), 0, 0 },
	{ STR("\xEF\xEF\xBB\xBF" "data: x\n\n\xEF\xBB\xBF\n\ndata: y\n\n"), 0, 0 },
	{ STR("data : x\n\ndata:\n\n\n\n\r\n\r\nevent: only\n\ndata: y\n\n"), 0, 0 },
	{ STR("data: unfinished\n\ndata: tail"), 0, 0 },
	{ STR("\r\n\r\n\n\r\r\ndata: \r\n\r\n\r\r\n\n\r\n\rdata:z\r\n\r"), 0, 0 },
	{ STR("a\r\r\n\n\r\ndata:z\r\n\r\n\r\ndata\r\ndata\r\r"), 0, 0 },
	{ STR("event: push\nid: 42\ndata: {\"version\":42,\"base\":41,\"nonce\":\"n\",\"upserts\":[{\"name\":"
	      "\"cluster/web\",\"body\":{\"endpoints\":[]}}]}\n\nevent: heartbeat\ndata: {\"version\":42}\n\n"), 0, 0 },
	{ STR("data: a\0b\n\n:\0\nid: \0\ndata: c\r\n\r\n"), 0, 0 },
	/* bounds: the same events before the -1, however the bytes come */
	{ STR("data: ok\n\ndata: 0123456789abcdefXYZ\n\ndata: never\n\n"), 16, 1024 },
	{ STR("data: 0123\n\ndata: 0123\ndata: 0123\ndata: 0123\n\n"), 1024, 16 },
	{ STR(":0123456789abcde\r\ndata: x\r\n\r\n:0123456789abcdef\n"), 16, 1024 },
};

#define RANDOM_STREAMS 24
#define SPLITS 1000

static void check_stream(const struct stream *s, size_t si)
{
	struct outcome whole, got;
	run_split(s, NULL, 0, &whole);

	/* byte by byte */
	size_t *cuts = malloc((s->len + 1) * sizeof(size_t));
	assert_non_null(cuts);
	for (size_t i = 0; i + 1 < s->len; i++)
		cuts[i] = i + 1;
	run_split(s, cuts, s->len > 1 ? s->len - 1 : 0, &got);
	expect_same(&whole, &got, si, "byte by byte");
	buf_release(&got.log);

	/* random splits (empty pieces included) */
	for (int t = 0; t < SPLITS; t++) {
		size_t ncuts = 1 + rng_below(s->len < 12 ? s->len + 1 : 12);
		for (size_t k = 0; k < ncuts; k++)
			cuts[k] = rng_below(s->len + 1);
		qsort(cuts, ncuts, sizeof(size_t), cmp_size);
		run_split(s, cuts, ncuts, &got);
		expect_same(&whole, &got, si, "at random split points");
		buf_release(&got.log);
	}
	free(cuts);
	buf_release(&whole.log);
}

static void test_split_invariance_fixed(void **state)
{
	(void)state;
	size_t total_events = 0;
	for (size_t i = 0; i < sizeof(fixed_streams) / sizeof(fixed_streams[0]); i++) {
		struct outcome o;
		run_split(&fixed_streams[i], NULL, 0, &o);
		total_events += o.n;
		buf_release(&o.log);
		check_stream(&fixed_streams[i], i);
	}
	/* the corpus really produces events (a parser that drops all would pass
	 * the comparison) */
	assert_true(total_events >= 20);
}

static void test_split_invariance_random(void **state)
{
	(void)state;
	/* streams built from the bytes that matter to the grammar */
	static const char *const atoms[] = {
		"data", "data:", "data: ", "event:", "event: push", "id:", "id: 7", "retry:", "retry: 12",
		":", " ", "x", "\r", "\n", "\r\n", "\n\n", "\r\r", "\xEF\xBB\xBF", "\xEF", "\xBB", "\0",
		"data : y", "{\"v\":1}",
	};
	size_t natoms = sizeof(atoms) / sizeof(atoms[0]);
	for (size_t si = 0; si < RANDOM_STREAMS; si++) {
		struct buf b = BUF_INIT;
		size_t parts = 20 + rng_below(60);
		for (size_t k = 0; k < parts; k++) {
			size_t a = rng_below(natoms);
			/* "\0" is one NUL byte */
			buf_append(&b, atoms[a], atoms[a][0] ? strlen(atoms[a]) : 1);
		}
		struct stream s = { b.data, b.len, si % 3 == 0 ? 24 : 0, si % 3 == 0 ? 48 : 0 };
		check_stream(&s, 100 + si);
		buf_release(&b);
	}
}

int main(void)
{
	const char *env = getenv("SSE_TEST_SEED");
	uint64_t seed;
	if (env) {
		char *end;
		errno = 0;
		seed = strtoull(env, &end, 10);
		if (errno || end == env || *end) {
			fprintf(stderr, "SSE_TEST_SEED must be a number\n");
			return 99;
		}
	} else {
		seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	}
	rng_state = seed;
	printf("# split invariance seed: %llu (set SSE_TEST_SEED to repeat)\n", (unsigned long long)seed);
	fflush(stdout);

	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lf_line_ends),
		cmocka_unit_test(test_cr_line_ends),
		cmocka_unit_test(test_crlf_line_ends),
		cmocka_unit_test(test_mixed_line_ends),
		cmocka_unit_test(test_crlf_split_across_feeds),
		cmocka_unit_test(test_lone_cr_then_data_in_next_feed),
		cmocka_unit_test(test_leading_bom_dropped),
		cmocka_unit_test(test_leading_bom_split),
		cmocka_unit_test(test_second_bom_is_data),
		cmocka_unit_test(test_partial_bom_is_data),
		cmocka_unit_test(test_comments),
		cmocka_unit_test(test_data_without_colon),
		cmocka_unit_test(test_one_space_dropped),
		cmocka_unit_test(test_multiline_data),
		cmocka_unit_test(test_empty_data_dispatches_nothing),
		cmocka_unit_test(test_blank_line_resets_event_type),
		cmocka_unit_test(test_event_names),
		cmocka_unit_test(test_id_persists),
		cmocka_unit_test(test_id_with_nul_ignored),
		cmocka_unit_test(test_data_with_nul_kept),
		cmocka_unit_test(test_retry),
		cmocka_unit_test(test_unknown_fields_ignored),
		cmocka_unit_test(test_field_name_with_space_ignored),
		cmocka_unit_test(test_partial_event_never_dispatched),
		cmocka_unit_test(test_callback_stops_feed),
		cmocka_unit_test(test_default_bounds),
		cmocka_unit_test(test_max_line),
		cmocka_unit_test(test_max_event),
		cmocka_unit_test(test_reset_keeps_id_and_retry),
		cmocka_unit_test(test_reset_mid_line_after_cr),
		cmocka_unit_test(test_split_invariance_fixed),
		cmocka_unit_test(test_split_invariance_random),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
