/* fuzz_envelope.c: libFuzzer target for common/envelope.c and
 * nodekey_reg_parse (common/nodekey.c). Each input is used four ways:
 *
 *   1. as a stored body: envelope_check_stored either refuses it, saying
 *      why, or accepts it; then its push body exists (checked: 1), is the
 *      canonical {"sealed":...} only, whose envelope decodes, is its own
 *      push body; resource_validate takes both forms, with RES_V_STORED
 *      only the stored one, with RES_V_PLAINTEXT neither; a wrap for the
 *      fixed test key, should one open, must not crash envelope_open.
 *   2. as any text: envelope_push_body_checked answers 1 (and a push body:
 *      one canonical member "sealed" that envelope_decode takes, whose
 *      push body is itself), 0 (no push body; then the text is no JSON
 *      object with a valid sealed form) or -1 (with a reason, no push
 *      body); envelope_push_body gives a push body exactly for 1.
 *   3. as a registration: nodekey_reg_parse refuses it with a reason and
 *      an empty result, or what it accepts is consistent (the key id is
 *      the key's, the node ID is valid, the base64 is the key's).
 *   4. as a plaintext body: sealed for a fixed recovery key, wrapped to a
 *      fixed node key, it opens back to the same bytes, with both keys,
 *      and only under its own name (unless it is itself a sealed body:
 *      then sealing refuses it); and a node ID made from it registers
 *      and parses back to the same fields. */
#include "envelope.h"
#include "fuzz.h"
#include "json.h"
#include "nodekey.h"
#include "resource.h"

#include <sodium.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Test keys: from fixed seeds, so every run is the same. */
static const char NODE_SEED[] = "tether fuzz envelope node key 01";
static const char REC_SEED[] = "tether fuzz envelope recovery 01";
static struct node_key node;
static unsigned char rpk[32], rsk[32];
static char rkid[KEY_ID_LEN + 1];

static void init(void)
{
	static bool done;
	if (done)
		return;
	if (sodium_init() < 0)
		abort();
	crypto_sign_ed25519_seed_keypair(node.pk, node.sk, (const unsigned char *)NODE_SEED);
	if (crypto_sign_ed25519_pk_to_curve25519(node.xpk, node.pk) != 0 ||
	    crypto_sign_ed25519_sk_to_curve25519(node.xsk, node.sk) != 0)
		abort();
	keys_id(node.pk, node.kid);
	crypto_box_seed_keypair(rpk, rsk, (const unsigned char *)REC_SEED);
	keys_id(rpk, rkid);
	done = true;
}

/* A push body's properties; returns its parsed form. */
static cJSON *check_push(const char *push, size_t len)
{
	if (!push || strlen(push) != len)
		abort();
	struct json_limits lim = { 0, 0 };
	char err[256];
	cJSON *doc = json_decode(push, len, &lim, err, sizeof(err));
	if (!doc || cJSON_GetArraySize(doc) != 1 || !envelope_is_sealed(doc))
		abort();
	struct envelope e;
	if (envelope_decode(cJSON_GetObjectItemCaseSensitive(doc, "sealed"), &e, err, sizeof(err)) != 0)
		abort();   /* a push body whose envelope is not valid */
	envelope_release(&e);
	size_t len2 = 0;
	char *again = envelope_push_body(push, len, &len2);
	if (!again || len2 != len || memcmp(again, push, len) != 0)
		abort();   /* not canonical: a relay would send other bytes */
	free(again);
	return doc;
}

/* 1: the input is a stored body. */
static void as_stored(const char *text, size_t size)
{
	struct json_limits lim = { 0, 0 };
	char err[256] = "";
	cJSON *doc = json_decode(text, size, &lim, err, sizeof(err));
	if (!doc)
		return;
	err[0] = '\0';
	if (envelope_check_stored(doc, err, sizeof(err)) < 0) {
		if (!err[0])
			abort();
		cJSON_Delete(doc);
		return;
	}
	if (!envelope_is_sealed(doc) || !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(doc, "wraps")))
		abort();
	if (resource_validate("secret/f", doc, 0, NULL, err, sizeof(err)) < 0 ||
	    resource_validate("secret/f", doc, RES_V_STORED, NULL, err, sizeof(err)) < 0 ||
	    resource_validate("secret/f", doc, RES_V_PLAINTEXT, NULL, err, sizeof(err)) == 0)
		abort();
	size_t len = 0;
	char *push = NULL;
	if (envelope_push_body_checked(text, size, &push, &len, err, sizeof(err)) != 1)
		abort();
	cJSON *pdoc = check_push(push, len);
	if (resource_validate("secret/f", pdoc, 0, NULL, err, sizeof(err)) < 0 ||
	    resource_validate("secret/f", pdoc, RES_V_STORED, NULL, err, sizeof(err)) == 0 ||
	    resource_validate("secret/f", pdoc, RES_V_PLAINTEXT, NULL, err, sizeof(err)) == 0)
		abort();
	struct envelope e;
	if (envelope_decode(cJSON_GetObjectItemCaseSensitive(pdoc, "sealed"), &e, err, sizeof(err)) < 0)
		abort();
	unsigned char dk[ENVELOPE_DK_BYTES];
	const cJSON *w = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "wraps"), node.kid);
	if (w && envelope_unwrap(&e, w->valuestring, strlen(w->valuestring), node.xpk, node.xsk, dk, err,
				 sizeof(err)) == 0) {
		/* only a writer holding this fixed test key's public half could
		 * have made it; then the commitment held: open must not crash */
		char *plain = envelope_open(&e, "secret/f", dk, NULL, err, sizeof(err));
		envelope_wipe(plain);
	}
	envelope_release(&e);
	cJSON_Delete(pdoc);
	free(push);
	cJSON_Delete(doc);
}

/* Would the text pass as a sealed body: a JSON object with "sealed",
 * a valid push form or a valid stored form? */
static bool valid_sealed(const char *text, size_t size)
{
	struct json_limits lim = { 0, 0 };
	char err[256];
	cJSON *doc = json_decode(text, size, &lim, err, sizeof(err));
	bool ok = false;
	if (envelope_is_sealed(doc)) {
		if (cJSON_GetArraySize(doc) == 1) {
			struct envelope e;
			ok = envelope_decode(cJSON_GetObjectItemCaseSensitive(doc, "sealed"), &e, err, sizeof(err)) == 0;
			envelope_release(&e);
		} else {
			ok = envelope_check_stored(doc, err, sizeof(err)) == 0;
		}
	}
	cJSON_Delete(doc);
	return ok;
}

/* 2: the input is any text. */
static void as_push(const char *text, size_t size)
{
	size_t len = 0, len1 = 0;
	char err[256] = "", *push = NULL;
	int rc = envelope_push_body_checked(text, size, &push, &len, err, sizeof(err));
	char *plain = envelope_push_body(text, size, &len1);
	if ((rc == 1) != (push != NULL) || (rc == 1) != (plain != NULL) || rc < -1 || rc > 1)
		abort();
	if (rc == -1 && !err[0])
		abort();
	if ((rc == 1) != valid_sealed(text, size))
		abort();   /* accepted an invalid body, or refused a valid one */
	if (push) {
		if (len1 != len || memcmp(plain, push, len) != 0)
			abort();
		cJSON_Delete(check_push(push, len));
	}
	free(plain);
	free(push);
}

/* 3: the input is a registration. */
static void as_registration(const char *text, size_t size)
{
	struct nodekey_reg r;
	char err[256] = "";
	if (nodekey_reg_parse(text, size, &r, err, sizeof(err)) < 0) {
		if (!err[0] || r.node[0] || r.has_prev)
			abort();
		return;
	}
	char kid[KEY_ID_LEN + 1];
	unsigned char pk[32];
	keys_id(r.pk, kid);
	if (strcmp(kid, r.kid) != 0 || !resource_name_valid(r.node) || r.at <= 0)
		abort();
	if (keys_b64_exact(r.key_b64, strlen(r.key_b64), pk, 32) < 0 || memcmp(pk, r.pk, 32) != 0)
		abort();
	if (r.has_prev) {
		keys_id(r.prev, kid);
		if (strcmp(kid, r.prev_kid) != 0 || memcmp(r.prev, r.pk, 32) == 0)
			abort();
	}
}

/* 4: the input is a plaintext body (and a node ID). */
static void as_plaintext(const uint8_t *data, size_t size)
{
	if (size > ENVELOPE_BODY_MAX)
		return;
	unsigned char dk[ENVELOPE_DK_BYTES], dk2[ENVELOPE_DK_BYTES];
	char err[256] = "";
	cJSON *s = envelope_seal("secret/f", data, size, rpk, size & 1 ? rkid : NULL, dk, err, sizeof(err));
	if (!s) {
		/* only a sealed body is refused: a JSON object with "sealed" */
		if (!strstr(err, "the plaintext is itself a sealed secret's body"))
			abort();
		char *copy = malloc(size + 1);
		if (!copy)
			abort();
		memcpy(copy, data, size);
		copy[size] = '\0';
		cJSON *doc = cJSON_Parse(copy);
		free(copy);
		bool sealed = false;
		for (const cJSON *it = cJSON_IsObject(doc) ? doc->child : NULL; it; it = it->next)
			sealed |= strcmp(it->string, "sealed") == 0;
		cJSON_Delete(doc);
		if (!sealed)
			abort();
		return;
	}
	if (strcmp(json_get_string(s, "rk"), rkid) != 0)
		abort();
	char *wrap = envelope_wrap(dk, node.xpk);
	struct envelope e;
	if (!wrap || envelope_decode(s, &e, err, sizeof(err)) < 0)
		abort();
	for (int i = 0; i < 2; i++) {
		int rc = i ? envelope_unwrap_recovery(&e, rpk, rsk, dk2, err, sizeof(err))
			   : envelope_unwrap(&e, wrap, strlen(wrap), node.xpk, node.xsk, dk2, err, sizeof(err));
		if (rc < 0 || memcmp(dk, dk2, sizeof(dk)) != 0)
			abort();
		size_t len = 0;
		char *plain = envelope_open(&e, "secret/f", dk2, &len, err, sizeof(err));
		if (!plain || len != size || (size && memcmp(plain, data, size) != 0) || plain[len])
			abort();
		envelope_wipe(plain);
	}
	if (envelope_open(&e, "secret/g", dk, NULL, err, sizeof(err)))
		abort();
	envelope_release(&e);
	free(wrap);
	cJSON_Delete(s);

	/* the input's first bytes as a node ID */
	char id[RES_NAME_MAX + 1];
	size_t n = size < RES_NAME_MAX ? size : RES_NAME_MAX;
	memcpy(id, data, n);
	id[n] = '\0';
	if (!resource_name_valid(id))
		return;
	char *reg = nodekey_registration(id, &node, NULL, 1796036900);
	struct nodekey_reg r;
	if (!reg || nodekey_reg_parse(reg, strlen(reg), &r, err, sizeof(err)) < 0)
		abort();
	if (strcmp(r.node, id) != 0 || strcmp(r.kid, node.kid) != 0 || r.at != 1796036900 || r.has_prev)
		abort();
	free(reg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	init();
	as_stored((const char *)data, size);
	as_push((const char *)data, size);
	as_registration((const char *)data, size);
	as_plaintext(data, size);
	return 0;
}
