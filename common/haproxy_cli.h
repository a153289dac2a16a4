/* haproxy_cli.h: one command on haproxy's CLI (its stats socket, a unix
 * socket): connect, send, read the answer until haproxy closes. Shared by
 * tetherd's traffic counters (agent/traffic/haproxy_stats.c: show info,
 * show stat) and its runtime updates (agent/consumer/runtime_api.c: set
 * server, show servers state). One connection per command (haproxy
 * closes after one command when not in prompt mode), nonblocking, every
 * step under the caller's deadline, so a dead or stuck haproxy costs at
 * most the time left. */
#ifndef TETHER_HAPROXY_CLI_H
#define TETHER_HAPROXY_CLI_H

#include <stddef.h>

#include "buf.h"

/* Monotonic seconds, for deadlines. */
double haproxy_cli_now(void);
/* Sends cmd (ending in "\n") to the unix socket at path and appends the
 * answer to ans, up to max bytes (more is an error), before deadline
 * (haproxy_cli_now() seconds). 0, or -1 with err naming the socket and the
 * step that failed. */
int haproxy_cli_ask(const char *path, const char *cmd, double deadline, size_t max, struct buf *ans, char *err,
		    size_t errlen);

#endif
