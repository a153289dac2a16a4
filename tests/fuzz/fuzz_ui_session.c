/* fuzz_ui_session.c: libFuzzer target for POST /v1/ui/session's body
 * (api/ui_session.c, api_ui_session_parse). Nothing crashes; a refusal
 * has a message; an accepted ttl is a whole number of seconds within its
 * bounds, the default for an empty body. */
#include "api/api.h"
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what, const uint8_t *data, size_t size)
{
	fprintf(stderr, "fuzz_ui_session: %s\n  input: %.*s\n", what, (int)(size > 256 ? 256 : size), (const char *)data);
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[512] = "";
	int64_t ttl = -1;
	if (api_ui_session_parse((const char *)data, size, &ttl, err, sizeof(err)) == 0) {
		if (ttl < UI_SESSION_TTL_MIN || ttl > UI_SESSION_TTL_MAX)
			die("a ttl out of its bounds accepted", data, size);
		if (!size && ttl != UI_SESSION_TTL_DEFAULT)
			die("an empty body is not the default", data, size);
	} else if (!err[0] || strncmp(err, "ui session: ", 12) != 0) {
		die("a body refused without a message naming the endpoint", data, size);
	}
	return 0;
}
