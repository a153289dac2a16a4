/* buf.h: a growable byte buffer, always NUL-terminated after its data.
 * The buffer owns its memory; buf_detach hands it to the caller. */
#ifndef TETHER_BUF_H
#define TETHER_BUF_H

#include <stddef.h>

struct buf {
	char *data;
	size_t len;
	size_t cap;
};

#define BUF_INIT { NULL, 0, 0 }

void buf_init(struct buf *b);
void buf_release(struct buf *b);
void buf_reset(struct buf *b);
void buf_reserve(struct buf *b, size_t extra);
void buf_append(struct buf *b, const void *data, size_t len);
void buf_puts(struct buf *b, const char *s);
void buf_putc(struct buf *b, char c);
void buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s as a JSON string literal, quotes included. */
void buf_json_string(struct buf *b, const char *s);
/* Empties b; gives its memory back when it holds more than keep bytes
 * (one large message must not pin its buffer for the process's life). */
void buf_shrink(struct buf *b, size_t keep);
/* Returns the data (caller frees) and leaves b empty. */
char *buf_detach(struct buf *b, size_t *len);

#endif
