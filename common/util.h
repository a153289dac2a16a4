/* util.h: small helpers shared by every binary: strict number parsing,
 * clocks, string predicates. Nothing here allocates unless it says so. */
#ifndef TETHER_UTIL_H
#define TETHER_UTIL_H

#include <dirent.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Strict decimal parse of a whole string: digits only, no sign, no spaces,
 * no overflow. Returns 0 or -1. */
int parse_u64(const char *s, uint64_t *out);
/* Same as parse_u64, limited to [min, max]. */
int parse_uint_range(const char *s, uint64_t min, uint64_t max, uint64_t *out);
/* Parses a duration in seconds with an optional fraction ("2", "0.5"). */
int parse_seconds(const char *s, double min, double max, double *out);
/* Parses "yes/no/true/false/1/0/on/off". */
int parse_bool(const char *s, bool *out);

/* Monotonic milliseconds, for timeouts. */
int64_t now_ms(void);
/* Monotonic microseconds, for measuring. */
int64_t now_us(void);
/* pthread_cond_timedwait for at most ms milliseconds from now (m held). */
void cond_wait_ms(pthread_cond_t *c, pthread_mutex_t *m, int64_t ms);
/* Wall-clock seconds since the epoch, for records people read. */
int64_t wall_seconds(void);
/* Wall-clock milliseconds since the epoch. */
int64_t wall_ms(void);

bool str_starts_with(const char *s, const char *prefix);
/* A hex digit's value (0-9, a-f, A-F), or -1. */
int hex_digit(int c);
/* Removes leading and trailing ASCII white space in place; returns s. */
char *str_trim(char *s);
/* Constant-time comparison of two NUL-terminated secrets. */
bool str_secret_equal(const char *a, const char *b);
/* s made fit for an error message or a log line, when it came from a peer
 * (a JSON key, a field): printable ASCII as it is, a backslash and every
 * other byte as \xNN; at most STR_SHOW_MAX bytes of s, then "...". Writes
 * into out (STR_SHOW_BUF bytes) and returns it; NULL shows as "". */
#define STR_SHOW_MAX 64
#define STR_SHOW_BUF (STR_SHOW_MAX * 4 + 4)
const char *str_show(const char *s, char out[STR_SHOW_BUF]);

/* Reads a whole small file into a new allocated NUL-terminated buffer.
 * Refuses files over max bytes. Returns NULL and sets errno on failure. */
char *read_file_limited(const char *path, size_t max, size_t *len);
/* The same from an open regular file; *mode (may be NULL) gets its
 * permission bits. */
char *read_fd_limited(int fd, size_t max, size_t *len, mode_t *mode);
/* The same for files that hold a secret (a key, a token): no copy of it is
 * left in freed memory on the way. Free the result with free_secret. */
char *read_secret_file(const char *path, size_t max, size_t *len);
char *read_secret_fd(int fd, size_t max, size_t *len, mode_t *mode);
/* A secret file only its owner may read (a signing key, a password):
 * read as above, or NULL with err naming it as what ("signing key") --
 * unreadable, or open to group or others. Never quotes its content. */
char *read_owner_secret(const char *path, size_t max, const char *what, size_t *len, char *err, size_t errlen);
/* A key file (a node key, a recovery key): as read_owner_secret, and also
 * never through a symbolic link, never waiting on a FIFO or a device (only
 * a regular file), and only one the effective user owns: someone who can
 * write into its directory cannot plant a key of their own. */
char *read_key_file(const char *path, size_t max, const char *what, size_t *len, char *err, size_t errlen);
/* Wipes len bytes of s, then frees it (NULL is fine). */
void free_secret(char *s, size_t len);
/* Replaces path with data, whole or not at all: a temp file beside it
 * (path.tmp, created anew, never through a link), written, fsync'd when
 * durable, then renamed over path. Returns 0, or -1 with errno. */
int write_file_replace(const char *path, const void *data, size_t len, mode_t mode, bool durable);
/* Puts data at path durably: a new temp file beside it with a unique name
 * (path.tmp.XXXXXX, mode, never through a link), written and fsync'd, then
 * renamed over path (replace) or link(2)ed to it (!replace: an existing
 * path is never replaced; -1 with EEXIST), then the directory fsync'd so
 * the name survives a power loss. The temp file never stays behind.
 * Returns 0, or -1 with errno. */
int write_file_durable(const char *path, const void *data, size_t len, mode_t mode, bool replace);
/* fsyncs the directory that holds path. Returns 0, or -1 with errno. */
int fsync_parent_dir(const char *path);
/* Writes all of data, retrying short writes and EINTR. Returns 0 or -1. */
int write_full(int fd, const void *data, size_t len);
/* A new listing of the directory name below dirfd ("." for dirfd itself),
 * never through a symlink. Not fdopendir(dup(dirfd)): a dup shares its read
 * position with dirfd, so every listing after the first would come back
 * empty. NULL with errno on failure. */
DIR *opendir_at(int dirfd, const char *name);

#endif
