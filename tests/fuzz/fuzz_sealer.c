/* fuzz_sealer.c: libFuzzer target for sealer_fleet_parse (ctl/sealer.c),
 * tetherctl's reading of the plane's GET /v1/secrets answer. A refusal
 * says why and leaves nothing allocated; what it accepts is consistent
 * (a recovery key's id is its own, every node and secret has its fields,
 * each secret is found by its name), and a secret sealed for the answer's
 * nodes carries a wrap for exactly the nodes its name reaches (two names:
 * one many subscriptions reach, one few do). */
#include "envelope.h"
#include "fuzz.h"
#include "json.h"
#include "keys.h"
#include "sealer.h"

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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (sodium_init() < 0)
		abort();
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
