/* test_lastgood_trust.c: unit tests of what agent/lastgood.c keeps for
 * --trust: the signed statement of the state held (format 2: TTHRSNP2
 * snapshots, TJR2 journal records) across saves, new generations and
 * loads; the verify callback judging each generation at load, a refused
 * one falling back to the previous; and format 1 files (TTHRSNP1, TJR1),
 * written here byte by byte, still loading, alone and mixed with format 2.
 * The statements are real: Ed25519 tokens over the LtHash digest of the
 * state, checked by a verifier like tetherd's boot check. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "buf.h"
#include "keys.h"
#include "lastgood.h"
#include "log.h"
#include "lthash.h"
#include "state/push.h"
#include "state/state.h"
#include "statement.h"
#include "tmpdir.h"

struct fx {
	char root[64];
	char dir[128];
	struct lastgood *lg;
	struct state s;
	struct signing_key key, rogue;
	struct trust trust;           /* key only */
	char *tokens[16];             /* statements made by a test, freed by teardown */
	size_t ntokens;
};

/* What the verifier saw and decides. */
struct judge {
	const struct trust *trust;
	int calls;
	int nulls;                    /* calls with no statement */
	bool accept_unsigned;
	bool refuse_all;
	uint64_t refuse_version;      /* 0: none */
	uint64_t seen[8];             /* versions judged, in order */
};

static void make_key(struct signing_key *k)
{
	crypto_sign_keypair(k->pk, k->sk);
	keys_id(k->pk, k->kid);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	if (test_tmpdir_make(f->root, sizeof(f->root), "lgtrust") < 0) {
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
	make_key(&f->key);
	make_key(&f->rogue);
	f->trust.n = 1;
	memcpy(f->trust.key[0].pk, f->key.pk, 32);
	memcpy(f->trust.key[0].kid, f->key.kid, sizeof(f->key.kid));
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	lastgood_close(f->lg);
	state_release(&f->s);
	for (size_t i = 0; i < f->ntokens; i++)
		free(f->tokens[i]);
	test_tmpdir_remove(f->root);
	free(f);
	return 0;
}

/* ---- digests and statements ----------------------------------------------------- */

static void add_res(struct lthash *h, const struct res *r, bool add)
{
	unsigned char seed[LTHASH_SEED_BYTES];
	lthash_seed(r->name, r->body, r->body_len, seed);
	if (add)
		lthash_add(h, seed);
	else
		lthash_sub(h, seed);
}

static void state_digest(const struct state *s, unsigned char out[32])
{
	struct lthash h;
	lthash_init(&h);
	for (size_t i = 0; i < s->cap; i++)
		if (s->slots[i])
			add_res(&h, s->slots[i], true);
	lthash_digest(&h, out);
}

/* The digest of s with c applied (as the agent computes it, O(changed)). */
static void candidate_digest(const struct state *s, const struct candidate *c, unsigned char out[32])
{
	struct lthash h;
	lthash_init(&h);
	for (size_t i = 0; i < s->cap; i++)
		if (s->slots[i])
			add_res(&h, s->slots[i], true);
	for (size_t i = 0; i < c->n; i++) {
		if (c->items[i].old)
			add_res(&h, c->items[i].old, false);
		if (c->items[i].new_res)
			add_res(&h, c->items[i].new_res, true);
	}
	lthash_digest(&h, out);
}

static const char *sign(struct fx *f, const struct signing_key *k, uint64_t version, const unsigned char d[32])
{
	struct statement st;
	memset(&st, 0, sizeof(st));
	st.version = version;
	st.sub = (char *)"";
	memcpy(st.digest, d, 32);
	st.issued = 1796036900;
	st.expires = st.issued + 3600;
	assert_true(f->ntokens < sizeof(f->tokens) / sizeof(f->tokens[0]));
	char *tok = statement_sign(&st, k);
	f->tokens[f->ntokens++] = tok;
	return tok;
}

/* A verifier like tetherd's boot check: signed by a trusted key, for the
 * state's version, with the state's digest. */
static int judge_fn(void *ctx, const struct state *s, const char *statement, char *err, size_t errlen)
{
	struct judge *j = ctx;
	if (j->calls < 8)
		j->seen[j->calls] = s->version;
	j->calls++;
	if (!statement) {
		j->nulls++;
		if (j->accept_unsigned)
			return 0;
		snprintf(err, errlen, "no statement");
		return -1;
	}
	if (j->refuse_all || (j->refuse_version && s->version == j->refuse_version)) {
		snprintf(err, errlen, "refused by the test at version %llu", (unsigned long long)s->version);
		return -1;
	}
	struct statement st;
	char inner[256];
	if (statement_verify(statement, strlen(statement), j->trust, &st, inner, sizeof(inner)) != 0) {
		snprintf(err, errlen, "%s", inner);
		return -1;
	}
	unsigned char d[32];
	state_digest(s, d);
	int rc = 0;
	if (st.version != s->version) {
		snprintf(err, errlen, "statement of version %llu, state at %llu", (unsigned long long)st.version,
			 (unsigned long long)s->version);
		rc = -1;
	} else if (!lthash_digest_equal(d, st.digest)) {
		snprintf(err, errlen, "state digest mismatch");
		rc = -1;
	}
	statement_release(&st);
	return rc;
}

/* ---- pushes ----------------------------------------------------------------------- */

static char *cluster_push(uint64_t version, uint64_t base, bool full, const char *name, int port,
			  const char *removed)
{
	struct buf b = BUF_INIT;
	buf_printf(&b, "{\"version\":%llu,\"base\":%llu,\"nonce\":\"n%llu\",\"full\":%s,\"upserts\":[",
		   (unsigned long long)version, (unsigned long long)base, (unsigned long long)version,
		   full ? "true" : "false");
	if (name)
		buf_printf(&b, "{\"name\":\"%s\",\"body\":{\"endpoints\":[{\"address\":\"10.0.0.1\","
			   "\"port\":%d}]}}", name, port);
	buf_puts(&b, "]");
	if (removed)
		buf_printf(&b, ",\"removed\":[\"%s\"]", removed);
	buf_puts(&b, "}");
	return buf_detach(&b, NULL);
}

/* Applies json to f->s and saves it with a statement signed by k of the
 * resulting state (k NULL: no statement; bad_digest: a statement of
 * another state). Returns the statement. */
static const char *save_signed(struct fx *f, const char *json, const struct signing_key *k, bool bad_digest)
{
	struct push p;
	struct candidate c;
	char err[512];
	if (push_decode(json, strlen(json), NULL, &p, err, sizeof(err)) < 0)
		fail_msg("test push does not decode: %s", err);
	if (candidate_build(&f->s, &p, 0, &c, err, sizeof(err)) < 0)
		fail_msg("test push refused: %s", err);
	const char *tok = NULL;
	if (k) {
		unsigned char d[32];
		candidate_digest(&f->s, &c, d);
		if (bad_digest)
			d[0] ^= 1;
		tok = sign(f, k, c.version, d);
	}
	c.statement = tok;
	if (lastgood_save(f->lg, &f->s, &c, err, sizeof(err)) < 0)
		fail_msg("lastgood_save: %s", err);
	state_commit(&f->s, &c);
	candidate_release(&c);
	push_release(&p);
	return tok;
}

static const char *save_push(struct fx *f, uint64_t version, uint64_t base, bool full, const char *name, int port,
			     const char *removed, const struct signing_key *k)
{
	char *json = cluster_push(version, base, full, name, port, removed);
	const char *tok = save_signed(f, json, k, false);
	free(json);
	return tok;
}

/* Opens the state directory afresh and loads it, judged by j (NULL: no
 * verifier). *statement gets a copy of what last-good holds then. */
static int reload(struct fx *f, struct judge *j, struct state *out, char **statement, struct lastgood_info *info,
		  char *err, size_t errlen)
{
	struct lastgood *lg = lastgood_open(f->dir, err, errlen);
	assert_non_null(lg);
	if (j)
		lastgood_set_verify(lg, judge_fn, j);
	state_init(out);
	int rc = lastgood_load(lg, out, err, errlen);
	const char *st = lastgood_statement(lg);
	*statement = st ? strdup(st) : NULL;
	if (info)
		lastgood_info(lg, info);
	lastgood_close(lg);
	return rc;
}

static const char *body_of(const struct state *s, const char *name)
{
	const struct res *r = state_get(s, name);
	return r ? r->body : NULL;
}

static bool exists(const struct fx *f, const char *name)
{
	char p[256];
	struct stat st;
	snprintf(p, sizeof(p), "%s/%s", f->dir, name);
	return stat(p, &st) == 0;
}

/* ---- format 2: statements kept ------------------------------------------------------ */

static void test_statement_kept_across_saves(void **state)
{
	struct fx *f = *state;
	char err[512];
	assert_null(lastgood_statement(f->lg));
	const char *s1 = save_push(f, 1, 0, true, "cluster/a", 80, NULL, &f->key);   /* generation 1 */
	assert_string_equal(lastgood_statement(f->lg), s1);
	/* the candidate's statement is borrowed: last-good keeps its own copy */
	assert_ptr_not_equal(lastgood_statement(f->lg), s1);
	const char *s2 = save_push(f, 2, 1, false, "cluster/b", 81, NULL, &f->key);  /* a journal record */
	assert_string_equal(lastgood_statement(f->lg), s2);
	struct lastgood_info info;
	lastgood_info(f->lg, &info);
	assert_int_equal(info.generation, 1);
	assert_int_equal(info.journal_records, 1);

	/* a load: the state, and the statement of the last record */
	struct judge j = { .trust = &f->trust };
	struct state got;
	char *st = NULL;
	assert_int_equal(reload(f, &j, &got, &st, &info, err, sizeof(err)), 1);
	assert_non_null(st);
	assert_string_equal(st, s2);
	assert_int_equal(got.version, 2);
	assert_int_equal(got.count, 2);
	assert_int_equal(j.calls, 1);
	assert_int_equal(j.seen[0], 2);
	assert_int_equal(info.journal_records, 1);
	free(st);
	state_release(&got);

	/* a new generation keeps the statement of what it holds */
	const char *s3 = save_push(f, 3, 2, false, NULL, 0, "cluster/a", &f->key);
	assert_int_equal(lastgood_compact(f->lg, &f->s, err, sizeof(err)), 0);
	assert_string_equal(lastgood_statement(f->lg), s3);
	lastgood_info(f->lg, &info);
	assert_int_equal(info.generation, 2);
	assert_int_equal(info.journal_records, 0);
	j = (struct judge){ .trust = &f->trust };
	assert_int_equal(reload(f, &j, &got, &st, &info, err, sizeof(err)), 1);
	assert_string_equal(st, s3);
	assert_int_equal(info.generation, 2);
	assert_int_equal(info.journal_records, 0);
	assert_int_equal(got.version, 3);
	assert_int_equal(got.count, 1);
	assert_null(body_of(&got, "cluster/a"));
	assert_int_equal(j.calls, 1);
	free(st);
	state_release(&got);

	/* a record with no statement: the state after it is signed by none */
	save_push(f, 4, 3, false, "cluster/c", 82, NULL, NULL);
	assert_null(lastgood_statement(f->lg));
	j = (struct judge){ .trust = &f->trust, .accept_unsigned = true };
	assert_int_equal(reload(f, &j, &got, &st, NULL, err, sizeof(err)), 1);
	assert_null(st);
	assert_int_equal(got.version, 4);
	assert_int_equal(j.nulls, 1);
	state_release(&got);
	/* and the next signed one is kept again */
	const char *s5 = save_push(f, 5, 4, false, "cluster/c", 83, NULL, &f->key);
	j = (struct judge){ .trust = &f->trust };
	assert_int_equal(reload(f, &j, &got, &st, NULL, err, sizeof(err)), 1);
	assert_string_equal(st, s5);
	assert_int_equal(got.version, 5);
	free(st);
	state_release(&got);
}

/* The first save of a handle that fell back starts a new generation from
 * the candidate: its statement is the candidate's. */
static void test_statement_in_generation_from_candidate(void **state)
{
	struct fx *f = *state;
	char err[512];
	save_push(f, 1, 0, true, "cluster/a", 80, NULL, &f->key);
	save_push(f, 2, 1, false, "cluster/b", 81, NULL, &f->key);
	/* another handle, on the loaded state: its saves go to generation 1's
	 * journal, each with its statement */
	lastgood_close(f->lg);
	state_release(&f->s);
	f->lg = lastgood_open(f->dir, err, sizeof(err));
	assert_non_null(f->lg);
	struct judge j = { .trust = &f->trust };
	lastgood_set_verify(f->lg, judge_fn, &j);
	state_init(&f->s);
	assert_int_equal(lastgood_load(f->lg, &f->s, err, sizeof(err)), 1);
	assert_non_null(lastgood_statement(f->lg));
	const char *s3 = save_push(f, 3, 2, false, "cluster/c", 82, NULL, &f->key);
	assert_string_equal(lastgood_statement(f->lg), s3);
	struct state got;
	char *st = NULL;
	assert_int_equal(reload(f, &j, &got, &st, NULL, err, sizeof(err)), 1);
	assert_string_equal(st, s3);
	assert_int_equal(got.version, 3);
	free(st);
	state_release(&got);
}

/* ---- the verify callback --------------------------------------------------------------- */

/* Two generations: 1 (snapshot at 1, a record to 2) and 2 (snapshot at 2,
 * a record to 3). */
static void two_generations(struct fx *f, const char **s2, const char **s3)
{
	char err[512];
	save_push(f, 1, 0, true, "cluster/a", 80, NULL, &f->key);
	*s2 = save_push(f, 2, 1, false, "cluster/b", 81, NULL, &f->key);
	assert_int_equal(lastgood_compact(f->lg, &f->s, err, sizeof(err)), 0);
	*s3 = save_push(f, 3, 2, false, "cluster/a", 90, NULL, &f->key);
	assert_true(exists(f, "lastgood-1.snap"));
	assert_true(exists(f, "lastgood-2.snap"));
	struct lastgood_info info;
	lastgood_info(f->lg, &info);
	assert_int_equal(info.generation, 2);
	assert_int_equal(info.journal_records, 1);
}

static void test_refused_newest_falls_back(void **state)
{
	struct fx *f = *state;
	const char *s2, *s3;
	char err[512];
	two_generations(f, &s2, &s3);

	/* everything verifies: the newest */
	struct judge j = { .trust = &f->trust };
	struct state got;
	char *st = NULL;
	assert_int_equal(reload(f, &j, &got, &st, NULL, err, sizeof(err)), 1);
	assert_int_equal(got.version, 3);
	assert_string_equal(st, s3);
	assert_int_equal(j.calls, 1);
	free(st);
	state_release(&got);

	/* the newest generation refused: the previous one, with its journal */
	j = (struct judge){ .trust = &f->trust, .refuse_version = 3 };
	lastgood_close(f->lg);
	state_release(&f->s);
	f->lg = lastgood_open(f->dir, err, sizeof(err));
	assert_non_null(f->lg);
	lastgood_set_verify(f->lg, judge_fn, &j);
	state_init(&f->s);
	log_set_level(LOG_LVL_ERROR + 1);
	int rc = lastgood_load(f->lg, &f->s, err, sizeof(err));
	log_set_level(LOG_LVL_WARN);
	assert_int_equal(rc, 1);
	assert_int_equal(j.calls, 2);
	assert_int_equal(j.seen[0], 3);
	assert_int_equal(j.seen[1], 2);
	assert_int_equal(f->s.version, 2);
	assert_int_equal(f->s.count, 2);
	assert_non_null(strstr(body_of(&f->s, "cluster/a"), "\"port\":80"));
	assert_string_equal(lastgood_statement(f->lg), s2);
	struct lastgood_info info;
	lastgood_info(f->lg, &info);
	assert_int_equal(info.generation, 1);

	/* the next save starts a new generation above the refused one; the
	 * refused generation goes */
	const char *s3b = save_push(f, 3, 2, false, "cluster/a", 91, NULL, &f->key);
	lastgood_info(f->lg, &info);
	assert_int_equal(info.generation, 3);
	assert_true(exists(f, "lastgood-3.snap"));
	assert_true(exists(f, "lastgood-1.snap"));
	assert_false(exists(f, "lastgood-2.snap"));
	assert_false(exists(f, "lastgood-2.journal"));
	j = (struct judge){ .trust = &f->trust };
	assert_int_equal(reload(f, &j, &got, &st, NULL, err, sizeof(err)), 1);
	assert_int_equal(got.version, 3);
	assert_non_null(strstr(body_of(&got, "cluster/a"), "\"port\":91"));
	assert_string_equal(st, s3b);
	free(st);
	state_release(&got);
}

/* A generation whose statement is not its state's, or signed by a key not
 * trusted, is refused by a real verifier; the previous one is used. */
static void test_unverifiable_generation_falls_back(void **state)
{
	struct fx *f = *state;
	char err[512];
	save_push(f, 1, 0, true, "cluster/a", 80, NULL, &f->key);
	const char *s2 = save_push(f, 2, 1, false, "cluster/b", 81, NULL, &f->key);
	assert_int_equal(lastgood_compact(f->lg, &f->s, err, sizeof(err)), 0);
	/* generation 2's journal: a record signed by a key not trusted */
	save_push(f, 3, 2, false, "cluster/c", 82, NULL, &f->rogue);
	struct judge j = { .trust = &f->trust };
	struct state got;
	char *st = NULL;
	log_set_level(LOG_LVL_ERROR + 1);
	int rc = reload(f, &j, &got, &st, NULL, err, sizeof(err));
	log_set_level(LOG_LVL_WARN);
	assert_int_equal(rc, 1);
	assert_int_equal(got.version, 2);
	assert_string_equal(st, s2);
	assert_null(body_of(&got, "cluster/c"));
	free(st);
	state_release(&got);

	/* the same with a statement of another digest, by the trusted key */
	char *json = cluster_push(4, 3, false, "cluster/d", 84, NULL);
	save_signed(f, json, &f->key, true);
	free(json);
	j = (struct judge){ .trust = &f->trust };
	log_set_level(LOG_LVL_ERROR + 1);
	rc = reload(f, &j, &got, &st, NULL, err, sizeof(err));
	log_set_level(LOG_LVL_WARN);
	assert_int_equal(rc, 1);
	assert_int_equal(got.version, 2);
	assert_int_equal(j.calls, 2);
	free(st);
	state_release(&got);
}

static void test_refuse_all(void **state)
{
	struct fx *f = *state;
	const char *s2, *s3;
	char err[512] = "";
	two_generations(f, &s2, &s3);
	struct judge j = { .trust = &f->trust, .refuse_all = true };
	lastgood_close(f->lg);
	state_release(&f->s);
	f->lg = lastgood_open(f->dir, err, sizeof(err));
	assert_non_null(f->lg);
	lastgood_set_verify(f->lg, judge_fn, &j);
	state_init(&f->s);
	log_set_level(LOG_LVL_ERROR + 1);
	int rc = lastgood_load(f->lg, &f->s, err, sizeof(err));
	log_set_level(LOG_LVL_WARN);
	assert_int_equal(rc, -1);
	assert_int_equal(j.calls, 2);
	/* (which generation's reason it names: test_refuse_all_names_newest_reason) */
	assert_non_null(strstr(err, "passes verification"));
	assert_non_null(strstr(err, "refused by the test at version"));
	/* nothing was taken */
	assert_int_equal(f->s.version, 0);
	assert_int_equal(f->s.count, 0);
	assert_null(lastgood_statement(f->lg));
	/* the files are still there for a later boot with the right keys */
	assert_true(exists(f, "lastgood-1.snap"));
	assert_true(exists(f, "lastgood-2.snap"));
	struct state got;
	char *st = NULL;
	j = (struct judge){ .trust = &f->trust };
	assert_int_equal(reload(f, &j, &got, &st, NULL, err, sizeof(err)), 1);
	assert_int_equal(got.version, 3);
	assert_string_equal(st, s3);
	free(st);
	state_release(&got);

	/* no key trusted at all: every generation refused by a real verifier */
	struct trust other = { 0 };
	other.n = 1;
	memcpy(other.key[0].pk, f->rogue.pk, 32);
	memcpy(other.key[0].kid, f->rogue.kid, sizeof(f->rogue.kid));
	j = (struct judge){ .trust = &other };
	log_set_level(LOG_LVL_ERROR + 1);
	rc = reload(f, &j, &got, &st, NULL, err, sizeof(err));
	log_set_level(LOG_LVL_WARN);
	assert_int_equal(rc, -1);
	assert_non_null(strstr(err, "unknown key"));
	assert_null(st);
	assert_int_equal(got.version, 0);
	state_release(&got);
}

/* The error of a load that refused every generation says "(newest: WHY)":
 * WHY must be the newest generation's reason, not the oldest's. */
static void test_refuse_all_names_newest_reason(void **state)
{
	struct fx *f = *state;
	const char *s2, *s3;
	char err[512] = "";
	two_generations(f, &s2, &s3);
	struct judge j = { .trust = &f->trust, .refuse_all = true };
	struct state got;
	char *st = NULL;
	log_set_level(LOG_LVL_ERROR + 1);
	int rc = reload(f, &j, &got, &st, NULL, err, sizeof(err));
	log_set_level(LOG_LVL_WARN);
	state_release(&got);
	assert_int_equal(rc, -1);
	assert_int_equal(j.calls, 2);
	/* generation 2 (version 3) is the newest; generation 1 (version 2)
	 * was tried after it */
	if (!strstr(err, "(newest: refused by the test at version 3)"))
		fail_msg("the error names another generation's reason as the newest's: %s", err);
}

/* ---- format 1 --------------------------------------------------------------------- */

static void put_u32(struct buf *b, uint32_t v)
{
	unsigned char x[4] = { (unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
			       (unsigned char)(v >> 24) };
	buf_append(b, x, 4);
}

static void put_u64(struct buf *b, uint64_t v)
{
	for (int i = 0; i < 8; i++) {
		unsigned char c = (unsigned char)(v >> (8 * i));
		buf_append(b, &c, 1);
	}
}

static void put_str(struct buf *b, const char *s)
{
	put_u32(b, (uint32_t)strlen(s));
	buf_append(b, s, strlen(s));
}

static void put_res(struct buf *b, const char *name, uint64_t version, const char *body)
{
	put_str(b, name);
	put_u64(b, version);
	put_str(b, body);
}

static void spit(const struct fx *f, const char *name, const void *data, size_t len, bool append)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/%s", f->dir, name);
	FILE *fp = fopen(p, append ? "ab" : "wb");
	assert_non_null(fp);
	if (len)
		assert_int_equal(fwrite(data, 1, len, fp), len);
	assert_int_equal(fclose(fp), 0);
}

/* A snapshot file: magic, version, count, raw length, compressed length,
 * BLAKE2b-256 of those 40 bytes and the payload, the zlib payload. */
static void write_snapshot(const struct fx *f, const char *file, const char *magic, uint64_t version,
			   uint64_t count, const struct buf *raw)
{
	uLongf clen = compressBound((uLong)raw->len);
	unsigned char *comp = malloc(clen);
	assert_non_null(comp);
	assert_int_equal(compress2(comp, &clen, (const Bytef *)raw->data, (uLong)raw->len, 6), Z_OK);
	struct buf file_b = BUF_INIT;
	buf_append(&file_b, magic, 8);
	put_u64(&file_b, version);
	put_u64(&file_b, count);
	put_u64(&file_b, raw->len);
	put_u64(&file_b, clen);
	unsigned char h[32];
	crypto_generichash_state hs;
	crypto_generichash_init(&hs, NULL, 0, 32);
	crypto_generichash_update(&hs, (const unsigned char *)file_b.data, 40);
	crypto_generichash_update(&hs, comp, clen);
	crypto_generichash_final(&hs, h, 32);
	buf_append(&file_b, h, 32);
	buf_append(&file_b, comp, clen);
	spit(f, file, file_b.data, file_b.len, false);
	buf_release(&file_b);
	free(comp);
}

/* A journal record: magic, compressed length, raw length, CRC-32 of the
 * first 12 bytes and the payload, the zlib payload. */
static void append_record(const struct fx *f, const char *file, const char *magic, const struct buf *raw)
{
	uLongf clen = compressBound((uLong)raw->len);
	unsigned char *comp = malloc(clen);
	assert_non_null(comp);
	assert_int_equal(compress2(comp, &clen, (const Bytef *)raw->data, (uLong)raw->len, 6), Z_OK);
	struct buf rec = BUF_INIT;
	buf_append(&rec, magic, 4);
	put_u32(&rec, (uint32_t)clen);
	put_u32(&rec, (uint32_t)raw->len);
	uLong crc = crc32(0, (const Bytef *)rec.data, 12);
	crc = crc32(crc, comp, (uInt)clen);
	put_u32(&rec, (uint32_t)crc);
	buf_append(&rec, comp, clen);
	spit(f, file, rec.data, rec.len, true);
	buf_release(&rec);
	free(comp);
}

#define CL(port) "{\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":" #port "}]}"

/* Generation 1 in format 1: a snapshot at version 4 (cluster/a, cluster/b,
 * listener/l) and two records: 5 (cluster/b changed, cluster/c added),
 * 6 (cluster/a removed). */
static void write_format1(const struct fx *f)
{
	struct buf raw = BUF_INIT;
	put_res(&raw, "cluster/a", 1, CL(80));
	put_res(&raw, "cluster/b", 3, CL(81));
	put_res(&raw, "listener/l", 4, "{\"port\":8080}");
	write_snapshot(f, "lastgood-1.snap", "TTHRSNP1", 4, 3, &raw);
	buf_reset(&raw);
	spit(f, "lastgood-1.journal", "", 0, false);
	put_u64(&raw, 5);
	put_u32(&raw, 2);
	put_u32(&raw, 0);
	put_res(&raw, "cluster/b", 5, CL(82));
	put_res(&raw, "cluster/c", 5, CL(83));
	append_record(f, "lastgood-1.journal", "TJR1", &raw);
	buf_reset(&raw);
	put_u64(&raw, 6);
	put_u32(&raw, 0);
	put_u32(&raw, 1);
	put_str(&raw, "cluster/a");
	append_record(f, "lastgood-1.journal", "TJR1", &raw);
	buf_release(&raw);
}

/* A name twice in a record or a snapshot is damage (a CRC does not stop a
 * hand that rewrites the file): the record ends the replay there, the
 * snapshot is unusable; never two resources in one slot (a double free
 * before any signature is checked). */
static void test_duplicate_names_refused(void **state)
{
	struct fx *f = *state;
	char err[512];
	struct buf raw = BUF_INIT;
	put_res(&raw, "cluster/a", 1, CL(80));
	write_snapshot(f, "lastgood-1.snap", "TTHRSNP1", 1, 1, &raw);
	buf_reset(&raw);
	spit(f, "lastgood-1.journal", "", 0, false);
	/* a record that upserts cluster/b twice */
	put_u64(&raw, 2);
	put_u32(&raw, 2);
	put_u32(&raw, 0);
	put_res(&raw, "cluster/b", 2, CL(81));
	put_res(&raw, "cluster/b", 2, CL(82));
	append_record(f, "lastgood-1.journal", "TJR1", &raw);
	buf_reset(&raw);
	/* and one that upserts and removes cluster/a */
	put_u64(&raw, 3);
	put_u32(&raw, 1);
	put_u32(&raw, 1);
	put_res(&raw, "cluster/a", 3, CL(83));
	put_str(&raw, "cluster/a");
	append_record(f, "lastgood-1.journal", "TJR1", &raw);
	log_set_level(LOG_LVL_ERROR + 1);
	assert_int_equal(lastgood_load(f->lg, &f->s, err, sizeof(err)), 1);
	log_set_level(LOG_LVL_WARN);
	/* the replay stopped before the first bad record */
	assert_int_equal(f->s.version, 1);
	assert_int_equal(f->s.count, 1);
	assert_string_equal(body_of(&f->s, "cluster/a"), CL(80));

	/* a snapshot naming one resource twice: unusable */
	buf_reset(&raw);
	put_res(&raw, "cluster/x", 1, CL(80));
	put_res(&raw, "cluster/x", 1, CL(81));
	write_snapshot(f, "lastgood-2.snap", "TTHRSNP1", 1, 2, &raw);
	spit(f, "lastgood-2.journal", "", 0, false);
	buf_release(&raw);
	struct state got;
	char *st = NULL;
	log_set_level(LOG_LVL_ERROR + 1);
	int rc = reload(f, NULL, &got, &st, NULL, err, sizeof(err));
	log_set_level(LOG_LVL_WARN);
	assert_int_equal(rc, 1);   /* generation 1 again */
	assert_null(state_get(&got, "cluster/x"));
	free(st);
	state_release(&got);
}

static void expect_format1_state(const struct state *s)
{
	assert_int_equal(s->version, 6);
	assert_int_equal(s->count, 3);
	assert_null(state_get(s, "cluster/a"));
	assert_string_equal(body_of(s, "cluster/b"), CL(82));
	assert_int_equal(state_get(s, "cluster/b")->version, 5);
	assert_string_equal(body_of(s, "cluster/c"), CL(83));
	assert_string_equal(body_of(s, "listener/l"), "{\"port\":8080}");
	assert_int_equal(state_get(s, "listener/l")->version, 4);
}

static void test_format1_loads(void **state)
{
	struct fx *f = *state;
	char err[512];
	write_format1(f);
	/* no verifier */
	struct state got;
	char *st = NULL;
	struct lastgood_info info;
	assert_int_equal(reload(f, NULL, &got, &st, &info, err, sizeof(err)), 1);
	expect_format1_state(&got);
	assert_null(st);
	assert_int_equal(info.generation, 1);
	assert_int_equal(info.journal_records, 2);
	state_release(&got);
	/* a verifier sees a generation with no statement */
	struct judge j = { .trust = &f->trust, .accept_unsigned = true };
	assert_int_equal(reload(f, &j, &got, &st, NULL, err, sizeof(err)), 1);
	assert_int_equal(j.calls, 1);
	assert_int_equal(j.nulls, 1);
	assert_null(st);
	state_release(&got);
	/* and may refuse it: nothing is left */
	j = (struct judge){ .trust = &f->trust };
	log_set_level(LOG_LVL_ERROR + 1);
	int rc = reload(f, &j, &got, &st, NULL, err, sizeof(err));
	log_set_level(LOG_LVL_WARN);
	assert_int_equal(rc, -1);
	assert_non_null(strstr(err, "no statement"));
	state_release(&got);
}

/* A format 2 record appended to a format 1 journal, then a format 2
 * generation over a format 1 fallback. */
static void test_format1_then_format2(void **state)
{
	struct fx *f = *state;
	char err[512];
	write_format1(f);
	assert_int_equal(lastgood_load(f->lg, &f->s, err, sizeof(err)), 1);
	expect_format1_state(&f->s);
	assert_null(lastgood_statement(f->lg));
	const char *s7 = save_push(f, 7, 6, false, "cluster/d", 84, NULL, &f->key);
	struct lastgood_info info;
	lastgood_info(f->lg, &info);
	assert_int_equal(info.generation, 1);
	assert_int_equal(info.journal_records, 3);

	/* the mixed journal replays whole; its last record's statement counts
	 * and verifies against the state */
	struct judge j = { .trust = &f->trust };
	struct state got;
	char *st = NULL;
	assert_int_equal(reload(f, &j, &got, &st, &info, err, sizeof(err)), 1);
	assert_int_equal(got.version, 7);
	assert_int_equal(got.count, 4);
	assert_string_equal(st, s7);
	assert_int_equal(info.journal_records, 3);
	assert_int_equal(j.nulls, 0);
	free(st);
	state_release(&got);

	/* a format 2 generation on top; refusing it falls back to the format 1
	 * generation (and its mixed journal) */
	assert_int_equal(lastgood_compact(f->lg, &f->s, err, sizeof(err)), 0);
	const char *s8 = save_push(f, 8, 7, false, "cluster/e", 85, NULL, &f->key);
	j = (struct judge){ .trust = &f->trust };
	assert_int_equal(reload(f, &j, &got, &st, &info, err, sizeof(err)), 1);
	assert_int_equal(info.generation, 2);
	assert_int_equal(got.version, 8);
	assert_string_equal(st, s8);
	free(st);
	state_release(&got);
	j = (struct judge){ .trust = &f->trust, .refuse_version = 8 };
	log_set_level(LOG_LVL_ERROR + 1);
	int rc = reload(f, &j, &got, &st, &info, err, sizeof(err));
	log_set_level(LOG_LVL_WARN);
	assert_int_equal(rc, 1);
	assert_int_equal(info.generation, 1);
	assert_int_equal(got.version, 7);
	assert_string_equal(st, s7);
	free(st);
	state_release(&got);
}

/* A format 1 snapshot whose trailing bytes look like a statement: format 1
 * has none, so they are not read as one. */
static void test_format1_has_no_statement(void **state)
{
	struct fx *f = *state;
	char err[512];
	struct buf raw = BUF_INIT;
	put_res(&raw, "cluster/a", 1, CL(80));
	put_str(&raw, "not-a-statement");
	write_snapshot(f, "lastgood-1.snap", "TTHRSNP1", 1, 1, &raw);
	buf_release(&raw);
	struct judge j = { .trust = &f->trust, .accept_unsigned = true };
	struct state got;
	char *st = NULL;
	assert_int_equal(reload(f, &j, &got, &st, NULL, err, sizeof(err)), 1);
	assert_null(st);
	assert_int_equal(j.nulls, 1);
	assert_int_equal(got.count, 1);
	state_release(&got);

	/* the same bytes as format 2: the statement is read */
	raw = (struct buf)BUF_INIT;
	put_res(&raw, "cluster/a", 1, CL(80));
	put_str(&raw, "not-a-statement");
	write_snapshot(f, "lastgood-1.snap", "TTHRSNP2", 1, 1, &raw);
	buf_release(&raw);
	j = (struct judge){ .trust = &f->trust };
	log_set_level(LOG_LVL_ERROR + 1);
	int rc = reload(f, &j, &got, &st, NULL, err, sizeof(err));
	log_set_level(LOG_LVL_WARN);
	assert_int_equal(rc, -1);      /* not a token: refused by the verifier */
	assert_null(st);
	assert_int_equal(j.calls, 1);
	assert_int_equal(j.nulls, 0);
	state_release(&got);
	assert_int_equal(reload(f, NULL, &got, &st, NULL, err, sizeof(err)), 1);
	assert_string_equal(st, "not-a-statement");
	free(st);
	state_release(&got);
}

int main(void)
{
	if (sodium_init() < 0)
		return 1;
	log_set_level(LOG_LVL_WARN);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_statement_kept_across_saves, setup, teardown),
		cmocka_unit_test_setup_teardown(test_statement_in_generation_from_candidate, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused_newest_falls_back, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unverifiable_generation_falls_back, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refuse_all, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refuse_all_names_newest_reason, setup, teardown),
		cmocka_unit_test_setup_teardown(test_format1_loads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_format1_then_format2, setup, teardown),
		cmocka_unit_test_setup_teardown(test_format1_has_no_statement, setup, teardown),
		cmocka_unit_test_setup_teardown(test_duplicate_names_refused, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
