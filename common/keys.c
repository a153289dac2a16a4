/* keys.c: Ed25519 key files and trust lists (see keys.h). */
#include "keys.h"
#include "util.h"
#include "xmalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SECRET_TAG "tether-ed25519-secret"
#define PUBLIC_TAG "tether-ed25519"
#define KEY_FILE_MAX 4096
#define TRUST_FILE_MAX (1u << 20)

void keys_id(const unsigned char pk[32], char kid[KEY_ID_LEN + 1])
{
	static const char domain[] = "tether-key-id";
	unsigned char h[32];
	crypto_generichash_state st;
	crypto_generichash_init(&st, NULL, 0, sizeof(h));
	crypto_generichash_update(&st, (const unsigned char *)domain, sizeof(domain) - 1);
	crypto_generichash_update(&st, pk, 32);
	crypto_generichash_final(&st, h, sizeof(h));
	sodium_bin2hex(kid, KEY_ID_LEN + 1, h, KEY_ID_LEN / 2);
}

void keys_forget(struct signing_key *k)
{
	sodium_memzero(k, sizeof(*k));
}

#define B64_ALPHABET "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="

int keys_b64_decode(const char *s, size_t len, unsigned char *out, size_t cap, size_t *got)
{
	const char *end = NULL;
	*got = 0;
	for (size_t i = 0; i < len; i++)
		if (!s[i] || !strchr(B64_ALPHABET, s[i]))
			return -1;
	if (sodium_base642bin(out, cap, s, len, NULL, got, &end, sodium_base64_VARIANT_ORIGINAL) != 0)
		return -1;
	return end == s + len ? 0 : -1;
}

char *keys_b64_encode(const void *data, size_t n)
{
	size_t cap = sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL);
	char *out = xmalloc(cap);
	sodium_bin2base64(out, cap, data, n, sodium_base64_VARIANT_ORIGINAL);
	return out;
}

int keys_b64_exact(const char *s, size_t len, unsigned char *out, size_t n)
{
	size_t got = 0;
	return keys_b64_decode(s, len, out, n, &got) == 0 && got == n ? 0 : -1;
}

/* Writes text to a new file (refused if it exists) with mode, durably. */
static int write_new(const char *path, const char *text, mode_t mode, char *err, size_t errlen)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0) {
		snprintf(err, errlen, "cannot create '%s': %s", path, strerror(errno));
		return -1;
	}
	/* the mode the file was created with, whatever the umask */
	if (fchmod(fd, mode) < 0 || write_full(fd, text, strlen(text)) < 0 || fsync(fd) < 0) {
		snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
		close(fd);
		unlink(path);
		return -1;
	}
	close(fd);
	return 0;
}

int keys_generate(const char *path, char *err, size_t errlen)
{
	if (sodium_init() < 0) {
		snprintf(err, errlen, "libsodium failed to initialise");
		return -1;
	}
	struct signing_key k;
	crypto_sign_keypair(k.pk, k.sk);
	keys_id(k.pk, k.kid);
	char sk64[sodium_base64_ENCODED_LEN(64, sodium_base64_VARIANT_ORIGINAL)];
	char pk64[sodium_base64_ENCODED_LEN(32, sodium_base64_VARIANT_ORIGINAL)];
	sodium_bin2base64(sk64, sizeof(sk64), k.sk, sizeof(k.sk), sodium_base64_VARIANT_ORIGINAL);
	sodium_bin2base64(pk64, sizeof(pk64), k.pk, sizeof(k.pk), sodium_base64_VARIANT_ORIGINAL);
	char *secret = xasprintf("%s %s\n", SECRET_TAG, sk64);
	char *public = xasprintf("%s %s %s\n", PUBLIC_TAG, pk64, k.kid);
	int rc = keys_write_pair(path, secret, public, err, errlen);
	sodium_memzero(sk64, sizeof(sk64));
	sodium_memzero(secret, strlen(secret));
	keys_forget(&k);
	free(secret);
	free(public);
	return rc;
}

int keys_write_pair(const char *path, const char *secret, const char *public, char *err, size_t errlen)
{
	char *pubpath = xasprintf("%s.pub", path);
	int rc = -1;
	if (access(pubpath, F_OK) == 0) {
		snprintf(err, errlen, "'%s' exists already", pubpath);
		goto out;
	}
	if (write_new(path, secret, 0600, err, errlen) < 0)
		goto out;
	if (write_new(pubpath, public, 0644, err, errlen) < 0) {
		unlink(path);
		goto out;
	}
	rc = 0;
out:
	free(pubpath);
	return rc;
}

int keys_load_secret(const char *path, struct signing_key *k, char *err, size_t errlen)
{
	size_t len = 0;
	char *text = read_owner_secret(path, KEY_FILE_MAX, "signing key", &len, err, errlen);
	if (!text)
		return -1;
	int rc = -1;
	str_trim(text);
	size_t tag = strlen(SECRET_TAG);
	if (strncmp(text, SECRET_TAG, tag) != 0 || text[tag] != ' ') {
		snprintf(err, errlen, "'%s' is not a tether signing key (expected '%s BASE64'; made by "
			 "'tetherctl keygen')", path, SECRET_TAG);
		goto out;
	}
	const char *b = text + tag + 1;
	if (keys_b64_exact(b, strlen(b), k->sk, sizeof(k->sk)) < 0) {
		snprintf(err, errlen, "signing key '%s' does not hold 64 bytes of base64", path);
		goto out;
	}
	/* the seed makes the key: its public half must be the stored one */
	unsigned char pk[32], sk[64];
	crypto_sign_seed_keypair(pk, sk, k->sk);
	bool same = sodium_memcmp(sk, k->sk, sizeof(sk)) == 0;
	sodium_memzero(sk, sizeof(sk));
	if (!same) {
		snprintf(err, errlen, "signing key '%s' is damaged (its public half does not match)", path);
		goto out;
	}
	memcpy(k->pk, pk, sizeof(pk));
	keys_id(k->pk, k->kid);
	rc = 0;
out:
	if (rc < 0)
		keys_forget(k);
	sodium_memzero(text, len);
	free(text);
	return rc;
}

const struct trusted_key *keys_find(const struct trust *t, const char *kid)
{
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->key[i].kid, kid) == 0)
			return &t->key[i];
	return NULL;
}

int keys_parse_trust(const char *text, size_t len, const char *name, struct trust *t, char *err, size_t errlen)
{
	memset(t, 0, sizeof(*t));
	size_t lineno = 0;
	for (size_t off = 0; off < len;) {
		const char *line = text + off;
		const char *nl = memchr(line, '\n', len - off);
		size_t ll = nl ? (size_t)(nl - line) : len - off;
		off += ll + (nl ? 1 : 0);
		lineno++;
		while (ll && (line[ll - 1] == '\r' || line[ll - 1] == ' ' || line[ll - 1] == '\t'))
			ll--;
		while (ll && (*line == ' ' || *line == '\t')) {
			line++;
			ll--;
		}
		if (!ll || *line == '#')
			continue;
		if (memchr(line, '\0', ll)) {
			snprintf(err, errlen, "%s:%zu: holds a NUL byte", name, lineno);
			return -1;
		}
		size_t tag = strlen(PUBLIC_TAG);
		if (ll <= tag || strncmp(line, PUBLIC_TAG, tag) != 0 || line[tag] != ' ') {
			snprintf(err, errlen, "%s:%zu: not a public key (expected '%s BASE64 [comment]', as "
				 "in a .pub file of 'tetherctl keygen')", name, lineno, PUBLIC_TAG);
			return -1;
		}
		const char *b = line + tag + 1;
		size_t bl = 0;
		while (b + bl < line + ll && b[bl] != ' ' && b[bl] != '\t')
			bl++;
		if (t->n == TRUST_MAX) {
			snprintf(err, errlen, "%s:%zu: more than %d trusted keys", name, lineno, TRUST_MAX);
			return -1;
		}
		struct trusted_key *k = &t->key[t->n];
		if (keys_b64_exact(b, bl, k->pk, sizeof(k->pk)) < 0) {
			snprintf(err, errlen, "%s:%zu: the key is not 32 bytes of base64", name, lineno);
			return -1;
		}
		keys_id(k->pk, k->kid);
		if (keys_find(t, k->kid)) {
			snprintf(err, errlen, "%s:%zu: key %s is listed twice", name, lineno, k->kid);
			return -1;
		}
		t->n++;
	}
	if (!t->n) {
		snprintf(err, errlen, "%s: no public key in it", name);
		return -1;
	}
	return 0;
}

int keys_load_trust(const char *path, struct trust *t, char *err, size_t errlen)
{
	size_t len;
	char *text = read_file_limited(path, TRUST_FILE_MAX, &len);
	if (!text) {
		snprintf(err, errlen, "cannot read trust file '%s': %s", path, strerror(errno));
		return -1;
	}
	int rc = keys_parse_trust(text, len, path, t, err, errlen);
	free(text);
	return rc;
}
