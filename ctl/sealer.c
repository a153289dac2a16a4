/* sealer.c: tetherctl's sealing without the network (see sealer.h): the
 * plane's list of node keys, sealing to the nodes a name reaches, reseal's
 * added wraps and opening with the recovery key. Plaintext lives in
 * memory the caller wipes; no message here quotes it. */
#include "sealer.h"
#include "envelope.h"
#include "json.h"
#include "nodekey.h"
#include "resource.h"
#include "strmap.h"
#include "xmalloc.h"

#include <sodium.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>

/* sodium_malloc needs sodium_init (idempotent). */
static unsigned char *dk_alloc(const char *name, char *err, size_t errlen)
{
	unsigned char *dk = sodium_init() < 0 ? NULL : sodium_malloc(ENVELOPE_DK_BYTES);
	if (!dk)
		snprintf(err, errlen, "%s: cannot get locked memory for a data key", name);
	return dk;
}

/* ---- the plane's answer ----------------------------------------------------- */

static int parse_recovery(const cJSON *rec, struct sealer_fleet *f, char *err, size_t errlen)
{
	if (!rec || cJSON_IsNull(rec))
		return 0;
	const char *kid = json_get_string(rec, "key_id"), *key = json_get_string(rec, "key");
	char mine[KEY_ID_LEN + 1];
	if (!kid || !key || keys_b64_exact(key, strlen(key), f->rpk, sizeof(f->rpk)) < 0) {
		snprintf(err, errlen, "recovery: not a key and its id");
		return -1;
	}
	keys_id(f->rpk, mine);
	if (strcmp(mine, kid) != 0) {
		snprintf(err, errlen, "recovery: the key's id is %s, not the %.20s given", mine, kid);
		return -1;
	}
	memcpy(f->rkid, mine, sizeof(mine));
	f->has_recovery = true;
	return 0;
}

static int parse_node(const cJSON *it, struct sealer_node *n, char *err, size_t errlen)
{
	const char *node = json_get_string(it, "node"), *kid = json_get_string(it, "key_id");
	const char *key = json_get_string(it, "key");
	const cJSON *sub = cJSON_GetObjectItemCaseSensitive(it, "sub");
	if (!node || !resource_name_valid(node)) {
		snprintf(err, errlen, "nodes: an entry without a valid node ID");
		return -1;
	}
	n->node = xstrdup(node);
	char mine[KEY_ID_LEN + 1];
	if (!kid || !key || nodekey_x25519_of(key, n->xpk, mine) < 0) {
		snprintf(err, errlen, "nodes: node %s: key is not an Ed25519 public key", node);
		return -1;
	}
	if (strcmp(mine, kid) != 0) {
		snprintf(err, errlen, "nodes: node %s: the key's id is %s, not the %.20s given", node, mine, kid);
		return -1;
	}
	memcpy(n->kid, mine, sizeof(mine));
	/* the relays a key came through, shown to people: checked as IDs */
	const char *via = json_get_string(it, "key_via");
	n->via = xstrdup("");
	if (via && *via) {
		char *copy = xstrdup(via), *save = NULL;
		for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
			if (!resource_name_valid(tok)) {
				free(copy);
				snprintf(err, errlen, "nodes: node %s: key_via is not a list of relay IDs", node);
				return -1;
			}
		free(copy);
		free(n->via);
		n->via = xstrdup(via);
	}
	char serr[256];
	if (cJSON_IsString(sub) && sub_parse(sub->valuestring, &n->sub, serr, sizeof(serr)) < 0)
		memset(&n->sub, 0, sizeof(n->sub));   /* unreadable: every name, as the plane counts it */
	return 0;
}

static int parse_secret(const cJSON *it, struct sealer_secret *s, char *err, size_t errlen)
{
	const char *name = json_get_string(it, "name");
	const cJSON *missing = cJSON_GetObjectItemCaseSensitive(it, "missing");
	uint64_t v = 0;
	char nerr[256];
	if (!name || !json_get_u64(cJSON_GetObjectItemCaseSensitive(it, "version"), &v)) {
		snprintf(err, errlen, "secrets: an entry without a name or version");
		return -1;
	}
	/* the plane's text reaches the terminal: names checked */
	if (resource_fullname_check(name, nerr, sizeof(nerr)) < 0 || resource_type_of(name) != RES_SECRET) {
		snprintf(err, errlen, "secrets: an entry whose name is not a secret's");
		return -1;
	}
	s->name = xstrdup(name);
	s->version = (unsigned long long)v;
	s->sealed = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, "sealed"));
	size_t cap = cJSON_IsArray(missing) ? (size_t)cJSON_GetArraySize(missing) : 0;
	s->missing = xcalloc(cap ? cap : 1, sizeof(*s->missing));
	for (const cJSON *m = cap ? missing->child : NULL; m && s->nmissing < cap; m = m->next) {
		if (!cJSON_IsString(m) || !resource_name_valid(m->valuestring)) {
			snprintf(err, errlen, "secrets: %s: missing: an entry that is not a node ID", name);
			return -1;
		}
		s->missing[s->nmissing++] = xstrdup(m->valuestring);
	}
	return 0;
}

int sealer_fleet_parse(const char *text, size_t len, struct sealer_fleet *f, char *err, size_t errlen)
{
	memset(f, 0, sizeof(*f));
	struct json_limits lim = { 0, 8 };
	char jerr[256];
	cJSON *doc = json_decode(text, len, &lim, jerr, sizeof(jerr));
	int rc = -1;
	if (!doc) {
		snprintf(err, errlen, "%s", jerr);
		return -1;
	}
	const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(doc, "nodes");
	const cJSON *secrets = cJSON_GetObjectItemCaseSensitive(doc, "secrets");
	if (!cJSON_IsObject(doc) || !cJSON_IsArray(nodes) || !cJSON_IsArray(secrets)) {
		snprintf(err, errlen, "no nodes or secrets in it (a plane without sealed secrets?)");
		goto out;
	}
	f->sealed_secrets = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(doc, "sealed_secrets"));
	if (parse_recovery(cJSON_GetObjectItemCaseSensitive(doc, "recovery"), f, err, errlen) < 0)
		goto out;
	size_t cap = (size_t)cJSON_GetArraySize(nodes);
	f->nodes = xcalloc(cap ? cap : 1, sizeof(*f->nodes));
	for (const cJSON *it = nodes->child; it && f->n < cap; it = it->next)
		if (parse_node(it, &f->nodes[f->n++], err, errlen) < 0)
			goto out;
	cap = (size_t)cJSON_GetArraySize(secrets);
	f->secrets = xcalloc(cap ? cap : 1, sizeof(*f->secrets));
	for (const cJSON *it = secrets->child; it && f->nsecrets < cap; it = it->next)
		if (parse_secret(it, &f->secrets[f->nsecrets++], err, errlen) < 0)
			goto out;
	rc = 0;
out:
	cJSON_Delete(doc);
	if (rc < 0)
		sealer_fleet_release(f);
	return rc;
}

void sealer_fleet_release(struct sealer_fleet *f)
{
	for (size_t i = 0; i < f->n; i++) {
		free(f->nodes[i].node);
		free(f->nodes[i].via);
		if (f->nodes[i].sub.canon)
			sub_release(&f->nodes[i].sub);
	}
	for (size_t i = 0; i < f->nsecrets; i++) {
		free(f->secrets[i].name);
		for (size_t k = 0; k < f->secrets[i].nmissing; k++)
			free(f->secrets[i].missing[k]);
		free(f->secrets[i].missing);
	}
	free(f->nodes);
	free(f->secrets);
	memset(f, 0, sizeof(*f));
}

bool sealer_reaches(const struct sealer_node *n, const char *name)
{
	return !n->sub.canon || sub_match(&n->sub, name);
}

const struct sealer_secret *sealer_fleet_secret(const struct sealer_fleet *f, const char *name)
{
	for (size_t i = 0; i < f->nsecrets; i++)
		if (strcmp(f->secrets[i].name, name) == 0)
			return &f->secrets[i];
	return NULL;
}

/* ---- the recovery key --------------------------------------------------------- */

int sealer_recovery_load(const char *path, struct sealer_recovery *r, char *err, size_t errlen)
{
	memset(r, 0, sizeof(*r));
	char perr[512];
	if (recovery_load_public(path, r->pk, r->kid, perr, sizeof(perr)) == 0)
		return 0;
	if (!strstr(perr, "secret half")) {
		snprintf(err, errlen, "--recovery-key: %s", perr);
		return -1;
	}
	sealer_no_dumps();   /* before the secret half is in memory */
	if (recovery_load_secret(path, r->sk, r->pk, r->kid, perr, sizeof(perr)) < 0) {
		snprintf(err, errlen, "--recovery-key: %s", perr);
		sealer_recovery_forget(r);
		return -1;
	}
	r->has_secret = true;
	return 0;
}

void sealer_recovery_forget(struct sealer_recovery *r)
{
	sodium_memzero(r, sizeof(*r));
}

int sealer_recovery_choose(const struct sealer_fleet *f, const struct sealer_recovery *r, unsigned char pk[32],
			 char kid[KEY_ID_LEN + 1], char *err, size_t errlen)
{
	if (f->has_recovery && r && strcmp(f->rkid, r->kid) != 0) {
		snprintf(err, errlen, "the plane's recovery key is %s, --recovery-key's is %s: give the plane's "
			 "(or none)", f->rkid, r->kid);
		return -1;
	}
	if (!f->has_recovery && !r) {
		snprintf(err, errlen, "the plane names no recovery key (it runs without --sealed-secrets): give "
			 "one with --recovery-key FILE (.pub or secret, from 'tetherctl keygen --recovery')");
		return -1;
	}
	memcpy(pk, f->has_recovery ? f->rpk : r->pk, 32);
	memcpy(kid, f->has_recovery ? f->rkid : r->kid, KEY_ID_LEN + 1);
	return 0;
}

/* ---- sealing ------------------------------------------------------------------- */

/* Adds a wrap of dk for each node of f that name reaches and wraps lacks;
 * appends their IDs to added (may be NULL). Returns how many. One hash
 * lookup a node: O(nodes + wraps), for fleets of thousands. */
static int add_wraps(cJSON *wraps, const char *name, const struct sealer_fleet *f,
		     const unsigned char dk[ENVELOPE_DK_BYTES], cJSON *added, char *err, size_t errlen)
{
	struct strmap have;
	strmap_init(&have);
	for (const cJSON *w = wraps->child; w; w = w->next)
		strmap_put(&have, w->string, 1);
	int n = 0;
	intptr_t v;
	for (size_t i = 0; i < f->n; i++) {
		const struct sealer_node *nd = &f->nodes[i];
		if (!sealer_reaches(nd, name) || strmap_get(&have, nd->kid, &v))
			continue;
		char *w = envelope_wrap(dk, nd->xpk);
		if (!w) {
			snprintf(err, errlen, "%s: node %s's key %s cannot be sealed to", name, nd->node, nd->kid);
			n = -1;
			break;
		}
		cJSON_AddStringToObject(wraps, nd->kid, w);
		free(w);
		strmap_put(&have, nd->kid, 1);
		if (added) {
			cJSON *a = cJSON_CreateObject();
			cJSON_AddStringToObject(a, "node", nd->node);
			cJSON_AddStringToObject(a, "key_id", nd->kid);
			cJSON_AddStringToObject(a, "via", nd->via ? nd->via : "");
			cJSON_AddItemToArray(added, a);
		}
		n++;
	}
	strmap_release(&have);
	return n;
}

char *sealer_stored_body(const char *name, const char *plain, size_t plain_len, const struct sealer_fleet *f,
		       const unsigned char rpk[32], const char *rkid, size_t *nwraps, cJSON *added, char *err,
		       size_t errlen)
{
	unsigned char *dk = dk_alloc(name, err, errlen);
	if (!dk)
		return NULL;
	char *text = NULL;
	cJSON *sealed = envelope_seal(name, (const unsigned char *)plain, plain_len, rpk, rkid, dk, err, errlen);
	if (!sealed)
		goto out;
	cJSON *doc = cJSON_CreateObject();
	cJSON_AddItemToObject(doc, "sealed", sealed);
	cJSON *wraps = cJSON_AddObjectToObject(doc, "wraps");
	int n = add_wraps(wraps, name, f, dk, added, err, errlen);
	if (n >= 0) {
		text = json_encode_canonical(doc);
		if (nwraps)
			*nwraps = (size_t)n;
	}
	cJSON_Delete(doc);
out:
	sodium_free(dk);
	return text;
}

/* The data key of a sealed body, opened with the recovery key. */
static int open_dk(const cJSON *body, const char *name, const struct sealer_recovery *r, struct envelope *e,
		   unsigned char dk[ENVELOPE_DK_BYTES], char *err, size_t errlen)
{
	char e2[256];
	if (envelope_decode(cJSON_GetObjectItemCaseSensitive(body, "sealed"), e, e2, sizeof(e2)) < 0) {
		snprintf(err, errlen, "%s: %s", name, e2);
		return -1;
	}
	if (strcmp(e->rk, r->kid) != 0) {
		snprintf(err, errlen, "%s: sealed to recovery key %s, not to --recovery-key's %s", name, e->rk, r->kid);
		goto fail;
	}
	if (!r->has_secret) {
		snprintf(err, errlen, "%s: --recovery-key is a public key: opening needs the secret half", name);
		goto fail;
	}
	if (envelope_unwrap_recovery(e, r->pk, r->sk, dk, e2, sizeof(e2)) < 0) {
		snprintf(err, errlen, "%s: the recovery wrap %s", name, e2);
		goto fail;
	}
	return 0;
fail:
	envelope_release(e);
	return -1;
}

int sealer_add_wraps(cJSON *stored, const char *name, const struct sealer_fleet *f, const struct sealer_recovery *r,
		   cJSON *added, char *err, size_t errlen)
{
	struct envelope e;
	unsigned char *dk = dk_alloc(name, err, errlen);
	if (!dk)
		return -1;
	int n = -1;
	if (open_dk(stored, name, r, &e, dk, err, errlen) < 0)
		goto out;
	envelope_release(&e);
	cJSON *wraps = cJSON_GetObjectItemCaseSensitive(stored, "wraps");
	if (!wraps) {
		wraps = cJSON_AddObjectToObject(stored, "wraps");
	} else if (!cJSON_IsObject(wraps)) {
		snprintf(err, errlen, "%s: wraps: not an object", name);
		goto out;
	}
	cJSON_DeleteItemFromObjectCaseSensitive(stored, "superseded");
	n = add_wraps(wraps, name, f, dk, added, err, errlen);
out:
	sodium_free(dk);
	return n;
}

char *sealer_open(const cJSON *body, const char *name, const struct sealer_recovery *r, size_t *len, char *err,
		size_t errlen)
{
	struct envelope e;
	unsigned char *dk = dk_alloc(name, err, errlen);
	if (!dk)
		return NULL;
	char *plain = NULL, e2[256];
	if (open_dk(body, name, r, &e, dk, err, errlen) == 0) {
		plain = envelope_open(&e, name, dk, len, e2, sizeof(e2));
		if (!plain)
			snprintf(err, errlen, "%s: %s", name, e2);
		envelope_release(&e);
	}
	sodium_free(dk);
	return plain;
}

void sealer_json_wipe(cJSON *v)
{
	for (; v; v = v->next) {
		if (cJSON_IsString(v) && v->valuestring)
			sodium_memzero(v->valuestring, strlen(v->valuestring));
		sealer_json_wipe(v->child);
	}
}

size_t sealer_unwrapped(const cJSON *stored, const char *name, const struct sealer_fleet *f, struct buf *names)
{
	const cJSON *wraps = cJSON_GetObjectItemCaseSensitive(stored, "wraps");
	struct strmap have;
	strmap_init(&have);
	for (const cJSON *w = cJSON_IsObject(wraps) ? wraps->child : NULL; w; w = w->next)
		strmap_put(&have, w->string, 1);
	size_t n = 0;
	intptr_t v;
	for (size_t i = 0; i < f->n; i++) {
		const struct sealer_node *nd = &f->nodes[i];
		if (!sealer_reaches(nd, name) || strmap_get(&have, nd->kid, &v))
			continue;
		if (names && n < 20)
			buf_printf(names, "%s%s", n ? ", " : "", nd->node);
		n++;
	}
	if (names && n > 20)
		buf_printf(names, " and %zu more", n - 20);
	strmap_release(&have);
	return n;
}

size_t sealer_added_text(const cJSON *added, struct buf *out)
{
	size_t via = 0;
	for (const cJSON *a = added ? added->child : NULL; a; a = a->next) {
		const char *node = json_get_string(a, "node"), *kid = json_get_string(a, "key_id");
		const char *rel = json_get_string(a, "via");
		buf_printf(out, "%s%s (key %s", a == added->child ? "" : ", ", node ? node : "?", kid ? kid : "?");
		if (rel && *rel) {
			buf_printf(out, ", via %s", rel);
			via++;
		}
		buf_putc(out, ')');
	}
	return via;
}

void sealer_no_dumps(void)
{
	struct rlimit none = { 0, 0 };
	(void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	(void)setrlimit(RLIMIT_CORE, &none);
}

char *sealer_canonical_secret(cJSON *doc, size_t hint)
{
	/* canonical text of a parsed text: at most 6 bytes (\uXXXX) per byte */
	struct buf b = BUF_INIT;
	buf_reserve(&b, hint * 6 + 64);
	size_t cap = b.cap;
	json_encode_canonical_buf(doc, &b);
	if (b.cap != cap) {   /* cannot happen with the bound above; still no copy kept */
		char *n = xstrdup(b.data);
		sodium_memzero(b.data, b.cap);
		buf_release(&b);
		return n;
	}
	return buf_detach(&b, NULL);
}
