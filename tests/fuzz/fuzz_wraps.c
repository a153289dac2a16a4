/* fuzz_wraps.c: libFuzzer target for agent/wraps.c's parser (the plane's
 * answer to GET /v1/wraps, and STATE_DIR/wraps.json, where a secret may
 * hold an array of entries, one per envelope). Properties: a
 * refusal says why and adds nothing; what parses prints (wraps_text) to a
 * text that parses to the same entries, and prints the same again. */
#include "fuzz.h"
#include "wraps.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wraps w, again;
	char err[1024] = "";
	wraps_init(&w);
	wraps_init(&again);
	if (wraps_parse((const char *)data, size, NULL, &w, err, sizeof(err)) < 0) {
		if (!err[0] || w.n)
			abort();
		goto out;
	}
	struct buf t1 = BUF_INIT, t2 = BUF_INIT;
	const char *kid = "0123456789abcdef";
	wraps_text(&w, kid, &t1);
	if (wraps_parse(t1.data, t1.len, kid, &again, err, sizeof(err)) < 0 || again.n != w.n)
		abort();
	wraps_text(&again, kid, &t2);
	if (t1.len != t2.len || memcmp(t1.data, t2.data, t1.len) != 0)
		abort();
	buf_release(&t1);
	buf_release(&t2);
out:
	wraps_release(&w);
	wraps_release(&again);
	return 0;
}
