/* sealer.h: tetherctl's side of sealed secrets, without the network: the
 * plane's GET /v1/secrets answer read and checked, the node keys a name
 * reaches, a secret sealed into its stored form, wraps added with the
 * recovery key (reseal), and a stored secret opened with it (sync). The
 * commands are in cmd_secrets.c and cmd_sync.c. */
#ifndef TETHER_CTL_SEALER_H
#define TETHER_CTL_SEALER_H

#include <stdbool.h>
#include <stddef.h>
#include <cjson/cJSON.h>

#include "buf.h"
#include "keys.h"
#include "sub.h"

/* A node with a live key, as GET /v1/secrets lists it. */
struct sealer_node {
	char *node;
	char kid[KEY_ID_LEN + 1];
	unsigned char xpk[32];   /* X25519, what wraps are sealed to */
	struct sub sub;          /* canon NULL: unknown, reaches every name */
	char *via;               /* where the key came from: "" direct, else the relays */
};

/* A secret as GET /v1/secrets lists it. */
struct sealer_secret {
	char *name;
	unsigned long long version;
	bool sealed;
	size_t nmissing;
	char **missing;          /* node IDs */
};

struct sealer_fleet {
	bool sealed_secrets;     /* the plane runs with --sealed-secrets */
	bool has_recovery;
	unsigned char rpk[32];
	char rkid[KEY_ID_LEN + 1];
	size_t n, nsecrets;
	struct sealer_node *nodes;
	struct sealer_secret *secrets;
};

/* The recovery key's halves, from tetherctl's --recovery-key FILE. */
struct sealer_recovery {
	bool has_secret;
	unsigned char pk[32], sk[32];
	char kid[KEY_ID_LEN + 1];
};

/* Reads GET /v1/secrets' answer; every key is checked (base64, its id the
 * one given). Returns 0, or -1 with err. */
int sealer_fleet_parse(const char *text, size_t len, struct sealer_fleet *f, char *err, size_t errlen);
void sealer_fleet_release(struct sealer_fleet *f);
/* Whether node n's subscription reaches resource name. */
bool sealer_reaches(const struct sealer_node *n, const char *name);
/* The listed secret name, or NULL. */
const struct sealer_secret *sealer_fleet_secret(const struct sealer_fleet *f, const char *name);

/* Loads --recovery-key FILE: a secret key (then both halves), or a public
 * one (FILE.pub: pk only). Returns 0, or -1 with err. */
int sealer_recovery_load(const char *path, struct sealer_recovery *r, char *err, size_t errlen);
void sealer_recovery_forget(struct sealer_recovery *r);

/* The recovery key to seal to: the plane's, or r's when the plane has
 * none (r may be NULL); both given must be the same key. Returns 0 with
 * pk and kid set, or -1 with err. */
int sealer_recovery_choose(const struct sealer_fleet *f, const struct sealer_recovery *r, unsigned char pk[32],
			 char kid[KEY_ID_LEN + 1], char *err, size_t errlen);

/* Seals plaintext (a secret's body text) for name into its stored form:
 * {"sealed":...,"wraps":{KID:WRAP...}} with a wrap for every node of f
 * that name reaches. Canonical JSON, malloc'd; *nwraps set (may be NULL);
 * the nodes wrapped for appended to added (as sealer_add_wraps, may be
 * NULL). NULL with err. */
char *sealer_stored_body(const char *name, const char *plain, size_t plain_len, const struct sealer_fleet *f,
		       const unsigned char rpk[32], const char *rkid, size_t *nwraps, cJSON *added, char *err,
		       size_t errlen);

/* The nodes of f that name reaches and stored (a parsed stored or push
 * body) has no wrap for: their IDs appended to names (comma-separated, at
 * most 20, then "and N more"; may be NULL). Returns how many. */
size_t sealer_unwrapped(const cJSON *stored, const char *name, const struct sealer_fleet *f, struct buf *names);

/* One line per node of added (an array sealer_add_wraps filled):
 * "NODE (key KID)" or "NODE (key KID, via RELAYS)", comma-joined into out;
 * returns how many of them came through a relay. */
size_t sealer_added_text(const cJSON *added, struct buf *out);

/* No core dump and no ptrace by another process of the same user while a
 * recovery key or a plaintext secret is in memory:
 * prctl(PR_SET_DUMPABLE, 0) and RLIMIT_CORE 0. Idempotent. */
void sealer_no_dumps(void);

/* Reseal: adds to stored (a parsed stored body of name) a wrap for every
 * node of f that name reaches and stored lacks, opening the data key with
 * the recovery key r; drops "superseded" (the plane keeps it). Never
 * re-encrypts. The nodes wrapped for are appended to added (a cJSON
 * array of {"node","key_id","via"}, may be NULL). Returns how many wraps were added, or -1 with err
 * naming the secret. */
int sealer_add_wraps(cJSON *stored, const char *name, const struct sealer_fleet *f, const struct sealer_recovery *r,
		   cJSON *added, char *err, size_t errlen);

/* Opens a sealed body (stored or push form) of name with the recovery
 * key. Returns its plaintext (free it with envelope_wipe), or NULL with
 * err naming the secret. */
char *sealer_open(const cJSON *body, const char *name, const struct sealer_recovery *r, size_t *len, char *err,
		size_t errlen);

/* json_encode_canonical of a plaintext body into one buffer reserved up
 * front from hint (the text it was parsed from: its length), so no
 * realloc leaves a partial copy behind; grown only past that, the old
 * buffer wiped. Free it with free() after sodium_memzero. */
char *sealer_canonical_secret(cJSON *doc, size_t hint);

/* Wipes every string of a parsed tree (a plaintext body's) before it is
 * freed. NULL is fine. */
void sealer_json_wipe(cJSON *v);

#endif
