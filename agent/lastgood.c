/* lastgood.c: snapshot + journal persistence of the applied state, and the
 * record of the apply in flight (see lastgood.h). Little-endian records;
 * zlib; BLAKE2b for snapshots, CRC-32 for journal records and the record
 * of the apply in flight (TTHRPND1, which holds one journal record). Format
 * 2 (TTHRSNP2, TJR2) adds the signed statement of the state after each
 * snapshot and record; format 1 is still read. */
#include "lastgood.h"
#include "buf.h"
#include "log.h"
#include "strmap.h"
#include "util.h"
#include "xmalloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define SNAP_MAGIC "TTHRSNP2"
#define SNAP_MAGIC_V1 "TTHRSNP1"
#define JOURNAL_MAGIC "TJR2"
#define JOURNAL_MAGIC_V1 "TJR1"
#define STATEMENT_KEEP_MAX 65536
#define SNAP_HDR 72
#define JREC_HDR 16
#define PENDING_NAME "lastgood.pending"
#define PENDING_MAGIC "TTHRPND1"
#define PENDING_HDR 32          /* magic, base version, generation, journal length */
#define PENDING_GEN_MAX 64
#define MAX_RAW (1u << 30)
#define COMPACT_MIN (256u << 10)

struct lastgood {
	char *dir;
	int dirfd;
	int jfd;                       /* journal of the current generation */
	unsigned long long gen;        /* current generation; 0: none yet */
	unsigned long long max_gen;    /* highest generation seen on disk */
	size_t snap_bytes, journal_bytes, journal_records;
	bool journal_broken;           /* an append could not be undone */
	char *statement;               /* the signed statement of what it holds, or NULL */
	lastgood_verify_fn verify;     /* judges a loaded generation */
	bool refused;                  /* the last load refused a generation */
	void *verify_ctx;
	/* what lastgood_prepare readied for lastgood_commit */
	enum { PEND_NONE, PEND_RECORD, PEND_GENERATION } pend;
	struct buf pend_rec;           /* PEND_RECORD: the journal record */
	bool pend_reserved;            /*   its space is allocated past the end */
	char *pend_statement;          /* the statement of what is pending */
	unsigned long long pend_gen;   /* PEND_GENERATION: the new generation, */
	int pend_jfd;                  /*   its empty journal */
	size_t pend_snap_bytes;        /*   and its snapshot's size */
	int pfd;                       /* PENDING_NAME, once opened (-1) */
};

/* ---- encoding helpers ---------------------------------------------------- */

static void put_u32(struct buf *b, uint32_t v)
{
	unsigned char x[4];
	for (int i = 0; i < 4; i++)
		x[i] = (unsigned char)(v >> (8 * i));
	buf_append(b, x, 4);
}

static void put_u64(struct buf *b, uint64_t v)
{
	unsigned char x[8];
	for (int i = 0; i < 8; i++)
		x[i] = (unsigned char)(v >> (8 * i));
	buf_append(b, x, 8);
}

static void set_u32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static uint32_t get_u32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_str(struct buf *b, const char *s, size_t len)
{
	put_u32(b, (uint32_t)len);
	buf_append(b, s, len);
}

/* A statement, or its absence (length 0). */
static void put_statement(struct buf *b, const char *st)
{
	put_str(b, st ? st : "", st ? strlen(st) : 0);
}

static void put_res(struct buf *b, const struct res *r)
{
	put_str(b, r->name, strlen(r->name));
	put_u64(b, r->version);
	put_str(b, r->body, r->body_len);
}

/* A cursor over a decoded payload. */
struct cur {
	const unsigned char *p, *end;
	bool bad;
};

static uint32_t cur_u32(struct cur *c)
{
	if (c->end - c->p < 4) {
		c->bad = true;
		return 0;
	}
	uint32_t v = get_u32(c->p);
	c->p += 4;
	return v;
}

static uint64_t cur_u64(struct cur *c)
{
	if (c->end - c->p < 8) {
		c->bad = true;
		return 0;
	}
	uint64_t v = get_u64(c->p);
	c->p += 8;
	return v;
}

/* Returns a new allocated copy of the next string. */
static char *cur_str(struct cur *c, size_t *len)
{
	uint32_t n = cur_u32(c);
	if (c->bad || (size_t)(c->end - c->p) < n) {
		c->bad = true;
		return NULL;
	}
	char *s = xstrndup((const char *)c->p, n);
	c->p += n;
	if (len)
		*len = n;
	return s;
}

/* ---- files --------------------------------------------------------------- */

static char *gen_name(unsigned long long gen, const char *suffix)
{
	return xasprintf("lastgood-%llu.%s", gen, suffix);
}

static char *read_at(int dirfd, const char *name, size_t max, size_t *len)
{
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return NULL;
	char *data = read_fd_limited(fd, max, len, NULL);
	int e = errno;
	close(fd);
	errno = e;
	return data;
}

/* ---- open / close ---------------------------------------------------------- */

struct lastgood *lastgood_open(const char *dir, char *err, size_t errlen)
{
	if (sodium_init() < 0) {
		snprintf(err, errlen, "libsodium failed to initialise");
		return NULL;
	}
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "cannot create state directory '%s': %s", dir, strerror(errno));
		return NULL;
	}
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "cannot open state directory '%s': %s", dir, strerror(errno));
		return NULL;
	}
	struct lastgood *lg = xcalloc(1, sizeof(*lg));
	lg->dir = xstrdup(dir);
	lg->dirfd = fd;
	lg->jfd = -1;
	lg->pend_jfd = -1;
	lg->pfd = -1;
	return lg;
}

void lastgood_close(struct lastgood *lg)
{
	if (!lg)
		return;
	lastgood_abandon(lg);
	buf_release(&lg->pend_rec);
	if (lg->jfd >= 0)
		close(lg->jfd);
	if (lg->pfd >= 0)
		close(lg->pfd);
	close(lg->dirfd);
	free(lg->statement);
	free(lg->dir);
	free(lg);
}

void lastgood_set_verify(struct lastgood *lg, lastgood_verify_fn fn, void *ctx)
{
	lg->verify = fn;
	lg->verify_ctx = ctx;
}

const char *lastgood_statement(const struct lastgood *lg)
{
	return lg->statement;
}

bool lastgood_refused(const struct lastgood *lg)
{
	return lg->refused;
}

/* Reads a statement after the records (format 2): a new allocated string,
 * or NULL for none. */
static char *cur_statement(struct cur *c)
{
	size_t len = 0;
	char *st = cur_str(c, &len);
	if (st && (len == 0 || len > STATEMENT_KEEP_MAX || strlen(st) != len)) {
		if (len > STATEMENT_KEEP_MAX || strlen(st) != len)
			c->bad = true;
		free(st);
		return NULL;
	}
	return st;
}

void lastgood_info(const struct lastgood *lg, struct lastgood_info *info)
{
	info->generation = lg->gen;
	info->snapshot_bytes = lg->snap_bytes;
	info->journal_bytes = lg->journal_bytes;
	info->journal_records = lg->journal_records;
}

/* ---- loading --------------------------------------------------------------- */

static int cmp_gen_desc(const void *a, const void *b)
{
	unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
	return x < y ? 1 : x > y ? -1 : 0;
}

/* Commits a candidate of loaded resources into s without reference checks:
 * they were checked when they were applied. */
static void load_commit(struct state *s, struct candidate *c, uint64_t version)
{
	c->version = version;
	state_commit(s, c);
}

static int add_item(struct candidate *c, size_t *cap, struct res *r, const struct res *old)
{
	if (c->n == *cap) {
		*cap = *cap ? *cap * 2 : 64;
		c->items = xrealloc(c->items, *cap * sizeof(*c->items));
	}
	c->items[c->n].new_res = r;
	c->items[c->n].old = old;
	c->n++;
	return 0;
}

static int load_snapshot(struct lastgood *lg, unsigned long long gen, struct state *s, char **statement, char *err,
			 size_t errlen)
{
	char *name = gen_name(gen, "snap");
	size_t len = 0;
	unsigned char *data = (unsigned char *)read_at(lg->dirfd, name, (size_t)MAX_RAW + SNAP_HDR, &len);
	free(name);
	unsigned char *raw = NULL;
	struct candidate c;
	struct strmap names;   /* the records' names (borrowed from them) */
	memset(&c, 0, sizeof(c));
	strmap_init(&names);
	if (!data) {
		snprintf(err, errlen, "cannot read: %s", strerror(errno));
		return -1;
	}
	bool v2 = len >= SNAP_HDR && memcmp(data, SNAP_MAGIC, 8) == 0;
	if (len < SNAP_HDR || (!v2 && memcmp(data, SNAP_MAGIC_V1, 8) != 0)) {
		snprintf(err, errlen, "not a snapshot (bad header)");
		goto fail;
	}
	uint64_t version = get_u64(data + 8), count = get_u64(data + 16);
	uint64_t raw_len = get_u64(data + 24), comp_len = get_u64(data + 32);
	if (comp_len != len - SNAP_HDR || raw_len > MAX_RAW) {
		snprintf(err, errlen, "truncated: %zu payload bytes, header says %llu", len - SNAP_HDR,
			 (unsigned long long)comp_len);
		goto fail;
	}
	unsigned char hash[32];
	crypto_generichash_state hs;
	crypto_generichash_init(&hs, NULL, 0, sizeof(hash));
	crypto_generichash_update(&hs, data, 40);
	crypto_generichash_update(&hs, data + SNAP_HDR, comp_len);
	crypto_generichash_final(&hs, hash, sizeof(hash));
	if (sodium_memcmp(hash, data + 40, sizeof(hash)) != 0) {
		snprintf(err, errlen, "checksum mismatch");
		goto fail;
	}
	raw = xmalloc(raw_len ? raw_len : 1);
	uLongf out = (uLongf)raw_len;
	if (uncompress(raw, &out, data + SNAP_HDR, (uLong)comp_len) != Z_OK || out != raw_len) {
		snprintf(err, errlen, "does not decompress");
		goto fail;
	}
	struct cur cu = { raw, raw + raw_len, false };
	size_t cap = 0;
	strmap_init(&names);
	for (uint64_t i = 0; i < count; i++) {
		size_t blen;
		char *rname = cur_str(&cu, NULL);
		uint64_t rver = cur_u64(&cu);
		char *body = cur_str(&cu, &blen);
		if (cu.bad) {
			free(rname);
			free(body);
			snprintf(err, errlen, "record %llu is cut short", (unsigned long long)i);
			goto fail;
		}
		struct res *r = res_new(rname, body, blen, rver, err, errlen);
		free(rname);
		if (!r)
			goto fail;
		/* a name twice would be two resources in one slot: damaged */
		if (strmap_get(&names, r->name, NULL)) {
			snprintf(err, errlen, "record %llu names '%.200s' a second time", (unsigned long long)i, r->name);
			res_free(r);
			goto fail;
		}
		*strmap_ref(&names, r->name) = 1;
		add_item(&c, &cap, r, NULL);
	}
	if (v2) {
		*statement = cur_statement(&cu);
		if (cu.bad) {
			snprintf(err, errlen, "its statement is cut short");
			goto fail;
		}
	}
	strmap_release(&names);
	load_commit(s, &c, version);
	free(raw);
	free(data);
	lg->snap_bytes = len;
	return 0;
fail:
	strmap_release(&names);
	candidate_release(&c);
	free(raw);
	free(data);
	return -1;
}

/* Decodes one record's payload (raw, after decompression) against s: the
 * changes it makes, as a candidate on s (c, released by the caller), its
 * version and its statement (format 2; *st NULL when none). 0, or -1 with
 * err (and nothing to release). */
static int rec_decode(const unsigned char *raw, size_t raw_len, bool v2, const struct state *s,
		      struct candidate *c, uint64_t *version, char **st, char *err, size_t errlen)
{
	struct cur cu = { raw, raw + raw_len, false };
	*version = cur_u64(&cu);
	uint32_t nup = cur_u32(&cu), nrm = cur_u32(&cu);
	memset(c, 0, sizeof(*c));
	*st = NULL;
	err[0] = '\0';
	size_t cap = 0;
	bool ok = !cu.bad;
	struct strmap names;   /* a name once per record (borrowed keys) */
	strmap_init(&names);
	for (uint32_t i = 0; ok && i < nup; i++) {
		size_t blen;
		char *rname = cur_str(&cu, NULL);
		uint64_t rver = cur_u64(&cu);
		char *body = cur_str(&cu, &blen);
		struct res *r = cu.bad ? NULL : res_new(rname, body, blen, rver, err, errlen);
		if (cu.bad)
			free(body);
		if (r && strmap_get(&names, r->name, NULL)) {
			snprintf(err, errlen, "record names '%.200s' twice", r->name);
			res_free(r);
			r = NULL;
		}
		if (r) {
			*strmap_ref(&names, r->name) = 1;
			add_item(c, &cap, r, state_get(s, rname));
		}
		free(rname);
		ok = r != NULL;
	}
	for (uint32_t i = 0; ok && i < nrm; i++) {
		char *rname = cur_str(&cu, NULL);
		const struct res *old = rname ? state_get(s, rname) : NULL;
		if (old && strmap_get(&names, old->name, NULL)) {
			snprintf(err, errlen, "record names '%.200s' twice", old->name);
			ok = false;
		} else if (old) {
			*strmap_ref(&names, old->name) = 1;
			add_item(c, &cap, NULL, old);
		}
		free(rname);
		if (ok)
			ok = !cu.bad;
	}
	strmap_release(&names);
	if (ok && v2) {
		*st = cur_statement(&cu);
		ok = !cu.bad;
	}
	if (!ok) {
		free(*st);
		*st = NULL;
		candidate_release(c);
		if (!*err)
			snprintf(err, errlen, "record does not parse");
		return -1;
	}
	return 0;
}

/* Checks one record's header and checksum at data[0..len) and
 * decompresses its payload: a new allocated buffer (*raw, *raw_len) and
 * the record's full length (*rec_len), or NULL with err. */
static unsigned char *rec_open(const unsigned char *data, size_t len, bool *v2, size_t *raw_len,
			       size_t *rec_len, char *err, size_t errlen)
{
	*v2 = len >= JREC_HDR && memcmp(data, JOURNAL_MAGIC, 4) == 0;
	if (len < JREC_HDR || (!*v2 && memcmp(data, JOURNAL_MAGIC_V1, 4) != 0)) {
		snprintf(err, errlen, "bad record header");
		return NULL;
	}
	uint32_t comp_len = get_u32(data + 4), rlen = get_u32(data + 8);
	uint32_t crc = get_u32(data + 12);
	if (len - JREC_HDR < comp_len || rlen > MAX_RAW) {
		snprintf(err, errlen, "record cut short");
		return NULL;
	}
	uLong want = crc32(0, data, 12);
	want = crc32(want, data + JREC_HDR, comp_len);
	if ((uint32_t)want != crc) {
		snprintf(err, errlen, "record checksum mismatch");
		return NULL;
	}
	unsigned char *raw = xmalloc(rlen ? rlen : 1);
	uLongf out = rlen;
	if (uncompress(raw, &out, data + JREC_HDR, comp_len) != Z_OK || out != rlen) {
		free(raw);
		snprintf(err, errlen, "record does not decompress");
		return NULL;
	}
	*raw_len = rlen;
	*rec_len = JREC_HDR + comp_len;
	return raw;
}

/* Replays the journal of gen into s; stops at the first damaged record and
 * returns the length of the good part. */
static size_t replay_journal(struct lastgood *lg, unsigned long long gen, struct state *s, size_t *records,
			     char **statement)
{
	char *name = gen_name(gen, "journal");
	size_t len = 0, off = 0;
	unsigned char *data = (unsigned char *)read_at(lg->dirfd, name, (size_t)4 * MAX_RAW, &len);
	free(name);
	*records = 0;
	if (!data)
		return 0;
	char err[512] = "";
	while (off < len) {
		bool v2;
		size_t raw_len, rec_len;
		unsigned char *raw = rec_open(data + off, len - off, &v2, &raw_len, &rec_len, err, sizeof(err));
		if (!raw)
			break;
		struct candidate c;
		uint64_t version;
		char *st;
		int rc = rec_decode(raw, raw_len, v2, s, &c, &version, &st, err, sizeof(err));
		free(raw);
		if (rc < 0)
			break;
		load_commit(s, &c, version);
		/* each record says what signs the state after it */
		free(*statement);
		*statement = st;
		off += rec_len;
		(*records)++;
	}
	if (off < len)
		log_warn("last-good: journal of generation %llu ends with a damaged record at byte %zu (%s); "
			 "using version %llu", gen, off, err, (unsigned long long)s->version);
	free(data);
	return off;
}

/* Calls fn for every file named lastgood-<gen>.<tail> in the state
 * directory (fn may unlink it). -1 with errno when it cannot be listed. */
typedef void (*each_fn)(struct lastgood *lg, const char *name, unsigned long long gen, const char *tail, void *ctx);
static int each_file(struct lastgood *lg, each_fn fn, void *ctx)
{
	DIR *d = opendir_at(lg->dirfd, ".");
	if (!d)
		return -1;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		unsigned long long g;
		char tail[16];
		if (sscanf(de->d_name, "lastgood-%llu.%15s", &g, tail) == 2)
			fn(lg, de->d_name, g, tail, ctx);
	}
	closedir(d);
	return 0;
}

struct gen_list {
	unsigned long long *gens;   /* generations with a snapshot */
	size_t n, cap;
};

static void collect_one(struct lastgood *lg, const char *name, unsigned long long g, const char *tail, void *ctx)
{
	struct gen_list *gl = ctx;
	(void)name;
	if (g > lg->max_gen)
		lg->max_gen = g;
	if (strcmp(tail, "snap") != 0)
		return;
	if (gl->n == gl->cap) {
		gl->cap = gl->cap ? gl->cap * 2 : 8;
		gl->gens = xrealloc(gl->gens, gl->cap * sizeof(*gl->gens));
	}
	gl->gens[gl->n++] = g;
}

/* What a save that never completed left (a crash between prepare and
 * commit): every temp snapshot, and every journal whose generation has no
 * snapshot. */
static void drop_orphan(struct lastgood *lg, const char *name, unsigned long long g, const char *tail, void *ctx)
{
	const struct gen_list *gl = ctx;
	bool has_snap = false;
	for (size_t i = 0; i < gl->n && !has_snap; i++)
		has_snap = gl->gens[i] == g;
	if (strcmp(tail, "snap.tmp") == 0 || (strcmp(tail, "journal") == 0 && !has_snap)) {
		log_info("last-good: removing %s, left by a save that did not complete", name);
		unlinkat(lg->dirfd, name, 0);
	}
}

int lastgood_load(struct lastgood *lg, struct state *s, char *err, size_t errlen)
{
	struct gen_list gl = { NULL, 0, 0 };
	lg->refused = false;
	if (each_file(lg, collect_one, &gl) < 0) {
		snprintf(err, errlen, "cannot list '%s': %s", lg->dir, strerror(errno));
		return -1;
	}
	each_file(lg, drop_orphan, &gl);
	unsigned long long *gens = gl.gens;
	size_t n = gl.n;
	if (n)   /* qsort(NULL, 0, ...) is undefined */
		qsort(gens, n, sizeof(*gens), cmp_gen_desc);

	int rc = n ? -1 : 0;
	for (size_t i = 0; i < n; i++) {
		char why[512];
		char *statement = NULL;
		struct state tmp;
		state_init(&tmp);
		if (load_snapshot(lg, gens[i], &tmp, &statement, why, sizeof(why)) < 0) {
			free(statement);
			state_release(&tmp);
			if (i + 1 < n)
				log_error("last-good: generation %llu is unusable (%s); falling back to generation %llu",
					  gens[i], why, gens[i + 1]);
			else
				log_error("last-good: generation %llu is unusable (%s); no older generation is left",
					  gens[i], why);
			if (i == 0)   /* the newest generation's reason */
				snprintf(err, errlen, "no usable last-good in '%s' (newest: %s)", lg->dir, why);
			continue;
		}
		size_t records;
		size_t good = replay_journal(lg, gens[i], &tmp, &records, &statement);
		if (lg->verify && lg->verify(lg->verify_ctx, &tmp, statement, why, sizeof(why)) < 0) {
			/* signed, and not what its statement signs: refused */
			free(statement);
			state_release(&tmp);
			if (i + 1 < n)
				log_error("last-good: generation %llu is refused (%s); trying generation %llu", gens[i],
					  why, gens[i + 1]);
			else
				log_error("last-good: generation %llu is refused (%s); no older generation is left",
					  gens[i], why);
			lg->refused = true;
			if (i == 0)   /* the newest generation's reason */
				snprintf(err, errlen, "no last-good in '%s' passes verification (newest: %s)", lg->dir,
					 why);
			continue;
		}
		free(lg->statement);
		lg->statement = statement;
		state_release(s);
		*s = tmp;
		/* strmap keys point into the resources, not at tmp: moving is safe */
		lg->gen = gens[i];
		lg->journal_bytes = good;
		lg->journal_records = records;
		char *jname = gen_name(lg->gen, "journal");
		lg->jfd = openat(lg->dirfd, jname, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
		free(jname);
		if (lg->jfd < 0 || ftruncate(lg->jfd, (off_t)good) < 0 || fsync(lg->jfd) < 0)
			lg->journal_broken = true;
		/* a fallback or a cut journal: start a clean generation next time */
		if (i > 0)
			lg->journal_broken = true;
		log_info("last-good: loaded generation %llu: version %llu, %zu resources (%zu journal records)",
			 lg->gen, (unsigned long long)s->version, s->count, records);
		rc = 1;
		break;
	}
	free(gens);
	return rc;
}

/* ---- saving ----------------------------------------------------------------- */

struct keep2 {
	unsigned long long a, b;
};

static void drop_unkept(struct lastgood *lg, const char *name, unsigned long long g, const char *tail, void *ctx)
{
	const struct keep2 *k = ctx;
	(void)tail;
	if (g != k->a && g != k->b)
		unlinkat(lg->dirfd, name, 0);
}

/* Unlinks every last-good file that is neither generation keep1 nor keep2. */
static void drop_generations(struct lastgood *lg, unsigned long long keep1, unsigned long long keep2)
{
	struct keep2 k = { keep1, keep2 };
	each_file(lg, drop_unkept, &k);
}

static int fsync_dir(struct lastgood *lg, char *err, size_t errlen)
{
	if (fsync(lg->dirfd) < 0) {
		snprintf(err, errlen, "cannot fsync '%s': %s", lg->dir, strerror(errno));
		return -1;
	}
	return 0;
}

struct snap_ctx {
	struct buf *raw;
	const struct strmap *changed;
	uint64_t count;
};

static void snap_one(void *ctx, const struct res *r)
{
	struct snap_ctx *sc = ctx;
	if (sc->changed && strmap_get(sc->changed, r->name, NULL))
		return;
	put_res(sc->raw, r);
	sc->count++;
}

/* Readies generation lg->max_gen + 1 holding s with c applied (c may be
 * NULL): the snapshot written to a temp file and fsync'd, its empty journal
 * created and fsync'd. Nothing of it counts until gen_commit renames the
 * snapshot into place. */
static int gen_prepare(struct lastgood *lg, const struct state *s, const struct candidate *c, char *err,
		       size_t errlen)
{
	struct buf raw = BUF_INIT, file = BUF_INIT;
	struct strmap changed;
	strmap_init(&changed);
	struct snap_ctx sc = { &raw, NULL, 0 };
	uint64_t version = s->version;
	const char *statement = c ? c->statement : lg->statement;
	if (c) {
		for (size_t i = 0; i < c->n; i++) {
			const char *nm = c->items[i].new_res ? c->items[i].new_res->name : c->items[i].old->name;
			*strmap_ref(&changed, nm) = 1;
		}
		sc.changed = &changed;
		version = c->version;
	}
	state_each(s, snap_one, &sc);
	for (size_t i = 0; c && i < c->n; i++) {
		if (c->items[i].new_res) {
			put_res(&raw, c->items[i].new_res);
			sc.count++;
		}
	}
	put_statement(&raw, statement);
	strmap_release(&changed);

	int rc = -1, fd = -1, jfd = -1;
	unsigned long long gen = lg->max_gen + 1;
	char *tmp = gen_name(gen, "snap.tmp"), *jname = gen_name(gen, "journal");
	uLongf comp_cap = compressBound((uLong)raw.len);
	buf_reserve(&file, SNAP_HDR + comp_cap);
	buf_append(&file, SNAP_MAGIC, 8);
	put_u64(&file, version);
	put_u64(&file, sc.count);
	put_u64(&file, raw.len);
	unsigned char *payload = (unsigned char *)file.data + SNAP_HDR;
	if (compress2(payload, &comp_cap, (const Bytef *)(raw.data ? raw.data : ""), (uLong)raw.len, 6) != Z_OK) {
		snprintf(err, errlen, "cannot compress the snapshot");
		goto out;
	}
	file.len = 32;
	put_u64(&file, comp_cap);
	unsigned char hash[32];
	crypto_generichash_state hs;
	crypto_generichash_init(&hs, NULL, 0, sizeof(hash));
	crypto_generichash_update(&hs, (const unsigned char *)file.data, 40);
	crypto_generichash_update(&hs, payload, comp_cap);
	crypto_generichash_final(&hs, hash, sizeof(hash));
	memcpy(file.data + 40, hash, sizeof(hash));
	file.len = SNAP_HDR + comp_cap;

	unlinkat(lg->dirfd, tmp, 0);
	fd = openat(lg->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || write_full(fd, file.data, file.len) < 0 || fsync(fd) < 0) {
		snprintf(err, errlen, "cannot write '%s/%s': %s", lg->dir, tmp, strerror(errno));
		goto out;
	}
	/* the journal first, so the snapshot never appears without it */
	jfd = openat(lg->dirfd, jname, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (jfd < 0 || fsync(jfd) < 0) {
		snprintf(err, errlen, "cannot create '%s/%s': %s", lg->dir, jname, strerror(errno));
		goto out;
	}
	lg->pend = PEND_GENERATION;
	lg->pend_statement = statement ? xstrdup(statement) : NULL;
	lg->pend_gen = gen;
	lg->pend_jfd = jfd;
	lg->pend_snap_bytes = file.len;
	jfd = -1;
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	if (jfd >= 0)
		close(jfd);
	if (rc < 0) {
		unlinkat(lg->dirfd, tmp, 0);
		unlinkat(lg->dirfd, jname, 0);
	}
	free(tmp);
	free(jname);
	buf_release(&raw);
	buf_release(&file);
	return rc;
}

/* Makes the generation gen_prepare readied current: rename, fsync(dir). */
static int gen_commit(struct lastgood *lg, char *err, size_t errlen)
{
	unsigned long long gen = lg->pend_gen;
	char *tmp = gen_name(gen, "snap.tmp"), *snap = gen_name(gen, "snap");
	int rc = -1;
	if (renameat(lg->dirfd, tmp, lg->dirfd, snap) < 0) {
		snprintf(err, errlen, "cannot rename '%s' to '%s': %s", tmp, snap, strerror(errno));
		goto out;
	}
	if (fsync_dir(lg, err, errlen) < 0) {
		/* the rename may or may not be durable: take it back (the
		 * caller NACKs), and let the next save start a generation above
		 * this one, so whichever is on disk is superseded */
		unlinkat(lg->dirfd, snap, 0);
		if (fsync(lg->dirfd) < 0) {
			/* best effort: a load may still find the snapshot */
		}
		lg->max_gen = gen;
		lg->journal_broken = true;
		goto out;
	}
	/* keep the new generation and the previous one, drop every other */
	drop_generations(lg, gen, lg->gen);
	if (lg->jfd >= 0)
		close(lg->jfd);
	lg->jfd = lg->pend_jfd;
	lg->pend_jfd = -1;
	lg->gen = gen;
	lg->max_gen = gen;
	lg->snap_bytes = lg->pend_snap_bytes;
	lg->journal_bytes = 0;
	lg->journal_records = 0;
	lg->journal_broken = false;
	rc = 0;
out:
	free(tmp);
	free(snap);
	return rc;
}

/* Readies one journal record of c, and reserves its space past the
 * journal's end, so that on an ordinary file system the append after the
 * swap does not run out of room (copy-on-write ones may still refuse it:
 * rec_commit's failure path handles that). */
/* Encodes c as one journal record (header, CRC, compressed payload) into
 * rec. 0, or -1 with err. */
static int rec_build(const struct candidate *c, struct buf *rec, char *err, size_t errlen)
{
	struct buf raw = BUF_INIT;
	uint32_t nup = 0, nrm = 0;
	for (size_t i = 0; i < c->n; i++)
		c->items[i].new_res ? nup++ : nrm++;
	put_u64(&raw, c->version);
	put_u32(&raw, nup);
	put_u32(&raw, nrm);
	for (size_t i = 0; i < c->n; i++)
		if (c->items[i].new_res)
			put_res(&raw, c->items[i].new_res);
	for (size_t i = 0; i < c->n; i++)
		if (!c->items[i].new_res)
			put_str(&raw, c->items[i].old->name, strlen(c->items[i].old->name));
	put_statement(&raw, c->statement);

	int rc = -1;
	uLongf comp = compressBound((uLong)raw.len);
	rec->len = 0;
	buf_reserve(rec, JREC_HDR + comp);
	unsigned char *hdr = (unsigned char *)rec->data, *payload = hdr + JREC_HDR;
	if (compress2(payload, &comp, (const Bytef *)raw.data, (uLong)raw.len, 6) != Z_OK) {
		snprintf(err, errlen, "cannot compress the journal record");
		goto out;
	}
	/* the header in place, not with put_u32: buf_append NUL-terminates,
	 * which would overwrite the payload's first byte after the CRC */
	memcpy(hdr, JOURNAL_MAGIC, 4);
	set_u32(hdr + 4, (uint32_t)comp);
	set_u32(hdr + 8, (uint32_t)raw.len);
	uLong crc = crc32(0, hdr, 12);
	crc = crc32(crc, payload, (uInt)comp);
	set_u32(hdr + 12, (uint32_t)crc);
	rec->len = JREC_HDR + comp;
	rc = 0;
out:
	buf_release(&raw);
	return rc;
}

/* Readies one journal record of c, and reserves its space past the
 * journal's end, so that on an ordinary file system the append after the
 * swap does not run out of room (copy-on-write ones may still refuse it:
 * rec_commit's failure path handles that). */
static int rec_prepare(struct lastgood *lg, const struct candidate *c, char *err, size_t errlen)
{
	struct buf *rec = &lg->pend_rec;
	int rc = -1;
	if (rec_build(c, rec, err, errlen) < 0)
		goto out;
	/* KEEP_SIZE: the blocks are allocated, the file's size (and so what
	 * a load replays) is unchanged; a file system without fallocate
	 * just does not reserve */
	int fr;
	do
		fr = fallocate(lg->jfd, FALLOC_FL_KEEP_SIZE, (off_t)lg->journal_bytes, (off_t)rec->len);
	while (fr < 0 && errno == EINTR);
	if (fr < 0) {
		if (errno != EOPNOTSUPP && errno != ENOSYS) {
			snprintf(err, errlen, "cannot persist last-good in '%s': %s", lg->dir, strerror(errno));
			/* give back what a partial allocation took */
			if (ftruncate(lg->jfd, (off_t)lg->journal_bytes) < 0) {
				/* blocks past the end: never replayed */
			}
			goto out;
		}
	} else {
		lg->pend_reserved = true;
	}
	lg->pend = PEND_RECORD;
	lg->pend_statement = c->statement ? xstrdup(c->statement) : NULL;
	rc = 0;
out:
	if (rc < 0)
		rec->len = 0;
	return rc;
}

/* Appends and fsyncs the record rec_prepare readied. */
static int rec_commit(struct lastgood *lg, char *err, size_t errlen)
{
	struct buf *rec = &lg->pend_rec;
	if (write_full(lg->jfd, rec->data, rec->len) < 0 || fsync(lg->jfd) < 0) {
		int e = errno;
		snprintf(err, errlen, "cannot persist last-good in '%s': %s", lg->dir, strerror(e));
		/* take the record back, and never trust this file again after a
		 * failed write or fsync: the next save starts a new generation
		 * (and a torn tail is cut at load anyway) */
		if (ftruncate(lg->jfd, (off_t)lg->journal_bytes) < 0) {
			/* lastgood_abandon tries again; journal_broken keeps
			 * any further record out of this file */
		}
		lg->journal_broken = true;
		return -1;
	}
	lg->pend_reserved = false;   /* the reservation is the record now */
	lg->journal_bytes += rec->len;
	lg->journal_records++;
	return 0;
}

/* ---- the apply in flight ------------------------------------------------------
 *
 * PENDING_NAME holds, while a candidate goes live, what it is and the
 * generation it goes live as, so that boot can finish an apply the agent
 * did not live to commit (lastgood.h). One file, rewritten in place:
 *
 *   "TTHRPND1", u64 base version (the last-good state it applies on),
 *   u64 last-good generation, u64 that generation's journal length,
 *   u32 length + the consumer's generation id (0: none),
 *   the candidate as one journal record (TJR2: header, CRC, payload),
 *   u32 CRC-32 of everything before it.
 *
 * Empty (or absent) means no apply in flight. A write is whole before
 * anything goes live (fdatasync); a torn one fails its CRC and is
 * ignored, as is one whose base is not what last-good loaded. */

/* Opens (creating) the file; the directory is fsync'd when it was new. */
static int pending_open(struct lastgood *lg, char *err, size_t errlen)
{
	if (lg->pfd >= 0)
		return 0;
	bool existed = faccessat(lg->dirfd, PENDING_NAME, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
	lg->pfd = openat(lg->dirfd, PENDING_NAME, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (lg->pfd < 0 || (!existed && fsync(lg->dirfd) < 0)) {
		snprintf(err, errlen, "cannot open '%s/%s': %s", lg->dir, PENDING_NAME, strerror(errno));
		if (lg->pfd >= 0)
			close(lg->pfd);
		lg->pfd = -1;
		return -1;
	}
	return 0;
}

/* Empties the record; durable: fdatasync'd too. */
static void pending_void(struct lastgood *lg, bool durable)
{
	if (lg->pfd < 0) {
		if (faccessat(lg->dirfd, PENDING_NAME, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
			return;
		char err[256];
		if (pending_open(lg, err, sizeof(err)) < 0) {
			log_warn("last-good: %s", err);
			return;
		}
	}
	if (ftruncate(lg->pfd, 0) < 0 || (durable && fdatasync(lg->pfd) < 0))
		log_warn("last-good: cannot empty '%s/%s': %s", lg->dir, PENDING_NAME, strerror(errno));
}

int lastgood_pending(struct lastgood *lg, const struct state *s, const struct candidate *c, const char *gen,
		     char *err, size_t errlen)
{
	struct buf file = BUF_INIT, rec = BUF_INIT;
	size_t glen = gen ? strlen(gen) : 0;
	int rc = -1;
	if (glen > PENDING_GEN_MAX) {
		snprintf(err, errlen, "generation id '%.80s' is too long to keep", gen);
		goto out;
	}
	/* the journal record lastgood_prepare readied of c is the one kept
	 * here: compressed once */
	const struct buf *r = &lg->pend_rec;
	if (lg->pend != PEND_RECORD || !lg->pend_rec.len) {
		if (rec_build(c, &rec, err, errlen) < 0)
			goto out;
		r = &rec;
	}
	if (pending_open(lg, err, errlen) < 0)
		goto out;
	buf_reserve(&file, PENDING_HDR + 4 + glen + r->len + 4);
	buf_append(&file, PENDING_MAGIC, 8);
	put_u64(&file, s->version);
	put_u64(&file, lg->gen);
	put_u64(&file, lg->journal_bytes);
	put_str(&file, gen ? gen : "", glen);
	buf_append(&file, r->data, r->len);
	put_u32(&file, (uint32_t)crc32(0, (const Bytef *)file.data, (uInt)file.len));
	if (lseek(lg->pfd, 0, SEEK_SET) < 0 || write_full(lg->pfd, file.data, file.len) < 0 ||
	    ftruncate(lg->pfd, (off_t)file.len) < 0 || fdatasync(lg->pfd) < 0) {
		snprintf(err, errlen, "cannot write '%s/%s': %s", lg->dir, PENDING_NAME, strerror(errno));
		/* what is there now is torn or whole: either way nothing went
		 * live yet, and the next write replaces it */
		goto out;
	}
	rc = 0;
out:
	buf_release(&file);
	buf_release(&rec);
	return rc;
}

void lastgood_pending_drop(struct lastgood *lg)
{
	pending_void(lg, true);
}

int lastgood_pending_load(struct lastgood *lg, const struct state *s, struct candidate *c, char **statement,
			  char **gen, char *err, size_t errlen)
{
	size_t len = 0;
	unsigned char *data = (unsigned char *)read_at(lg->dirfd, PENDING_NAME, (size_t)4 * MAX_RAW, &len);
	unsigned char *raw = NULL;
	int rc = -1;
	memset(c, 0, sizeof(*c));
	*statement = NULL;
	*gen = NULL;
	if (!data) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, errlen, "cannot read '%s/%s': %s", lg->dir, PENDING_NAME, strerror(errno));
		return -1;
	}
	if (len == 0) {
		rc = 0;
		goto out;
	}
	if (len < PENDING_HDR + 4 + 4 || memcmp(data, PENDING_MAGIC, 8) != 0) {
		snprintf(err, errlen, "its record of the apply in flight is damaged (bad header)");
		goto out;
	}
	if ((uint32_t)crc32(0, data, (uInt)(len - 4)) != get_u32(data + len - 4)) {
		snprintf(err, errlen, "its record of the apply in flight is damaged (torn or checksum mismatch)");
		goto out;
	}
	uint64_t base = get_u64(data + 8), lgen = get_u64(data + 16), jlen = get_u64(data + 24);
	uint32_t glen = get_u32(data + PENDING_HDR);
	size_t off = PENDING_HDR + 4;
	if (glen > PENDING_GEN_MAX || len - 4 - off < glen) {
		snprintf(err, errlen, "its record of the apply in flight is damaged (generation id)");
		goto out;
	}
	char gbuf[PENDING_GEN_MAX + 1];
	memcpy(gbuf, data + off, glen);
	gbuf[glen] = '\0';
	off += glen;
	if (strlen(gbuf) != glen) {
		snprintf(err, errlen, "its record of the apply in flight is damaged (generation id)");
		goto out;
	}
	bool v2;
	size_t raw_len, rec_len;
	char why[512];
	raw = rec_open(data + off, len - 4 - off, &v2, &raw_len, &rec_len, why, sizeof(why));
	if (!raw || off + rec_len != len - 4) {
		snprintf(err, errlen, "its record of the apply in flight is damaged (%s)", raw ? "trailing bytes" : why);
		goto out;
	}
	uint64_t version;
	if (rec_decode(raw, raw_len, v2, s, c, &version, statement, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "its record of the apply in flight does not parse (%s)", why);
		goto out;
	}
	c->version = version;
	c->base = base;
	c->statement = *statement;
	if (base != s->version || lgen != lg->gen || jlen != lg->journal_bytes) {
		/* not of the last-good loaded: its commit made it void (or a
		 * fallback to an older generation) */
		if (version == s->version)
			log_info("last-good: the apply of version %llu completed (it is last-good)",
				 (unsigned long long)version);
		else
			log_warn("last-good: an apply of version %llu on version %llu was in flight, but last-good "
				 "holds version %llu (generation %llu): it is not finished", (unsigned long long)version,
				 (unsigned long long)base, (unsigned long long)s->version, lg->gen);
		rc = 0;
		goto out;
	}
	if (version <= base) {
		snprintf(err, errlen, "its record of the apply in flight goes from version %llu to %llu",
			 (unsigned long long)base, (unsigned long long)version);
		goto out;
	}
	if (candidate_check(s, c, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "its record of the apply in flight does not apply on last-good (%s)", why);
		goto out;
	}
	*gen = glen ? xstrdup(gbuf) : NULL;
	rc = 1;
out:
	if (rc != 1) {
		candidate_release(c);
		free(*statement);
		*statement = NULL;
		pending_void(lg, true);
	}
	free(raw);
	free(data);
	return rc;
}

int lastgood_prepare(struct lastgood *lg, const struct state *s, const struct candidate *c, char *err,
		     size_t errlen)
{
	lastgood_abandon(lg);
	size_t limit = lg->snap_bytes > COMPACT_MIN ? lg->snap_bytes : COMPACT_MIN;
	if (lg->gen == 0 || lg->jfd < 0 || lg->journal_broken || lg->journal_bytes > limit)
		return gen_prepare(lg, s, c, err, errlen);
	return rec_prepare(lg, c, err, errlen);
}

int lastgood_commit(struct lastgood *lg, char *err, size_t errlen)
{
	int rc;
	switch (lg->pend) {
	case PEND_GENERATION:
		rc = gen_commit(lg, err, errlen);
		break;
	case PEND_RECORD:
		rc = rec_commit(lg, err, errlen);
		break;
	default:
		snprintf(err, errlen, "last-good: nothing prepared to commit");
		return -1;
	}
	if (rc == 0) {
		free(lg->statement);
		lg->statement = lg->pend_statement;
		lg->pend_statement = NULL;
		/* the apply in flight is last-good now: its record is void (a
		 * crash before this truncation leaves it naming a base that is
		 * no longer last-good's version, and boot drops it) */
		pending_void(lg, false);
	}
	lastgood_abandon(lg);
	return rc;
}

void lastgood_abandon(struct lastgood *lg)
{
	if (lg->pend == PEND_GENERATION) {
		/* a generation that did not become current: its files go
		 * (gen_commit hands the journal over when it succeeds) */
		char *tmp = gen_name(lg->pend_gen, "snap.tmp");
		unlinkat(lg->dirfd, tmp, 0);
		free(tmp);
		if (lg->pend_jfd >= 0) {
			char *jname = gen_name(lg->pend_gen, "journal");
			close(lg->pend_jfd);
			unlinkat(lg->dirfd, jname, 0);
			free(jname);
		}
	}
	if (lg->pend == PEND_RECORD && lg->jfd >= 0 &&
	    (lg->pend_reserved || lg->journal_broken)) {
		/* give the reserved blocks back (truncating to the size frees
		 * what lies past it; a hole punched there is ignored by ext4),
		 * and cut a record whose write or fsync failed */
		if (ftruncate(lg->jfd, (off_t)lg->journal_bytes) < 0) {
			/* blocks past the end are never replayed */
		}
	}
	lg->pend = PEND_NONE;
	lg->pend_jfd = -1;
	lg->pend_reserved = false;
	free(lg->pend_statement);
	lg->pend_statement = NULL;
	buf_shrink(&lg->pend_rec, 64u << 10);   /* a big push's record is not kept */
	lg->pend_rec.len = 0;
}

int lastgood_compact(struct lastgood *lg, const struct state *s, char *err, size_t errlen)
{
	lastgood_abandon(lg);
	if (gen_prepare(lg, s, NULL, err, errlen) < 0)
		return -1;
	return lastgood_commit(lg, err, errlen);
}

int lastgood_save(struct lastgood *lg, const struct state *s, const struct candidate *c, char *err, size_t errlen)
{
	if (lastgood_prepare(lg, s, c, err, errlen) < 0)
		return -1;
	return lastgood_commit(lg, err, errlen);
}
