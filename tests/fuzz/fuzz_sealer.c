/* fuzz_sealer.c: libFuzzer target for sealer_fleet_parse (ctl/sealer.c),
 * tetherctl's reading of the plane's GET /v1/secrets answer. A refusal
 * says why and leaves nothing allocated; what it accepts is consistent
 * (a recovery key's id is its own, every node and secret has its fields,
 * each secret is found by its name), and a secret sealed for the answer's
 * nodes carries a wrap for exactly the nodes its name reaches (two names:
 * one many subscriptions reach, one few do).
 * An input that starts with 'S' is a stored body's changes instead (the
 * rest: a JSON object whose members replace those of a fresh, valid
 * stored body -- "sealed"'s members merged into its envelope): reseal's
 * sealer_add_wraps and sync's sealer_open take the plane's stored bodies.
 * Whatever they accept checks as a stored form with every reached node
 * wrapped, and opens to the very plaintext sealed (nothing forged opens). */
#include "envelope.h"
#include "fuzz.h"
#include "json.h"
#include "keys.h"
#include "sealer.h"
#include "xmalloc.h"

#include <sodium.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static void check_sealed(const struct sealer_fleet *f, const char *name)
{
	static const unsigned char rpk[32] = { 9 };   /* the X25519 base point: a valid key */
	char rkid[KEY_ID_LEN + 1], err[256];
	keys_id(rpk, rkid);
	size_t nw = 0;
	char *text = sealer_stored_body(name, "{}", 2, f, rpk, rkid, &nw, NULL, err, sizeof(err));
	if (!text)
		abort();
	cJSON *doc = cJSON_Parse(text);
	const cJSON *wraps = cJSON_GetObjectItemCaseSensitive(doc, "wraps");
	if (!doc || envelope_check_stored(doc, err, sizeof(err)) < 0)
		abort();
	size_t want = 0;
	for (size_t i = 0; i < f->n; i++) {
		bool reached = sealer_reaches(&f->nodes[i], name);
		bool has = cJSON_GetObjectItemCaseSensitive(wraps, f->nodes[i].kid) != NULL;
		if (reached && !has)
			abort();   /* a reached node without a wrap */
		bool other = false;   /* another node with the same key may have made it */
		for (size_t k = 0; k < f->n && !other; k++)
			other = k != i && sealer_reaches(&f->nodes[k], name) && strcmp(f->nodes[k].kid, f->nodes[i].kid) == 0;
		if (!reached && has && !other)
			abort();   /* a wrap for a node the name does not reach */
	}
	for (const cJSON *w = wraps->child; w; w = w->next)
		want++;
	if (want != nw)
		abort();
	cJSON_Delete(doc);
	free(text);
}

static const char PLAIN[] = "{\"cert\":\"C\",\"key\":\"K\"}";

/* A fixed recovery key and two nodes (x: every name, y: cluster/ only). */
static struct {
	bool ready;
	struct sealer_recovery r;
	struct sealer_fleet f;
} K;

static void fixed_keys(void)
{
	unsigned char seed[32] = { 1 }, pk[32], sk[64], epk[32], esk[64];
	char err[256];
	crypto_box_seed_keypair(K.r.pk, K.r.sk, seed);
	keys_id(K.r.pk, K.r.kid);
	K.r.has_secret = true;
	char *rb = keys_b64_encode(K.r.pk, 32);
	seed[0] = 2;
	crypto_sign_seed_keypair(pk, sk, seed);
	seed[0] = 3;
	crypto_sign_seed_keypair(epk, esk, seed);
	char *xb = keys_b64_encode(pk, 32), *yb = keys_b64_encode(epk, 32);
	char xk[KEY_ID_LEN + 1], yk[KEY_ID_LEN + 1];
	keys_id(pk, xk);
	keys_id(epk, yk);
	char *answer = xasprintf("{\"sealed_secrets\":true,\"recovery\":{\"key_id\":\"%s\",\"key\":\"%s\"},"
				 "\"nodes\":[{\"node\":\"x\",\"key_id\":\"%s\",\"key\":\"%s\",\"sub\":null},"
				 "{\"node\":\"y\",\"key_id\":\"%s\",\"key\":\"%s\",\"sub\":\"cluster/\"}],"
				 "\"secrets\":[]}", K.r.kid, rb, xk, xb, yk, yb);
	if (sealer_fleet_parse(answer, strlen(answer), &K.f, err, sizeof(err)) < 0)
		abort();
	free(answer);
	free(rb);
	free(xb);
	free(yb);
	K.ready = true;
}

static void merge(cJSON *into, const cJSON *from)
{
	for (const cJSON *m = from->child; m; m = m->next) {
		if (!m->string)
			continue;
		cJSON *old = cJSON_GetObjectItemCaseSensitive(into, m->string);
		if (strcmp(m->string, "sealed") == 0 && cJSON_IsObject(m) && cJSON_IsObject(old)) {
			merge(old, m);
			continue;
		}
		cJSON_DeleteItemFromObjectCaseSensitive(into, m->string);
		cJSON_AddItemToObject(into, m->string, cJSON_Duplicate(m, true));
	}
}

static void stored_body(const uint8_t *data, size_t size)
{
	struct json_limits lim = { 0, 8 };
	char err[512];
	cJSON *changes = json_decode((const char *)data, size, &lim, err, sizeof(err));
	if (!cJSON_IsObject(changes)) {
		cJSON_Delete(changes);
		return;
	}
	if (!K.ready)
		fixed_keys();
	struct sealer_fleet none = K.f;
	none.n = 0;   /* sealed to the recovery key alone: every wrap is reseal's */
	char *text = sealer_stored_body("secret/web", PLAIN, strlen(PLAIN), &none, K.r.pk, K.r.kid, NULL, NULL, err,
					sizeof(err));
	cJSON *doc = text ? cJSON_Parse(text) : NULL;
	if (!doc)
		abort();
	merge(doc, changes);
	cJSON_Delete(changes);
	size_t len = 0;
	char *plain = sealer_open(doc, "secret/web", &K.r, &len, err, sizeof(err));
	if (plain ? len != strlen(PLAIN) || memcmp(plain, PLAIN, len) != 0 : !err[0])
		abort();   /* only the very plaintext sealed opens; else a reason */
	if (plain)
		envelope_wipe(plain);
	err[0] = '\0';
	cJSON *added = cJSON_CreateArray();
	int n = sealer_add_wraps(doc, "secret/web", &K.f, &K.r, added, err, sizeof(err));
	if (n < 0 && !err[0])
		abort();
	if (n >= 0) {
		if ((size_t)cJSON_GetArraySize(added) != (size_t)n || sealer_unwrapped(doc, "secret/web", &K.f, NULL))
			abort();   /* every reached node wrapped, and said so */
		if (cJSON_GetObjectItemCaseSensitive(doc, "superseded"))
			abort();
	}
	cJSON_Delete(added);
	cJSON_Delete(doc);
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (sodium_init() < 0)
		abort();
	if (size && data[0] == 'S') {
		stored_body(data + 1, size - 1);
		return 0;
	}
	struct sealer_fleet f;
	char err[512] = "";
	if (sealer_fleet_parse((const char *)data, size, &f, err, sizeof(err)) < 0) {
		if (!err[0] || f.n || f.nsecrets || f.nodes || f.secrets)
			abort();
		return 0;
	}
	char kid[KEY_ID_LEN + 1];
	if (f.has_recovery) {
		keys_id(f.rpk, kid);
		if (strcmp(kid, f.rkid) != 0)
			abort();
	}
	for (size_t i = 0; i < f.n; i++) {
		if (!f.nodes[i].node || strlen(f.nodes[i].kid) != KEY_ID_LEN)
			abort();
	}
	for (size_t i = 0; i < f.nsecrets; i++)
		if (!f.secrets[i].name || sealer_fleet_secret(&f, f.secrets[i].name) == NULL)
			abort();
	if (f.n <= 64) {   /* sealing costs a key exchange a node */
		check_sealed(&f, "secret/web");
		check_sealed(&f, "secret/zzz-unlikely");
	}
	sealer_fleet_release(&f);
	return 0;
}
