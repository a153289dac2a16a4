/* test_statement.c: unit tests of common/keys.c and common/statement.c:
 * key files (keygen, loading a secret with its permission and consistency
 * checks), trust files (comments, several keys, every refusal), and the
 * signed statement token (sign / verify round trip, unknown keys, a change
 * of any byte, malformed and oversized tokens, payloads signed by hand
 * that break the format, statement_peek). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "keys.h"
#include "lthash.h"
#include "statement.h"
#include "tmpdir.h"

#define B64URL sodium_base64_VARIANT_URLSAFE_NO_PADDING
#define DOMAIN "tether-statement-v1\n"

/* Two key pairs made once by keys_generate in a temporary directory. */
static struct {
	char dir[64];
	char path_a[128], path_b[128];
	struct signing_key a, b;
	struct trust ta, tb, tab;     /* a only, b only, both */
} K;

/* ---- helpers ------------------------------------------------------------------ */

static char *slurp(const char *path)
{
	FILE *fp = fopen(path, "rb");
	if (!fp)
		fail_msg("cannot open %s: %s", path, strerror(errno));
	struct buf b = BUF_INIT;
	char chunk[4096];
	size_t n;
	while ((n = fread(chunk, 1, sizeof(chunk), fp)) > 0)
		buf_append(&b, chunk, n);
	fclose(fp);
	buf_puts(&b, "");
	return buf_detach(&b, NULL);
}

static void spit(const char *path, const char *text, mode_t mode)
{
	unlink(path);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, mode);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

static char *in_dir(const char *name)
{
	static char p[192];
	snprintf(p, sizeof(p), "%s/%s", K.dir, name);
	return p;
}

/* The .pub line of a key (as keys_generate writes it). */
static char *pub_line(const unsigned char pk[32], const char *comment)
{
	char b64[sodium_base64_ENCODED_LEN(32, sodium_base64_VARIANT_ORIGINAL)];
	sodium_bin2base64(b64, sizeof(b64), pk, 32, sodium_base64_VARIANT_ORIGINAL);
	struct buf b = BUF_INIT;
	buf_printf(&b, "tether-ed25519 %s%s%s\n", b64, comment ? " " : "", comment ? comment : "");
	return buf_detach(&b, NULL);
}

static int parse_trust(const char *text, struct trust *t, char *err, size_t errlen)
{
	err[0] = '\0';
	return keys_parse_trust(text, strlen(text), "trust", t, err, errlen);
}

static void must_trust(const char *text, struct trust *t)
{
	char err[256];
	if (parse_trust(text, t, err, sizeof(err)) < 0)
		fail_msg("trust refused: %s", err);
}

static void fill(struct statement *st, uint64_t version, const char *sub)
{
	memset(st, 0, sizeof(*st));
	st->version = version;
	st->sub = (char *)sub;
	for (int i = 0; i < LTHASH_DIGEST_BYTES; i++)
		st->digest[i] = (unsigned char)(0xa0 + i);
	st->issued = 1796036900;
	st->expires = 1796040500;
}

/* A token of payload signed by k: with the domain prefix (as the plane
 * signs) or without it. */
static char *craft(const char *payload, size_t plen, const struct signing_key *k, bool domain)
{
	struct buf m = BUF_INIT;
	if (domain)
		buf_puts(&m, DOMAIN);
	buf_append(&m, payload, plen);
	unsigned char sig[crypto_sign_BYTES];
	crypto_sign_detached(sig, NULL, (const unsigned char *)m.data, m.len, k->sk);
	buf_release(&m);
	size_t pl = sodium_base64_ENCODED_LEN(plen, B64URL), sl = sodium_base64_ENCODED_LEN(64, B64URL);
	char *p64 = malloc(pl), s64[sodium_base64_ENCODED_LEN(64, B64URL)];
	assert_non_null(p64);
	sodium_bin2base64(p64, pl, (const unsigned char *)payload, plen, B64URL);
	sodium_bin2base64(s64, sl, sig, 64, B64URL);
	struct buf t = BUF_INIT;
	buf_printf(&t, "%s.%s", p64, s64);
	free(p64);
	return buf_detach(&t, NULL);
}

static char *craft_s(const char *payload, const struct signing_key *k)
{
	return craft(payload, strlen(payload), k, true);
}

/* A version 1 payload with the fields of fill(), for kid. */
static char *payload_fmt(const char *kid, const char *fmt_tail)
{
	struct buf b = BUF_INIT;
	buf_printf(&b, "{\"digest\":\"a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf\","
		       "\"expires\":1796040500,\"issued\":1796036900,\"kid\":\"%s\"%s}", kid, fmt_tail);
	return buf_detach(&b, NULL);
}

static int verify(const char *token, size_t len, const struct trust *t, struct statement *st, char *err,
		  size_t errlen)
{
	err[0] = '\0';
	memset(st, 0x5a, sizeof(*st));
	st->sub = NULL;
	int rc = statement_verify(token, len, t, st, err, errlen);
	if (rc != 0) {
		/* a refusal says why, and leaves nothing to release */
		assert_true(err[0] != '\0');
		assert_null(st->sub);
	}
	return rc;
}

static int verify_s(const char *token, const struct trust *t)
{
	struct statement st;
	char err[256];
	int rc = verify(token, strlen(token), t, &st, err, sizeof(err));
	statement_release(&st);
	return rc;
}

/* Decodes the payload part of a token (base64url) into a string. */
static char *payload_of(const char *token)
{
	const char *dot = strchr(token, '.');
	assert_non_null(dot);
	size_t cap = (size_t)(dot - token), got = 0;
	char *out = calloc(1, cap + 1);
	assert_non_null(out);
	assert_int_equal(sodium_base642bin((unsigned char *)out, cap, token, (size_t)(dot - token), NULL, &got,
					   NULL, B64URL), 0);
	out[got] = '\0';
	return out;
}

/* ---- fixture -------------------------------------------------------------------- */

static int group_setup(void **state)
{
	(void)state;
	char err[256];
	if (sodium_init() < 0 || test_tmpdir_make(K.dir, sizeof(K.dir), "statement") < 0)
		return -1;
	snprintf(K.path_a, sizeof(K.path_a), "%s/a.key", K.dir);
	snprintf(K.path_b, sizeof(K.path_b), "%s/b.key", K.dir);
	if (keys_generate(K.path_a, err, sizeof(err)) < 0 || keys_generate(K.path_b, err, sizeof(err)) < 0 ||
	    keys_load_secret(K.path_a, &K.a, err, sizeof(err)) < 0 ||
	    keys_load_secret(K.path_b, &K.b, err, sizeof(err)) < 0) {
		fprintf(stderr, "keys: %s\n", err);
		return -1;
	}
	char pa[160], pb[160];
	snprintf(pa, sizeof(pa), "%s.pub", K.path_a);
	snprintf(pb, sizeof(pb), "%s.pub", K.path_b);
	if (keys_load_trust(pa, &K.ta, err, sizeof(err)) < 0 || keys_load_trust(pb, &K.tb, err, sizeof(err)) < 0) {
		fprintf(stderr, "trust: %s\n", err);
		return -1;
	}
	K.tab = K.ta;
	K.tab.key[K.tab.n++] = K.tb.key[0];
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	keys_forget(&K.a);
	keys_forget(&K.b);
	test_tmpdir_remove(K.dir);
	return 0;
}

/* ---- keys ------------------------------------------------------------------------ */

static void test_keygen_files(void **state)
{
	(void)state;
	struct stat st;
	assert_int_equal(stat(K.path_a, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	char pub[160];
	snprintf(pub, sizeof(pub), "%s.pub", K.path_a);
	assert_int_equal(stat(pub, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0644);

	/* the secret file: the tag and 64 bytes of base64 */
	char *text = slurp(K.path_a);
	assert_true(strncmp(text, "tether-ed25519-secret ", 22) == 0);
	unsigned char sk[64];
	size_t got = 0;
	const char *end = NULL;
	assert_int_equal(sodium_base642bin(sk, sizeof(sk), text + 22, strcspn(text + 22, "\n"), NULL, &got, &end,
					   sodium_base64_VARIANT_ORIGINAL), 0);
	assert_int_equal(got, 64);
	assert_memory_equal(sk, K.a.sk, 64);
	sodium_memzero(sk, sizeof(sk));
	sodium_memzero(text, strlen(text));
	free(text);

	/* the public file: the tag, the key, its id */
	text = slurp(pub);
	char *want = pub_line(K.a.pk, K.a.kid);
	assert_string_equal(text, want);
	free(want);
	free(text);

	/* the loaded key: its public half and id */
	unsigned char pk[32], skx[64];
	crypto_sign_seed_keypair(pk, skx, K.a.sk);
	assert_memory_equal(pk, K.a.pk, 32);
	char kid[KEY_ID_LEN + 1];
	keys_id(K.a.pk, kid);
	assert_string_equal(kid, K.a.kid);
	assert_int_equal(strlen(kid), KEY_ID_LEN);
	assert_int_equal(strspn(kid, "0123456789abcdef"), KEY_ID_LEN);
	/* the id as docs/protocol.md defines it */
	unsigned char h[32];
	crypto_generichash_state hs;
	crypto_generichash_init(&hs, NULL, 0, 32);
	crypto_generichash_update(&hs, (const unsigned char *)"tether-key-id", 13);
	crypto_generichash_update(&hs, K.a.pk, 32);
	crypto_generichash_final(&hs, h, 32);
	char hex[17];
	sodium_bin2hex(hex, sizeof(hex), h, 8);
	assert_string_equal(hex, K.a.kid);
	/* two keys, two ids */
	assert_string_not_equal(K.a.kid, K.b.kid);
	assert_memory_not_equal(K.a.pk, K.b.pk, 32);
	/* the trust loaded from the .pub */
	assert_int_equal(K.ta.n, 1);
	assert_memory_equal(K.ta.key[0].pk, K.a.pk, 32);
	assert_string_equal(K.ta.key[0].kid, K.a.kid);
}

static void test_keygen_refuses_existing(void **state)
{
	(void)state;
	char err[256] = "";
	/* the secret file exists */
	assert_int_equal(keys_generate(K.path_a, err, sizeof(err)), -1);
	assert_non_null(strstr(err, K.path_a));
	/* nothing was overwritten */
	struct signing_key again;
	assert_int_equal(keys_load_secret(K.path_a, &again, err, sizeof(err)), 0);
	assert_memory_equal(again.sk, K.a.sk, 64);
	keys_forget(&again);

	/* only the .pub exists: refused too, and no secret is left behind */
	char *p = in_dir("lonely.key.pub");
	spit(p, "x\n", 0644);
	err[0] = '\0';
	assert_int_equal(keys_generate(in_dir("lonely.key"), err, sizeof(err)), -1);
	assert_non_null(strstr(err, "exists"));
	assert_int_equal(access(in_dir("lonely.key"), F_OK), -1);
	char *text = slurp(in_dir("lonely.key.pub"));
	assert_string_equal(text, "x\n");
	free(text);

	/* a directory that does not exist */
	err[0] = '\0';
	assert_int_equal(keys_generate(in_dir("no/such/dir.key"), err, sizeof(err)), -1);
	assert_true(err[0] != '\0');
}

static void test_load_secret_refusals(void **state)
{
	(void)state;
	char err[512];
	struct signing_key k;
	char *orig = slurp(K.path_a);
	char p[192];
	snprintf(p, sizeof(p), "%s", in_dir("copy.key"));

	/* the same text, 0600: loads */
	spit(p, orig, 0600);
	assert_int_equal(keys_load_secret(p, &k, err, sizeof(err)), 0);
	assert_memory_equal(k.sk, K.a.sk, 64);
	assert_string_equal(k.kid, K.a.kid);
	keys_forget(&k);

	/* readable by others, or by the group: refused, naming the mode, never
	 * the key */
	static const mode_t modes[] = { 0644, 0640, 0604, 0660, 0601 };
	char b64[100];
	snprintf(b64, sizeof(b64), "%.40s", orig + 22);
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		spit(p, orig, modes[i]);
		err[0] = '\0';
		assert_int_equal(keys_load_secret(p, &k, err, sizeof(err)), -1);
		char mode[16];
		snprintf(mode, sizeof(mode), "%04o", (unsigned)modes[i]);
		assert_non_null(strstr(err, mode));
		assert_null(strstr(err, b64));
		/* nothing of the key is left in k */
		unsigned char zero[64] = { 0 };
		assert_memory_equal(k.sk, zero, 64);
	}
	/* 0400 is fine */
	spit(p, orig, 0400);
	assert_int_equal(keys_load_secret(p, &k, err, sizeof(err)), 0);
	keys_forget(&k);

	/* damaged: one base64 character of the public half changed, or of the
	 * seed; the public half no longer matches */
	size_t b = 22, blen = strcspn(orig + b, "\n");
	assert_int_equal(blen, 88);
	static const size_t where[] = { 0, 10, 42, 50, 80 };
	for (size_t i = 0; i < sizeof(where) / sizeof(where[0]); i++) {
		char *bad = strdup(orig);
		assert_non_null(bad);
		char *c = bad + b + where[i];
		*c = *c == 'A' ? 'B' : 'A';
		spit(p, bad, 0600);
		err[0] = '\0';
		assert_int_equal(keys_load_secret(p, &k, err, sizeof(err)), -1);
		assert_non_null(strstr(err, "damaged"));
		assert_null(strstr(err, b64));
		free(bad);
	}

	/* not a key at all, cut short, too long, the .pub handed in, empty */
	char *pub = slurp(in_dir("a.key.pub"));
	struct buf longer = BUF_INIT;
	buf_printf(&longer, "%.*sAAAA\n", (int)(b + blen), orig);
	struct buf cut = BUF_INIT;
	buf_printf(&cut, "%.*s\n", (int)(b + blen - 4), orig);
	struct buf notag = BUF_INIT;
	buf_printf(&notag, "%s\n", orig + b);
	const char *const texts[] = { "", "hello\n", "tether-ed25519-secret\n", "tether-ed25519-secret \n",
				      "tether-ed25519-secretX AAAA\n", pub, cut.data, longer.data, notag.data,
				      "tether-ed25519-secret !!!!\n" };
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		spit(p, texts[i], 0600);
		err[0] = '\0';
		assert_int_equal(keys_load_secret(p, &k, err, sizeof(err)), -1);
		assert_true(err[0] != '\0');
	}
	buf_release(&longer);
	buf_release(&cut);
	buf_release(&notag);
	free(pub);

	/* surrounding blank space is fine (an editor's newline) */
	struct buf spaced = BUF_INIT;
	buf_printf(&spaced, "\n  %.*s  \n\n", (int)(b + blen), orig);
	spit(p, spaced.data, 0600);
	assert_int_equal(keys_load_secret(p, &k, err, sizeof(err)), 0);
	assert_memory_equal(k.pk, K.a.pk, 32);
	keys_forget(&k);
	buf_release(&spaced);

	/* missing */
	unlink(p);
	err[0] = '\0';
	assert_int_equal(keys_load_secret(p, &k, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "copy.key"));
	sodium_memzero(orig, strlen(orig));
	free(orig);
}

/* ---- trust files ------------------------------------------------------------------ */

static void test_trust_parse(void **state)
{
	(void)state;
	struct trust t;
	char *la = pub_line(K.a.pk, K.a.kid), *lb = pub_line(K.b.pk, "ops@example rotated 2026");
	char *bare = pub_line(K.b.pk, NULL);

	/* comments, blank lines, leading blanks, CRLF, a comment after the key */
	struct buf b = BUF_INIT;
	buf_printf(&b, "# trusted keys\n\n   \n\t%s# next one\r\n", la);
	buf_append(&b, lb, strlen(lb) - 1);
	buf_puts(&b, "\r\n");
	must_trust(b.data, &t);
	assert_int_equal(t.n, 2);
	assert_memory_equal(t.key[0].pk, K.a.pk, 32);
	assert_string_equal(t.key[0].kid, K.a.kid);
	assert_memory_equal(t.key[1].pk, K.b.pk, 32);
	assert_string_equal(t.key[1].kid, K.b.kid);
	assert_ptr_equal(keys_find(&t, K.b.kid), &t.key[1]);
	assert_ptr_equal(keys_find(&t, K.a.kid), &t.key[0]);
	assert_null(keys_find(&t, "0000000000000000"));
	assert_null(keys_find(&t, ""));
	buf_release(&b);

	/* the last line without its newline; a key with no comment */
	size_t n = strlen(bare);
	bare[n - 1] = '\0';
	must_trust(bare, &t);
	assert_int_equal(t.n, 1);
	assert_string_equal(t.key[0].kid, K.b.kid);
	bare[n - 1] = '\n';

	/* cat old.pub new.pub > trust */
	buf_printf(&b, "%s%s", la, lb);
	must_trust(b.data, &t);
	assert_int_equal(t.n, 2);
	buf_release(&b);
	free(la);
	free(lb);
	free(bare);
}

static void expect_trust_error(const char *text, size_t len, const char *needle)
{
	struct trust t;
	char err[512] = "";
	assert_int_equal(keys_parse_trust(text, len, "trust", &t, err, sizeof(err)), -1);
	if (!strstr(err, needle))
		fail_msg("error '%s' does not say '%s'", err, needle);
}

static void expect_trust_text(const char *text, const char *needle)
{
	expect_trust_error(text, strlen(text), needle);
}

static void test_trust_refusals(void **state)
{
	(void)state;
	char *la = pub_line(K.a.pk, NULL), *lb = pub_line(K.b.pk, "x");
	struct buf b = BUF_INIT;

	/* the same key twice, even with another comment: line 3 says so */
	buf_printf(&b, "%s# dup\n%s", la, la);
	expect_trust_error(b.data, b.len, "trust:3: key");
	expect_trust_error(b.data, b.len, "listed twice");
	buf_reset(&b);

	/* bad base64, or base64 of another length */
	expect_trust_text("tether-ed25519 !!notbase64!!\n", "trust:1: the key is not 32 bytes");
	buf_printf(&b, "%stether-ed25519 AAAA\n", lb);
	expect_trust_error(b.data, b.len, "trust:2: the key is not 32 bytes");
	buf_reset(&b);
	unsigned char k33[33] = { 1 };
	char b64[64];
	sodium_bin2base64(b64, sizeof(b64), k33, 33, sodium_base64_VARIANT_ORIGINAL);
	buf_printf(&b, "tether-ed25519 %s\n", b64);
	expect_trust_error(b.data, b.len, "not 32 bytes");
	buf_reset(&b);
	/* url-safe alphabet or missing padding: not the .pub form */
	sodium_bin2base64(b64, sizeof(b64), K.a.pk, 32, sodium_base64_VARIANT_ORIGINAL_NO_PADDING);
	buf_printf(&b, "tether-ed25519 %s\n", b64);
	expect_trust_error(b.data, b.len, "not 32 bytes");
	buf_reset(&b);

	/* lines that are not keys */
	expect_trust_text("hello\n", "trust:1: not a public key");
	expect_trust_text("tether-ed25519-secret AAAA\n", "not a public key");
	expect_trust_text("tether-ed25519\n", "not a public key");
	expect_trust_text("TETHER-ED25519 AAAA\n", "not a public key");
	buf_printf(&b, "%s\n\n ssh-ed25519 AAAAC3Nz user@host\n", la);
	expect_trust_error(b.data, b.len, "trust:4: not a public key");
	buf_reset(&b);

	/* no key at all */
	expect_trust_text("", "no public key");
	expect_trust_text("# nothing\n\n", "no public key");

	/* a NUL byte inside a line */
	buf_append(&b, la, strlen(la) - 1);
	buf_append(&b, " comment\0more\n", 14);
	expect_trust_error(b.data, b.len, "NUL");
	buf_reset(&b);

	/* TRUST_MAX keys are fine, one more is not */
	unsigned char pk[32], sk[64];
	for (int i = 0; i < TRUST_MAX; i++) {
		crypto_sign_keypair(pk, sk);
		char *l = pub_line(pk, NULL);
		buf_puts(&b, l);
		free(l);
	}
	struct trust t;
	must_trust(b.data, &t);
	assert_int_equal(t.n, TRUST_MAX);
	crypto_sign_keypair(pk, sk);
	char *l = pub_line(pk, NULL);
	buf_puts(&b, l);
	free(l);
	char want[64];
	snprintf(want, sizeof(want), "trust:%d: more than %d", TRUST_MAX + 1, TRUST_MAX);
	expect_trust_error(b.data, b.len, want);
	buf_release(&b);

	/* a trust file that does not exist */
	char err[256] = "";
	assert_int_equal(keys_load_trust(in_dir("missing.pub"), &t, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "missing.pub"));
	/* and one that does, with the path in messages */
	spit(in_dir("bad.trust"), "# x\nnope\n", 0644);
	assert_int_equal(keys_load_trust(in_dir("bad.trust"), &t, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "bad.trust:2: not a public key"));
	free(la);
	free(lb);
}

/* ---- statements ------------------------------------------------------------------- */

static void test_sign_verify_round_trip(void **state)
{
	(void)state;
	static const char *const subs[] = { "", "cluster/,route/web-", "listener/", "a\"b\\c\n\x01" };
	static const uint64_t versions[] = { 0, 1, 8, 9007199254740991ull };
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
		struct statement st, got;
		fill(&st, versions[i], subs[i]);
		char *tok = statement_sign(&st, &K.a);
		assert_non_null(tok);
		/* sign sets the key id */
		assert_string_equal(st.kid, K.a.kid);
		/* one token: base64url, one dot, no padding, usable in a header */
		assert_int_equal(strspn(tok, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_."),
				 strlen(tok));
		assert_non_null(strchr(tok, '.'));
		assert_null(strchr(strchr(tok, '.') + 1, '.'));
		char err[256];
		assert_int_equal(verify(tok, strlen(tok), &K.ta, &got, err, sizeof(err)), 0);
		assert_int_equal(got.version, versions[i]);
		assert_string_equal(got.sub, subs[i]);
		assert_memory_equal(got.digest, st.digest, LTHASH_DIGEST_BYTES);
		assert_int_equal(got.issued, st.issued);
		assert_int_equal(got.expires, st.expires);
		assert_string_equal(got.kid, K.a.kid);
		statement_release(&got);
		assert_null(got.sub);
		/* with both keys trusted too */
		assert_int_equal(verify_s(tok, &K.tab), 0);
		/* signing again gives the same token (Ed25519 is deterministic) */
		char *again = statement_sign(&st, &K.a);
		assert_string_equal(again, tok);
		free(again);
		free(tok);
	}

	/* a NULL sub is everything: "" */
	struct statement st, got;
	fill(&st, 5, NULL);
	char *tok = statement_sign(&st, &K.b);
	char err[256];
	assert_int_equal(verify(tok, strlen(tok), &K.tab, &got, err, sizeof(err)), 0);
	assert_string_equal(got.sub, "");
	assert_string_equal(got.kid, K.b.kid);
	statement_release(&got);
	free(tok);
}

static void test_payload_is_documented_form(void **state)
{
	(void)state;
	struct statement st;
	fill(&st, 8, "cluster/,route/");
	char *tok = statement_sign(&st, &K.a);
	char *payload = payload_of(tok);
	char *want = payload_fmt(K.a.kid, ",\"sub\":\"cluster/,route/\",\"v\":1,\"version\":8");
	assert_string_equal(payload, want);
	/* the signature is Ed25519 over the domain and the payload bytes */
	const char *dot = strchr(tok, '.');
	unsigned char sig[64];
	size_t got = 0;
	assert_int_equal(sodium_base642bin(sig, sizeof(sig), dot + 1, strlen(dot + 1), NULL, &got, NULL, B64URL),
			 0);
	assert_int_equal(got, 64);
	struct buf m = BUF_INIT;
	buf_printf(&m, "%s%s", DOMAIN, payload);
	assert_int_equal(crypto_sign_verify_detached(sig, (const unsigned char *)m.data, m.len, K.a.pk), 0);
	buf_release(&m);
	/* and a token crafted that way verifies */
	char *crafted = craft_s(want, &K.a);
	assert_string_equal(crafted, tok);
	free(crafted);
	free(want);
	free(payload);
	free(tok);
}

/* "overridden" (guards): signed between kid and sub when set, absent when
 * 0 (the old statement's bytes); read back; refused out of 1..version. */
static void test_overridden(void **state)
{
	(void)state;
	struct statement st, got;
	char err[256];
	fill(&st, 8, "cluster/");
	st.overridden = 7;
	char *tok = statement_sign(&st, &K.a);
	char *payload = payload_of(tok);
	char *want = payload_fmt(K.a.kid, ",\"overridden\":7,\"sub\":\"cluster/\",\"v\":1,\"version\":8");
	assert_string_equal(payload, want);
	assert_int_equal(verify(tok, strlen(tok), &K.ta, &got, err, sizeof(err)), 0);
	assert_int_equal(got.overridden, 7);
	statement_release(&got);
	free(want);
	free(payload);
	free(tok);
	/* none: the field is absent and reads back 0 */
	fill(&st, 8, "");
	tok = statement_sign(&st, &K.a);
	payload = payload_of(tok);
	assert_null(strstr(payload, "overridden"));
	assert_int_equal(verify(tok, strlen(tok), &K.ta, &got, err, sizeof(err)), 0);
	assert_int_equal(got.overridden, 0);
	statement_release(&got);
	free(payload);
	free(tok);
	/* the version itself may be the overridden one */
	want = payload_fmt(K.a.kid, ",\"overridden\":8,\"sub\":\"\",\"v\":1,\"version\":8");
	tok = craft_s(want, &K.a);
	assert_int_equal(verify(tok, strlen(tok), &K.ta, &got, err, sizeof(err)), 0);
	assert_int_equal(got.overridden, 8);
	statement_release(&got);
	free(tok);
	free(want);
	/* refused: past the version, 0, negative, not an integer */
	static const char *const bad[] = { "9", "0", "-1", "\"7\"", "7.5", "null" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char tail[128];
		snprintf(tail, sizeof(tail), ",\"overridden\":%s,\"sub\":\"\",\"v\":1,\"version\":8", bad[i]);
		want = payload_fmt(K.a.kid, tail);
		tok = craft_s(want, &K.a);
		assert_int_equal(verify(tok, strlen(tok), &K.ta, &got, err, sizeof(err)), STATEMENT_MALFORMED);
		assert_non_null(strstr(err, "overridden"));
		free(tok);
		free(want);
	}
}

static void test_unknown_key(void **state)
{
	(void)state;
	struct statement st, got;
	fill(&st, 3, "");
	char *tok = statement_sign(&st, &K.a);
	char err[256];
	assert_int_equal(verify(tok, strlen(tok), &K.tb, &got, err, sizeof(err)), STATEMENT_UNKNOWN_KEY);
	assert_non_null(strstr(err, K.a.kid));
	/* peek still reads it (for display) */
	assert_int_equal(statement_peek(tok, strlen(tok), &got), 0);
	assert_string_equal(got.kid, K.a.kid);
	statement_release(&got);
	/* an empty trust knows nothing */
	struct trust none;
	memset(&none, 0, sizeof(none));
	assert_int_equal(verify_s(tok, &none), STATEMENT_UNKNOWN_KEY);
	free(tok);
}

static void test_wrong_key_for_kid(void **state)
{
	(void)state;
	/* b's id, a's signature: both keys trusted, still a bad signature */
	char *p = payload_fmt(K.b.kid, ",\"sub\":\"\",\"v\":1,\"version\":4");
	char *tok = craft_s(p, &K.a);
	assert_int_equal(verify_s(tok, &K.tab), STATEMENT_BAD_SIGNATURE);
	free(tok);
	/* signed without the domain prefix: another message */
	tok = craft(p, strlen(p), &K.b, false);
	assert_int_equal(verify_s(tok, &K.tab), STATEMENT_BAD_SIGNATURE);
	free(tok);
	/* the right one verifies */
	tok = craft_s(p, &K.b);
	assert_int_equal(verify_s(tok, &K.tab), 0);
	free(tok);
	free(p);
}

static bool is_refusal(int rc)
{
	return rc == STATEMENT_MALFORMED || rc == STATEMENT_UNKNOWN_KEY || rc == STATEMENT_BAD_SIGNATURE;
}

static void test_any_changed_byte_fails(void **state)
{
	(void)state;
	struct statement st;
	fill(&st, 77, "cluster/");
	char *tok = statement_sign(&st, &K.a);
	size_t len = strlen(tok);
	char *m = strdup(tok);
	assert_non_null(m);
	static const char alpha[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	/* every character of the token replaced by three others (two of the
	 * alphabet, so it still decodes, and one not) */
	for (size_t i = 0; i < len; i++) {
		const char *at = strchr(alpha, tok[i]);
		size_t k = at ? (size_t)(at - alpha) : 0;
		const char repl[3] = { alpha[(k + 1) % 64], alpha[(k + 33) % 64], '=' };
		for (int r = 0; r < 3; r++) {
			if (repl[r] == tok[i])
				continue;
			m[i] = repl[r];
			int rc = verify_s(m, &K.tab);
			if (!is_refusal(rc))
				fail_msg("token with byte %zu changed to '%c' verifies (rc %d)", i, repl[r], rc);
		}
		m[i] = tok[i];
	}
	assert_int_equal(verify_s(m, &K.tab), 0);
	free(m);

	/* every bit of the decoded payload and of the signature flipped, the
	 * token re-encoded: never verifies */
	char *payload = payload_of(tok);
	size_t plen = strlen(payload);
	const char *dot = strchr(tok, '.');
	unsigned char sig[64];
	size_t got = 0;
	assert_int_equal(sodium_base642bin(sig, sizeof(sig), dot + 1, strlen(dot + 1), NULL, &got, NULL, B64URL),
			 0);
	char p64[1024], s64[128];
	sodium_bin2base64(s64, sizeof(s64), sig, 64, B64URL);
	struct buf t = BUF_INIT;
	int bad_sig = 0, other = 0;
	for (size_t i = 0; i < plen; i++) {
		for (int bit = 0; bit < 8; bit++) {
			payload[i] ^= (char)(1 << bit);
			sodium_bin2base64(p64, sizeof(p64), (const unsigned char *)payload, plen, B64URL);
			buf_reset(&t);
			buf_printf(&t, "%s.%s", p64, s64);
			int rc = verify_s(t.data, &K.tab);
			if (!is_refusal(rc))
				fail_msg("payload byte %zu bit %d flipped verifies (rc %d)", i, bit, rc);
			rc == STATEMENT_BAD_SIGNATURE ? bad_sig++ : other++;
			payload[i] ^= (char)(1 << bit);
		}
	}
	/* both kinds happen: a flip that keeps the payload well formed is
	 * caught by the signature (284 of 1432 bits here), one that breaks
	 * the JSON, a hex field or the key id by the decoder */
	assert_true(bad_sig > 100);
	assert_true(other > 100);
	sodium_bin2base64(p64, sizeof(p64), (const unsigned char *)payload, plen, B64URL);
	for (size_t i = 0; i < 64; i++) {
		for (int bit = 0; bit < 8; bit++) {
			sig[i] ^= (unsigned char)(1 << bit);
			sodium_bin2base64(s64, sizeof(s64), sig, 64, B64URL);
			buf_reset(&t);
			buf_printf(&t, "%s.%s", p64, s64);
			assert_int_equal(verify_s(t.data, &K.tab), STATEMENT_BAD_SIGNATURE);
			sig[i] ^= (unsigned char)(1 << bit);
		}
	}
	buf_release(&t);
	free(payload);
	free(tok);
}

/* A byte outside the base64url alphabet anywhere in a token is refused.
 * libsodium 1.0.18's sodium_base642bin (with no ignore set) takes every
 * byte >= 0x80 as the digit 63 ('_'), so a '_' of a token can be replaced
 * by any of 128 bytes and the token still verifies: the same statement
 * has many spellings (found by fuzz_statement). Nothing is forged -- the
 * decoded bytes are the signed ones -- but a token is not one text, and a
 * header value with such bytes passes. */
static void test_non_alphabet_bytes_refused(void **state)
{
	(void)state;
	/* a fixed key, so the token (and where its '_' are) is the same
	 * every run */
	struct signing_key k;
	crypto_sign_seed_keypair(k.pk, k.sk, (const unsigned char *)"tether test statement fixed key!");
	keys_id(k.pk, k.kid);
	struct trust t = { 0 };
	t.n = 1;
	memcpy(t.key[0].pk, k.pk, 32);
	memcpy(t.key[0].kid, k.kid, sizeof(k.kid));
	struct statement st;
	fill(&st, 123456, "cluster/,route/web-");
	char *tok = statement_sign(&st, &k);
	assert_non_null(strchr(tok, '_'));
	size_t len = strlen(tok);
	char *m = strdup(tok);
	assert_non_null(m);
	int accepted = 0;
	size_t first = 0;
	for (size_t i = 0; i < len; i++) {
		for (int c = 0x80; c < 0x100; c += 0x1f) {
			m[i] = (char)c;
			if (verify_s(m, &t) == 0 && accepted++ == 0)
				first = i;
		}
		m[i] = (char)(tok[i] | 0x80);
		if (verify_s(m, &t) == 0 && accepted++ == 0)
			first = i;
		m[i] = tok[i];
	}
	char was = tok[first];
	free(m);
	free(tok);
	keys_forget(&k);
	if (accepted)
		fail_msg("%d tokens with a byte >= 0x80 verify (the first at byte %zu, a '%c' of the token)",
			 accepted, first, was);
}

static void test_malformed_tokens(void **state)
{
	(void)state;
	struct statement st, got;
	char err[256];
	fill(&st, 12, "route/");
	char *tok = statement_sign(&st, &K.a);
	size_t len = strlen(tok);

	/* every proper prefix */
	for (size_t n = 0; n < len; n++) {
		int rc = verify(tok, n, &K.ta, &got, err, sizeof(err));
		if (rc != STATEMENT_MALFORMED)
			fail_msg("prefix of %zu bytes: %d (%s)", n, rc, err);
		assert_int_equal(statement_peek(tok, n, &got), -1);
	}
	/* len counts, not a NUL: the whole token inside a longer buffer */
	struct buf b = BUF_INIT;
	buf_printf(&b, "%sXYZ", tok);
	assert_int_equal(verify(b.data, len, &K.ta, &got, err, sizeof(err)), 0);
	statement_release(&got);
	assert_int_equal(verify(b.data, len + 1, &K.ta, &got, err, sizeof(err)), STATEMENT_MALFORMED);
	buf_reset(&b);

	/* oversized: refused before anything is decoded */
	buf_puts(&b, tok);
	while (b.len <= STATEMENT_MAX)
		buf_putc(&b, 'A');
	assert_int_equal(verify(b.data, b.len, &K.ta, &got, err, sizeof(err)), STATEMENT_MALFORMED);
	assert_non_null(strstr(err, "longer than"));
	assert_int_equal(statement_peek(b.data, b.len, &got), -1);
	buf_reset(&b);
	/* a big payload that fits STATEMENT_MAX but not the payload buffer */
	struct buf big = BUF_INIT;
	buf_puts(&big, "{\"sub\":\"");
	for (int i = 0; i < 6000; i++)
		buf_putc(&big, 'x');
	buf_puts(&big, "\"}");
	char *bt = craft(big.data, big.len, &K.a, true);
	assert_true(strlen(bt) <= STATEMENT_MAX);
	assert_int_equal(verify(bt, strlen(bt), &K.ta, &got, err, sizeof(err)), STATEMENT_MALFORMED);
	free(bt);
	buf_release(&big);

	const char *dot = strchr(tok, '.');
	size_t plen = (size_t)(dot - tok);
	struct buf t = BUF_INIT;
	const char *garbage[16];
	size_t ng = 0;
	garbage[ng++] = "";
	garbage[ng++] = ".";
	garbage[ng++] = "..";
	garbage[ng++] = "a.b";
	garbage[ng++] = "eyJ9.AAAA";
	garbage[ng++] = "not a token";
	/* three parts */
	buf_printf(&t, "%s.", tok);
	char *three = buf_detach(&t, NULL);
	garbage[ng++] = three;
	buf_printf(&t, "%.*s.%s", (int)plen, tok, tok);
	char *three2 = buf_detach(&t, NULL);
	garbage[ng++] = three2;
	/* one part only */
	buf_printf(&t, "%.*s", (int)plen, tok);
	char *one = buf_detach(&t, NULL);
	garbage[ng++] = one;
	/* padding, the standard alphabet, blanks */
	buf_printf(&t, "%.*s=.%s", (int)plen, tok, dot + 1);
	char *padded = buf_detach(&t, NULL);
	garbage[ng++] = padded;
	buf_printf(&t, "%s=", tok);
	char *padded2 = buf_detach(&t, NULL);
	garbage[ng++] = padded2;
	buf_printf(&t, " %s", tok);
	char *lead = buf_detach(&t, NULL);
	garbage[ng++] = lead;
	buf_printf(&t, "%s\n", tok);
	char *trail = buf_detach(&t, NULL);
	garbage[ng++] = trail;
	/* a signature of 63 bytes and of 65 */
	unsigned char sig[65] = { 0 };
	char s64[128];
	sodium_bin2base64(s64, sizeof(s64), sig, 63, B64URL);
	buf_printf(&t, "%.*s.%s", (int)plen, tok, s64);
	char *short_sig = buf_detach(&t, NULL);
	garbage[ng++] = short_sig;
	sodium_bin2base64(s64, sizeof(s64), sig, 65, B64URL);
	buf_printf(&t, "%.*s.%s", (int)plen, tok, s64);
	char *long_sig = buf_detach(&t, NULL);
	garbage[ng++] = long_sig;
	for (size_t i = 0; i < ng; i++) {
		int rc = verify(garbage[i], strlen(garbage[i]), &K.ta, &got, err, sizeof(err));
		if (rc != STATEMENT_MALFORMED)
			fail_msg("garbage %zu '%s': %d", i, garbage[i], rc);
		assert_int_equal(statement_peek(garbage[i], strlen(garbage[i]), &got), -1);
	}
	/* the standard alphabet where the token has '-' or '_' */
	char *std = strdup(tok);
	assert_non_null(std);
	bool changed = false;
	for (char *c = std; *c; c++) {
		if (*c == '-' || *c == '_') {
			*c = *c == '-' ? '+' : '/';
			changed = true;
		}
	}
	if (changed)
		assert_int_equal(verify_s(std, &K.ta), STATEMENT_MALFORMED);
	free(std);
	/* a NUL byte inside */
	char *nul = strdup(tok);
	assert_non_null(nul);
	nul[plen / 2] = '\0';
	assert_int_equal(verify(nul, len, &K.ta, &got, err, sizeof(err)), STATEMENT_MALFORMED);
	free(nul);
	free(three);
	free(three2);
	free(one);
	free(padded);
	free(padded2);
	free(lead);
	free(trail);
	free(short_sig);
	free(long_sig);
	buf_release(&b);
	free(tok);
}

#define DIGEST_HEX "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf"

/* A payload with the fields of a good one (sorted), except field, whose
 * raw JSON value becomes value (NULL: the field is left out); extra is
 * appended before the closing brace. */
static char *payload_with(const char *field, const char *value, const char *extra)
{
	char kid[KEY_ID_LEN + 3];
	snprintf(kid, sizeof(kid), "\"%s\"", K.a.kid);
	const char *const keys[] = { "digest", "expires", "issued", "kid", "sub", "v", "version" };
	const char *const vals[] = { "\"" DIGEST_HEX "\"", "2", "1", kid, "\"\"", "1", "8" };
	struct buf b = BUF_INIT;
	buf_putc(&b, '{');
	bool first = true;
	for (size_t i = 0; i < 7; i++) {
		const char *v = field && strcmp(field, keys[i]) == 0 ? value : vals[i];
		if (!v)
			continue;
		buf_printf(&b, "%s\"%s\":%s", first ? "" : ",", keys[i], v);
		first = false;
	}
	buf_printf(&b, "%s}", extra ? extra : "");
	return buf_detach(&b, NULL);
}

/* Payloads signed by a trusted key that break the format: all malformed. */
static void test_bad_payloads(void **state)
{
	(void)state;
	const char *kid = K.a.kid;
	char *good = payload_with(NULL, NULL, NULL);
	char *gt = craft_s(good, &K.a);
	assert_int_equal(verify_s(gt, &K.ta), 0);
	free(gt);
	free(good);

	static const char *const overrides[][2] = {
		/* v */
		{ "v", "2" }, { "v", "0" }, { "v", "\"1\"" }, { "v", "1.5" }, { "v", "true" }, { "v", NULL },
		/* each field missing */
		{ "digest", NULL }, { "expires", NULL }, { "issued", NULL }, { "kid", NULL }, { "sub", NULL },
		{ "version", NULL },
		/* types and ranges */
		{ "version", "\"8\"" }, { "version", "-1" }, { "version", "8.5" },
		{ "version", "9007199254740992" }, { "version", "1e300" }, { "issued", "-1" },
		{ "expires", "null" }, { "expires", "[2]" },
		{ "sub", "5" }, { "sub", "null" }, { "sub", "[\"cluster/\"]" },
		/* digest: long, not hex, empty, not a string (upper case and short below) */
		{ "digest", "\"" DIGEST_HEX "00\"" },
		{ "digest", "\"zz\"" }, { "digest", "7" }, { "digest", "\"\"" },
		/* kid: short, long, not hex, not a string */
		{ "kid", "\"0123456789abcde\"" }, { "kid", "\"0123456789abcdef0\"" },
		{ "kid", "\"0123456789abcdeg\"" }, { "kid", "[]" },
	};
	size_t nover = sizeof(overrides) / sizeof(overrides[0]);
	char **bad = calloc(nover + 32, sizeof(char *));
	assert_non_null(bad);
	size_t n = 0;
	for (size_t i = 0; i < nover; i++)
		bad[n++] = payload_with(overrides[i][0], overrides[i][1], NULL);
	/* digest: upper case, one digit short */
	char v[80];
	snprintf(v, sizeof(v), "\"A0%s\"", DIGEST_HEX + 2);
	bad[n++] = payload_with("digest", v, NULL);
	snprintf(v, sizeof(v), "\"%.63s\"", DIGEST_HEX);
	bad[n++] = payload_with("digest", v, NULL);
	/* kid: upper case */
	char upkid[KEY_ID_LEN + 3];
	snprintf(upkid, sizeof(upkid), "\"%s\"", kid);
	bool has_letter = false;
	for (char *c = upkid; *c; c++) {
		if (*c >= 'a' && *c <= 'f') {
			*c = (char)(*c - 32);
			has_letter = true;
		}
	}
	if (has_letter)
		bad[n++] = payload_with("kid", upkid, NULL);
	/* a duplicate key: one parser would take the first, another the last */
	bad[n++] = payload_with(NULL, NULL, ",\"version\":9");
	bad[n++] = payload_with(NULL, NULL, ",\"sub\":\"cluster/\"");
	/* too deep, invalid UTF-8, trailing bytes, not an object, not JSON */
	bad[n++] = payload_with(NULL, NULL, ",\"x\":[[1]]");
	bad[n++] = payload_with("sub", "\"\xc3(\"", NULL);
	char *g = payload_with(NULL, NULL, NULL);
	struct buf b = BUF_INIT;
	buf_printf(&b, "%sx", g);
	bad[n++] = buf_detach(&b, NULL);
	free(g);
	bad[n++] = strdup("[1,2]");
	bad[n++] = strdup("\"x\"");
	bad[n++] = strdup("{");
	bad[n++] = strdup("");
	/* a sub over STATEMENT_SUB_MAX */
	buf_putc(&b, '"');
	for (int i = 0; i <= STATEMENT_SUB_MAX; i++)
		buf_putc(&b, 'c');
	buf_putc(&b, '"');
	bad[n++] = payload_with("sub", b.data, NULL);
	buf_reset(&b);
	assert_true(n <= nover + 32);
	for (size_t i = 0; i < n; i++) {
		assert_non_null(bad[i]);
		char *tok = craft_s(bad[i], &K.a);
		struct statement got;
		char err[256];
		int rc = verify(tok, strlen(tok), &K.ta, &got, err, sizeof(err));
		if (rc != STATEMENT_MALFORMED)
			fail_msg("payload %zu verifies as %d: %.200s", i, rc, bad[i]);
		assert_non_null(strstr(err, "statement"));
		assert_int_equal(statement_peek(tok, strlen(tok), &got), -1);
		free(tok);
		free(bad[i]);
	}
	free(bad);

	/* what is allowed: keys in another order (nothing is re-serialized),
	 * unknown fields, blanks, 1.0 for 1 */
	char *ok[3];
	buf_printf(&b, "{\"version\":8,\"v\":1,\"sub\":\"x/\",\"kid\":\"%s\",\"issued\":1,\"expires\":2,"
		       "\"digest\":\"%s\"}", kid, DIGEST_HEX);
	ok[0] = buf_detach(&b, NULL);
	ok[1] = payload_with("sub", "\"x/\"", ",\"future\":{\"a\":1}");
	buf_printf(&b, "  {\"digest\" : \"%s\", \"expires\":2, \"issued\":1, \"kid\":\"%s\", \"sub\":\"x/\", "
		       "\"v\":1.0, \"version\":8}\n", DIGEST_HEX, kid);
	ok[2] = buf_detach(&b, NULL);
	for (size_t i = 0; i < 3; i++) {
		char *tok = craft_s(ok[i], &K.a);
		struct statement got;
		char err[256];
		int rc = verify(tok, strlen(tok), &K.ta, &got, err, sizeof(err));
		if (rc != 0)
			fail_msg("payload %zu refused: %s", i, err);
		assert_int_equal(got.version, 8);
		assert_string_equal(got.sub, "x/");
		assert_int_equal(got.issued, 1);
		assert_int_equal(got.expires, 2);
		assert_string_equal(got.kid, kid);
		unsigned char d[32];
		assert_int_equal(lthash_digest_parse(DIGEST_HEX, d), 0);
		assert_memory_equal(got.digest, d, 32);
		statement_release(&got);
		free(tok);
		free(ok[i]);
	}
	/* the largest exact integers, a sub of exactly STATEMENT_SUB_MAX */
	buf_putc(&b, '"');
	for (int i = 0; i < STATEMENT_SUB_MAX; i++)
		buf_putc(&b, 'c');
	buf_putc(&b, '"');
	char *sub = buf_detach(&b, NULL);
	buf_printf(&b, "{\"digest\":\"%s\",\"expires\":9007199254740991,\"issued\":9007199254740991,"
		       "\"kid\":\"%s\",\"sub\":%s,\"v\":1,\"version\":9007199254740991}", DIGEST_HEX, kid, sub);
	free(sub);
	char *tok = craft_s(b.data, &K.a);
	struct statement got;
	char err[256];
	assert_int_equal(verify(tok, strlen(tok), &K.ta, &got, err, sizeof(err)), 0);
	assert_int_equal(strlen(got.sub), STATEMENT_SUB_MAX);
	assert_int_equal(got.version, 9007199254740991ull);
	assert_int_equal(got.issued, 9007199254740991ll);
	assert_int_equal(got.expires, 9007199254740991ll);
	statement_release(&got);
	free(tok);
	buf_release(&b);
}

static void test_peek(void **state)
{
	(void)state;
	struct statement st, got;
	fill(&st, 41, "cluster/a,route/");
	char *tok = statement_sign(&st, &K.b);
	memset(&got, 0, sizeof(got));
	assert_int_equal(statement_peek(tok, strlen(tok), &got), 0);
	assert_int_equal(got.version, 41);
	assert_string_equal(got.sub, "cluster/a,route/");
	assert_memory_equal(got.digest, st.digest, 32);
	assert_int_equal(got.issued, st.issued);
	assert_int_equal(got.expires, st.expires);
	assert_string_equal(got.kid, K.b.kid);
	statement_release(&got);

	/* peek does not check the signature: a bad one still reads */
	char *m = strdup(tok);
	assert_non_null(m);
	char *dot = strchr(m, '.');
	dot[5] = dot[5] == 'A' ? 'B' : 'A';
	assert_int_equal(verify_s(m, &K.tb), STATEMENT_BAD_SIGNATURE);
	assert_int_equal(statement_peek(m, strlen(m), &got), 0);
	assert_int_equal(got.version, 41);
	statement_release(&got);
	/* but a malformed token does not */
	assert_int_equal(statement_peek(tok, (size_t)(strchr(tok, '.') - tok), &got), -1);
	assert_null(got.sub);
	assert_int_equal(statement_peek("", 0, &got), -1);
	free(m);
	free(tok);
}

/* What statement_sign writes beyond 2^53 or below 0 does not verify: a
 * signer must keep its numbers in the exact range. Pinned, so a change of
 * either side is seen. */
static void test_sign_range(void **state)
{
	(void)state;
	struct statement st;
	fill(&st, 9007199254740992ull, "");
	char *tok = statement_sign(&st, &K.a);
	assert_int_equal(verify_s(tok, &K.ta), STATEMENT_MALFORMED);
	free(tok);
	fill(&st, 1, "");
	st.issued = -5;
	tok = statement_sign(&st, &K.a);
	assert_int_equal(verify_s(tok, &K.ta), STATEMENT_MALFORMED);
	free(tok);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_keygen_files),
		cmocka_unit_test(test_keygen_refuses_existing),
		cmocka_unit_test(test_load_secret_refusals),
		cmocka_unit_test(test_trust_parse),
		cmocka_unit_test(test_trust_refusals),
		cmocka_unit_test(test_sign_verify_round_trip),
		cmocka_unit_test(test_payload_is_documented_form),
		cmocka_unit_test(test_overridden),
		cmocka_unit_test(test_unknown_key),
		cmocka_unit_test(test_wrong_key_for_kid),
		cmocka_unit_test(test_any_changed_byte_fails),
		cmocka_unit_test(test_malformed_tokens),
		cmocka_unit_test(test_non_alphabet_bytes_refused),
		cmocka_unit_test(test_bad_payloads),
		cmocka_unit_test(test_peek),
		cmocka_unit_test(test_sign_range),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
