/* api/ui.c: GET /ui/ and /ui/FILE, the fleet console: static files compiled
 * into the binary (ui_assets.h). They hold no data, so they need no
 * credential; the page asks for a reader token and sends it to the API. */
#include "api/api.h"
#include "api/ui_assets.h"
#include "core/core.h"
#include "http/http.h"

#include <string.h>

static const char *type_of(const char *name)
{
	const char *dot = strrchr(name, '.');
	if (dot && strcmp(dot, ".html") == 0)
		return "text/html; charset=utf-8";
	if (dot && strcmp(dot, ".css") == 0)
		return "text/css; charset=utf-8";
	if (dot && strcmp(dot, ".js") == 0)
		return "text/javascript; charset=utf-8";
	if (dot && strcmp(dot, ".svg") == 0)
		return "image/svg+xml";
	return "application/octet-stream";
}

enum http_result api_ui(struct api *p, struct http_conn *c, const char *rest)
{
	(void)p;
	const char *name = *rest ? rest : "index.html";
	for (const struct ui_asset *a = ui_assets; a->name; a++) {
		if (strcmp(a->name, name) != 0)
			continue;
		struct buf b = BUF_INIT;
		buf_append(&b, a->data, a->len);
		static const char *const headers[] = {
			"Cache-Control", "no-cache",
			"Content-Security-Policy",
			"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
			"connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'",
			"X-Content-Type-Options", "nosniff",
			"Referrer-Policy", "no-referrer",
			NULL
		};
		return http_send_headers(c, HTTP_OK, type_of(a->name), &b, true, headers);
	}
	return http_send_error(c, HTTP_NOT_FOUND, "no such file in the console: %.200s", name);
}
