/* core/sse_writer.h: Server-Sent Events framing (WHATWG HTML 9.2). Data with
 * line breaks becomes several data: lines; ids and event names must not
 * hold line breaks (callers pass fixed names and numbers). */
#ifndef TETHER_SSE_WRITER_H
#define TETHER_SSE_WRITER_H

#include <stddef.h>

#include "buf.h"

/* Appends one event: optional "event:" and "id:" lines, the data lines and
 * the blank line that dispatches it. */
void sse_write_event(struct buf *out, const char *event, const char *id, const char *data, size_t len);
/* Appends "retry: ms" and a blank line (a dispatch with no data, which
 * clients ignore). */
void sse_write_retry(struct buf *out, unsigned ms);
/* Appends a comment line (": text"), which keeps proxies from idling out. */
void sse_write_comment(struct buf *out, const char *text);

#endif
