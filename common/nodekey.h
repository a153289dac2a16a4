/* nodekey.h: a node's own key for sealed secrets, the fleet's recovery
 * key, and a node's signed key registration (docs/protocol.md, "Sealed
 * secrets").
 *
 * A node key is an Ed25519 pair; its X25519 form (libsodium's conversion)
 * is what envelopes are wrapped to. Its id is keys_id() of the Ed25519
 * public key. Files:
 *   node.key     tether-node-secret BASE64(64-byte Ed25519 secret)   0600
 *   RECOVERY     tether-x25519-secret BASE64(32)                     0600
 *   RECOVERY.pub tether-x25519 BASE64(32) KEYID   (KEYID: keys_id of it)
 *
 * A registration (POST /v1/nodes/{id}/key, and a relay's `k` line):
 *   {"node":"ID","key":"<b64 Ed25519 pk>","at":T,"sig":"<b64>",
 *    "prev":"<b64 old pk>","endorse":"<b64>"}     (prev, endorse: a rotation)
 * sig is the new key's, endorse the previous key's, both over
 *   "tether-node-key-v1\n" ID "\n" KEY(b64 as sent) "\n" AT(decimal)
 * so a relay that passes a registration on cannot change it, and only the
 * holder of a node's key can replace it (the plane's rules: protocol.md).
 *
 * Trust model of registrations (what the plane implements: docs/protocol.md, "Sealed secrets"):
 *   - Trust on first use. A node's first key (none stored, or none since an
 *     admin's revoke) is taken from whoever holds the node's credential.
 *     That includes a relay: it sees its nodes' bearer tokens, so it can
 *     register a key of its own for a node behind it that has no live key
 *     yet. The signature proves only that the sender holds the new key,
 *     not that it is the node.
 *   - After that only the key's holder can replace it: a rotation carries
 *     prev and the previous key's endorse. Otherwise only an admin's revoke
 *     (DELETE /v1/nodes/ID/key) clears it, and the next key is again taken
 *     on first use.
 *   - Freshness: the plane keeps a high-water mark of at per node, kept
 *     across revocations and rotations, and refuses a registration whose at
 *     is not above it (so an old registration, or a rotated-out key's, is
 *     never taken again), and one whose at is more than 600 s ahead of its
 *     clock (so one registration cannot block every later one).
 * nodekey_reg_parse checks form and signatures only; these rules are the
 * plane's. */
#ifndef TETHER_NODEKEY_H
#define TETHER_NODEKEY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "keys.h"

#define NODEKEY_REG_MAX 1024

struct node_key {
	unsigned char sk[64], pk[32];          /* Ed25519 */
	unsigned char xsk[32], xpk[32];        /* X25519, derived */
	char kid[KEY_ID_LEN + 1];
};

/* Loads path, or makes it when it does not exist: 0600 whatever the umask,
 * in a temp file of a unique name linked into place (link(2)), so a key
 * another process made meanwhile is never replaced (it is loaded instead),
 * and the directory fsync'd. *made says which. Returns 0, or -1 with err
 * (never the key). */
int nodekey_load_or_make(const char *path, struct node_key *k, bool *made, char *err, size_t errlen);
/* Writes a new key to path, replacing it atomically and durably (a unique
 * temp file renamed over it, then the directory fsync'd). */
int nodekey_make(const char *path, struct node_key *k, char *err, size_t errlen);
/* Loads path (read_key_file: not through a symlink, a regular file of the
 * effective user, mode 0600 or stricter). */
int nodekey_load(const char *path, struct node_key *k, char *err, size_t errlen);
void nodekey_forget(struct node_key *k);

/* The X25519 public key (and its id) of an Ed25519 public key given as
 * base64. Returns 0 or -1. */
int nodekey_x25519_of(const char *ed_pk_b64, unsigned char xpk[32], char kid[KEY_ID_LEN + 1]);

/* Recovery keys (X25519). recovery_generate refuses an existing path;
 * recovery_load_secret reads it as nodekey_load does (read_key_file). */
int recovery_generate(const char *path, char *err, size_t errlen);
int recovery_load_secret(const char *path, unsigned char sk[32], unsigned char pk[32], char kid[KEY_ID_LEN + 1],
			 char *err, size_t errlen);
int recovery_load_public(const char *path, unsigned char pk[32], char kid[KEY_ID_LEN + 1], char *err, size_t errlen);

/* Makes a registration of k for node at time at; with prev (the key being
 * replaced), it carries prev's endorsement. Returns malloc'd JSON text. */
char *nodekey_registration(const char *node, const struct node_key *k, const struct node_key *prev, int64_t at);

/* A registration, decoded and its signatures checked. */
struct nodekey_reg {
	char node[256];
	unsigned char pk[32];
	char key_b64[48];
	char kid[KEY_ID_LEN + 1];
	int64_t at;
	bool has_prev;                         /* prev and endorse present and valid */
	unsigned char prev[32];
	char prev_kid[KEY_ID_LEN + 1];
};
/* Parses text (at most NODEKEY_REG_MAX bytes) and checks sig (and endorse
 * when prev is given). Returns 0, or -1 with err naming the field. */
int nodekey_reg_parse(const char *text, size_t len, struct nodekey_reg *r, char *err, size_t errlen);

#endif
