/* api/secrets.c: sealed secrets (docs/protocol.md "Sealed secrets"): a
 * node's key (POST and DELETE /v1/nodes/ID/key), what a writer needs to
 * seal (GET /v1/secrets) and a node's wraps (GET /v1/wraps). */
#include "api/api.h"
#include "core/core.h"
#include "core/events.h"
#include "core/nodes.h"
#include "core/sealed.h"
#include "core/store.h"
#include "http/auth.h"
#include "http/http.h"
#include "json.h"
#include "log.h"
#include "nodekey.h"
#include "strmap.h"
#include "xmalloc.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>

#define WRAPS_NAMES_MAX 1000

static enum http_result key_post(struct api *p, struct http_conn *c, struct request *r, const char *id)
{
	struct principal who;
	enum http_result ret;
	if (!auth_allow_node_or_admin(p->auth, c, id, &who, &ret))
		return ret;
	const char *text = r->body.data ? r->body.data : "";
	size_t len = r->body.len;
	char err[600];
	struct buf b = BUF_INIT;
	if (core_is_relay(p->core)) {
		/* the origin judges it: up as a 'k' line with the node's next record */
		unsigned st;
		if (nodes_key_forward(p->core->nodes, id, text, len, NULL, &st, err, sizeof(err)) < 0)
			return http_send_error(c, st, "%s", err);
		buf_puts(&b, "{\"node\":");
		buf_json_string(&b, id);
		buf_puts(&b, ",\"status\":\"forwarded\"}");
		return http_send_json(c, 202, &b);
	}
	struct nodes_key_answer ans;
	if (nodes_key_register(p->core->nodes, id, text, len, NULL, &ans, err, sizeof(err)) < 0) {
		if (ans.http == 403 || ans.http == 409)
			log_warn("node %s: key %s refused: %s", id, ans.kid, err);
		if (!ans.stale_mark)
			return http_send_error(c, ans.http, "%s", err);
		/* the mark the node's next registration must pass: it registers
		 * again once its clock is past it (keyreg.c) */
		buf_puts(&b, "{\"error\":");
		buf_json_string(&b, err);
		buf_printf(&b, ",\"key_at\":%lld}\n", (long long)ans.stale_mark);
		return http_send(c, ans.http, "application/json", &b, false);
	}
	if (ans.changed)
		events_key(p->core->events, id, ans.kid, ans.status);
	buf_puts(&b, "{\"node\":");
	buf_json_string(&b, id);
	buf_puts(&b, ",\"key_id\":");
	buf_json_string(&b, ans.kid);
	buf_printf(&b, ",\"status\":\"%s\"}", ans.status);
	return http_send_json(c, HTTP_OK, &b);
}

static enum http_result key_delete(struct api *p, struct http_conn *c, const char *id)
{
	struct principal who;
	enum http_result ret;
	if (core_is_relay(p->core))
		return http_send_error(c, HTTP_FORBIDDEN, "node %s: a relay never revokes a key; revoke it at the origin "
				       "(tetherctl secrets revoke %s against the origin)", id, id);
	if (!auth_allow(p->auth, c, ROLE_ADMIN, &who, &ret))
		return ret;
	char kid[KEY_ID_LEN + 1] = "";
	int rc = nodes_key_revoke(p->core->nodes, id, kid);
	if (rc < 0)
		return http_send_error(c, HTTP_NOT_FOUND, "no node '%s'", id);
	if (rc > 0)
		return http_send_error(c, HTTP_NOT_FOUND, "node %s has no live key to revoke", id);
	log_info("node %s: key %s revoked by %s", id, kid, who.who);
	events_key(p->core->events, id, kid, "revoked");
	/* the same key live on another node (a copied node.key): revoked there too */
	char **also;
	size_t nalso = nodes_key_revoke_everywhere(p->core->nodes, kid, &also);
	for (size_t i = 0; i < nalso; i++) {
		log_warn("node %s: key %s revoked too: it was node %s's as well (node.key copied between hosts?)", also[i],
			 kid, id);
		events_key(p->core->events, also[i], kid, "revoked");
		free(also[i]);
	}
	free(also);
	struct buf b = BUF_INIT;
	buf_puts(&b, "{\"node\":");
	buf_json_string(&b, id);
	buf_puts(&b, ",\"key_id\":");
	buf_json_string(&b, kid);
	buf_puts(&b, ",\"status\":\"revoked\"}");
	return http_send_json(c, HTTP_OK, &b);
}

enum http_result api_node_key_approve(struct api *p, struct http_conn *c, struct request *r, const char *id)
{
	struct principal who;
	enum http_result ret;
	if (!nodes_id_valid(id))
		return http_send_error(c, HTTP_BAD_REQUEST, "node id '%.64s' must match [A-Za-z0-9._-]{1,200}", id);
	if (core_is_relay(p->core))
		return http_send_error(c, HTTP_FORBIDDEN, "node %s: a relay never approves a key; approve it at the "
				       "origin (tetherctl secrets approve %s KID against the origin)", id, id);
	if (!auth_allow(p->auth, c, ROLE_ADMIN, &who, &ret))
		return ret;
	char err[400];
	struct json_limits lim = { .max_bytes = r->cap, .max_depth = 4 };
	cJSON *doc = json_decode(r->body.data ? r->body.data : "", r->body.len, &lim, err, sizeof(err));
	if (!doc)
		return http_send_error(c, HTTP_BAD_REQUEST, "node %s: key approval: %s", id, err);
	const char *kid = json_get_string(doc, "key_id");
	if (!cJSON_IsObject(doc) || !kid || strlen(kid) != KEY_ID_LEN ||
	    strspn(kid, "0123456789abcdef") != KEY_ID_LEN) {
		cJSON_Delete(doc);
		return http_send_error(c, HTTP_BAD_REQUEST, "node %s: key approval: key_id: required, the pending key's "
				       "id (%d hex digits, as /v1/nodes shows in key_pending)", id, KEY_ID_LEN);
	}
	char k[KEY_ID_LEN + 1];
	snprintf(k, sizeof(k), "%s", kid);
	cJSON_Delete(doc);
	unsigned st = nodes_key_approve(p->core->nodes, id, k, err, sizeof(err));
	if (st != 200)
		return http_send_error(c, st, "%s", err);
	log_info("node %s: key %s approved by %s", id, k, who.who);
	events_key(p->core->events, id, k, "approved");
	struct buf b = BUF_INIT;
	buf_puts(&b, "{\"node\":");
	buf_json_string(&b, id);
	buf_puts(&b, ",\"key_id\":");
	buf_json_string(&b, k);
	buf_puts(&b, ",\"status\":\"approved\"}");
	return http_send_json(c, HTTP_OK, &b);
}

enum http_result api_node_key(struct api *p, struct http_conn *c, struct request *r, const char *method,
			      const char *id)
{
	if (!nodes_id_valid(id))
		return http_send_error(c, HTTP_BAD_REQUEST, "node id '%.64s' must match [A-Za-z0-9._-]{1,200}", id);
	if (strcmp(method, "POST") == 0)
		return key_post(p, c, r, id);
	if (strcmp(method, "DELETE") == 0)
		return key_delete(p, c, id);
	return http_send_error(c, HTTP_METHOD_NOT_ALLOWED, "/v1/nodes/%s/key: POST (register) or DELETE (revoke)", id);
}

static void put_names(struct buf *b, const struct sealed_fleet *f, const size_t *idx, size_t n)
{
	buf_putc(b, '[');
	for (size_t i = 0; i < n; i++) {
		if (i)
			buf_putc(b, ',');
		buf_json_string(b, f->k->live[idx[i]].node);
	}
	buf_putc(b, ']');
}

static bool entry_has(const void *ctx, const char *kid)
{
	return store_wrap(ctx, kid) != NULL;
}

/* One secret's entry of GET /v1/secrets: from the store's wrap index (a
 * sealed secret is one kept with its stored form beside its push form;
 * a damaged one has no index: no id, every node missing). */
static void secret_json(const struct store_entry *e, const struct sealed_fleet *f, size_t *idx, struct buf *b)
{
	bool sealed = e->stored != NULL;
	buf_puts(b, "{\"name\":");
	buf_json_string(b, e->name);
	buf_printf(b, ",\"version\":%llu,\"sealed\":%s,\"id\":", (unsigned long long)e->version,
		   sealed ? "true" : "false");
	const char *id = store_envelope_id(e);
	if (id)
		buf_json_string(b, id);
	else
		buf_puts(b, "null");
	buf_puts(b, ",\"missing\":");
	size_t n = sealed ? sealed_missing_by(f, e->name, entry_has, e, idx) : 0;
	put_names(b, f, idx, n);
	buf_putc(b, '}');
}

/* ?names=N1,N2 of GET /v1/secrets into a set (NULL: every secret); -1
 * with err for a name that is not a secret's. */
static int names_filter(const char *names, struct strmap *set, char **list, char *err, size_t errlen)
{
	*list = NULL;
	if (!names)
		return 0;
	*list = xstrdup(names);
	char *save = NULL;
	size_t count = 0;
	for (char *t = strtok_r(*list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char why[300];
		if (++count > WRAPS_NAMES_MAX) {
			snprintf(err, errlen, "names: at most %d", WRAPS_NAMES_MAX);
			return -1;
		}
		if (strncmp(t, "secret/", 7) != 0 || resource_fullname_check(t, why, sizeof(why)) < 0) {
			snprintf(err, errlen, "names: '%.200s' is not a secret's name (secret/NAME)", t);
			return -1;
		}
		strmap_put(set, t, 1);
	}
	return 0;
}

enum http_result api_secrets(struct api *p, struct http_conn *c)
{
	struct principal who;
	enum http_result ret;
	if (!auth_allow(p->auth, c, ROLE_READER, &who, &ret))
		return ret;
	/* ?names=: only those secrets (a writer sealing one needs one) */
	struct strmap only;
	strmap_init(&only);
	char *names = NULL, ferr[300];
	const char *q = http_query(c, "names");
	if (names_filter(q, &only, &names, ferr, sizeof(ferr)) < 0) {
		strmap_release(&only);
		free(names);
		return http_send_error(c, HTTP_BAD_REQUEST, "%s", ferr);
	}
	struct sealed_fleet f;
	sealed_fleet_get(p->core->nodes, &f);   /* before the store's lock: store, then nodes */
	struct buf b = BUF_INIT;
	const struct sealed_conf *conf = p->core->sealed;
	buf_printf(&b, "{\"sealed_secrets\":%s,\"recovery\":", conf ? "true" : "false");
	if (conf) {
		char pk[sodium_base64_ENCODED_LEN(32, sodium_base64_VARIANT_ORIGINAL)];
		sodium_bin2base64(pk, sizeof(pk), conf->pk, sizeof(conf->pk), sodium_base64_VARIANT_ORIGINAL);
		buf_puts(&b, "{\"key_id\":");
		buf_json_string(&b, conf->kid);
		buf_puts(&b, ",\"key\":");
		buf_json_string(&b, pk);
		buf_putc(&b, '}');
	} else {
		buf_puts(&b, "null");
	}
	buf_puts(&b, ",\"nodes\":[");
	for (size_t i = 0; i < f.k->nlive; i++) {
		const struct nodes_key *k = &f.k->live[i];
		buf_puts(&b, i ? ",{\"node\":" : "{\"node\":");
		buf_json_string(&b, k->node);
		buf_puts(&b, ",\"key_id\":");
		buf_json_string(&b, k->kid);
		buf_puts(&b, ",\"key\":");
		buf_json_string(&b, k->key);
		buf_puts(&b, ",\"key_via\":");   /* "" direct, else the relays it came through */
		buf_json_string(&b, k->via ? k->via : "");
		buf_puts(&b, ",\"sub\":");
		if (k->sub)
			buf_json_string(&b, k->sub);
		else
			buf_puts(&b, "null");
		buf_putc(&b, '}');
	}
	/* keys waiting for an admin (--approve-relay-keys): no sealing target */
	buf_puts(&b, "],\"pending\":[");
	for (size_t i = 0; i < f.k->npending; i++) {
		const struct nodes_key *k = &f.k->pending[i];
		buf_puts(&b, i ? ",{\"node\":" : "{\"node\":");
		buf_json_string(&b, k->node);
		buf_puts(&b, ",\"key_pending\":");
		buf_json_string(&b, k->kid);
		buf_puts(&b, ",\"key_via\":");
		buf_json_string(&b, k->via ? k->via : "");
		buf_putc(&b, '}');
	}
	buf_puts(&b, "],\"secrets\":[");
	size_t *idx = xcalloc(f.k->nlive ? f.k->nlive : 1, sizeof(*idx));
	store_rdlock(p->core->store);
	/* oldest change first, so the list's order is stable per version */
	bool first = true;
	for (const struct store_entry *e = store_oldest(p->core->store); e; e = e->next) {
		intptr_t v;
		if (!e->body || strncmp(e->name, "secret/", 7) != 0 || (q && !strmap_get(&only, e->name, &v)))
			continue;
		if (!first)
			buf_putc(&b, ',');
		first = false;
		secret_json(e, &f, idx, &b);
	}
	store_rdunlock(p->core->store);
	buf_puts(&b, "]}\n");
	free(idx);
	sealed_fleet_release(&f);
	strmap_release(&only);
	free(names);
	return http_send_json(c, HTTP_OK, &b);
}

static bool kid_valid(const char *kid)
{
	return kid && strlen(kid) == KEY_ID_LEN && strspn(kid, "0123456789abcdef") == KEY_ID_LEN;
}

enum http_result api_wraps(struct api *p, struct http_conn *c)
{
	struct principal who;
	enum http_result ret;
	if (!auth_allow_any(p->auth, c, &who, &ret))
		return ret;
	const char *kid = http_query(c, "kid"), *names = http_query(c, "names");
	if (!kid_valid(kid))
		return http_send_error(c, HTTP_BAD_REQUEST, "kid: required, a node key id (%d hex digits)", KEY_ID_LEN);
	if (!names || !*names)
		return http_send_error(c, HTTP_BAD_REQUEST, "names: required, secret names comma-joined (secret/a,secret/b)");
	/* every name checked before any is answered */
	char *list = xstrdup(names);
	size_t count = 0;
	char *save = NULL;
	char **each = xcalloc(WRAPS_NAMES_MAX, sizeof(*each));
	for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char err[300];
		if (count == WRAPS_NAMES_MAX || strncmp(t, "secret/", 7) != 0 ||
		    resource_fullname_check(t, err, sizeof(err)) < 0) {
			enum http_result r = count == WRAPS_NAMES_MAX
				? http_send_error(c, HTTP_BAD_REQUEST, "names: at most %d", WRAPS_NAMES_MAX)
				: http_send_error(c, HTTP_BAD_REQUEST, "names: '%.200s' is not a secret's name (secret/NAME)", t);
			free(each);
			free(list);
			return r;
		}
		each[count++] = t;
	}
	struct buf b = BUF_INIT;
	buf_puts(&b, "{\"kid\":");
	buf_json_string(&b, kid);
	buf_puts(&b, ",\"wraps\":{");
	bool first = true;
	struct strmap seen;
	strmap_init(&seen);
	store_rdlock(p->core->store);
	for (size_t i = 0; i < count; i++) {
		intptr_t v;
		if (strmap_get(&seen, each[i], &v))
			continue;
		strmap_put(&seen, each[i], 1);
		const struct store_entry *e = store_get(p->core->store, each[i]);
		if (!e || !e->body || !e->stored)
			continue;   /* absent, or not sealed */
		/* the index made when the body entered the store: no parse */
		const char *id = store_envelope_id(e), *w = store_wrap(e, kid);
		if (id && w) {
			if (!first)
				buf_putc(&b, ',');
			first = false;
			buf_json_string(&b, e->name);
			buf_puts(&b, ":{\"id\":");
			buf_json_string(&b, id);
			buf_puts(&b, ",\"wrap\":");
			buf_json_string(&b, w);
			buf_putc(&b, '}');
		}
	}
	store_rdunlock(p->core->store);
	strmap_release(&seen);
	buf_puts(&b, "}}\n");
	free(each);
	free(list);
	return http_send_json(c, HTTP_OK, &b);
}
