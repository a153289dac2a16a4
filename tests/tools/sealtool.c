/* tests/tools/sealtool.c: node keys, registrations and sealed secrets for
 * the integration tests (common/nodekey.c and common/envelope.c, as the
 * agent and tetherctl use them); never installed.
 *
 *   sealtool key FILE                      make (or load) a node key; prints its id
 *   sealtool reg NODE FILE [AT [PREV]]     a registration of FILE's key (endorsed by PREV's)
 *   sealtool recovery FILE                 a recovery key pair (FILE, FILE.pub); prints its id
 *   sealtool seal NAME RECOVERY.pub [KEY..] stdin: a secret's body; prints its stored form,
 *                                          wrapped for each node key file
 *   sealtool push                          stdin: a stored body; prints its push body
 *   sealtool open NAME KEY WRAP            stdin: a push body; opens it with KEY's wrap
 *   sealtool digest                        stdin: a full poll answer; prints the state digest of
 *                                          its bodies and the one its statement signs, as a node
 *                                          computes them */
#include "envelope.h"
#include "json.h"
#include "lthash.h"
#include "nodekey.h"
#include "statement.h"

#include <cjson/cJSON.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char *read_all(FILE *f, size_t *len)
{
	size_t cap = 4096, n = 0;
	char *b = malloc(cap);
	size_t k;
	while (b && (k = fread(b + n, 1, cap - n - 1, f)) > 0) {
		n += k;
		if (n + 1 == cap) {
			cap *= 2;
			b = realloc(b, cap);
		}
	}
	if (!b)
		exit(99);
	b[n] = '\0';
	*len = n;
	return b;
}

static int die(const char *what, const char *err)
{
	fprintf(stderr, "sealtool: %s: %s\n", what, err);
	return 1;
}

static int usage(void)
{
	fprintf(stderr, "usage: sealtool key FILE | reg NODE FILE [AT [PREV]] | recovery FILE |\n"
			"       seal NAME RECOVERY.pub [KEYFILE...] | push | open NAME KEYFILE WRAP\n");
	return 2;
}

static int seal(int argc, char **argv)
{
	char err[300], kid[KEY_ID_LEN + 1];
	unsigned char rpk[32], dk[ENVELOPE_DK_BYTES];
	if (argc < 4)
		return usage();
	if (recovery_load_public(argv[3], rpk, kid, err, sizeof(err)) < 0)
		return die(argv[3], err);
	size_t len;
	char *plain = read_all(stdin, &len);
	cJSON *sealed = envelope_seal(argv[2], (const unsigned char *)plain, len, rpk, kid, dk, err, sizeof(err));
	free(plain);
	if (!sealed)
		return die("seal", err);
	cJSON *doc = cJSON_CreateObject(), *wraps = cJSON_CreateObject();
	cJSON_AddItemToObject(doc, "sealed", sealed);
	cJSON_AddItemToObject(doc, "wraps", wraps);
	for (int i = 4; i < argc; i++) {
		struct node_key k;
		if (nodekey_load(argv[i], &k, err, sizeof(err)) < 0)
			return die(argv[i], err);
		char *w = envelope_wrap(dk, k.xpk);
		cJSON_AddStringToObject(wraps, k.kid, w);
		free(w);
		nodekey_forget(&k);
	}
	sodium_memzero(dk, sizeof(dk));
	char *out = json_encode_canonical(doc);
	printf("%s\n", out);
	free(out);
	cJSON_Delete(doc);
	return 0;
}

static int open_push(int argc, char **argv)
{
	char err[300];
	if (argc < 5)
		return usage();
	struct node_key k;
	if (nodekey_load(argv[3], &k, err, sizeof(err)) < 0)
		return die(argv[3], err);
	size_t len;
	char *text = read_all(stdin, &len);
	cJSON *doc = cJSON_ParseWithLength(text, len);
	free(text);
	struct envelope e;
	if (envelope_decode(cJSON_GetObjectItemCaseSensitive(doc, "sealed"), &e, err, sizeof(err)) < 0)
		return die("envelope", err);
	unsigned char dk[ENVELOPE_DK_BYTES];
	if (envelope_unwrap(&e, argv[4], strlen(argv[4]), k.xpk, k.xsk, dk, err, sizeof(err)) < 0)
		return die("wrap", err);
	size_t plen;
	char *plain = envelope_open(&e, argv[2], dk, &plen, err, sizeof(err));
	sodium_memzero(dk, sizeof(dk));
	if (!plain)
		return die("open", err);
	fwrite(plain, 1, plen, stdout);
	envelope_wipe(plain);
	envelope_release(&e);
	cJSON_Delete(doc);
	nodekey_forget(&k);
	return 0;
}

static int digest(void)
{
	size_t len;
	char *text = read_all(stdin, &len);
	cJSON *doc = cJSON_ParseWithLength(text, len);
	free(text);
	const cJSON *up = cJSON_GetObjectItemCaseSensitive(doc, "upserts"), *it;
	if (!cJSON_IsArray(up))
		return die("digest", "not a poll answer (no upserts)");
	struct lthash h;
	lthash_init(&h);
	cJSON_ArrayForEach(it, up) {
		const char *name = json_get_string(it, "name");
		char *body = json_encode_canonical(cJSON_GetObjectItemCaseSensitive(it, "body"));
		unsigned char seed[LTHASH_SEED_BYTES];
		lthash_seed(name, body, strlen(body), seed);
		lthash_add(&h, seed);
		free(body);
	}
	unsigned char d[LTHASH_DIGEST_BYTES];
	char hex[2 * LTHASH_DIGEST_BYTES + 1], signed_hex[2 * LTHASH_DIGEST_BYTES + 1] = "-";
	lthash_digest(&h, d);
	lthash_digest_hex(d, hex);
	const char *tok = json_get_string(doc, "statement");
	struct statement st;
	if (tok && statement_peek(tok, strlen(tok), &st) == 0) {
		lthash_digest_hex(st.digest, signed_hex);
		statement_release(&st);
	}
	printf("%s %s\n", hex, signed_hex);
	cJSON_Delete(doc);
	return 0;
}

int main(int argc, char **argv)
{
	char err[300];
	if (sodium_init() < 0 || argc < 2)
		return argc < 2 ? usage() : 99;
	const char *cmd = argv[1];
	if (strcmp(cmd, "key") == 0 && argc == 3) {
		struct node_key k;
		bool made;
		if (nodekey_load_or_make(argv[2], &k, &made, err, sizeof(err)) < 0)
			return die(argv[2], err);
		printf("%s\n", k.kid);
		nodekey_forget(&k);
		return 0;
	}
	if (strcmp(cmd, "reg") == 0 && argc >= 4) {
		struct node_key k, prev;
		if (nodekey_load(argv[3], &k, err, sizeof(err)) < 0)
			return die(argv[3], err);
		int64_t at = argc >= 5 ? strtoll(argv[4], NULL, 10) : (int64_t)time(NULL);
		bool has_prev = argc >= 6;
		if (has_prev && nodekey_load(argv[5], &prev, err, sizeof(err)) < 0)
			return die(argv[5], err);
		char *reg = nodekey_registration(argv[2], &k, has_prev ? &prev : NULL, at);
		printf("%s\n", reg);
		free(reg);
		nodekey_forget(&k);
		if (has_prev)
			nodekey_forget(&prev);
		return 0;
	}
	if (strcmp(cmd, "recovery") == 0 && argc == 3) {
		unsigned char pk[32];
		char kid[KEY_ID_LEN + 1];
		if (recovery_generate(argv[2], err, sizeof(err)) < 0)
			return die(argv[2], err);
		size_t l = strlen(argv[2]);
		char *pub = malloc(l + 5);
		memcpy(pub, argv[2], l);
		memcpy(pub + l, ".pub", 5);
		int rc = recovery_load_public(pub, pk, kid, err, sizeof(err));
		free(pub);
		if (rc < 0)
			return die("recovery", err);
		printf("%s\n", kid);
		return 0;
	}
	if (strcmp(cmd, "seal") == 0)
		return seal(argc, argv);
	if (strcmp(cmd, "push") == 0) {
		size_t len, plen;
		char *text = read_all(stdin, &len);
		char *push = envelope_push_body(text, len, &plen);
		free(text);
		if (!push)
			return die("push", "not a sealed body");
		printf("%.*s\n", (int)plen, push);
		free(push);
		return 0;
	}
	if (strcmp(cmd, "open") == 0)
		return open_push(argc, argv);
	if (strcmp(cmd, "digest") == 0)
		return digest();
	return usage();
}
