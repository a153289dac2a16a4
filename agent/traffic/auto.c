/* traffic/auto.c: the loopback UDP port a node counts its consumer's
 * traffic on when --traffic-listen is not given (see auto.h): the one it
 * used last if it is free, else one the kernel picks; remembered in the
 * state directory. */
#include "traffic/auto.h"
#include "log.h"
#include "traffic/syslog.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The address kept from the last start into spec ("" when none or not a
 * loopback ADDR:PORT this listener takes). */
static void remembered(const char *path, char *spec, size_t cap)
{
	spec[0] = '\0';
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	char line[128];
	if (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\r\n")] = '\0';
		struct sockaddr_storage sa;
		socklen_t len;
		char err[256];
		size_t n = strlen(line);
		if (n < cap && strncmp(line, "127.0.0.1:", 10) == 0 && tsl_addr(line, &sa, &len, err, sizeof(err)) == 0)
			memcpy(spec, line, n + 1);
	}
	fclose(f);
}

/* Writes spec to path (a temporary file renamed over it); a failure is
 * only worth a warning: the next start picks another port. */
static void remember(const char *path, const char *spec)
{
	char tmp[4200];
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp))
		return;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	char line[80];
	int n = snprintf(line, sizeof(line), "%s\n", spec);
	if (fd < 0 || write(fd, line, (size_t)n) != n || fsync(fd) < 0 || close(fd) < 0 || rename(tmp, path) < 0) {
		log_warn("traffic: cannot keep the counting port in %s: %s (the next start may pick another, and "
			 "reload the consumer once for it)", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		unlink(tmp);
	}
}

int traffic_auto_open(const char *state_dir, char *addr, size_t cap, char *err, size_t errlen)
{
	char path[4096], spec[64], inner[512];
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", state_dir, TRAFFIC_AUTO_FILE) >= sizeof(path)) {
		snprintf(err, errlen, "traffic-listen: the state directory's path is too long");
		return -1;
	}
	remembered(path, spec, sizeof(spec));
	if (spec[0]) {
		int fd = tsl_open(spec, inner, sizeof(inner));
		if (fd >= 0) {
			snprintf(addr, cap, "%s", spec);
			return fd;
		}
		log_info("traffic: the counting port of the last start (%s) is taken: picking another", spec);
	}
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = 0, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sin);
	int fd = tsl_open_at((struct sockaddr *)&sin, len, "127.0.0.1:0", inner, sizeof(inner));
	if (fd < 0 || getsockname(fd, (struct sockaddr *)&sin, &len) < 0 || sin.sin_family != AF_INET) {
		snprintf(err, errlen, "traffic-listen: cannot bind a free loopback UDP port to count traffic: %s "
			 "(give --traffic-listen 127.0.0.1:PORT, or --traffic-listen off)",
			 fd < 0 ? inner : strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	snprintf(addr, cap, "127.0.0.1:%u", (unsigned)ntohs(sin.sin_port));
	remember(path, addr);
	return fd;
}
