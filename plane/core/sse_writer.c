/* core/sse_writer.c: Server-Sent Events framing (see sse_writer.h). */
#include "core/sse_writer.h"

#include <string.h>

void sse_write_event(struct buf *out, const char *event, const char *id, const char *data, size_t len)
{
	if (event) {
		buf_puts(out, "event: ");
		buf_puts(out, event);
		buf_putc(out, '\n');
	}
	if (id) {
		buf_puts(out, "id: ");
		buf_puts(out, id);
		buf_putc(out, '\n');
	}
	/* every line of data gets its own field; CR, LF and CRLF all end lines */
	size_t start = 0;
	for (size_t i = 0; i <= len; i++) {
		if (i == len || data[i] == '\n' || data[i] == '\r') {
			buf_puts(out, "data: ");
			buf_append(out, data + start, i - start);
			buf_putc(out, '\n');
			if (i < len && data[i] == '\r' && i + 1 < len && data[i + 1] == '\n')
				i++;
			start = i + 1;
		}
	}
	buf_putc(out, '\n');
}

void sse_write_retry(struct buf *out, unsigned ms)
{
	buf_printf(out, "retry: %u\n\n", ms);
}

void sse_write_comment(struct buf *out, const char *text)
{
	buf_puts(out, ": ");
	for (const char *p = text; *p; p++)
		buf_putc(out, (*p == '\n' || *p == '\r') ? ' ' : *p);
	buf_putc(out, '\n');
}
