/* api/tokens.c: token management for admins: POST /v1/tokens makes one
 * (for a node, or a role) and answers with it once; GET /v1/tokens lists
 * them (never a secret nor a hash); DELETE /v1/tokens/{id} revokes one at
 * once and closes the streams and long-polls that use it. */
#include "api/api.h"
#include "core/core.h"
#include "core/hub.h"
#include "core/nodes.h"
#include "core/tokens.h"
#include "http/auth.h"
#include "http/http.h"
#include "json.h"
#include "log.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>

#define TOKEN_REQUEST_MAX 4096

/* Frees an answer that held a token, wiped first (a NUL-terminated text). */
static void wipe_free(void *p)
{
	if (p)
		sodium_memzero(p, strlen(p));
	free(p);
}

static enum http_result create(struct api *p, struct http_conn *c, struct request *r,
			      const struct principal *who)
{
	char err[512];
	if (r->body.len > TOKEN_REQUEST_MAX)
		return http_send_error(c, HTTP_CONTENT_TOO_LARGE, "tokens: body exceeds %d bytes", TOKEN_REQUEST_MAX);
	struct json_limits lim = { TOKEN_REQUEST_MAX, 2 };
	cJSON *doc = json_decode(r->body.data ? r->body.data : "", r->body.len, &lim, err, sizeof(err));
	if (!doc)
		return http_send_error(c, HTTP_BAD_REQUEST, "tokens: %s", err);
	enum http_result ret;
	if (!cJSON_IsObject(doc)) {
		ret = http_send_error(c, HTTP_UNPROCESSABLE_CONTENT, "tokens: body must be a JSON object");
		goto out;
	}
	for (const cJSON *f = doc->child; f; f = f->next) {
		if (strcmp(f->string, "node") != 0 && strcmp(f->string, "role") != 0 && strcmp(f->string, "name") != 0) {
			ret = http_send_error(c, HTTP_UNPROCESSABLE_CONTENT,
					      "tokens: unknown field '%.64s' (expected node, role, name)", f->string);
			goto out;
		}
	}
	const cJSON *nf = cJSON_GetObjectItemCaseSensitive(doc, "node");
	const cJSON *rf = cJSON_GetObjectItemCaseSensitive(doc, "role");
	const cJSON *mf = cJSON_GetObjectItemCaseSensitive(doc, "name");
	if ((nf != NULL) == (rf != NULL)) {
		ret = http_send_error(c, HTTP_UNPROCESSABLE_CONTENT,
				      "tokens: give either node (a node's token) or role (admin, operator, reader, relay)");
		goto out;
	}
	const char *node = NULL, *name = "";
	enum role role = ROLE_NODE;
	if (nf) {
		node = cJSON_IsString(nf) ? nf->valuestring : NULL;
		if (!node || !nodes_id_valid(node)) {
			ret = http_send_error(c, HTTP_UNPROCESSABLE_CONTENT,
					      "tokens: node must be a string matching [A-Za-z0-9._-]{1,200}");
			goto out;
		}
	} else {
		role = role_parse(cJSON_IsString(rf) ? rf->valuestring : NULL);
		if (role == ROLE_NONE) {
			ret = http_send_error(c, HTTP_UNPROCESSABLE_CONTENT,
					      "tokens: role must be \"admin\", \"operator\", \"reader\" or \"relay\"");
			goto out;
		}
	}
	if (mf) {
		if (!cJSON_IsString(mf) || strlen(mf->valuestring) > TOKEN_NAME_MAX) {
			ret = http_send_error(c, HTTP_UNPROCESSABLE_CONTENT,
					      "tokens: name must be a string of at most %d bytes", TOKEN_NAME_MAX);
			goto out;
		}
		for (const unsigned char *q = (const unsigned char *)mf->valuestring; *q; q++) {
			if (*q < 0x20 || *q == 0x7f) {
				ret = http_send_error(c, HTTP_UNPROCESSABLE_CONTENT,
						      "tokens: name must not hold control characters");
				goto out;
			}
		}
		name = mf->valuestring;
	}
	char *token = NULL;
	struct token_info info;
	if (tokens_create(p->core->tokens, role, node, name, &token, &info, err, sizeof(err)) < 0) {
		log_error("tokens: cannot store a new token: %s", err);
		ret = http_send_error(c, HTTP_INTERNAL_SERVER_ERROR, "tokens: cannot store the token: %s", err);
		goto out;
	}
	hub_notify(p->core->hub, hub_version(p->core->hub));   /* relays take the new record */
	if (role == ROLE_NODE)
		log_info("tokens: %s made token %s for node %s", who->who, info.id, node);
	else
		log_info("tokens: %s made token %s (%s)", who->who, info.id, role_name(role));
	struct buf b = BUF_INIT;
	buf_printf(&b, "{\"id\":\"%s\",\"role\":\"%s\",", info.id, role_name(role));
	if (node) {
		buf_puts(&b, "\"node\":");
		buf_json_string(&b, node);
		buf_putc(&b, ',');
	}
	buf_puts(&b, "\"name\":");
	buf_json_string(&b, info.name);
	buf_printf(&b, ",\"token\":\"%s\"}", token);
	sodium_memzero(token, strlen(token));
	free(token);
	buf_putc(&b, '\n');
	/* the body goes out once, never cached by anything in between, and
	 * is wiped when the server is done with it */
	size_t len;
	char *data = buf_detach(&b, &len);
	struct http_response *resp = http_response_buffer(data, len, wipe_free);
	if (!resp) {
		wipe_free(data);
		ret = HTTP_NO;
		goto out;
	}
	http_response_header(resp, HTTP_HEADER_CONTENT_TYPE, "application/json");
	http_response_header(resp, HTTP_HEADER_CACHE_CONTROL, "no-store");
	ret = http_queue(c, HTTP_CREATED, resp);
out:
	cJSON_Delete(doc);
	return ret;
}

enum http_result api_tokens(struct api *p, struct http_conn *c, struct request *r, const char *method,
			   const char *id)
{
	struct principal who;
	enum http_result ret;
	if (!auth_allow(p->auth, c, ROLE_ADMIN, &who, &ret))
		return ret;
	if (!id) {
		if (strcmp(method, "POST") == 0)
			return create(p, c, r, &who);
		struct buf b = BUF_INIT;
		tokens_to_json(p->core->tokens, &b);
		return http_send_json(c, HTTP_OK, &b);
	}
	if (strlen(id) != TOKEN_ID_LEN || strspn(id, "0123456789abcdef") != TOKEN_ID_LEN)
		return http_send_error(c, HTTP_BAD_REQUEST, "tokens: an id is %d lower-case hex digits", TOKEN_ID_LEN);
	char err[512];
	int rc = tokens_revoke(p->core->tokens, id, err, sizeof(err));
	if (rc < 0) {
		log_error("tokens: cannot revoke %s: %s", id, err);
		return http_send_error(c, HTTP_INTERNAL_SERVER_ERROR, "tokens: cannot revoke: %s", err);
	}
	if (rc == 0)
		return http_send_error(c, HTTP_NOT_FOUND, "no token '%s'", id);
	size_t closed = hub_close_token(p->core->hub, id);
	hub_notify(p->core->hub, hub_version(p->core->hub));   /* relays take the revocation */
	log_info("tokens: %s revoked token %s (%zu open connections closed)", who.who, id, closed);
	struct buf b = BUF_INIT;
	buf_printf(&b, "{\"id\":\"%s\",\"revoked\":true,\"closed\":%zu}", id, closed);
	return http_send_json(c, HTTP_OK, &b);
}
