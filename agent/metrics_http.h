/* metrics_http.h: --metrics-listen, a minimal HTTP/1.0 server for GET
 * /metrics inside tetherd's event loop (no thread, no library): a few
 * clients at a time, each with a small request cap and a deadline. */
#ifndef TETHER_METRICS_HTTP_H
#define TETHER_METRICS_HTTP_H

#include <curl/curl.h>
#include <stddef.h>

struct agent;

/* Binds and listens on a->cfg.metrics_listen. 0, or -1 with err. */
int metrics_http_open(struct agent *a, char *err, size_t errlen);
/* Adds the descriptors to wait on to fds (room for max); returns how many. */
unsigned metrics_http_fds(struct curl_waitfd *fds, unsigned max);
/* Accepts, reads, answers and closes what is ready; never blocks. Lowers
 * *wake_ms to the next client deadline. */
void metrics_http_service(struct agent *a, int64_t *wake_ms);
void metrics_http_close(void);

#endif
