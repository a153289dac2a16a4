/* listen.h: a listening TCP socket on "HOST:PORT" or "[ADDR]:PORT" (port 0
 * picks a free one), for the plane's --listen and tetherd's
 * --metrics-listen. */
#ifndef TETHER_LISTEN_H
#define TETHER_LISTEN_H

#include <stddef.h>

/* Whether spec is HOST:PORT or [ADDR]:PORT with a port in 0..65535. */
int listen_spec_check(const char *spec);

/* Binds and listens (non-blocking, close-on-exec, SO_REUSEADDR). Returns
 * the fd, with the address it got in real ("127.0.0.1:7070",
 * "[::1]:7070"), or -1 with err (no prefix: the caller names the option). */
int listen_tcp(const char *spec, int backlog, char *real, size_t reallen, char *err, size_t errlen);

#endif
