/* fuzz_procfs.c: libFuzzer target for the parsers of /proc text the drain
 * guard reads (agent/consumer/procfs.c): a stat line, a status file, a
 * cmdline. A process names itself (its comm, its title), so any bytes may
 * come. Properties:
 *  - nothing crashes, and nothing is read outside the input;
 *  - an accepted stat line has a pid in 1..4194304, a ppid at most that,
 *    a state that is not a space, and a comm that is the bytes between the
 *    first '(' and the last ')', cut to 63; printed again in the kernel's
 *    form it parses to the same fields;
 *  - an accepted status has a "VmRSS:" line and a whole number of KiB;
 *  - a title is at most the input's length and the room given, has no
 *    control byte and no trailing space. */
#include "consumer/procfs.h"
#include "fuzz.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check_stat(const char *text, size_t len)
{
	struct procfs_stat st;
	if (procfs_parse_stat(text, len, &st) < 0)
		return;
	if (st.pid < 1 || st.pid > 4194304 || st.ppid < 0 || st.ppid > 4194304 || st.state == ' ')
		abort();
	const char *open = memchr(text, '(', len), *close = NULL;
	for (size_t i = len; i > 0; i--)
		if (text[i - 1] == ')') {
			close = text + i - 1;
			break;
		}
	if (!open || !close || close < open)
		abort();
	size_t n = (size_t)(close - open - 1);
	if (n > sizeof(st.comm) - 1)
		n = sizeof(st.comm) - 1;
	if (memcmp(st.comm, open + 1, n) != 0 || st.comm[n] != '\0')
		abort();
	if (memchr(st.comm, '\0', n))
		return;   /* a NUL in the name: the printed form would end there */
	char line[256];
	int w = snprintf(line, sizeof(line), "%ld (%s) %c %ld 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %llu 0\n", st.pid,
			 st.comm, st.state, st.ppid, (unsigned long long)st.start);
	struct procfs_stat again;
	if (w < 0 || (size_t)w >= sizeof(line) || procfs_parse_stat(line, (size_t)w, &again) < 0 ||
	    memcmp(&again, &st, sizeof(st)) != 0)
		abort();
}

static void check_rss(const char *text, size_t len)
{
	uint64_t bytes;
	if (procfs_parse_rss(text, len, &bytes) < 0)
		return;
	if (bytes % 1024)
		abort();
	bool found = len >= 6 && memcmp(text, "VmRSS:", 6) == 0;
	for (size_t i = 0; !found && i + 7 <= len; i++)
		found = text[i] == '\n' && memcmp(text + i + 1, "VmRSS:", 6) == 0;
	if (!found)
		abort();
}

static void check_title(const char *raw, size_t len)
{
	static const size_t rooms[] = { 1, 2, 16, 256 };
	for (size_t r = 0; r < sizeof(rooms) / sizeof(rooms[0]); r++) {
		char out[256];
		memset(out, 'X', sizeof(out));
		procfs_title(raw, len, out, rooms[r]);
		size_t n = strnlen(out, rooms[r]);
		if (n >= rooms[r] || n > len || (n && out[n - 1] == ' '))
			abort();
		for (size_t i = 0; i < n; i++)
			if ((unsigned char)out[i] < 0x20 || (unsigned char)out[i] == 0x7f)
				abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* a copy of exactly size bytes: reading past it is caught */
	char *text = malloc(size ? size : 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	check_stat(text, size);
	check_rss(text, size);
	check_title(text, size);
	free(text);
	return 0;
}
