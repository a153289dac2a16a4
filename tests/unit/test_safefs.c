/* test_safefs.c: unit tests of agent/consumer/safefs.c under a mkdtemp root: path and
 * symlink confinement, atomic writes, modes under any umask, tree removal;
 * and what a boot uses for many files: the comparison (safefs_same), the
 * directory order, and batches (temp names until commit, both ways of
 * making them durable, nothing left behind by one not committed). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "consumer/safefs.h"
#include "tmpdir.h"

struct fx {
	char base[64];         /* the mkdtemp directory */
	char root[96];         /* base/root: what safefs is confined to */
	char out[96];          /* base/outside: must never be touched */
	int rootfd;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	if (test_tmpdir_make(f->base, sizeof(f->base), "safefs") < 0) {
		free(f);
		return -1;
	}
	snprintf(f->root, sizeof(f->root), "%s/root", f->base);
	snprintf(f->out, sizeof(f->out), "%s/outside", f->base);
	if (mkdir(f->root, 0755) < 0 || mkdir(f->out, 0755) < 0)
		return -1;
	f->rootfd = open(f->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (f->rootfd < 0)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	close(f->rootfd);
	/* never follows the symlinks the tests plant */
	test_tmpdir_remove(f->base);
	free(f);
	return 0;
}

/* ---- helpers ------------------------------------------------------------------ */

static const char *at(const char *dir, const char *rel)
{
	static char bufs[4][256];
	static int k;
	char *p = bufs[k++ % 4];
	snprintf(p, sizeof(bufs[0]), "%s/%s", dir, rel);
	return p;
}

static void put(const char *path, const char *text)
{
	FILE *fp = fopen(path, "w");
	assert_non_null(fp);
	fputs(text, fp);
	assert_int_equal(fclose(fp), 0);
}

/* The content of path, or NULL when absent. */
static char *get(const char *path)
{
	FILE *fp = fopen(path, "r");
	if (!fp)
		return NULL;
	static char content[8192];
	size_t n = fread(content, 1, sizeof(content) - 1, fp);
	content[n] = '\0';
	fclose(fp);
	return content;
}

static bool lexists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

/* Entries in dir (not . and ..); *tmps counts leftover temp files. */
static int entries(const char *dir, int *tmps)
{
	DIR *d = opendir(dir);
	assert_non_null(d);
	int n = 0;
	*tmps = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		n++;
		if (strncmp(de->d_name, ".tether-tmp-", 12) == 0)
			(*tmps)++;
	}
	closedir(d);
	return n;
}

static int nfiles;

static int count_file(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)path;
	(void)ftw;
	if (flag != FTW_D && flag != FTW_DP)
		nfiles++;
	(void)sb;
	return 0;
}

/* Everything below dir that is not a directory (files, links, temp files). */
static int files_below(const char *dir)
{
	nfiles = 0;
	assert_int_equal(nftw(dir, count_file, 16, FTW_PHYS), 0);
	return nfiles;
}

/* Expects path to hold text. */
static void expect_content(const char *path, const char *text)
{
	const char *got = get(path);
	if (!got)
		fail_msg("'%s' is gone", path);
	assert_string_equal(got, text);
}

static int write_str(int rootfd, const char *path, const char *text, mode_t mode, char *err, size_t errlen)
{
	err[0] = '\0';
	return safefs_write(rootfd, path, text, strlen(text), mode, err, errlen);
}

/* ---- confinement ----------------------------------------------------------------- */

static void test_writes_below_root(void **state)
{
	struct fx *f = *state;
	char err[256];
	assert_int_equal(write_str(f->rootfd, "a.conf", "one", 0644, err, sizeof(err)), 0);
	expect_content(at(f->root, "a.conf"), "one");
	/* directories on the way are made */
	assert_int_equal(write_str(f->rootfd, "d1/d2/d3/b.conf", "two", 0644, err, sizeof(err)), 0);
	expect_content(at(f->root, "d1/d2/d3/b.conf"), "two");
	struct stat st;
	assert_int_equal(lstat(at(f->root, "d1/d2"), &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	/* rewriting replaces */
	assert_int_equal(write_str(f->rootfd, "a.conf", "three", 0644, err, sizeof(err)), 0);
	expect_content(at(f->root, "a.conf"), "three");
	/* an empty file */
	assert_int_equal(safefs_write(f->rootfd, "empty", "", 0, 0644, err, sizeof(err)), 0);
	expect_content(at(f->root, "empty"), "");
	/* read back through safefs */
	size_t len;
	mode_t mode;
	char *data = safefs_read(f->rootfd, "d1/d2/d3/b.conf", 1024, &len, &mode);
	assert_non_null(data);
	assert_int_equal(len, 3);
	assert_string_equal(data, "two");
	assert_int_equal(mode, 0644);
	free(data);
	/* no temp file is left anywhere */
	int tmps;
	assert_int_equal(entries(f->root, &tmps), 3);
	assert_int_equal(tmps, 0);
	assert_int_equal(entries(at(f->root, "d1/d2/d3"), &tmps), 1);
	assert_int_equal(tmps, 0);
	assert_int_equal(entries(f->out, &tmps), 0);
}

static const char *const bad_paths[] = {
	"../x", "../outside/x", "/abs", "/tmp/x", "a/../b", "a//b", "./a", "a/./b", "a/.", "a/..", "..", ".", "",
	"a/", "/", "a/b/../../../outside/x",
};

static void test_bad_paths_refused(void **state)
{
	struct fx *f = *state;
	char err[256];
	int tmps;
	assert_int_equal(write_str(f->rootfd, "ok", "x", 0644, err, sizeof(err)), 0);
	for (size_t i = 0; i < sizeof(bad_paths) / sizeof(bad_paths[0]); i++) {
		const char *p = bad_paths[i];
		errno = 0;
		if (write_str(f->rootfd, p, "evil", 0644, err, sizeof(err)) != -1)
			fail_msg("write of '%s' accepted", p);
		assert_int_equal(errno, EINVAL);
		assert_true(err[0] != '\0');
		size_t len;
		assert_null(safefs_read(f->rootfd, p, 1024, &len, NULL));
		if (safefs_move(f->rootfd, "ok", f->rootfd, p, err, sizeof(err)) != -1)
			fail_msg("move to '%s' accepted", p);
		if (safefs_move(f->rootfd, p, f->rootfd, "moved", err, sizeof(err)) != -1)
			fail_msg("move from '%s' accepted", p);
		if (safefs_unlink(f->rootfd, p, err, sizeof(err)) != -1)
			fail_msg("unlink of '%s' accepted", p);
		if (safefs_sync_parent(f->rootfd, p, err, sizeof(err)) != -1)
			fail_msg("sync of '%s' accepted", p);
	}
	/* a component over 255 bytes */
	char longname[300];
	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	assert_int_equal(write_str(f->rootfd, longname, "x", 0644, err, sizeof(err)), -1);
	/* nothing was made outside, no file inside (a refused path may leave
	 * the directories before its bad component), and "ok" is where it was */
	assert_int_equal(entries(f->out, &tmps), 0);
	assert_int_equal(files_below(f->root), 1);
	expect_content(at(f->root, "ok"), "x");
	assert_false(lexists(at(f->base, "x")));
	const char *abs = get("/tmp/x");
	assert_true(abs == NULL || strcmp(abs, "evil") != 0);
}

static void test_symlinked_directory_refused(void **state)
{
	struct fx *f = *state;
	char err[256];
	int tmps;
	put(at(f->out, "secret"), "outside");
	assert_int_equal(symlink(f->out, at(f->root, "evil")), 0);
	assert_int_equal(mkdir(at(f->root, "d"), 0755), 0);
	assert_int_equal(symlink(f->out, at(f->root, "d/evil")), 0);
	/* a relative link to a directory inside the root is no better */
	assert_int_equal(symlink("d", at(f->root, "alias")), 0);
	/* a dangling one */
	assert_int_equal(symlink(at(f->out, "nodir"), at(f->root, "dangling")), 0);
	put(at(f->root, "ok"), "mine");

	static const char *const via[] = { "evil/x", "evil/new/x", "d/evil/x", "alias/x", "dangling/x", "evil/secret" };
	for (size_t i = 0; i < sizeof(via) / sizeof(via[0]); i++) {
		const char *p = via[i];
		if (write_str(f->rootfd, p, "evil", 0644, err, sizeof(err)) != -1)
			fail_msg("write through a symlink: '%s' accepted", p);
		assert_true(errno == ELOOP || errno == ENOTDIR);
		assert_non_null(strstr(err, "symlink"));
		if (safefs_move(f->rootfd, "ok", f->rootfd, p, err, sizeof(err)) != -1)
			fail_msg("move to '%s' accepted", p);
		if (safefs_sync_parent(f->rootfd, p, err, sizeof(err)) != -1)
			fail_msg("sync of '%s' accepted", p);
	}
	/* read, move and unlink of a file that does exist behind the link */
	size_t len;
	assert_null(safefs_read(f->rootfd, "evil/secret", 1024, &len, NULL));
	assert_null(safefs_read(f->rootfd, "d/evil/secret", 1024, &len, NULL));
	assert_int_equal(safefs_move(f->rootfd, "evil/secret", f->rootfd, "stolen", err, sizeof(err)), -1);
	assert_int_equal(safefs_unlink(f->rootfd, "evil/secret", err, sizeof(err)), -1);
	assert_int_equal(safefs_unlink(f->rootfd, "d/evil/secret", err, sizeof(err)), -1);
	/* nothing created outside, nothing taken from it, "ok" stayed */
	expect_content(at(f->out, "secret"), "outside");
	assert_int_equal(entries(f->out, &tmps), 1);
	assert_false(lexists(at(f->out, "nodir")));
	assert_false(lexists(at(f->root, "stolen")));
	expect_content(at(f->root, "ok"), "mine");
	assert_int_equal(entries(at(f->root, "d"), &tmps), 1);
	assert_int_equal(tmps, 0);
}

static void test_symlink_at_final_path_replaced(void **state)
{
	struct fx *f = *state;
	char err[256];
	put(at(f->out, "target"), "ORIGINAL");
	assert_int_equal(chmod(at(f->out, "target"), 0640), 0);
	assert_int_equal(symlink(at(f->out, "target"), at(f->root, "conf")), 0);
	assert_int_equal(write_str(f->rootfd, "conf", "NEW", 0604, err, sizeof(err)), 0);
	/* the link itself was replaced by a file; its target is untouched */
	struct stat st;
	assert_int_equal(lstat(at(f->root, "conf"), &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0604);
	expect_content(at(f->root, "conf"), "NEW");
	expect_content(at(f->out, "target"), "ORIGINAL");
	assert_int_equal(stat(at(f->out, "target"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0640);

	/* a dangling link to a file outside is replaced, nothing is created */
	assert_int_equal(symlink(at(f->out, "created"), at(f->root, "dl")), 0);
	assert_int_equal(write_str(f->rootfd, "dl", "x", 0644, err, sizeof(err)), 0);
	assert_false(lexists(at(f->out, "created")));
	expect_content(at(f->root, "dl"), "x");

	/* reading a symlink at the final path is refused, not followed */
	assert_int_equal(symlink(at(f->out, "target"), at(f->root, "rl")), 0);
	size_t len;
	errno = 0;
	assert_null(safefs_read(f->rootfd, "rl", 1024, &len, NULL));
	assert_int_equal(errno, ELOOP);
	/* unlinking one removes the link only */
	assert_int_equal(safefs_unlink(f->rootfd, "rl", err, sizeof(err)), 0);
	assert_false(lexists(at(f->root, "rl")));
	expect_content(at(f->out, "target"), "ORIGINAL");
	/* moving one moves the link, not what it points at */
	assert_int_equal(symlink(at(f->out, "target"), at(f->root, "ml")), 0);
	assert_int_equal(safefs_move(f->rootfd, "ml", f->rootfd, "sub/ml2", err, sizeof(err)), 0);
	assert_int_equal(lstat(at(f->root, "sub/ml2"), &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	expect_content(at(f->out, "target"), "ORIGINAL");
}

static void test_symlink_planted_at_temp_name(void **state)
{
	struct fx *f = *state;
	char err[256];
	struct stat st;
	/* the temp name of "conf.d/app.conf" is "conf.d/.tether-tmp-app.conf":
	 * plant a symlink to a file outside there, and one to a directory */
	put(at(f->out, "victim"), "ORIGINAL");
	assert_int_equal(mkdir(at(f->root, "conf.d"), 0755), 0);
	assert_int_equal(symlink(at(f->out, "victim"), at(f->root, "conf.d/.tether-tmp-app.conf")), 0);
	assert_int_equal(write_str(f->rootfd, "conf.d/app.conf", "NEW", 0644, err, sizeof(err)), 0);
	expect_content(at(f->root, "conf.d/app.conf"), "NEW");
	expect_content(at(f->out, "victim"), "ORIGINAL");
	assert_int_equal(stat(at(f->out, "victim"), &st), 0);
	assert_int_equal(st.st_size, 8);   /* not truncated, not rewritten */
	/* the planted link is gone, and no temp file is left */
	assert_false(lexists(at(f->root, "conf.d/.tether-tmp-app.conf")));
	/* a dangling link there creates nothing outside */
	assert_int_equal(symlink(at(f->out, "made"), at(f->root, ".tether-tmp-top")), 0);
	assert_int_equal(write_str(f->rootfd, "top", "T", 0600, err, sizeof(err)), 0);
	assert_false(lexists(at(f->out, "made")));
	expect_content(at(f->root, "top"), "T");
}

static void test_file_where_directory_needed(void **state)
{
	struct fx *f = *state;
	char err[256];
	int tmps;
	put(at(f->root, "f"), "plain file");
	errno = 0;
	assert_int_equal(write_str(f->rootfd, "f/x", "y", 0644, err, sizeof(err)), -1);
	assert_int_equal(errno, ENOTDIR);
	assert_non_null(strstr(err, "'f'"));
	assert_int_equal(write_str(f->rootfd, "f/x/y", "y", 0644, err, sizeof(err)), -1);
	expect_content(at(f->root, "f"), "plain file");
	size_t len;
	assert_null(safefs_read(f->rootfd, "f/x", 1024, &len, NULL));
	assert_int_equal(safefs_unlink(f->rootfd, "f/x", err, sizeof(err)), -1);
	/* and a directory where the file should go: rename fails, no temp left */
	assert_int_equal(mkdir(at(f->root, "dir"), 0755), 0);
	put(at(f->root, "dir/inside"), "i");
	assert_int_equal(write_str(f->rootfd, "dir", "y", 0644, err, sizeof(err)), -1);
	assert_true(err[0] != '\0');
	assert_int_equal(entries(f->root, &tmps), 2);
	assert_int_equal(tmps, 0);
	expect_content(at(f->root, "dir/inside"), "i");
}

static void test_read_limits_and_absence(void **state)
{
	struct fx *f = *state;
	char err[256];
	size_t len;
	assert_int_equal(write_str(f->rootfd, "five", "12345", 0600, err, sizeof(err)), 0);
	char *d = safefs_read(f->rootfd, "five", 5, &len, NULL);
	assert_non_null(d);
	assert_int_equal(len, 5);
	free(d);
	errno = 0;
	assert_null(safefs_read(f->rootfd, "five", 4, &len, NULL));
	assert_int_equal(errno, EFBIG);
	errno = 0;
	assert_null(safefs_read(f->rootfd, "absent", 4, &len, NULL));
	assert_int_equal(errno, ENOENT);
	errno = 0;
	assert_null(safefs_read(f->rootfd, "nodir/absent", 4, &len, NULL));
	assert_int_equal(errno, ENOENT);
	/* a directory is not a file */
	assert_int_equal(mkdir(at(f->root, "dd"), 0755), 0);
	assert_null(safefs_read(f->rootfd, "dd", 4096, &len, NULL));
	/* unlink of what is absent is fine, with or without its directory */
	assert_int_equal(safefs_unlink(f->rootfd, "absent", err, sizeof(err)), 0);
	assert_int_equal(safefs_unlink(f->rootfd, "nodir/absent", err, sizeof(err)), 0);
	assert_int_equal(safefs_unlink(f->rootfd, "five", err, sizeof(err)), 0);
	assert_false(lexists(at(f->root, "five")));
}

static void test_move_between_roots(void **state)
{
	struct fx *f = *state;
	char err[256];
	assert_int_equal(mkdir(at(f->base, "work"), 0700), 0);
	int workfd = open(at(f->base, "work"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(workfd >= 0);
	assert_int_equal(write_str(workfd, "staging/a/b.conf", "staged", 0640, err, sizeof(err)), 0);
	assert_int_equal(safefs_move(workfd, "staging/a/b.conf", f->rootfd, "live/a/b.conf", err, sizeof(err)), 0);
	expect_content(at(f->root, "live/a/b.conf"), "staged");
	assert_false(lexists(at(f->base, "work/staging/a/b.conf")));
	/* a missing source */
	assert_int_equal(safefs_move(workfd, "staging/a/b.conf", f->rootfd, "x", err, sizeof(err)), -1);
	assert_int_equal(errno, ENOENT);
	assert_non_null(strstr(err, "cannot move"));
	/* sync of a file's directory and of the root */
	assert_int_equal(safefs_sync_parent(f->rootfd, "live/a/b.conf", err, sizeof(err)), 0);
	assert_int_equal(safefs_sync_parent(f->rootfd, "bare", err, sizeof(err)), 0);
	close(workfd);
}

/* ---- atomicity and modes ---------------------------------------------------------- */

#define BIG_A 65536
#define BIG_B 30000

/* A reader in a child process: every read of path is all of A or all of B
 * (never empty, never a mix); exits 0, or 1 on a torn read, when told to
 * stop through the pipe. */
static void reader(const char *path, int stopfd)
{
	static char data[BIG_A + 16];
	long reads = 0;
	for (;;) {
		int fd = open(path, O_RDONLY);
		if (fd < 0)
			_exit(2);
		size_t n = 0;
		ssize_t r;
		while ((r = read(fd, data + n, sizeof(data) - n)) > 0)
			n += (size_t)r;
		close(fd);
		char c = n ? data[0] : '?';
		bool whole = (c == 'a' && n == BIG_A) || (c == 'b' && n == BIG_B);
		for (size_t i = 0; whole && i < n; i++)
			whole = data[i] == c;
		if (!whole)
			_exit(1);
		reads++;
		char x;
		if (read(stopfd, &x, 1) == 0)
			_exit(reads > 0 ? 0 : 3);
	}
}

static void test_write_is_atomic(void **state)
{
	struct fx *f = *state;
	char err[256];
	char *a = malloc(BIG_A), *b = malloc(BIG_B);
	assert_non_null(a);
	assert_non_null(b);
	memset(a, 'a', BIG_A);
	memset(b, 'b', BIG_B);
	assert_int_equal(safefs_write(f->rootfd, "big/file", a, BIG_A, 0644, err, sizeof(err)), 0);
	int stop[2];
	assert_int_equal(pipe(stop), 0);
	/* the reader polls the pipe without blocking */
	assert_int_equal(fcntl(stop[0], F_SETFL, O_NONBLOCK), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(stop[1]);
		free(a);
		free(b);
		reader(at(f->root, "big/file"), stop[0]);
	}
	close(stop[0]);
	for (int i = 0; i < 300; i++) {
		bool odd = i % 2;
		assert_int_equal(safefs_write(f->rootfd, "big/file", odd ? b : a, odd ? BIG_B : BIG_A, 0644, err,
					      sizeof(err)), 0);
	}
	close(stop[1]);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) != 0)
		fail_msg("the reader saw a torn or missing file (exit %d)", WEXITSTATUS(status));
	int tmps;
	assert_int_equal(entries(at(f->root, "big"), &tmps), 1);
	assert_int_equal(tmps, 0);
	free(a);
	free(b);
}

static void test_failed_write_keeps_old_content(void **state)
{
	struct fx *f = *state;
	char err[256];
	int tmps;
	assert_int_equal(write_str(f->rootfd, "keep", "old content", 0644, err, sizeof(err)), 0);
	char big[4096];
	memset(big, 'n', sizeof(big));
	struct rlimit old, now;
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	now = old;
	now.rlim_cur = 100;
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &now), 0);
	int rc = safefs_write(f->rootfd, "keep", big, sizeof(big), 0644, err, sizeof(err));
	int e = errno;
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	assert_int_equal(rc, -1);
	assert_int_equal(e, EFBIG);
	assert_non_null(strstr(err, "keep"));
	expect_content(at(f->root, "keep"), "old content");
	assert_int_equal(entries(f->root, &tmps), 1);
	assert_int_equal(tmps, 0);
}

static void test_mode_regardless_of_umask(void **state)
{
	struct fx *f = *state;
	char err[256];
	struct stat st;
	mode_t saved = umask(077);
	assert_int_equal(write_str(f->rootfd, "m644", "x", 0644, err, sizeof(err)), 0);
	assert_int_equal(write_str(f->rootfd, "m755", "x", 0755, err, sizeof(err)), 0);
	umask(0);
	assert_int_equal(write_str(f->rootfd, "m600", "x", 0600, err, sizeof(err)), 0);
	assert_int_equal(write_str(f->rootfd, "m640", "x", 0640, err, sizeof(err)), 0);
	umask(saved);
	assert_int_equal(lstat(at(f->root, "m644"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0644);
	assert_int_equal(lstat(at(f->root, "m755"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0755);
	assert_int_equal(lstat(at(f->root, "m600"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(lstat(at(f->root, "m640"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0640);
	/* a rewrite with another mode changes it */
	umask(077);
	assert_int_equal(write_str(f->rootfd, "m600", "y", 0664, err, sizeof(err)), 0);
	umask(saved);
	assert_int_equal(lstat(at(f->root, "m600"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0664);
	size_t len;
	mode_t mode = 0;
	char *d = safefs_read(f->rootfd, "m600", 16, &len, &mode);
	assert_non_null(d);
	assert_int_equal(mode, 0664);
	free(d);
}

/* ---- removing trees --------------------------------------------------------------- */

static void test_remove_tree_does_not_follow_symlinks(void **state)
{
	struct fx *f = *state;
	int tmps;
	assert_int_equal(mkdir(at(f->out, "dir"), 0755), 0);
	put(at(f->out, "dir/precious"), "p");
	put(at(f->out, "file"), "f");
	char err[256];
	assert_int_equal(write_str(f->rootfd, "tree/a", "1", 0644, err, sizeof(err)), 0);
	assert_int_equal(write_str(f->rootfd, "tree/sub/b", "2", 0644, err, sizeof(err)), 0);
	assert_int_equal(write_str(f->rootfd, "tree/sub/deeper/c", "3", 0644, err, sizeof(err)), 0);
	assert_int_equal(mkdir(at(f->root, "tree/emptydir"), 0755), 0);
	assert_int_equal(symlink(at(f->out, "dir"), at(f->root, "tree/link_dir")), 0);
	assert_int_equal(symlink(at(f->out, "file"), at(f->root, "tree/sub/link_file")), 0);
	assert_int_equal(symlink("/nonexistent/x", at(f->root, "tree/sub/deeper/dangling")), 0);
	assert_int_equal(symlink("..", at(f->root, "tree/sub/up")), 0);
	assert_int_equal(safefs_remove_tree(f->rootfd, "tree"), 0);
	assert_false(lexists(at(f->root, "tree")));
	expect_content(at(f->out, "dir/precious"), "p");
	expect_content(at(f->out, "file"), "f");
	assert_int_equal(entries(f->out, &tmps), 2);
	/* absent: fine */
	assert_int_equal(safefs_remove_tree(f->rootfd, "tree"), 0);
	/* the tree itself a symlink to a directory outside: only the link goes */
	assert_int_equal(symlink(at(f->out, "dir"), at(f->root, "staging")), 0);
	assert_int_equal(safefs_remove_tree(f->rootfd, "staging"), 0);
	assert_false(lexists(at(f->root, "staging")));
	expect_content(at(f->out, "dir/precious"), "p");
	/* a plain file in its place goes too */
	put(at(f->root, "backup"), "b");
	assert_int_equal(safefs_remove_tree(f->rootfd, "backup"), 0);
	assert_false(lexists(at(f->root, "backup")));
}

static void test_remove_tree_confined(void **state)
{
	struct fx *f = *state;
	/* like every safefs path, the tree's own path must not lead out of the
	 * root, through a symlinked directory or "..": nothing outside goes */
	assert_int_equal(mkdir(at(f->out, "dir"), 0755), 0);
	put(at(f->out, "dir/precious"), "p");
	assert_int_equal(symlink(f->out, at(f->root, "evil")), 0);
	safefs_remove_tree(f->rootfd, "evil/dir");
	expect_content(at(f->out, "dir/precious"), "p");
	safefs_remove_tree(f->rootfd, "../outside/dir");
	expect_content(at(f->out, "dir/precious"), "p");
	assert_true(lexists(at(f->root, "evil")));
}

/* ---- many files at once: safefs_same, safefs_cmp_path, safefs_batch ---------------- */

/* Open descriptors of this process. */
static int open_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	assert_non_null(d);
	while (readdir(d) != NULL)
		n++;
	closedir(d);
	return n;
}

static mode_t mode_of(const char *path)
{
	struct stat st;
	assert_int_equal(lstat(path, &st), 0);
	return st.st_mode & 07777;
}

static void test_same(void **state)
{
	struct fx *f = *state;
	char err[256];
	struct safefs_dirs d;
	safefs_dirs_init(&d, f->rootfd);
	int fds = open_fds();
	assert_int_equal(write_str(f->rootfd, "d/a.conf", "hello", 0640, err, sizeof(err)), 0);
	assert_true(safefs_same(&d, "d/a.conf", "hello", 5, 0640));
	assert_false(safefs_same(&d, "d/a.conf", "hellO", 5, 0640));    /* same size, other bytes */
	assert_false(safefs_same(&d, "d/a.conf", "hello", 5, 0644));    /* other mode */
	assert_false(safefs_same(&d, "d/a.conf", "hell", 4, 0640));     /* the file is longer */
	assert_false(safefs_same(&d, "d/a.conf", "hello!", 6, 0640));   /* shorter */
	assert_false(safefs_same(&d, "d/absent", "hello", 5, 0640));
	assert_false(safefs_same(&d, "nodir/a.conf", "hello", 5, 0640));
	/* an empty file */
	assert_int_equal(safefs_write(f->rootfd, "d/empty", "", 0, 0644, err, sizeof(err)), 0);
	assert_true(safefs_same(&d, "d/empty", "", 0, 0644));
	assert_false(safefs_same(&d, "d/empty", "x", 1, 0644));
	/* a symlink to a file with the right bytes and mode is not the file */
	put(at(f->out, "right"), "hello");
	assert_int_equal(chmod(at(f->out, "right"), 0640), 0);
	assert_int_equal(symlink(at(f->out, "right"), at(f->root, "d/link.conf")), 0);
	assert_false(safefs_same(&d, "d/link.conf", "hello", 5, 0640));
	/* nor is a file behind a symlinked directory */
	assert_int_equal(symlink(f->out, at(f->root, "evil")), 0);
	assert_false(safefs_same(&d, "evil/right", "hello", 5, 0640));
	/* a directory, and a FIFO (not opened for long: no writer, no wait) */
	assert_int_equal(mkdir(at(f->root, "d/dir"), 0640), 0);
	assert_false(safefs_same(&d, "d/dir", "", 0, 0640));
	assert_int_equal(mkfifo(at(f->root, "d/fifo"), 0640), 0);
	assert_false(safefs_same(&d, "d/fifo", "", 0, 0640));
	/* bad paths */
	assert_false(safefs_same(&d, "d/../d/a.conf", "hello", 5, 0640));
	assert_false(safefs_same(&d, "/etc/passwd", "", 0, 0644));
	assert_false(safefs_same(&d, "d/", "", 0, 0644));
	/* and back to a good one after all that */
	assert_true(safefs_same(&d, "d/a.conf", "hello", 5, 0640));
	safefs_dirs_release(&d);
	assert_int_equal(open_fds(), fds);
}

static void test_dirs_walk_once(void **state)
{
	struct fx *f = *state;
	char err[256];
	struct safefs_dirs d;
	const char *base;
	safefs_dirs_init(&d, f->rootfd);
	int a = safefs_dirs_parent(&d, "x/y/one", true, &base, err, sizeof(err));
	assert_true(a >= 0);
	assert_string_equal(base, "one");
	assert_int_equal(d.opened, 1);
	assert_int_equal(d.made, 2);
	int b = safefs_dirs_parent(&d, "x/y/two", true, &base, err, sizeof(err));
	assert_int_equal(b, a);
	assert_string_equal(base, "two");
	assert_int_equal(d.opened, 1);
	/* the cached directory does not let a bad last component through */
	assert_int_equal(safefs_dirs_parent(&d, "x/y/..", true, &base, err, sizeof(err)), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(safefs_dirs_parent(&d, "x/y/", true, &base, err, sizeof(err)), -1);
	/* another directory is another walk */
	assert_true(safefs_dirs_parent(&d, "x/three", true, &base, err, sizeof(err)) >= 0);
	assert_int_equal(d.opened, 2);
	assert_int_equal(d.made, 2);
	/* the root */
	assert_true(safefs_dirs_parent(&d, "top", false, &base, err, sizeof(err)) >= 0);
	assert_string_equal(base, "top");
	assert_int_equal(safefs_dirs_parent(&d, "/top", false, &base, err, sizeof(err)), -1);
	safefs_dirs_release(&d);
}

static void test_cmp_path_groups_directories(void **state)
{
	(void)state;
	const char *v[] = { "a/z", "a/b/c", "b", "a/y", "a", "ab/x", "a/b/a" };
	qsort(v, sizeof(v) / sizeof(v[0]), sizeof(v[0]), safefs_cmp_path);
	const char *want[] = { "a", "b", "a/y", "a/z", "a/b/a", "a/b/c", "ab/x" };
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		assert_string_equal(v[i], want[i]);
}

/* Writes n files "dN/fI" (i % dirs) through a batch, content "file I
 * (tag)", mode 0600 or 0644; returns the batch, not committed. */
static struct safefs_batch *batch_of(struct fx *f, int n, int dirs, const char *tag)
{
	char err[256];
	struct safefs_batch *b = safefs_batch_new(f->rootfd);
	for (int i = 0; i < n; i++) {
		char path[64], text[64];
		snprintf(path, sizeof(path), "d%d/f%d", i % dirs, i);
		snprintf(text, sizeof(text), "file %d (%s)\n", i, tag);
		if (safefs_batch_write(b, path, text, strlen(text), i % 2 ? 0600 : 0644, err, sizeof(err)) < 0)
			fail_msg("batch write of '%s': %s", path, err);
	}
	assert_int_equal(safefs_batch_count(b), (size_t)n);
	return b;
}

static void expect_batch(struct fx *f, int n, int dirs, const char *tag)
{
	for (int i = 0; i < n; i++) {
		char path[64], text[64];
		snprintf(path, sizeof(path), "d%d/f%d", i % dirs, i);
		snprintf(text, sizeof(text), "file %d (%s)\n", i, tag);
		expect_content(at(f->root, path), text);
		assert_int_equal(mode_of(at(f->root, path)), i % 2 ? 0600 : 0644);
	}
	int tmps;
	for (int k = 0; k < dirs; k++) {
		char dir[16];
		snprintf(dir, sizeof(dir), "d%d", k);
		entries(at(f->root, dir), &tmps);
		assert_int_equal(tmps, 0);
	}
}

static void batch_case(struct fx *f, int n, int dirs)
{
	char err[256];
	int fds = open_fds();
	/* a first batch makes the directories (syncfs), a second replaces
	 * every file in them */
	struct safefs_batch *b = batch_of(f, n, dirs, "one");
	/* until commit, only temp names exist: nothing is live */
	assert_false(lexists(at(f->root, "d0/f0")));
	assert_true(lexists(at(f->root, "d0/.tether-tmp-f0")));
	if (safefs_batch_commit(b, err, sizeof(err)) < 0)
		fail_msg("commit: %s", err);
	safefs_batch_free(b);
	expect_batch(f, n, dirs, "one");
	b = batch_of(f, n, dirs, "two");
	/* the live files are the old ones until commit */
	expect_content(at(f->root, "d0/f0"), "file 0 (one)\n");
	if (safefs_batch_commit(b, err, sizeof(err)) < 0)
		fail_msg("commit: %s", err);
	safefs_batch_free(b);
	expect_batch(f, n, dirs, "two");
	assert_int_equal(files_below(f->root), n);
	assert_int_equal(open_fds(), fds);
}

static void test_batch_few(void **state)
{
	/* 10 files in 3 directories: fsync each file, then each directory */
	batch_case(*state, 10, 3);
}

static void test_batch_sixteen(void **state)
{
	batch_case(*state, 16, 2);
}

static void test_batch_many(void **state)
{
	/* past 16 files: syncfs */
	batch_case(*state, 300, 7);
}

static void test_batch_not_committed_leaves_nothing(void **state)
{
	struct fx *f = *state;
	char err[256];
	int fds = open_fds();
	struct safefs_batch *b = batch_of(f, 20, 2, "old");
	assert_int_equal(safefs_batch_commit(b, err, sizeof(err)), 0);
	safefs_batch_free(b);
	int sizes[] = { 3, 40 };
	for (size_t k = 0; k < 2; k++) {
		b = batch_of(f, sizes[k], 2, "new");
		safefs_batch_free(b);
		expect_batch(f, 20, 2, "old");
		/* the files only the dropped batch had are not there either */
		assert_int_equal(files_below(f->root), 20);
	}
	safefs_batch_free(NULL);
	assert_int_equal(open_fds(), fds);
}

static void test_batch_confined(void **state)
{
	struct fx *f = *state;
	char err[256];
	put(at(f->out, "victim"), "ORIGINAL");
	assert_int_equal(symlink(f->out, at(f->root, "evil")), 0);
	assert_int_equal(mkdir(at(f->root, "d"), 0755), 0);
	assert_int_equal(symlink(at(f->out, "victim"), at(f->root, "d/.tether-tmp-a")), 0);
	assert_int_equal(symlink(at(f->out, "victim"), at(f->root, "d/b")), 0);
	struct safefs_batch *b = safefs_batch_new(f->rootfd);
	assert_int_equal(safefs_batch_write(b, "evil/x", "E", 1, 0644, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "symlink"));
	assert_int_equal(safefs_batch_write(b, "../outside/x", "E", 1, 0644, err, sizeof(err)), -1);
	assert_int_equal(safefs_batch_write(b, "d/a", "A", 1, 0644, err, sizeof(err)), 0);
	assert_int_equal(safefs_batch_write(b, "d/b", "B", 1, 0644, err, sizeof(err)), 0);
	assert_int_equal(safefs_batch_commit(b, err, sizeof(err)), 0);
	safefs_batch_free(b);
	expect_content(at(f->root, "d/a"), "A");
	expect_content(at(f->root, "d/b"), "B");
	assert_int_equal(mode_of(at(f->root, "d/b")), 0644);   /* a file now, not the link */
	expect_content(at(f->out, "victim"), "ORIGINAL");
	int tmps;
	assert_int_equal(entries(f->out, &tmps), 1);
	assert_false(lexists(at(f->out, "x")));
}

static void test_batch_failed_commit(void **state)
{
	struct fx *f = *state;
	char err[256];
	/* a directory where a file should go: its rename fails; the commit
	 * says which, and no temp file is left once the batch is freed */
	assert_int_equal(mkdir(at(f->root, "d"), 0755), 0);
	assert_int_equal(mkdir(at(f->root, "d/m"), 0755), 0);
	put(at(f->root, "d/m/inside"), "i");
	struct safefs_batch *b = safefs_batch_new(f->rootfd);
	assert_int_equal(safefs_batch_write(b, "d/m", "M", 1, 0644, err, sizeof(err)), 0);
	assert_int_equal(safefs_batch_write(b, "d/z", "Z", 1, 0644, err, sizeof(err)), 0);
	assert_int_equal(safefs_batch_commit(b, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "cannot put 'd/m' in place"));
	safefs_batch_free(b);
	expect_content(at(f->root, "d/m/inside"), "i");
	int tmps;
	entries(at(f->root, "d"), &tmps);
	assert_int_equal(tmps, 0);
	/* a write that cannot be made (RLIMIT_FSIZE) fails at once */
	char big[4096];
	memset(big, 'n', sizeof(big));
	struct rlimit old, now;
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	now = old;
	now.rlim_cur = 100;
	b = safefs_batch_new(f->rootfd);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &now), 0);
	int rc = safefs_batch_write(b, "d/big", big, sizeof(big), 0644, err, sizeof(err));
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	assert_int_equal(rc, -1);
	assert_non_null(strstr(err, "d/big"));
	assert_int_equal(safefs_batch_count(b), 0);
	safefs_batch_free(b);
	entries(at(f->root, "d"), &tmps);
	assert_int_equal(tmps, 0);
	assert_false(lexists(at(f->root, "d/big")));
}

int main(void)
{
	signal(SIGXFSZ, SIG_IGN);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_writes_below_root, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_paths_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_symlinked_directory_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_symlink_at_final_path_replaced, setup, teardown),
		cmocka_unit_test_setup_teardown(test_symlink_planted_at_temp_name, setup, teardown),
		cmocka_unit_test_setup_teardown(test_file_where_directory_needed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_limits_and_absence, setup, teardown),
		cmocka_unit_test_setup_teardown(test_move_between_roots, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_is_atomic, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failed_write_keeps_old_content, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mode_regardless_of_umask, setup, teardown),
		cmocka_unit_test_setup_teardown(test_remove_tree_does_not_follow_symlinks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_remove_tree_confined, setup, teardown),
		cmocka_unit_test_setup_teardown(test_same, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dirs_walk_once, setup, teardown),
		cmocka_unit_test(test_cmp_path_groups_directories),
		cmocka_unit_test_setup_teardown(test_batch_few, setup, teardown),
		cmocka_unit_test_setup_teardown(test_batch_sixteen, setup, teardown),
		cmocka_unit_test_setup_teardown(test_batch_many, setup, teardown),
		cmocka_unit_test_setup_teardown(test_batch_not_committed_leaves_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_batch_confined, setup, teardown),
		cmocka_unit_test_setup_teardown(test_batch_failed_commit, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
