/* traffic/haproxy_stats.c: reads haproxy's counters over its stats socket
 * (see traffic/haproxy_stats.h): one connection per command through
 * common/haproxy_cli.c, every step under one deadline so a dead or stuck
 * haproxy costs at most the timeout; answers are read up to
 * HAPROXY_ANSWER_MAX and parsed by traffic/haproxy_answer.c (a failed read
 * leaves out without routes and with an empty gen). Also finds whether the
 * operator's base configuration declares the socket already, and at which
 * level. */
#include "traffic/haproxy_stats.h"
#include "buf.h"
#include "haproxy_cli.h"
#include "traffic/haproxy_answer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One command, its answer bounded as the parsers want it. */
static int ask(const char *path, const char *cmd, double deadline, struct buf *ans, char *err, size_t errlen)
{
	return haproxy_cli_ask(path, cmd, deadline, HAPROXY_ANSWER_MAX, ans, err, errlen);
}

static int ask_pid(const char *path, double deadline, long *pid, char *err, size_t errlen)
{
	struct buf ans = BUF_INIT;
	int rc = ask(path, "show info\n", deadline, &ans, err, errlen);
	if (rc == 0)
		rc = haproxy_answer_pid(ans.data ? ans.data : "", ans.len, pid, err, errlen);
	buf_release(&ans);
	return rc;
}

int haproxy_stats_read(const char *path, double timeout_s, struct traffic *out, char *err, size_t errlen)
{
	double deadline = haproxy_cli_now() + (timeout_s > 0 ? timeout_s : 0);
	long pid, pid2;
	struct buf ans = BUF_INIT;
	int rc = -1;
	traffic_clear(out);
	if (ask_pid(path, deadline, &pid, err, errlen) < 0 || ask(path, "show stat\n", deadline, &ans, err, errlen) < 0)
		goto out;
	if (haproxy_answer_stat(ans.data ? ans.data : "", ans.len, out, err, errlen) < 0)
		goto out;
	/* a reload between the commands: the counters may be either worker's */
	if (ask_pid(path, deadline, &pid2, err, errlen) < 0)
		goto out;
	if (pid2 != pid) {
		snprintf(err, errlen, "%s: haproxy reloaded while it was read (worker %ld, then %ld)", path, pid, pid2);
		goto out;
	}
	snprintf(out->gen, sizeof(out->gen), "pid%ld", pid);
	rc = 0;
out:
	if (rc < 0) {
		traffic_clear(out);
		out->gen[0] = '\0';
	}
	buf_release(&ans);
	return rc;
}

/* The next word of a configuration line: white space separates, '#'
 * outside quotes starts a comment, "..." and '...' quote, '\' escapes one
 * character (haproxy's rules). Returns false at the line's end. */
static bool word(const char **p, char *out, size_t cap)
{
	const char *s = *p;
	while (*s == ' ' || *s == '\t')
		s++;
	if (!*s || *s == '#' || *s == '\n' || *s == '\r')
		return false;
	size_t o = 0;
	char q = 0;
	for (; *s && *s != '\n' && *s != '\r'; s++) {
		if (!q && (*s == ' ' || *s == '\t' || *s == '#'))
			break;
		if (*s == '\\' && s[1] && s[1] != '\n' && q != '\'') {
			s++;
		} else if (!q && (*s == '"' || *s == '\'')) {
			q = *s;
			continue;
		} else if (q && *s == q) {
			q = 0;
			continue;
		}
		if (o + 1 < cap)
			out[o++] = *s;
	}
	out[o] = '\0';
	*p = s;
	return true;
}

bool haproxy_stats_declared_at(const char *base_cfg, const char *path, char *level, size_t cap)
{
	FILE *f = base_cfg ? fopen(base_cfg, "r") : NULL;
	if (!f)
		return false;
	char line[4096], w[3][4096];
	bool found = false;
	while (!found && fgets(line, sizeof(line), f)) {
		const char *p = line;
		int n = 0;
		while (n < 3 && word(&p, w[n], sizeof(w[n])))
			n++;
		if (n < 3 || strcmp(w[0], "stats") != 0 || strcmp(w[1], "socket") != 0)
			continue;
		/* "unix@PATH" is the same socket */
		const char *sp = strncmp(w[2], "unix@", 5) == 0 ? w[2] + 5 : w[2];
		found = strcmp(sp, path) == 0;
		if (!found || !level)
			continue;
		/* its level: what follows "level", else haproxy's default */
		snprintf(level, cap, "operator");
		while (word(&p, w[0], sizeof(w[0])))
			if (strcmp(w[0], "level") == 0 && word(&p, w[1], sizeof(w[1])))
				snprintf(level, cap, "%s", w[1]);
	}
	fclose(f);
	return found;
}

bool haproxy_stats_declared(const char *base_cfg, const char *path)
{
	return haproxy_stats_declared_at(base_cfg, path, NULL, 0);
}
