/* sse_parser.h: an incremental Server-Sent Events parser that follows the
 * WHATWG rules (HTML 9.2.6): a leading BOM is dropped; CR, LF and CRLF end
 * lines (a CRLF split across two feeds is one line end); lines starting with
 * ':' are comments; "name: value" loses one leading space; data lines join
 * with LF; "retry" counts only when all ASCII digits; an "id" holding NUL is
 * ignored; a blank line dispatches (nothing when data is empty). A partial
 * event at the end of the stream is never dispatched: callers drop the
 * parser. The same bytes give the same events however they are split.
 * Lines and events are bounded; past a bound feed() fails and the caller
 * closes the stream. */
#ifndef TETHER_SSE_PARSER_H
#define TETHER_SSE_PARSER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define SSE_DEFAULT_MAX_LINE (1u << 20)
#define SSE_DEFAULT_MAX_EVENT (16u << 20)

struct sse_event {
	const char *type;       /* "message" when the event named none */
	const char *data;       /* NUL-terminated, data_len bytes */
	size_t data_len;
	const char *last_id;    /* the last event ID so far ("" when none) */
};

/* Returns 0 to go on, non-zero to stop feeding (sse_parser_feed returns it). */
typedef int (*sse_event_cb)(void *ctx, const struct sse_event *ev);

struct sse_parser {
	size_t max_line, max_event;
	struct buf line;        /* the line being read */
	struct buf data;        /* data of the event being read */
	struct buf type;        /* its event type */
	struct buf last_id;     /* persists across events */
	int64_t retry_ms;       /* -1 until the server sent a valid retry */
	bool started;           /* past the optional BOM */
	bool after_cr;          /* the last byte was CR: a following LF is part of it */
	unsigned bom_seen;      /* bytes of a BOM matched so far */
	bool has_data;          /* a data field was seen (even empty) */
};

void sse_parser_init(struct sse_parser *p, size_t max_line, size_t max_event);
void sse_parser_release(struct sse_parser *p);
/* Forgets any partial event and the BOM state, keeps last_id and retry:
 * for a new connection. */
void sse_parser_reset(struct sse_parser *p);
/* Feeds bytes. Returns 0; the callback's non-zero value; or -1 when a line
 * or an event exceeded its bound. */
int sse_parser_feed(struct sse_parser *p, const char *bytes, size_t len, sse_event_cb cb, void *ctx);

#endif
