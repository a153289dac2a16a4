/* metrics_http.c: --metrics-listen (see metrics_http.h). Every socket is
 * non-blocking and served from the event loop: a client that sends too
 * much, too slowly or something other than GET /metrics gets a short
 * answer or is dropped, and never holds the loop. */
#include "metrics_http.h"
#include "agent_int.h"
#include "listen.h"
#include "log.h"
#include "util.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define CLIENTS_MAX 8
#define REQUEST_MAX 4096
#define CLIENT_TIMEOUT_MS 5000

struct client {
	int fd;                 /* -1: free */
	int64_t deadline_ms;
	char req[REQUEST_MAX];
	size_t got;
	struct buf out;         /* the answer, from sent on */
	size_t sent;
};

static int listen_fd = -1;
static struct client clients[CLIENTS_MAX];
static bool clients_ready;

int metrics_http_open(struct agent *a, char *err, size_t errlen)
{
	if (!clients_ready) {
		for (int i = 0; i < CLIENTS_MAX; i++)
			clients[i].fd = -1;
		clients_ready = true;
	}
	char real[300], lerr[512];
	int fd = listen_tcp(a->cfg.metrics_listen, 16, real, sizeof(real), lerr, sizeof(lerr));
	if (fd < 0) {
		snprintf(err, errlen, "metrics-listen: %s", lerr);
		return -1;
	}
	log_info("metrics: serving http://%s/metrics", real);
	listen_fd = fd;
	return 0;
}

unsigned metrics_http_fds(struct curl_waitfd *fds, unsigned max)
{
	unsigned n = 0;
	if (listen_fd < 0)
		return 0;
	if (n < max)
		fds[n++] = (struct curl_waitfd){ listen_fd, CURL_WAIT_POLLIN, 0 };
	for (int i = 0; i < CLIENTS_MAX && n < max; i++)
		if (clients[i].fd >= 0)
			fds[n++] = (struct curl_waitfd){ clients[i].fd,
							 clients[i].out.len ? CURL_WAIT_POLLOUT : CURL_WAIT_POLLIN, 0 };
	return n;
}

static void drop(struct client *c)
{
	close(c->fd);
	c->fd = -1;
	buf_release(&c->out);
}

static void answer(struct client *c, const char *status, const char *type, const char *body, size_t len)
{
	buf_reset(&c->out);
	buf_printf(&c->out, "HTTP/1.0 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
		   status, type, len);
	buf_append(&c->out, body, len);
	c->sent = 0;
}

/* A whole request head is in: pick the answer. */
static void respond(struct agent *a, struct client *c)
{
	const char *sp = memchr(c->req, ' ', c->got);
	if (!sp || (size_t)(sp - c->req) != 3 || memcmp(c->req, "GET", 3) != 0) {
		answer(c, "405 Method Not Allowed", "text/plain", "only GET\n", 9);
		return;
	}
	const char *path = sp + 1, *end = memchr(path, ' ', c->got - (size_t)(path - c->req));
	size_t plen = end ? (size_t)(end - path) : 0;
	const char *q = memchr(path, '?', plen);
	if (q)
		plen = (size_t)(q - path);
	if (plen != 8 || memcmp(path, "/metrics", 8) != 0) {
		answer(c, "404 Not Found", "text/plain", "not found: try /metrics\n", 24);
		return;
	}
	struct buf body = BUF_INIT;
	metrics_text(a, &body, true);
	answer(c, "200 OK", "text/plain; version=0.0.4; charset=utf-8", body.data, body.len);
	buf_release(&body);
}

static void serve(struct agent *a, struct client *c)
{
	if (!c->out.len) {
		ssize_t r = read(c->fd, c->req + c->got, sizeof(c->req) - c->got);
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
			drop(c);
			return;
		}
		if (r > 0)
			c->got += (size_t)r;
		bool whole = false;
		for (size_t i = 3; i < c->got && !whole; i++)
			whole = memcmp(c->req + i - 3, "\r\n\r\n", 4) == 0 || memcmp(c->req + i - 1, "\n\n", 2) == 0;
		if (whole)
			respond(a, c);
		else if (c->got == sizeof(c->req))
			answer(c, "431 Request Header Fields Too Large", "text/plain", "request too large\n", 18);
		else
			return;
	}
	while (c->sent < c->out.len) {
		ssize_t w = send(c->fd, c->out.data + c->sent, c->out.len - c->sent, MSG_NOSIGNAL);
		if (w < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (w <= 0) {
			drop(c);
			return;
		}
		c->sent += (size_t)w;
	}
	drop(c);
}

void metrics_http_service(struct agent *a, int64_t *wake_ms)
{
	if (listen_fd < 0)
		return;
	for (;;) {
		int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			break;
		struct client *c = NULL;
		for (int i = 0; i < CLIENTS_MAX && !c; i++)
			if (clients[i].fd < 0)
				c = &clients[i];
		if (!c) {
			close(fd);   /* busy: a scraper tries again at its next interval */
			continue;
		}
		c->fd = fd;
		c->got = 0;
		c->sent = 0;
		buf_init(&c->out);
		c->deadline_ms = now_ms() + CLIENT_TIMEOUT_MS;
	}
	int64_t now = now_ms();
	for (int i = 0; i < CLIENTS_MAX; i++) {
		struct client *c = &clients[i];
		if (c->fd < 0)
			continue;
		if (now >= c->deadline_ms) {
			drop(c);
			continue;
		}
		serve(a, c);
		if (c->fd >= 0 && wake_ms && c->deadline_ms < *wake_ms)
			*wake_ms = c->deadline_ms;
	}
}

void metrics_http_close(void)
{
	for (int i = 0; clients_ready && i < CLIENTS_MAX; i++)
		if (clients[i].fd >= 0)
			drop(&clients[i]);
	if (listen_fd >= 0)
		close(listen_fd);
	listen_fd = -1;
}
