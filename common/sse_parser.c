/* sse_parser.c: incremental WHATWG Server-Sent Events parser (see
 * sse_parser.h). */
#include "sse_parser.h"

#include <string.h>

static const unsigned char bom[3] = { 0xef, 0xbb, 0xbf };

/* buffers above this are given back after use */
#define SSE_KEEP (64u << 10)

void sse_parser_init(struct sse_parser *p, size_t max_line, size_t max_event)
{
	memset(p, 0, sizeof(*p));
	p->max_line = max_line ? max_line : SSE_DEFAULT_MAX_LINE;
	p->max_event = max_event ? max_event : SSE_DEFAULT_MAX_EVENT;
	buf_init(&p->line);
	buf_init(&p->data);
	buf_init(&p->type);
	buf_init(&p->last_id);
	p->retry_ms = -1;
}

void sse_parser_release(struct sse_parser *p)
{
	buf_release(&p->line);
	buf_release(&p->data);
	buf_release(&p->type);
	buf_release(&p->last_id);
}

void sse_parser_reset(struct sse_parser *p)
{
	buf_reset(&p->line);
	buf_reset(&p->data);
	buf_reset(&p->type);
	p->has_data = false;
	p->started = false;
	p->after_cr = false;
	p->bom_seen = 0;
}

static int dispatch(struct sse_parser *p, sse_event_cb cb, void *ctx)
{
	int rc = 0;
	if (p->has_data && p->data.len > 0) {
		/* the data buffer ends with the LF of its last line: drop it */
		p->data.len--;
		p->data.data[p->data.len] = '\0';
		struct sse_event ev = {
			.type = p->type.len ? p->type.data : "message",
			.data = p->data.data,
			.data_len = p->data.len,
			.last_id = p->last_id.len ? p->last_id.data : "",
		};
		rc = cb(ctx, &ev);
	}
	buf_shrink(&p->data, SSE_KEEP);
	buf_reset(&p->type);
	p->has_data = false;
	return rc;
}

static bool all_digits(const char *s, size_t n)
{
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

/* One complete line (without its end). */
static int process_line(struct sse_parser *p, sse_event_cb cb, void *ctx)
{
	const char *l = p->line.data ? p->line.data : "";
	size_t n = p->line.len;
	if (n == 0)
		return dispatch(p, cb, ctx);
	if (l[0] == ':')
		return 0;   /* a comment */
	const char *colon = memchr(l, ':', n);
	size_t flen = colon ? (size_t)(colon - l) : n;
	const char *val = colon ? colon + 1 : l + n;
	size_t vlen = colon ? n - flen - 1 : 0;
	if (vlen > 0 && val[0] == ' ') {
		val++;
		vlen--;
	}
	if (flen == 4 && memcmp(l, "data", 4) == 0) {
		if (p->data.len + vlen + 1 > p->max_event)
			return -1;
		buf_append(&p->data, val, vlen);
		buf_putc(&p->data, '\n');
		p->has_data = true;
	} else if (flen == 5 && memcmp(l, "event", 5) == 0) {
		buf_reset(&p->type);
		buf_append(&p->type, val, vlen);
	} else if (flen == 2 && memcmp(l, "id", 2) == 0) {
		if (!memchr(val, '\0', vlen)) {
			buf_reset(&p->last_id);
			buf_append(&p->last_id, val, vlen);
		}
	} else if (flen == 5 && memcmp(l, "retry", 5) == 0) {
		if (all_digits(val, vlen)) {
			int64_t ms = 0;
			for (size_t i = 0; i < vlen; i++) {
				if (ms > (INT64_MAX - 9) / 10) {
					ms = INT64_MAX;
					break;
				}
				ms = ms * 10 + (val[i] - '0');
			}
			p->retry_ms = ms;
		}
	}
	/* any other field is ignored */
	return 0;
}

int sse_parser_feed(struct sse_parser *p, const char *bytes, size_t len, sse_event_cb cb, void *ctx)
{
	size_t i = 0;
	/* a UTF-8 BOM at the very start of the stream, possibly split */
	while (!p->started && i < len) {
		if ((unsigned char)bytes[i] == bom[p->bom_seen]) {
			p->bom_seen++;
			i++;
			if (p->bom_seen == 3)
				p->started = true;
			continue;
		}
		/* not a BOM after all: the bytes matched so far are line bytes */
		p->started = true;
		if (p->bom_seen) {
			buf_append(&p->line, bom, p->bom_seen);
			p->bom_seen = 0;
		}
	}
	while (i < len) {
		char c = bytes[i];
		if (p->after_cr) {
			p->after_cr = false;
			if (c == '\n') {
				i++;
				continue;
			}
		}
		if (c == '\r' || c == '\n') {
			p->after_cr = c == '\r';
			int rc = process_line(p, cb, ctx);
			buf_shrink(&p->line, SSE_KEEP);
			i++;
			if (rc)
				return rc;
			continue;
		}
		/* copy a run of ordinary bytes at once */
		size_t j = i;
		while (j < len && bytes[j] != '\r' && bytes[j] != '\n')
			j++;
		if (p->line.len + (j - i) > p->max_line)
			return -1;
		buf_append(&p->line, bytes + i, j - i);
		i = j;
	}
	return 0;
}
