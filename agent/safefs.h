/* safefs.h: file operations confined to a root directory: every path is
 * relative, walked one component at a time with O_NOFOLLOW, so no symlink
 * (planted before or swapped during the walk) leads out of the root; files
 * are written to a fresh temp name (O_EXCL|O_NOFOLLOW), fsync'd, renamed
 * over the target, and the directory fsync'd. Errors come back as -1 with
 * errno and a message. */
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

#endif
