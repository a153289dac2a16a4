/* net/httpd.c: the plane's HTTP/1.1 server: threads with an epoll loop each,
 * connections, http-parser's framing, GnuTLS, suspend and resume,
 * deadlines and connection limits (see httpd.h). */
#include "net/httpd.h"
#include "alive.h"
#include "buf.h"
#include "log.h"
#include "util.h"
#include "xmalloc.h"

#include "net/http_request.h"

#include <gnutls/gnutls.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define SCRATCH 65536          /* a loop's read (and reader) buffer */
#define READS_PER_TURN 4       /* then other connections get their turn */
#define ACCEPTS_PER_TURN 64
#define EVENTS 256
/* TLS handshakes under way at once in one loop. What a handshake
 * allocates and frees lies between the sessions that stay: thousands at
 * once (a restart's storm, every node back within a second) left glibc's
 * heap full of such holes, up to a quarter more memory per stream
 * (docs/BENCHMARKS.md, "Trust" (4)). A connection past the limit is
 * accepted (the backlog does not overflow) and its ClientHello waits in
 * its socket, oldest first, until a handshake ends. A handshake under
 * way for HANDSHAKE_WAIT_MS no longer counts (it goes on): clients that
 * stall hold no one up for longer, and slow ones (a client busy with its
 * own thousands) do not leave the loop idle: 500 ms made the failover
 * storm of bench/trust.sh slower, 50 ms let full handshakes pile up
 * again (16 KB per stream after the restart's storm), 200 ms did
 * neither. */
#define HANDSHAKES_PER_LOOP 128
#define HANDSHAKE_WAIT_MS 200

enum cstate { S_TLS, S_HEAD, S_BODY, S_APP, S_SEND };

struct http_response {
	struct buf head;          /* "Name: value\r\n" lines */
	char *data;
	size_t len;
	void (*data_free)(void *);
	http_reader_fn reader;
	void *reader_cls;
	void (*reader_free)(void *);
};

struct loop;

/* A client address (IPv4 in the first 4 bytes, or IPv6). */
struct addr_key {
	unsigned char addr[16];
	unsigned char alen;
};

struct http_conn {
	struct loop *l;
	int fd;
	gnutls_session_t tls;
	/* S_TLS: its handshake holds one of the loop's slots (hs_started, in
	 * the loop's hs_run list), or it waits for one (hs_waiting, in
	 * hs_wait); hs_since: when it entered that list */
	bool hs_started, hs_waiting;
	int64_t hs_since;
	struct http_conn *hs_prev, *hs_next;
	/* tls_handshake_done is not done (its ticket is in GnuTLS's record
	 * buffer): it runs again before any other record is sent */
	bool tls_post_pending;
	enum cstate st;
	uint32_t ev;              /* the epoll interest set now */
	struct http_request rq;
	void *req;
	bool have_req, head_req, keep_alive, close_after, continued;
	/* input read past the current request (the next one, pipelined) */
	char *in;
	size_t in_len;
	/* the answer */
	struct http_response *resp;
	unsigned status;
	struct buf out;           /* head, a chunk, or the end of a body */
	size_t out_off;
	size_t body_off;          /* into resp->data */
	bool chunked, reader_done, body_sent;
	uint64_t pos;
	/* under l->lock */
	bool suspended, in_wake, dead;
	unsigned suspends;        /* http_suspend calls, ever */
	struct http_conn *wake_next;
	/* deadlines */
	bool pending;             /* still sending its header block */
	int64_t deadline_ms, pending_since_ms, last_ms;
	int64_t body_since_ms;    /* when its body began */
	uint64_t body_read;       /* bytes read since (framing included) */
	struct addr_key key;      /* the client's address */
	struct http_conn *prev, *next;     /* the loop's connections */
	struct http_conn *pprev, *pnext;   /* the loop's pending ones, oldest first */
	struct http_conn *grave;
};

struct loop {
	struct httpd *d;
	int ep, evfd;
	pthread_t thread;
	bool started;
	pthread_mutex_t lock;
	struct http_conn *wake, *wake_tail;
	struct http_conn *all;
	struct http_conn *pend, *pend_tail;
	struct http_conn *graves;
	atomic_uint npending;       /* how many are in pend (read by the other loops) */
	atomic_uint evict;          /* the other loops ask this one to close its oldest pending */
	/* under lock: addresses past --max-pending-per-address whose oldest
	 * slow connection here should make room (the other loops ask) */
	struct addr_key evict_like[16];
	unsigned nevict_like;
	char *scratch;
	int64_t last_sweep_ms;
	int spare_fd;               /* held for when descriptors run out */
	int64_t emfile_logged_ms;
	char date[64];
	time_t date_s;
	unsigned handshakes;        /* connections whose handshake has begun and not ended */
	/* TLS connections, oldest first: accepted, their handshake not begun;
	 * their handshake begun (holding a slot) */
	struct http_conn *hs_wait, *hs_wait_tail, *hs_run, *hs_run_tail;
};

/* per client address: connections still sending their headers */
struct addr_count {
	struct addr_key key;
	unsigned n;
};

struct httpd {
	struct httpd_config cfg;
	struct httpd_app app;
	atomic_int listen_fd;
	struct loop *loops;
	unsigned nloops;
	atomic_bool stop;
	atomic_uint open;
	pthread_mutex_t addr_lock;
	struct addr_count *addrs;
	size_t naddrs, addrs_cap;
	atomic_uint_fast64_t accepted, refused_full, evicted, header_timeouts, bad_requests, slow_bodies;
	atomic_uint_fast64_t tls_full, tls_resumed, tls_waited;
};

static char listen_marker, wake_marker;

static void conn_close(struct http_conn *c);
static void flush(struct http_conn *c);
static void process_input(struct http_conn *c);
static void handshake(struct http_conn *c);
static void hs_end(struct http_conn *c);
static void dispatch(struct http_conn *c);

/* ---- small things --------------------------------------------------------- */

static void set_ev(struct http_conn *c, uint32_t ev)
{
	if (c->ev == ev)
		return;
	struct epoll_event e = { .events = ev, .data.ptr = c };
	if (epoll_ctl(c->l->ep, EPOLL_CTL_MOD, c->fd, &e) == 0)
		c->ev = ev;
}

static const char *reason(unsigned status)
{
	switch (status) {
	case 100: return "Continue";
	case 200: return "OK";
	case 201: return "Created";
	case 204: return "No Content";
	case 304: return "Not Modified";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 409: return "Conflict";
	case 410: return "Gone";
	case 413: return "Content Too Large";
	case 421: return "Misdirected Request";
	case 422: return "Unprocessable Content";
	case 423: return "Locked";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 503: return "Service Unavailable";
	default: return "Status";
	}
}

static const char *date_now(struct loop *l)
{
	time_t t = time(NULL);
	if (t != l->date_s) {
		struct tm tm;
		gmtime_r(&t, &tm);
		strftime(l->date, sizeof(l->date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
		l->date_s = t;
	}
	return l->date;
}

/* ---- client addresses with connections still sending headers ------------- */

static bool same_addr(const struct addr_key *a, const struct addr_key *b)
{
	return a->alen == b->alen && memcmp(a->addr, b->addr, a->alen) == 0;
}

static struct addr_count *addr_find(struct httpd *d, const struct addr_key *k)
{
	for (size_t i = 0; i < d->naddrs; i++)
		if (same_addr(&d->addrs[i].key, k))
			return &d->addrs[i];
	return NULL;
}

static unsigned addr_pending(struct httpd *d, const struct addr_key *k)
{
	pthread_mutex_lock(&d->addr_lock);
	struct addr_count *a = addr_find(d, k);
	unsigned n = a ? a->n : 0;
	pthread_mutex_unlock(&d->addr_lock);
	return n;
}

static void addr_add(struct httpd *d, const struct addr_key *k, int delta)
{
	pthread_mutex_lock(&d->addr_lock);
	struct addr_count *a = addr_find(d, k);
	if (!a && delta > 0) {
		if (d->naddrs == d->addrs_cap) {
			d->addrs_cap = d->addrs_cap ? d->addrs_cap * 2 : 16;
			d->addrs = xrealloc(d->addrs, d->addrs_cap * sizeof(*d->addrs));
		}
		a = &d->addrs[d->naddrs++];
		a->key = *k;
		a->n = 0;
	}
	if (a) {
		if (delta > 0)
			a->n++;
		else if (a->n)
			a->n--;
		if (a->n == 0)   /* the table holds only addresses with some */
			*a = d->addrs[--d->naddrs];
	}
	pthread_mutex_unlock(&d->addr_lock);
}

static void pend_add(struct http_conn *c)
{
	if (c->pending)
		return;
	struct loop *l = c->l;
	int64_t now = now_ms();
	c->pending = true;
	c->pending_since_ms = now;
	c->deadline_ms = now + l->d->cfg.header_timeout_ms;
	c->pnext = NULL;
	c->pprev = l->pend_tail;
	if (l->pend_tail)
		l->pend_tail->pnext = c;
	else
		l->pend = c;
	l->pend_tail = c;
	atomic_fetch_add(&l->npending, 1);
	addr_add(l->d, &c->key, 1);
}

static void pend_del(struct http_conn *c)
{
	if (!c->pending)
		return;
	struct loop *l = c->l;
	c->pending = false;
	if (c->pprev)
		c->pprev->pnext = c->pnext;
	else
		l->pend = c->pnext;
	if (c->pnext)
		c->pnext->pprev = c->pprev;
	else
		l->pend_tail = c->pprev;
	c->pprev = c->pnext = NULL;
	atomic_fetch_sub(&l->npending, 1);
	addr_add(l->d, &c->key, -1);
}

/* ---- the request, as http-parser sees it --------------------------------- */

/* ---- the request's hooks ----------------------------------------------- */

static void rq_begin(void *owner)
{
	pend_add(owner);   /* the header deadline runs from the request's first byte */
}

static void rq_head(void *owner)
{
	struct http_conn *c = owner;
	struct httpd *d = c->l->d;
	pend_del(c);
	c->head_req = http_request_is_head(&c->rq);
	c->keep_alive = http_request_keep_alive(&c->rq);
	c->have_req = true;
	c->req = NULL;
	d->app.headers(d->app.cls, c, &c->req);
	bool body = http_request_has_body(&c->rq);
	if (c->resp) {
		/* refused on its headers: nothing of the body is read */
		if (body) {
			c->close_after = true;
			http_request_pause(&c->rq);
		}
		return;
	}
	if (body) {
		c->st = S_BODY;
		c->body_since_ms = now_ms();
		c->body_read = 0;
		const char *ex = http_header(c, "Expect");
		if (ex && strcasecmp(ex, "100-continue") == 0 && http_request_http11(&c->rq) && !c->continued) {
			c->continued = true;
			buf_puts(&c->out, "HTTP/1.1 100 Continue\r\n\r\n");
		}
	}
}

static void rq_body(void *owner, const char *data, size_t len)
{
	struct http_conn *c = owner;
	struct httpd *d = c->l->d;
	if (c->resp)
		return;
	d->app.body(d->app.cls, c, c->req, data, len);
	if (c->resp) {   /* refused part-way (too large) */
		c->close_after = true;
		http_request_pause(&c->rq);
	}
}

static void rq_end(void *owner)
{
	struct http_conn *c = owner;
	c->st = S_APP;
}

static const struct http_request_hooks rq_hooks = { rq_begin, rq_head, rq_body, rq_end };

/* ---- the request's accessors ---------------------------------------------- */

const char *http_method(struct http_conn *c)
{
	return http_request_method(&c->rq);
}

const char *http_path(struct http_conn *c)
{
	return http_request_path(&c->rq);
}

const char *http_header(struct http_conn *c, const char *name)
{
	return http_request_header(&c->rq, name);
}

const char *http_query(struct http_conn *c, const char *key)
{
	return http_request_query(&c->rq, key);
}

int64_t http_content_length(struct http_conn *c)
{
	return http_request_content_length(&c->rq);
}

void *http_tls_session(struct http_conn *c)
{
	return c->tls;
}

/* ---- responses ------------------------------------------------------------ */

struct http_response *http_response_buffer(char *data, size_t len, void (*free_fn)(void *))
{
	struct http_response *r = xcalloc(1, sizeof(*r));
	r->data = data;
	r->len = len;
	r->data_free = free_fn;
	return r;
}

struct http_response *http_response_reader(http_reader_fn fn, void *cls, void (*free_fn)(void *))
{
	struct http_response *r = xcalloc(1, sizeof(*r));
	r->reader = fn;
	r->reader_cls = cls;
	r->reader_free = free_fn;
	return r;
}

void http_response_header(struct http_response *r, const char *name, const char *value)
{
	if (strpbrk(name, "\r\n: ") || strpbrk(value, "\r\n")) {
		log_warn("http: header %.64s dropped: a line break in it", name);
		return;
	}
	buf_printf(&r->head, "%s: %s\r\n", name, value);
}

void http_response_free(struct http_response *r)
{
	if (!r)
		return;
	if (r->data_free)
		r->data_free(r->data);
	if (r->reader_free)
		r->reader_free(r->reader_cls);
	buf_release(&r->head);
	free(r);
}

enum http_result http_queue(struct http_conn *c, unsigned status, struct http_response *r)
{
	if (c->resp) {
		http_response_free(r);
		return HTTP_NO;
	}
	c->resp = r;
	c->status = status;
	return HTTP_YES;
}

/* The status line and headers into c->out (after a 100 Continue not yet
 * sent, if any). */
static void build_head(struct http_conn *c)
{
	struct http_response *r = c->resp;
	bool http11 = http_request_http11(&c->rq);
	bool no_body = c->status == 204 || c->status == 304 || c->status < 200;
	if (r->reader && !http11)
		c->close_after = true;   /* HTTP/1.0: the close ends the body */
	if (!c->keep_alive)
		c->close_after = true;
	buf_printf(&c->out, "HTTP/1.1 %u %s\r\nDate: %s\r\n", c->status, reason(c->status), date_now(c->l));
	if (r->head.len)
		buf_append(&c->out, r->head.data, r->head.len);
	if (r->reader) {
		c->chunked = http11 && !no_body;
		if (c->chunked)
			buf_puts(&c->out, "Transfer-Encoding: chunked\r\n");
	} else if (!no_body) {
		buf_printf(&c->out, "Content-Length: %zu\r\n", r->len);
	}
	if (c->close_after)
		buf_puts(&c->out, "Connection: close\r\n");
	else if (!http11)
		buf_puts(&c->out, "Connection: keep-alive\r\n");
	buf_puts(&c->out, "\r\n");
	if (no_body || c->head_req) {
		c->reader_done = true;
		c->body_sent = true;
	}
}

/* ---- sending -------------------------------------------------------------- */

/* Sends what it can of iov on a plain socket: bytes sent, 0 when it would
 * block, -1 when the connection is gone. */
static ssize_t send_plain(int fd, struct iovec *iov, size_t n)
{
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = n };
	for (;;) {
		ssize_t sent = sendmsg(fd, &m, MSG_NOSIGNAL);
		if (sent >= 0)
			return sent;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		return -1;
	}
}

/* The same for one buffer, over TLS when the connection has it. */
static ssize_t send_some(struct http_conn *c, const char *data, size_t len)
{
	if (c->tls) {
		if (c->tls_post_pending) {
			/* a record send now would flush the ticket and count its
			 * bytes as the response's */
			struct httpd *d = c->l->d;
			int r = d->cfg.tls_handshake_done(d->cfg.tls_session_cls, c->tls);
			if (r < 0)
				return -1;
			if (r > 0)
				return 0;
			c->tls_post_pending = false;
		}
		ssize_t n = gnutls_record_send(c->tls, data, len);
		if (n >= 0)
			return n;
		if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED)
			return 0;
		return -1;
	}
	struct iovec iov = { (void *)data, len };
	return send_plain(c->fd, &iov, 1);
}

/* The head and a buffer's body together, on a plain socket. */
static ssize_t send_two(struct http_conn *c, const char *a, size_t alen, const char *b, size_t blen)
{
	struct iovec iov[2] = { { (void *)a, alen }, { (void *)b, blen } };
	return send_plain(c->fd, iov, 2);
}

/* Sends whatever is in c->out. Returns 1 when it is all sent, 0 when the
 * socket is full, -1 when the connection is gone. */
static int send_out(struct http_conn *c)
{
	while (c->out_off < c->out.len) {
		ssize_t n = send_some(c, c->out.data + c->out_off, c->out.len - c->out_off);
		if (n < 0)
			return -1;
		if (n == 0)
			return 0;
		c->out_off += (size_t)n;
		c->last_ms = now_ms();
	}
	buf_shrink(&c->out, 512);
	c->out_off = 0;
	return 1;
}

static void finish_exchange(struct http_conn *c);

/* Under l->lock: c joins the list its loop runs through (once). */
static void wake_push(struct http_conn *c)
{
	struct loop *l = c->l;
	if (c->in_wake || c->dead)
		return;
	c->in_wake = true;
	c->wake_next = NULL;
	if (l->wake_tail)
		l->wake_tail->wake_next = c;
	else
		l->wake = c;
	l->wake_tail = c;
}

/* From c's own loop: c gets another turn (a pipelined request, decrypted
 * bytes no event will tell of) after the others'. */
static void requeue(struct http_conn *c)
{
	pthread_mutex_lock(&c->l->lock);
	wake_push(c);
	pthread_mutex_unlock(&c->l->lock);
}

static void park(struct http_conn *c)
{
	set_ev(c, 0);
}

static void flush(struct http_conn *c)
{
	struct http_response *r = c->resp;
	struct loop *l = c->l;
	for (;;) {
		/* plain, a buffer: head and body in one call */
		if (!c->tls && !r->reader && !c->body_sent && c->out_off < c->out.len) {
			size_t hl = c->out.len - c->out_off;
			ssize_t n = send_two(c, c->out.data + c->out_off, hl, r->data, r->len);
			if (n < 0)
				goto gone;
			if (n == 0)
				goto full;
			c->last_ms = now_ms();
			if ((size_t)n < hl) {
				c->out_off += (size_t)n;
				continue;
			}
			c->out_off = c->out.len;
			c->body_off = (size_t)n - hl;
		}
		int s = send_out(c);
		if (s < 0)
			goto gone;
		if (s == 0)
			goto full;
		if (!r->reader) {
			while (!c->body_sent && c->body_off < r->len) {
				ssize_t n = send_some(c, r->data + c->body_off, r->len - c->body_off);
				if (n < 0)
					goto gone;
				if (n == 0)
					goto full;
				c->body_off += (size_t)n;
				c->last_ms = now_ms();
			}
			c->body_sent = true;
			finish_exchange(c);
			return;
		}
		if (c->reader_done) {
			finish_exchange(c);
			return;
		}
		ssize_t n = r->reader(r->reader_cls, c->pos, l->scratch, SCRATCH);
		if (n > 0) {
			c->pos += (uint64_t)n;
			if (c->chunked)
				buf_printf(&c->out, "%zx\r\n", (size_t)n);
			buf_append(&c->out, l->scratch, (size_t)n);
			if (c->chunked)
				buf_puts(&c->out, "\r\n");
			continue;
		}
		if (n == 0) {
			pthread_mutex_lock(&l->lock);
			bool parked = c->suspended;
			pthread_mutex_unlock(&l->lock);
			if (parked) {
				park(c);
				return;
			}
			continue;   /* resumed meanwhile: ask again */
		}
		if (n == HTTP_READER_END) {
			c->reader_done = true;
			if (c->chunked)
				buf_puts(&c->out, "0\r\n\r\n");
			continue;
		}
		goto gone;   /* HTTP_READER_ERROR: the body is cut off */
	}
full:
	set_ev(c, EPOLLOUT);
	return;
gone:
	conn_close(c);
}

static void start_send(struct http_conn *c)
{
	c->st = S_SEND;
	c->body_off = 0;
	c->pos = 0;
	c->chunked = c->reader_done = c->body_sent = false;
	build_head(c);
	flush(c);
}

/* A request of the connection's own making: a refusal by the server. */
static void refuse(struct http_conn *c, unsigned status, const char *msg)
{
	struct buf b = BUF_INIT;
	buf_puts(&b, "{\"error\":");
	buf_json_string(&b, msg);
	buf_puts(&b, "}\n");
	size_t len;
	char *data = buf_detach(&b, &len);
	struct http_response *r = http_response_buffer(data, len, free);
	http_response_header(r, HTTP_HEADER_CONTENT_TYPE, "application/json");
	if (c->resp)
		http_response_free(c->resp);
	c->resp = r;
	c->status = status;
	c->close_after = true;
	log_debug("http: %u %s", status, msg);
}

/* The application hears that the request is done with, and the answer
 * (its buffer or reader) is freed. */
static void end_exchange(struct http_conn *c)
{
	struct httpd *d = c->l->d;
	if (c->have_req) {
		c->have_req = false;
		d->app.completed(d->app.cls, c, c->req);
		c->req = NULL;
	}
	http_response_free(c->resp);
	c->resp = NULL;
}

/* The exchange is over: the application hears it, and the connection
 * waits for its next request (or closes). */
static void finish_exchange(struct http_conn *c)
{
	end_exchange(c);
	if (c->close_after) {
		conn_close(c);
		return;
	}
	http_request_reset(&c->rq);
	c->continued = false;
	c->head_req = false;
	c->keep_alive = true;
	c->st = S_HEAD;
	c->last_ms = now_ms();
	set_ev(c, EPOLLIN);
	if (c->in_len) {
		/* a pipelined request: its turn comes after the others' */
		requeue(c);
	}
}

/* ---- the request's life --------------------------------------------------- */

static void dispatch(struct http_conn *c)
{
	struct httpd *d = c->l->d;
	pthread_mutex_lock(&c->l->lock);
	unsigned before = c->suspends;
	pthread_mutex_unlock(&c->l->lock);
	if (!c->resp)
		d->app.request(d->app.cls, c, c->req);
	if (c->resp) {
		start_send(c);
		return;
	}
	pthread_mutex_lock(&c->l->lock);
	bool suspended = c->suspends != before, parked = c->suspended;
	pthread_mutex_unlock(&c->l->lock);
	if (parked)
		park(c);
	else if (!suspended)
		conn_close(c);   /* no answer and no suspension: the handler gave up */
	/* else resumed already: the wake list has it */
}

static void bad_request(struct http_conn *c, unsigned status, const char *why)
{
	struct httpd *d = c->l->d;
	atomic_fetch_add(&d->bad_requests, 1);
	char msg[200];
	if (status == 431)
		snprintf(msg, sizeof(msg), "%s: at most %zu bytes and %d headers", why, d->cfg.max_header_bytes,
			 HTTP_REQUEST_MAX_HEADERS);
	else
		snprintf(msg, sizeof(msg), "malformed request: %s", why);
	pend_del(c);
	c->st = S_APP;
	refuse(c, status, msg);
	start_send(c);
}

/* Parses data: the rest of a request, or the next. Bytes past a request
 * are kept for its turn. */
static void feed(struct http_conn *c, const char *data, size_t len)
{
	unsigned status;
	const char *why;
	size_t n = http_request_feed(&c->rq, data, len, &status, &why);
	if (status) {
		bad_request(c, status, why);
		return;
	}
	if (n < len && !c->close_after) {
		/* the next request, pipelined */
		c->in = xrealloc(c->in, c->in_len + (len - n));
		memcpy(c->in + c->in_len, data + n, len - n);
		c->in_len += len - n;
	}
	if (c->resp && c->st != S_SEND) {
		/* refused on its headers or part-way through its body */
		c->st = S_APP;
		start_send(c);
		return;
	}
	if (c->st == S_APP)
		dispatch(c);
}

/* Reads and parses while the connection is reading a request. */
static void process_input(struct http_conn *c)
{
	struct loop *l = c->l;
	if (c->in_len) {
		char *in = c->in;
		size_t len = c->in_len;
		c->in = NULL;
		c->in_len = 0;
		feed(c, in, len);
		free(in);
		if (c->dead || c->in_len)
			return;   /* more pipelined: it has its turn queued */
	}
	/* nothing is read past a pipelined request not yet parsed: it goes first */
	for (int i = 0; i < READS_PER_TURN && (c->st == S_HEAD || c->st == S_BODY) && !c->in_len; i++) {
		ssize_t n;
		if (c->tls) {
			n = gnutls_record_recv(c->tls, l->scratch, SCRATCH);
			if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED)
				break;
			if (n < 0) {
				conn_close(c);
				return;
			}
		} else {
			n = recv(c->fd, l->scratch, SCRATCH, 0);
			if (n < 0) {
				if (errno == EINTR)
					continue;
				if (errno == EAGAIN || errno == EWOULDBLOCK)
					break;
				conn_close(c);
				return;
			}
		}
		if (n == 0) {
			conn_close(c);   /* the client is done */
			return;
		}
		c->last_ms = now_ms();
		if (c->st == S_HEAD && !c->pending)
			pend_add(c);
		if (c->st == S_BODY)
			c->body_read += (uint64_t)n;
		feed(c, l->scratch, (size_t)n);
		if (c->dead)
			return;
	}
	if (c->st == S_HEAD || c->st == S_BODY) {
		/* a 100 Continue still to send */
		if (c->out.len && send_out(c) < 0) {
			conn_close(c);
			return;
		}
		set_ev(c, EPOLLIN | (c->out.len ? EPOLLOUT : 0));
		if (c->tls && gnutls_record_check_pending(c->tls) > 0) {
			/* decrypted bytes no event will tell of */
			requeue(c);
		}
	}
}

static void handshake(struct http_conn *c)
{
	int rc = gnutls_handshake(c->tls);
	if (rc == GNUTLS_E_SUCCESS) {
		struct httpd *d = c->l->d;
		atomic_fetch_add(gnutls_session_is_resumed(c->tls) ? &d->tls_resumed : &d->tls_full, 1);
		if (d->cfg.tls_handshake_done) {
			int r = d->cfg.tls_handshake_done(d->cfg.tls_session_cls, c->tls);
			if (r < 0) {
				conn_close(c);
				return;
			}
			c->tls_post_pending = r > 0;
		}
		c->st = S_HEAD;
		hs_end(c);
		c->last_ms = now_ms();
		set_ev(c, EPOLLIN);
		process_input(c);
		return;
	}
	if (rc == GNUTLS_E_AGAIN || rc == GNUTLS_E_INTERRUPTED ||
	    (rc < 0 && !gnutls_error_is_fatal(rc))) {
		set_ev(c, gnutls_record_get_direction(c->tls) ? EPOLLOUT : EPOLLIN);
		return;
	}
	log_debug("http: TLS handshake failed: %s", gnutls_strerror(rc));
	conn_close(c);
}

/* ---- connections ---------------------------------------------------------- */

/* c out of the list it is in (hs_wait or hs_run). */
static void hs_unlink(struct http_conn *c, struct http_conn **head, struct http_conn **tail)
{
	if (c->hs_prev)
		c->hs_prev->hs_next = c->hs_next;
	else
		*head = c->hs_next;
	if (c->hs_next)
		c->hs_next->hs_prev = c->hs_prev;
	else
		*tail = c->hs_prev;
	c->hs_prev = c->hs_next = NULL;
}

static void hs_append(struct http_conn *c, struct http_conn **head, struct http_conn **tail, int64_t now)
{
	c->hs_since = now;
	c->hs_next = NULL;
	c->hs_prev = *tail;
	if (*tail)
		(*tail)->hs_next = c;
	else
		*head = c;
	*tail = c;
}

/* c leaves whichever list it is in: its handshake ended (done, its
 * connection closed) or stalled; a slot it held is free. */
static void hs_end(struct http_conn *c)
{
	struct loop *l = c->l;
	if (c->hs_waiting) {
		hs_unlink(c, &l->hs_wait, &l->hs_wait_tail);
		c->hs_waiting = false;
	}
	if (c->hs_started) {
		hs_unlink(c, &l->hs_run, &l->hs_run_tail);
		c->hs_started = false;
		l->handshakes--;
	}
}

static void hs_begin(struct http_conn *c, int64_t now)
{
	struct loop *l = c->l;
	c->hs_started = true;
	l->handshakes++;
	hs_append(c, &l->hs_run, &l->hs_run_tail, now);
	set_ev(c, EPOLLIN);
	handshake(c);
}

/* A new TLS connection: its handshake begins now if a slot is free, else
 * it waits (no events but a hangup: its ClientHello stays in the socket). */
static void hs_admit(struct http_conn *c, int64_t now)
{
	struct loop *l = c->l;
	if (l->handshakes < HANDSHAKES_PER_LOOP && !l->hs_wait) {
		hs_begin(c, now);
		return;
	}
	atomic_fetch_add(&l->d->tls_waited, 1);
	set_ev(c, 0);
	c->hs_waiting = true;
	hs_append(c, &l->hs_wait, &l->hs_wait_tail, now);
}

/* Once a turn: handshakes under way for HANDSHAKE_WAIT_MS give up their
 * slot; waiting connections take the free ones, oldest first (at most
 * HANDSHAKES_PER_LOOP begin in a turn). */
static void hs_run_waiting(struct loop *l, int64_t now)
{
	while (l->hs_run && now - l->hs_run->hs_since >= HANDSHAKE_WAIT_MS)
		hs_end(l->hs_run);
	while (l->hs_wait && l->handshakes < HANDSHAKES_PER_LOOP) {
		struct http_conn *c = l->hs_wait;
		hs_end(c);
		hs_begin(c, now);
	}
}

static void conn_close(struct http_conn *c)
{
	if (c->dead)
		return;
	struct loop *l = c->l;
	struct httpd *d = l->d;
	hs_end(c);
	pthread_mutex_lock(&l->lock);
	c->dead = true;   /* no resume queues it from now on */
	pthread_mutex_unlock(&l->lock);
	pend_del(c);
	epoll_ctl(l->ep, EPOLL_CTL_DEL, c->fd, NULL);
	end_exchange(c);
	/* after the callbacks: no other thread knows c now */
	pthread_mutex_lock(&l->lock);
	if (c->in_wake) {
		struct http_conn **pp = &l->wake, *prev = NULL;
		while (*pp && *pp != c) {
			prev = *pp;
			pp = &(*pp)->wake_next;
		}
		if (*pp) {
			*pp = c->wake_next;
			if (l->wake_tail == c)
				l->wake_tail = prev;
		}
		c->in_wake = false;
	}
	pthread_mutex_unlock(&l->lock);
	if (c->tls) {
		gnutls_bye(c->tls, GNUTLS_SHUT_WR);   /* non-blocking: best effort */
		gnutls_deinit(c->tls);
		c->tls = NULL;
	}
	close(c->fd);
	c->fd = -1;
	if (c->prev)
		c->prev->next = c->next;
	else
		l->all = c->next;
	if (c->next)
		c->next->prev = c->prev;
	atomic_fetch_sub(&d->open, 1);
	/* freed at the end of the turn: the turn's events may still name it */
	c->grave = l->graves;
	l->graves = c;
}

static void conn_free(struct http_conn *c)
{
	http_request_free(&c->rq);
	buf_release(&c->out);
	free(c->in);
	free(c);
}

void http_suspend(struct http_conn *c)
{
	pthread_mutex_lock(&c->l->lock);
	c->suspended = true;
	c->suspends++;
	pthread_mutex_unlock(&c->l->lock);
}

void http_resume(struct http_conn *c)
{
	struct loop *l = c->l;
	pthread_mutex_lock(&l->lock);
	bool wake = false;
	if (c->suspended && !c->dead) {
		c->suspended = false;
		/* the loop empties the list once woken: one wake-up for a
		 * commit's thousands of resumes */
		wake = l->wake == NULL;
		wake_push(c);
	}
	pthread_mutex_unlock(&l->lock);
	if (wake) {
		uint64_t one = 1;
		ssize_t w = write(l->evfd, &one, sizeof(one));
		(void)w;   /* a full counter wakes the loop all the same */
	}
}

/* The oldest connection of l still sending headers of the address of
 * like that has been at it long enough to make room: half the header
 * deadline (a storm's connections, and TLS handshakes queued behind
 * others, finish well within it). */
static struct http_conn *evictable(struct loop *l, const struct addr_key *like, int64_t now)
{
	for (struct http_conn *c = l->pend; c; c = c->pnext) {
		if (now - c->pending_since_ms < (int64_t)l->d->cfg.header_timeout_ms / 2)
			return NULL;   /* oldest first: the rest are younger */
		if (same_addr(&c->key, like))
			return c;
	}
	return NULL;
}

static void loop_wake(struct loop *o)
{
	uint64_t one = 1;
	ssize_t w = write(o->evfd, &one, sizeof(one));
	(void)w;   /* a full counter wakes the loop all the same */
}

/* An address past its limit of connections still sending headers: its
 * oldest slow one makes room, here or on another loop (which closes it on
 * its next turn). */
static void room_for_address(struct loop *l, const struct addr_key *like, int64_t now)
{
	struct httpd *d = l->d;
	struct http_conn *old = evictable(l, like, now);
	if (old) {
		atomic_fetch_add(&d->evicted, 1);
		conn_close(old);
		return;
	}
	for (unsigned i = 0; i < d->nloops; i++) {
		struct loop *o = &d->loops[i];
		if (o == l || !atomic_load(&o->npending))
			continue;
		pthread_mutex_lock(&o->lock);
		if (o->nevict_like < sizeof(o->evict_like) / sizeof(o->evict_like[0]))
			o->evict_like[o->nevict_like++] = *like;
		pthread_mutex_unlock(&o->lock);
		loop_wake(o);
	}
}

/* The table is full: the oldest connection still sending its headers,
 * here or on another loop, makes way (a slow client must not lock out a
 * quick one). False when every connection is past its headers. */
static bool make_room(struct loop *l)
{
	struct httpd *d = l->d;
	if (l->pend) {
		atomic_fetch_add(&d->evicted, 1);
		conn_close(l->pend);
		return true;
	}
	/* next, the connection here idle longest between requests */
	struct http_conn *idle = NULL;
	for (struct http_conn *c = l->all; c; c = c->next)
		if (c->st == S_HEAD && !c->pending && c->ev == EPOLLIN && !c->in_len &&
		    (!idle || c->last_ms < idle->last_ms))
			idle = c;
	if (idle) {
		atomic_fetch_add(&d->evicted, 1);
		conn_close(idle);
		return true;
	}
	for (unsigned i = 0; i < d->nloops; i++) {
		struct loop *o = &d->loops[i];
		if (o != l && atomic_load(&o->npending) > atomic_load(&o->evict)) {
			/* its loop closes one on its next turn; this one goes on
			 * meanwhile (the limit is over by one, briefly) */
			atomic_fetch_add(&o->evict, 1);
			loop_wake(o);
			return true;
		}
	}
	return false;
}

static void accept_some(struct loop *l)
{
	struct httpd *d = l->d;
	for (int i = 0; i < ACCEPTS_PER_TURN; i++) {
		int lfd = atomic_load(&d->listen_fd);
		if (lfd < 0)
			return;
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE) {
				/* out of descriptors: the spare one takes the
				 * connection to close it, or the listener stays
				 * ready and every loop spins on it */
				int64_t now = now_ms();
				if (now - l->emfile_logged_ms > 10000) {
					log_warn("http: cannot accept: %s (raise the file limit, or lower "
						 "--max-connections); closing new connections meanwhile", strerror(errno));
					l->emfile_logged_ms = now;
				}
				if (l->spare_fd >= 0) {
					close(l->spare_fd);
					int lost = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
					if (lost >= 0)
						close(lost);
					atomic_fetch_add(&d->refused_full, 1);
					l->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
					continue;
				}
			}
			return;
		}
		atomic_fetch_add(&d->accepted, 1);
		struct addr_key key = { { 0 }, 0 };
		if (ss.ss_family == AF_INET6) {
			memcpy(key.addr, &((struct sockaddr_in6 *)&ss)->sin6_addr, 16);
			key.alen = 16;
		} else if (ss.ss_family == AF_INET) {
			memcpy(key.addr, &((struct sockaddr_in *)&ss)->sin_addr, 4);
			key.alen = 4;
		}
		int64_t now = now_ms();
		/* an address at its limit of connections still sending headers:
		 * its oldest slow one makes way */
		if (d->cfg.max_pending_per_address && addr_pending(d, &key) >= d->cfg.max_pending_per_address)
			room_for_address(l, &key, now);
		if (atomic_load(&d->open) >= d->cfg.max_connections && !make_room(l)) {
			atomic_fetch_add(&d->refused_full, 1);
			close(fd);
			continue;
		}
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		struct http_conn *c = xcalloc(1, sizeof(*c));
		c->l = l;
		c->fd = fd;
		c->key = key;
		http_request_init(&c->rq, &rq_hooks, c, d->cfg.max_header_bytes);
		c->last_ms = now;
		if (d->cfg.tls_creds) {
			if (gnutls_init(&c->tls, GNUTLS_SERVER | GNUTLS_NONBLOCK | GNUTLS_NO_SIGNAL | d->cfg.tls_init_flags) < 0 ||
			    gnutls_priority_set(c->tls, d->cfg.tls_priority) < 0 ||
			    gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, d->cfg.tls_creds) < 0 ||
			    (d->cfg.tls_session && d->cfg.tls_session(d->cfg.tls_session_cls, c->tls) < 0)) {
				if (c->tls)
					gnutls_deinit(c->tls);
				close(fd);
				free(c);
				continue;
			}
			if (d->cfg.tls_request_cert)
				gnutls_certificate_server_set_request(c->tls, GNUTLS_CERT_REQUEST);
			gnutls_transport_set_int(c->tls, fd);
			c->st = S_TLS;
		} else {
			c->st = S_HEAD;
		}
		struct epoll_event e = { .events = EPOLLIN, .data.ptr = c };
		if (epoll_ctl(l->ep, EPOLL_CTL_ADD, fd, &e) < 0) {
			if (c->tls)
				gnutls_deinit(c->tls);
			close(fd);
			free(c);
			continue;
		}
		c->ev = EPOLLIN;
		atomic_fetch_add(&d->open, 1);
		c->next = l->all;
		if (l->all)
			l->all->prev = c;
		l->all = c;
		pend_add(c);   /* the header deadline covers the handshake too */
		/* most clients have sent their request by now */
		if (c->tls)
			hs_admit(c, now);
		else
			process_input(c);
	}
}

/* Deadlines: a header block not whole in time; no progress for the idle
 * timeout while reading a body, sending, or between requests. A
 * suspended connection waits on the application, not on its client. */
static void sweep(struct loop *l, int64_t now)
{
	struct httpd *d = l->d;
	while (l->pend && l->pend->deadline_ms <= now) {
		atomic_fetch_add(&d->header_timeouts, 1);
		conn_close(l->pend);
	}
	if (now - l->last_sweep_ms < 1000)
		return;
	l->last_sweep_ms = now;
	int64_t idle = (int64_t)d->cfg.idle_timeout_s * 1000;
	for (struct http_conn *c = l->all, *next; c; c = next) {
		next = c->next;
		/* a body comes at 1,000 bytes a second at least, after the
		 * header timeout's grace: a trickle (a chunk extension a byte
		 * at a time) cannot hold a connection for ever */
		if (c->st == S_BODY &&
		    now - c->body_since_ms > (int64_t)d->cfg.header_timeout_ms + (int64_t)c->body_read) {
			atomic_fetch_add(&d->slow_bodies, 1);
			conn_close(c);
			continue;
		}
		if (c->pending || c->st == S_APP || c->ev == 0)
			continue;
		if (c->st == S_SEND && !(c->ev & EPOLLOUT))
			continue;
		if (now - c->last_ms > idle)
			conn_close(c);
	}
}

/* The connections resumed (or due another turn) since the last: each
 * once. What they queue again waits for the next turn, after the others'
 * events. Returns whether more are queued. */
static bool run_wakes(struct loop *l)
{
	pthread_mutex_lock(&l->lock);
	struct http_conn *c = l->wake;
	l->wake = l->wake_tail = NULL;
	pthread_mutex_unlock(&l->lock);
	while (c) {
		pthread_mutex_lock(&l->lock);
		struct http_conn *next = c->wake_next;
		bool listed = c->in_wake;   /* conn_close took it off */
		/* a request suspended again since it was queued waits for its
		 * own resume (the entry is stale) */
		if (c->st == S_APP && c->suspended)
			listed = false;
		c->in_wake = false;
		pthread_mutex_unlock(&l->lock);
		if (listed && !c->dead) {
			switch (c->st) {
			case S_APP:
				dispatch(c);
				break;
			case S_SEND:
				flush(c);
				break;
			case S_HEAD:
			case S_BODY:
				process_input(c);
				break;
			case S_TLS:
				handshake(c);
				break;
			}
		}
		c = next;
	}
	pthread_mutex_lock(&l->lock);
	bool more = l->wake != NULL;
	pthread_mutex_unlock(&l->lock);
	return more;
}

static void bury(struct loop *l)
{
	while (l->graves) {
		struct http_conn *c = l->graves;
		l->graves = c->grave;
		conn_free(c);
	}
}

/* The addresses the other loops asked room for: their oldest slow
 * connection here, if old enough, is closed. */
static void evict_asked(struct loop *l)
{
	struct addr_key like[16];
	pthread_mutex_lock(&l->lock);
	unsigned n = l->nevict_like;
	memcpy(like, l->evict_like, n * sizeof(like[0]));
	l->nevict_like = 0;
	pthread_mutex_unlock(&l->lock);
	int64_t now = now_ms();
	for (unsigned i = 0; i < n; i++) {
		struct http_conn *old = evictable(l, &like[i], now);
		if (old) {
			atomic_fetch_add(&l->d->evicted, 1);
			conn_close(old);
		}
	}
}

static void *loop_main(void *arg)
{
	struct loop *l = arg;
	struct httpd *d = l->d;
	struct epoll_event ev[EVENTS];
	bool more = false;
	char name[16];
	snprintf(name, sizeof(name), "http-%u", (unsigned)(l - d->loops));
	alive_enter(name);
	while (!atomic_load(&d->stop)) {
		int64_t now = now_ms();
		int timeout = more ? 0 : 1000;
		if (l->pend) {
			int64_t t = l->pend->deadline_ms - now;
			timeout = t < 0 ? 0 : t < timeout ? (int)t : timeout;
		}
		if (l->hs_wait && l->hs_run) {
			/* when the oldest handshake under way gives up its slot */
			int64_t t = l->hs_run->hs_since + HANDSHAKE_WAIT_MS - now;
			timeout = t < 0 ? 0 : t < timeout ? (int)t : timeout;
		}
		alive_park(timeout);
		int n = epoll_wait(l->ep, ev, EVENTS, timeout);
		alive_unpark();
		if (n < 0 && errno != EINTR)
			break;
		for (int i = 0; i < n; i++) {
			void *p = ev[i].data.ptr;
			if (p == &listen_marker) {
				accept_some(l);
				continue;
			}
			if (p == &wake_marker) {
				uint64_t v;
				ssize_t r = read(l->evfd, &v, sizeof(v));
				(void)r;
				/* the other loops' requests for room */
				for (unsigned k = atomic_exchange(&l->evict, 0); k && l->pend; k--) {
					atomic_fetch_add(&d->evicted, 1);
					conn_close(l->pend);
				}
				evict_asked(l);
				continue;
			}
			struct http_conn *c = p;
			if (c->dead)
				continue;
			uint32_t e = ev[i].events;
			if ((e & (EPOLLERR | EPOLLHUP)) && !(e & (EPOLLIN | EPOLLOUT))) {
				conn_close(c);
				continue;
			}
			switch (c->st) {
			case S_TLS:
				handshake(c);
				break;
			case S_HEAD:
			case S_BODY:
				if (e & (EPOLLIN | EPOLLHUP | EPOLLERR))
					process_input(c);
				else if ((e & EPOLLOUT) && send_out(c) < 0)
					conn_close(c);
				else if (!c->out.len)
					set_ev(c, EPOLLIN);
				break;
			case S_SEND:
				if (e & EPOLLOUT)
					flush(c);
				else if (e & (EPOLLHUP | EPOLLERR))
					conn_close(c);
				break;
			case S_APP:
				if (e & (EPOLLHUP | EPOLLERR))
					conn_close(c);
				else
					set_ev(c, 0);   /* not read while the application has it */
				break;
			}
		}
		more = run_wakes(l);
		hs_run_waiting(l, now_ms());
		sweep(l, now_ms());
		bury(l);
	}
	while (l->all)
		conn_close(l->all);
	bury(l);
	alive_leave();
	return NULL;
}

/* ---- the server ----------------------------------------------------------- */

struct httpd *httpd_start(const struct httpd_config *cfg, const struct httpd_app *app, char *err, size_t errlen)
{
	struct httpd *d = xcalloc(1, sizeof(*d));
	d->cfg = *cfg;
	d->app = *app;
	if (!d->cfg.threads)
		d->cfg.threads = 1;
	if (!d->cfg.max_header_bytes)
		d->cfg.max_header_bytes = 16384;
	if (!d->cfg.header_timeout_ms)
		d->cfg.header_timeout_ms = 10000;
	if (!d->cfg.idle_timeout_s)
		d->cfg.idle_timeout_s = 30;
	atomic_init(&d->listen_fd, cfg->listen_fd);
	pthread_mutex_init(&d->addr_lock, NULL);
	d->nloops = d->cfg.threads;
	d->loops = xcalloc(d->nloops, sizeof(*d->loops));
	for (unsigned i = 0; i < d->nloops; i++) {
		struct loop *l = &d->loops[i];
		l->d = d;
		l->ep = l->evfd = -1;
		l->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		pthread_mutex_init(&l->lock, NULL);
		l->scratch = xmalloc(SCRATCH);
		l->ep = epoll_create1(EPOLL_CLOEXEC);
		l->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		struct epoll_event le = { .events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = &listen_marker };
		struct epoll_event we = { .events = EPOLLIN, .data.ptr = &wake_marker };
		if (l->ep < 0 || l->evfd < 0 || epoll_ctl(l->ep, EPOLL_CTL_ADD, cfg->listen_fd, &le) < 0 ||
		    epoll_ctl(l->ep, EPOLL_CTL_ADD, l->evfd, &we) < 0) {
			snprintf(err, errlen, "cannot set up the HTTP loop: %s", strerror(errno));
			httpd_stop(d);
			return NULL;
		}
	}
	for (unsigned i = 0; i < d->nloops; i++) {
		struct loop *l = &d->loops[i];
		if (pthread_create(&l->thread, NULL, loop_main, l) != 0) {
			snprintf(err, errlen, "cannot start an HTTP thread: %s", strerror(errno));
			httpd_stop(d);
			return NULL;
		}
		l->started = true;
	}
	return d;
}


void httpd_quiesce(struct httpd *d)
{
	if (!d)
		return;
	int fd = atomic_exchange(&d->listen_fd, -1);
	if (fd < 0)
		return;
	for (unsigned i = 0; i < d->nloops; i++)
		if (d->loops[i].ep >= 0)
			epoll_ctl(d->loops[i].ep, EPOLL_CTL_DEL, fd, NULL);
	close(fd);
}

void httpd_stop(struct httpd *d)
{
	if (!d)
		return;
	httpd_quiesce(d);
	atomic_store(&d->stop, true);
	for (unsigned i = 0; i < d->nloops; i++) {
		struct loop *l = &d->loops[i];
		if (l->evfd >= 0) {
			uint64_t one = 1;
			ssize_t w = write(l->evfd, &one, sizeof(one));
			(void)w;
		}
	}
	for (unsigned i = 0; i < d->nloops; i++) {
		struct loop *l = &d->loops[i];
		if (l->started)
			pthread_join(l->thread, NULL);
		if (l->ep >= 0)
			close(l->ep);
		if (l->evfd >= 0)
			close(l->evfd);
		if (l->spare_fd >= 0)
			close(l->spare_fd);
		free(l->scratch);
		pthread_mutex_destroy(&l->lock);
	}
	free(d->loops);
	free(d->addrs);
	pthread_mutex_destroy(&d->addr_lock);
	free(d);
}

void httpd_stats(struct httpd *d, struct httpd_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!d)
		return;
	out->accepted = atomic_load(&d->accepted);
	out->open = atomic_load(&d->open);
	out->refused_full = atomic_load(&d->refused_full);
	out->evicted_pending = atomic_load(&d->evicted);
	out->header_timeouts = atomic_load(&d->header_timeouts);
	out->bad_requests = atomic_load(&d->bad_requests);
	out->slow_bodies = atomic_load(&d->slow_bodies);
	out->tls_full = atomic_load(&d->tls_full);
	out->tls_resumed = atomic_load(&d->tls_resumed);
	out->tls_waited = atomic_load(&d->tls_waited);
}
