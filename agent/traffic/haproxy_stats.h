/* traffic/haproxy_stats.h: haproxy's stats socket: per-backend traffic
 * counters for traffic-aware gates, and whether the operator's base
 * configuration declares a socket. */
#ifndef TETHER_HAPROXY_STATS_H
#define TETHER_HAPROXY_STATS_H

#include <stdbool.h>
#include <stddef.h>

#include "traffic.h"

/* Reads `show stat` over haproxy's stats socket at path: per backend
 * tether_c_NAME, cumulative req_tot, hrsp_5xx and the mean ttime, as routes
 * "cluster/NAME" (approx: true). out->gen gets "pid<N>" of the worker that
 * answered (counters restart with a new worker). 0, or -1 with err. */
int haproxy_stats_read(const char *path, double timeout_s, struct traffic *out, char *err, size_t errlen);
/* Whether the haproxy configuration file at base_cfg declares
 * `stats socket path` already (then the renderer must not). */
bool haproxy_stats_declared(const char *base_cfg, const char *path);
/* The same; when it does, level (cap bytes) gets the level it is declared
 * at ("operator", haproxy 2.6's default, when the line names none): the
 * runtime API (--runtime-api) needs "admin". */
bool haproxy_stats_declared_at(const char *base_cfg, const char *path, char *level, size_t cap);

#endif
