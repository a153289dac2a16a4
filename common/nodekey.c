/* nodekey.c: node keys, recovery keys and signed key registrations (see
 * nodekey.h). Secret material is wiped after use and never in an error. */
#include "nodekey.h"
#include "json.h"
#include "resource.h"
#include "util.h"
#include "xmalloc.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define NODE_TAG "tether-node-secret"
#define RSECRET_TAG "tether-x25519-secret"
#define RPUBLIC_TAG "tether-x25519"
#define REG_DOMAIN "tether-node-key-v1\n"
#define KEY_FILE_MAX 4096

static int sodium_ready(char *err, size_t errlen)
{
	if (sodium_init() < 0) {
		snprintf(err, errlen, "libsodium failed to initialise");
		return -1;
	}
	return 0;
}

/* Fills the derived halves of k from sk/pk. */
static int derive(struct node_key *k)
{
	if (crypto_sign_ed25519_pk_to_curve25519(k->xpk, k->pk) != 0 ||
	    crypto_sign_ed25519_sk_to_curve25519(k->xsk, k->sk) != 0)
		return -1;
	keys_id(k->pk, k->kid);
	return 0;
}

void nodekey_forget(struct node_key *k)
{
	sodium_memzero(k, sizeof(*k));
}

/* Makes a new key into k and writes it to path durably (write_file_durable:
 * 0600 whatever the umask, the directory fsync'd): replacing path, or only
 * when path does not exist (-1 with errno EEXIST, err unset, k wiped). */
static int make_key(const char *path, struct node_key *k, bool replace, char *err, size_t errlen)
{
	if (sodium_ready(err, errlen) < 0)
		return -1;
	crypto_sign_ed25519_keypair(k->pk, k->sk);
	if (derive(k) < 0) {
		nodekey_forget(k);
		snprintf(err, errlen, "node key '%s': the new key has no X25519 form (try again)", path);
		errno = EINVAL;
		return -1;
	}
	char *b64 = keys_b64_encode(k->sk, sizeof(k->sk));
	char *text = xasprintf("%s %s\n", NODE_TAG, b64);
	size_t len = strlen(text);
	int rc = write_file_durable(path, text, len, 0600, replace);
	int e = errno;
	sodium_memzero(b64, strlen(b64));
	sodium_memzero(text, len);
	free(b64);
	free(text);
	if (rc < 0) {
		nodekey_forget(k);
		if (e != EEXIST || replace)
			snprintf(err, errlen, "cannot write node key '%s': %s", path, strerror(e));
		errno = e;
		return -1;
	}
	return 0;
}

int nodekey_make(const char *path, struct node_key *k, char *err, size_t errlen)
{
	return make_key(path, k, true, err, errlen);
}

int nodekey_load(const char *path, struct node_key *k, char *err, size_t errlen)
{
	memset(k, 0, sizeof(*k));
	if (sodium_ready(err, errlen) < 0)
		return -1;
	size_t len = 0;
	char *text = read_key_file(path, KEY_FILE_MAX, "node key", &len, err, errlen);
	if (!text)
		return -1;
	int rc = -1;
	str_trim(text);
	size_t tag = strlen(NODE_TAG);
	if (strncmp(text, NODE_TAG, tag) != 0 || text[tag] != ' ') {
		snprintf(err, errlen, "'%s' is not a tether node key (expected '%s BASE64'); move it away and "
			 "tetherd makes a new one", path, NODE_TAG);
		goto out;
	}
	const char *b = text + tag + 1;
	if (keys_b64_exact(b, strlen(b), k->sk, sizeof(k->sk)) < 0) {
		snprintf(err, errlen, "node key '%s' does not hold 64 bytes of base64", path);
		goto out;
	}
	/* the seed makes the key: its public half must be the stored one */
	unsigned char pk[32], sk[64];
	crypto_sign_ed25519_seed_keypair(pk, sk, k->sk);
	bool same = sodium_memcmp(sk, k->sk, sizeof(sk)) == 0;
	sodium_memzero(sk, sizeof(sk));
	if (!same) {
		snprintf(err, errlen, "node key '%s' is damaged (its public half does not match)", path);
		goto out;
	}
	memcpy(k->pk, pk, sizeof(pk));
	if (derive(k) < 0) {
		snprintf(err, errlen, "node key '%s' has no X25519 form", path);
		goto out;
	}
	rc = 0;
out:
	if (rc < 0)
		nodekey_forget(k);
	free_secret(text, len);
	return rc;
}

int nodekey_load_or_make(const char *path, struct node_key *k, bool *made, char *err, size_t errlen)
{
	struct stat st;
	*made = false;
	if (lstat(path, &st) < 0 && errno == ENOENT) {
		/* created by link(2): another tetherd (or --rotate-key) that made
		 * one since keeps it, and this one loads it */
		if (make_key(path, k, false, err, errlen) == 0) {
			*made = true;
			return 0;
		}
		if (errno != EEXIST)
			return -1;
	}
	return nodekey_load(path, k, err, errlen);
}

int nodekey_x25519_of(const char *ed_pk_b64, unsigned char xpk[32], char kid[KEY_ID_LEN + 1])
{
	unsigned char pk[32];
	if (sodium_init() < 0 || !ed_pk_b64 || keys_b64_exact(ed_pk_b64, strlen(ed_pk_b64), pk, sizeof(pk)) < 0)
		return -1;
	if (crypto_sign_ed25519_pk_to_curve25519(xpk, pk) != 0)
		return -1;
	if (kid)
		keys_id(pk, kid);
	return 0;
}

/* ---- recovery keys ----------------------------------------------------------- */

int recovery_generate(const char *path, char *err, size_t errlen)
{
	if (sodium_ready(err, errlen) < 0)
		return -1;
	unsigned char pk[32], sk[32];
	char kid[KEY_ID_LEN + 1];
	crypto_box_keypair(pk, sk);
	keys_id(pk, kid);
	char *sk64 = keys_b64_encode(sk, sizeof(sk));
	char *pk64 = keys_b64_encode(pk, sizeof(pk));
	char *secret = xasprintf("%s %s\n", RSECRET_TAG, sk64);
	char *public = xasprintf("%s %s %s\n", RPUBLIC_TAG, pk64, kid);
	int rc = keys_write_pair(path, secret, public, err, errlen);
	sodium_memzero(sk, sizeof(sk));
	sodium_memzero(sk64, strlen(sk64));
	sodium_memzero(secret, strlen(secret));
	free(sk64);
	free(pk64);
	free(secret);
	free(public);
	return rc;
}

int recovery_load_secret(const char *path, unsigned char sk[32], unsigned char pk[32], char kid[KEY_ID_LEN + 1],
			 char *err, size_t errlen)
{
	if (sodium_ready(err, errlen) < 0)
		return -1;
	size_t len = 0;
	char *text = read_key_file(path, KEY_FILE_MAX, "recovery key", &len, err, errlen);
	if (!text)
		return -1;
	int rc = -1;
	str_trim(text);
	size_t tag = strlen(RSECRET_TAG);
	if (strncmp(text, RSECRET_TAG, tag) != 0 || text[tag] != ' ') {
		snprintf(err, errlen, "'%s' is not a tether recovery key (expected '%s BASE64', as made by "
			 "'tetherctl keygen --recovery')", path, RSECRET_TAG);
		goto out;
	}
	const char *b = text + tag + 1;
	if (keys_b64_exact(b, strlen(b), sk, 32) < 0) {
		snprintf(err, errlen, "recovery key '%s' does not hold 32 bytes of base64", path);
		goto out;
	}
	crypto_scalarmult_base(pk, sk);
	keys_id(pk, kid);
	rc = 0;
out:
	if (rc < 0)
		sodium_memzero(sk, 32);
	free_secret(text, len);
	return rc;
}

int recovery_load_public(const char *path, unsigned char pk[32], char kid[KEY_ID_LEN + 1], char *err, size_t errlen)
{
	if (sodium_ready(err, errlen) < 0)
		return -1;
	size_t len = 0;
	char *text = read_file_limited(path, KEY_FILE_MAX, &len);
	if (!text) {
		snprintf(err, errlen, "cannot read recovery public key '%s': %s", path, strerror(errno));
		return -1;
	}
	int rc = -1;
	if (strlen(text) != len) {
		snprintf(err, errlen, "recovery public key '%s' holds a NUL byte", path);
		goto out;
	}
	str_trim(text);
	size_t tag = strlen(RPUBLIC_TAG);
	if (strncmp(text, RSECRET_TAG " ", strlen(RSECRET_TAG) + 1) == 0) {
		snprintf(err, errlen, "'%s' is a recovery key's secret half: give its .pub file", path);
		sodium_memzero(text, len);
		goto out;
	}
	if (strncmp(text, RPUBLIC_TAG, tag) != 0 || text[tag] != ' ') {
		snprintf(err, errlen, "'%s' is not a tether recovery public key (expected '%s BASE64 KEYID', as "
			 "in the .pub file of 'tetherctl keygen --recovery')", path, RPUBLIC_TAG);
		goto out;
	}
	const char *b = text + tag + 1;
	size_t bl = strcspn(b, " \t");
	if (keys_b64_exact(b, bl, pk, 32) < 0) {
		snprintf(err, errlen, "recovery public key '%s': the key is not 32 bytes of base64", path);
		goto out;
	}
	keys_id(pk, kid);
	const char *rest = b + bl;
	rest += strspn(rest, " \t");
	if (*rest && strcmp(rest, kid) != 0) {
		snprintf(err, errlen, "recovery public key '%s': the key id after the key is not its id (%s): "
			 "the file is damaged", path, kid);
		goto out;
	}
	rc = 0;
out:
	free(text);
	return rc;
}

/* ---- registrations ------------------------------------------------------------ */

static char *reg_message(const char *node, const char *key_b64, int64_t at, size_t *len)
{
	char *m = xasprintf(REG_DOMAIN "%s\n%s\n%lld", node, key_b64, (long long)at);
	*len = strlen(m);
	return m;
}

static void add_sig(cJSON *o, const char *field, const char *msg, size_t len, const unsigned char sk[64])
{
	unsigned char sig[crypto_sign_ed25519_BYTES];
	crypto_sign_ed25519_detached(sig, NULL, (const unsigned char *)msg, len, sk);
	char *s = keys_b64_encode(sig, sizeof(sig));
	cJSON_AddStringToObject(o, field, s);
	free(s);
}

char *nodekey_registration(const char *node, const struct node_key *k, const struct node_key *prev, int64_t at)
{
	if (sodium_init() < 0)
		return NULL;
	char *key = keys_b64_encode(k->pk, sizeof(k->pk));
	size_t len;
	char *msg = reg_message(node, key, at, &len);
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "node", node);
	cJSON_AddStringToObject(o, "key", key);
	cJSON_AddNumberToObject(o, "at", (double)at);
	add_sig(o, "sig", msg, len, k->sk);
	if (prev) {
		char *p = keys_b64_encode(prev->pk, sizeof(prev->pk));
		cJSON_AddStringToObject(o, "prev", p);
		free(p);
		add_sig(o, "endorse", msg, len, prev->sk);
	}
	char *text = json_encode_canonical(o);
	cJSON_Delete(o);
	free(msg);
	free(key);
	return text;
}

static const char *const reg_fields[] = { "node", "key", "at", "sig", "prev", "endorse", NULL };

static int reg_sig(const cJSON *it, const char *field, const char *msg, size_t len, const unsigned char pk[32],
		   const char *whose, char *err, size_t errlen)
{
	unsigned char sig[crypto_sign_ed25519_BYTES];
	if (!cJSON_IsString(it) || keys_b64_exact(it->valuestring, strlen(it->valuestring), sig, sizeof(sig)) < 0) {
		snprintf(err, errlen, "%s: must be %d bytes of standard base64", field, crypto_sign_ed25519_BYTES);
		return -1;
	}
	if (crypto_sign_ed25519_verify_detached(sig, (const unsigned char *)msg, len, pk) != 0) {
		snprintf(err, errlen, "%s: not %s signature of this registration (node, key and at)", field, whose);
		return -1;
	}
	return 0;
}

int nodekey_reg_parse(const char *text, size_t len, struct nodekey_reg *r, char *err, size_t errlen)
{
	memset(r, 0, sizeof(*r));
	if (sodium_ready(err, errlen) < 0)
		return -1;
	if (len > NODEKEY_REG_MAX) {
		snprintf(err, errlen, "registration: more than %d bytes", NODEKEY_REG_MAX);
		return -1;
	}
	struct json_limits lim = { NODEKEY_REG_MAX, 4 };
	char jerr[160];
	cJSON *doc = json_decode(text, len, &lim, jerr, sizeof(jerr));
	if (!doc) {
		snprintf(err, errlen, "registration: %s", jerr);
		return -1;
	}
	int rc = -1;
	const cJSON *f[6] = { 0 };
	if (!cJSON_IsObject(doc)) {
		snprintf(err, errlen, "registration: must be a JSON object");
		goto out;
	}
	for (const cJSON *it = doc->child; it; it = it->next) {
		int i = -1;
		for (int j = 0; reg_fields[j]; j++)
			if (strcmp(reg_fields[j], it->string) == 0)
				i = j;
		if (i < 0) {
			char show[STR_SHOW_BUF];
			snprintf(err, errlen, "registration: unknown field '%s'", str_show(it->string, show));
			goto out;
		}
		f[i] = it;   /* json_decode refused duplicate keys */
	}
	for (int i = 0; i < 4; i++) {
		if (!f[i]) {
			snprintf(err, errlen, "%s: missing", reg_fields[i]);
			goto out;
		}
	}
	if (!cJSON_IsString(f[0]) || !resource_name_valid(f[0]->valuestring) ||
	    strlen(f[0]->valuestring) >= sizeof(r->node)) {
		snprintf(err, errlen, "node: must be a node ID ([A-Za-z0-9._-], 1 to %d bytes)", RES_NAME_MAX);
		goto out;
	}
	snprintf(r->node, sizeof(r->node), "%s", f[0]->valuestring);
	if (!cJSON_IsString(f[1]) || strlen(f[1]->valuestring) >= sizeof(r->key_b64) ||
	    keys_b64_exact(f[1]->valuestring, strlen(f[1]->valuestring), r->pk, sizeof(r->pk)) < 0) {
		snprintf(err, errlen, "key: must be an Ed25519 public key (32 bytes of standard base64)");
		goto out;
	}
	snprintf(r->key_b64, sizeof(r->key_b64), "%s", f[1]->valuestring);
	unsigned char xpk[32];
	if (crypto_sign_ed25519_pk_to_curve25519(xpk, r->pk) != 0) {
		snprintf(err, errlen, "key: not a usable Ed25519 public key");
		goto out;
	}
	keys_id(r->pk, r->kid);
	uint64_t at;
	if (!json_get_u64(f[2], &at) || at == 0) {
		snprintf(err, errlen, "at: must be a positive whole number (seconds since the epoch)");
		goto out;
	}
	r->at = (int64_t)at;
	if (!f[4] != !f[5]) {
		snprintf(err, errlen, "%s: missing (a rotation gives both prev and endorse)", f[4] ? "endorse" : "prev");
		goto out;
	}
	size_t mlen;
	char *msg = reg_message(r->node, r->key_b64, r->at, &mlen);
	int src = reg_sig(f[3], "sig", msg, mlen, r->pk, "the key's", err, errlen);
	if (src == 0 && f[4]) {
		if (!cJSON_IsString(f[4]) ||
		    keys_b64_exact(f[4]->valuestring, strlen(f[4]->valuestring), r->prev, sizeof(r->prev)) < 0) {
			snprintf(err, errlen, "prev: must be an Ed25519 public key (32 bytes of standard base64)");
			src = -1;
		} else if (sodium_memcmp(r->prev, r->pk, sizeof(r->pk)) == 0) {
			snprintf(err, errlen, "prev: is the same key as key (a rotation names the key it replaces)");
			src = -1;
		} else {
			src = reg_sig(f[5], "endorse", msg, mlen, r->prev, "the previous key's", err, errlen);
		}
		if (src == 0) {
			keys_id(r->prev, r->prev_kid);
			r->has_prev = true;
		}
	}
	free(msg);
	if (src < 0)
		goto out;
	rc = 0;
out:
	cJSON_Delete(doc);
	if (rc < 0)
		memset(r, 0, sizeof(*r));
	return rc;
}
