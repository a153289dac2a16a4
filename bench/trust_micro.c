/* trust_micro.c: what one push's trust checks cost, piece by piece, on this
 * machine (bench/trust.sh prints it next to the agent's figures). Times the
 * code tetherd and the plane run (common/statement.c, common/lthash.c, with
 * a key from common/keys.c), each in a loop of about --ms milliseconds:
 *
 *   sign         the plane signs a statement (once per version and
 *                subscription, whatever the number of nodes)
 *   verify       a node checks a push's statement: base64url, Ed25519,
 *                the payload's JSON (trust_check_push)
 *   peek         decoding a statement without the signature check (for
 *                comparison: the agent keeps what verify decoded and
 *                does not decode a push's statement again)
 *   seed         one resource's LtHash seed: BLAKE2b of the body, then of
 *                the name and that hash
 *   add          adding (or subtracting) one element: the ChaCha20 expansion
 *                of its seed into 1024 lanes and the lane-wise sum
 *   digest       the 32-byte digest of the lanes (BLAKE2b over 2 KiB)
 *   candidate    a one-resource push's digest check as tetherd does it:
 *                copy the lanes, subtract the old body, add the new one,
 *                digest, compare (2 seeds, 2 expansions, 1 digest)
 *
 * Prints key=value lines, microseconds per operation. Usage:
 *   bench/trust_micro [--ms N] */
#include "keys.h"
#include "lthash.h"
#include "statement.h"
#include "util.h"

#include <inttypes.h>
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

static volatile unsigned sink;

/* Runs op until about ms milliseconds have passed; prints KEY_us. */
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

int main(int argc, char **argv)
{
	uint64_t ms = 300;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--ms") == 0 && i + 1 < argc) {
			if (parse_uint_range(argv[++i], 1, 60000, &ms) < 0) {
				fprintf(stderr, "trust_micro: --ms: expected 1..60000\n");
				return 2;
			}
		} else {
			fprintf(stderr, "usage: trust_micro [--ms N]\n");
			return 2;
		}
	}
	char err[512], dir[] = "/tmp/trust_micro.XXXXXX", path[64];
	if (!mkdtemp(dir)) {
		perror("trust_micro: mkdtemp");
		return 1;
	}
	snprintf(path, sizeof(path), "%s/key", dir);
	struct signing_key key;
	struct trust trust;
	char pub[80];
	snprintf(pub, sizeof(pub), "%s.pub", path);
	if (keys_generate(path, err, sizeof(err)) < 0 || keys_load_secret(path, &key, err, sizeof(err)) < 0 ||
	    keys_load_trust(pub, &trust, err, sizeof(err)) < 0) {
		fprintf(stderr, "trust_micro: %s\n", err);
		return 1;
	}
	unlink(path);
	unlink(pub);
	rmdir(dir);

	/* a one-cluster change, as bench/agent.sh and trust.sh push it */
	const char *name = "cluster/c7";
	const char *old_body =
		"{\"endpoints\":[{\"address\":\"10.0.0.7\",\"port\":80,\"weight\":1}],\"lb\":\"round_robin\"}";
	const char *new_body = "{\"endpoints\":[{\"address\":\"10.200.0.1\",\"port\":80}]}";
	struct lthash state, work;
	unsigned char seed[LTHASH_SEED_BYTES], d[LTHASH_DIGEST_BYTES];
	lthash_init(&state);
	for (int i = 0; i < 1000; i++) {
		char n[32], b[128];
		snprintf(n, sizeof(n), "cluster/c%d", i);
		snprintf(b, sizeof(b), "{\"endpoints\":[{\"address\":\"10.0.%d.%d\",\"port\":80,\"weight\":1}]}",
			 i / 256, i % 256);
		lthash_seed(n, b, strlen(b), seed);
		lthash_add(&state, seed);
	}

	struct statement st = {
		.version = 1234, .sub = (char *)"", .issued = 1796000000, .expires = 1796010800,
	};
	lthash_digest(&state, st.digest);
	char *token = statement_sign(&st, &key);
	size_t tlen = strlen(token);
	printf("token_bytes=%zu\n", tlen);

	TIME_OP("sign", ms, {
		char *t = statement_sign(&st, &key);
		sink += (unsigned)t[0];
		free(t);
	});
	TIME_OP("verify", ms, {
		struct statement out;
		if (statement_verify(token, tlen, &trust, &out, err, sizeof(err)) < 0) {
			fprintf(stderr, "trust_micro: %s\n", err);
			return 1;
		}
		sink += (unsigned)out.version;
		statement_release(&out);
	});
	TIME_OP("peek", ms, {
		struct statement out;
		if (statement_peek(token, tlen, &out) == 0) {
			sink += (unsigned)out.version;
			statement_release(&out);
		}
	});
	TIME_OP("seed", ms, {
		lthash_seed(name, new_body, strlen(new_body), seed);
		sink += seed[0];
	});
	work = state;
	TIME_OP("add", ms, {
		lthash_add(&work, seed);
		sink += work.lane[0];
	});
	TIME_OP("digest", ms, {
		lthash_digest(&work, d);
		sink += d[0];
	});
	TIME_OP("candidate", ms, {
		unsigned char so[LTHASH_SEED_BYTES], sn[LTHASH_SEED_BYTES];
		work = state;
		lthash_seed(name, old_body, strlen(old_body), so);
		lthash_sub(&work, so);
		lthash_seed(name, new_body, strlen(new_body), sn);
		lthash_add(&work, sn);
		lthash_digest(&work, d);
		sink += lthash_digest_equal(d, st.digest);
	});
	free(token);
	keys_forget(&key);
	return 0;
}
