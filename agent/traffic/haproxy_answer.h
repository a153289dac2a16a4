/* traffic/haproxy_answer.h: haproxy's answers on its stats socket, parsed: pure
 * functions of the text (no I/O), strict and bounded, since the socket's
 * other end may be anything. traffic/haproxy_stats.c does the talking. */
#ifndef TETHER_HAPROXY_ANSWER_H
#define TETHER_HAPROXY_ANSWER_H

#include <stddef.h>

#include "traffic.h"

/* The largest answer read and parsed, and its longest line (haproxy 2.6's
 * header is about 2,000 bytes, a row about 500). */
#define HAPROXY_ANSWER_MAX (4u << 20)
#define HAPROXY_LINE_MAX 16384
#define HAPROXY_COLUMNS_MAX 1024

/* Parses the answer to `show stat` (len bytes, CSV, its header line
 * "# pxname,svname,..."; columns found by name): each BACKEND row of a
 * proxy tether_c_NAME becomes the route "cluster/NAME" with requests =
 * req_tot (when empty, the sum of hrsp_1xx..hrsp_5xx and hrsp_other),
 * errors = hrsp_5xx, and all its requests in the latency bucket of ttime
 * (haproxy's mean over its last 1,024 requests; approx set). Other rows
 * are skipped. out must be initialised; its routes are cleared first, its
 * ids and window are left alone. 0, or -1 with err (out then holds no
 * routes). */
int haproxy_answer_stat(const char *text, size_t len, struct traffic *out, char *err, size_t errlen);
/* The Pid of the answer to `show info` ("Pid: N" on a line of its own). 0,
 * or -1 with err. */
int haproxy_answer_pid(const char *text, size_t len, long *pid, char *err, size_t errlen);

#endif
