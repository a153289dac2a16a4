/* consumer/safefs.h: file operations confined to a root directory: every path
 * is relative, walked one component at a time with O_NOFOLLOW, so no symlink
 * (planted before or swapped during the walk) leads out of the root; files
 * are written to a fresh temp name (O_EXCL|O_NOFOLLOW), fsync'd, renamed over
 * the target, and the directory fsync'd. Errors come back as -1 with errno
 * and a message. For many files at once (a boot): a walk that keeps its last
 * directory open (safefs_dirs), a cheap comparison (safefs_same) and a batch
 * of atomic writes made durable together (safefs_batch). */
#ifndef TETHER_SAFEFS_H
#define TETHER_SAFEFS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Opens the directory holding the last component of path (creating the
 * directories on the way when create), and points *base at that last
 * component. Returns a directory fd, or -1. */
int safefs_parent(int rootfd, const char *path, bool create, const char **base, char *err, size_t errlen);
/* Writes data to path atomically, with mode. */
int safefs_write(int rootfd, const char *path, const void *data, size_t len, mode_t mode, char *err, size_t errlen);
/* Reads path into a new buffer (NULL and errno ENOENT when absent); *mode
 * gets its permission bits. Refuses files over max. */
char *safefs_read(int rootfd, const char *path, size_t max, size_t *len, mode_t *mode);
/* Moves from (under fromfd) to to (under tofd), creating to's directories. */
int safefs_move(int fromfd, const char *from, int tofd, const char *to, char *err, size_t errlen);
/* Removes a file; absent is not an error. */
int safefs_unlink(int rootfd, const char *path, char *err, size_t errlen);
/* Removes a directory tree under rootfd without following symlinks. */
int safefs_remove_tree(int rootfd, const char *path);
/* fsyncs the directory holding path (the root itself for a bare name). */
int safefs_sync_parent(int rootfd, const char *path, char *err, size_t errlen);

/* ---- many files at once ---------------------------------------------------- */

/* safefs_parent that keeps the directory it opened last, so paths taken in
 * order of their directory (safefs_cmp_path) walk each directory once. */
struct safefs_dirs {
	int rootfd;              /* borrowed */
	char *dir;               /* the directory part of the last path, or NULL */
	int fd;                  /* its fd, or -1 */
	unsigned long opened;    /* directories opened so far */
	unsigned long made;      /* directories created so far */
};
void safefs_dirs_init(struct safefs_dirs *d, int rootfd);
void safefs_dirs_release(struct safefs_dirs *d);
/* As safefs_parent, but the fd returned is the cache's: do not close it;
 * it is valid until the next call or the release. */
int safefs_dirs_parent(struct safefs_dirs *d, const char *path, bool create, const char **base, char *err,
		       size_t errlen);
/* Orders paths by their directory, then by name (for qsort over char *). */
int safefs_cmp_path(const void *a, const void *b);

/* True when path is a regular file (not followed if a symlink) with
 * exactly these bytes and permission bits. Reads it only when its size and
 * mode already match. */
bool safefs_same(struct safefs_dirs *d, const char *path, const void *data, size_t len, mode_t mode);

/* A batch of atomic writes made durable together: safefs_batch_write
 * writes each file to its temp name beside the target (as safefs_write,
 * without the fsyncs); safefs_batch_commit makes every temp file durable
 * at once, then renames each over its target, then makes the renames and
 * any directory made for them durable. Durable is one syncfs(2) per file
 * system written, before and after the renames; a batch of a few files
 * (16) that made no directory fsyncs each file and each directory instead.
 * After a crash a target holds its old bytes or all of the new ones; once
 * commit returns 0 every file is in place and durable. safefs_batch_free
 * removes the temp files of a batch not committed. */
struct safefs_batch;
struct safefs_batch *safefs_batch_new(int rootfd);
int safefs_batch_write(struct safefs_batch *b, const char *path, const void *data, size_t len, mode_t mode,
		       char *err, size_t errlen);
size_t safefs_batch_count(const struct safefs_batch *b);
int safefs_batch_commit(struct safefs_batch *b, char *err, size_t errlen);
void safefs_batch_free(struct safefs_batch *b);

#endif
