/* fuzz_http.c: libFuzzer target for the plane's request reader
 * (plane/net/http_request.c over http-parser): any bytes, fed in pieces of
 * the input's own choosing, as a connection feeds them, requests after
 * requests (pipelined). Checks: the head never outgrows its bound; a
 * request's path, method and headers read back as C strings; the body
 * handed on never exceeds an announced Content-Length; a request whose
 * framing is ambiguous (two Content-Lengths, or one with
 * Transfer-Encoding) never reaches its end. */
#include "fuzz.h"
#include "net/http_request.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_HEAD 2048

struct seen {
	struct http_request *r;
	bool head, pause_on_head;
	int64_t clen;
	uint64_t body;
	unsigned ends;
};

static void begin(void *owner)
{
	struct seen *s = owner;
	s->head = false;
	s->body = 0;
}

static void head(void *owner)
{
	struct seen *s = owner;
	struct http_request *r = s->r;
	s->head = true;
	if (r->arena.len > MAX_HEAD)
		abort();
	(void)strlen(http_request_path(r));
	(void)strlen(http_request_method(r));
	const char *te = http_request_header(r, "Transfer-Encoding");
	s->clen = http_request_content_length(r);
	unsigned cls = 0;
	for (unsigned i = 0; i < r->nh; i++)
		if (strcasecmp(r->arena.data + r->h[i].name, "Content-Length") == 0)
			cls++;
	if (cls > 1 || (cls && te))
		abort();   /* ambiguous framing got through */
	(void)http_request_query(r, "node");
	if (s->pause_on_head)
		http_request_pause(r);   /* a refusal on the headers */
}

static void body(void *owner, const char *data, size_t len)
{
	struct seen *s = owner;
	(void)data;
	s->body += len;
	if (s->clen >= 0 && s->body > (uint64_t)s->clen)
		abort();
}

static void end(void *owner)
{
	struct seen *s = owner;
	if (!s->head)
		abort();
	s->ends++;
}

static const struct http_request_hooks hooks = { begin, head, body, end };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	unsigned piece = data[0] ? data[0] : 1;   /* bytes per feed */
	bool pause_on_head = data[1] & 1;
	data += 2;
	size -= 2;
	struct http_request r;
	struct seen s = { .r = &r, .pause_on_head = pause_on_head };
	http_request_init(&r, &hooks, &s, MAX_HEAD);
	size_t off = 0;
	unsigned turns = 0;
	while (off < size && turns++ < 4096) {
		size_t len = size - off < piece ? size - off : piece;
		unsigned status;
		const char *msg;
		unsigned ends = s.ends;
		size_t n = http_request_feed(&r, (const char *)data + off, len, &status, &msg);
		if (n > len)
			abort();
		if (status) {
			if ((status != 400 && status != 431) || !msg)
				abort();
			break;   /* the connection closes */
		}
		off += n;
		if (s.ends != ends)
			http_request_reset(&r);   /* the next request on the connection */
	}
	http_request_free(&r);
	return 0;
}
