/* log.c: levelled logging to stderr (see log.h). When stderr is the
 * journal ($JOURNAL_STREAM names it), each line starts with its syslog
 * priority (<3>, <4>, <6>, <7>) and leaves the time and pid to journald.
 * A message's control characters are escaped: one message, one line. */
#include "log.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *log_prog = "tether";
static enum log_level log_level = LOG_LVL_INFO;
static const char *const level_names[] = { "debug", "info", "warn", "error" };
static bool to_journal;

/* True when stderr is the stream $JOURNAL_STREAM ("DEV:INODE") names:
 * a redirection to a file keeps the plain format (systemd.exec(5)). */
static bool stderr_is_journal(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	char tail;
	if (!js || sscanf(js, "%llu:%llu%c", &dev, &ino, &tail) != 2 || fstat(STDERR_FILENO, &st) < 0)
		return false;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void log_init(const char *progname, enum log_level level)
{
	log_prog = progname;
	log_level = level;
	to_journal = stderr_is_journal();
}

/* syslog(3) priorities: debug, info, warning, err; fatal is crit */
static int priority_of(const char *lvl)
{
	switch (lvl[0]) {
	case 'd': return 7;
	case 'i': return 6;
	case 'w': return 4;
	case 'e': return 3;
	default: return 2;
	}
}

void log_set_level(enum log_level level)
{
	log_level = level;
}

int log_parse_level(const char *s, enum log_level *out)
{
	for (int i = 0; i <= LOG_LVL_ERROR; i++) {
		if (strcmp(s, level_names[i]) == 0) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	return -1;
}

int log_enabled(enum log_level level)
{
	return level >= log_level;
}

size_t log_escape(const char *in, char *out, size_t cap)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;
	if (!cap)
		return 0;
	for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
		char e[4];
		size_t k = 0;
		if (*p >= 0x20 && *p != 0x7f) {
			e[k++] = (char)*p;
		} else {
			e[k++] = '\\';
			if (*p == '\n')
				e[k++] = 'n';
			else if (*p == '\r')
				e[k++] = 'r';
			else if (*p == '\t')
				e[k++] = 't';
			else
				e[k++] = 'x', e[k++] = hex[*p >> 4], e[k++] = hex[*p & 15];
		}
		if (o + k >= cap)
			break;   /* never half an escape */
		memcpy(out + o, e, k);
		o += k;
	}
	out[o] = '\0';
	return o;
}

static void log_vmsg(const char *lvl, const char *fmt, va_list ap)
{
	char line[4096], msg[4096];
	struct timespec ts;
	struct tm tm;
	int n;
	if (to_journal) {
		n = snprintf(line, sizeof(line), "<%d>%s: ", priority_of(lvl), lvl);
	} else {
		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s[%ld] %s: ",
			     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
			     ts.tv_nsec / 1000000, log_prog, (long)getpid(), lvl);
	}
	if (n < 0 || (size_t)n >= sizeof(line))
		n = 0;
	if (vsnprintf(msg, sizeof(msg), fmt, ap) < 0)
		msg[0] = '\0';
	/* a message's own newlines (a tool's output, a peer's text) would split
	 * it into lines a reader takes for others: escaped, with every control */
	size_t len = (size_t)n + log_escape(msg, line + n, sizeof(line) - (size_t)n - 1);
	line[len++] = '\n';
	/* one write per line keeps lines whole when threads log at once */
	ssize_t w = write(STDERR_FILENO, line, len);
	(void)w;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	if (!log_enabled(level))
		return;
	va_list ap;
	va_start(ap, fmt);
	log_vmsg(level_names[level], fmt, ap);
	va_end(ap);
}

void fatal(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vmsg("fatal", fmt, ap);
	va_end(ap);
	exit(1);
}
