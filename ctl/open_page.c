/* open_page.c: a link with a secret in it, opened in a browser through a
 * private page (open_page.h): the browser's command line, which every
 * local user can read in the process list, names only the page. A
 * detached remover takes the page away once the browser read it
 * (inotify), or after a bound. */
#include "open_page.h"
#include "buf.h"
#include "xmalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sodium.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* How long the page stays after it was last read, and at most. */
#define OPEN_PAGE_SETTLE_MS 10000
#define OPEN_PAGE_MAX_MS 120000

/* The link as a JS string literal: nothing in it can end the string or
 * the script element. */
static void js_string(struct buf *b, const char *s)
{
	buf_putc(b, '"');
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p < 0x20 || *p >= 0x7f || strchr("\"\\<>&'", *p))
			buf_printf(b, "\\u%04x", *p);
		else
			buf_putc(b, (char)*p);
	}
	buf_putc(b, '"');
}

/* The link in an HTML attribute. */
static void html_attr(struct buf *b, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p < 0x20 || *p >= 0x7f || strchr("\"<>&'", *p))
			buf_printf(b, "&#%u;", *p);
		else
			buf_putc(b, (char)*p);
	}
}

static void page_text(struct buf *b, const char *link)
{
	buf_puts(b, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\n"
		    "<meta name=\"referrer\" content=\"no-referrer\">\n<meta http-equiv=\"refresh\" content=\"0; url=");
	html_attr(b, link);
	buf_puts(b, "\">\n<title>tether console</title>\n<script>location.replace(");
	js_string(b, link);
	buf_puts(b, ");</script>\n</head><body><p><a href=\"");
	html_attr(b, link);
	buf_puts(b, "\">Open the tether console</a></p></body></html>\n");
}

int open_page_write(const char *tmpdir, const char *link, char **dir, char **page, char *err, size_t errlen)
{
	if (!tmpdir || !*tmpdir)
		tmpdir = "/tmp";
	char *d = xasprintf("%s/tetherctl-ui.XXXXXX", tmpdir);
	if (!mkdtemp(d)) {   /* 0700 */
		snprintf(err, errlen, "cannot make a private directory in %s: %s (set TMPDIR to one you can write)",
			 tmpdir, strerror(errno));
		free(d);
		return -1;
	}
	char *f = xasprintf("%s/open.html", d);
	int fd = open(f, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	struct buf b = BUF_INIT;
	page_text(&b, link);
	bool ok = fd >= 0 && fchmod(fd, 0600) == 0 && write(fd, b.data, b.len) == (ssize_t)b.len;
	int e = errno;
	if (fd >= 0 && close(fd) != 0 && ok) {
		ok = false;
		e = errno;
	}
	sodium_memzero(b.data, b.len);
	buf_release(&b);
	if (!ok) {
		snprintf(err, errlen, "cannot write %s: %s", f, strerror(e));
		open_page_remove(d, f);
		free(d);
		free(f);
		return -1;
	}
	*dir = d;
	*page = f;
	return 0;
}

void open_page_remove(const char *dir, const char *page)
{
	int fd = open(page, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0) {   /* wiped, in case a copy of the inode outlives the name */
		if (ftruncate(fd, 0) != 0) {
			/* removed below all the same */
		}
		close(fd);
	}
	unlink(page);
	rmdir(dir);
}

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* What the inotify fd says: 1 the page was read (opened and closed), -1
 * it is gone, 0 neither. */
static int page_event(int in)
{
	char ev[sizeof(struct inotify_event) + 256] __attribute__((aligned(__alignof__(struct inotify_event))));
	int what = 0;
	ssize_t n;
	while ((n = read(in, ev, sizeof(ev))) > 0)
		for (char *p = ev; p < ev + n; p += sizeof(struct inotify_event) + ((struct inotify_event *)p)->len) {
			uint32_t m = ((struct inotify_event *)p)->mask;
			if (m & (IN_DELETE_SELF | IN_IGNORED))
				what = -1;
			else if ((m & IN_CLOSE_NOWRITE) && what == 0)
				what = 1;
		}
	return what;
}

/* The remover, detached (its own session, no terminal, no pipe of the
 * caller's held): the page goes OPEN_PAGE_SETTLE_MS after the last read
 * (an opener may read it to learn its type before the browser does), or
 * OPEN_PAGE_MAX_MS after it was made, or when the caller removed it. */
static void remover(int in, const char *dir, const char *page)
{
	int64_t start = mono_ms(), last_read = 0;
	for (;;) {
		int64_t now = mono_ms(), until = start + OPEN_PAGE_MAX_MS;
		if (last_read && last_read + OPEN_PAGE_SETTLE_MS < until)
			until = last_read + OPEN_PAGE_SETTLE_MS;
		if (now >= until)
			break;
		struct pollfd pf = { .fd = in, .events = POLLIN };
		if (poll(&pf, 1, (int)(until - now)) <= 0)
			continue;
		int what = page_event(in);
		if (what < 0)
			_exit(0);
		if (what > 0)
			last_read = mono_ms();
	}
	open_page_remove(dir, page);
	_exit(0);
}

/* Starts the remover for the page watched by in; 0, or -1 (errno). */
static int start_remover(int in, const char *dir, const char *page)
{
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid > 0) {   /* the child's child is the remover: nobody's zombie */
		int status;
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
	}
	setsid();
	pid_t r = fork();
	if (r != 0)
		_exit(r < 0 ? 1 : 0);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	for (int fd = 0; fd <= 2; fd++)
		if (null >= 0 && null != fd)
			dup2(null, fd);
	signal(SIGHUP, SIG_IGN);
	remover(in, dir, page);
	_exit(0);
}

int open_page_link(const char *opener, const char *link, char *err, size_t errlen)
{
	char *dir, *page;
	if (open_page_write(getenv("TMPDIR"), link, &dir, &page, err, errlen) < 0)
		return -1;
	int rc = -1;
	bool removing = false;
	int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (in < 0 || inotify_add_watch(in, page, IN_CLOSE_NOWRITE | IN_DELETE_SELF) < 0 ||
	    start_remover(in, dir, page) < 0) {
		snprintf(err, errlen, "cannot watch %s to remove it: %s", page, strerror(errno));
		goto out;
	}
	removing = true;
	char *argv[] = { (char *)opener, page, NULL };
	pid_t pid;
	int e = posix_spawnp(&pid, opener, NULL, NULL, argv, environ);
	if (e != 0) {
		snprintf(err, errlen, "cannot run '%s': %s", opener, strerror(e));
		goto out;
	}
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		snprintf(err, errlen, "'%s' could not open the link", opener);
		goto out;
	}
	rc = 0;
out:
	if (in >= 0)
		close(in);
	if (rc < 0 || !removing)   /* the remover sees it go, and ends */
		open_page_remove(dir, page);
	free(dir);
	free(page);
	return rc;
}
