/* http/http.c: the plane's HTTP server, routing and response helpers (see
 * http.h). */
#include "http/http.h"
#include "core/core.h"
#include "core/hub.h"
#include "core/writer.h"
#include "gz.h"
#include "http/auth.h"
#include "http/tickets.h"
#include "http/tls.h"
#include "listen.h"
#include "log.h"
#include "util.h"
#include "xmalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- helpers ----------------------------------------------------------- */

bool http_accepts_gzip(struct http_conn *c)
{
	const char *ae = http_header(c, HTTP_HEADER_ACCEPT_ENCODING);
	if (!ae)
		return false;
	/* a "gzip" (or "*") token whose q-value, if any, is above zero */
	for (const char *p = ae; *p;) {
		p += strspn(p, " \t,");
		size_t len = strcspn(p, ",");
		size_t name = strcspn(p, ";, \t");
		if ((name == 4 && strncasecmp(p, "gzip", 4) == 0) || (name == 1 && *p == '*')) {
			const char *q = p + name;
			double qv = 1;
			const char *qs = strstr(q, "q=");
			if (qs && qs < p + len)
				qv = strtod(qs + 2, NULL);
			return qv > 0;
		}
		p += len;
	}
	return false;
}

enum http_result http_send(struct http_conn *c, unsigned status, const char *type, struct buf *body,
			  bool gzip_ok)
{
	return http_send_headers(c, status, type, body, gzip_ok, NULL);
}

enum http_result http_send_headers(struct http_conn *c, unsigned status, const char *type,
				  struct buf *body, bool gzip_ok, const char *const *headers)
{
	bool gz = false;
	if (gzip_ok && body->len >= 1024 && http_accepts_gzip(c)) {
		struct buf z = BUF_INIT;
		if (gz_compress(body->data, body->len, &z) == 0) {
			buf_release(body);
			*body = z;
			gz = true;
		} else {
			buf_release(&z);
		}
	}
	size_t len;
	char *data = buf_detach(body, &len);
	struct http_response *resp = http_response_buffer(data, len, free);
	if (type)
		http_response_header(resp, HTTP_HEADER_CONTENT_TYPE, type);
	if (gzip_ok)
		http_response_header(resp, HTTP_HEADER_VARY, "Accept-Encoding");
	if (gz)
		http_response_header(resp, HTTP_HEADER_CONTENT_ENCODING, "gzip");
	for (; headers && headers[0]; headers += 2)
		http_response_header(resp, headers[0], headers[1]);
	return http_queue(c, status, resp);
}

enum http_result http_send_json(struct http_conn *c, unsigned status, struct buf *body)
{
	buf_putc(body, '\n');
	return http_send(c, status, "application/json", body, true);
}

enum http_result http_send_result(struct http_conn *c, struct write_result *res)
{
	if (res->error) {
		buf_release(&res->body);
		http_error_body(&res->body, res->error);
		free(res->error);
		res->error = NULL;
		return http_send(c, res->status, "application/json", &res->body, false);
	}
	return http_send(c, res->status, "application/json", &res->body, res->gzip_ok);
}

void http_error_body(struct buf *b, const char *msg)
{
	buf_puts(b, "{\"error\":");
	buf_json_string(b, msg);
	buf_puts(b, "}\n");
}

enum http_result http_send_error(struct http_conn *c, unsigned status, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	struct buf b = BUF_INIT;
	http_error_body(&b, msg);
	log_debug("http: %u %s", status, msg);
	return http_send(c, status, "application/json", &b, false);
}

/* ---- routing ------------------------------------------------------------ */

enum http_result http_send_not_allowed(struct http_conn *c, const char *method, const char *allow)
{
	struct buf b = BUF_INIT;
	char msg[256];
	snprintf(msg, sizeof(msg), "method %.64s is not allowed here; allowed: %s", method, allow);
	buf_puts(&b, "{\"error\":");
	buf_json_string(&b, msg);   /* the method is the client's text */
	buf_puts(&b, "}\n");
	size_t len;
	char *data = buf_detach(&b, &len);
	struct http_response *resp = http_response_buffer(data, len, free);
	http_response_header(resp, HTTP_HEADER_CONTENT_TYPE, "application/json");
	http_response_header(resp, HTTP_HEADER_ALLOW, allow);
	return http_queue(c, HTTP_METHOD_NOT_ALLOWED, resp);
}

static bool is(const char *method, const char *want)
{
	return strcmp(method, want) == 0 || (strcmp(want, "GET") == 0 && strcmp(method, "HEAD") == 0);
}

/* Whether method is one of allow's ("GET, PUT"); GET takes HEAD too. */
static bool allowed(const char *method, const char *allow)
{
	for (const char *a = allow; *a;) {
		a += strspn(a, ", ");
		size_t n = strcspn(a, ", ");
		if (n && ((strlen(method) == n && strncmp(method, a, n) == 0) ||
			  (n == 3 && strncmp(a, "GET", 3) == 0 && strcmp(method, "HEAD") == 0)))
			return true;
		a += n;
	}
	return false;
}

/* The route of url (NULL: none); *rest gets what follows a prefix. */
static const struct http_route *find_route(const struct http_server *h, const char *url, const char **rest)
{
	for (const struct http_route *rt = h->routes; rt && rt->path; rt++) {
		if (rt->prefix ? str_starts_with(url, rt->path) : strcmp(url, rt->path) == 0) {
			*rest = rt->prefix ? url + strlen(rt->path) : "";
			return rt;
		}
	}
	*rest = "";
	return NULL;
}

/* A relay serves what its upstream holds: every change is the origin's
 * to make. */
static bool relay_refuses(struct http_server *h, const struct http_route *rt, const char *method)
{
	return core_is_relay(h->core) && !is(method, "GET") && !(rt && rt->relay_serves);
}

static enum http_result refuse_on_relay(struct http_server *h, struct http_conn *c)
{
	char up[512] = "";
	core_upstream(h->core, up, sizeof(up));
	return http_send_error(c, 421, "this plane is a relay of %s: write to the origin", up);
}

static enum http_result route(struct http_server *h, struct http_conn *c, struct request *r, const char *url,
			     const char *method)
{
	const char *rest;
	const struct http_route *rt = find_route(h, url, &rest);
	if (relay_refuses(h, rt, method))
		return refuse_on_relay(h, c);
	if (!rt || !rt->handler)
		return http_send_error(c, HTTP_NOT_FOUND, "no such endpoint: %.200s", url);
	if (!allowed(method, rt->allow))
		return http_send_not_allowed(c, method, rt->allow);
	return rt->handler(h->ctx, c, r, method, rest);
}

/* The most a request to url may upload: a batch or a resource is the
 * operator's own limit, the rest what its route says (anything else:
 * GETs, an abort, next to nothing). Bounded before anything is buffered. */
static uint64_t body_cap(struct http_server *h, const struct http_route *rt)
{
	if (!rt || !rt->body_cap)
		return 4096;
	return rt->body_cap == HTTP_CAP_MAX_REQUEST ? h->opt.max_request : rt->body_cap;
}

static void too_large(struct http_server *h, struct http_conn *c, struct request *r)
{
	http_send_error(c, HTTP_CONTENT_TOO_LARGE, "request body exceeds %llu bytes%s", (unsigned long long)r->cap,
			r->cap == h->opt.max_request ? " (max-request)" : "");
}

/* What a route needs of its caller, from its method and path alone: a
 * request with a body is refused on its headers when its credential
 * cannot make it, before a byte of the body is read. */
static enum auth_gate gate_of(const struct http_route *rt, const char *method)
{
	if (rt && rt->open)
		return GATE_OPEN;
	if (is(method, "GET"))
		return GATE_ANY;   /* who may read what is the handler's to say */
	return rt ? rt->gate : GATE_ANY;
}

/* The headers are in: the body's bound, the credential, the plane's
 * state. A refusal here is answered before any of the body is read. */
static void on_headers(void *cls, struct http_conn *c, void **req)
{
	struct http_server *h = cls;
	const char *url = http_path(c), *method = http_method(c), *rest;
	const struct http_route *rt = find_route(h, url, &rest);
	struct request *r = xcalloc(1, sizeof(*r));
	buf_init(&r->body);
	*req = r;
	atomic_fetch_add(&h->core->ctr.requests, 1);
	r->cap = body_cap(h, rt);
	int64_t len = http_content_length(c);
	if (relay_refuses(h, rt, method)) {
		refuse_on_relay(h, c);
		return;
	}
	enum http_result ret;
	if (!auth_precheck(h->auth, c, gate_of(rt, method), &ret))
		return;
	if (len >= 0 && (uint64_t)len > r->cap) {
		r->too_big = true;
		too_large(h, c, r);
	}
}

static void on_body(void *cls, struct http_conn *c, void *req, const char *data, size_t len)
{
	struct http_server *h = cls;
	struct request *r = req;
	if (r->body.len + len > r->cap) {
		r->too_big = true;
		buf_release(&r->body);
		too_large(h, c, r);   /* the rest is not read */
		return;
	}
	buf_append(&r->body, data, len);
}

static void on_request(void *cls, struct http_conn *c, void *req)
{
	struct http_server *h = cls;
	struct request *r = req;
	if (r->job) {
		/* resumed: the writer (or reader) thread has the answer */
		struct write_result res;
		if (!writer_take(r->job, &res)) {
			http_suspend(c);
			return;
		}
		r->job = NULL;
		http_send_result(c, &res);
		return;
	}
	if (atomic_load(&h->core->stopping) && !r->waiter) {
		http_send_error(c, HTTP_SERVICE_UNAVAILABLE, "the plane is shutting down");
		return;
	}
	route(h, c, r, http_path(c), http_method(c));
}

static void on_completed(void *cls, struct http_conn *c, void *req)
{
	struct http_server *h = cls;
	struct request *r = req;
	(void)c;
	if (!r)
		return;
	if (r->waiter)
		hub_waiter_release(h->core->hub, r->waiter);
	if (r->job)
		writer_forget(h->core->writer, r->job);
	buf_release(&r->body);
	free(r);
}

static int tls_session(void *cls, void *session)
{
	return tickets_session(cls, session);
}

static int tls_handshake_done(void *cls, void *session)
{
	return tickets_handshake_done(cls, session);
}

int http_start(struct http_server *h, char *err, size_t errlen)
{
	char lerr[512];
	h->listen_fd = listen_tcp(h->opt.listen, 4096, h->listen_addr, sizeof(h->listen_addr), lerr, sizeof(lerr));
	if (h->listen_fd < 0) {
		snprintf(err, errlen, "listen: %s", lerr);
		return -1;
	}
	unsigned limit = h->opt.max_connections;
	if (!limit) {
		struct rlimit rl;
		getrlimit(RLIMIT_NOFILE, &rl);
		rlim_t cur = rl.rlim_cur == RLIM_INFINITY ? 1048576 : rl.rlim_cur;
		limit = cur > 64 ? (unsigned)(cur - 32) : 32;
	}
	struct httpd_config hc = {
		.listen_fd = h->listen_fd,
		.threads = h->opt.threads,
		.max_connections = limit,
		.max_pending_per_address = h->opt.max_pending_per_address,
		.header_timeout_ms = (unsigned)(h->opt.header_timeout * 1000),
		.idle_timeout_s = h->opt.send_timeout,
		/* the largest head we accept: a 200-byte node id with 32 labels
		 * of 63/63 bytes, or a 4 KiB admin token, with room */
		.max_header_bytes = 16384,
	};
	if (h->tls) {
		hc.tls_creds = tls_credentials(h->tls);
		hc.tls_priority = tls_priority(h->tls);
		hc.tls_request_cert = tls_client_ca_pem(h->tls) != NULL;
		if (h->tickets) {
			hc.tls_session = tls_session;
			hc.tls_handshake_done = tls_handshake_done;
			hc.tls_session_cls = h->tickets;
			hc.tls_init_flags = tickets_init_flags();
		}
	}
	struct httpd_app app = { h, on_headers, on_body, on_request, on_completed };
	h->httpd = httpd_start(&hc, &app, lerr, sizeof(lerr));
	if (!h->httpd) {
		snprintf(err, errlen, "cannot start the HTTP server on %s: %s", h->listen_addr, lerr);
		close(h->listen_fd);
		h->listen_fd = -1;
		return -1;
	}
	log_info("listening on %s (%s, %u threads, up to %u connections)", h->listen_addr,
		 !h->tls ? "plain HTTP" : tls_client_ca_pem(h->tls) ? "HTTPS, client certificates" : "HTTPS",
		 h->opt.threads, limit);
	return 0;
}

bool http_listens_on_loopback(struct http_server *h)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	if (h->listen_fd < 0 || getsockname(h->listen_fd, (struct sockaddr *)&ss, &sl) < 0)
		return false;
	if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
		return (ntohl(a->sin_addr.s_addr) >> 24) == 127;
	}
	if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
		return IN6_IS_ADDR_LOOPBACK(&a->sin6_addr);
	}
	return false;
}

void http_quiesce(struct http_server *h)
{
	if (h->httpd) {
		httpd_quiesce(h->httpd);
		h->listen_fd = -1;   /* closed with it */
	}
}

void http_stop(struct http_server *h)
{
	if (h->httpd) {
		httpd_stop(h->httpd);
		h->httpd = NULL;
		h->listen_fd = -1;
	}
	if (h->listen_fd >= 0) {
		close(h->listen_fd);
		h->listen_fd = -1;
	}
}
