/* open_page.c: a link with a secret in it, opened in a browser through a
 * private page (open_page.h): the browser's command line, which every
 * local user can read in the process list, names only the page. The page
 * is removed once the browser read it (inotify), or after a bound. */
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

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

/* Whether the inotify fd says the page was opened and closed again. */
static bool page_read(int in)
{
	char ev[sizeof(struct inotify_event) + 256] __attribute__((aligned(__alignof__(struct inotify_event))));
	bool read_it = false;
	ssize_t n;
	while ((n = read(in, ev, sizeof(ev))) > 0)
		for (char *p = ev; p < ev + n; p += sizeof(struct inotify_event) + ((struct inotify_event *)p)->len)
			if (((struct inotify_event *)p)->mask & IN_CLOSE_NOWRITE)
				read_it = true;
	return read_it;
}

int open_page_link(const char *opener, const char *link, int wait_ms, char *err, size_t errlen)
{
	char *dir, *page;
	if (open_page_write(getenv("TMPDIR"), link, &dir, &page, err, errlen) < 0)
		return -1;
	int rc = -1;
	int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (in < 0 || inotify_add_watch(in, page, IN_CLOSE_NOWRITE) < 0) {
		snprintf(err, errlen, "cannot watch %s: %s", page, strerror(errno));
		goto out;
	}
	char *argv[] = { (char *)opener, page, NULL };
	pid_t pid;
	int e = posix_spawnp(&pid, opener, NULL, NULL, argv, environ);
	if (e != 0) {
		snprintf(err, errlen, "cannot run '%s': %s", opener, strerror(e));
		goto out;
	}
	/* A browser started by the opener may stay (a browser named in
	 * $BROWSER runs until it is closed): done once the page was read. */
	bool exited = false, read_it = false;
	int status = 0;
	int64_t until = mono_ms() + wait_ms;
	while (!read_it) {
		if (!exited) {
			pid_t w = waitpid(pid, &status, WNOHANG);
			exited = w == pid || (w < 0 && errno == ECHILD);
			if (exited && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
				snprintf(err, errlen, "'%s' could not open the link", opener);
				goto out;
			}
		}
		int64_t left = until - mono_ms();
		if (left <= 0) {
			snprintf(err, errlen, "'%s' did not open the link in %d s", opener, wait_ms / 1000);
			goto out;
		}
		struct pollfd pf = { .fd = in, .events = POLLIN };
		/* the opener's exit is looked at every 50 ms */
		if (poll(&pf, 1, exited ? (int)left : (int)(left < 50 ? left : 50)) > 0)
			read_it = page_read(in);
	}
	rc = 0;
out:
	if (in >= 0)
		close(in);
	open_page_remove(dir, page);
	free(dir);
	free(page);
	return rc;
}
