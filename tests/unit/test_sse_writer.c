/* test_sse_writer.c: unit tests of the plane's SSE framing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "buf.h"
#include "core/sse_writer.h"

static void expect_bytes(struct buf *b, const char *want)
{
	assert_int_equal(b->len, strlen(want));
	assert_memory_equal(b->data, want, b->len);
}

static void test_event_with_name_and_id(void **state)
{
	(void)state;
	struct buf b = BUF_INIT;
	sse_write_event(&b, "push", "42", "{\"a\":1}", 7);
	expect_bytes(&b, "event: push\nid: 42\ndata: {\"a\":1}\n\n");
	buf_release(&b);
}

static void test_multiline_data_splits_on_every_line_end(void **state)
{
	(void)state;
	struct buf b = BUF_INIT;
	const char data[] = "a\nb\r\nc\rd";
	sse_write_event(&b, NULL, NULL, data, strlen(data));
	expect_bytes(&b, "data: a\ndata: b\ndata: c\ndata: d\n\n");
	buf_release(&b);
}

static void test_trailing_newline_gives_empty_last_line(void **state)
{
	(void)state;
	struct buf b = BUF_INIT;
	sse_write_event(&b, "x", NULL, "a\n", 2);
	/* a client joins data lines with LF: "a\n" round-trips */
	expect_bytes(&b, "event: x\ndata: a\ndata: \n\n");
	buf_release(&b);
}

static void test_empty_data(void **state)
{
	(void)state;
	struct buf b = BUF_INIT;
	sse_write_event(&b, "heartbeat", NULL, "", 0);
	expect_bytes(&b, "event: heartbeat\ndata: \n\n");
	buf_release(&b);
}

static void test_retry_and_comment(void **state)
{
	(void)state;
	struct buf b = BUF_INIT;
	sse_write_retry(&b, 2000);
	sse_write_comment(&b, "keep\nalive");
	expect_bytes(&b, "retry: 2000\n\n: keep alive\n");
	buf_release(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_event_with_name_and_id),
		cmocka_unit_test(test_multiline_data_splits_on_every_line_end),
		cmocka_unit_test(test_trailing_newline_gives_empty_last_line),
		cmocka_unit_test(test_empty_data),
		cmocka_unit_test(test_retry_and_comment),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
