/* traffic/haproxy_stats.c: talks to haproxy's stats socket (see
 * traffic/haproxy_stats.h): one connection per command (haproxy closes after
 * one command when not in prompt mode), nonblocking, every step under one
 * deadline so a dead or stuck haproxy costs at most the timeout; answers are
 * read up to HAPROXY_ANSWER_MAX and parsed by traffic/haproxy_answer.c (a
 * failed read leaves out without routes and with an empty gen). Also finds
 * whether the operator's base configuration declares the socket already. */
#include "traffic/haproxy_stats.h"
#include "buf.h"
#include "traffic/haproxy_answer.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static double mono_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Waits for events on fd until the deadline: 1 ready, 0 timed out, -1 error. */
static int wait_fd(int fd, short events, double deadline)
{
	for (;;) {
		double left = deadline - mono_now();
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

/* Sends cmd to the socket at path and reads the answer until haproxy
 * closes, into ans. 0, or -1 with err. */
static int ask(const char *path, const char *cmd, double deadline, struct buf *ans, char *err, size_t errlen)
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
		/* a unix socket with a full backlog says EAGAIN; wait for it */
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
		if (ans->len + (size_t)n > HAPROXY_ANSWER_MAX) {
			snprintf(err, errlen, "%s: the answer to '%.*s' is longer than %u bytes", path,
				 (int)strcspn(cmd, "\n"), cmd, HAPROXY_ANSWER_MAX);
			goto out;
		}
		buf_append(ans, chunk, (size_t)n);
	}
	rc = 0;
out:
	close(fd);
	return rc;
}

static int ask_pid(const char *path, double deadline, long *pid, char *err, size_t errlen)
{
	struct buf ans = BUF_INIT;
	int rc = ask(path, "show info\n", deadline, &ans, err, errlen);
	if (rc == 0)
		rc = haproxy_answer_pid(ans.data ? ans.data : "", ans.len, pid, err, errlen);
	buf_release(&ans);
	return rc;
}

int haproxy_stats_read(const char *path, double timeout_s, struct traffic *out, char *err, size_t errlen)
{
	double deadline = mono_now() + (timeout_s > 0 ? timeout_s : 0);
	long pid, pid2;
	struct buf ans = BUF_INIT;
	int rc = -1;
	traffic_clear(out);
	if (ask_pid(path, deadline, &pid, err, errlen) < 0 || ask(path, "show stat\n", deadline, &ans, err, errlen) < 0)
		goto out;
	if (haproxy_answer_stat(ans.data ? ans.data : "", ans.len, out, err, errlen) < 0)
		goto out;
	/* a reload between the commands: the counters may be either worker's */
	if (ask_pid(path, deadline, &pid2, err, errlen) < 0)
		goto out;
	if (pid2 != pid) {
		snprintf(err, errlen, "%s: haproxy reloaded while it was read (worker %ld, then %ld)", path, pid, pid2);
		goto out;
	}
	snprintf(out->gen, sizeof(out->gen), "pid%ld", pid);
	rc = 0;
out:
	if (rc < 0) {
		traffic_clear(out);
		out->gen[0] = '\0';
	}
	buf_release(&ans);
	return rc;
}

/* The next word of a configuration line: white space separates, '#'
 * outside quotes starts a comment, "..." and '...' quote, '\' escapes one
 * character (haproxy's rules). Returns false at the line's end. */
static bool word(const char **p, char *out, size_t cap)
{
	const char *s = *p;
	while (*s == ' ' || *s == '\t')
		s++;
	if (!*s || *s == '#' || *s == '\n' || *s == '\r')
		return false;
	size_t o = 0;
	char q = 0;
	for (; *s && *s != '\n' && *s != '\r'; s++) {
		if (!q && (*s == ' ' || *s == '\t' || *s == '#'))
			break;
		if (*s == '\\' && s[1] && s[1] != '\n' && q != '\'') {
			s++;
		} else if (!q && (*s == '"' || *s == '\'')) {
			q = *s;
			continue;
		} else if (q && *s == q) {
			q = 0;
			continue;
		}
		if (o + 1 < cap)
			out[o++] = *s;
	}
	out[o] = '\0';
	*p = s;
	return true;
}

bool haproxy_stats_declared(const char *base_cfg, const char *path)
{
	FILE *f = base_cfg ? fopen(base_cfg, "r") : NULL;
	if (!f)
		return false;
	char line[4096], w[3][4096];
	bool found = false;
	while (!found && fgets(line, sizeof(line), f)) {
		const char *p = line;
		int n = 0;
		while (n < 3 && word(&p, w[n], sizeof(w[n])))
			n++;
		if (n < 3 || strcmp(w[0], "stats") != 0 || strcmp(w[1], "socket") != 0)
			continue;
		/* "unix@PATH" is the same socket */
		const char *sp = strncmp(w[2], "unix@", 5) == 0 ? w[2] + 5 : w[2];
		found = strcmp(sp, path) == 0;
	}
	fclose(f);
	return found;
}
