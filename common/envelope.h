/* envelope.h: sealed secrets (docs/protocol.md, "Sealed secrets"). The
 * writer (tetherctl) encrypts a secret's body with a fresh data key and
 * seals that key to the fleet's recovery key and to each node's key; the
 * plane and relays store and forward only this envelope; a node opens its
 * wrap with its own key (nodekey.h) and decrypts in memory.
 *
 * A sealed secret's stored body (what a write sends and the store keeps):
 *   {"sealed":{"v":1,"id":"<32 hex>","rk":"<16 hex recovery key id>",
 *              "recovery":"<b64 wrap>","kc":"<b64 32>","nonce":"<b64 24>",
 *              "ct":"<b64>"},
 *    "wraps":{"<16 hex node key id>":"<b64 wrap>", ...},
 *    "superseded":["<32 hex>", ...]}            (set by the plane only)
 * Its push body (what nodes receive, what the state digest covers, what
 * relays and caches share): {"sealed":{...}} only, canonical JSON
 * (envelope_push_body()).
 *   dk        a fresh 32-byte data key
 *   ct        XChaCha20-Poly1305-IETF(dk, nonce, plaintext body,
 *             AAD = "tether-sealed-v1\n" NAME "\n" ID)
 *   kc        BLAKE2b-256 keyed with dk of "tether-sealed-kc-v1": a wrap
 *             that opens to another key is caught before decrypting
 *   a wrap    crypto_box_seal(dk, X25519 public key): 80 bytes
 * Base64 is standard with padding (sodium_base64_VARIANT_ORIGINAL). No
 * function here logs or returns plaintext in an error. */
#ifndef TETHER_ENVELOPE_H
#define TETHER_ENVELOPE_H

#include <stdbool.h>
#include <stddef.h>

#include "keys.h"

#include <cjson/cJSON.h>

#define ENVELOPE_ID_LEN 32          /* hex chars */
#define ENVELOPE_DK_BYTES 32
#define ENVELOPE_WRAP_BYTES 80      /* crypto_box_SEALBYTES + 32 */
#define ENVELOPE_BODY_MAX 262144    /* plaintext body at most */
#define ENVELOPE_SUPERSEDED_MAX 1000
#define ENVELOPE_WRAPS_MAX 100000

/* An envelope's fields, decoded (ct points into the caller's storage or
 * is owned: see envelope_release). */
struct envelope {
	char id[ENVELOPE_ID_LEN + 1];
	char rk[KEY_ID_LEN + 1];
	unsigned char recovery[ENVELOPE_WRAP_BYTES];
	unsigned char kc[32];
	unsigned char nonce[24];
	unsigned char *ct;           /* owned */
	size_t ct_len;
};

/* Decodes and checks the form of a "sealed" object (every field present,
 * of the right type and length; v == 1; nothing else). Returns 0, or -1
 * with err naming the field ("sealed.kc: ..."). */
int envelope_decode(const cJSON *sealed, struct envelope *e, char *err, size_t errlen);
void envelope_release(struct envelope *e);

/* Is body a sealed secret's body (has "sealed")? */
bool envelope_is_sealed(const cJSON *body);

/* Checks a stored body: "sealed" valid, "wraps" an object of key id ->
 * wrap (each 80 bytes of base64, at most ENVELOPE_WRAPS_MAX, no id twice
 * even in a tree from a parser that keeps duplicates), "superseded"
 * (optional) an array of ids, nothing else. Returns 0 or -1 with err
 * naming the field (a key from the body shown through str_show). */
int envelope_check_stored(const cJSON *body, char *err, size_t errlen);

/* The push body of a stored one: {"sealed":...} in canonical JSON (sorted
 * keys, no spaces), the same bytes at the origin and every relay. The
 * body is checked first: a whole stored form (envelope_check_stored), or
 * the push form itself ({"sealed"} alone, envelope_decode). Returns
 *    1  sealed: *out is malloc'd text (*out_len set, may be NULL);
 *    0  not sealed: plaintext, or not a JSON object with "sealed" (*out
 *       NULL): push the stored text as it is;
 *   -1  sealed but invalid (*out NULL, err names the field; also a text
 *       that has "sealed" but that json_decode refuses, e.g. a duplicate
 *       key): refuse the body, never push the stored text (it holds the
 *       wraps, and whatever else a damaged store put beside them). */
int envelope_push_body_checked(const char *stored, size_t len, char **out, size_t *out_len, char *err,
			       size_t errlen);
/* The same, returning *out: NULL both when the body is not sealed and when
 * it is sealed but invalid. Callers that fall back to the stored text on
 * NULL must use envelope_push_body_checked to tell the two apart. */
char *envelope_push_body(const char *stored, size_t len, size_t *out_len);

/* Seals plaintext (a secret's body text) for name: a fresh id, data key
 * and nonce; the recovery wrap for recovery_pk (X25519). sealed.rk is
 * keys_id(recovery_pk), computed here: recovery_kid, when not NULL, must
 * be that id ("the recovery key id does not match the key" otherwise), so
 * an envelope never names one recovery key and wraps to another. A
 * plaintext that is itself a sealed body (a JSON object with "sealed") is
 * refused. Returns a new "sealed" object and the data key in dk (wipe it
 * after wrapping), or NULL with err (never the plaintext). */
cJSON *envelope_seal(const char *name, const unsigned char *plain, size_t plain_len,
		     const unsigned char recovery_pk[32], const char *recovery_kid,
		     unsigned char dk[ENVELOPE_DK_BYTES], char *err, size_t errlen);

/* A wrap of dk for an X25519 public key, as base64 (malloc'd). */
char *envelope_wrap(const unsigned char dk[ENVELOPE_DK_BYTES], const unsigned char x25519_pk[32]);

/* Opens a wrap (base64) with an X25519 key pair and checks it against
 * e's key commitment. Returns 0 with dk filled, or -1 with err ("does
 * not open with this key", "opens to another data key"). */
int envelope_unwrap(const struct envelope *e, const char *wrap_b64, size_t wrap_len,
		    const unsigned char x25519_pk[32], const unsigned char x25519_sk[32],
		    unsigned char dk[ENVELOPE_DK_BYTES], char *err, size_t errlen);
/* The same for the raw 80-byte recovery wrap in e. */
int envelope_unwrap_recovery(const struct envelope *e, const unsigned char x25519_pk[32],
			     const unsigned char x25519_sk[32], unsigned char dk[ENVELOPE_DK_BYTES],
			     char *err, size_t errlen);

/* Decrypts e's body for name with dk, after checking dk against e's key
 * commitment whatever way dk came. Returns the plaintext in memory from
 * sodium_malloc (NUL-terminated, *len set; free it with envelope_wipe), or
 * NULL with err ("opens to another data key (not this envelope's)", "does
 * not decrypt: changed, or another secret's"). */
char *envelope_open(const struct envelope *e, const char *name, const unsigned char dk[ENVELOPE_DK_BYTES],
		    size_t *len, char *err, size_t errlen);
void envelope_wipe(char *plain);

#endif
