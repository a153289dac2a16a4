/* core/nodekeys.c: a node key registration's rules 2 to 5 and the revoked
 * list (see nodekeys.h). Pure: no lock, no I/O. */
#include "core/nodekeys.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>

bool nodekeys_listed(const char *list, const char *kid)
{
	size_t kl = strlen(kid);
	if (!list || !kl)
		return false;
	for (const char *p = list; *p;) {
		size_t k = strcspn(p, ",");
		if (k == kl && memcmp(p, kid, kl) == 0)
			return true;
		p += k + (p[k] == ',');
	}
	return false;
}

static void list_add(char *list, size_t cap, const char *kid)
{
	if (nodekeys_listed(list, kid))
		return;
	size_t count = list[0] ? 1 : 0;
	for (const char *p = list; *p; p++)
		count += *p == ',';
	while (count >= NODEKEYS_REVOKED_MAX || strlen(list) + strlen(kid) + 2 > cap) {
		/* the oldest goes */
		char *comma = strchr(list, ',');
		if (!comma) {
			list[0] = '\0';
			break;
		}
		memmove(list, comma + 1, strlen(comma + 1) + 1);
		count--;
	}
	size_t l = strlen(list);
	snprintf(list + l, cap - l, "%s%s", l ? "," : "", kid);
}

bool nodekeys_revoke(struct nodekey_state *st)
{
	if (!st->key[0])
		return false;
	list_add(st->revoked, sizeof(st->revoked), st->kid);
	st->key[0] = '\0';
	st->kid[0] = '\0';
	return true;
}

bool nodekeys_take_revoked(struct nodekey_state *st, const char *list)
{
	bool changed = false;
	char one[KEY_ID_LEN + 1];
	for (const char *p = list ? list : ""; *p;) {
		size_t k = strcspn(p, ",");
		if (k && k < sizeof(one)) {
			memcpy(one, p, k);
			one[k] = '\0';
			if (!nodekeys_listed(st->revoked, one)) {
				list_add(st->revoked, sizeof(st->revoked), one);
				changed = true;
			}
		}
		p += k + (p[k] == ',');
	}
	if (st->key[0] && nodekeys_listed(st->revoked, st->kid)) {
		st->key[0] = '\0';
		st->kid[0] = '\0';
		changed = true;
	}
	return changed;
}

/* Whether the stored key (base64) is the 32 bytes pk. */
static bool same_key(const char *b64, const unsigned char pk[32])
{
	unsigned char raw[32];
	size_t len = 0;
	if (sodium_base642bin(raw, sizeof(raw), b64, strlen(b64), NULL, &len, NULL,
			      sodium_base64_VARIANT_ORIGINAL) != 0 || len != sizeof(raw))
		return false;
	return sodium_memcmp(raw, pk, sizeof(raw)) == 0;
}

enum nodekey_verdict nodekeys_judge(struct nodekey_state *st, const char *id, const struct nodekey_reg *reg,
				    bool *changed, char *err, size_t errlen)
{
	*changed = false;
	err[0] = '\0';
	/* 2: a revoked key never comes back */
	if (nodekeys_listed(st->revoked, reg->kid)) {
		snprintf(err, errlen, "node %s: key %s was revoked; make a new one: tetherd --rotate-key", id, reg->kid);
		return NK_REVOKED;
	}
	/* 3: none live: trust on first use */
	if (!st->key[0]) {
		snprintf(st->key, sizeof(st->key), "%s", reg->key_b64);
		snprintf(st->kid, sizeof(st->kid), "%s", reg->kid);
		st->key_at = reg->at;
		*changed = true;
		return NK_REGISTERED;
	}
	/* 4: the same key again (each connection registers) */
	if (same_key(st->key, reg->pk)) {
		if (reg->at > st->key_at) {
			st->key_at = reg->at;
			*changed = true;
		}
		return NK_UNCHANGED;
	}
	/* 5: another key, endorsed by the stored one, and newer */
	if (reg->has_prev && same_key(st->key, reg->prev) && reg->at > st->key_at) {
		snprintf(st->key, sizeof(st->key), "%s", reg->key_b64);
		snprintf(st->kid, sizeof(st->kid), "%s", reg->kid);
		st->key_at = reg->at;
		*changed = true;
		return NK_ROTATED;
	}
	snprintf(err, errlen,
		 "node %s already has key %s; a new key must be endorsed by it (tetherd --rotate-key does), or an "
		 "admin revokes it first: tetherctl secrets revoke %s",
		 id, st->kid, id);
	return NK_CONFLICT;
}

const char *nodekeys_status(enum nodekey_verdict v)
{
	switch (v) {
	case NK_REGISTERED:
		return "registered";
	case NK_UNCHANGED:
		return "unchanged";
	case NK_ROTATED:
		return "rotated";
	default:
		return "refused";
	}
}

unsigned nodekeys_http(enum nodekey_verdict v)
{
	return v == NK_REVOKED ? 403 : v == NK_CONFLICT ? 409 : 200;
}
