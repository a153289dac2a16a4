/* envelope.c: sealed secrets' envelopes: their form, the push body, sealing,
 * wrapping and opening (see envelope.h). NAME is always the secret's full
 * name ("secret/web"): the writer and every node must bind the same bytes
 * into the AAD, so anything else is refused rather than guessed at. */
#include "envelope.h"
#include "json.h"
#include "resource.h"
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
	char e[128];
	if (!name || resource_type_of(name) != RES_SECRET || resource_fullname_check(name, e, sizeof(e)) < 0) {
		snprintf(err, errlen, "a sealed secret's name must be its full name, secret/NAME ('%.64s' is not)",
			 name ? name : "");
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
			snprintf(err, errlen, "sealed: unknown field '%.64s'", it->string);
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

static int check_wraps(const cJSON *w, char *err, size_t errlen)
{
	if (!cJSON_IsObject(w)) {
		snprintf(err, errlen, "wraps: must be an object of node key id -> wrap");
		return -1;
	}
	size_t n = 0;
	unsigned char raw[ENVELOPE_WRAP_BYTES];
	for (const cJSON *it = w->child; it; it = it->next) {
		if (++n > ENVELOPE_WRAPS_MAX) {
			snprintf(err, errlen, "wraps: more than %d", ENVELOPE_WRAPS_MAX);
			return -1;
		}
		if (!lower_hex(it->string, KEY_ID_LEN)) {
			snprintf(err, errlen, "wraps: '%.64s' is not a node key id (%d lowercase hex digits)",
				 it->string, KEY_ID_LEN);
			return -1;
		}
		if (!cJSON_IsString(it) ||
		    keys_b64_exact(it->valuestring, strlen(it->valuestring), raw, sizeof(raw)) < 0) {
			snprintf(err, errlen, "wraps.%s: must be %d bytes of standard base64 (with padding)", it->string,
				 ENVELOPE_WRAP_BYTES);
			return -1;
		}
	}
	return 0;
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
			snprintf(err, errlen, "unknown field '%.64s' beside 'sealed' (a sealed secret holds only sealed, "
				 "wraps and superseded)", it->string);
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

char *envelope_push_body(const char *stored, size_t len, size_t *out_len)
{
	char err[128];
	struct json_limits lim = { 0, 0 };
	cJSON *doc = json_decode(stored, len, &lim, err, sizeof(err));
	if (!envelope_is_sealed(doc)) {
		cJSON_Delete(doc);
		return NULL;
	}
	cJSON *push = cJSON_CreateObject();
	cJSON_AddItemToObject(push, "sealed", cJSON_DetachItemFromObjectCaseSensitive(doc, "sealed"));
	cJSON_Delete(doc);
	char *text = json_encode_canonical(push);
	cJSON_Delete(push);
	if (out_len)
		*out_len = strlen(text);
	return text;
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
	if (!recovery_kid || !lower_hex(recovery_kid, KEY_ID_LEN)) {
		snprintf(err, errlen, "%s: the recovery key id is not %d hex digits", name, KEY_ID_LEN);
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
	cJSON_AddStringToObject(s, "rk", recovery_kid);
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
