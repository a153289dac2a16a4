/* util.c: strict parsing, clocks and string helpers (see util.h). */
#include "util.h"
#include "xmalloc.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int parse_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	if (!s || !*s)
		return -1;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		unsigned d = (unsigned)(*p - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

int parse_uint_range(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t v;
	if (parse_u64(s, &v) < 0 || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

int parse_seconds(const char *s, double min, double max, double *out)
{
	if (!s || !*s)
		return -1;
	/* digits, at most one dot, digits: no exponents, signs, hex or inf */
	int dots = 0, digits = 0;
	for (const char *p = s; *p; p++) {
		if (*p == '.')
			dots++;
		else if (*p >= '0' && *p <= '9')
			digits++;
		else
			return -1;
	}
	if (dots > 1 || digits == 0 || digits > 12)
		return -1;
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

int parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "1", "yes", "true", "on" };
	static const char *const no[] = { "0", "no", "false", "off" };
	for (size_t i = 0; i < 4; i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = true;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = false;
			return 0;
		}
	}
	return -1;
}

int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void cond_wait_ms(pthread_cond_t *c, pthread_mutex_t *m, int64_t ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_cond_timedwait(c, m, &ts);
}

int64_t wall_seconds(void)
{
	return (int64_t)time(NULL);
}

int64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int hex_digit(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

bool str_starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

char *str_trim(char *s)
{
	char *start = s;
	while (*start && isspace((unsigned char)*start))
		start++;
	size_t n = strlen(start);
	while (n > 0 && isspace((unsigned char)start[n - 1]))
		n--;
	memmove(s, start, n);
	s[n] = '\0';
	return s;
}

bool str_secret_equal(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned char diff = (unsigned char)(la != lb);
	size_t n = la > lb ? la : lb;
	for (size_t i = 0; i < n; i++) {
		unsigned char ca = i < la ? (unsigned char)a[i] : 0;
		unsigned char cb = i < lb ? (unsigned char)b[i] : 0;
		diff |= (unsigned char)(ca ^ cb);
	}
	return diff == 0;
}

const char *str_show(const char *s, char out[STR_SHOW_BUF])
{
	static const char hex[] = "0123456789abcdef";
	size_t i = 0, o = 0;
	if (!s)
		s = "";
	for (; s[i] && i < STR_SHOW_MAX; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c < 0x7f && c != '\\') {
			out[o++] = (char)c;
		} else {
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	if (s[i]) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o] = '\0';
	return out;
}

int write_full(int fd, const void *data, size_t len)
{
	const char *p = data;
	while (len > 0) {
		ssize_t w = write(fd, p, len);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

/* Frees a buffer that may hold a secret: wiped first. */
static void drop(char *data, size_t cap, bool secret)
{
	if (data && secret)
		explicit_bzero(data, cap);
	free(data);
}

/* Grows data from cap to ncap bytes; a secret's old copy is wiped (realloc
 * would leave it in freed memory). */
static char *grow(char *data, size_t cap, size_t ncap, bool secret)
{
	if (!secret)
		return xrealloc(data, ncap);
	char *nd = xmalloc(ncap);
	memcpy(nd, data, cap);
	drop(data, cap, true);
	return nd;
}

static char *read_fd(int fd, size_t max, size_t *len, mode_t *mode, bool secret)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return NULL;
	if (!S_ISREG(st.st_mode)) {
		errno = EINVAL;
		return NULL;
	}
	if ((uint64_t)st.st_size > max) {
		errno = EFBIG;
		return NULL;
	}
	/* the size is a hint: the file may grow or shrink while we read (one
	 * byte more than it says, so a file that stays as it is needs no
	 * second buffer) */
	size_t cap = (size_t)st.st_size + 2, n = 0;
	if (cap > max + 1)
		cap = max + 1;
	char *data = xmalloc(cap);
	for (;;) {
		if (n + 1 >= cap) {
			if (n >= max) {
				/* max bytes read: one more byte says whether that was all */
				char c;
				ssize_t r = read(fd, &c, 1);
				if (r < 0 && errno == EINTR)
					continue;
				if (r == 0)
					break;
				int e = r > 0 ? EFBIG : errno;
				drop(data, cap, secret);
				errno = e;
				return NULL;
			}
			size_t ncap = cap * 2 > max + 1 ? max + 1 : cap * 2;
			data = grow(data, cap, ncap, secret);
			cap = ncap;
		}
		ssize_t r = read(fd, data + n, cap - n - 1);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			drop(data, cap, secret);
			errno = e;
			return NULL;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	if (n > max) {
		drop(data, cap, secret);
		errno = EFBIG;
		return NULL;
	}
	data[n] = '\0';
	if (len)
		*len = n;
	if (mode)
		*mode = st.st_mode & 07777;
	return data;
}

char *read_fd_limited(int fd, size_t max, size_t *len, mode_t *mode)
{
	return read_fd(fd, max, len, mode, false);
}

char *read_secret_fd(int fd, size_t max, size_t *len, mode_t *mode)
{
	return read_fd(fd, max, len, mode, true);
}

static char *read_path(const char *path, size_t max, size_t *len, bool secret)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	char *data = read_fd(fd, max, len, NULL, secret);
	int e = errno;
	close(fd);
	errno = e;
	return data;
}

char *read_file_limited(const char *path, size_t max, size_t *len)
{
	return read_path(path, max, len, false);
}

char *read_secret_file(const char *path, size_t max, size_t *len)
{
	return read_path(path, max, len, true);
}

char *read_owner_secret(const char *path, size_t max, const char *what, size_t *len, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "cannot open %s '%s': %s", what, path, strerror(errno));
		return NULL;
	}
	mode_t mode = 0;
	char *s = read_secret_fd(fd, max, len, &mode);
	int e = errno;
	close(fd);
	if (!s) {
		snprintf(err, errlen, "cannot read %s '%s': %s", what, path, strerror(e));
		return NULL;
	}
	if (mode & 077) {
		snprintf(err, errlen, "%s '%s' is accessible by group or others (mode %04o): chmod 600 it", what, path,
			 (unsigned)(mode & 07777));
		free_secret(s, *len);
		return NULL;
	}
	return s;
}

char *read_key_file(const char *path, size_t max, const char *what, size_t *len, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0) {
		if (errno == ELOOP)
			snprintf(err, errlen, "%s '%s' is a symbolic link: give the file itself (a key is never read "
				 "through a link)", what, path);
		else
			snprintf(err, errlen, "cannot open %s '%s': %s", what, path, strerror(errno));
		return NULL;
	}
	struct stat st;
	char *s = NULL;
	if (fstat(fd, &st) < 0) {
		snprintf(err, errlen, "cannot read %s '%s': %s", what, path, strerror(errno));
	} else if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s '%s' is not a regular file", what, path);
	} else if (st.st_uid != geteuid()) {
		snprintf(err, errlen, "%s '%s' belongs to uid %u, not to this user (uid %u): a key file must be the "
			 "user's own (chown it, or move it away and make a new one)", what, path, (unsigned)st.st_uid,
			 (unsigned)geteuid());
	} else if (st.st_mode & 077) {
		snprintf(err, errlen, "%s '%s' is accessible by group or others (mode %04o): chmod 600 it", what, path,
			 (unsigned)(st.st_mode & 07777));
	} else if (!(s = read_secret_fd(fd, max, len, NULL))) {
		snprintf(err, errlen, "cannot read %s '%s': %s", what, path, strerror(errno));
	}
	close(fd);
	return s;
}

int fsync_parent_dir(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *dir = slash ? xstrndup(path, slash == path ? 1 : (size_t)(slash - path)) : xstrdup(".");
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(dir);
	if (fd < 0)
		return -1;
	/* a file system that cannot sync a directory says EINVAL: nothing to do */
	int rc = fsync(fd) < 0 && errno != EINVAL ? -1 : 0;
	int e = errno;
	close(fd);
	errno = e;
	return rc;
}

int write_file_durable(const char *path, const void *data, size_t len, mode_t mode, bool replace)
{
	char *tmp = xasprintf("%s.tmp.XXXXXX", path);
	int rc = -1, e = 0;
	int fd = mkostemp(tmp, O_CLOEXEC);   /* O_EXCL, 0600: never through a link */
	if (fd < 0) {
		e = errno;
		goto out;
	}
	if (fchmod(fd, mode) < 0 || write_full(fd, data, len) < 0 || fsync(fd) < 0) {
		e = errno;
		close(fd);
		unlink(tmp);
		goto out;
	}
	if (close(fd) < 0 || (replace ? rename(tmp, path) : link(tmp, path)) < 0) {
		e = errno;
		unlink(tmp);
		goto out;
	}
	if (!replace)
		unlink(tmp);
	if (fsync_parent_dir(path) < 0) {
		e = errno;
		goto out;
	}
	rc = 0;
out:
	free(tmp);
	errno = e;
	return rc;
}

int write_file_replace(const char *path, const void *data, size_t len, mode_t mode, bool durable)
{
	char *tmp = xasprintf("%s.tmp", path);
	int rc = -1, e = 0;
	unlink(tmp);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0) {
		e = errno;
		goto out;
	}
	if (write_full(fd, data, len) < 0 || (durable && fsync(fd) < 0)) {
		e = errno;
		close(fd);
		unlink(tmp);
		goto out;
	}
	if (close(fd) < 0 || rename(tmp, path) < 0) {
		e = errno;
		unlink(tmp);
		goto out;
	}
	rc = 0;
out:
	free(tmp);
	errno = e;
	return rc;
}

void free_secret(char *s, size_t len)
{
	if (s)
		explicit_bzero(s, len);
	free(s);
}

DIR *opendir_at(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	DIR *d = fdopendir(fd);
	if (!d) {
		int e = errno;
		close(fd);
		errno = e;
	}
	return d;
}
