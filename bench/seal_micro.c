/* seal_micro.c: what sealed secrets cost at a node and at the writer, on
 * this machine (bench/sealed.sh prints it). Times the code tetherd and
 * tetherctl run (common/envelope.c, common/nodekey.c) on a secret body of
 * about --bytes bytes (a certificate and its key), each case in a loop of
 * about --ms milliseconds:
 *
 *   open_N       a node opens N secrets of one push: for each, decode the
 *                envelope, unwrap its data key with the node's X25519 pair
 *                (crypto_box_seal_open, the key commitment), decrypt the
 *                body (XChaCha20-Poly1305); N = 1, 10, 100
 *   seal         the writer seals one secret (fresh data key, encryption,
 *                the recovery wrap)
 *   wrap         the writer wraps one data key for one more node
 *   reseal_1000x10  `secrets reseal`'s crypto for 1,000 secrets and 10
 *                new nodes: 1,000 recovery unwraps and 10,000 wraps (once)
 *
 * Prints key=value lines: microseconds per operation (reseal: ms). Usage:
 *   bench/seal_micro [--ms N] [--bytes N] */
#include "envelope.h"
#include "nodekey.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, const char *err)
{
	fprintf(stderr, "seal_micro: %s: %s\n", what, err);
	exit(1);
}

/* One sealed secret as a node gets it: its push body's "sealed" object and
 * the node's wrap. */
struct sealed_one {
	char name[64];
	cJSON *sealed;
	char *wrap;
};

static void make_one(struct sealed_one *s, int i, const char *plain, size_t len, const unsigned char rpk[32],
		     const char *rkid, const unsigned char npk[32])
{
	char err[256];
	unsigned char dk[ENVELOPE_DK_BYTES];
	snprintf(s->name, sizeof(s->name), "secret/s%d", i);
	s->sealed = envelope_seal(s->name, (const unsigned char *)plain, len, rpk, rkid, dk, err, sizeof(err));
	if (!s->sealed)
		die("envelope_seal", err);
	s->wrap = envelope_wrap(dk, npk);
	sodium_memzero(dk, sizeof(dk));
}

/* What a node does for one secret of a push. */
static void open_one(const struct sealed_one *s, const struct node_key *nk)
{
	char err[256];
	struct envelope e;
	unsigned char dk[ENVELOPE_DK_BYTES];
	size_t n;
	if (envelope_decode(s->sealed, &e, err, sizeof(err)) < 0)
		die("envelope_decode", err);
	if (envelope_unwrap(&e, s->wrap, strlen(s->wrap), nk->xpk, nk->xsk, dk, err, sizeof(err)) < 0)
		die("envelope_unwrap", err);
	char *plain = envelope_open(&e, s->name, dk, &n, err, sizeof(err));
	if (!plain)
		die("envelope_open", err);
	sodium_memzero(dk, sizeof(dk));
	envelope_wipe(plain);
	envelope_release(&e);
}

int main(int argc, char **argv)
{
	double ms = 500;
	size_t bytes = 3500;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--ms"))
			ms = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "--bytes"))
			bytes = (size_t)atol(argv[i + 1]);
	}
	if (sodium_init() < 0)
		die("sodium_init", "failed");
	char *plain = malloc(bytes + 1);
	memset(plain, 'A', bytes);
	memcpy(plain, "{\"cert\":\"-----BEGIN ", 20);
	plain[bytes] = 0;

	unsigned char rpk[32], rsk[32];
	crypto_box_keypair(rpk, rsk);
	char rkid[KEY_ID_LEN + 1];
	keys_id(rpk, rkid);
	struct node_key nk;
	char err[256], path[] = "/tmp/seal_micro.XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0)
		die("mkstemp", "failed");
	close(fd);
	if (nodekey_make(path, &nk, err, sizeof(err)) < 0)
		die("nodekey_make", err);
	remove(path);

	static struct sealed_one s[100];
	for (int i = 0; i < 100; i++)
		make_one(&s[i], i, plain, bytes, rpk, rkid, nk.xpk);
	printf("bytes=%zu\n", bytes);

	static const int counts[] = { 1, 10, 100 };
	for (size_t c = 0; c < 3; c++) {
		uint64_t n = 0;
		double t0 = now_s(), t = t0;
		while (t - t0 < ms / 1000.0) {
			for (int i = 0; i < counts[c]; i++)
				open_one(&s[i], &nk);
			n++;
			t = now_s();
		}
		printf("open_%d_us=%.1f\n", counts[c], (t - t0) * 1e6 / (double)n);
	}
	{
		uint64_t n = 0;
		double t0 = now_s(), t = t0;
		unsigned char dk[ENVELOPE_DK_BYTES];
		while (t - t0 < ms / 1000.0) {
			cJSON *e = envelope_seal("secret/x", (const unsigned char *)plain, bytes, rpk, rkid, dk, err,
						 sizeof(err));
			cJSON_Delete(e);
			n++;
			t = now_s();
		}
		printf("seal_us=%.1f\n", (t - t0) * 1e6 / (double)n);
		n = 0;
		t0 = t = now_s();
		while (t - t0 < ms / 1000.0) {
			free(envelope_wrap(dk, nk.xpk));
			n++;
			t = now_s();
		}
		printf("wrap_us=%.1f\n", (t - t0) * 1e6 / (double)n);
	}
	{
		/* reseal: 1,000 recovery unwraps, 10 wraps each */
		double t0 = now_s();
		unsigned char dk[ENVELOPE_DK_BYTES];
		for (int i = 0; i < 1000; i++) {
			struct envelope e;
			if (envelope_decode(s[i % 100].sealed, &e, err, sizeof(err)) < 0)
				die("envelope_decode", err);
			if (envelope_unwrap_recovery(&e, rpk, rsk, dk, err, sizeof(err)) < 0)
				die("envelope_unwrap_recovery", err);
			for (int k = 0; k < 10; k++)
				free(envelope_wrap(dk, nk.xpk));
			envelope_release(&e);
		}
		printf("reseal_1000x10_ms=%.1f\n", (now_s() - t0) * 1e3);
	}
	for (int i = 0; i < 100; i++) {
		cJSON_Delete(s[i].sealed);
		free(s[i].wrap);
	}
	nodekey_forget(&nk);
	free(plain);
	return 0;
}
