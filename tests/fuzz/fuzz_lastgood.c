/* fuzz_lastgood.c: libFuzzer target for agent/lastgood.c loading damaged
 * state directories. The input is split at its first byte's offset into a
 * snapshot file and a journal file of generation 1 (after a real snapshot
 * of generation 0's state is kept as the fallback, half the time). Property:
 * loading never crashes and either loads something whole or says why.
 * When the first byte's bit 1 is set, the input is instead the record of
 * an apply in flight (lastgood.pending) beside a real generation 1: as it
 * is (bit 2), or as the payload of its journal record, wrapped with right
 * checksums so that the decoder sees it. Property: reading it back never
 * crashes and finds it, finds none, or says why. */
#include "fuzz.h"
#include "lastgood.h"
#include "state/state.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

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
					     "lastgood-2.journal", "lastgood.pending" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
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

static void le32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void le64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/* The record of an apply in flight on generation 1 (version 0, an empty
 * journal): a generation id of the input's second byte's length (at most
 * 70: over the limit sometimes), and the rest of the input as the
 * payload of its journal record. */
static void put_pending(const uint8_t *data, size_t size)
{
	size_t glen = size > 1 ? data[1] % 71 : 0, off = size > 1 ? 2 : 1;
	if (glen > size - off)
		glen = size - off;
	const uint8_t *payload = data + off + glen;
	size_t plen = size - off - glen;
	uLongf comp = compressBound((uLong)plen);
	size_t cap = 8 + 24 + 4 + glen + 16 + comp + 4;
	unsigned char *f = malloc(cap);
	if (!f)
		abort();
	memcpy(f, "TTHRPND1", 8);
	le64(f + 8, 0);
	le64(f + 16, 1);
	le64(f + 24, 0);
	le32(f + 32, (uint32_t)glen);
	memcpy(f + 36, data + off, glen);
	unsigned char *rec = f + 36 + glen;
	if (compress2(rec + 16, &comp, plen ? payload : (const uint8_t *)"", (uLong)plen, 1) != Z_OK)
		abort();
	memcpy(rec, "TJR2", 4);
	le32(rec + 4, (uint32_t)comp);
	le32(rec + 8, (uint32_t)plen);
	uLong crc = crc32(0, rec, 12);
	le32(rec + 12, (uint32_t)crc32(crc, rec + 16, (uInt)comp));
	size_t len = 36 + glen + 16 + comp;
	le32(f + len, (uint32_t)crc32(0, f, (uInt)len));
	put("lastgood.pending", f, len + 4);
	free(f);
}

static void pending_case(const uint8_t *data, size_t size)
{
	char err[512];
	struct lastgood *lg = lastgood_open(dir, err, sizeof(err));
	struct state s;
	state_init(&s);
	if (!lg || lastgood_compact(lg, &s, err, sizeof(err)) < 0)
		abort();
	lastgood_close(lg);
	if (data[0] & 4)
		put("lastgood.pending", data + 1, size - 1);
	else
		put_pending(data, size);
	lg = lastgood_open(dir, err, sizeof(err));
	if (!lg || lastgood_load(lg, &s, err, sizeof(err)) != 1)
		abort();
	struct candidate c;
	char *statement, *gen;
	err[0] = '\0';
	int rc = lastgood_pending_load(lg, &s, &c, &statement, &gen, err, sizeof(err));
	if (rc < 0 && !err[0])
		abort();
	if (rc == 1) {
		if (c.version <= s.version || c.statement != statement)
			abort();
		candidate_release(&c);
		free(statement);
		free(gen);
	}
	/* read or not, it is void now (or still there, when found) */
	err[0] = '\0';
	if (rc != 1 && lastgood_pending_load(lg, &s, &c, &statement, &gen, err, sizeof(err)) != 0)
		abort();
	state_release(&s);
	lastgood_close(lg);
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
	if (data[0] & 2) {
		pending_case(data, size);
		return 0;
	}
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
