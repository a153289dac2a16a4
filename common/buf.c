/* buf.c: growable byte buffer (see buf.h). */
#include "buf.h"
#include "xmalloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void buf_init(struct buf *b)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
}

void buf_release(struct buf *b)
{
	free(b->data);
	buf_init(b);
}

void buf_reset(struct buf *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

void buf_reserve(struct buf *b, size_t extra)
{
	size_t need = b->len + extra + 1;
	if (need <= b->cap)
		return;
	size_t cap = b->cap ? b->cap : 64;
	while (cap < need)
		cap *= 2;
	b->data = xrealloc(b->data, cap);
	b->cap = cap;
	b->data[b->len] = '\0';   /* a fresh buffer is "" too (buf_detach) */
}

void buf_shrink(struct buf *b, size_t keep)
{
	if (b->cap > keep)
		buf_release(b);
	else
		buf_reset(b);
}

void buf_append(struct buf *b, const void *data, size_t len)
{
	buf_reserve(b, len);
	if (len)
		memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
}

void buf_puts(struct buf *b, const char *s)
{
	buf_append(b, s, strlen(s));
}

void buf_putc(struct buf *b, char c)
{
	buf_append(b, &c, 1);
}

void buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n <= 0)
		return;
	buf_reserve(b, (size_t)n);
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void buf_json_string(struct buf *b, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	buf_putc(b, '"');
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '"': buf_append(b, "\\\"", 2); break;
		case '\\': buf_append(b, "\\\\", 2); break;
		case '\n': buf_append(b, "\\n", 2); break;
		case '\r': buf_append(b, "\\r", 2); break;
		case '\t': buf_append(b, "\\t", 2); break;
		default:
			if (*p < 0x20) {
				char esc[6] = { '\\', 'u', '0', '0', hex[*p >> 4], hex[*p & 15] };
				buf_append(b, esc, 6);
			} else {
				buf_putc(b, (char)*p);
			}
		}
	}
	buf_putc(b, '"');
}

char *buf_detach(struct buf *b, size_t *len)
{
	if (!b->data)
		buf_reserve(b, 0);
	char *d = b->data;
	if (len)
		*len = b->len;
	buf_init(b);
	return d;
}
