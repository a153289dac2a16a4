/* fuzz_lastgood.c: libFuzzer target for agent/lastgood.c loading damaged
 * state directories. The input is split at its first byte's offset into a
 * snapshot file and a journal file of generation 1 (after a real snapshot
 * of generation 0's state is kept as the fallback, half the time). Property:
 * loading never crashes and either loads something whole or says why. */
#include "fuzz.h"
#include "lastgood.h"
#include "state.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];

static void put(const char *name, const uint8_t *data, size_t len)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		abort();
	if (len && write(fd, data, len) != (ssize_t)len)
		abort();
	close(fd);
}

static void clear(void)
{
	static const char *const names[] = { "lastgood-1.snap", "lastgood-1.journal", "lastgood-2.snap",
					     "lastgood-2.journal" };
	for (size_t i = 0; i < 4; i++) {
		char path[128];
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		unlink(path);
	}
}

static void remove_dir(void)
{
	clear();
	char path[128];
	snprintf(path, sizeof(path), "%s/lastgood-3.snap.tmp", dir);
	unlink(path);
	rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[512];
	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "/tmp/fuzz-lastgood-XXXXXX");
		if (!mkdtemp(dir))
			abort();
		atexit(remove_dir);
	}
	if (size < 1)
		return 0;
	clear();
	size_t cut = size > 1 ? data[0] % size : 0;
	bool fallback = data[0] & 1;
	if (fallback) {
		/* generation 1: an empty but valid snapshot, written for real */
		struct lastgood *lg = lastgood_open(dir, err, sizeof(err));
		struct state s;
		state_init(&s);
		if (!lg || lastgood_compact(lg, &s, err, sizeof(err)) < 0)
			abort();
		lastgood_close(lg);
		state_release(&s);
	}
	const char *snap = fallback ? "lastgood-2.snap" : "lastgood-1.snap";
	const char *journal = fallback ? "lastgood-2.journal" : "lastgood-1.journal";
	put(snap, data + 1, cut > 0 ? cut - 1 : 0);
	put(journal, data + cut, size - cut);

	struct lastgood *lg = lastgood_open(dir, err, sizeof(err));
	if (!lg)
		abort();
	struct state s;
	state_init(&s);
	err[0] = '\0';
	int rc = lastgood_load(lg, &s, err, sizeof(err));
	if (rc < 0 && !err[0])
		abort();
	if (fallback && rc != 1)
		abort();   /* the valid older generation must be found */
	state_release(&s);
	lastgood_close(lg);
	return 0;
}
