/* consumer/safefs.c: confined, atomic file operations (see
 * consumer/safefs.h). */
#include "consumer/safefs.h"
#include "util.h"
#include "xmalloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DIR_MODE 0755

static int bad_component(const char *c, size_t len)
{
	return len == 0 || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.');
}

/* safefs_parent, counting into *made the directories it created */
static int walk(int rootfd, const char *path, bool create, const char **base, unsigned long *made, char *err,
		size_t errlen)
{
	if (!path[0] || path[0] == '/') {
		snprintf(err, errlen, "path '%s' is not relative", path);
		errno = EINVAL;
		return -1;
	}
	/* every component is checked before anything is created */
	for (const char *c = path;;) {
		const char *slash = strchr(c, '/');
		size_t len = slash ? (size_t)(slash - c) : strlen(c);
		if (bad_component(c, len) || len > 255) {
			snprintf(err, errlen, "path '%s' has a '.', '..' or empty component", path);
			errno = EINVAL;
			return -1;
		}
		if (!slash)
			break;
		c = slash + 1;
	}
	int fd = dup(rootfd);
	if (fd < 0) {
		snprintf(err, errlen, "cannot open the output directory: %s", strerror(errno));
		return -1;
	}
	const char *comp = path;
	for (;;) {
		const char *slash = strchr(comp, '/');
		size_t len = slash ? (size_t)(slash - comp) : strlen(comp);
		if (bad_component(comp, len) || len > 255) {
			close(fd);
			snprintf(err, errlen, "path '%s' has a '.', '..' or empty component", path);
			errno = EINVAL;
			return -1;
		}
		if (!slash) {
			*base = comp;
			return fd;
		}
		char name[256];
		memcpy(name, comp, len);
		name[len] = '\0';
		int next = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0 && errno == ENOENT && create) {
			if (mkdirat(fd, name, DIR_MODE) < 0 && errno != EEXIST) {
				int e = errno;
				snprintf(err, errlen, "cannot create directory for '%s': %s", path, strerror(e));
				close(fd);
				errno = e;
				return -1;
			}
			if (made)
				(*made)++;
			next = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		}
		if (next < 0) {
			int e = errno;
			if (e == ELOOP || e == ENOTDIR)
				snprintf(err, errlen, "path '%s': '%s' is a symlink or not a directory", path, name);
			else
				snprintf(err, errlen, "path '%s': cannot open '%s': %s", path, name, strerror(e));
			close(fd);
			errno = e;
			return -1;
		}
		close(fd);
		fd = next;
		comp = slash + 1;
	}
}

/* Writes data to dfd's ".tether-tmp-BASE" with mode, fsync'd when sync.
 * A fixed temp name beside the target (no resource may name a ".tether*"
 * file, so it is ours). Whatever sits there -- a leftover of a crash, or a
 * planted symlink -- is unlinked, never followed, and O_EXCL|O_NOFOLLOW
 * refuses anything planted again in between. */
int safefs_parent(int rootfd, const char *path, bool create, const char **base, char *err, size_t errlen)
{
	return walk(rootfd, path, create, base, NULL, err, errlen);
}

static int write_temp(int dfd, const char *base, const char *path, const void *data, size_t len, mode_t mode,
		      bool sync, int *keep, char *tmp, size_t tmpcap, char *err, size_t errlen)
{
	snprintf(tmp, tmpcap, ".tether-tmp-%s", base);
	unlinkat(dfd, tmp, 0);
	int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		int e = errno;
		snprintf(err, errlen, "cannot create a temp file for '%s': %s", path, strerror(e));
		errno = e;
		return -1;
	}
	if (write_full(fd, data, len) < 0 || fchmod(fd, mode) < 0 || (sync && fsync(fd) < 0)) {
		int e = errno;
		snprintf(err, errlen, "cannot write '%s': %s", path, strerror(e));
		close(fd);
		unlinkat(dfd, tmp, 0);
		errno = e;
		return -1;
	}
	if (keep) {
		*keep = fd;
		return 0;
	}
	if (close(fd) < 0) {
		int e = errno;
		snprintf(err, errlen, "cannot write '%s': %s", path, strerror(e));
		unlinkat(dfd, tmp, 0);
		errno = e;
		return -1;
	}
	return 0;
}

int safefs_write(int rootfd, const char *path, const void *data, size_t len, mode_t mode, char *err, size_t errlen)
{
	const char *base;
	int dfd = safefs_parent(rootfd, path, true, &base, err, errlen);
	if (dfd < 0)
		return -1;
	char tmp[300];
	if (write_temp(dfd, base, path, data, len, mode, true, NULL, tmp, sizeof(tmp), err, errlen) < 0) {
		int e = errno;
		close(dfd);
		errno = e;
		return -1;
	}
	if (renameat(dfd, tmp, dfd, base) < 0 || fsync(dfd) < 0) {
		int e = errno;
		snprintf(err, errlen, "cannot put '%s' in place: %s", path, strerror(e));
		unlinkat(dfd, tmp, 0);
		close(dfd);
		errno = e;
		return -1;
	}
	close(dfd);
	return 0;
}

char *safefs_read(int rootfd, const char *path, size_t max, size_t *len, mode_t *mode)
{
	char err[256];
	const char *base;
	int dfd = safefs_parent(rootfd, path, false, &base, err, sizeof(err));
	if (dfd < 0)
		return NULL;
	int fd = openat(dfd, base, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	close(dfd);
	if (fd < 0)
		return NULL;
	char *data = read_fd_limited(fd, max, len, mode);
	int e = errno;
	close(fd);
	errno = e;
	return data;
}

int safefs_move(int fromfd, const char *from, int tofd, const char *to, char *err, size_t errlen)
{
	const char *fbase, *tbase;
	int fd1 = safefs_parent(fromfd, from, false, &fbase, err, errlen);
	if (fd1 < 0)
		return -1;
	int fd2 = safefs_parent(tofd, to, true, &tbase, err, errlen);
	if (fd2 < 0) {
		close(fd1);
		return -1;
	}
	int rc = renameat(fd1, fbase, fd2, tbase);
	int e = errno;
	if (rc < 0)
		snprintf(err, errlen, "cannot move '%s' to '%s': %s", from, to, strerror(e));
	close(fd1);
	close(fd2);
	errno = e;
	return rc;
}

int safefs_unlink(int rootfd, const char *path, char *err, size_t errlen)
{
	const char *base;
	int dfd = safefs_parent(rootfd, path, false, &base, err, errlen);
	if (dfd < 0)
		return errno == ENOENT ? 0 : -1;
	int rc = unlinkat(dfd, base, 0);
	int e = errno;
	close(dfd);
	if (rc < 0 && e != ENOENT) {
		snprintf(err, errlen, "cannot remove '%s': %s", path, strerror(e));
		errno = e;
		return -1;
	}
	return 0;
}

static int remove_children(int dfd)
{
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return -1;
	}
	int rc = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (unlinkat(dirfd(d), de->d_name, 0) == 0)
			continue;
		int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0 || remove_children(sub) < 0 || unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR) < 0)
			rc = -1;
	}
	closedir(d);
	return rc;
}

int safefs_remove_tree(int rootfd, const char *path)
{
	/* walk to the parent like every other path: O_NOFOLLOW alone guards
	 * only the last component */
	char err[256];
	const char *base;
	int dfd = safefs_parent(rootfd, path, false, &base, err, sizeof(err));
	if (dfd < 0)
		return errno == ENOENT ? 0 : -1;
	int rc;
	int fd = openat(dfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		rc = errno == ENOENT ? 0 : unlinkat(dfd, base, 0);
	else if (remove_children(fd) < 0)
		rc = -1;
	else
		rc = unlinkat(dfd, base, AT_REMOVEDIR);
	int e = errno;
	close(dfd);
	errno = e;
	return rc;
}

int safefs_sync_parent(int rootfd, const char *path, char *err, size_t errlen)
{
	const char *base;
	int dfd = safefs_parent(rootfd, path, false, &base, err, errlen);
	if (dfd < 0)
		return errno == ENOENT ? 0 : -1;
	int rc = fsync(dfd);
	int e = errno;
	close(dfd);
	if (rc < 0) {
		snprintf(err, errlen, "cannot fsync the directory of '%s': %s", path, strerror(e));
		errno = e;
	}
	return rc;
}

/* ---- many files at once ---------------------------------------------------- */

void safefs_dirs_init(struct safefs_dirs *d, int rootfd)
{
	d->rootfd = rootfd;
	d->dir = NULL;
	d->fd = -1;
	d->opened = 0;
	d->made = 0;
}

void safefs_dirs_release(struct safefs_dirs *d)
{
	if (d->fd >= 0)
		close(d->fd);
	free(d->dir);
	d->dir = NULL;
	d->fd = -1;
}

int safefs_dirs_parent(struct safefs_dirs *d, const char *path, bool create, const char **base, char *err,
		       size_t errlen)
{
	const char *slash = strrchr(path, '/');
	size_t dlen = slash ? (size_t)(slash - path) : 0;
	/* the cached directory was reached by a checked walk of the same
	 * directory part; only the last component is new */
	if (d->fd >= 0 && path[0] != '/' && strlen(d->dir) == dlen && memcmp(d->dir, path, dlen) == 0) {
		const char *b = slash ? slash + 1 : path;
		size_t blen = strlen(b);
		if (bad_component(b, blen) || blen > 255) {
			snprintf(err, errlen, "path '%s' has a '.', '..' or empty component", path);
			errno = EINVAL;
			return -1;
		}
		*base = b;
		return d->fd;
	}
	safefs_dirs_release(d);
	int fd = walk(d->rootfd, path, create, base, &d->made, err, errlen);
	if (fd < 0)
		return -1;
	d->fd = fd;
	d->dir = xstrndup(path, dlen);
	d->opened++;
	return fd;
}

int safefs_cmp_path(const void *a, const void *b)
{
	const char *x = *(const char *const *)a, *y = *(const char *const *)b;
	const char *xs = strrchr(x, '/'), *ys = strrchr(y, '/');
	size_t xl = xs ? (size_t)(xs - x) : 0, yl = ys ? (size_t)(ys - y) : 0;
	int c = memcmp(x, y, xl < yl ? xl : yl);
	if (c == 0 && xl != yl)
		c = xl < yl ? -1 : 1;
	return c ? c : strcmp(x, y);
}

bool safefs_same(struct safefs_dirs *d, const char *path, const void *data, size_t len, mode_t mode)
{
	char err[256];
	const char *base;
	int dfd = safefs_dirs_parent(d, path, false, &base, err, sizeof(err));
	if (dfd < 0)
		return false;
	int fd = openat(dfd, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return false;
	struct stat st;
	bool same = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 07777) == mode &&
		    st.st_size >= 0 && (uint64_t)st.st_size == (uint64_t)len;
	if (same && len > 0) {
		/* one byte more than expected: a file that grew since fstat differs */
		char *have = xmalloc(len + 1);
		size_t n = 0;
		while (n < len + 1) {
			ssize_t r = read(fd, have + n, len + 1 - n);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				break;
			n += (size_t)r;
		}
		same = n == len && memcmp(have, data, len) == 0;
		free_secret(have, len + 1);   /* it may be a secret's key */
	}
	close(fd);
	return same;
}

/* At most this many files are made durable with one fsync each (after all
 * are written), in a batch that made no directory: for a few files that is
 * cheaper than syncfs when the file system holds other processes' unwritten
 * data. A larger batch takes syncfs: measured with 1,000 files of 100
 * bytes, one fsync per file, even all issued after the last write, took
 * about 1 s on ext4; the whole batch with syncfs, writes included, 40-80
 * ms (docs/BENCHMARKS.md, "Boot"). */
#define BATCH_FSYNC_MAX 16

struct batch_dev {
	dev_t dev;
	int fd;                  /* a directory on it, for syncfs */
};

struct safefs_batch {
	struct safefs_dirs dirs;
	char **paths;            /* written to their temp names */
	size_t n, cap;
	size_t renamed;          /* after the sort: paths[0..renamed) are in place */
	int fds[BATCH_FSYNC_MAX]; /* the temp files, open, while n <= BATCH_FSYNC_MAX */
	bool many;               /* more than that: syncfs */
	struct batch_dev *devs;  /* the file systems written */
	size_t ndevs;
};

struct safefs_batch *safefs_batch_new(int rootfd)
{
	struct safefs_batch *b = xcalloc(1, sizeof(*b));
	safefs_dirs_init(&b->dirs, rootfd);
	return b;
}

size_t safefs_batch_count(const struct safefs_batch *b)
{
	return b->n;
}

/* Notes the file system of a directory written in (a mount point under
 * the root is another one, with its own syncfs). */
static int note_dev(struct safefs_batch *b, int dfd, char *err, size_t errlen)
{
	struct stat st;
	if (fstat(dfd, &st) < 0) {
		snprintf(err, errlen, "cannot stat a directory of the output: %s", strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < b->ndevs; i++)
		if (b->devs[i].dev == st.st_dev)
			return 0;
	int fd = dup(dfd);
	if (fd < 0) {
		snprintf(err, errlen, "cannot keep a directory of the output open: %s", strerror(errno));
		return -1;
	}
	b->devs = xrealloc(b->devs, (b->ndevs + 1) * sizeof(*b->devs));
	b->devs[b->ndevs++] = (struct batch_dev){ st.st_dev, fd };
	return 0;
}

static void close_fds(struct safefs_batch *b)
{
	for (size_t i = 0; !b->many && i < b->n; i++)
		close(b->fds[i]);
	b->many = true;
}

int safefs_batch_write(struct safefs_batch *b, const char *path, const void *data, size_t len, mode_t mode,
		       char *err, size_t errlen)
{
	const char *base;
	unsigned long opened = b->dirs.opened;
	int dfd = safefs_dirs_parent(&b->dirs, path, true, &base, err, errlen);
	if (dfd < 0)
		return -1;
	if (b->dirs.opened != opened && note_dev(b, dfd, err, errlen) < 0)
		return -1;
	if (!b->many && b->n == BATCH_FSYNC_MAX)
		close_fds(b);
	char tmp[300];
	int fd = -1;
	if (write_temp(dfd, base, path, data, len, mode, false, b->many ? NULL : &fd, tmp, sizeof(tmp), err,
		       errlen) < 0)
		return -1;
	if (b->n == b->cap) {
		b->cap = b->cap ? 2 * b->cap : 64;
		b->paths = xrealloc(b->paths, b->cap * sizeof(*b->paths));
	}
	if (!b->many)
		b->fds[b->n] = fd;
	b->paths[b->n++] = xstrdup(path);
	return 0;
}

static int sync_devs(struct safefs_batch *b, char *err, size_t errlen)
{
	for (size_t i = 0; i < b->ndevs; i++) {
		if (syncfs(b->devs[i].fd) < 0) {
			snprintf(err, errlen, "cannot make the output durable (syncfs): %s", strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* The few-files way: each temp file fsync'd (all written before the
 * first fsync), then, after the renames, each directory once. */
static int fsync_files(struct safefs_batch *b, char *err, size_t errlen)
{
	for (size_t i = 0; i < b->n; i++) {
		if (fsync(b->fds[i]) < 0) {
			snprintf(err, errlen, "cannot write '%s': %s", b->paths[i], strerror(errno));
			return -1;
		}
	}
	close_fds(b);
	return 0;
}

static int fsync_dirs(struct safefs_batch *b, char *err, size_t errlen)
{
	unsigned long seen = b->dirs.opened - 1;
	safefs_dirs_release(&b->dirs);
	for (size_t i = 0; i < b->n; i++) {
		const char *base;
		int dfd = safefs_dirs_parent(&b->dirs, b->paths[i], false, &base, err, errlen);
		if (dfd < 0)
			return -1;
		if (b->dirs.opened != seen && fsync(dfd) < 0) {
			snprintf(err, errlen, "cannot fsync the directory of '%s': %s", b->paths[i], strerror(errno));
			return -1;
		}
		seen = b->dirs.opened;
	}
	return 0;
}

int safefs_batch_commit(struct safefs_batch *b, char *err, size_t errlen)
{
	if (b->n == 0)
		return 0;
	/* a new directory's name must be made durable in its parent, which
	 * syncfs covers and per-directory fsyncs do not */
	if (b->dirs.made)
		close_fds(b);
	if (note_dev(b, b->dirs.rootfd, err, errlen) < 0)
		return -1;
	/* 1. every temp file's bytes durable, before any of them is visible */
	if ((b->many ? sync_devs(b, err, errlen) : fsync_files(b, err, errlen)) < 0)
		return -1;
	/* 2. the switch: one rename per file, each directory walked once */
	qsort(b->paths, b->n, sizeof(*b->paths), safefs_cmp_path);
	for (; b->renamed < b->n; b->renamed++) {
		const char *path = b->paths[b->renamed], *base;
		int dfd = safefs_dirs_parent(&b->dirs, path, false, &base, err, errlen);
		if (dfd < 0)
			return -1;
		char tmp[300];
		snprintf(tmp, sizeof(tmp), ".tether-tmp-%s", base);
		if (renameat(dfd, tmp, dfd, base) < 0) {
			snprintf(err, errlen, "cannot put '%s' in place: %s", path, strerror(errno));
			return -1;
		}
	}
	/* 3. the renames (and the directories made for them) durable */
	return b->dirs.made ? sync_devs(b, err, errlen) : fsync_dirs(b, err, errlen);
}

void safefs_batch_free(struct safefs_batch *b)
{
	if (!b)
		return;
	close_fds(b);
	for (size_t i = 0; i < b->n; i++) {
		const char *base;
		char err[256];
		if (i >= b->renamed) {
			int dfd = safefs_dirs_parent(&b->dirs, b->paths[i], false, &base, err, sizeof(err));
			if (dfd >= 0) {
				char tmp[300];
				snprintf(tmp, sizeof(tmp), ".tether-tmp-%s", base);
				unlinkat(dfd, tmp, 0);
			}
		}
		free(b->paths[i]);
	}
	free(b->paths);
	for (size_t i = 0; i < b->ndevs; i++)
		close(b->devs[i].fd);
	free(b->devs);
	safefs_dirs_release(&b->dirs);
	free(b);
}
