/* api/ui_session.c: POST /v1/ui/session {"ttl":SECONDS}: a short-lived,
 * read-only console session for the caller (a reader, operator or admin):
 * a reader's token that expires (core/tokens.h), answered once, with the
 * link that opens the console with it in the URL's fragment (which no
 * browser sends, so no server or proxy log holds it). */
#include "api/api.h"
#include "core/core.h"
#include "core/hub.h"
#include "core/tokens.h"
#include "freeze.h"
#include "http/auth.h"
#include "http/http.h"
#include "json.h"
#include "log.h"
#include "util.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>

#define SESSION_REQUEST_MAX 1024

static void wipe_free(void *p)
{
	if (p)
		sodium_memzero(p, strlen(p));
	free(p);
}

int api_ui_session_parse(const char *body, size_t len, int64_t *ttl, char *err, size_t errlen)
{
	*ttl = UI_SESSION_TTL_DEFAULT;
	if (!len)
		return 0;
	struct json_limits lim = { SESSION_REQUEST_MAX, 2 };
	char jerr[256];
	cJSON *doc = json_decode(body, len, &lim, jerr, sizeof(jerr));
	if (!doc) {
		snprintf(err, errlen, "ui session: %s", jerr);
		return -1;
	}
	int rc = -1;
	if (!cJSON_IsObject(doc)) {
		snprintf(err, errlen, "ui session: the body must be a JSON object ({\"ttl\":SECONDS})");
		goto out;
	}
	for (const cJSON *f = doc->child; f; f = f->next) {
		if (strcmp(f->string, "ttl") != 0) {
			snprintf(err, errlen, "ui session: unknown field '%.64s' (the only field is ttl)", f->string);
			goto out;
		}
		double d = f->valuedouble;
		/* the range first: a cast of a huge number is undefined */
		if (!cJSON_IsNumber(f) || !(d >= UI_SESSION_TTL_MIN && d <= UI_SESSION_TTL_MAX) || d != (double)(int64_t)d) {
			snprintf(err, errlen, "ui session: ttl: must be a whole number of seconds in %d..%d (default %d)",
				 UI_SESSION_TTL_MIN, UI_SESSION_TTL_MAX, UI_SESSION_TTL_DEFAULT);
			goto out;
		}
		*ttl = (int64_t)d;
	}
	rc = 0;
out:
	cJSON_Delete(doc);
	return rc;
}

/* "http://HOST/ui/" from the request's Host (https under TLS); "/ui/"
 * when the Host is absent or holds more than a host and port. */
static void base_url(struct api *p, struct http_conn *c, struct buf *out)
{
	const char *host = http_header(c, "Host");
	size_t n = host ? strlen(host) : 0;
	if (!n || n > 255 || strspn(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]") != n) {
		buf_puts(out, "/ui/");
		return;
	}
	buf_printf(out, "%s://%s/ui/", auth_is_tls(p->auth) ? "https" : "http", host);
}

enum http_result api_ui_session(struct api *p, struct http_conn *c, struct request *r)
{
	struct principal who;
	enum http_result ret;
	if (!auth_allow(p->auth, c, ROLE_READER, &who, &ret))
		return ret;
	if (who.role == ROLE_RELAY)
		return http_send_error(c, HTTP_FORBIDDEN, "ui session: a relay's credential may not open one; "
				       "use a reader, operator or admin credential");
	if (who.session)
		return http_send_error(c, HTTP_FORBIDDEN, "ui session: a console session may not open another "
				       "(it would outlive its end); run 'tetherctl ui' with a reader, operator or admin "
				       "credential");
	char err[512];
	int64_t ttl;
	if (r->body.len > SESSION_REQUEST_MAX)
		return http_send_error(c, HTTP_CONTENT_TOO_LARGE, "ui session: body exceeds %d bytes", SESSION_REQUEST_MAX);
	if (api_ui_session_parse(r->body.data, r->body.len, &ttl, err, sizeof(err)) < 0)
		return http_send_error(c, HTTP_UNPROCESSABLE_CONTENT, "%s", err);
	int64_t expires = wall_seconds() + ttl;
	char name[TOKEN_NAME_MAX + 1];
	snprintf(name, sizeof(name), "ui session by %.180s", who.author);
	char *token = NULL;
	struct token_info info;
	int made = tokens_create_session(p->core->tokens, expires, name, &token, &info, err, sizeof(err));
	if (made == -2)
		return http_send_error(c, HTTP_TOO_MANY_REQUESTS, "ui session: %s", err);
	if (made < 0) {
		log_error("ui: cannot store a console session: %s", err);
		return http_send_error(c, HTTP_INTERNAL_SERVER_ERROR, "ui session: cannot store the session: %s "
				       "(try again once the store answers)", err);
	}
	hub_notify(p->core->hub, hub_version(p->core->hub));   /* relays take the new record */
	char when[32];
	freeze_time_text(expires, when);
	log_info("ui: %s opened console session %s until %s", who.who, info.id, when);
	struct buf b = BUF_INIT, url = BUF_INIT;
	base_url(p, c, &url);
	buf_printf(&b, "{\"id\":\"%s\",\"role\":\"reader\",\"expires\":%lld,\"token\":\"%s\",\"url\":", info.id,
		   (long long)expires, token);
	buf_printf(&url, "#s=%s", token);
	buf_json_string(&b, url.data);
	buf_puts(&b, "}\n");
	sodium_memzero(url.data, url.len);
	buf_release(&url);
	sodium_memzero(token, strlen(token));
	free(token);
	size_t len;
	char *data = buf_detach(&b, &len);
	struct http_response *resp = http_response_buffer(data, len, wipe_free);
	if (!resp) {
		wipe_free(data);
		return HTTP_NO;
	}
	http_response_header(resp, HTTP_HEADER_CONTENT_TYPE, "application/json");
	http_response_header(resp, HTTP_HEADER_CACHE_CONTROL, "no-store");
	return http_queue(c, HTTP_CREATED, resp);
}
