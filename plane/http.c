/* http.c: the plane's HTTP server, routing and response helpers (see
 * http.h). */
#include "http.h"
#include "persist.h"
#include "auth.h"
#include "gz.h"
#include "hub.h"
#include "listen.h"
#include "writer.h"
#include "log.h"
#include "plane.h"
#include "tls.h"
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

const char *http_query(struct MHD_Connection *c, const char *key)
{
	return MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, key);
}

const char *http_header(struct MHD_Connection *c, const char *key)
{
	return MHD_lookup_connection_value(c, MHD_HEADER_KIND, key);
}

bool http_accepts_gzip(struct MHD_Connection *c)
{
	const char *ae = http_header(c, MHD_HTTP_HEADER_ACCEPT_ENCODING);
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

enum MHD_Result http_send(struct MHD_Connection *c, unsigned status, const char *type, struct buf *body,
			  bool gzip_ok)
{
	return http_send_headers(c, status, type, body, gzip_ok, NULL);
}

enum MHD_Result http_send_headers(struct MHD_Connection *c, unsigned status, const char *type,
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
	struct MHD_Response *resp = MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(data);
		return MHD_NO;
	}
	if (type)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (gzip_ok)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Accept-Encoding");
	if (gz)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
	for (; headers && headers[0]; headers += 2)
		MHD_add_response_header(resp, headers[0], headers[1]);
	enum MHD_Result ret = MHD_queue_response(c, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

enum MHD_Result http_send_json(struct MHD_Connection *c, unsigned status, struct buf *body)
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

enum MHD_Result http_send_error(struct MHD_Connection *c, unsigned status, const char *fmt, ...)
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

static enum MHD_Result method_not_allowed(struct MHD_Connection *c, const char *method, const char *allow)
{
	struct buf b = BUF_INIT;
	char msg[256];
	snprintf(msg, sizeof(msg), "method %.64s is not allowed here; allowed: %s", method, allow);
	buf_puts(&b, "{\"error\":");
	buf_json_string(&b, msg);   /* the method is the client's text */
	buf_puts(&b, "}\n");
	size_t len;
	char *data = buf_detach(&b, &len);
	struct MHD_Response *resp = MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
	enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_METHOD_NOT_ALLOWED, resp);
	MHD_destroy_response(resp);
	return ret;
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

static enum MHD_Result route(struct plane *p, struct MHD_Connection *c, struct request *r,
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
	return http_send_error(c, MHD_HTTP_NOT_FOUND, "no such endpoint: %.200s", url);
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

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
				  const char *version, const char *upload_data, size_t *upload_size,
				  void **con_cls)
{
	struct plane *p = cls;
	struct request *r = *con_cls;
	(void)version;

	if (!r) {
		r = xcalloc(1, sizeof(*r));
		buf_init(&r->body);
		*con_cls = r;
		atomic_fetch_add(&p->ctr.requests, 1);
		r->cap = body_cap(p, url);
		const char *cl = http_header(c, MHD_HTTP_HEADER_CONTENT_LENGTH);
		uint64_t len;
		if (cl && parse_u64(cl, &len) == 0 && len > r->cap)
			r->too_big = true;
		/* nobody uploads anything before showing a credential: an
		 * anonymous caller of a secure plane is refused on its headers */
		enum MHD_Result ret;
		if (strcmp(url, "/healthz") != 0 && !str_starts_with(url, "/ui") && !auth_precheck(p, c, &ret))
			return ret;
		return MHD_YES;
	}
	if (r->job) {
		/* resumed: the writer (or reader) thread has the answer */
		struct write_result res;
		if (!writer_take(r->job, &res))
			return MHD_YES;
		r->job = NULL;
		return http_send(c, res.status, "application/json", &res.body, res.gzip_ok);
	}
	if (*upload_size) {
		if (!r->too_big && r->body.len + *upload_size > r->cap) {
			r->too_big = true;
			buf_release(&r->body);
		}
		if (!r->too_big)
			buf_append(&r->body, upload_data, *upload_size);
		*upload_size = 0;
		return MHD_YES;
	}
	if (r->too_big)
		return http_send_error(c, MHD_HTTP_CONTENT_TOO_LARGE, "request body exceeds %llu bytes%s",
				       (unsigned long long)r->cap,
				       r->cap == p->cfg.max_request ? " (max-request)" : "");
	if (atomic_load(&p->stopping) && !r->waiter)
		return http_send_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "the plane is shutting down");
	return route(p, c, r, url, method);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
	struct plane *p = cls;
	struct request *r = *con_cls;
	(void)c;
	(void)toe;
	if (!r)
		return;
	if (r->waiter)
		hub_waiter_release(p->hub, r->waiter);
	if (r->job)
		writer_forget(p->writer, r->job);
	buf_release(&r->body);
	free(r);
	*con_cls = NULL;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Unescapes %HH in the path and query values, except %00: a NUL would cut
 * the C string short, so "cluster/a%00b" would write "cluster/a" and
 * "node=a%00b" would be node "a". It stays as the text "%00", which no
 * name, node id, label, prefix or number accepts. */
static size_t unescape_no_nul(void *cls, struct MHD_Connection *c, char *s)
{
	char *w = s;
	(void)cls;
	(void)c;
	for (const char *r = s; *r;) {
		int hi, lo;
		if (r[0] == '%' && (hi = hexval(r[1])) >= 0 && (lo = hexval(r[2])) >= 0 && (hi | lo) != 0) {
			*w++ = (char)(hi * 16 + lo);
			r += 3;
		} else {
			*w++ = *r++;
		}
	}
	*w = '\0';
	return (size_t)(w - s);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[512];
	(void)cls;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	size_t n = strlen(msg);
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
		msg[--n] = '\0';
	log_debug("http: %s", msg);
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
	/* Each connection's memory pool is malloc'd whole and libmicrohttpd
	 * zeroes what it frees inside it, so every held stream keeps all of it
	 * resident: the pool is most of a stream's cost (docs/BENCHMARKS.md).
	 * 8 KiB still takes the largest request head we accept (a 200-byte
	 * node id with 32 labels of 63/63 bytes, or a 4 KiB admin token);
	 * 4 KiB does not. */
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC |
			 MHD_USE_ERROR_LOG;
	/* TLS: the certificate comes from tls.c's callback at each handshake
	 * (SIGHUP swaps it for new connections); with a client CA the
	 * handshake asks for a client certificate, checked per request */
	struct MHD_OptionItem tls_opts[4];
	size_t nt = 0;
	if (p->tls) {
		flags |= MHD_USE_TLS;
		tls_opts[nt++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_CERT_CALLBACK, 0, tls_cert_callback() };
		tls_opts[nt++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_PRIORITIES, 0,
							   (void *)"NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2" };
		if (tls_client_ca_pem(p->tls))
			tls_opts[nt++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_TRUST, 0,
								   (void *)tls_client_ca_pem(p->tls) };
	}
	tls_opts[nt] = (struct MHD_OptionItem){ MHD_OPTION_END, 0, NULL };
	p->mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_request, p,
				  MHD_OPTION_ARRAY, tls_opts,
				  MHD_OPTION_LISTEN_SOCKET, p->listen_fd,
				  MHD_OPTION_THREAD_POOL_SIZE, (unsigned)p->cfg.threads,
				  MHD_OPTION_CONNECTION_LIMIT, limit,
				  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)p->cfg.send_timeout,
				  MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)8192,
				  MHD_OPTION_CONNECTION_MEMORY_INCREMENT, (size_t)1024,
				  MHD_OPTION_NOTIFY_COMPLETED, on_completed, p,
				  MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
				  MHD_OPTION_UNESCAPE_CALLBACK, unescape_no_nul, NULL,
				  MHD_OPTION_END);
	if (!p->mhd) {
		snprintf(err, errlen, "cannot start the HTTP server on %s", p->listen_addr);
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
	if (p->mhd) {
		MHD_socket fd = MHD_quiesce_daemon(p->mhd);
		if (fd != MHD_INVALID_SOCKET)
			close(fd);
		p->listen_fd = -1;
	}
}

void http_stop(struct plane *p)
{
	if (p->mhd) {
		MHD_stop_daemon(p->mhd);
		p->mhd = NULL;
	}
	if (p->listen_fd >= 0) {
		close(p->listen_fd);
		p->listen_fd = -1;
	}
}
