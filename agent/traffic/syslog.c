/* traffic/syslog.c: the access log over local syslog (see
 * traffic/syslog.h): the strict parser of one datagram, the loopback-only
 * listener address, the nonblocking UDP socket and its bounded reads
 * (recvmmsg, a batch at a time, so a flood never holds the event loop). */
#include "traffic/syslog.h"
#include "util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define TAG_MAX 48
#define HOST_MAX 64
#define GEN_MAX 71
#define ROUTE_NAME_MAX 200

/* ---- the parser ------------------------------------------------------------------ */

static inline bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* [A-Za-z0-9._-] */
static inline bool is_name(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '.' || c == '_' || c == '-';
}

/* The length of the run of name characters (and '/' when slash) at p. */
static size_t name_run(const char *p, const char *end, bool slash)
{
	const char *s = p;
	while (p < end && (is_name(*p) || (slash && *p == '/')))
		p++;
	return (size_t)(p - s);
}

/* "<PRI>", PRI a facility and severity: 0 .. 191. */
static const char *pri(const char *p, const char *end)
{
	if (p >= end || *p++ != '<')
		return NULL;
	unsigned v = 0, n = 0;
	while (p < end && is_digit(*p) && n < 3) {
		v = v * 10 + (unsigned)(*p++ - '0');
		n++;
	}
	if (n == 0 || v > 191 || p >= end || *p != '>')
		return NULL;
	return p + 1;
}

/* "Mmm dd hh:mm:ss " (RFC 3164: the day padded with a space). */
static const char *timestamp(const char *p, const char *end)
{
	static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
	if (end - p < 16)
		return NULL;
	bool month = false;
	for (int m = 0; m < 12 && !month; m++)
		month = memcmp(p, months + 3 * m, 3) == 0;
	if (!month || p[3] != ' ' || !(p[4] == ' ' || (p[4] >= '1' && p[4] <= '3')) || !is_digit(p[5]) ||
	    p[6] != ' ' || !is_digit(p[7]) || !is_digit(p[8]) || p[9] != ':' || !is_digit(p[10]) ||
	    !is_digit(p[11]) || p[12] != ':' || !is_digit(p[13]) || !is_digit(p[14]) || p[15] != ' ')
		return NULL;
	return p + 16;
}

/* "[HOST ]TAG[[PID]]: " */
static const char *tag(const char *p, const char *end)
{
	size_t n = name_run(p, end, true);
	if (n > 0 && n <= HOST_MAX && p + n < end && p[n] == ' ') {
		p += n + 1;   /* a host name */
		n = name_run(p, end, true);
	}
	if (n == 0 || n > TAG_MAX)
		return NULL;
	p += n;
	if (p < end && *p == '[') {
		size_t d = 0;
		for (p++; p < end && is_digit(*p) && d <= 10; p++)
			d++;
		if (d == 0 || d > 10 || p >= end || *p++ != ']')
			return NULL;
	}
	if (end - p < 2 || p[0] != ':' || p[1] != ' ')
		return NULL;
	return p + 2;
}

/* "0.003s" or "3ms": up to 9 digits, a fraction of up to 6. */
static const char *latency(const char *p, const char *end, double *ms)
{
	uint64_t whole = 0, frac = 0, scale = 1;
	size_t n = 0;
	while (p < end && is_digit(*p) && n < 10) {
		whole = whole * 10 + (uint64_t)(*p++ - '0');
		n++;
	}
	if (n == 0 || n > 9)
		return NULL;
	if (p < end && *p == '.') {
		n = 0;
		for (p++; p < end && is_digit(*p) && n < 7; p++, n++) {
			frac = frac * 10 + (uint64_t)(*p - '0');
			scale *= 10;
		}
		if (n == 0 || n > 6)
			return NULL;
	}
	double v = (double)whole + (double)frac / (double)scale;
	if (end - p >= 2 && p[0] == 'm' && p[1] == 's') {
		*ms = v;
		return p + 2;
	}
	if (p < end && *p == 's') {
		*ms = v * 1000.0;
		return p + 1;
	}
	return NULL;
}

int tsl_parse(const char *p, size_t len, struct tsl_line *out)
{
	if (len > TRAFFIC_SYSLOG_MAX)
		return -1;
	const char *end = p + len;
	if (len && end[-1] == '\n')
		end--;   /* haproxy ends its line */
	if (!(p = pri(p, end)) || !(p = timestamp(p, end)) || !(p = tag(p, end)))
		return -1;
	if (end - p < 8 || memcmp(p, "tether1 ", 8) != 0)
		return -1;
	p += 8;
	size_t n = name_run(p, end, false);
	if (n == 0 || n > GEN_MAX || p + n >= end || p[n] != ' ')
		return -1;
	out->gen = p;
	out->gen_len = n;
	p += n + 1;
	if (end - p < 4 || !is_digit(p[0]) || !is_digit(p[1]) || !is_digit(p[2]) || p[3] != ' ')
		return -1;
	out->status = (unsigned)(p[0] - '0') * 100 + (unsigned)(p[1] - '0') * 10 + (unsigned)(p[2] - '0');
	if (out->status < 100 || out->status > 599)
		return -1;
	p += 4;
	if (!(p = latency(p, end, &out->ms)) || p >= end || *p++ != ' ')
		return -1;
	out->route = p;
	if (end - p == 1 && *p == '-') {
		out->route_len = 1;
		return 0;
	}
	if (end - p < 7 || memcmp(p, "route/", 6) != 0)
		return -1;
	n = name_run(p + 6, end, false);
	if (n == 0 || n > ROUTE_NAME_MAX || p + 6 + n != end)
		return -1;
	out->route_len = 6 + n;
	return 0;
}

/* ---- the listener ------------------------------------------------------------------ */

int tsl_addr(const char *spec, struct sockaddr_storage *sa, socklen_t *salen, char *err, size_t errlen)
{
	char host[64];
	const char *port;
	memset(sa, 0, sizeof(*sa));
	if (spec[0] == '[') {
		const char *close = strstr(spec, "]:");
		if (!close || (size_t)(close - spec - 1) >= sizeof(host)) {
			snprintf(err, errlen, "'%s' is not ADDR:PORT ([::1]:PORT for IPv6)", spec);
			return -1;
		}
		snprintf(host, sizeof(host), "%.*s", (int)(close - spec - 1), spec + 1);
		port = close + 2;
	} else {
		const char *colon = strrchr(spec, ':');
		if (!colon || (size_t)(colon - spec) >= sizeof(host)) {
			snprintf(err, errlen, "'%s' is not ADDR:PORT ([::1]:PORT for IPv6)", spec);
			return -1;
		}
		snprintf(host, sizeof(host), "%.*s", (int)(colon - spec), spec);
		port = colon + 1;
	}
	uint64_t pn;
	if (parse_uint_range(port, 1, 65535, &pn) < 0) {
		snprintf(err, errlen, "'%s': the port must be a number in 1..65535", spec);
		return -1;
	}
	struct sockaddr_in *in = (struct sockaddr_in *)sa;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)sa;
	bool v6 = spec[0] == '[';
	if (v6 ? inet_pton(AF_INET6, host, &in6->sin6_addr) != 1 : inet_pton(AF_INET, host, &in->sin_addr) != 1) {
		snprintf(err, errlen, "'%s': the address must be numeric: in 127.0.0.0/8, or [::1] for IPv6", spec);
		return -1;
	}
	if (v6 ? !IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) : (ntohl(in->sin_addr.s_addr) >> 24) != 127) {
		snprintf(err, errlen, "'%s' is not a loopback address: only 127.0.0.0/8 or [::1] (the access log must "
			 "not leave the host)", spec);
		return -1;
	}
	if (v6) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)pn);
		*salen = sizeof(*in6);
	} else {
		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)pn);
		*salen = sizeof(*in);
	}
	return 0;
}

int tsl_open_at(const struct sockaddr *sa, socklen_t len, const char *label, char *err, size_t errlen)
{
	int fd = socket(sa->sa_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "cannot make a UDP socket: %s", strerror(errno));
		return -1;
	}
	/* room for the datagrams between two batches (past net.core.rmem_max
	 * where allowed) */
	int rcv = 4 << 20;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcv, sizeof(rcv)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
	if (bind(fd, sa, len) < 0) {
		snprintf(err, errlen, "cannot bind UDP %s: %s", label, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

int tsl_open(const char *spec, char *err, size_t errlen)
{
	struct sockaddr_storage sa;
	socklen_t len;
	if (tsl_addr(spec, &sa, &len, err, errlen) < 0)
		return -1;
	return tsl_open_at((struct sockaddr *)&sa, len, spec, err, errlen);
}

#define CHUNK 32

size_t tsl_drain(int fd, size_t max, tsl_fn fn, void *ctx)
{
	static char bufs[CHUNK][TRAFFIC_SYSLOG_MAX + 1];
	struct mmsghdr msgs[CHUNK];
	struct iovec iov[CHUNK];
	size_t total = 0;
	while (total < max) {
		unsigned want = max - total < CHUNK ? (unsigned)(max - total) : CHUNK;
		memset(msgs, 0, want * sizeof(msgs[0]));
		for (unsigned i = 0; i < want; i++) {
			iov[i].iov_base = bufs[i];
			iov[i].iov_len = sizeof(bufs[i]);
			msgs[i].msg_hdr.msg_iov = &iov[i];
			msgs[i].msg_hdr.msg_iovlen = 1;
		}
		int n = recvmmsg(fd, msgs, want, MSG_DONTWAIT, NULL);
		if (n <= 0)
			break;
		for (int i = 0; i < n; i++) {
			size_t len = msgs[i].msg_len;
			if (msgs[i].msg_hdr.msg_flags & MSG_TRUNC)
				len = TRAFFIC_SYSLOG_MAX + 2;   /* more than fits: too long */
			fn(ctx, bufs[i], len);
		}
		total += (size_t)n;
		if ((unsigned)n < want)
			break;
	}
	return total;
}
