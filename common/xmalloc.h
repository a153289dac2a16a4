/* xmalloc.h: allocation that never returns NULL; out of memory is fatal.
 * Daemons bound every input size themselves, so OOM here means a bug or a
 * host in trouble, and dying loudly is better than limping on. */
#ifndef TETHER_XMALLOC_H
#define TETHER_XMALLOC_H

#include <stddef.h>

void *xmalloc(size_t n);
void *xcalloc(size_t nmemb, size_t size);
void *xrealloc(void *p, size_t n);
/* Returns a new allocated copy of s (or of its first n bytes, NUL-terminated). */
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
/* A usually-empty string kept on the heap: *dst becomes a copy of src cut
 * to cap - 1 bytes, or NULL when src is NULL or "" (an empty one costs
 * nothing); the old *dst is freed after the copy (src may be *dst). */
void xstr_set(char **dst, const char *src, size_t cap);
/* Returns a new allocated string built like printf. */
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
