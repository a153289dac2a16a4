/* faults.c: linked with agent/main.c into tests/tools/tetherd-faults, a
 * tetherd whose fault points (agent/fault.h) can kill it: with
 * TETHERD_FAULT=POINT[:N] in its environment it kills itself (SIGKILL, as
 * kill -9 would) the N-th time (default 1) it reaches POINT. Every point
 * it reaches is appended to $TETHERD_FAULT_LOG when set ("kill POINT"
 * last, where it died), so a test sees where it went. t0235 uses it. */
#include "fault.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char point[64];
static unsigned long want = 1, seen;
static const char *trail;

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

static void kill_at(const char *p)
{
	note("", p);
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
	if (point[0] || trail)
		fault_hook = kill_at;
}
