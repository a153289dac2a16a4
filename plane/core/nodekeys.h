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

/* A node's key as its record holds it. */
struct nodekey_state {
	char key[48];                          /* base64 Ed25519 public key; "": none live */
	char kid[KEY_ID_LEN + 1];
	int64_t key_at;                        /* the registration's time */
	char revoked[NODEKEYS_REVOKED_LEN];    /* revoked key ids, comma-joined, oldest first */
};

enum nodekey_verdict {
	NK_REGISTERED,     /* rule 3: no live key, taken (trust on first use) */
	NK_UNCHANGED,      /* rule 4: the same key */
	NK_ROTATED,        /* rule 5: a new key the stored one endorsed */
	NK_REVOKED,        /* rule 2: 403 */
	NK_CONFLICT,       /* rule 5 refused: 409 */
};

/* Rules 2 to 5 for reg (of node id) against st, which is updated when the
 * registration is taken. A refusal's text goes to err. *changed: st moved
 * (a new key, or rule 4's newer time). */
enum nodekey_verdict nodekeys_judge(struct nodekey_state *st, const char *id, const struct nodekey_reg *reg,
				    bool *changed, char *err, size_t errlen);
/* The answer's "status" of a verdict taken, and the HTTP status of any. */
const char *nodekeys_status(enum nodekey_verdict v);
unsigned nodekeys_http(enum nodekey_verdict v);

/* Whether kid is in a comma-joined list. */
bool nodekeys_listed(const char *list, const char *kid);
/* The live key's id joins the revoked list (the oldest dropped past
 * NODEKEYS_REVOKED_MAX) and the key is cleared. false: no live key. */
bool nodekeys_revoke(struct nodekey_state *st);
/* Adds the ids of list (comma-joined) that st->revoked lacks; a live key
 * that is now listed is cleared. true when st changed. */
bool nodekeys_take_revoked(struct nodekey_state *st, const char *list);

#endif
