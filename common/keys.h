/* keys.h: Ed25519 signing keys and trust lists, in text files.
 *
 *   FILE      tether-ed25519-secret BASE64(64-byte secret key)   mode 0600
 *   FILE.pub  tether-ed25519 BASE64(32-byte public key) KEYID
 *
 * A trust file lists public keys, one per line in the .pub form (anything
 * after the key is a comment; '#' lines and blank lines are skipped), so
 * `cat old.pub new.pub > trust` trusts both while keys rotate. A key id is
 * the first 8 bytes of BLAKE2b-256("tether-key-id" | public key), in hex:
 * statements name the key that signed them by it. Secret material never
 * appears in an error message. */
#ifndef TETHER_KEYS_H
#define TETHER_KEYS_H

#include <stdbool.h>
#include <stddef.h>

#define KEY_ID_LEN 16
#define TRUST_MAX 32

struct signing_key {
	unsigned char sk[64];
	unsigned char pk[32];
	char kid[KEY_ID_LEN + 1];
};

struct trusted_key {
	unsigned char pk[32];
	char kid[KEY_ID_LEN + 1];
};

struct trust {
	size_t n;
	struct trusted_key key[TRUST_MAX];
};

/* The key id of a public key. */
void keys_id(const unsigned char pk[32], char kid[KEY_ID_LEN + 1]);

/* Writes a new key pair: path (0600, refused if it exists) and path.pub.
 * Returns 0, or -1 with err. */
int keys_generate(const char *path, char *err, size_t errlen);

/* Loads a secret key file. Refuses a file that others can read, or whose
 * public half does not match its seed. Returns 0, or -1 with err. */
int keys_load_secret(const char *path, struct signing_key *k, char *err, size_t errlen);

/* Loads a trust file (at least one key). Returns 0, or -1 with err naming
 * the line. */
int keys_load_trust(const char *path, struct trust *t, char *err, size_t errlen);
/* The same from text (for tests and fuzzing); name is used in messages. */
int keys_parse_trust(const char *text, size_t len, const char *name, struct trust *t, char *err, size_t errlen);

/* The trusted key with this id, or NULL. */
const struct trusted_key *keys_find(const struct trust *t, const char *kid);

/* Decodes exactly n bytes of standard padded base64 from s[0..len): its
 * alphabet only (libsodium 1.0.18 reads bytes >= 0x80 as '/'), no white
 * space, one spelling (libsodium refuses nonzero trailing bits). Returns 0
 * or -1. Shared by every key file and sealed envelope (nodekey.h,
 * envelope.h). */
int keys_b64_exact(const char *s, size_t len, unsigned char *out, size_t n);
/* The same for at most cap bytes; *got says how many. */
int keys_b64_decode(const char *s, size_t len, unsigned char *out, size_t cap, size_t *got);
/* n bytes as standard padded base64 (malloc'd, NUL-terminated). */
char *keys_b64_encode(const void *data, size_t n);

/* Writes a key pair's files: path (mode 0600, refused if it exists) and
 * path.pub (0644, refused if it exists), both durably; on failure neither
 * is left. Returns 0, or -1 with err (never the secret text). */
int keys_write_pair(const char *path, const char *secret, const char *public, char *err, size_t errlen);

/* Wipes a secret key from memory. */
void keys_forget(struct signing_key *k);

#endif
