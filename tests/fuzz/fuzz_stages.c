/* fuzz_stages.c: libFuzzer target for rollout_parse_stages (--stages) and
 * rollout_stage_size: nothing crashes, a refusal has a message, and an
 * accepted list is strictly increasing percentages 1..100 ending at 100,
 * whose stage sizes grow with the percentage and stay within 1..n. */
#include "fuzz.h"
#include "rollout/rollout.h"
#include "rollout/order.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what, const char *input)
{
	fprintf(stderr, "fuzz_stages: %s\n  input: %.256s\n", what, input);
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	if (!s)
		abort();
	if (size)
		memcpy(s, data, size);
	s[size] = '\0';
	unsigned st[ROLLOUT_MAX_STAGES];
	size_t n = 0;
	char err[256] = "";
	if (rollout_parse_stages(s, st, &n, err, sizeof(err)) < 0) {
		if (!err[0])
			die("refused without a message", s);
		free(s);
		return 0;
	}
	if (n == 0 || n > ROLLOUT_MAX_STAGES || st[n - 1] != 100)
		die("accepted a list that does not end at 100", s);
	static const size_t fleets[] = { 1, 2, 7, 10, 99, 100, 101, 1000, 100000 };
	for (size_t f = 0; f < sizeof(fleets) / sizeof(fleets[0]); f++) {
		size_t prev = 0;
		for (size_t i = 0; i < n; i++) {
			if (st[i] < 1 || st[i] > 100 || (i && st[i] <= st[i - 1]))
				die("accepted a stage out of order or range", s);
			size_t k = rollout_stage_size(fleets[f], st[i]);
			if (k < 1 || k > fleets[f] || k < prev)
				die("stage size out of 1..n or shrinking", s);
			prev = k;
		}
		if (prev != fleets[f])
			die("the last stage does not hold every node", s);
	}
	free(s);
	return 0;
}
