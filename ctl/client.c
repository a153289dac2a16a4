/* client.c: libcurl requests to the plane's admin API, the one place
 * that turns a failed request into the message tetherctl prints, and when
 * a failed one may go to the next plane of --plane A,B (see client.h). */
#include "client.h"
#include "urllist.h"
#include "credentials.h"
#include "json.h"
#include "log.h"
#include "util.h"
#include "xmalloc.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct client {
	CURL *curl;
	char *base;             /* without trailing slashes */
	char *ca_file, *cert, *key;
	char *token;            /* bearer token, or NULL */
	char *header[2];        /* extra header lines on writes (X-Tether-Message, -Override), or NULL */
	struct buf error;       /* message of the last failure */
	struct buf *sink;       /* the body of the answer being received */
	bool too_big;           /* the last answer passed CLIENT_ANSWER_MAX */
	CURLcode code;          /* the last request's transfer result */
	long status;            /* ... its HTTP status (0: no answer) */
	bool sent;              /* ... whether any of it went out */
	char curl_err[CURL_ERROR_SIZE];
	/* a stream (client_stream): a 2xx answer's bytes go to on_chunk */
	client_chunk_fn *on_chunk;
	void *chunk_ctx;
	const char *extra_header;
	long idle_s;
};

int client_global_init(void)
{
	return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1;
}

void client_global_cleanup(void)
{
	curl_global_cleanup();
}

static char *dup_or_null(const char *s)
{
	return s ? xstrdup(s) : NULL;
}

struct client *client_new(const char *base_url, const struct credentials *cr)
{
	CURL *curl = curl_easy_init();
	if (!curl)
		return NULL;
	struct client *c = xcalloc(1, sizeof(*c));
	size_t n = strlen(base_url);
	while (n > 0 && base_url[n - 1] == '/')
		n--;
	c->curl = curl;
	c->base = xstrndup(base_url, n);
	c->ca_file = dup_or_null(cr ? cr->ca_file : NULL);
	c->cert = dup_or_null(cr ? cr->cert : NULL);
	c->key = dup_or_null(cr ? cr->key : NULL);
	c->token = dup_or_null(cr ? cr->token : NULL);
	buf_init(&c->error);
	buf_puts(&c->error, "no request made");
	return c;
}

void client_free(struct client *c)
{
	if (!c)
		return;
	curl_easy_cleanup(c->curl);
	free(c->base);
	free(c->ca_file);
	free(c->cert);
	free(c->key);
	free(c->header[0]);
	free(c->header[1]);
	credentials_forget(c->token);   /* a secret: not left in freed memory */
	buf_release(&c->error);
	free(c);
}

const char *client_error(const struct client *c)
{
	return c->error.data ? c->error.data : "unknown error";
}

static size_t on_data(char *data, size_t size, size_t nmemb, void *userdata)
{
	struct client *c = userdata;
	size_t n = size * nmemb;
	long status = 0;
	if (c->on_chunk && curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status) == CURLE_OK &&
	    status >= 200 && status <= 299)
		return c->on_chunk(c->chunk_ctx, data, n) == 0 ? n : 0;
	if (c->sink->len + n > CLIENT_ANSWER_MAX) {
		c->too_big = true;
		return 0;   /* makes libcurl stop with CURLE_WRITE_ERROR */
	}
	buf_append(c->sink, data, n);
	return n;
}

/* The plane's answer to a refused request: {"error": "..."}, or anything
 * a proxy in between may say. */
static void set_refusal(struct client *c, const struct client_answer *ans)
{
	char err[256];
	struct json_limits lim = { 1 << 20, 8 };
	cJSON *doc = NULL;
	if (ans->body.len)
		doc = json_decode(ans->body.data, ans->body.len, &lim, err, sizeof(err));
	const char *text = doc ? json_get_string(doc, "error") : NULL;
	buf_reset(&c->error);
	if (text && *text) {
		buf_puts(&c->error, text);
	} else {
		buf_printf(&c->error, "the plane at %s answered HTTP %ld", c->base, ans->status);
		/* a first line of a non-JSON body, when it looks like text */
		size_t n = ans->body.len ? strcspn(ans->body.data, "\r\n") : 0;
		bool printable = n > 0;
		for (size_t i = 0; i < n && printable; i++)
			printable = (unsigned char)ans->body.data[i] >= 0x20 && ans->body.data[i] != 0x7f;
		if (printable && !doc)
			buf_printf(&c->error, ": %.*s", (int)(n > 200 ? 200 : n), ans->body.data);
	}
	cJSON_Delete(doc);
}

void client_set_header(struct client *c, const char *line)
{
	if (!line) {
		free(c->header[0]);
		free(c->header[1]);
		c->header[0] = c->header[1] = NULL;
		return;
	}
	/* a second line goes beside the first (--message and --override) */
	int i = c->header[0] ? 1 : 0;
	free(c->header[i]);
	c->header[i] = xstrdup(line);
}

/* The answer's Tether-Stale header, if any. */
static size_t on_header(char *ptr, size_t size, size_t n, void *ud)
{
	struct client_answer *ans = ud;
	size_t len = size * n;
	static const char name[] = "Tether-Stale:";
	if (len > sizeof(name) - 1 && strncasecmp(ptr, name, sizeof(name) - 1) == 0) {
		size_t s = sizeof(name) - 1, e = len;
		while (s < e && (ptr[s] == ' ' || ptr[s] == '\t'))
			s++;
		while (e > s && (ptr[e - 1] == '\r' || ptr[e - 1] == '\n' || ptr[e - 1] == ' '))
			e--;
		snprintf(ans->stale, sizeof(ans->stale), "%.*s", (int)(e - s), ptr + s);
	}
	return len;
}

int client_request(struct client *c, const char *method, const char *path, const char *body,
		   size_t body_len, struct client_answer *ans)
{
	struct curl_slist *headers = NULL;
	char *url = xasprintf("%s%s", c->base, path);
	CURL *h = c->curl;
	int rc = -1;

	ans->status = 0;
	ans->stale[0] = '\0';
	buf_init(&ans->body);
	c->sink = &ans->body;
	c->too_big = false;
	c->code = CURLE_OK;
	c->status = 0;
	c->sent = false;
	c->curl_err[0] = '\0';

	curl_easy_reset(h);   /* keeps the connection for the next request */
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, CLIENT_CONNECT_TIMEOUT_MS);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->on_chunk ? 0L : CLIENT_TIMEOUT_MS);
	if (c->on_chunk) {   /* a stream: dead when silent for idle_s */
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, c->idle_s);
	}
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, c->curl_err);
	/* names like "cluster/.." are the plane's to judge, not curl's to fold */
	curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);
	curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
	curl_easy_setopt(h, CURLOPT_USERAGENT, "tetherctl/" PACKAGE_VERSION);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
#else
	curl_easy_setopt(h, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, ans);

	headers = curl_slist_append(headers, c->on_chunk ? "Accept: text/event-stream" : "Accept: application/json");
	if (c->extra_header)
		headers = curl_slist_append(headers, c->extra_header);
	struct credentials cr = { c->ca_file, c->cert, c->key, c->token };
	headers = credentials_apply(h, &cr, headers);
	if (strcmp(method, "GET") == 0) {
		curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
	} else {
		for (int i = 0; i < 2; i++)
			if (c->header[i])
				headers = curl_slist_append(headers, c->header[i]);
		if (body || strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0) {
			curl_easy_setopt(h, CURLOPT_POSTFIELDS, body ? body : "");
			curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? body_len : 0));
			headers = curl_slist_append(headers, "Content-Type: application/json");
		}
		if (strcmp(method, "POST") != 0)
			curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	}
	if (!headers) {
		buf_reset(&c->error);
		buf_puts(&c->error, "cannot build the request headers");
		goto fail;
	}
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);

	log_debug("%s %s (%zu bytes)", method, url, body ? body_len : (size_t)0);
	CURLcode cc = curl_easy_perform(h);
	long request_size = 0;
	curl_easy_getinfo(h, CURLINFO_REQUEST_SIZE, &request_size);
	c->code = cc;
	c->sent = request_size > 0;
	if (cc != CURLE_OK) {
		buf_reset(&c->error);
		if (c->too_big)
			buf_printf(&c->error, "the answer of the plane at %s exceeds %zu bytes", c->base,
				   CLIENT_ANSWER_MAX);
		else
			buf_printf(&c->error, "cannot reach the plane at %s: %s", c->base,
				   c->curl_err[0] ? c->curl_err : curl_easy_strerror(cc));
		buf_release(&ans->body);
		goto fail;
	}
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &ans->status);
	c->status = ans->status;
	log_debug("HTTP %ld (%zu bytes)", ans->status, ans->body.len);
	if (!ans->body.data)
		buf_puts(&ans->body, "");   /* callers may read data as a string */
	if (ans->status < 200 || ans->status > 299) {
		set_refusal(c, ans);
		goto fail;
	}
	rc = 0;
fail:
	c->sink = NULL;
	credentials_free_headers(headers);
	free(url);
	return rc;
}

int client_stream(struct client *c, const char *path, const char *header, long idle_s, client_chunk_fn *fn,
		  void *ctx, struct client_answer *ans)
{
	c->on_chunk = fn;
	c->chunk_ctx = ctx;
	c->extra_header = header;
	c->idle_s = idle_s;
	int rc = client_request(c, "GET", path, NULL, 0, ans);
	c->on_chunk = NULL;
	c->extra_header = NULL;
	return rc;
}

bool client_try_next(const struct client *c, const char *method, bool *unsure)
{
	bool safe = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
	*unsure = false;
	if (c->code == CURLE_OK) {
		/* an answer: 4xx and most 5xx are the plane's word, the same
		 * from every replica. 503 is a replica that cannot serve (read
		 * only without quorum, shutting down): it did nothing, so even
		 * a write may go on. 502 and 504 come from a gateway that may
		 * have passed the request on before it gave up: a read may go
		 * on, a write may have been done */
		if (c->status == 503)
			return true;
		if (c->status == 502 || c->status == 504) {
			*unsure = !safe;
			return safe;
		}
		return false;
	}
	if (c->too_big)
		return false;
	/* no connection (refused, no such host, a connect timeout, a TLS
	 * handshake that failed): nothing was sent, anything may go to the
	 * next plane. Once the request went out without an answer (a
	 * timeout, a reset) the plane may have acted on it: a read is asked
	 * again elsewhere, a write (POST, PUT, DELETE) is not -- sent twice
	 * it could make two versions, or a 404 for a delete that was done */
	if (!c->sent)
		return true;
	*unsure = !safe;
	return safe;
}

int client_planes(const char *list, char **urls, char *err, size_t errlen)
{
	return urllist_parse(list, urls, CLIENT_MAX_PLANES, err, errlen);
}

void client_planes_free(char **urls, int n)
{
	urllist_free(urls, n);
}

void client_escape(struct buf *out, const char *s, bool keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
		    *p == '.' || *p == '_' || *p == '~' || *p == '-' || (keep_slash && *p == '/')) {
			buf_putc(out, (char)*p);
		} else {
			buf_putc(out, '%');
			buf_putc(out, hex[*p >> 4]);
			buf_putc(out, hex[*p & 15]);
		}
	}
}
