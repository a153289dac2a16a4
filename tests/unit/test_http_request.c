/* test_http_request.c: unit tests of plane/net/http_request.c: a request's
 * path, query and headers as a handler sees them (unescaped, never into a
 * NUL), in pieces of any size, pipelined; and what is refused with 400 or
 * 431: ambiguous framing, a name with white space or a folded value, a
 * head over its bound, too many headers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "net/http_request.h"

struct seen {
	struct http_request r;
	unsigned heads, ends;
	struct buf body;
	char path[256], node[64], ct[64];
	int64_t clen;
};

static void begin(void *owner)
{
	(void)owner;
}

static void head(void *owner)
{
	struct seen *s = owner;
	s->heads++;
	snprintf(s->path, sizeof(s->path), "%s", http_request_path(&s->r));
	const char *n = http_request_query(&s->r, "node");
	snprintf(s->node, sizeof(s->node), "%s", n ? n : "(none)");
	const char *ct = http_request_header(&s->r, "content-type");
	snprintf(s->ct, sizeof(s->ct), "%s", ct ? ct : "(none)");
	s->clen = http_request_content_length(&s->r);
}

static void body(void *owner, const char *data, size_t len)
{
	struct seen *s = owner;
	buf_append(&s->body, data, len);
}

static void end(void *owner)
{
	struct seen *s = owner;
	s->ends++;
}

static const struct http_request_hooks hooks = { begin, head, body, end };

static void start(struct seen *s, size_t max_head)
{
	memset(s, 0, sizeof(*s));
	buf_init(&s->body);
	http_request_init(&s->r, &hooks, s, max_head);
}

static void finish(struct seen *s)
{
	http_request_free(&s->r);
	buf_release(&s->body);
}

/* Feeds text in pieces of step bytes, resetting after each request as a
 * connection does. Returns the status of a refusal, or 0. */
static unsigned feed(struct seen *s, const char *text, size_t step)
{
	size_t len = strlen(text), off = 0;
	while (off < len) {
		size_t n = len - off < step ? len - off : step;
		unsigned ends = s->ends, status;
		const char *msg;
		size_t used = http_request_feed(&s->r, text + off, n, &status, &msg);
		if (status) {
			assert_non_null(msg);
			return status;
		}
		off += used;
		if (s->ends != ends)
			http_request_reset(&s->r);
	}
	return 0;
}

static void test_path_query_headers(void **state)
{
	(void)state;
	for (size_t step = 1; step <= 64; step *= 4) {
		struct seen s;
		start(&s, 16384);
		assert_int_equal(feed(&s, "PUT /v1/resources/cluster/a%2Db?node=n%31&x HTTP/1.1\r\n"
					  "Content-Type: application/json\r\nContent-Length: 5\r\n\r\nhello",
				      step),
				 0);
		assert_int_equal(s.heads, 1);
		assert_int_equal(s.ends, 1);
		assert_string_equal(s.path, "/v1/resources/cluster/a-b");
		assert_string_equal(s.node, "n1");
		assert_string_equal(s.ct, "application/json");   /* names are case-insensitive */
		assert_int_equal(s.clen, 5);
		assert_int_equal(s.body.len, 5);
		assert_memory_equal(s.body.data, "hello", 5);
		finish(&s);
	}
}

static void test_no_nul(void **state)
{
	(void)state;
	struct seen s;
	start(&s, 16384);
	assert_int_equal(feed(&s, "GET /v1/resources/cluster/a%00b?node=a%00b HTTP/1.1\r\n\r\n", 7), 0);
	assert_string_equal(s.path, "/v1/resources/cluster/a%00b");
	assert_string_equal(s.node, "a%00b");
	finish(&s);
}

static void test_pipelined_and_chunked(void **state)
{
	(void)state;
	struct seen s;
	start(&s, 16384);
	assert_int_equal(feed(&s, "POST /v1/batch HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
				  "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\nGET /healthz HTTP/1.1\r\n\r\n",
			      1000),
			 0);
	assert_int_equal(s.ends, 2);
	assert_string_equal(s.path, "/healthz");
	assert_int_equal(s.body.len, 5);
	assert_memory_equal(s.body.data, "abcde", 5);
	finish(&s);
}

static void refused(const char *text, unsigned want)
{
	for (size_t step = 1; step <= 1000; step *= 10) {
		struct seen s;
		start(&s, 512);
		unsigned got = feed(&s, text, step);
		if (got != want)
			fail_msg("%u, not %u, for %s (pieces of %zu)", got, want, text, step);
		assert_int_equal(s.ends, 0);   /* never reaches a handler whole */
		finish(&s);
	}
}

static void test_ambiguous_framing(void **state)
{
	(void)state;
	refused("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 400);
	refused("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello", 400);
	refused("POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400);
	refused("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n", 400);
	refused("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\nxx", 400);
	refused("POST / HTTP/1.1\r\nContent-Length : 5\r\n\r\nhello", 400);
	refused("POST / HTTP/1.1\r\nContent-Length:\t-1\r\n\r\n", 400);
	refused("POST / HTTP/1.1\r\nContent-Length: 1 2\r\n\r\n", 400);
	refused("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", 400);
	refused("GET / HTTP/1.1\r\nX-A: one\r\n two\r\n\r\n", 400);
	refused("GET / HTTP/1.1\r\nAuthorization: Bearer a\r\nauthorization: Bearer b\r\n\r\n", 400);
	refused("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400);
	/* a trailer would rewrite a header the request was judged by */
	refused("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\nAuthorization: x\r\n\r\n",
		400);
}

static void test_huge_length(void **state)
{
	(void)state;
	struct seen s;
	start(&s, 16384);
	/* 2^63 + 1: past INT64_MAX, read as the largest, never negative */
	assert_int_equal(feed(&s, "POST / HTTP/1.1\r\nContent-Length: 9223372036854775809\r\n\r\n", 1000), 0);
	assert_int_equal(s.heads, 1);
	assert_true(s.clen == INT64_MAX);
	finish(&s);
}

static void test_head_bounds(void **state)
{
	(void)state;
	char big[1024];
	snprintf(big, sizeof(big), "GET /%0600d HTTP/1.1\r\n\r\n", 0);
	refused(big, 431);
	struct buf many = BUF_INIT;
	buf_puts(&many, "GET / HTTP/1.1\r\n");
	for (int i = 0; i <= HTTP_REQUEST_MAX_HEADERS; i++)
		buf_printf(&many, "X%d: 1\r\n", i);
	buf_puts(&many, "\r\n");
	struct seen s;
	start(&s, 1 << 20);
	assert_int_equal(feed(&s, many.data, 4096), 431);
	finish(&s);
	buf_release(&many);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_path_query_headers),
		cmocka_unit_test(test_no_nul),
		cmocka_unit_test(test_pipelined_and_chunked),
		cmocka_unit_test(test_ambiguous_framing),
		cmocka_unit_test(test_head_bounds),
		cmocka_unit_test(test_huge_length),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
