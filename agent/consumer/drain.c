/* consumer/drain.c: counts the consumer's live workers and the old ones
 * still draining, with their memory, from /proc (see consumer/drain.h). One
 * pass over PROC_ROOT's process directories, reading each one's stat line
 * for its parent; the master's children then by their title (nginx) or
 * their start time (haproxy). Nothing is kept between counts. */
#include "consumer/drain.h"
#include "consumer/procfs.h"
#include "util.h"
#include "xmalloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STAT_MAX 2048     /* a stat line is about 300 bytes */
#define STATUS_MAX 8192   /* a status file about 1,400 */
#define TITLE_MAX 256     /* nginx's titles are short; the rest is cut */

/* Reads at most cap - 1 bytes of DIR/PID/NAME, NUL-terminated. The
 * length, or -1 (the process is gone, or hidden). */
static ssize_t read_at(int dirfd, long pid, const char *name, char *buf, size_t cap)
{
	char path[64];
	snprintf(path, sizeof(path), "%ld/%s", pid, name);
	int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t n = 0;
	while (n + 1 < cap) {
		ssize_t r = read(fd, buf + n, cap - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			close(fd);
			return -1;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	buf[n] = '\0';
	return (ssize_t)n;
}

/* The pid in pidfile: 1, 0 when there is no pidfile, -1 with err. */
static int master_pid(const char *pidfile, long *pid, char *err, size_t errlen)
{
	size_t len;
	char *text = read_file_limited(pidfile, 64, &len);
	if (!text && errno == ENOENT)
		return 0;
	if (!text) {
		snprintf(err, errlen, "cannot read pidfile '%s': %s", pidfile, strerror(errno));
		return -1;
	}
	str_trim(text);
	uint64_t v;
	int rc = parse_uint_range(text, 2, 4194304, &v);
	free(text);
	if (rc < 0) {
		snprintf(err, errlen, "pidfile '%s' holds no pid", pidfile);
		return -1;
	}
	*pid = (long)v;
	return 1;
}

static int read_stat(int dirfd, long pid, struct procfs_stat *st)
{
	char buf[STAT_MAX];
	ssize_t n = read_at(dirfd, pid, "stat", buf, sizeof(buf));
	return n < 0 ? -1 : procfs_parse_stat(buf, (size_t)n, st);
}

/* A worker's resident memory; 0 when it cannot be read (it just left). */
static uint64_t rss_of(int dirfd, long pid)
{
	char buf[STATUS_MAX];
	uint64_t bytes = 0;
	ssize_t n = read_at(dirfd, pid, "status", buf, sizeof(buf));
	if (n < 0 || procfs_parse_rss(buf, (size_t)n, &bytes) < 0)
		return 0;
	return bytes;
}

struct child {
	long pid;
	uint64_t start;
};

/* nginx's workers whose title says they serve but that started before
 * the last reload: old once the reload took (a worker started since). */
struct nginx_old {
	unsigned n;
	uint64_t bytes;
	bool fresh;                 /* a serving worker started since the reload */
};

/* nginx: a child by its title. A worker whose title says it serves but
 * that started before the last reload (reloaded, clock ticks since boot)
 * is also counted in *old. */
static void nginx_child(int dirfd, long pid, uint64_t start, uint64_t reloaded, struct drain_count *out,
			struct nginx_old *old)
{
	char raw[TITLE_MAX], title[TITLE_MAX];
	ssize_t n = read_at(dirfd, pid, "cmdline", raw, sizeof(raw));
	if (n < 0)
		return;
	procfs_title(raw, (size_t)n, title, sizeof(title));
	if (strstr(title, "worker process is shutting down")) {
		out->draining++;
		out->draining_bytes += rss_of(dirfd, pid);
	} else if (strstr(title, "worker process")) {
		out->live++;
		if (reloaded && start < reloaded) {
			old->n++;
			old->bytes += rss_of(dirfd, pid);
		} else if (reloaded) {
			old->fresh = true;
		}
	}
}

/* nginx, after the walk: when a worker started since the last reload (it
 * took), the workers started before it are old, though the master may not
 * have retitled them yet (it does once the new ones run); when none did,
 * the reload has not taken (or failed) and the titles say it all. */
static void nginx_retitled(const struct nginx_old *old, struct drain_count *out)
{
	if (!old->fresh)
		return;
	out->live -= old->n;
	out->draining += old->n;
	out->draining_bytes += old->bytes;
}

/* haproxy: the newest of the workers is live, the others drain. */
static void haproxy_children(int dirfd, const struct child *c, size_t n, struct drain_count *out)
{
	if (!n)
		return;
	size_t newest = 0;
	for (size_t i = 1; i < n; i++)
		if (c[i].start > c[newest].start || (c[i].start == c[newest].start && c[i].pid > c[newest].pid))
			newest = i;
	out->live = 1;
	for (size_t i = 0; i < n; i++) {
		if (i == newest)
			continue;
		out->draining++;
		out->draining_bytes += rss_of(dirfd, c[i].pid);
	}
}

static bool all_digits(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

int drain_count(const char *proc_root, const char *pidfile, enum drain_kind kind, uint64_t reloaded,
		struct drain_count *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	long master;
	int rc = master_pid(pidfile, &master, err, errlen);
	if (rc <= 0)
		return rc;
	int root = open(proc_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root < 0) {
		snprintf(err, errlen, "cannot open '%s': %s", proc_root, strerror(errno));
		return -1;
	}
	struct procfs_stat ms;
	if (read_stat(root, master, &ms) < 0 || ms.pid != master || ms.state == 'Z') {
		close(root);
		return 0;   /* a stale pidfile: nothing runs */
	}
	DIR *d = opendir_at(root, ".");
	if (!d) {
		snprintf(err, errlen, "cannot list '%s': %s", proc_root, strerror(errno));
		close(root);
		return -1;
	}
	out->master = master;
	struct child *kids = NULL;
	size_t nkids = 0, cap = 0;
	struct nginx_old old = { 0 };
	struct dirent *e;
	while ((e = readdir(d))) {
		uint64_t v;
		if (!all_digits(e->d_name) || parse_uint_range(e->d_name, 1, 4194304, &v) < 0 || (long)v == master)
			continue;
		struct procfs_stat st;
		/* a child that is gone, or a zombie not yet reaped, drains nothing */
		if (read_stat(root, (long)v, &st) < 0 || st.ppid != master || st.state == 'Z')
			continue;
		if (kind == DRAIN_NGINX) {
			nginx_child(root, (long)v, st.start, reloaded, out, &old);
		} else if (strcmp(st.comm, ms.comm) == 0) {
			if (nkids == cap) {
				cap = cap ? cap * 2 : 16;
				kids = xrealloc(kids, cap * sizeof(*kids));
			}
			kids[nkids++] = (struct child){ (long)v, st.start };
		}
	}
	closedir(d);
	if (kind == DRAIN_HAPROXY)
		haproxy_children(root, kids, nkids, out);
	else
		nginx_retitled(&old, out);
	free(kids);
	close(root);
	return 1;
}
