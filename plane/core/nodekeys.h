/* core/nodekeys.h: the rules a node's key registration is judged by
 * (docs/protocol.md "Sealed secrets"), apart from the records they
 * change: a node's key state in, the verdict and the state after out.
 * The registration comes parsed and its signatures checked
 * (nodekey_reg_parse: rule 1 is the caller's). */
#ifndef TETHER_NODEKEYS_H
#define TETHER_NODEKEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "keys.h"
#include "nodekey.h"

#define NODEKEYS_REVOKED_MAX 16
#define NODEKEYS_REVOKED_LEN (NODEKEYS_REVOKED_MAX * (KEY_ID_LEN + 1))
/* A via kept: at most NODEKEYS_VIA_LEN - 1 bytes (longer is cut). */
#define NODEKEYS_VIA_LEN 256

/* A node's key as its record holds it. via and revoked are malloc'd and
 * owned by the state (NULL: "", never an empty string: a node without a
 * relay or a revocation pays no bytes for them); a state memset to zero
 * is an empty one, nodekeys_state_release frees one, and a copy is made
 * by nodekeys_state_copy, never by assignment. */
struct nodekey_state {
	char key[48];                          /* base64 Ed25519 public key; "": none live */
	char kid[KEY_ID_LEN + 1];
	/* the newest registration's time taken for this node: a high-water
	 * mark, kept across revocations and rotations (a key that is set
	 * needs a registration newer than it; nothing lowers it) */
	int64_t key_at;
	char *via;                             /* where the live key came from: NULL direct, else the
						* relays as in a record's via (nearest first) */
	char *revoked;                         /* revoked key ids, comma-joined, oldest first (at
						* most NODEKEYS_REVOKED_LEN - 1 bytes); NULL: none */
	/* --approve-relay-keys: the live key came through a relay as the
	 * node's first (or first after a revoke) and waits for an admin's
	 * approval: no sealing target until then */
	bool pending;
};

/* st's via and revoked list, "" for none (borrowed from st). */
const char *nodekeys_via(const struct nodekey_state *st);
const char *nodekeys_revoked(const struct nodekey_state *st);
/* Sets st's via to a copy of via (NULL or "": none), cut to
 * NODEKEYS_VIA_LEN - 1 bytes. */
void nodekeys_set_via(struct nodekey_state *st, const char *via);
/* dst becomes a deep copy of src (dst's old contents are not freed). */
void nodekeys_state_copy(struct nodekey_state *dst, const struct nodekey_state *src);
/* Frees st's strings; st is left empty of them (via and revoked NULL). */
void nodekeys_state_release(struct nodekey_state *st);

enum nodekey_verdict {
	NK_REGISTERED,     /* rule 3: no live key, taken (trust on first use) */
	NK_UNCHANGED,      /* rule 4: the same key */
	NK_ROTATED,        /* rule 5: a new key the stored one endorsed */
	NK_REVOKED,        /* rule 2: 403 */
	NK_CONFLICT,       /* rule 5 refused: 409 */
	NK_STALE,          /* a new key whose at is not above key_at: 409 */
	NK_FUTURE,         /* at more than NODEKEYS_SKEW_MAX ahead of now: 400 */
};

/* How far a registration's at may be ahead of the plane's clock. */
#define NODEKEYS_SKEW_MAX 600

/* Rules 2 to 5 for reg (of node id) against st at wall time now, which
 * is updated when the registration is taken (st->via set to via, NULL
 * ""). First at's bound (NK_FUTURE); a registration that sets a key
 * (rule 3, and 5) needs at > st->key_at (NK_STALE: an old registration,
 * or a rotated-out key's, is never taken again); rule 4 raises key_at,
 * never lowers it. A refusal's text goes to err. *changed: st moved (a
 * new key, or rule 4's newer time). */
enum nodekey_verdict nodekeys_judge(struct nodekey_state *st, const char *id, const struct nodekey_reg *reg,
				    int64_t now, const char *via, bool *changed, char *err, size_t errlen);
/* The answer's "status" of a verdict taken, and the HTTP status of any. */
const char *nodekeys_status(enum nodekey_verdict v);
unsigned nodekeys_http(enum nodekey_verdict v);

/* Whether kid (len bytes) is a key id: 16 lowercase hex digits. */
bool nodekeys_kid_valid(const char *kid, size_t len);
/* Whether key_b64 is a 32-byte key in base64 whose keys_id is kid. */
bool nodekeys_key_valid(const char *key_b64, const char *kid);
/* Whether kid is in a comma-joined list. */
bool nodekeys_listed(const char *list, const char *kid);
/* The live key's id joins the revoked list (the oldest dropped past
 * NODEKEYS_REVOKED_MAX) and the key is cleared (key_at stays: the mark).
 * false: no live key. */
bool nodekeys_revoke(struct nodekey_state *st);
/* Adds the ids of list (comma-joined) that st->revoked lacks; a live key
 * that is now listed is cleared. true when st changed. */
bool nodekeys_take_revoked(struct nodekey_state *st, const char *list);

#endif
