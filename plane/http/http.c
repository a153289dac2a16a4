/* http/http.c: the plane's HTTP server, routing and response helpers (see
 * http.h). */
#include "http/http.h"
#include "persist/persist.h"
#include "http/auth.h"
#include "gz.h"
#include "core/hub.h"
#include "listen.h"
#include "core/writer.h"
#include "log.h"
#include "plane.h"
#include "http/tls.h"
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

static enum http_result method_not_allowed(struct http_conn *c, const char *method, const char *allow)
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

/* A relay serves what its upstream holds: every change is the origin's
 * to make. */
static bool relay_refuses(struct plane *p, const char *url, const char *method)
{
	return p->persist->ops->upstream && !is(method, "GET") && strcmp(url, "/v1/ack") != 0 &&
	       strcmp(url, "/v1/report") != 0 && !str_starts_with(url, "/v1/relay/");
}

static enum http_result route(struct plane *p, struct http_conn *c, struct request *r,
			     const char *url, const char *method)
{
	if (relay_refuses(p, url, method)) {
		char up[512] = "";
		p->persist->ops->upstream(p->persist, up, sizeof(up), NULL);
		return http_send_error(c, 421, "this plane is a relay of %s: write to the origin", up);
	}
	if (strcmp(url, "/healthz") == 0)
		return is(method, "GET") ? api_healthz(p, c) : method_not_allowed(c, method, "GET");
	if (strcmp(url, "/metrics") == 0)
		return is(method, "GET") ? api_metrics(p, c) : method_not_allowed(c, method, "GET");
	if (strcmp(url, "/v1/status") == 0)
		return is(method, "GET") ? api_status(p, c) : method_not_allowed(c, method, "GET");
	if (strcmp(url, "/v1/events") == 0)
		return is(method, "GET") ? api_events(p, c) : method_not_allowed(c, method, "GET");
	if (strcmp(url, "/ui") == 0 || str_starts_with(url, "/ui/"))
		return is(method, "GET") ? api_ui(p, c, url[3] ? url + 4 : "") : method_not_allowed(c, method, "GET");
	if (strcmp(url, "/v1/stream") == 0)
		return is(method, "GET") ? api_stream(p, c) : method_not_allowed(c, method, "GET");
	if (strcmp(url, "/v1/config") == 0)
		return is(method, "GET") ? api_config(p, c, r) : method_not_allowed(c, method, "GET");
	if (strcmp(url, "/v1/ack") == 0)
		return is(method, "POST") ? api_ack(p, c, r) : method_not_allowed(c, method, "POST");
	if (strcmp(url, "/v1/report") == 0)
		return is(method, "POST") ? api_report(p, c, r) : method_not_allowed(c, method, "POST");
	if (strcmp(url, "/v1/batch") == 0)
		return is(method, "POST") ? api_batch(p, c, r) : method_not_allowed(c, method, "POST");
	if (strcmp(url, "/v1/relay/stream") == 0)
		return is(method, "GET") ? api_relay_stream(p, c) : method_not_allowed(c, method, "GET");
	if (strcmp(url, "/v1/relay/nodes") == 0)
		return is(method, "POST") ? api_relay_nodes(p, c, r) : method_not_allowed(c, method, "POST");
	if (strcmp(url, "/v1/relay/statement") == 0)
		return is(method, "GET") ? api_relay_statement(p, c) : method_not_allowed(c, method, "GET");
	if (strcmp(url, "/v1/resources") == 0 || strcmp(url, "/v1/resources/") == 0)
		return is(method, "GET") ? api_resources_list(p, c) : method_not_allowed(c, method, "GET");
	if (str_starts_with(url, "/v1/resources/")) {
		if (!is(method, "GET") && !is(method, "PUT") && !is(method, "DELETE"))
			return method_not_allowed(c, method, "GET, PUT, DELETE");
		return api_resource(p, c, r, method, url + strlen("/v1/resources/"));
	}
	if (strcmp(url, "/v1/history") == 0)
		return is(method, "GET") ? api_history(p, c, r, NULL) : method_not_allowed(c, method, "GET");
	if (str_starts_with(url, "/v1/history/"))
		return is(method, "GET") ? api_history(p, c, r, url + strlen("/v1/history/"))
					 : method_not_allowed(c, method, "GET");
	if (strcmp(url, "/v1/diff") == 0)
		return is(method, "GET") ? api_diff(p, c, r) : method_not_allowed(c, method, "GET");
	if (strcmp(url, "/v1/revert") == 0)
		return is(method, "POST") ? api_revert(p, c, r) : method_not_allowed(c, method, "POST");
	if (strcmp(url, "/v1/nodes") == 0)
		return is(method, "GET") ? api_nodes(p, c, method, NULL) : method_not_allowed(c, method, "GET");
	if (str_starts_with(url, "/v1/nodes/"))
		return is(method, "GET") ? api_nodes(p, c, method, url + strlen("/v1/nodes/"))
					 : method_not_allowed(c, method, "GET");
	if (strcmp(url, "/v1/rollouts") == 0)
		return is(method, "GET") ? api_rollouts(p, c) : method_not_allowed(c, method, "GET");
	if (strcmp(url, "/v1/rollouts/current") == 0)
		return is(method, "GET") ? api_rollout_current(p, c) : method_not_allowed(c, method, "GET");
	if (strcmp(url, "/v1/rollouts/current/abort") == 0)
		return is(method, "POST") ? api_rollout_abort(p, c) : method_not_allowed(c, method, "POST");
	if (strcmp(url, "/v1/tokens") == 0) {
		if (!is(method, "GET") && !is(method, "POST"))
			return method_not_allowed(c, method, "GET, POST");
		return api_tokens(p, c, r, method, NULL);
	}
	if (str_starts_with(url, "/v1/tokens/"))
		return is(method, "DELETE") ? api_tokens(p, c, r, method, url + strlen("/v1/tokens/"))
					    : method_not_allowed(c, method, "DELETE");
	return http_send_error(c, HTTP_NOT_FOUND, "no such endpoint: %.200s", url);
}

/* The most a request to url may upload: a batch or a resource is the
 * operator's own limit, an ACK or a token request small, anything else
 * (GETs, an abort) next to nothing. Bounded before anything is buffered. */
static uint64_t body_cap(struct plane *p, const char *url)
{
	if (strcmp(url, "/v1/batch") == 0 || str_starts_with(url, "/v1/resources/"))
		return p->cfg.max_request;   /* a PUT's body is held to max-body after */
	if (strcmp(url, "/v1/revert") == 0)
		return 64 * 1024;   /* a revert's message may be escaped to 6 bytes a byte */
	if (strcmp(url, "/v1/ack") == 0 || strcmp(url, "/v1/report") == 0)
		return 256 * 1024;  /* traffic of up to 128 routes */
	if (strcmp(url, "/v1/relay/nodes") == 0)
		return 16u << 20;   /* a batch of node records from a relay */
	return 4096;
}

static void too_large(struct plane *p, struct http_conn *c, struct request *r)
{
	http_send_error(c, HTTP_CONTENT_TOO_LARGE, "request body exceeds %llu bytes%s", (unsigned long long)r->cap,
			r->cap == p->cfg.max_request ? " (max-request)" : "");
}

/* What a route needs of its caller, from its method and path alone: a
 * request with a body is refused on its headers when its credential
 * cannot make it, before a byte of the body is read. */
static enum auth_gate gate_of(const char *url, const char *method)
{
	if (strcmp(url, "/healthz") == 0 || strcmp(url, "/ui") == 0 || str_starts_with(url, "/ui/"))
		return GATE_OPEN;
	if (is(method, "GET"))
		return GATE_ANY;   /* who may read what is the handler's to say */
	if (strcmp(url, "/v1/ack") == 0 || strcmp(url, "/v1/report") == 0)
		return GATE_NODE;
	if (str_starts_with(url, "/v1/relay/"))
		return GATE_RELAY;
	if (strcmp(url, "/v1/rollouts/current/abort") == 0)
		return GATE_OPERATOR;
	if (strcmp(url, "/v1/batch") == 0 || strcmp(url, "/v1/revert") == 0 || str_starts_with(url, "/v1/resources/") ||
	    strcmp(url, "/v1/tokens") == 0 || str_starts_with(url, "/v1/tokens/"))
		return GATE_ADMIN;
	return GATE_ANY;
}

/* The headers are in: the body's bound, the credential, the plane's
 * state. A refusal here is answered before any of the body is read. */
static void on_headers(void *cls, struct http_conn *c, void **req)
{
	struct plane *p = cls;
	const char *url = http_path(c), *method = http_method(c);
	struct request *r = xcalloc(1, sizeof(*r));
	buf_init(&r->body);
	*req = r;
	atomic_fetch_add(&p->ctr.requests, 1);
	r->cap = body_cap(p, url);
	int64_t len = http_content_length(c);
	if (relay_refuses(p, url, method)) {
		char up[512] = "";
		p->persist->ops->upstream(p->persist, up, sizeof(up), NULL);
		http_send_error(c, 421, "this plane is a relay of %s: write to the origin", up);
		return;
	}
	enum http_result ret;
	if (!auth_precheck(p, c, gate_of(url, method), &ret))
		return;
	if (len >= 0 && (uint64_t)len > r->cap) {
		r->too_big = true;
		too_large(p, c, r);
	}
}

static void on_body(void *cls, struct http_conn *c, void *req, const char *data, size_t len)
{
	struct plane *p = cls;
	struct request *r = req;
	if (r->body.len + len > r->cap) {
		r->too_big = true;
		buf_release(&r->body);
		too_large(p, c, r);   /* the rest is not read */
		return;
	}
	buf_append(&r->body, data, len);
}

static void on_request(void *cls, struct http_conn *c, void *req)
{
	struct plane *p = cls;
	struct request *r = req;
	if (r->job) {
		/* resumed: the writer (or reader) thread has the answer */
		struct write_result res;
		if (!writer_take(r->job, &res)) {
			http_suspend(c);
			return;
		}
		r->job = NULL;
		http_send(c, res.status, "application/json", &res.body, res.gzip_ok);
		return;
	}
	if (atomic_load(&p->stopping) && !r->waiter) {
		http_send_error(c, HTTP_SERVICE_UNAVAILABLE, "the plane is shutting down");
		return;
	}
	route(p, c, r, http_path(c), http_method(c));
}

static void on_completed(void *cls, struct http_conn *c, void *req)
{
	struct plane *p = cls;
	struct request *r = req;
	(void)c;
	if (!r)
		return;
	if (r->waiter)
		hub_waiter_release(p->hub, r->waiter);
	if (r->job)
		writer_forget(p->writer, r->job);
	buf_release(&r->body);
	free(r);
}

int http_start(struct plane *p, char *err, size_t errlen)
{
	char lerr[512];
	p->listen_fd = listen_tcp(p->cfg.listen, 4096, p->listen_addr, sizeof(p->listen_addr), lerr, sizeof(lerr));
	if (p->listen_fd < 0) {
		snprintf(err, errlen, "listen: %s", lerr);
		return -1;
	}
	unsigned limit = (unsigned)p->cfg.max_connections;
	if (!limit) {
		struct rlimit rl;
		getrlimit(RLIMIT_NOFILE, &rl);
		rlim_t cur = rl.rlim_cur == RLIM_INFINITY ? 1048576 : rl.rlim_cur;
		limit = cur > 64 ? (unsigned)(cur - 32) : 32;
	}
	struct httpd_config hc = {
		.listen_fd = p->listen_fd,
		.threads = (unsigned)p->cfg.threads,
		.max_connections = limit,
		.max_pending_per_address = (unsigned)p->cfg.max_pending_per_address,
		.header_timeout_ms = (unsigned)(p->cfg.header_timeout * 1000),
		.idle_timeout_s = (unsigned)p->cfg.send_timeout,
		/* the largest head we accept: a 200-byte node id with 32 labels
		 * of 63/63 bytes, or a 4 KiB admin token, with room */
		.max_header_bytes = 16384,
	};
	if (p->tls) {
		hc.tls_creds = tls_credentials(p->tls);
		hc.tls_priority = tls_priority(p->tls);
		hc.tls_request_cert = tls_client_ca_pem(p->tls) != NULL;
	}
	struct httpd_app app = { p, on_headers, on_body, on_request, on_completed };
	p->httpd = httpd_start(&hc, &app, lerr, sizeof(lerr));
	if (!p->httpd) {
		snprintf(err, errlen, "cannot start the HTTP server on %s: %s", p->listen_addr, lerr);
		close(p->listen_fd);
		p->listen_fd = -1;
		return -1;
	}
	log_info("listening on %s (%s, %llu threads, up to %u connections)", p->listen_addr,
		 !p->tls ? "plain HTTP" : tls_client_ca_pem(p->tls) ? "HTTPS, client certificates" : "HTTPS",
		 (unsigned long long)p->cfg.threads, limit);
	return 0;
}

bool http_listens_on_loopback(struct plane *p)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	if (p->listen_fd < 0 || getsockname(p->listen_fd, (struct sockaddr *)&ss, &sl) < 0)
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

void http_quiesce(struct plane *p)
{
	if (p->httpd) {
		httpd_quiesce(p->httpd);
		p->listen_fd = -1;   /* closed with it */
	}
}

void http_stop(struct plane *p)
{
	if (p->httpd) {
		httpd_stop(p->httpd);
		p->httpd = NULL;
		p->listen_fd = -1;
	}
	if (p->listen_fd >= 0) {
		close(p->listen_fd);
		p->listen_fd = -1;
	}
}
