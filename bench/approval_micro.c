/* approval_micro.c: what a node's approval check costs per push, on this
 * machine (bench/approvals.sh prints it): common/approval.c's code, each
 * in a loop of about --ms milliseconds:
 *
 *   sign         tetherctl approve signs one token (per subscription)
 *   verify       one token: base64url, the payload's JSON, kid = id(pk),
 *                Ed25519
 *   count_K      a push's whole check at a node (approve_check's
 *                approval_count) with K tokens, K of 3 approver keys in the
 *                node's file: K = 1, 2, 3
 *   count_2_bad  two tokens that do not count (one of another version, one
 *                by a key not in the file): the refusal's cost, its reasons
 *                formatted
 *
 * Prints key=value lines, microseconds per operation. Usage:
 *   bench/approval_micro [--ms N] */
#include "approval.h"
#include "keys.h"
#include "lthash.h"
#include "util.h"

#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static volatile size_t sink;

#define TIME_OP(key, ms, ...)                                                                 \
	do {                                                                                   \
		uint64_t n_ = 0, batch_ = 16;                                                  \
		double t0_ = now_s(), t_ = t0_;                                                \
		while (t_ - t0_ < (ms) / 1000.0) {                                             \
			for (uint64_t k_ = 0; k_ < batch_; k_++) {                             \
				__VA_ARGS__                                                    \
			}                                                                      \
			n_ += batch_;                                                          \
			t_ = now_s();                                                          \
		}                                                                              \
		printf("%s_us=%.3f\n", key, (t_ - t0_) * 1e6 / (double)n_);                    \
		printf("%s_n=%" PRIu64 "\n", key, n_);                                         \
	} while (0)

static void make(struct signing_key *k, unsigned char c)
{
	unsigned char seed[32];
	memset(seed, c, sizeof(seed));
	crypto_sign_seed_keypair(k->pk, k->sk, seed);
	keys_id(k->pk, k->kid);
}

int main(int argc, char **argv)
{
	uint64_t ms = 300;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--ms") == 0 && i + 1 < argc) {
			if (parse_uint_range(argv[++i], 1, 60000, &ms) < 0) {
				fprintf(stderr, "approval_micro: --ms: expected 1..60000\n");
				return 2;
			}
		} else {
			fprintf(stderr, "usage: approval_micro [--ms N]\n");
			return 2;
		}
	}
	if (sodium_init() < 0)
		return 1;
	struct signing_key k[4];
	struct trust file = { 0 };
	for (int i = 0; i < 4; i++)
		make(&k[i], (unsigned char)('a' + i));
	for (int i = 0; i < 3; i++) {   /* the node's file: keys 0..2; key 3 is unknown to it */
		memcpy(file.key[i].pk, k[i].pk, 32);
		memcpy(file.key[i].kid, k[i].kid, sizeof(k[i].kid));
	}
	file.n = 3;
	const uint64_t version = 4242;
	const char *sub = "cluster/,route/";
	unsigned char digest[LTHASH_DIGEST_BYTES];
	memset(digest, 0x5a, sizeof(digest));
	char *tok[3], *bad[2];
	for (int i = 0; i < 3; i++) {
		struct approval ap = { .version = version, .sub = (char *)sub };
		memcpy(ap.digest, digest, sizeof(digest));
		tok[i] = approval_sign(&ap, &k[i]);
	}
	struct approval old = { .version = version - 1, .sub = (char *)sub }, unk = { .version = version, .sub = (char *)sub };
	memcpy(old.digest, digest, sizeof(digest));
	memcpy(unk.digest, digest, sizeof(digest));
	bad[0] = approval_sign(&old, &k[0]);
	bad[1] = approval_sign(&unk, &k[3]);
	printf("token_bytes=%zu\n", strlen(tok[0]));

	TIME_OP("sign", ms, {
		struct approval ap = { .version = version, .sub = (char *)sub };
		memcpy(ap.digest, digest, sizeof(digest));
		char *t = approval_sign(&ap, &k[0]);
		sink += strlen(t);
		free(t);
	});
	TIME_OP("verify", ms, {
		struct approval ap;
		char err[256];
		sink += (size_t)approval_verify(tok[0], strlen(tok[0]), &ap, err, sizeof(err));
		approval_release(&ap);
	});
	char why[768];
	const char *const *toks = (const char *const *)tok;
	TIME_OP("count_1", ms, { sink += approval_count(toks, 1, &file, "approvers", version, sub, digest, why, sizeof(why)); });
	TIME_OP("count_2", ms, { sink += approval_count(toks, 2, &file, "approvers", version, sub, digest, why, sizeof(why)); });
	TIME_OP("count_3", ms, { sink += approval_count(toks, 3, &file, "approvers", version, sub, digest, why, sizeof(why)); });
	TIME_OP("count_2_bad", ms, {
		sink += approval_count((const char *const *)bad, 2, &file, "approvers", version, sub, digest, why, sizeof(why));
	});
	for (int i = 0; i < 3; i++)
		free(tok[i]);
	free(bad[0]);
	free(bad[1]);
	for (int i = 0; i < 4; i++)
		keys_forget(&k[i]);
	return 0;
}
