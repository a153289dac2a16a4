/* traffic/syslog.h: the access log lines nginx (and haproxy) send the
 * agent over local syslog (docs/gates.md): the strict line parser (a pure
 * function, fuzzed), the listener's address (loopback only) and its
 * nonblocking UDP socket, read a bounded batch at a time. */
#ifndef TETHER_TRAFFIC_SYSLOG_H
#define TETHER_TRAFFIC_SYSLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* The longest datagram counted; a longer one is dropped (too_long). */
#define TRAFFIC_SYSLOG_MAX 2048
/* The most datagrams read in one turn of the event loop. */
#define TRAFFIC_SYSLOG_BATCH 512
/* Datagrams are read every this many ms, not at each one's arrival (every
 * TRAFFIC_READ_BUSY_MS after a batch of TRAFFIC_READ_BUSY or more, at once
 * after a full one): a wake-up costs far more than counting a request. */
#define TRAFFIC_READ_EVERY_MS 100
#define TRAFFIC_READ_BUSY_MS 20
#define TRAFFIC_READ_BUSY 128

/* One request, as a line says it. gen and route point into the datagram. */
struct tsl_line {
	const char *gen;
	size_t gen_len;          /* 1 .. 71 */
	unsigned status;         /* 100 .. 599 */
	double ms;               /* latency */
	const char *route;       /* "route/NAME" or "-" */
	size_t route_len;
};

/* Parses one datagram of len bytes:
 *   <PRI>Mmm dd hh:mm:ss [HOST ]TAG[[PID]]: tether1 GEN STATUS LATENCY ROUTE[\n]
 * 0 with *out filled, or -1 when it is not exactly that. */
int tsl_parse(const char *p, size_t len, struct tsl_line *out);

/* Parses "127.0.0.1:PORT" or "[::1]:PORT" (a numeric loopback address:
 * 127.0.0.0/8 or ::1; port 1..65535) into sa. 0, or -1 with err. */
int tsl_addr(const char *spec, struct sockaddr_storage *sa, socklen_t *salen, char *err, size_t errlen);

/* Binds a nonblocking, close-on-exec UDP socket on spec. The fd, or -1
 * with err. */
int tsl_open(const char *spec, char *err, size_t errlen);
/* The same on an address already parsed (label names it in err): 127.0.0.1
 * port 0 is how traffic/auto.c has the kernel pick a free port. */
int tsl_open_at(const struct sockaddr *sa, socklen_t len, const char *label, char *err, size_t errlen);

/* Called with each datagram read: its bytes and its real length (more than
 * TRAFFIC_SYSLOG_MAX when it was too long: then only the first
 * TRAFFIC_SYSLOG_MAX + 1 bytes are there). */
typedef void (*tsl_fn)(void *ctx, const char *data, size_t len);
/* Reads what waits on fd, at most max datagrams, never blocking; returns
 * how many were read. */
size_t tsl_drain(int fd, size_t max, tsl_fn fn, void *ctx);

#endif
