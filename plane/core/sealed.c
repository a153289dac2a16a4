/* core/sealed.c: a write's checks of sealed secrets and the stored form
 * the plane keeps (see sealed.h). */
#include "core/sealed.h"
#include "envelope.h"
#include "json.h"
#include "log.h"
#include "nodekey.h"
#include "strmap.h"
#include "xmalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MISSING_NAMED 20

int sealed_conf_load(const char *path, struct sealed_conf *c, char *err, size_t errlen)
{
	char why[300];
	if (recovery_load_public(path, c->pk, c->kid, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "--sealed-secrets %s: %s", path, why);
		return -1;
	}
	return 0;
}

void sealed_fleet_of(struct nodes_keys *keys, struct sealed_fleet *f)
{
	memset(f, 0, sizeof(*f));
	f->own = *keys;
	memset(keys, 0, sizeof(*keys));
	nodes_keys_index(&f->own);
	f->k = &f->own;
}

void sealed_fleet_get(struct nodes *n, struct sealed_fleet *f)
{
	memset(f, 0, sizeof(*f));
	f->k = nodes_keys_hold(n);
	f->n = n;
}

void sealed_fleet_release(struct sealed_fleet *f)
{
	if (f->n)
		nodes_keys_drop(f->n, f->k);
	else
		nodes_keys_release(&f->own);
	memset(f, 0, sizeof(*f));
}

size_t sealed_missing_by(const struct sealed_fleet *f, const char *name, sealed_has_fn has, const void *ctx,
			 size_t *idx)
{
	size_t n = 0;
	for (size_t i = 0; i < f->k->nlive; i++)
		if (sub_match(&f->k->subs[i], name) && !has(ctx, f->k->live[i].kid))
			idx[n++] = i;
	return n;
}

static bool in_map(const void *ctx, const char *kid)
{
	intptr_t v;
	return strmap_get((struct strmap *)ctx, kid, &v);
}

size_t sealed_missing(const struct sealed_fleet *f, const char *name, const cJSON *wraps, size_t *idx)
{
	struct strmap have;   /* the wraps' key ids: one lookup per node */
	strmap_init(&have);
	const cJSON *w;
	if (cJSON_IsObject(wraps))
		cJSON_ArrayForEach(w, wraps)
			if (w->string)
				strmap_put(&have, w->string, 1);
	size_t n = sealed_missing_by(f, name, in_map, &have, idx);
	strmap_release(&have);
	return n;
}

void sealed_missing_error(const struct sealed_fleet *f, const char *name, const size_t *idx, size_t n, char *err,
			  size_t errlen)
{
	struct buf nodes = BUF_INIT, kids = BUF_INIT;
	for (size_t i = 0; i < n && i < MISSING_NAMED; i++) {
		buf_printf(&nodes, "%s%s", i ? ", " : "", f->k->live[idx[i]].node);
		buf_printf(&kids, "%s%s", i ? ", " : "", f->k->live[idx[i]].kid);
	}
	if (n > MISSING_NAMED) {
		buf_printf(&nodes, " and %zu more", n - MISSING_NAMED);
		buf_printf(&kids, " and %zu more", n - MISSING_NAMED);
	}
	snprintf(err, errlen,
		 "%s: no wrap for nodes %s (keys %s): seal to them (tetherctl put --seal) or run tetherctl secrets "
		 "reseal",
		 name, nodes.data ? nodes.data : "", kids.data ? kids.data : "");
	buf_release(&nodes);
	buf_release(&kids);
}

/* Whether id is in a "superseded" array. */
static bool superseded(const cJSON *list, const char *id)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, list)
		if (cJSON_IsString(it) && strcmp(it->valuestring, id) == 0)
			return true;
	return false;
}

/* The stored entry's envelope id and "superseded" list (prev: its parsed
 * stored body, the caller's to delete). A deleted sealed secret's ids
 * are its list (none live): its revival may not bring an old one back. */
static cJSON *current_of(struct store *s, const char *name, const char **id, const cJSON **list)
{
	*id = NULL;
	*list = NULL;
	const struct store_entry *e = store_get(s, name);
	if (e && !e->body && store_gone_ids(e)) {
		cJSON *prev = cJSON_CreateObject();
		cJSON *arr = cJSON_AddArrayToObject(prev, "superseded");
		for (const char *p = store_gone_ids(e); *p;) {
			size_t k = strcspn(p, ",");
			char *one = xstrndup(p, k);
			cJSON_AddItemToArray(arr, cJSON_CreateString(one));
			free(one);
			p += k + (p[k] == ',');
		}
		*list = arr;
		return prev;
	}
	if (!e || !e->body)
		return NULL;
	size_t len;
	const char *text = store_stored(e, &len);
	cJSON *prev = cJSON_ParseWithLength(text, len);
	const cJSON *sealed = cJSON_GetObjectItemCaseSensitive(prev, "sealed");
	const cJSON *pid = cJSON_GetObjectItemCaseSensitive(sealed, "id");
	if (cJSON_IsString(pid))
		*id = pid->valuestring;
	const cJSON *l = cJSON_GetObjectItemCaseSensitive(prev, "superseded");
	if (cJSON_IsArray(l))
		*list = l;
	return prev;
}

/* One secret's checks; body rewritten into the stored form. */
static int check_one(const struct sealed_conf *conf, struct store *s, const struct sealed_fleet *f,
		     const struct nodes_keys *keys, struct store_change *c, bool revert, size_t *idx, char *err,
		     size_t errlen)
{
	cJSON *doc = cJSON_ParseWithLength(c->body, c->body_len);
	int rc = -1;
	cJSON *prev = NULL;
	if (!cJSON_IsObject(doc)) {
		snprintf(err, errlen, "%s: the body must be a JSON object", c->name);
		goto out;
	}
	if (!envelope_is_sealed(doc)) {
		if (conf) {
			snprintf(err, errlen, "%s: plaintext refused: this plane keeps secrets sealed (--sealed-secrets); "
				 "write it with tetherctl put %s --seal", c->name, c->name);
			goto out;
		}
		rc = 0;   /* plaintext, as before */
		goto out;
	}
	char why[300];
	if (envelope_check_stored(doc, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "%s: %s", c->name, why);
		goto out;
	}
	const cJSON *sealed = cJSON_GetObjectItemCaseSensitive(doc, "sealed");
	const char *id = json_get_string(sealed, "id"), *rk = json_get_string(sealed, "rk");
	if (!id || !rk) {
		snprintf(err, errlen, "%s: sealed.id and sealed.rk are required", c->name);
		goto out;
	}
	if (conf && strcmp(rk, conf->kid) != 0) {
		snprintf(err, errlen, "%s: sealed.rk: sealed to recovery key %.16s, but this plane's is %s "
			 "(--sealed-secrets): seal it again (tetherctl put %s --seal)", c->name, rk, conf->kid, c->name);
		goto out;
	}
	const char *cur_id;
	const cJSON *old_list;
	prev = current_of(s, c->name, &cur_id, &old_list);
	/* a revert brings an older envelope back on purpose: not a replay */
	if (!revert && superseded(old_list, id)) {
		snprintf(err, errlen, "%s: envelope %s was replaced before: a replayed envelope", c->name, id);
		goto out;
	}
	/* wraps of revoked keys are dropped (of unknown keys kept: a node
	 * may register later) */
	cJSON *wraps = cJSON_GetObjectItemCaseSensitive(doc, "wraps");
	for (cJSON *w = wraps ? wraps->child : NULL, *next; w; w = next) {
		next = w->next;
		if (w->string && nodes_keys_revoked(keys, w->string))
			cJSON_DeleteItemFromObjectCaseSensitive(wraps, w->string);
	}
	/* a revert is not refused for nodes that came since (they are held
	 * until tetherctl secrets reseal adds their wraps): a revert that
	 * could not be made would leave the bad version in place */
	if (conf && !revert) {
		size_t n = sealed_missing(f, c->name, wraps, idx);
		if (n) {
			sealed_missing_error(f, c->name, idx, n, err, errlen);
			goto out;
		}
	}
	/* "superseded" is the plane's: the stored list, and the stored id
	 * when this envelope replaces it (the oldest dropped past the max);
	 * never the live id (a revert's envelope leaves the list: it may be
	 * written again, e.g. by a reseal, until another replaces it) */
	cJSON *list = cJSON_CreateArray();
	const cJSON *it;
	cJSON_ArrayForEach(it, old_list)
		if (cJSON_IsString(it) && strcmp(it->valuestring, id) != 0)
			cJSON_AddItemToArray(list, cJSON_CreateString(it->valuestring));
	if (cur_id && strcmp(cur_id, id) != 0 && !superseded(list, cur_id))
		cJSON_AddItemToArray(list, cJSON_CreateString(cur_id));
	while (cJSON_GetArraySize(list) > ENVELOPE_SUPERSEDED_MAX)
		cJSON_DeleteItemFromArray(list, 0);
	cJSON_DeleteItemFromObjectCaseSensitive(doc, "superseded");
	if (cJSON_GetArraySize(list))
		cJSON_AddItemToObject(doc, "superseded", list);
	else
		cJSON_Delete(list);
	char *canon = json_encode_canonical(doc);
	/* what nodes will get of it: a body the push form refuses is never
	 * stored (the store would push a marker in its place) */
	char *push = NULL;
	size_t plen;
	int pr = envelope_push_body_checked(canon, strlen(canon), &push, &plen, why, sizeof(why));
	if (pr != 1) {
		snprintf(err, errlen, "%s: %s", c->name, pr == 0 ? "not a sealed body" : why);
		free(push);
		free(canon);
		goto out;
	}
	free(push);
	free(c->body);
	c->body = canon;
	c->body_len = strlen(canon);
	rc = 0;
out:
	cJSON_Delete(prev);
	cJSON_Delete(doc);
	return rc;
}

int sealed_check(const struct sealed_conf *conf, struct store *s, struct nodes *n, struct store_change *ch,
		 size_t nch, bool revert, char *err, size_t errlen)
{
	bool any = false;
	for (size_t i = 0; i < nch && !any; i++)
		any = ch[i].body && strncmp(ch[i].name, "secret/", 7) == 0;
	if (!any)
		return 0;
	struct sealed_fleet f;
	sealed_fleet_get(n, &f);
	size_t *idx = xcalloc(f.k->nlive ? f.k->nlive : 1, sizeof(*idx));
	int rc = 0;
	/* a revert checks every change (each refused one stays as it was,
	 * the others get their stored form and superseded lists): the first
	 * refusal is the one said */
	for (size_t i = 0; i < nch && (rc == 0 || revert); i++) {
		if (!ch[i].body || strncmp(ch[i].name, "secret/", 7) != 0)
			continue;
		char more[512];
		if (check_one(conf, s, &f, f.k, &ch[i], revert, idx, rc ? more : err, rc ? sizeof(more) : errlen) < 0)
			rc = -1;
	}
	free(idx);
	sealed_fleet_release(&f);
	return rc;
}

void sealed_log_plaintext(struct store *s)
{
	for (const struct store_entry *e = store_newest(s); e; e = e->prev) {
		if (!e->body || strncmp(e->name, "secret/", 7) != 0 || e->stored)
			continue;
		log_warn("store: %s is a plaintext secret; this plane keeps secrets sealed (--sealed-secrets): write it "
			 "again with tetherctl put %s --seal", e->name, e->name);
	}
}
