/* safefs.c: confined, atomic file operations (see safefs.h). */
#include "safefs.h"
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

int safefs_parent(int rootfd, const char *path, bool create, const char **base, char *err, size_t errlen)
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

int safefs_write(int rootfd, const char *path, const void *data, size_t len, mode_t mode, char *err, size_t errlen)
{
	const char *base;
	int dfd = safefs_parent(rootfd, path, true, &base, err, errlen);
	if (dfd < 0)
		return -1;
	/* A fixed temp name beside the target (no resource may name a
	 * ".tether*" file, so it is ours). Whatever sits there -- a leftover
	 * of a crash, or a planted symlink -- is unlinked, never followed, and
	 * O_EXCL|O_NOFOLLOW refuses anything planted again in between. */
	char tmp[300];
	snprintf(tmp, sizeof(tmp), ".tether-tmp-%s", base);
	unlinkat(dfd, tmp, 0);
	int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		int e = errno;
		snprintf(err, errlen, "cannot create a temp file for '%s': %s", path, strerror(e));
		close(dfd);
		errno = e;
		return -1;
	}
	if (write_full(fd, data, len) < 0 || fchmod(fd, mode) < 0 || fsync(fd) < 0) {
		int e = errno;
		snprintf(err, errlen, "cannot write '%s': %s", path, strerror(e));
		close(fd);
		unlinkat(dfd, tmp, 0);
		close(dfd);
		errno = e;
		return -1;
	}
	close(fd);
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
