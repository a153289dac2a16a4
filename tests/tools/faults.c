/* faults.c: linked with agent/main.c into tests/tools/tetherd-faults, a
 * tetherd whose fault points (agent/fault.h) can kill it: with
 * TETHERD_FAULT=POINT[:N] in its environment it kills itself (SIGKILL, as
 * kill -9 would) the N-th time (default 1) it reaches POINT. Every point
 * it reaches is appended to $TETHERD_FAULT_LOG when set ("kill POINT"
 * last, where it died), so a test sees where it went. t0235 uses it.
 * With TETHERD_PAUSE=POINT[:N] and TETHERD_PAUSE_DIR=DIR it stops there
 * instead (the N-th time), alive: it writes DIR/paused (its pid and the
 * point) and waits until DIR/resume exists (at most 60 s), removes both
 * and goes on -- so a test can act at that moment (t0325 changes what
 * haproxy holds between the runtime commands and their read-back). */
#include "fault.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char point[64], pause_point[64];
static unsigned long want = 1, seen, pause_want = 1, pause_seen;
static const char *trail, *pause_dir;

static void note(const char *what, const char *p)
{
	if (!trail)
		return;
	int fd = open(trail, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	char line[96];
	int n = snprintf(line, sizeof(line), "%s%s\n", what, p);
	if (write(fd, line, (size_t)n) < 0) {
		/* a trail is a help, not the test */
	}
	close(fd);
}

/* Stops alive at p until the test lets it go (TETHERD_PAUSE). */
static void pause_at(const char *p)
{
	char paused[4096], resume[4096];
	snprintf(paused, sizeof(paused), "%s/paused", pause_dir);
	snprintf(resume, sizeof(resume), "%s/resume", pause_dir);
	FILE *f = fopen(paused, "w");
	if (f) {
		fprintf(f, "%ld %s\n", (long)getpid(), p);
		fclose(f);
	}
	note("pause ", p);
	for (int i = 0; i < 3000 && access(resume, F_OK) != 0; i++)
		usleep(20000);
	unlink(resume);
	unlink(paused);
}

static void kill_at(const char *p)
{
	note("", p);
	if (pause_point[0] && pause_dir && strcmp(p, pause_point) == 0 && ++pause_seen == pause_want)
		pause_at(p);
	if (point[0] && strcmp(p, point) == 0 && ++seen == want) {
		note("kill ", p);
		raise(SIGKILL);
	}
}

__attribute__((constructor)) static void arm(void)
{
	const char *spec = getenv("TETHERD_FAULT");
	trail = getenv("TETHERD_FAULT_LOG");
	if (spec && *spec) {
		snprintf(point, sizeof(point), "%s", spec);
		char *colon = strchr(point, ':');
		if (colon) {
			*colon = '\0';
			char *end;
			want = strtoul(colon + 1, &end, 10);
			if (*end || want == 0) {
				fprintf(stderr, "tetherd-faults: bad TETHERD_FAULT '%s' (POINT[:N], N >= 1)\n", spec);
				exit(2);
			}
		}
	}
	const char *pspec = getenv("TETHERD_PAUSE");
	pause_dir = getenv("TETHERD_PAUSE_DIR");
	if (pspec && *pspec) {
		snprintf(pause_point, sizeof(pause_point), "%s", pspec);
		char *colon = strchr(pause_point, ':');
		if (colon) {
			*colon = '\0';
			pause_want = strtoul(colon + 1, NULL, 10);
			if (pause_want == 0)
				pause_want = 1;
		}
	}
	if (point[0] || trail || pause_point[0])
		fault_hook = kill_at;
}
