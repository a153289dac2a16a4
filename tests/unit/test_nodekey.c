/* test_nodekey.c: unit tests of common/nodekey.c: node key files (made,
 * loaded back, the same key; refused when group or others can read them,
 * damaged or of another kind), their X25519 form against envelopes,
 * recovery key files (secret and public halves, every refusal), and
 * signed registrations: a good one, a bad signature, a changed node, at or
 * key, an endorsed rotation, an endorsement by the wrong key, and
 * malformed texts. Key files: 0600 under umask(0), never read through a
 * symlink, a FIFO or another user's file, and first creation never
 * replaces a key another process made (one left in place, a temp file of
 * another creator, concurrent creators). Node IDs with "\n", "/" or 201
 * bytes are refused in registrations; a peer's keys are shown escaped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "buf.h"
#include "envelope.h"
#include "json.h"
#include "nodekey.h"
#include "tmpdir.h"
#include "util.h"

static char dir[64];

static int group_setup(void **state)
{
	(void)state;
	if (sodium_init() < 0)
		return -1;
	return test_tmpdir_make(dir, sizeof(dir), "nodekey");
}

static int group_teardown(void **state)
{
	(void)state;
	return test_tmpdir_remove(dir);
}

/* A path in the test directory (a ring of 8, enough for any one test). */
static char *in_dir(const char *name)
{
	static char p[8][192];
	static unsigned i;
	i = (i + 1) % 8;
	snprintf(p[i], sizeof(p[i]), "%s/%s", dir, name);
	return p[i];
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

static char *slurp(const char *path)
{
	size_t len;
	char *s = read_file_limited(path, 65536, &len);
	if (!s)
		fail_msg("cannot read %s", path);
	return s;
}

/* Files in the test directory whose names start with prefix. */
static int count_tmp(const char *prefix)
{
	DIR *d = opendir(dir);
	assert_non_null(d);
	int n = 0;
	for (struct dirent *de; (de = readdir(d));)
		n += strncmp(de->d_name, prefix, strlen(prefix)) == 0;
	closedir(d);
	return n;
}

/* ---- node key files ---------------------------------------------------------- */

static void test_load_or_make(void **state)
{
	(void)state;
	const char *path = in_dir("node.key");
	struct node_key k, k2;
	bool made = false;
	char err[256] = "";
	if (nodekey_load_or_make(path, &k, &made, err, sizeof(err)) < 0)
		fail_msg("make: %s", err);
	assert_true(made);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(access(in_dir("node.key.tmp"), F_OK), -1);
	assert_int_equal(count_tmp("node.key.tmp"), 0);
	char *text = slurp(path);
	assert_true(strncmp(text, "tether-node-secret ", 19) == 0);
	assert_int_equal(strlen(text), 19 + 88 + 1);
	free(text);
	/* loaded again: the same key, its derived halves and id */
	made = true;
	if (nodekey_load_or_make(path, &k2, &made, err, sizeof(err)) < 0)
		fail_msg("load: %s", err);
	assert_false(made);
	assert_memory_equal(&k, &k2, sizeof(k));
	char kid[KEY_ID_LEN + 1];
	keys_id(k.pk, kid);
	assert_string_equal(k.kid, kid);
	unsigned char x[32];
	assert_int_equal(crypto_sign_ed25519_pk_to_curve25519(x, k.pk), 0);
	assert_memory_equal(x, k.xpk, 32);
	/* the X25519 pair is a pair */
	crypto_scalarmult_base(x, k.xsk);
	assert_memory_equal(x, k.xpk, 32);
	/* nodekey_x25519_of from the base64 public key: the same X25519 key and id */
	char *b64 = keys_b64_encode(k.pk, 32);
	char kid2[KEY_ID_LEN + 1];
	assert_int_equal(nodekey_x25519_of(b64, x, kid2), 0);
	assert_memory_equal(x, k.xpk, 32);
	assert_string_equal(kid2, k.kid);
	free(b64);
	assert_int_equal(nodekey_x25519_of("AAAA", x, kid2), -1);
	assert_int_equal(nodekey_x25519_of(NULL, x, kid2), -1);
	/* nodekey_make replaces it: another key */
	assert_int_equal(nodekey_make(path, &k2, err, sizeof(err)), 0);
	assert_memory_not_equal(k.pk, k2.pk, 32);
	struct node_key k3;
	assert_int_equal(nodekey_load(path, &k3, err, sizeof(err)), 0);
	assert_memory_equal(&k2, &k3, sizeof(k2));
	/* forget wipes */
	nodekey_forget(&k3);
	static const struct node_key zero;
	assert_memory_equal(&k3, &zero, sizeof(zero));
	nodekey_forget(&k);
	nodekey_forget(&k2);
	unlink(path);
}

static void test_envelope_to_node_key(void **state)
{
	(void)state;
	struct node_key k;
	bool made;
	char err[256] = "";
	assert_int_equal(nodekey_load_or_make(in_dir("env.key"), &k, &made, err, sizeof(err)), 0);
	unsigned char rpk[32], rsk[32], dk[ENVELOPE_DK_BYTES], dk2[ENVELOPE_DK_BYTES];
	char rkid[KEY_ID_LEN + 1];
	crypto_box_keypair(rpk, rsk);
	keys_id(rpk, rkid);
	cJSON *s = envelope_seal("secret/x", (const unsigned char *)"hello", 5, rpk, rkid, dk, err, sizeof(err));
	assert_non_null(s);
	/* wrapped to the X25519 form of the registered (Ed25519) key */
	char *pk64 = keys_b64_encode(k.pk, 32);
	unsigned char xpk[32];
	assert_int_equal(nodekey_x25519_of(pk64, xpk, NULL), 0);
	char *wrap = envelope_wrap(dk, xpk);
	assert_non_null(wrap);
	struct envelope e;
	assert_int_equal(envelope_decode(s, &e, err, sizeof(err)), 0);
	if (envelope_unwrap(&e, wrap, strlen(wrap), k.xpk, k.xsk, dk2, err, sizeof(err)) < 0)
		fail_msg("unwrap: %s", err);
	char *plain = envelope_open(&e, "secret/x", dk2, NULL, err, sizeof(err));
	assert_non_null(plain);
	assert_string_equal(plain, "hello");
	envelope_wipe(plain);
	envelope_release(&e);
	free(wrap);
	free(pk64);
	cJSON_Delete(s);
	nodekey_forget(&k);
}

static void expect_load_err(const char *path, const char *want)
{
	struct node_key k;
	char err[512] = "";
	memset(&k, 0xaa, sizeof(k));
	assert_int_equal(nodekey_load(path, &k, err, sizeof(err)), -1);
	if (!strstr(err, want))
		fail_msg("error '%s', want '%s'", err, want);
	static const struct node_key zero;
	assert_memory_equal(&k, &zero, sizeof(zero));
}

static void test_node_key_refusals(void **state)
{
	(void)state;
	const char *path = in_dir("bad.key");
	struct node_key k;
	char err[512] = "";
	assert_int_equal(nodekey_make(path, &k, err, sizeof(err)), 0);
	char *good = slurp(path);
	const char *b64 = good + 19;
	/* readable by group, by others: refused, the key never quoted */
	for (int i = 0; i < 2; i++) {
		assert_int_equal(chmod(path, i ? 0604 : 0640), 0);
		expect_load_err(path, "is accessible by group or others");
		bool made = true;
		assert_int_equal(nodekey_load_or_make(path, &k, &made, err, sizeof(err)), -1);
		assert_false(made);
		assert_non_null(strstr(err, "chmod 600"));
		char head[24];
		snprintf(head, sizeof(head), "%.20s", b64);
		assert_null(strstr(err, head));
	}
	assert_int_equal(chmod(path, 0600), 0);
	/* another kind of key, damaged base64, a public half that is not the seed's */
	spit(path, "tether-ed25519-secret AAAA\n", 0600);
	expect_load_err(path, "is not a tether node key");
	spit(path, "tether-node-secret AAAA\n", 0600);
	expect_load_err(path, "does not hold 64 bytes of base64");
	char *damaged = strdup(good);
	damaged[19 + 60] = damaged[19 + 60] == 'A' ? 'B' : 'A';   /* inside the public half */
	spit(path, damaged, 0600);
	expect_load_err(path, "is damaged");
	free(damaged);
	expect_load_err(in_dir("missing.key"), "cannot open node key");
	/* nodekey_make into a missing directory */
	assert_int_equal(nodekey_make(in_dir("no/such/node.key"), &k, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "cannot write node key"));
	free(good);
	unlink(path);
}

/* A key is 0600 whatever the umask. */
static void test_mode_under_umask0(void **state)
{
	(void)state;
	mode_t old = umask(0);
	const char *a = in_dir("u.key"), *b = in_dir("u2.key");
	struct node_key k;
	bool made = false;
	char err[256] = "";
	int rc1 = nodekey_make(a, &k, err, sizeof(err));
	nodekey_forget(&k);
	int rc2 = nodekey_load_or_make(b, &k, &made, err, sizeof(err));
	nodekey_forget(&k);
	umask(old);
	assert_int_equal(rc1, 0);
	assert_int_equal(rc2, 0);
	assert_true(made);
	struct stat st;
	assert_int_equal(stat(a, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(stat(b, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	unlink(a);
	unlink(b);
}

/* nodekey_load_or_make never replaces a key: one in place is loaded; a
 * temp file another creator is writing is left alone; of creators that
 * start together, one key wins and every one of them ends with it. */
static void test_load_or_make_never_replaces(void **state)
{
	(void)state;
	const char *path = in_dir("keep.key");
	struct node_key k, k2;
	bool made = true;
	char err[256] = "";
	assert_int_equal(nodekey_make(path, &k, err, sizeof(err)), 0);
	char *before = slurp(path);
	assert_int_equal(nodekey_load_or_make(path, &k2, &made, err, sizeof(err)), 0);
	assert_false(made);
	assert_memory_equal(k.pk, k2.pk, 32);
	char *after = slurp(path);
	assert_string_equal(before, after);
	free(before);
	free(after);
	unlink(path);

	/* another creator's temp file (the old fixed name, path.tmp) */
	char tmp[256];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	spit(tmp, "another creator's\n", 0600);
	assert_int_equal(nodekey_load_or_make(path, &k2, &made, err, sizeof(err)), 0);
	assert_true(made);
	char *t = slurp(tmp);
	assert_string_equal(t, "another creator's\n");
	free(t);
	unlink(tmp);
	assert_int_equal(count_tmp("keep.key.tmp"), 0);
	unlink(path);

	/* creators that start together */
	enum { N = 6 };
	int go[2], out[2];
	assert_int_equal(pipe(go), 0);
	assert_int_equal(pipe(out), 0);
	pid_t pids[N];
	for (int i = 0; i < N; i++) {
		pids[i] = fork();
		assert_true(pids[i] >= 0);
		if (pids[i] == 0) {
			close(go[1]);
			char c;
			if (read(go[0], &c, 1) != 0)   /* EOF: everyone starts */
				_exit(2);
			struct node_key ck;
			bool cm;
			char cerr[256];
			char line[KEY_ID_LEN + 2] = "-";
			if (nodekey_load_or_make(path, &ck, &cm, cerr, sizeof(cerr)) == 0)
				snprintf(line, sizeof(line), "%s", ck.kid);
			line[KEY_ID_LEN] = cm ? '+' : ' ';
			line[KEY_ID_LEN + 1] = '\n';
			_exit(write(out[1], line, sizeof(line)) == (ssize_t)sizeof(line) ? 0 : 3);
		}
	}
	close(go[0]);
	close(go[1]);
	close(out[1]);
	for (int i = 0; i < N; i++) {
		int st;
		assert_int_equal(waitpid(pids[i], &st, 0), pids[i]);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	char lines[N][KEY_ID_LEN + 2];
	size_t got = 0;
	for (ssize_t r; got < sizeof(lines) && (r = read(out[0], (char *)lines + got, sizeof(lines) - got)) > 0;)
		got += (size_t)r;
	close(out[0]);
	assert_int_equal(got, sizeof(lines));
	struct node_key on_disk;
	if (nodekey_load(path, &on_disk, err, sizeof(err)) < 0)
		fail_msg("load: %s", err);
	int makers = 0;
	for (int i = 0; i < N; i++) {
		if (memcmp(lines[i], on_disk.kid, KEY_ID_LEN) != 0)
			fail_msg("creator %d ended with key %.*s, the file holds %s", i, KEY_ID_LEN, lines[i],
				 on_disk.kid);
		makers += lines[i][KEY_ID_LEN] == '+';
	}
	assert_int_equal(makers, 1);
	assert_int_equal(count_tmp("keep.key.tmp"), 0);
	nodekey_forget(&on_disk);
	nodekey_forget(&k);
	nodekey_forget(&k2);
	unlink(path);
}

static void alarm_fail(int sig)
{
	(void)sig;
	static const char m[] = "test_nodekey: a key file read blocked (a FIFO?)\n";
	(void)!write(2, m, sizeof(m) - 1);
	_exit(1);
}

/* Key files are not read through a symlink, from a FIFO (without
 * blocking), a directory, or a file another user owns. */
static void test_key_file_kinds(void **state)
{
	(void)state;
	const char *path = in_dir("kind.key"), *link = in_dir("link.key"), *fifo = in_dir("fifo.key");
	struct node_key k;
	char err[512] = "";
	bool made;
	assert_int_equal(nodekey_make(path, &k, err, sizeof(err)), 0);
	nodekey_forget(&k);
	/* a symlink to a good key */
	unlink(link);
	assert_int_equal(symlink(path, link), 0);
	expect_load_err(link, "is a symbolic link");
	assert_int_equal(nodekey_load_or_make(link, &k, &made, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "is a symbolic link"));
	unsigned char sk[32], pk[32];
	char kid[KEY_ID_LEN + 1];
	const char *rpath = in_dir("rec.key"), *rlink = in_dir("rec.link");
	assert_int_equal(recovery_generate(rpath, err, sizeof(err)), 0);
	unlink(rlink);
	assert_int_equal(symlink(rpath, rlink), 0);
	assert_int_equal(recovery_load_secret(rlink, sk, pk, kid, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "recovery key"));
	assert_non_null(strstr(err, "is a symbolic link"));
	/* a FIFO: refused at once (no writer would ever come) */
	unlink(fifo);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	void (*old)(int) = signal(SIGALRM, alarm_fail);
	alarm(10);
	expect_load_err(fifo, "is not a regular file");
	assert_int_equal(recovery_load_secret(fifo, sk, pk, kid, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "is not a regular file"));
	alarm(0);
	signal(SIGALRM, old);
	/* a directory */
	expect_load_err(dir, "is not a regular file");
	/* another user's file, 0600: only root can make one */
	if (geteuid() == 0) {
		assert_int_equal(chown(path, 65534, 65534), 0);
		expect_load_err(path, "belongs to uid 65534, not to this user");
		assert_int_equal(nodekey_load_or_make(path, &k, &made, err, sizeof(err)), -1);
		assert_int_equal(chown(rpath, 65534, 65534), 0);
		assert_int_equal(recovery_load_secret(rpath, sk, pk, kid, err, sizeof(err)), -1);
		assert_non_null(strstr(err, "belongs to uid 65534"));
	} else {
		print_message("(not root: another user's key file is not tried)\n");
	}
	sodium_memzero(sk, sizeof(sk));
	char pub[256];
	snprintf(pub, sizeof(pub), "%s.pub", rpath);
	unlink(pub);
	unlink(rpath);
	unlink(rlink);
	unlink(fifo);
	unlink(link);
	unlink(path);
}

/* ---- recovery keys --------------------------------------------------------------- */

static void test_recovery_keys(void **state)
{
	(void)state;
	const char *path = in_dir("recovery");
	char pubpath[256];
	snprintf(pubpath, sizeof(pubpath), "%s.pub", path);
	char err[512] = "";
	assert_int_equal(recovery_generate(path, err, sizeof(err)), 0);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(stat(pubpath, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0644);
	/* refuses to overwrite */
	assert_int_equal(recovery_generate(path, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "exists already"));

	unsigned char sk[32], pk[32], pk2[32];
	char kid[KEY_ID_LEN + 1], kid2[KEY_ID_LEN + 1];
	if (recovery_load_secret(path, sk, pk, kid, err, sizeof(err)) < 0)
		fail_msg("load secret: %s", err);
	if (recovery_load_public(pubpath, pk2, kid2, err, sizeof(err)) < 0)
		fail_msg("load public: %s", err);
	assert_memory_equal(pk, pk2, 32);
	assert_string_equal(kid, kid2);
	/* the .pub line names its id */
	char *pub = slurp(pubpath);
	assert_non_null(strstr(pub, kid));
	assert_true(strncmp(pub, "tether-x25519 ", 14) == 0);

	/* the recovery key opens what is sealed to its public half */
	unsigned char dk[ENVELOPE_DK_BYTES], dk2[ENVELOPE_DK_BYTES];
	cJSON *s = envelope_seal("secret/r", (const unsigned char *)"x", 1, pk2, kid2, dk, err, sizeof(err));
	assert_non_null(s);
	struct envelope e;
	assert_int_equal(envelope_decode(s, &e, err, sizeof(err)), 0);
	assert_int_equal(envelope_unwrap_recovery(&e, pk, sk, dk2, err, sizeof(err)), 0);
	assert_memory_equal(dk, dk2, sizeof(dk));
	envelope_release(&e);
	cJSON_Delete(s);

	/* refusals */
	assert_int_equal(chmod(path, 0640), 0);
	assert_int_equal(recovery_load_secret(path, sk, pk, kid, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "recovery key"));
	assert_non_null(strstr(err, "chmod 600"));
	assert_int_equal(chmod(path, 0600), 0);
	assert_int_equal(recovery_load_secret(pubpath, sk, pk, kid, err, sizeof(err)), -1);   /* 0644 */
	assert_int_equal(recovery_load_public(path, pk2, kid2, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "secret half: give its .pub file"));
	const char *other = in_dir("other.pub");
	spit(other, "tether-ed25519 AAAA\n", 0644);
	assert_int_equal(recovery_load_public(other, pk2, kid2, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "is not a tether recovery public key"));
	spit(other, "tether-x25519 AAAA\n", 0644);
	assert_int_equal(recovery_load_public(other, pk2, kid2, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not 32 bytes of base64"));
	/* the key without its id is fine; with another id it is damaged */
	char *line = strdup(pub);
	char *sp = strrchr(line, ' ');
	sp[0] = '\n';
	sp[1] = '\0';
	spit(other, line, 0644);
	assert_int_equal(recovery_load_public(other, pk2, kid2, err, sizeof(err)), 0);
	assert_string_equal(kid2, kid);
	line[strlen(line) - 1] = '\0';
	struct buf b = BUF_INIT;
	buf_printf(&b, "%s 0123456789abcdef\n", line);
	char *wrong = buf_detach(&b, NULL);
	spit(other, wrong, 0644);
	assert_int_equal(recovery_load_public(other, pk2, kid2, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "is not its id"));
	assert_int_equal(recovery_load_public(in_dir("none.pub"), pk2, kid2, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "cannot read recovery public key"));
	spit(other, "tether-x25519-secret AAAA\n", 0600);
	assert_int_equal(recovery_load_secret(other, sk, pk, kid, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "does not hold 32 bytes"));
	spit(other, "nonsense\n", 0600);
	assert_int_equal(recovery_load_secret(other, sk, pk, kid, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "is not a tether recovery key"));
	free(wrong);
	free(line);
	free(pub);
	sodium_memzero(sk, sizeof(sk));
	unlink(path);
	unlink(pubpath);
	unlink(other);
}

/* ---- registrations -------------------------------------------------------------- */

static struct node_key key_a, key_b, key_c;

static void make_keys(void)
{
	char err[256];
	assert_int_equal(nodekey_make(in_dir("a.key"), &key_a, err, sizeof(err)), 0);
	assert_int_equal(nodekey_make(in_dir("b.key"), &key_b, err, sizeof(err)), 0);
	assert_int_equal(nodekey_make(in_dir("c.key"), &key_c, err, sizeof(err)), 0);
}

static int parse(const char *text, struct nodekey_reg *r, char *err, size_t errlen)
{
	err[0] = '\0';
	return nodekey_reg_parse(text, strlen(text), r, err, errlen);
}

static void expect_reg_err(const char *text, const char *want)
{
	struct nodekey_reg r;
	char err[256];
	if (parse(text, &r, err, sizeof(err)) == 0)
		fail_msg("accepted: %s", text);
	if (strncmp(err, want, strlen(want)) != 0)
		fail_msg("'%s': error '%s', want '%s...'", text, err, want);
	assert_false(r.has_prev);
	assert_string_equal(r.node, "");
}

/* text with member field's value replaced by the JSON value v. */
static char *with_member(const char *text, const char *field, const char *v)
{
	cJSON *doc = cJSON_Parse(text);
	assert_non_null(doc);
	if (v)
		cJSON_ReplaceItemInObjectCaseSensitive(doc, field, cJSON_Parse(v));
	else
		cJSON_DeleteItemFromObjectCaseSensitive(doc, field);
	char *out = cJSON_PrintUnformatted(doc);
	cJSON_Delete(doc);
	return out;
}

static void expect_member_err(const char *text, const char *field, const char *v, const char *want)
{
	char *t = with_member(text, field, v);
	expect_reg_err(t, want);
	free(t);
}

static void test_registration(void **state)
{
	(void)state;
	make_keys();
	char *reg = nodekey_registration("web-1", &key_a, NULL, 1796036900);
	assert_non_null(reg);
	assert_true(strlen(reg) <= NODEKEY_REG_MAX);
	struct nodekey_reg r;
	char err[256];
	if (parse(reg, &r, err, sizeof(err)) < 0)
		fail_msg("refused: %s", err);
	assert_string_equal(r.node, "web-1");
	assert_memory_equal(r.pk, key_a.pk, 32);
	assert_string_equal(r.kid, key_a.kid);
	assert_int_equal(r.at, 1796036900);
	assert_false(r.has_prev);
	char *pk64 = keys_b64_encode(key_a.pk, 32);
	assert_string_equal(r.key_b64, pk64);
	free(pk64);
	/* the documented message, signed by the key */
	cJSON *doc = cJSON_Parse(reg);
	struct buf m = BUF_INIT;
	buf_printf(&m, "tether-node-key-v1\nweb-1\n%s\n1796036900", json_get_string(doc, "key"));
	unsigned char sig[64];
	const char *s64 = json_get_string(doc, "sig");
	assert_int_equal(keys_b64_exact(s64, strlen(s64), sig, 64), 0);
	assert_int_equal(crypto_sign_ed25519_verify_detached(sig, (unsigned char *)m.data, m.len, key_a.pk), 0);
	buf_release(&m);
	cJSON_Delete(doc);

	/* a bad signature: flipped, or another key's */
	char *bad = strdup(reg);
	char *sp = strstr(bad, "\"sig\":\"") + 7;
	sp[5] = sp[5] == 'A' ? 'B' : 'A';
	expect_reg_err(bad, "sig: not the key's signature");
	free(bad);
	char *regb = nodekey_registration("web-1", &key_b, NULL, 1796036900);
	cJSON *db = cJSON_Parse(regb);
	char v[128];
	snprintf(v, sizeof(v), "\"%s\"", json_get_string(db, "sig"));
	expect_member_err(reg, "sig", v, "sig: not the key's signature");
	/* b's key with a's signature */
	snprintf(v, sizeof(v), "\"%s\"", json_get_string(db, "key"));
	expect_member_err(reg, "key", v, "sig: not the key's signature");
	cJSON_Delete(db);
	free(regb);
	/* node and at are signed */
	expect_member_err(reg, "node", "\"web-2\"", "sig: not the key's signature");
	expect_member_err(reg, "at", "1796036901", "sig: not the key's signature");
	/* the same at written otherwise is the same number */
	char *t = with_member(reg, "at", "1.7960369e9");
	assert_int_equal(parse(t, &r, err, sizeof(err)), 0);
	free(t);

	/* malformed */
	struct buf x;
	expect_member_err(reg, "node", "\"web 1\"", "node: must be a node ID");
	expect_member_err(reg, "node", "\"\"", "node: must be a node ID");
	expect_member_err(reg, "node", "1", "node: must be a node ID");
	/* node IDs that would make the signed message ambiguous, or too long:
	 * refused even when correctly signed */
	char id201[202];
	memset(id201, 'n', 201);
	id201[201] = '\0';
	const char *const bad_ids[] = { "web\n1", "web-1\ntether-node-key-v1", "a/b", "../x", id201, ".", NULL };
	for (int i = 0; bad_ids[i]; i++) {
		char *signed_bad = nodekey_registration(bad_ids[i], &key_a, NULL, 1796036900);
		assert_non_null(signed_bad);
		expect_reg_err(signed_bad, "node: must be a node ID");
		free(signed_bad);
	}
	id201[200] = '\0';   /* 200 bytes: the longest */
	char *longest = nodekey_registration(id201, &key_a, NULL, 1796036900);
	if (parse(longest, &r, err, sizeof(err)) < 0)
		fail_msg("a 200-byte node ID refused: %s", err);
	assert_string_equal(r.node, id201);
	free(longest);
	expect_member_err(reg, "node", NULL, "node: missing");
	expect_member_err(reg, "key", "\"AAAA\"", "key: must be an Ed25519 public key");
	expect_member_err(reg, "key", "null", "key: must be an Ed25519 public key");
	expect_member_err(reg, "key", "\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\"", "key: not a usable Ed25519");
	expect_member_err(reg, "at", "-1", "at: must be a positive whole number");
	expect_member_err(reg, "at", "0", "at: must be a positive whole number");
	expect_member_err(reg, "at", "1.5", "at: must be a positive whole number");
	expect_member_err(reg, "at", "\"1796036900\"", "at: must be a positive whole number");
	/* 2^53: cJSON would print it rounded, so written into the text */
	const char *at = strstr(reg, "1796036900");
	x = (struct buf)BUF_INIT;
	buf_printf(&x, "%.*s9007199254740992%s", (int)(at - reg), reg, at + 10);
	char *t53 = buf_detach(&x, NULL);
	expect_reg_err(t53, "at: must be a positive whole number");
	free(t53);
	expect_member_err(reg, "sig", "\"AAAA\"", "sig: must be 64 bytes of standard base64");
	expect_member_err(reg, "sig", NULL, "sig: missing");
	expect_reg_err("[]", "registration: must be a JSON object");
	expect_reg_err("{", "registration: ");
	expect_reg_err("", "registration: ");
	t = strdup(reg);
	t[strlen(t) - 1] = ',';
	x = (struct buf)BUF_INIT;
	buf_printf(&x, "%s\"extra\":1}", t);
	char *extra = buf_detach(&x, NULL);
	expect_reg_err(extra, "registration: unknown field 'extra'");
	free(extra);
	/* a peer's keys, in errors, escaped (no raw control bytes in logs) */
	x = (struct buf)BUF_INIT;
	buf_printf(&x, "%s\"\\u001b[2J\\n\\\\\":1}", t);
	extra = buf_detach(&x, NULL);
	expect_reg_err(extra, "registration: unknown field '\\x1b[2J\\x0a\\x5c'");
	free(extra);
	x = (struct buf)BUF_INIT;
	buf_printf(&x, "%s\"\\u0007\":1,\"\\u0007\":2}", t);
	extra = buf_detach(&x, NULL);
	expect_reg_err(extra, "registration: duplicate key '\\x07'");
	free(extra);
	free(t);
	/* a duplicate member (a signed one and another) */
	x = (struct buf)BUF_INIT;
	buf_printf(&x, "{\"node\":\"web-2\",%s", reg + 1);
	char *dup = buf_detach(&x, NULL);
	expect_reg_err(dup, "registration: ");
	free(dup);
	/* over the size cap, though valid JSON */
	x = (struct buf)BUF_INIT;
	buf_puts(&x, reg);
	x.len--;
	buf_puts(&x, ",\"pad\":\"");
	for (int i = 0; i < NODEKEY_REG_MAX; i++)
		buf_puts(&x, "p");
	buf_puts(&x, "\"}");
	char *big = buf_detach(&x, NULL);
	expect_reg_err(big, "registration: more than 1024 bytes");
	free(big);
	free(reg);
}

static void test_rotation(void **state)
{
	(void)state;
	/* b replaces a: b signs, a endorses */
	char *reg = nodekey_registration("web-1", &key_b, &key_a, 1796037000);
	struct nodekey_reg r;
	char err[256];
	if (parse(reg, &r, err, sizeof(err)) < 0)
		fail_msg("refused: %s", err);
	assert_true(r.has_prev);
	assert_memory_equal(r.pk, key_b.pk, 32);
	assert_memory_equal(r.prev, key_a.pk, 32);
	assert_string_equal(r.prev_kid, key_a.kid);
	assert_string_equal(r.kid, key_b.kid);

	/* endorsed by the wrong key: c endorses, but prev names a */
	char *by_c = nodekey_registration("web-1", &key_b, &key_c, 1796037000);
	cJSON *dc = cJSON_Parse(by_c);
	char v[128];
	snprintf(v, sizeof(v), "\"%s\"", json_get_string(dc, "endorse"));
	expect_member_err(reg, "endorse", v, "endorse: not the previous key's signature");
	/* c's own endorsement, with prev changed to name a: the same */
	char *a64 = keys_b64_encode(key_a.pk, 32);
	snprintf(v, sizeof(v), "\"%s\"", a64);
	expect_member_err(by_c, "prev", v, "endorse: not the previous key's signature");
	free(a64);
	cJSON_Delete(dc);
	free(by_c);
	/* an endorsement of another at, or node, does not carry over */
	char *other = nodekey_registration("web-1", &key_b, &key_a, 1796037001);
	cJSON *d2 = cJSON_Parse(other);
	snprintf(v, sizeof(v), "\"%s\"", json_get_string(d2, "endorse"));
	expect_member_err(reg, "endorse", v, "endorse: not the previous key's signature");
	cJSON_Delete(d2);
	free(other);
	/* half a rotation */
	expect_member_err(reg, "endorse", NULL, "endorse: missing");
	expect_member_err(reg, "prev", NULL, "prev: missing");
	expect_member_err(reg, "prev", "\"AAAA\"", "prev: must be an Ed25519 public key");
	/* a key endorsing itself */
	char *self = nodekey_registration("web-1", &key_b, &key_b, 1796037000);
	expect_reg_err(self, "prev: is the same key as key");
	free(self);
	/* a changed sig still fails before the endorsement is looked at */
	char *b64 = keys_b64_encode(key_c.pk, 32);
	snprintf(v, sizeof(v), "\"%s\"", b64);
	expect_member_err(reg, "key", v, "sig: not the key's signature");
	free(b64);
	free(reg);
	nodekey_forget(&key_a);
	nodekey_forget(&key_b);
	nodekey_forget(&key_c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_load_or_make),
		cmocka_unit_test(test_envelope_to_node_key),
		cmocka_unit_test(test_node_key_refusals),
		cmocka_unit_test(test_mode_under_umask0),
		cmocka_unit_test(test_load_or_make_never_replaces),
		cmocka_unit_test(test_key_file_kinds),
		cmocka_unit_test(test_recovery_keys),
		cmocka_unit_test(test_registration),
		cmocka_unit_test(test_rotation),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
