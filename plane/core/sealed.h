/* core/sealed.h: sealed secrets on the plane (docs/protocol.md "Sealed
 * secrets"): the checks every write of a secret passes (one path: the
 * writer's, for PUT, batch and sync alike), the stored form the plane
 * keeps (client "superseded" ignored, the plane's own list kept, wraps of
 * revoked keys dropped), and which nodes lack a wrap. */
#ifndef TETHER_SEALED_H
#define TETHER_SEALED_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "core/nodes.h"
#include "core/store.h"
#include "keys.h"
#include "sub.h"

/* --sealed-secrets RECOVERY.pub: the fleet's recovery key. */
struct sealed_conf {
	unsigned char pk[32];
	char kid[KEY_ID_LEN + 1];
};
int sealed_conf_load(const char *path, struct sealed_conf *c, char *err, size_t errlen);

/* The sealing targets: the live node keys whose node's subscription is
 * known, each with it parsed (k->subs), and the revoked key ids. */
struct sealed_fleet {
	const struct nodes_keys *k;
	struct nodes *n;             /* held from n (nodes_keys_hold); NULL: own */
	struct nodes_keys own;
};
/* The registry's shared snapshot (remade only when a key or a
 * subscription moved). Not under the store's lock when it can be helped:
 * it takes the nodes' lock. */
void sealed_fleet_get(struct nodes *n, struct sealed_fleet *f);
/* The same from keys (taken): for tests and callers that have them. */
void sealed_fleet_of(struct nodes_keys *keys, struct sealed_fleet *f);
void sealed_fleet_release(struct sealed_fleet *f);

/* The live-key nodes whose subscription reaches name and that wraps (an
 * object of key id -> wrap; NULL: none) has no wrap for: their indexes in
 * f->keys.live into idx (room for f->keys.nlive), in order. O(nodes +
 * wraps). Returns how many. */
size_t sealed_missing(const struct sealed_fleet *f, const char *name, const cJSON *wraps, size_t *idx);
/* The same with the wraps asked of has (e.g. a store entry's index). */
typedef bool (*sealed_has_fn)(const void *ctx, const char *kid);
size_t sealed_missing_by(const struct sealed_fleet *f, const char *name, sealed_has_fn has, const void *ctx,
			 size_t *idx);
/* The error of a write that misses them (at most 20 named). */
void sealed_missing_error(const struct sealed_fleet *f, const char *name, const size_t *idx, size_t n, char *err,
			  size_t errlen);

/* Checks the secrets among ch (a write, under the store's writer lock;
 * it takes the nodes' lock) and rewrites each sealed body into the form
 * the store keeps. conf NULL: no --sealed-secrets (plaintext taken; a
 * sealed body's form checked). revert: the write is a revert (tetherctl
 * revert, a rollout's): an older envelope back is no replay, and nodes
 * without a wrap do not refuse it (they are held); the superseded list is
 * kept all the same (the replaced id appended, the live one left out),
 * and every change is checked: one refused leaves the others' forms
 * done (err says the first refused).
 * Returns 0, or -1 with err (a 422). */
int sealed_check(const struct sealed_conf *conf, struct store *s, struct nodes *n, struct store_change *ch,
		 size_t nch, bool revert, char *err, size_t errlen);

/* At start with --sealed-secrets: says, once each, which secrets in the
 * store are plaintext (names only). Hold a store lock. */
void sealed_log_plaintext(struct store *s);

#endif
