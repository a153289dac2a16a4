/* test_lastgood.c: unit tests of agent/lastgood.c: round trips, generations,
 * torn or damaged journals and snapshots, I/O errors, prepare / abandon /
 * commit, O(changed) saves, the record of the apply in flight. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "lastgood.h"
#include "log.h"
#include "state/push.h"
#include "state/state.h"
#include "tmpdir.h"

struct fx {
	char root[64];
	char dir[128];
	struct lastgood *lg;
	struct state s;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	if (test_tmpdir_make(f->root, sizeof(f->root), "lastgood") < 0) {
		free(f);
		return -1;
	}
	snprintf(f->dir, sizeof(f->dir), "%s/state", f->root);
	char err[512];
	f->lg = lastgood_open(f->dir, err, sizeof(err));
	if (!f->lg) {
		fprintf(stderr, "lastgood_open: %s\n", err);
		return -1;
	}
	state_init(&f->s);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	lastgood_close(f->lg);
	state_release(&f->s);
	test_tmpdir_remove(f->root);
	free(f);
	return 0;
}

/* ---- helpers ----------------------------------------------------------------- */

static void decode_build(const struct state *s, const char *json, struct push *p, struct candidate *c)
{
	char err[512];
	if (push_decode(json, strlen(json), NULL, p, err, sizeof(err)) < 0)
		fail_msg("test push does not decode: %s", err);
	if (candidate_build(s, p, 0, c, err, sizeof(err)) < 0)
		fail_msg("test push refused: %s\n%.300s", err, json);
}

/* Saves json applied to f->s, then commits it. */
static void must_save(struct fx *f, const char *json)
{
	struct push p;
	struct candidate c;
	char err[512];
	decode_build(&f->s, json, &p, &c);
	if (lastgood_save(f->lg, &f->s, &c, err, sizeof(err)) < 0)
		fail_msg("lastgood_save: %s", err);
	state_commit(&f->s, &c);
	candidate_release(&c);
	push_release(&p);
}

/* Loads dir with a fresh handle into out (initialised here). */
static int reload(const char *dir, struct state *out, char *err, size_t errlen)
{
	struct lastgood *lg = lastgood_open(dir, err, errlen);
	assert_non_null(lg);
	state_init(out);
	int rc = lastgood_load(lg, out, err, errlen);
	lastgood_close(lg);
	return rc;
}

struct cmp_ctx {
	const struct state *other;
	int bad;
};

static void cmp_one(void *ctx, const struct res *r)
{
	struct cmp_ctx *cc = ctx;
	const struct res *o = state_get(cc->other, r->name);
	if (!o) {
		print_error("%s is missing\n", r->name);
		cc->bad++;
		return;
	}
	if (o->body_len != r->body_len || memcmp(o->body, r->body, r->body_len) != 0 || o->version != r->version ||
	    o->referrers != r->referrers || o->nrefs != r->nrefs ||
	    (o->file_path == NULL) != (r->file_path == NULL) ||
	    (o->file_path && strcmp(o->file_path, r->file_path) != 0)) {
		print_error("%s differs: '%s' v%llu (%u referrers) against '%s' v%llu (%u referrers)\n", r->name,
			    r->body, (unsigned long long)r->version, r->referrers, o->body,
			    (unsigned long long)o->version, o->referrers);
		cc->bad++;
	}
	if (r->file_path) {
		const char *owner = pathindex_file_at(&cc->other->paths, r->file_path);
		if (!owner || strcmp(owner, r->name) != 0) {
			print_error("%s: path '%s' not indexed\n", r->name, r->file_path);
			cc->bad++;
		}
	}
}

static void assert_states_equal(const struct state *want, const struct state *got)
{
	assert_int_equal(got->version, want->version);
	assert_int_equal(got->count, want->count);
	assert_int_equal(got->raw_bytes, want->raw_bytes);
	struct cmp_ctx cc = { got, 0 };
	state_each(want, cmp_one, &cc);
	assert_int_equal(cc.bad, 0);
}

/* Reloads f->dir and expects exactly f->s. */
static void expect_reload_equal(const struct fx *f)
{
	struct state got;
	char err[512];
	assert_int_equal(reload(f->dir, &got, err, sizeof(err)), 1);
	assert_states_equal(&f->s, &got);
	state_release(&got);
}

static char *path_in(const struct fx *f, const char *name)
{
	static char p[256];
	snprintf(p, sizeof(p), "%s/%s", f->dir, name);
	return p;
}

/* Size of a file in the state directory, -1 when absent. */
static long long fsize(const struct fx *f, const char *name)
{
	struct stat st;
	if (stat(path_in(f, name), &st) < 0)
		return -1;
	return (long long)st.st_size;
}

static bool exists(const struct fx *f, const char *name)
{
	return fsize(f, name) >= 0;
}

static char *slurp(const struct fx *f, const char *name, size_t *len)
{
	FILE *fp = fopen(path_in(f, name), "rb");
	assert_non_null(fp);
	struct buf b = BUF_INIT;
	char chunk[4096];
	size_t n;
	while ((n = fread(chunk, 1, sizeof(chunk), fp)) > 0)
		buf_append(&b, chunk, n);
	fclose(fp);
	return buf_detach(&b, len);
}

static void spit(const struct fx *f, const char *name, const char *data, size_t len)
{
	FILE *fp = fopen(path_in(f, name), "wb");
	assert_non_null(fp);
	if (len)
		assert_int_equal(fwrite(data, 1, len, fp), len);
	assert_int_equal(fclose(fp), 0);
}

/* How many lastgood-* files and of them *.tmp the directory holds. */
static int count_files(const struct fx *f, int *tmps)
{
	DIR *d = opendir(f->dir);
	assert_non_null(d);
	int n = 0;
	*tmps = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, "lastgood-", 9) != 0)
			continue;
		n++;
		if (strstr(de->d_name, ".tmp"))
			(*tmps)++;
	}
	closedir(d);
	return n;
}

/* Captures what is written to fd 2 between start and end. */
struct capture {
	int saved;
	FILE *tmp;
};

static void capture_start(struct capture *c)
{
	fflush(stderr);
	c->tmp = tmpfile();
	assert_non_null(c->tmp);
	c->saved = dup(STDERR_FILENO);
	assert_true(c->saved >= 0);
	assert_true(dup2(fileno(c->tmp), STDERR_FILENO) >= 0);
}

static char *capture_end(struct capture *c)
{
	fflush(stderr);
	assert_true(dup2(c->saved, STDERR_FILENO) >= 0);
	close(c->saved);
	struct buf b = BUF_INIT;
	rewind(c->tmp);
	char chunk[4096];
	size_t n;
	while ((n = fread(chunk, 1, sizeof(chunk), c->tmp)) > 0)
		buf_append(&b, chunk, n);
	fclose(c->tmp);
	buf_puts(&b, "");
	return buf_detach(&b, NULL);
}

/* ---- pushes ---------------------------------------------------------------- */

#define BASE_PUSH                                                                                   \
	"{\"version\":1,\"nonce\":\"n\",\"full\":true,\"upserts\":["                                 \
	"{\"name\":\"secret/s\",\"body\":{\"cert\":\"-----BEGIN C\",\"key\":\"-----BEGIN K\"}},"      \
	"{\"name\":\"cluster/a\",\"body\":{\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":80}]}}," \
	"{\"name\":\"cluster/b\",\"body\":{\"endpoints\":[{\"address\":\"10.0.0.2\",\"port\":81}]}}," \
	"{\"name\":\"listener/l\",\"body\":{\"port\":443,\"tls\":{\"secret\":\"s\"}}},"               \
	"{\"name\":\"route/r\",\"body\":{\"listener\":\"l\",\"cluster\":\"a\"}},"                     \
	"{\"name\":\"file/f\",\"body\":{\"path\":\"conf/f.conf\",\"content\":\"hello\"}}]}"

/* The i-th push of a long, always valid series (version i + 2, after BASE_PUSH). */
static char *series_push(int i)
{
	struct buf b = BUF_INIT;
	int v = i + 2;
	buf_printf(&b, "{\"version\":%d,\"base\":%d,\"nonce\":\"s%d\",\"upserts\":[", v, v - 1, i);
	buf_printf(&b, "{\"name\":\"cluster/c%d\",\"body\":{\"endpoints\":[{\"address\":\"10.1.%d.%d\",\"port\":%d}]}}",
		   i % 20, i % 250, (i * 7) % 250, 1 + i % 60000);
	if (i % 3 == 0)
		buf_printf(&b, ",{\"name\":\"route/q%d\",\"body\":{\"listener\":\"l\",\"cluster\":\"%s\"}}", i % 10,
			   i % 2 ? "a" : "b");
	if (i % 5 == 0)
		buf_printf(&b, ",{\"name\":\"file/g%d\",\"body\":{\"path\":\"dir%d/g%d\",\"content\":\"%d\"}}", i % 4,
			   i % 3, i % 4, i);
	buf_puts(&b, "]");
	if (i % 4 == 1)
		buf_printf(&b, ",\"removed\":[\"route/q%d\"]", (i + 5) % 10);
	buf_puts(&b, "}");
	return buf_detach(&b, NULL);
}

static void save_series(struct fx *f, int from, int to)
{
	for (int i = from; i < to; i++) {
		char *p = series_push(i);
		must_save(f, p);
		free(p);
	}
}

/* ---- tests ------------------------------------------------------------------- */

static void test_no_generation(void **state)
{
	struct fx *f = *state;
	char err[512];
	struct stat st;
	assert_int_equal(stat(f->dir, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	assert_int_equal(lastgood_load(f->lg, &f->s, err, sizeof(err)), 0);
	assert_int_equal(f->s.version, 0);
	assert_int_equal(f->s.count, 0);
	struct lastgood_info info;
	lastgood_info(f->lg, &info);
	assert_int_equal(info.generation, 0);
	/* other files in the directory are not generations */
	spit(f, "status.json", "{}", 2);
	spit(f, "lastgood-x.snap", "junk", 4);
	struct state got;
	assert_int_equal(reload(f->dir, &got, err, sizeof(err)), 0);
	assert_int_equal(got.count, 0);
	state_release(&got);
}

static void test_round_trip(void **state)
{
	struct fx *f = *state;
	struct lastgood_info info;
	must_save(f, BASE_PUSH);
	lastgood_info(f->lg, &info);
	assert_int_equal(info.generation, 1);
	assert_int_equal(info.journal_records, 0);
	assert_int_equal(info.journal_bytes, 0);
	assert_true(info.snapshot_bytes > 72);
	assert_int_equal(fsize(f, "lastgood-1.snap"), (long long)info.snapshot_bytes);
	assert_int_equal(fsize(f, "lastgood-1.journal"), 0);
	expect_reload_equal(f);

	/* deltas go to the journal */
	must_save(f, "{\"version\":2,\"base\":1,\"nonce\":\"n\",\"upserts\":[{\"name\":\"cluster/c\",\"body\":"
		     "{\"endpoints\":[{\"address\":\"10.0.0.3\",\"port\":82}]}},{\"name\":\"route/r\",\"body\":"
		     "{\"listener\":\"l\",\"cluster\":\"c\"}}]}");
	lastgood_info(f->lg, &info);
	assert_int_equal(info.generation, 1);
	assert_int_equal(info.journal_records, 1);
	assert_true(info.journal_bytes > 16);
	assert_int_equal(fsize(f, "lastgood-1.journal"), (long long)info.journal_bytes);
	must_save(f, "{\"version\":3,\"base\":2,\"nonce\":\"n\",\"removed\":[\"cluster/a\",\"file/f\"],\"upserts\":["
		     "{\"name\":\"file/h\",\"body\":{\"path\":\"conf/f.conf\",\"content\":\"moved\",\"mode\":\"0600\"}}]}");
	lastgood_info(f->lg, &info);
	assert_int_equal(info.journal_records, 2);
	assert_int_equal(fsize(f, "lastgood-1.journal"), (long long)info.journal_bytes);
	assert_int_equal(f->s.version, 3);
	expect_reload_equal(f);

	/* an empty push (no change) still records its version */
	must_save(f, "{\"version\":4,\"base\":3,\"nonce\":\"n\"}");
	expect_reload_equal(f);

	/* a loaded handle goes on appending where the journal ends */
	struct lastgood *lg2;
	struct state s2;
	char err[512];
	lg2 = lastgood_open(f->dir, err, sizeof(err));
	assert_non_null(lg2);
	state_init(&s2);
	assert_int_equal(lastgood_load(lg2, &s2, err, sizeof(err)), 1);
	lastgood_info(lg2, &info);
	assert_int_equal(info.generation, 1);
	assert_int_equal(info.journal_records, 3);
	lastgood_close(f->lg);
	f->lg = lg2;
	state_release(&f->s);
	f->s = s2;
	must_save(f, "{\"version\":5,\"base\":4,\"nonce\":\"n\",\"upserts\":[{\"name\":\"cluster/b\",\"body\":"
		     "{\"endpoints\":[{\"address\":\"10.0.0.9\",\"port\":89}]}}]}");
	lastgood_info(f->lg, &info);
	assert_int_equal(info.journal_records, 4);
	assert_int_equal(fsize(f, "lastgood-1.journal"), (long long)info.journal_bytes);
	expect_reload_equal(f);
}

static void test_compaction_generations(void **state)
{
	struct fx *f = *state;
	struct lastgood_info info;
	char err[512];
	must_save(f, BASE_PUSH);
	save_series(f, 0, 3);
	assert_int_equal(lastgood_compact(f->lg, &f->s, err, sizeof(err)), 0);
	lastgood_info(f->lg, &info);
	assert_int_equal(info.generation, 2);
	assert_int_equal(info.journal_bytes, 0);
	assert_int_equal(info.journal_records, 0);
	/* the previous generation is kept beside the new one */
	assert_true(exists(f, "lastgood-1.snap"));
	assert_true(exists(f, "lastgood-1.journal"));
	assert_true(exists(f, "lastgood-2.snap"));
	assert_int_equal(fsize(f, "lastgood-2.journal"), 0);
	expect_reload_equal(f);

	save_series(f, 3, 6);
	assert_int_equal(lastgood_compact(f->lg, &f->s, err, sizeof(err)), 0);
	lastgood_info(f->lg, &info);
	assert_int_equal(info.generation, 3);
	/* older ones go */
	assert_false(exists(f, "lastgood-1.snap"));
	assert_false(exists(f, "lastgood-1.journal"));
	assert_true(exists(f, "lastgood-2.snap"));
	assert_true(exists(f, "lastgood-2.journal"));
	assert_true(exists(f, "lastgood-3.snap"));
	int tmps;
	assert_int_equal(count_files(f, &tmps), 4);
	assert_int_equal(tmps, 0);
	expect_reload_equal(f);
}

/* Random printable text of n bytes (compresses poorly). */
static void random_text(struct buf *b, size_t n, uint64_t *seed)
{
	static const char alphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/=-_.,;:!?";
	for (size_t i = 0; i < n; i++) {
		*seed = *seed * 6364136223846793005ULL + 1442695040888963407ULL;
		buf_putc(b, alphabet[(*seed >> 33) % (sizeof(alphabet) - 1)]);
	}
}

static void test_journal_growth_compacts(void **state)
{
	struct fx *f = *state;
	struct lastgood_info info;
	uint64_t seed = 12345;
	must_save(f, BASE_PUSH);
	size_t last_journal = 0;
	bool compacted = false;
	for (int i = 0; i < 200 && !compacted; i++) {
		struct buf b = BUF_INIT;
		buf_printf(&b, "{\"version\":%d,\"nonce\":\"n\",\"upserts\":[{\"name\":\"file/big\",\"body\":"
			       "{\"path\":\"big\",\"content\":\"", i + 2);
		random_text(&b, 16384, &seed);
		buf_puts(&b, "\"}}]}");
		lastgood_info(f->lg, &info);
		last_journal = info.journal_bytes;
		must_save(f, b.data);
		buf_release(&b);
		lastgood_info(f->lg, &info);
		compacted = info.generation != 1;
	}
	assert_true(compacted);
	assert_int_equal(info.generation, 2);
	/* it happened once the journal outgrew 256 KiB (the snapshot is smaller) */
	assert_true(last_journal > (256u << 10));
	assert_true(last_journal < (256u << 10) + 20000);
	assert_int_equal(info.journal_bytes, 0);
	assert_true(exists(f, "lastgood-1.snap"));
	expect_reload_equal(f);
}

static void test_reload_after_many_pushes(void **state)
{
	struct fx *f = *state;
	must_save(f, BASE_PUSH);
	for (int k = 0; k < 6; k++) {
		save_series(f, k * 50, (k + 1) * 50);
		expect_reload_equal(f);
	}
	assert_int_equal(f->s.version, 301);
	/* the series touched files, routes and clusters */
	assert_non_null(state_get(&f->s, "cluster/c19"));
	assert_non_null(state_get(&f->s, "file/g3"));
	struct lastgood_info info;
	lastgood_info(f->lg, &info);
	assert_int_equal(info.journal_records, 300);
}

/* Saves BASE and three deltas, keeps the state at that point in *prev, then
 * saves one more; returns where the last record starts and ends. */
static void journal_with_last_record(struct fx *f, struct state *prev, size_t *start, size_t *end)
{
	char err[512];
	struct lastgood_info info;
	must_save(f, BASE_PUSH);
	save_series(f, 0, 3);
	assert_int_equal(reload(f->dir, prev, err, sizeof(err)), 1);
	assert_int_equal(prev->version, 4);
	lastgood_info(f->lg, &info);
	*start = info.journal_bytes;
	save_series(f, 3, 4);
	lastgood_info(f->lg, &info);
	*end = info.journal_bytes;
	assert_int_equal(f->s.version, 5);
	assert_true(*end > *start + 16);
}

static void test_truncated_journal_tail(void **state)
{
	struct fx *f = *state;
	struct state prev;
	size_t start, end, len;
	journal_with_last_record(f, &prev, &start, &end);
	char *journal = slurp(f, "lastgood-1.journal", &len);
	assert_int_equal(len, end);
	char err[512];
	for (size_t cut = start; cut < end; cut++) {
		spit(f, "lastgood-1.journal", journal, cut);
		struct state got;
		struct capture cap;
		capture_start(&cap);
		int rc = reload(f->dir, &got, err, sizeof(err));
		char *log = capture_end(&cap);
		assert_int_equal(rc, 1);
		assert_states_equal(&prev, &got);
		state_release(&got);
		/* the cut-off part is reported, and the file is cut back to the
		 * last whole record */
		if (cut > start) {
			char want[128];
			snprintf(want, sizeof(want), "ends with a damaged record at byte %zu", start);
			if (!strstr(log, want))
				fail_msg("cut at %zu: log does not say '%s':\n%s", cut, want, log);
		} else {
			assert_null(strstr(log, "damaged"));
		}
		assert_int_equal(fsize(f, "lastgood-1.journal"), (long long)start);
		free(log);
	}
	/* the whole journal again gives the newest version */
	spit(f, "lastgood-1.journal", journal, len);
	expect_reload_equal(f);

	/* after a torn tail, a handle that loaded it saves and reloads fine */
	spit(f, "lastgood-1.journal", journal, start + (end - start) / 2);
	struct lastgood *lg2 = lastgood_open(f->dir, err, sizeof(err));
	struct state s2;
	state_init(&s2);
	struct capture cap;
	capture_start(&cap);
	assert_int_equal(lastgood_load(lg2, &s2, err, sizeof(err)), 1);
	free(capture_end(&cap));
	lastgood_close(f->lg);
	f->lg = lg2;
	state_release(&f->s);
	f->s = s2;
	assert_int_equal(f->s.version, 4);
	save_series(f, 3, 5);
	assert_int_equal(f->s.version, 6);
	expect_reload_equal(f);
	free(journal);
	state_release(&prev);
}

static void test_flipped_byte_in_last_record(void **state)
{
	struct fx *f = *state;
	struct state prev;
	size_t start, end, len;
	journal_with_last_record(f, &prev, &start, &end);
	char *journal = slurp(f, "lastgood-1.journal", &len);
	char err[512];
	for (size_t off = start; off < end; off++) {
		for (int k = 0; k < 2; k++) {
			journal[off] ^= k ? 0xff : 0x01;
			spit(f, "lastgood-1.journal", journal, len);
			journal[off] ^= k ? 0xff : 0x01;
			struct state got;
			struct capture cap;
			capture_start(&cap);
			int rc = reload(f->dir, &got, err, sizeof(err));
			char *log = capture_end(&cap);
			assert_int_equal(rc, 1);
			if (got.version != prev.version)
				fail_msg("byte %zu flipped: loaded version %llu, want %llu", off,
					 (unsigned long long)got.version, (unsigned long long)prev.version);
			assert_states_equal(&prev, &got);
			assert_non_null(strstr(log, "damaged record"));
			state_release(&got);
			free(log);
		}
	}
	/* a flip in an earlier record stops the replay there */
	journal[start / 2] ^= 0x10;
	spit(f, "lastgood-1.journal", journal, len);
	struct state got;
	struct capture cap;
	capture_start(&cap);
	assert_int_equal(reload(f->dir, &got, err, sizeof(err)), 1);
	free(capture_end(&cap));
	assert_true(got.version < prev.version);
	assert_true(got.version >= 1);
	state_release(&got);
	free(journal);
	state_release(&prev);
}

static void test_damaged_newest_snapshot_falls_back(void **state)
{
	struct fx *f = *state;
	char err[512];
	must_save(f, BASE_PUSH);
	save_series(f, 0, 2);
	assert_int_equal(lastgood_compact(f->lg, &f->s, err, sizeof(err)), 0);
	struct state at_compaction;
	assert_int_equal(reload(f->dir, &at_compaction, err, sizeof(err)), 1);
	assert_int_equal(at_compaction.version, 3);
	save_series(f, 2, 4);
	assert_int_equal(f->s.version, 5);
	expect_reload_equal(f);

	size_t len;
	char *snap = slurp(f, "lastgood-2.snap", &len);
	struct {
		const char *what;
		size_t off;          /* flip here (when cut is 0) */
		size_t cut;          /* keep only this many bytes (when not 0) */
		const char *why;
	} cases[] = {
		{ "payload byte", len - 3, 0, "checksum mismatch" },
		{ "checksum byte", 50, 0, "checksum mismatch" },
		{ "version in the header", 9, 0, "checksum mismatch" },
		{ "magic", 0, 0, "bad header" },
		{ "half of it", 0, len / 2, "truncated" },
		{ "all but one byte", 0, len - 1, "truncated" },
		{ "header only", 0, 72, "truncated" },
		{ "partial header", 0, 20, "bad header" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (cases[i].cut) {
			spit(f, "lastgood-2.snap", snap, cases[i].cut);
		} else {
			snap[cases[i].off] ^= 0x20;
			spit(f, "lastgood-2.snap", snap, len);
			snap[cases[i].off] ^= 0x20;
		}
		struct state got;
		struct capture cap;
		capture_start(&cap);
		int rc = reload(f->dir, &got, err, sizeof(err));
		char *log = capture_end(&cap);
		assert_int_equal(rc, 1);
		/* generation 1 with its journal: the state the compaction saw */
		assert_states_equal(&at_compaction, &got);
		if (!strstr(log, "generation 2 is unusable") || !strstr(log, "falling back to generation 1") ||
		    !strstr(log, cases[i].why))
			fail_msg("%s: the log does not explain the fallback (%s):\n%s", cases[i].what, cases[i].why,
				 log);
		state_release(&got);
		free(log);
	}
	/* an empty snapshot file too */
	spit(f, "lastgood-2.snap", "", 0);
	struct state got;
	struct capture cap;
	capture_start(&cap);
	assert_int_equal(reload(f->dir, &got, err, sizeof(err)), 1);
	free(capture_end(&cap));
	assert_states_equal(&at_compaction, &got);
	state_release(&got);

	/* a handle that fell back saves into a new generation, and the damaged
	 * one is dropped */
	snap[len - 3] ^= 0x20;
	spit(f, "lastgood-2.snap", snap, len);
	struct lastgood *lg2 = lastgood_open(f->dir, err, sizeof(err));
	struct state s2;
	state_init(&s2);
	capture_start(&cap);
	assert_int_equal(lastgood_load(lg2, &s2, err, sizeof(err)), 1);
	free(capture_end(&cap));
	lastgood_close(f->lg);
	f->lg = lg2;
	state_release(&f->s);
	f->s = s2;
	save_series(f, 2, 3);
	struct lastgood_info info;
	lastgood_info(f->lg, &info);
	assert_int_equal(info.generation, 3);
	assert_false(exists(f, "lastgood-2.snap"));
	assert_true(exists(f, "lastgood-1.snap"));
	expect_reload_equal(f);
	free(snap);
	state_release(&at_compaction);
}

static void test_every_generation_damaged(void **state)
{
	struct fx *f = *state;
	char err[512];
	must_save(f, BASE_PUSH);
	assert_int_equal(lastgood_compact(f->lg, &f->s, err, sizeof(err)), 0);
	spit(f, "lastgood-1.snap", "TTHRSNP1", 8);
	spit(f, "lastgood-2.snap", "nonsense", 8);
	struct state got;
	struct capture cap;
	capture_start(&cap);
	int rc = reload(f->dir, &got, err, sizeof(err));
	char *log = capture_end(&cap);
	assert_int_equal(rc, -1);
	assert_non_null(strstr(err, "no usable last-good"));
	assert_non_null(strstr(log, "no older generation is left"));
	assert_int_equal(got.count, 0);
	assert_int_equal(got.version, 0);
	state_release(&got);
	free(log);
}

/* Sets RLIMIT_FSIZE (soft) to limit; returns the old limits. */
static struct rlimit limit_file_size(rlim_t limit)
{
	struct rlimit old, now;
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	now = old;
	now.rlim_cur = limit;
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &now), 0);
	return old;
}

static void test_io_error_in_journal_append(void **state)
{
	struct fx *f = *state;
	char err[512];
	must_save(f, BASE_PUSH);
	save_series(f, 0, 2);
	long long before = fsize(f, "lastgood-1.journal");
	assert_true(before > 0);
	struct lastgood_info info;
	lastgood_info(f->lg, &info);
	unsigned long long gen = info.generation;

	struct push p;
	struct candidate c;
	char *text = series_push(2);
	decode_build(&f->s, text, &p, &c);
	/* room for a few bytes of the record only: write() fails with EFBIG */
	struct rlimit old = limit_file_size((rlim_t)before + 8);
	int rc = lastgood_save(f->lg, &f->s, &c, err, sizeof(err));
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	assert_int_equal(rc, -1);
	assert_non_null(strstr(err, strerror(EFBIG)));
	/* the partial record was taken back, and the old state loads */
	assert_int_equal(fsize(f, "lastgood-1.journal"), before);
	expect_reload_equal(f);
	assert_int_equal(f->s.version, 3);

	/* with the limit lifted, the same candidate saves */
	assert_int_equal(lastgood_save(f->lg, &f->s, &c, err, sizeof(err)), 0);
	state_commit(&f->s, &c);
	candidate_release(&c);
	push_release(&p);
	free(text);
	expect_reload_equal(f);
	assert_int_equal(f->s.version, 4);
	/* and so do the next ones */
	save_series(f, 3, 5);
	expect_reload_equal(f);
	lastgood_info(f->lg, &info);
	assert_true(info.generation >= gen);
}

static void test_io_error_in_snapshot_write(void **state)
{
	struct fx *f = *state;
	char err[512];
	int tmps;
	/* the very first save writes a snapshot: it fails, and nothing is left */
	struct push p;
	struct candidate c;
	decode_build(&f->s, BASE_PUSH, &p, &c);
	struct rlimit old = limit_file_size(64);
	int rc = lastgood_save(f->lg, &f->s, &c, err, sizeof(err));
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	assert_int_equal(rc, -1);
	assert_non_null(strstr(err, strerror(EFBIG)));
	assert_int_equal(count_files(f, &tmps), 0);
	struct state got;
	assert_int_equal(reload(f->dir, &got, err, sizeof(err)), 0);
	state_release(&got);
	assert_int_equal(lastgood_save(f->lg, &f->s, &c, err, sizeof(err)), 0);
	state_commit(&f->s, &c);
	candidate_release(&c);
	push_release(&p);
	expect_reload_equal(f);

	/* a compaction that fails leaves the generation before it */
	save_series(f, 0, 3);
	old = limit_file_size(64);
	rc = lastgood_compact(f->lg, &f->s, err, sizeof(err));
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	assert_int_equal(rc, -1);
	assert_int_equal(count_files(f, &tmps), 2);
	assert_int_equal(tmps, 0);
	assert_false(exists(f, "lastgood-2.snap"));
	expect_reload_equal(f);
	/* and the journal of the current generation still takes records */
	save_series(f, 3, 4);
	expect_reload_equal(f);
	assert_int_equal(lastgood_compact(f->lg, &f->s, err, sizeof(err)), 0);
	expect_reload_equal(f);
}

/* Prepare readies, abandon leaves everything as it was, commit makes it
 * durable: the journal path (a delta on a current generation). */
static void test_prepare_abandon_commit_record(void **state)
{
	struct fx *f = *state;
	char err[512];
	int tmps;
	must_save(f, BASE_PUSH);
	save_series(f, 0, 2);
	long long before = fsize(f, "lastgood-1.journal");
	struct push p;
	struct candidate c;
	char *text = series_push(2);
	decode_build(&f->s, text, &p, &c);

	assert_int_equal(lastgood_prepare(f->lg, &f->s, &c, err, sizeof(err)), 0);
	/* readied, not written: the journal's size and what loads are the old */
	assert_int_equal(fsize(f, "lastgood-1.journal"), before);
	expect_reload_equal(f);
	lastgood_abandon(f->lg);
	lastgood_abandon(f->lg);   /* twice is harmless */
	assert_int_equal(fsize(f, "lastgood-1.journal"), before);
	expect_reload_equal(f);
	assert_int_equal(count_files(f, &tmps), 2);
	/* nothing pending: commit refuses */
	assert_int_equal(lastgood_commit(f->lg, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "nothing prepared"));

	/* a second prepare replaces the first; the commit writes it once */
	assert_int_equal(lastgood_prepare(f->lg, &f->s, &c, err, sizeof(err)), 0);
	assert_int_equal(lastgood_prepare(f->lg, &f->s, &c, err, sizeof(err)), 0);
	assert_int_equal(lastgood_commit(f->lg, err, sizeof(err)), 0);
	state_commit(&f->s, &c);
	candidate_release(&c);
	push_release(&p);
	free(text);
	assert_true(fsize(f, "lastgood-1.journal") > before);
	struct lastgood_info info;
	lastgood_info(f->lg, &info);
	assert_int_equal(info.journal_records, 3);
	assert_int_equal((long long)info.journal_bytes, fsize(f, "lastgood-1.journal"));
	expect_reload_equal(f);
	assert_int_equal(f->s.version, 4);
	save_series(f, 3, 5);
	expect_reload_equal(f);
}

/* The generation path: prepare writes the snapshot to a temp file, abandon
 * removes every file of the generation that never became current. */
static void test_prepare_abandon_commit_generation(void **state)
{
	struct fx *f = *state;
	char err[512];
	int tmps;
	struct push p;
	struct candidate c;
	decode_build(&f->s, BASE_PUSH, &p, &c);
	assert_int_equal(lastgood_prepare(f->lg, &f->s, &c, err, sizeof(err)), 0);
	assert_true(exists(f, "lastgood-1.snap.tmp"));
	assert_true(exists(f, "lastgood-1.journal"));
	assert_false(exists(f, "lastgood-1.snap"));
	lastgood_abandon(f->lg);
	assert_int_equal(count_files(f, &tmps), 0);

	/* a crash between prepare and commit: what is readied does not load,
	 * and the next load removes it */
	assert_int_equal(lastgood_prepare(f->lg, &f->s, &c, err, sizeof(err)), 0);
	assert_int_equal(count_files(f, &tmps), 2);
	struct state got;
	assert_int_equal(reload(f->dir, &got, err, sizeof(err)), 0);
	state_release(&got);
	assert_int_equal(count_files(f, &tmps), 0);
	lastgood_abandon(f->lg);

	assert_int_equal(lastgood_prepare(f->lg, &f->s, &c, err, sizeof(err)), 0);
	assert_int_equal(lastgood_commit(f->lg, err, sizeof(err)), 0);
	state_commit(&f->s, &c);
	candidate_release(&c);
	push_release(&p);
	assert_int_equal(count_files(f, &tmps), 2);   /* the snapshot and its journal */
	assert_int_equal(tmps, 0);
	expect_reload_equal(f);
	/* and a delta on it goes to its journal */
	save_series(f, 0, 2);
	expect_reload_equal(f);
	assert_true(fsize(f, "lastgood-1.journal") > 0);
}

/* ---- the record of the apply in flight (lastgood.pending) ---------------------- */

/* A crash after the record and before the commit: a new handle loads the
 * old last-good, reads the candidate back (its changes, version, statement
 * and generation), and committing it gives exactly the state the apply
 * would have left; the record is void afterwards. */
static void pending_crash_and_finish(struct fx *f, const char *text, int loaded)
{
	char err[512];
	struct push p;
	struct candidate c;
	decode_build(&f->s, text, &p, &c);
	c.statement = "a statement";
	assert_int_equal(lastgood_prepare(f->lg, &f->s, &c, err, sizeof(err)), 0);
	assert_int_equal(lastgood_pending(f->lg, &f->s, &c, "0123456789abcdef", err, sizeof(err)), 0);
	assert_true(fsize(f, "lastgood.pending") > 0);
	/* the crash: nothing more of this handle reaches the disk */
	lastgood_abandon(f->lg);
	lastgood_close(f->lg);

	f->lg = lastgood_open(f->dir, err, sizeof(err));
	assert_non_null(f->lg);
	struct state got;
	state_init(&got);
	assert_int_equal(lastgood_load(f->lg, &got, err, sizeof(err)), loaded);
	assert_int_equal(got.version, f->s.version);
	struct candidate back;
	char *statement, *gen;
	assert_int_equal(lastgood_pending_load(f->lg, &got, &back, &statement, &gen, err, sizeof(err)), 1);
	assert_int_equal(back.version, c.version);
	assert_int_equal(back.base, f->s.version);
	assert_int_equal(back.n, c.n);
	assert_string_equal(statement, "a statement");
	assert_ptr_equal(back.statement, statement);
	assert_string_equal(gen, "0123456789abcdef");
	assert_int_equal(lastgood_save(f->lg, &got, &back, err, sizeof(err)), 0);
	state_commit(&got, &back);
	candidate_release(&back);
	free(statement);
	free(gen);
	assert_int_equal(fsize(f, "lastgood.pending"), 0);   /* void: committed */
	state_commit(&f->s, &c);
	candidate_release(&c);
	push_release(&p);
	assert_states_equal(&f->s, &got);
	state_release(&got);
	assert_string_equal(lastgood_statement(f->lg), "a statement");
	expect_reload_equal(f);
	struct lastgood *lg = lastgood_open(f->dir, err, sizeof(err));
	state_init(&got);
	assert_int_equal(lastgood_load(lg, &got, err, sizeof(err)), 1);
	assert_int_equal(lastgood_pending_load(lg, &got, &back, &statement, &gen, err, sizeof(err)), 0);
	lastgood_close(lg);
	state_release(&got);
}

static void test_pending_finish_journal_record(void **state)
{
	struct fx *f = *state;
	must_save(f, BASE_PUSH);
	save_series(f, 0, 3);
	char *text = series_push(3);
	pending_crash_and_finish(f, text, 1);
	free(text);
	save_series(f, 4, 6);
	expect_reload_equal(f);
}

/* The very first apply (no last-good yet: a generation is readied) */
static void test_pending_finish_first_apply(void **state)
{
	struct fx *f = *state;
	int tmps;
	pending_crash_and_finish(f, BASE_PUSH, 0);
	assert_int_equal(count_files(f, &tmps), 2);
	assert_int_equal(tmps, 0);
}

/* Void once committed; a record a crash kept past its commit (the
 * truncation lost) names a base that is not last-good's: not read, and
 * made void. */
static void test_pending_void_after_commit(void **state)
{
	struct fx *f = *state;
	char err[512];
	must_save(f, BASE_PUSH);
	save_series(f, 0, 2);
	struct push p;
	struct candidate c;
	char *text = series_push(2);
	decode_build(&f->s, text, &p, &c);
	assert_int_equal(lastgood_prepare(f->lg, &f->s, &c, err, sizeof(err)), 0);
	assert_int_equal(lastgood_pending(f->lg, &f->s, &c, NULL, err, sizeof(err)), 0);
	size_t len;
	char *kept = slurp(f, "lastgood.pending", &len);
	assert_int_equal(lastgood_commit(f->lg, err, sizeof(err)), 0);
	assert_int_equal(fsize(f, "lastgood.pending"), 0);
	state_commit(&f->s, &c);
	candidate_release(&c);
	push_release(&p);
	free(text);
	spit(f, "lastgood.pending", kept, len);
	free(kept);
	struct lastgood *lg = lastgood_open(f->dir, err, sizeof(err));
	struct state got;
	state_init(&got);
	assert_int_equal(lastgood_load(lg, &got, err, sizeof(err)), 1);
	char *statement, *gen;
	assert_int_equal(lastgood_pending_load(lg, &got, &c, &statement, &gen, err, sizeof(err)), 0);
	assert_int_equal(fsize(f, "lastgood.pending"), 0);
	lastgood_close(lg);
	state_release(&got);

	/* dropped (a refusal): void too */
	text = series_push(3);
	decode_build(&f->s, text, &p, &c);
	assert_int_equal(lastgood_pending(f->lg, &f->s, &c, "ab", err, sizeof(err)), 0);
	lastgood_pending_drop(f->lg);
	assert_int_equal(fsize(f, "lastgood.pending"), 0);
	candidate_release(&c);
	push_release(&p);
	free(text);
	expect_reload_equal(f);
}

/* A torn or damaged record is never read: -1 with the reason, and void. */
static void test_pending_damaged(void **state)
{
	struct fx *f = *state;
	char err[512];
	must_save(f, BASE_PUSH);
	save_series(f, 0, 2);
	struct push p;
	struct candidate c;
	char *text = series_push(2);
	decode_build(&f->s, text, &p, &c);
	assert_int_equal(lastgood_pending(f->lg, &f->s, &c, "0123456789abcdef", err, sizeof(err)), 0);
	candidate_release(&c);
	push_release(&p);
	free(text);
	size_t len;
	char *good = slurp(f, "lastgood.pending", &len);
	for (int k = 0; k < 6; k++) {
		char *bad = malloc(len);
		assert_non_null(bad);
		memcpy(bad, good, len);
		size_t blen = len;
		switch (k) {
		case 0: blen = len - 1; break;             /* torn: its checksum cut */
		case 1: blen = len / 2; break;             /* torn in the record */
		case 2: bad[len / 2] ^= 0x40; break;       /* a bit flipped in the record */
		case 3: bad[len - 1] ^= 1; break;          /* in the checksum */
		case 4: bad[0] = 'X'; break;               /* the magic */
		case 5: blen = 20; break;                  /* shorter than a header */
		}
		spit(f, "lastgood.pending", bad, blen);
		free(bad);
		struct lastgood *lg = lastgood_open(f->dir, err, sizeof(err));
		struct state got;
		state_init(&got);
		assert_int_equal(lastgood_load(lg, &got, err, sizeof(err)), 1);
		char *statement, *gen;
		err[0] = '\0';
		assert_int_equal(lastgood_pending_load(lg, &got, &c, &statement, &gen, err, sizeof(err)), -1);
		assert_non_null(strstr(err, "damaged"));
		assert_int_equal(fsize(f, "lastgood.pending"), 0);
		lastgood_close(lg);
		state_release(&got);
	}
	free(good);
	expect_reload_equal(f);
}

static void test_save_cost_is_o_changed(void **state)
{
	struct fx *f = *state;
	enum { N = 10000 };
	struct buf b = BUF_INIT;
	buf_puts(&b, "{\"version\":1,\"nonce\":\"big\",\"full\":true,\"upserts\":[");
	for (int i = 0; i < N; i++)
		buf_printf(&b, "%s{\"name\":\"cluster/c%05d\",\"body\":{\"endpoints\":[{\"address\":\"10.%d.%d.%d\","
			       "\"port\":%d,\"weight\":%d}],\"lb\":\"least_conn\"}}", i ? "," : "", i, i % 200,
			   (i * 31) % 250, (i * 17) % 250, 1 + (i * 13) % 65535, 1 + i % 256);
	buf_puts(&b, "]}");
	must_save(f, b.data);
	buf_release(&b);
	assert_int_equal(f->s.count, N);
	struct lastgood_info info;
	lastgood_info(f->lg, &info);
	size_t snap = info.snapshot_bytes, j0 = info.journal_bytes;
	assert_int_equal(info.generation, 1);
	assert_true(snap > 20000);

	must_save(f, "{\"version\":2,\"base\":1,\"nonce\":\"one\",\"upserts\":[{\"name\":\"cluster/c04242\",\"body\":"
		     "{\"endpoints\":[{\"address\":\"10.9.9.9\",\"port\":999}]}}]}");
	lastgood_info(f->lg, &info);
	size_t grew = info.journal_bytes - j0;
	/* one small record, no new snapshot */
	assert_int_equal(info.generation, 1);
	assert_int_equal(info.snapshot_bytes, snap);
	assert_int_equal(info.journal_records, 1);
	assert_true(grew > 0);
	assert_true(grew < 512);
	assert_true(grew * 100 < snap);
	assert_int_equal(fsize(f, "lastgood-1.journal"), (long long)info.journal_bytes);
	assert_int_equal(fsize(f, "lastgood-1.snap"), (long long)snap);
	/* a removal costs as little */
	must_save(f, "{\"version\":3,\"base\":2,\"nonce\":\"two\",\"removed\":[\"cluster/c00007\"]}");
	lastgood_info(f->lg, &info);
	assert_true(info.journal_bytes - j0 - grew < 512);
	expect_reload_equal(f);
}

int main(void)
{
	/* the load messages are noise here; warnings and errors are checked */
	log_set_level(LOG_LVL_WARN);
	signal(SIGXFSZ, SIG_IGN);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_no_generation, setup, teardown),
		cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_compaction_generations, setup, teardown),
		cmocka_unit_test_setup_teardown(test_journal_growth_compacts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reload_after_many_pushes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_truncated_journal_tail, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flipped_byte_in_last_record, setup, teardown),
		cmocka_unit_test_setup_teardown(test_damaged_newest_snapshot_falls_back, setup, teardown),
		cmocka_unit_test_setup_teardown(test_every_generation_damaged, setup, teardown),
		cmocka_unit_test_setup_teardown(test_io_error_in_journal_append, setup, teardown),
		cmocka_unit_test_setup_teardown(test_io_error_in_snapshot_write, setup, teardown),
		cmocka_unit_test_setup_teardown(test_prepare_abandon_commit_record, setup, teardown),
		cmocka_unit_test_setup_teardown(test_prepare_abandon_commit_generation, setup, teardown),
		cmocka_unit_test_setup_teardown(test_save_cost_is_o_changed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pending_finish_journal_record, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pending_finish_first_apply, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pending_void_after_commit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pending_damaged, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
