/* sdnotify.c: systemd's notify protocol by hand (see sdnotify.h): one
 * AF_UNIX datagram per message to $NOTIFY_SOCKET ('@' names an abstract
 * socket), as sd_notify(3) and chrony do, without linking libsystemd. */
#include "sdnotify.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int fd = -1;
static struct sockaddr_un addr;
static socklen_t addrlen;
static int64_t watchdog_ms;
static _Atomic int64_t last_ping_ms;
static pthread_mutex_t status_lock = PTHREAD_MUTEX_INITIALIZER;
static char last_status[256];

void sdnotify_init(void)
{
	const char *path = getenv("NOTIFY_SOCKET");
	const char *usec = getenv("WATCHDOG_USEC");
	const char *pid = getenv("WATCHDOG_PID");
	if (usec) {
		char *end;
		errno = 0;
		unsigned long long us = strtoull(usec, &end, 10);
		unsigned long long p = pid ? strtoull(pid, NULL, 10) : 0;
		/* WATCHDOG_PID names the process the watchdog is for: not a
		 * child that inherited the environment */
		if (errno == 0 && *end == '\0' && us > 0 && (!pid || !*pid || p == (unsigned long long)getpid()))
			watchdog_ms = (int64_t)(us / 1000) > 0 ? (int64_t)(us / 1000) : 1;
	}
	if (path && (path[0] == '/' || path[0] == '@') && strlen(path) < sizeof(addr.sun_path)) {
		memset(&addr, 0, sizeof(addr));
		addr.sun_family = AF_UNIX;
		size_t len = strlen(path);
		memcpy(addr.sun_path, path, len);
		if (path[0] == '@')
			addr.sun_path[0] = '\0';
		addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + (path[0] == '/'));
		fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	}
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
	atomic_store(&last_ping_ms, now_ms());
}

int sdnotify_send(const char *msg)
{
	if (fd < 0)
		return 0;
	ssize_t n;
	do
		n = sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (const struct sockaddr *)&addr, addrlen);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -1 : 0;
}

/* The status line as one line: a newline would start a new assignment. */
static void one_line(char *dst, size_t cap, const char *src)
{
	size_t i = 0;
	for (; src[i] && i + 1 < cap; i++)
		dst[i] = (src[i] == '\n' || src[i] == '\r') ? ' ' : src[i];
	dst[i] = '\0';
}

void sdnotify_ready(const char *status)
{
	char line[sizeof(last_status)], msg[sizeof(last_status) + 32];
	one_line(line, sizeof(line), status);
	snprintf(msg, sizeof(msg), "READY=1\nSTATUS=%s", line);
	pthread_mutex_lock(&status_lock);
	memcpy(last_status, line, sizeof(line));
	sdnotify_send(msg);
	pthread_mutex_unlock(&status_lock);
}

bool sdnotify_active(void)
{
	return fd >= 0;
}

void sdnotify_status(const char *status)
{
	if (fd < 0)
		return;
	char line[sizeof(last_status)], msg[sizeof(last_status) + 16];
	one_line(line, sizeof(line), status);
	pthread_mutex_lock(&status_lock);
	if (strcmp(line, last_status) != 0) {
		memcpy(last_status, line, sizeof(line));
		snprintf(msg, sizeof(msg), "STATUS=%s", line);
		sdnotify_send(msg);
	}
	pthread_mutex_unlock(&status_lock);
}

int64_t sdnotify_watchdog_ms(void)
{
	return watchdog_ms;
}

void sdnotify_watchdog_tick(void)
{
	if (fd < 0 || watchdog_ms <= 0)
		return;
	int64_t now = now_ms(), last = atomic_load(&last_ping_ms);
	/* half the interval, as sd_watchdog_enabled(3) advises; one thread
	 * wins the exchange and sends */
	if (now - last < watchdog_ms / 2 || !atomic_compare_exchange_strong(&last_ping_ms, &last, now))
		return;
	sdnotify_send("WATCHDOG=1");
}

void sdnotify_stopping(void)
{
	sdnotify_send("STOPPING=1");
}

void sdnotify_close(void)
{
	if (fd >= 0)
		close(fd);
	fd = -1;
}
