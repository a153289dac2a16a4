/* net/http_request.c: one request as http-parser reads it (see
 * net/http_request.h). */
#include "net/http_request.h"
#include "util.h"
#include "xmalloc.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static http_parser_settings settings;

/* Unescapes %HH in place, except %00: a NUL would cut the C string short
 * ("cluster/a%00b" would name "cluster/a"); it stays the text "%00", which
 * no name, node id, label, prefix or number accepts. */
static void unescape_no_nul(char *s)
{
	char *w = s;
	for (const char *r = s; *r;) {
		int hi, lo;
		if (r[0] == '%' && (hi = hex_digit(r[1])) >= 0 && (lo = hex_digit(r[2])) >= 0 && (hi | lo) != 0) {
			*w++ = (char)(hi * 16 + lo);
			r += 3;
		} else {
			*w++ = *r++;
		}
	}
	*w = '\0';
}

static bool arena_room(struct http_request *r, size_t more)
{
	return r->arena.len + more + 2 <= r->max_head;
}

static int on_message_begin(http_parser *hp)
{
	struct http_request *r = hp->data;
	r->hooks->begin(r->owner);
	return 0;
}

static int on_url(http_parser *hp, const char *at, size_t len)
{
	struct http_request *r = hp->data;
	if (!arena_room(r, len))
		return -1;
	buf_append(&r->arena, at, len);
	r->url_len += (uint32_t)len;
	return 0;
}

static int on_header_field(http_parser *hp, const char *at, size_t len)
{
	struct http_request *r = hp->data;
	if (r->head_done) {
		/* a trailer after a chunked body: it would rewrite headers the
		 * request was judged by */
		r->refused = "trailer fields after a chunked body are not accepted";
		return -1;
	}
	if (!arena_room(r, len))
		return -1;
	if (!r->url_done) {
		buf_putc(&r->arena, '\0');
		r->url_done = true;
	}
	if (r->nh == 0 || r->in_value) {
		/* a new header (a name may come in pieces, across reads) */
		if (r->in_value)
			buf_putc(&r->arena, '\0');   /* ends the value before */
		if (r->nh == HTTP_REQUEST_MAX_HEADERS)
			return -1;
		if (r->nh == r->hcap) {
			r->hcap = r->hcap ? r->hcap * 2 : 16;
			r->h = xrealloc(r->h, r->hcap * sizeof(*r->h));
		}
		r->h[r->nh++] = (struct http_hoff){ (uint32_t)r->arena.len, 0 };
		r->in_value = false;
	}
	buf_append(&r->arena, at, len);
	return 0;
}

static int on_header_value(http_parser *hp, const char *at, size_t len)
{
	struct http_request *r = hp->data;
	if (!arena_room(r, len) || r->nh == 0)
		return -1;
	if (!r->in_value) {
		buf_putc(&r->arena, '\0');   /* ends the name */
		r->h[r->nh - 1].value = (uint32_t)r->arena.len;
		r->in_value = true;
	} else if (!r->value_cut) {
		/* more of a value whose piece before ended inside the input,
		 * not at its end: a line folded onto it (obs-fold) */
		r->refused = "a header value folded over two lines (obs-fold)";
		return -1;
	}
	buf_append(&r->arena, at, len);
	r->value_cut = at + len == r->feed_end;   /* the rest comes with the next read */
	return 0;
}

static void add_query(struct http_request *r, uint32_t key, uint32_t value)
{
	if (r->nq == r->qcap) {
		r->qcap = r->qcap ? r->qcap * 2 : 8;
		r->q = xrealloc(r->q, r->qcap * sizeof(*r->q));
	}
	r->q[r->nq++] = (struct http_hoff){ key, value };
}

/* Splits the URL into the path and the query's parameters, unescaped. */
static void split_url(struct http_request *r)
{
	if (!r->url_done) {
		buf_putc(&r->arena, '\0');
		r->url_done = true;
	}
	char *u = r->arena.data;
	if (!u) {
		buf_putc(&r->arena, '\0');
		u = r->arena.data;
	}
	char *qm = memchr(u, '?', r->url_len);
	char *frag = memchr(u, '#', r->url_len);
	if (frag)
		*frag = '\0';
	if (frag && qm && frag < qm)
		qm = NULL;
	r->path = 0;
	if (qm) {
		*qm = '\0';
		char *s = qm + 1;
		while (*s) {
			char *amp = strchr(s, '&');
			if (amp)
				*amp = '\0';
			if (*s) {
				char *eq = strchr(s, '=');
				char *val = eq ? eq + 1 : s + strlen(s);   /* "k": an empty value */
				if (eq)
					*eq = '\0';
				unescape_no_nul(s);
				if (eq)
					unescape_no_nul(val);
				add_query(r, (uint32_t)(s - u), (uint32_t)(val - u));
			}
			if (!amp)
				break;
			s = amp + 1;
		}
	}
	unescape_no_nul(u);
}

/* RFC 9110's tchar: what a field name may hold. (Debian's http-parser is
 * built lenient: it takes a space inside a name, so "Content-Length : 5"
 * would be a header it does not frame by.) */
static bool is_tchar(unsigned char ch)
{
	return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

/* The head as RFC 9112 wants it of a server behind caches: names are
 * tokens, and no value is folded over lines (obs-fold). */
static const char *head_refused(const struct http_request *r)
{
	unsigned auths = 0, hosts = 0;
	for (unsigned i = 0; i < r->nh; i++) {
		const char *name = r->arena.data + r->h[i].name;
		auths += strcasecmp(name, "Authorization") == 0;
		hosts += strcasecmp(name, "Host") == 0;
		if (auths > 1 || hosts > 1)
			return "a repeated Authorization or Host header (which one counts is ambiguous)";
		const unsigned char *n = (const unsigned char *)r->arena.data + r->h[i].name;
		if (!*n)
			return "a header with an empty name";
		for (; *n; n++)
			if (!is_tchar(*n))
				return *n == ' ' || *n == '\t' ? "white space in a header's name (or before its colon)"
								 : "a character that is not allowed in a header's name";
		if (strpbrk(r->arena.data + r->h[i].value, "\r\n"))
			return "a line break in a header value";
	}
	return NULL;
}

static int on_headers_complete(http_parser *hp)
{
	struct http_request *r = hp->data;
	if (r->in_value) {
		buf_putc(&r->arena, '\0');
	} else if (r->nh) {
		/* a name the parser ended with no value call: an empty value */
		buf_putc(&r->arena, '\0');
		r->h[r->nh - 1].value = (uint32_t)r->arena.len - 1;
	}
	r->in_value = false;
	if ((r->refused = head_refused(r)))
		return -1;   /* the parser stops: a 400 */
	r->head_done = true;
	split_url(r);
	r->hooks->head(r->owner);
	return 0;
}

static int on_body(http_parser *hp, const char *at, size_t len)
{
	struct http_request *r = hp->data;
	r->hooks->body(r->owner, at, len);
	return 0;
}

static int on_message_complete(http_parser *hp)
{
	struct http_request *r = hp->data;
	http_parser_pause(hp, 1);   /* one request at a time */
	r->hooks->end(r->owner);
	return 0;
}

static void settings_init(void)
{
	http_parser_settings_init(&settings);
	settings.on_message_begin = on_message_begin;
	settings.on_url = on_url;
	settings.on_header_field = on_header_field;
	settings.on_header_value = on_header_value;
	settings.on_headers_complete = on_headers_complete;
	settings.on_body = on_body;
	settings.on_message_complete = on_message_complete;
	/* the arena bounds a head; this only bounds the parser's own count */
	http_parser_set_max_header_size(1u << 20);
}

void http_request_init(struct http_request *r, const struct http_request_hooks *hooks, void *owner,
		       size_t max_head)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, settings_init);
	memset(r, 0, sizeof(*r));
	r->hooks = hooks;
	r->owner = owner;
	r->max_head = max_head;
	buf_init(&r->arena);
	http_parser_init(&r->hp, HTTP_REQUEST);
	r->hp.data = r;
}

void http_request_reset(struct http_request *r)
{
	buf_shrink(&r->arena, 1024);
	r->url_len = r->path = 0;
	r->url_done = r->in_value = false;
	r->nh = r->nq = 0;
	r->refused = NULL;
	r->head_done = false;
	http_parser_init(&r->hp, HTTP_REQUEST);
	r->hp.data = r;
}

void http_request_free(struct http_request *r)
{
	buf_release(&r->arena);
	free(r->h);
	free(r->q);
	r->h = r->q = NULL;
	r->nh = r->nq = r->hcap = r->qcap = 0;
}

size_t http_request_feed(struct http_request *r, const char *data, size_t len, unsigned *status, const char **msg)
{
	*status = 0;
	*msg = NULL;
	if (HTTP_PARSER_ERRNO(&r->hp) == HPE_PAUSED)
		http_parser_pause(&r->hp, 0);
	r->feed_end = data + len;
	size_t n = http_parser_execute(&r->hp, &settings, data, len);
	enum http_errno e = HTTP_PARSER_ERRNO(&r->hp);
	if (e == HPE_OK || e == HPE_PAUSED)
		return n;
	if ((e == HPE_CB_headers_complete || e == HPE_CB_header_value || e == HPE_CB_header_field) && r->refused) {
		*status = 400;
		*msg = r->refused;
	} else if (e == HPE_HEADER_OVERFLOW || e == HPE_CB_url || e == HPE_CB_header_field || e == HPE_CB_header_value) {
		*status = 431;
		*msg = "the request line and headers are too large (or too many headers)";
	} else {
		*status = 400;
		*msg = http_errno_description(e);
	}
	return n;
}

void http_request_pause(struct http_request *r)
{
	http_parser_pause(&r->hp, 1);
}

const char *http_request_method(const struct http_request *r)
{
	return http_method_str((enum http_method)r->hp.method);
}

bool http_request_is_head(const struct http_request *r)
{
	return r->hp.method == HTTP_HEAD;
}

bool http_request_keep_alive(const struct http_request *r)
{
	return http_should_keep_alive(&r->hp) && !r->hp.upgrade;
}

bool http_request_http11(const struct http_request *r)
{
	return r->hp.http_major == 1 && r->hp.http_minor >= 1;
}

bool http_request_has_body(const struct http_request *r)
{
	return (r->hp.flags & F_CHUNKED) || ((r->hp.flags & F_CONTENTLENGTH) && r->hp.content_length > 0);
}

int64_t http_request_content_length(const struct http_request *r)
{
	if ((r->hp.flags & F_CHUNKED) || !(r->hp.flags & F_CONTENTLENGTH))
		return -1;
	/* past INT64_MAX: as large as can be, never negative */
	return r->hp.content_length > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)r->hp.content_length;
}

const char *http_request_path(const struct http_request *r)
{
	return r->arena.data ? r->arena.data + r->path : "";
}

const char *http_request_header(const struct http_request *r, const char *name)
{
	for (unsigned i = 0; i < r->nh; i++)
		if (r->h[i].value && strcasecmp(r->arena.data + r->h[i].name, name) == 0)
			return r->arena.data + r->h[i].value;
	return NULL;
}

const char *http_request_query(const struct http_request *r, const char *key)
{
	for (unsigned i = 0; i < r->nq; i++)
		if (strcmp(r->arena.data + r->q[i].name, key) == 0)
			return r->arena.data + r->q[i].value;
	return NULL;
}
