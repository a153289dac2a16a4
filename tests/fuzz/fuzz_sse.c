/* fuzz_sse.c: libFuzzer target for common/sse_parser.c. The first two bytes
 * seed split points; the rest is the stream. Property: the events are the
 * same whether the stream is fed whole, byte by byte, or in random pieces
 * (CR|LF and BOM splits included), and every event respects the bounds. */
#include "fuzz.h"
#include "buf.h"
#include "sse_parser.h"

#include <stdlib.h>
#include <string.h>

struct log {
	struct buf b;
	size_t events;
};

static int record(void *ctx, const struct sse_event *ev)
{
	struct log *l = ctx;
	/* type, id and data, length-prefixed so no two sequences collide */
	size_t lens[3] = { strlen(ev->type), strlen(ev->last_id), ev->data_len };
	buf_append(&l->b, lens, sizeof(lens));
	buf_append(&l->b, ev->type, lens[0]);
	buf_append(&l->b, ev->last_id, lens[1]);
	buf_append(&l->b, ev->data, lens[2]);
	if (ev->data_len > 4096)
		abort();   /* over max_event: the parser should have refused */
	l->events++;
	return 0;
}

/* Feeds data in pieces cut by step(); returns the parser's result. */
static int run(const uint8_t *data, size_t size, unsigned seed, int mode, struct log *l, int64_t *retry)
{
	struct sse_parser p;
	sse_parser_init(&p, 1024, 4096);
	int rc = 0;
	size_t off = 0;
	while (off < size && rc == 0) {
		size_t n;
		if (mode == 0)
			n = size - off;
		else if (mode == 1)
			n = 1;
		else {
			seed = seed * 1103515245u + 12345u;
			n = 1 + (seed >> 16) % 7;
			if (n > size - off)
				n = size - off;
		}
		rc = sse_parser_feed(&p, (const char *)data + off, n, record, l);
		off += n;
	}
	*retry = p.retry_ms;
	sse_parser_release(&p);
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	unsigned seed = (unsigned)data[0] << 8 | data[1];
	data += 2;
	size -= 2;
	struct log logs[3];
	int rcs[3];
	int64_t retry[3];
	for (int m = 0; m < 3; m++) {
		buf_init(&logs[m].b);
		logs[m].events = 0;
		rcs[m] = run(data, size, seed, m, &logs[m], &retry[m]);
	}
	/* a bound hit stops the stream: compare only when none was hit */
	if (rcs[0] == 0 && rcs[1] == 0 && rcs[2] == 0) {
		for (int m = 1; m < 3; m++) {
			if (logs[m].events != logs[0].events || logs[m].b.len != logs[0].b.len ||
			    (logs[0].b.len && memcmp(logs[m].b.data, logs[0].b.data, logs[0].b.len) != 0) ||
			    retry[m] != retry[0])
				abort();
		}
	}
	for (int m = 0; m < 3; m++)
		buf_release(&logs[m].b);
	return 0;
}
