/* fuzz_rollout_text.c: libFuzzer target for what tetherctl prints of the
 * plane's answers for people: a rollout's lines (rollout_text_fields,
 * `rollout status`) and any value as words (value_text, every
 * "label: value" line). The input is the plane's JSON, parsed as
 * tetherctl parses it. Nothing crashes, and no line carries raw JSON: no
 * '{' appears that the input's strings did not bring. */
#include "fuzz.h"
#include "json.h"
#include "output.h"
#include "rollout_text.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[256];
	struct json_limits lim = { 1 << 20, 32 };
	cJSON *doc = json_decode((const char *)data, size, &lim, err, sizeof(err));
	if (!doc)
		return 0;
	/* a string may carry any character, '{' too: checked only without strings */
	bool braces = memchr(data, '"', size) != NULL;
	char *words = value_text(doc);
	if (!braces && strchr(words, '{')) {
		fprintf(stderr, "fuzz_rollout_text: raw JSON in '%.256s'\n", words);
		abort();
	}
	free(words);
	if (cJSON_IsObject(doc)) {
		struct fields f = { 0, NULL, NULL };
		rollout_text_fields(&f, doc);
		for (size_t i = 0; i < f.n; i++) {
			if (!braces && strchr(f.value[i], '{')) {
				fprintf(stderr, "fuzz_rollout_text: raw JSON in %s: '%.256s'\n", f.label[i], f.value[i]);
				abort();
			}
			free(f.label[i]);
			free(f.value[i]);
		}
		free(f.label);
		free(f.value);
	}
	cJSON_Delete(doc);
	return 0;
}
