/* listen.c: listening sockets from "HOST:PORT" (see listen.h): one parser
 * and one bind for the plane and the agent. */
#include "listen.h"
#include "util.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Splits spec into host (hostlen bytes; "" for none) and its port text. */
static int split(const char *spec, char *host, size_t hostlen, const char **port)
{
	const char *h = spec, *hend, *colon;
	if (spec[0] == '[') {
		const char *close = strchr(spec, ']');
		if (!close || close[1] != ':')
			return -1;
		h = spec + 1;
		hend = close;
		colon = close + 1;
	} else {
		colon = strrchr(spec, ':');
		if (!colon)
			return -1;
		hend = colon;
	}
	uint64_t p;
	if ((size_t)(hend - h) >= hostlen || parse_uint_range(colon + 1, 0, 65535, &p) < 0)
		return -1;
	memcpy(host, h, (size_t)(hend - h));
	host[hend - h] = '\0';
	*port = colon + 1;
	return 0;
}

int listen_spec_check(const char *spec)
{
	char host[256];
	const char *port;
	return split(spec, host, sizeof(host), &port);
}

int listen_tcp(const char *spec, int backlog, char *real, size_t reallen, char *err, size_t errlen)
{
	char host[256];
	const char *port;
	if (split(spec, host, sizeof(host), &port) < 0) {
		snprintf(err, errlen, "'%s' is not HOST:PORT ([ADDR]:PORT for IPv6)", spec);
		return -1;
	}
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV }, *res;
	int gai = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
	if (gai) {
		snprintf(err, errlen, "cannot resolve '%s': %s", host, gai_strerror(gai));
		return -1;
	}
	int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int one = 1;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, backlog) < 0) {
		snprintf(err, errlen, "cannot listen on '%s': %s", spec, strerror(errno));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(res);
		return -1;
	}
	freeaddrinfo(res);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char h[NI_MAXHOST], s[NI_MAXSERV];
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0 &&
	    getnameinfo((struct sockaddr *)&ss, sl, h, sizeof(h), s, sizeof(s), NI_NUMERICHOST | NI_NUMERICSERV) == 0)
		snprintf(real, reallen, ss.ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s", h, s);
	else
		snprintf(real, reallen, "%s", spec);
	return fd;
}
