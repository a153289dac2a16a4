/* haproxy_cli.c: one command on haproxy's CLI over its unix socket (see
 * haproxy_cli.h): a nonblocking connect, send and read, each wait bounded
 * by the caller's deadline. Moved here from agent/traffic/haproxy_stats.c
 * so that the traffic counters and the runtime updates share one client. */
#include "haproxy_cli.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

double haproxy_cli_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Waits for events on fd until the deadline: 1 ready, 0 timed out, -1 error. */
static int wait_fd(int fd, short events, double deadline)
{
	for (;;) {
		double left = deadline - haproxy_cli_now();
		if (left <= 0)
			return 0;
		struct pollfd p = { .fd = fd, .events = events };
		int ms = (int)(left * 1000) + 1;
		int rc = poll(&p, 1, ms);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc < 0)
			return -1;
		if (rc == 0)
			continue; /* the loop checks the deadline */
		return 1;
	}
}

int haproxy_cli_ask(const char *path, const char *cmd, double deadline, size_t max, struct buf *ans, char *err,
		    size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "%s: the path is too long for a unix socket", path);
		return -1;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	int rc = -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		/* a unix socket with a full backlog says EAGAIN, and poll does
		 * not wait for it (the socket is not connecting): the second
		 * connect below then fails at once too, and the caller falls
		 * back (a reload). EINPROGRESS is waited for. */
		if (errno != EAGAIN && errno != EINPROGRESS) {
			snprintf(err, errlen, "%s: connect: %s", path, strerror(errno));
			goto out;
		}
		int w = wait_fd(fd, POLLOUT, deadline);
		int soerr = 0;
		socklen_t sl = sizeof(soerr);
		if (w <= 0) {
			snprintf(err, errlen, "%s: connect: %s", path, w == 0 ? "timed out" : strerror(errno));
			goto out;
		}
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr) {
			snprintf(err, errlen, "%s: connect: %s", path, strerror(soerr ? soerr : errno));
			goto out;
		}
		/* an AF_UNIX connect that said EAGAIN did not connect: again */
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EISCONN) {
			snprintf(err, errlen, "%s: connect: %s", path, strerror(errno));
			goto out;
		}
	}
	for (size_t off = 0, cl = strlen(cmd); off < cl;) {
		ssize_t n = send(fd, cmd + off, cl - off, MSG_NOSIGNAL);
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			int w = wait_fd(fd, POLLOUT, deadline);
			if (w <= 0) {
				snprintf(err, errlen, "%s: sending '%.*s': %s", path, (int)strcspn(cmd, "\n"), cmd,
					 w == 0 ? "timed out" : strerror(errno));
				goto out;
			}
			continue;
		}
		if (n < 0) {
			snprintf(err, errlen, "%s: send: %s", path, strerror(errno));
			goto out;
		}
		off += (size_t)n;
	}
	char chunk[16384];
	for (;;) {
		ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
		if (n == 0)
			break;
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			int w = wait_fd(fd, POLLIN, deadline);
			if (w <= 0) {
				snprintf(err, errlen, "%s: the answer to '%.*s': %s", path, (int)strcspn(cmd, "\n"),
					 cmd, w == 0 ? "timed out" : strerror(errno));
				goto out;
			}
			continue;
		}
		if (n < 0) {
			snprintf(err, errlen, "%s: recv: %s", path, strerror(errno));
			goto out;
		}
		if (ans->len + (size_t)n > max) {
			snprintf(err, errlen, "%s: the answer to '%.*s' is longer than %zu bytes", path,
				 (int)strcspn(cmd, "\n"), cmd, max);
			goto out;
		}
		buf_append(ans, chunk, (size_t)n);
	}
	rc = 0;
out:
	close(fd);
	return rc;
}
