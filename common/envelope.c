/* envelope.c: sealed secrets' envelopes: their form, the push body, sealing,
 * wrapping and opening (see envelope.h). NAME is always the secret's full
 * name ("secret/web"): the writer and every node must bind the same bytes
 * into the AAD, so anything else is refused rather than guessed at. */
#include "envelope.h"
#include "json.h"
#include "resource.h"
#include "util.h"
#include "xmalloc.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AAD_DOMAIN "tether-sealed-v1\n"
#define KC_DOMAIN "tether-sealed-kc-v1"
#define ABYTES crypto_aead_xchacha20poly1305_ietf_ABYTES
#define CT_MAX (ENVELOPE_BODY_MAX + ABYTES)

/* sodium_init is idempotent and thread-safe; sodium_malloc needs it. */
static int sodium_ready(char *err, size_t errlen)
{
	if (sodium_init() < 0) {
		snprintf(err, errlen, "libsodium failed to initialise");
		return -1;
	}
	return 0;
}

static bool lower_hex(const char *s, size_t n)
{
	return strlen(s) == n && strspn(s, "0123456789abcdef") == n;
}

/* name must be "secret/NAME", a valid full name. */
static int name_check(const char *name, char *err, size_t errlen)
{
	char e[128], show[STR_SHOW_BUF];
	if (!name || resource_type_of(name) != RES_SECRET || resource_fullname_check(name, e, sizeof(e)) < 0) {
		snprintf(err, errlen, "a sealed secret's name must be its full name, secret/NAME ('%s' is not)",
			 str_show(name, show));
		return -1;
	}
	return 0;
}

/* AAD = "tether-sealed-v1\n" NAME "\n" ID (malloc'd, *len set). */
static char *make_aad(const char *name, const char *id, size_t *len)
{
	char *a = xasprintf(AAD_DOMAIN "%s\n%s", name, id);
	*len = strlen(a);
	return a;
}

static void key_commitment(const unsigned char dk[ENVELOPE_DK_BYTES], unsigned char kc[32])
{
	crypto_generichash(kc, 32, (const unsigned char *)KC_DOMAIN, sizeof(KC_DOMAIN) - 1, dk, ENVELOPE_DK_BYTES);
}

/* A member that must be a string of exactly n bytes of base64. */
static int get_b64(const cJSON *it, const char *field, unsigned char *out, size_t n, char *err, size_t errlen)
{
	if (!cJSON_IsString(it) || keys_b64_exact(it->valuestring, strlen(it->valuestring), out, n) < 0) {
		snprintf(err, errlen, "%s: must be %zu bytes of standard base64 (with padding)", field, n);
		return -1;
	}
	return 0;
}

static const char *const sealed_fields[] = { "v", "id", "rk", "recovery", "kc", "nonce", "ct", NULL };

static int field_index(const char *name, const char *const *fields)
{
	for (int i = 0; fields[i]; i++)
		if (strcmp(fields[i], name) == 0)
			return i;
	return -1;
}

static int decode_member(const cJSON *it, int which, struct envelope *e, char *err, size_t errlen)
{
	switch (which) {
	case 0:
		if (!cJSON_IsNumber(it) || it->valuedouble != 1.0) {
			snprintf(err, errlen, "sealed.v: must be 1 (an envelope of another version: upgrade tether)");
			return -1;
		}
		return 0;
	case 1:
		if (!cJSON_IsString(it) || !lower_hex(it->valuestring, ENVELOPE_ID_LEN)) {
			snprintf(err, errlen, "sealed.id: must be %d lowercase hex digits", ENVELOPE_ID_LEN);
			return -1;
		}
		memcpy(e->id, it->valuestring, ENVELOPE_ID_LEN + 1);
		return 0;
	case 2:
		if (!cJSON_IsString(it) || !lower_hex(it->valuestring, KEY_ID_LEN)) {
			snprintf(err, errlen, "sealed.rk: must be a recovery key id (%d lowercase hex digits)",
				 KEY_ID_LEN);
			return -1;
		}
		memcpy(e->rk, it->valuestring, KEY_ID_LEN + 1);
		return 0;
	case 3: return get_b64(it, "sealed.recovery", e->recovery, sizeof(e->recovery), err, errlen);
	case 4: return get_b64(it, "sealed.kc", e->kc, sizeof(e->kc), err, errlen);
	case 5: return get_b64(it, "sealed.nonce", e->nonce, sizeof(e->nonce), err, errlen);
	default: break;
	}
	/* ct: ABYTES .. CT_MAX bytes */
	size_t len = cJSON_IsString(it) ? strlen(it->valuestring) : 0;
	if (!cJSON_IsString(it) || len > sodium_base64_ENCODED_LEN(CT_MAX, sodium_base64_VARIANT_ORIGINAL)) {
		snprintf(err, errlen, "sealed.ct: must be base64 of at most %d bytes", CT_MAX);
		return -1;
	}
	size_t got = 0;
	e->ct = xmalloc(len / 4 * 3 + 3);
	if (keys_b64_decode(it->valuestring, len, e->ct, len / 4 * 3 + 3, &got) < 0 || got < ABYTES || got > CT_MAX) {
		snprintf(err, errlen, "sealed.ct: must be %d to %d bytes of standard base64 (with padding)", ABYTES,
			 CT_MAX);
		return -1;
	}
	e->ct_len = got;
	return 0;
}

int envelope_decode(const cJSON *sealed, struct envelope *e, char *err, size_t errlen)
{
	memset(e, 0, sizeof(*e));
	if (!cJSON_IsObject(sealed)) {
		snprintf(err, errlen, "sealed: must be an object");
		return -1;
	}
	unsigned seen = 0;
	for (const cJSON *it = sealed->child; it; it = it->next) {
		int i = field_index(it->string, sealed_fields);
		if (i < 0) {
			char show[STR_SHOW_BUF];
			snprintf(err, errlen, "sealed: unknown field '%s'", str_show(it->string, show));
			goto fail;
		}
		if (seen & (1u << i)) {
			snprintf(err, errlen, "sealed.%s: given twice", sealed_fields[i]);
			goto fail;
		}
		seen |= 1u << i;
		if (decode_member(it, i, e, err, errlen) < 0)
			goto fail;
	}
	for (int i = 0; sealed_fields[i]; i++) {
		if (!(seen & (1u << i))) {
			snprintf(err, errlen, "sealed.%s: missing", sealed_fields[i]);
			goto fail;
		}
	}
	return 0;
fail:
	envelope_release(e);
	return -1;
}

void envelope_release(struct envelope *e)
{
	free(e->ct);
	e->ct = NULL;
	e->ct_len = 0;
}

bool envelope_is_sealed(const cJSON *body)
{
	return cJSON_IsObject(body) && cJSON_GetObjectItemCaseSensitive(body, "sealed") != NULL;
}

static int str_ptr_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* wraps: at most ENVELOPE_WRAPS_MAX (counted before anything is decoded),
 * each a node key id -> 80 bytes of base64, and no id twice: the tree may
 * come from a parser that keeps duplicate keys (cJSON_Parse), and then the
 * first (cJSON_GetObjectItem) and the last (a hash filled in order) would
 * be two different wraps for one node. */
static int check_wraps(const cJSON *w, char *err, size_t errlen)
{
	if (!cJSON_IsObject(w)) {
		snprintf(err, errlen, "wraps: must be an object of node key id -> wrap");
		return -1;
	}
	size_t n = 0;
	for (const cJSON *it = w->child; it; it = it->next) {
		if (++n > ENVELOPE_WRAPS_MAX) {
			snprintf(err, errlen, "wraps: more than %d", ENVELOPE_WRAPS_MAX);
			return -1;
		}
	}
	unsigned char raw[ENVELOPE_WRAP_BYTES];
	for (const cJSON *it = w->child; it; it = it->next) {
		if (!lower_hex(it->string, KEY_ID_LEN)) {
			char show[STR_SHOW_BUF];
			snprintf(err, errlen, "wraps: '%s' is not a node key id (%d lowercase hex digits)",
				 str_show(it->string, show), KEY_ID_LEN);
			return -1;
		}
		if (!cJSON_IsString(it) ||
		    keys_b64_exact(it->valuestring, strlen(it->valuestring), raw, sizeof(raw)) < 0) {
			snprintf(err, errlen, "wraps.%s: must be %d bytes of standard base64 (with padding)", it->string,
				 ENVELOPE_WRAP_BYTES);
			return -1;
		}
	}
	if (n < 2)
		return 0;
	const char **ids = xmalloc(n * sizeof(*ids));
	size_t i = 0;
	for (const cJSON *it = w->child; it; it = it->next)
		ids[i++] = it->string;
	qsort(ids, n, sizeof(*ids), str_ptr_cmp);
	int rc = 0;
	for (i = 1; i < n && rc == 0; i++) {
		if (strcmp(ids[i - 1], ids[i]) == 0) {
			snprintf(err, errlen, "wraps.%s: given twice (one wrap per node key)", ids[i]);
			rc = -1;
		}
	}
	free(ids);
	return rc;
}

static int check_superseded(const cJSON *s, char *err, size_t errlen)
{
	if (!cJSON_IsArray(s)) {
		snprintf(err, errlen, "superseded: must be an array of envelope ids");
		return -1;
	}
	size_t n = 0;
	for (const cJSON *it = s->child; it; it = it->next) {
		if (++n > ENVELOPE_SUPERSEDED_MAX) {
			snprintf(err, errlen, "superseded: more than %d ids", ENVELOPE_SUPERSEDED_MAX);
			return -1;
		}
		if (!cJSON_IsString(it) || !lower_hex(it->valuestring, ENVELOPE_ID_LEN)) {
			snprintf(err, errlen, "superseded[%zu]: must be an envelope id (%d lowercase hex digits)", n - 1,
				 ENVELOPE_ID_LEN);
			return -1;
		}
	}
	return 0;
}

int envelope_check_stored(const cJSON *body, char *err, size_t errlen)
{
	static const char *const fields[] = { "sealed", "wraps", "superseded", NULL };
	if (!cJSON_IsObject(body)) {
		snprintf(err, errlen, "a sealed secret's body must be an object");
		return -1;
	}
	unsigned seen = 0;
	for (const cJSON *it = body->child; it; it = it->next) {
		int i = field_index(it->string, fields);
		if (i < 0) {
			char show[STR_SHOW_BUF];
			snprintf(err, errlen, "unknown field '%s' beside 'sealed' (a sealed secret holds only sealed, "
				 "wraps and superseded)", str_show(it->string, show));
			return -1;
		}
		if (seen & (1u << i)) {
			snprintf(err, errlen, "%s: given twice", fields[i]);
			return -1;
		}
		seen |= 1u << i;
		if (i == 0) {
			struct envelope e;
			if (envelope_decode(it, &e, err, errlen) < 0)
				return -1;
			envelope_release(&e);
		} else if ((i == 1 ? check_wraps(it, err, errlen) : check_superseded(it, err, errlen)) < 0) {
			return -1;
		}
	}
	if (!(seen & 1u)) {
		snprintf(err, errlen, "sealed: missing");
		return -1;
	}
	if (!(seen & 2u)) {
		snprintf(err, errlen, "wraps: missing (an object of node key id -> wrap, {} for none)");
		return -1;
	}
	return 0;
}

/* Does a text json_decode refused still read (leniently, as cJSON_Parse
 * does) as an object with a member "sealed"? Then it is a sealed body
 * gone bad (a duplicate key, bad UTF-8), not plaintext. */
static bool lenient_sealed(const char *text, size_t len)
{
	char *copy = xstrndup(text, len);   /* cJSON reads to a NUL */
	cJSON *doc = cJSON_Parse(copy);
	free(copy);
	bool sealed = false;
	for (const cJSON *it = cJSON_IsObject(doc) ? doc->child : NULL; it && !sealed; it = it->next)
		sealed = it->string && strcmp(it->string, "sealed") == 0;
	cJSON_Delete(doc);
	return sealed;
}

int envelope_push_body_checked(const char *stored, size_t len, char **out, size_t *out_len, char *err,
			       size_t errlen)
{
	char jerr[160];
	struct json_limits lim = { 0, 0 };
	*out = NULL;
	if (out_len)
		*out_len = 0;
	if (!stored)
		return 0;
	cJSON *doc = json_decode(stored, len, &lim, jerr, sizeof(jerr));
	if (!doc) {
		if (!lenient_sealed(stored, len))
			return 0;
		snprintf(err, errlen, "a sealed secret's body is not valid JSON: %s", jerr);
		return -1;
	}
	if (!envelope_is_sealed(doc)) {
		cJSON_Delete(doc);
		return 0;
	}
	/* the push form ({"sealed"} alone) is its own push body; anything
	 * else must be a whole stored form */
	int rc;
	if (cJSON_GetArraySize(doc) == 1) {
		struct envelope e;
		rc = envelope_decode(cJSON_GetObjectItemCaseSensitive(doc, "sealed"), &e, err, errlen);
		envelope_release(&e);
	} else {
		rc = envelope_check_stored(doc, err, errlen);
	}
	if (rc < 0) {
		cJSON_Delete(doc);
		return -1;
	}
	cJSON *push = cJSON_CreateObject();
	cJSON_AddItemToObject(push, "sealed", cJSON_DetachItemFromObjectCaseSensitive(doc, "sealed"));
	cJSON_Delete(doc);
	*out = json_encode_canonical(push);
	cJSON_Delete(push);
	if (out_len)
		*out_len = strlen(*out);
	return 1;
}

char *envelope_push_body(const char *stored, size_t len, size_t *out_len)
{
	char err[256], *out = NULL;
	size_t n = 0;
	if (envelope_push_body_checked(stored, len, &out, &n, err, sizeof(err)) != 1)
		return NULL;
	if (out_len)
		*out_len = n;
	return out;
}

/* Wipes every string of a tree (keys and values) that held plaintext. */
static void wipe_tree(cJSON *v)
{
	for (; v; v = v->next) {
		if (v->string)
			sodium_memzero(v->string, strlen(v->string));
		if (v->valuestring)
			sodium_memzero(v->valuestring, strlen(v->valuestring));
		v->valuedouble = 0;
		v->valueint = 0;
		wipe_tree(v->child);
	}
}

/* Is plain a JSON object with a member "sealed" (a sealed body sealed
 * again: it would open to an envelope, not to a secret)? Every copy of the
 * plaintext made on the way is wiped. */
static bool plain_is_sealed(const unsigned char *plain, size_t len)
{
	size_t i = 0;
	while (i < len && (plain[i] == ' ' || plain[i] == '\t' || plain[i] == '\n' || plain[i] == '\r'))
		i++;
	if (i == len || plain[i] != '{')
		return false;
	char *copy = xmalloc(len + 1);
	memcpy(copy, plain, len);
	copy[len] = '\0';
	cJSON *doc = cJSON_Parse(copy);
	sodium_memzero(copy, len);
	free(copy);
	bool sealed = false;
	for (const cJSON *it = cJSON_IsObject(doc) ? doc->child : NULL; it && !sealed; it = it->next)
		sealed = it->string && strcmp(it->string, "sealed") == 0;
	if (doc) {
		wipe_tree(doc->child);
		cJSON_Delete(doc);
	}
	return sealed;
}

static void add_b64(cJSON *o, const char *field, const void *data, size_t n)
{
	char *s = keys_b64_encode(data, n);
	cJSON_AddStringToObject(o, field, s);
	free(s);
}

cJSON *envelope_seal(const char *name, const unsigned char *plain, size_t plain_len,
		     const unsigned char recovery_pk[32], const char *recovery_kid,
		     unsigned char dk[ENVELOPE_DK_BYTES], char *err, size_t errlen)
{
	if (sodium_ready(err, errlen) < 0 || name_check(name, err, errlen) < 0)
		return NULL;
	if (plain_len > ENVELOPE_BODY_MAX) {
		snprintf(err, errlen, "%s: the body is %zu bytes, more than the %d a sealed secret holds", name,
			 plain_len, ENVELOPE_BODY_MAX);
		return NULL;
	}
	char rk[KEY_ID_LEN + 1];
	keys_id(recovery_pk, rk);
	if (recovery_kid && strcmp(recovery_kid, rk) != 0) {
		snprintf(err, errlen, "%s: the recovery key id does not match the key (its id is %s): take both from "
			 "the same RECOVERY.pub", name, rk);
		return NULL;
	}
	if (plain_is_sealed(plain, plain_len)) {
		snprintf(err, errlen, "%s: the plaintext is itself a sealed secret's body (a file written by export?): "
			 "seal the secret's plaintext body (cert, key)", name);
		return NULL;
	}
	unsigned char idb[ENVELOPE_ID_LEN / 2], nonce[24], kc[32], recovery[ENVELOPE_WRAP_BYTES];
	char id[ENVELOPE_ID_LEN + 1];
	randombytes_buf(idb, sizeof(idb));
	sodium_bin2hex(id, sizeof(id), idb, sizeof(idb));
	randombytes_buf(nonce, sizeof(nonce));
	crypto_aead_xchacha20poly1305_ietf_keygen(dk);
	if (crypto_box_seal(recovery, dk, ENVELOPE_DK_BYTES, recovery_pk) != 0) {
		sodium_memzero(dk, ENVELOPE_DK_BYTES);
		snprintf(err, errlen, "%s: the recovery key is not a usable X25519 public key", name);
		return NULL;
	}
	key_commitment(dk, kc);
	size_t aad_len;
	char *aad = make_aad(name, id, &aad_len);
	unsigned char *ct = xmalloc(plain_len + ABYTES);
	unsigned long long ct_len = 0;
	crypto_aead_xchacha20poly1305_ietf_encrypt(ct, &ct_len, plain, plain_len, (const unsigned char *)aad,
						   aad_len, NULL, nonce, dk);
	free(aad);
	cJSON *s = cJSON_CreateObject();
	cJSON_AddNumberToObject(s, "v", 1);
	cJSON_AddStringToObject(s, "id", id);
	cJSON_AddStringToObject(s, "rk", rk);
	add_b64(s, "recovery", recovery, sizeof(recovery));
	add_b64(s, "kc", kc, sizeof(kc));
	add_b64(s, "nonce", nonce, sizeof(nonce));
	add_b64(s, "ct", ct, (size_t)ct_len);
	free(ct);
	return s;
}

char *envelope_wrap(const unsigned char dk[ENVELOPE_DK_BYTES], const unsigned char x25519_pk[32])
{
	unsigned char w[ENVELOPE_WRAP_BYTES];
	if (sodium_init() < 0 || crypto_box_seal(w, dk, ENVELOPE_DK_BYTES, x25519_pk) != 0)
		return NULL;
	return keys_b64_encode(w, sizeof(w));
}

/* Opens a raw wrap into dk and checks the key commitment. */
static int unwrap_raw(const struct envelope *e, const unsigned char w[ENVELOPE_WRAP_BYTES],
		      const unsigned char pk[32], const unsigned char sk[32], unsigned char dk[ENVELOPE_DK_BYTES],
		      char *err, size_t errlen)
{
	if (sodium_ready(err, errlen) < 0)
		return -1;
	if (crypto_box_seal_open(dk, w, ENVELOPE_WRAP_BYTES, pk, sk) != 0) {
		sodium_memzero(dk, ENVELOPE_DK_BYTES);
		snprintf(err, errlen, "does not open with this key");
		return -1;
	}
	unsigned char kc[32];
	key_commitment(dk, kc);
	if (sodium_memcmp(kc, e->kc, sizeof(kc)) != 0) {
		sodium_memzero(dk, ENVELOPE_DK_BYTES);
		snprintf(err, errlen, "opens to another data key (not this envelope's)");
		return -1;
	}
	return 0;
}

int envelope_unwrap(const struct envelope *e, const char *wrap_b64, size_t wrap_len,
		    const unsigned char x25519_pk[32], const unsigned char x25519_sk[32],
		    unsigned char dk[ENVELOPE_DK_BYTES], char *err, size_t errlen)
{
	unsigned char w[ENVELOPE_WRAP_BYTES];
	if (!wrap_b64 || keys_b64_exact(wrap_b64, wrap_len, w, sizeof(w)) < 0) {
		sodium_memzero(dk, ENVELOPE_DK_BYTES);
		snprintf(err, errlen, "the wrap is not %d bytes of standard base64", ENVELOPE_WRAP_BYTES);
		return -1;
	}
	return unwrap_raw(e, w, x25519_pk, x25519_sk, dk, err, errlen);
}

int envelope_unwrap_recovery(const struct envelope *e, const unsigned char x25519_pk[32],
			     const unsigned char x25519_sk[32], unsigned char dk[ENVELOPE_DK_BYTES],
			     char *err, size_t errlen)
{
	return unwrap_raw(e, e->recovery, x25519_pk, x25519_sk, dk, err, errlen);
}

char *envelope_open(const struct envelope *e, const char *name, const unsigned char dk[ENVELOPE_DK_BYTES],
		    size_t *len, char *err, size_t errlen)
{
	if (sodium_ready(err, errlen) < 0 || name_check(name, err, errlen) < 0)
		return NULL;
	if (!e->ct || e->ct_len < ABYTES) {
		snprintf(err, errlen, "does not decrypt: no ciphertext");
		return NULL;
	}
	/* the AEAD does not commit to its key: whatever way dk came (a wrap
	 * from a relay, one kept from another envelope), it must be the key
	 * this envelope was sealed with */
	unsigned char kc[32];
	key_commitment(dk, kc);
	if (sodium_memcmp(kc, e->kc, sizeof(kc)) != 0) {
		snprintf(err, errlen, "opens to another data key (not this envelope's)");
		return NULL;
	}
	size_t mlen = e->ct_len - ABYTES;
	char *plain = sodium_malloc(mlen + 1);
	if (!plain) {
		snprintf(err, errlen, "out of locked memory for the plaintext (%zu bytes)", mlen);
		return NULL;
	}
	size_t aad_len;
	char *aad = make_aad(name, e->id, &aad_len);
	unsigned long long got = 0;
	int rc = crypto_aead_xchacha20poly1305_ietf_decrypt((unsigned char *)plain, &got, NULL, e->ct, e->ct_len,
							    (const unsigned char *)aad, aad_len, e->nonce, dk);
	free(aad);
	if (rc != 0 || got != mlen) {
		sodium_free(plain);
		snprintf(err, errlen, "does not decrypt: changed, or another secret's");
		return NULL;
	}
	plain[mlen] = '\0';
	if (len)
		*len = mlen;
	return plain;
}

void envelope_wipe(char *plain)
{
	sodium_free(plain);   /* fills the region with zeros first; NULL is fine */
}
