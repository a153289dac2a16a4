/* core/nodekeys.c: a node key registration's rules 2 to 5 and the revoked
 * list (see nodekeys.h). Pure: no lock, no I/O. */
#include "core/nodekeys.h"
#include "xmalloc.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *nodekeys_via(const struct nodekey_state *st)
{
	return st->via ? st->via : "";
}

const char *nodekeys_revoked(const struct nodekey_state *st)
{
	return st->revoked ? st->revoked : "";
}

void nodekeys_set_via(struct nodekey_state *st, const char *via)
{
	xstr_set(&st->via, via, NODEKEYS_VIA_LEN);
}

void nodekeys_state_copy(struct nodekey_state *dst, const struct nodekey_state *src)
{
	*dst = *src;
	dst->via = src->via ? xstrdup(src->via) : NULL;
	dst->revoked = src->revoked ? xstrdup(src->revoked) : NULL;
}

void nodekeys_state_release(struct nodekey_state *st)
{
	free(st->via);
	free(st->revoked);
	st->via = st->revoked = NULL;
}

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

/* kid joins *heap (malloc'd, NULL: empty): the rules apply to the list as
 * one NODEKEYS_REVOKED_LEN buffer would hold it (at most
 * NODEKEYS_REVOKED_MAX ids, the oldest dropped), then it goes back to the
 * heap at its own size. */
static void list_add(char **heap, const char *kid)
{
	if (nodekeys_listed(*heap, kid))
		return;
	char list[NODEKEYS_REVOKED_LEN];
	size_t cap = sizeof(list);
	snprintf(list, cap, "%s", *heap ? *heap : "");
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
	free(*heap);
	*heap = list[0] ? xstrdup(list) : NULL;
}

bool nodekeys_revoke(struct nodekey_state *st)
{
	if (!st->key[0])
		return false;
	list_add(&st->revoked, st->kid);
	st->key[0] = '\0';
	st->kid[0] = '\0';
	nodekeys_set_via(st, NULL);
	st->pending = false;
	return true;
}

bool nodekeys_kid_valid(const char *kid, size_t len)
{
	if (len != KEY_ID_LEN)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!((kid[i] >= '0' && kid[i] <= '9') || (kid[i] >= 'a' && kid[i] <= 'f')))
			return false;
	return true;
}

bool nodekeys_key_valid(const char *key_b64, const char *kid)
{
	unsigned char raw[32];
	size_t len = 0;
	if (!key_b64 || !kid || strlen(key_b64) >= sizeof(((struct nodekey_state *)0)->key) ||
	    sodium_base642bin(raw, sizeof(raw), key_b64, strlen(key_b64), NULL, &len, NULL,
			      sodium_base64_VARIANT_ORIGINAL) != 0 || len != sizeof(raw))
		return false;
	char want[KEY_ID_LEN + 1];
	keys_id(raw, want);
	return strcmp(want, kid) == 0;
}

bool nodekeys_take_revoked(struct nodekey_state *st, const char *list)
{
	bool changed = false;
	char one[KEY_ID_LEN + 1];
	for (const char *p = list ? list : ""; *p;) {
		size_t k = strcspn(p, ",");
		/* a key id as keys_id makes them, nothing else (the list comes
		 * from a replica's record or a database row) */
		if (nodekeys_kid_valid(p, k)) {
			memcpy(one, p, k);
			one[k] = '\0';
			if (!nodekeys_listed(st->revoked, one)) {
				list_add(&st->revoked, one);
				changed = true;
			}
		}
		p += k + (p[k] == ',');
	}
	if (st->key[0] && nodekeys_listed(st->revoked, st->kid)) {
		st->key[0] = '\0';
		st->kid[0] = '\0';
		nodekeys_set_via(st, NULL);
		st->pending = false;
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

/* A key is set: reg's, from via, its time the new mark. */
static void take(struct nodekey_state *st, const struct nodekey_reg *reg, const char *via)
{
	snprintf(st->key, sizeof(st->key), "%s", reg->key_b64);
	snprintf(st->kid, sizeof(st->kid), "%s", reg->kid);
	nodekeys_set_via(st, via);
	st->key_at = reg->at;
}

enum nodekey_verdict nodekeys_judge(struct nodekey_state *st, const char *id, const struct nodekey_reg *reg,
				    int64_t now, const char *via, bool *changed, char *err, size_t errlen)
{
	*changed = false;
	err[0] = '\0';
	/* 1 (the plane's part): at not far ahead, so one registration cannot
	 * block every later one */
	if (reg->at > now + NODEKEYS_SKEW_MAX) {
		snprintf(err, errlen, "node %s: key registration: at: more than %d s ahead of the plane's clock: check "
			 "the node's clock", id, NODEKEYS_SKEW_MAX);
		return NK_FUTURE;
	}
	/* 2: a revoked key never comes back */
	if (nodekeys_listed(st->revoked, reg->kid)) {
		snprintf(err, errlen, "node %s: key %s was revoked; make a new one: tetherd --rotate-key", id, reg->kid);
		return NK_REVOKED;
	}
	bool same = st->key[0] && same_key(st->key, reg->pk);
	/* a key set needs a registration newer than every one taken */
	if (!same && reg->at <= st->key_at && (!st->key[0] || (reg->has_prev && same_key(st->key, reg->prev)))) {
		snprintf(err, errlen, "node %s: key registration: at: %lld is not after the newest registration taken "
			 "for this node (%lld): an old registration is never taken again; the node makes a new one "
			 "(tetherd does once its clock is past it)", id, (long long)reg->at, (long long)st->key_at);
		return NK_STALE;
	}
	/* 3: none live: trust on first use */
	if (!st->key[0]) {
		take(st, reg, via);
		*changed = true;
		return NK_REGISTERED;
	}
	/* 4: the same key again (each connection registers) */
	if (same) {
		if (reg->at > st->key_at) {
			st->key_at = reg->at;
			*changed = true;
		}
		return NK_UNCHANGED;
	}
	/* 5: another key, endorsed by the stored one (newer: above) */
	if (reg->has_prev && same_key(st->key, reg->prev)) {
		take(st, reg, via);
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
	return v == NK_REVOKED ? 403 : v == NK_CONFLICT || v == NK_STALE ? 409 : v == NK_FUTURE ? 400 : 200;
}
