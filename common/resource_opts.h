/* resource_opts.h: a route's and a cluster's options (timeouts, prefix strip
 * and rewrite, headers, websocket, retries, body limit; passive health and
 * upstream keepalive): their validation, for the plane and the agent alike,
 * and the few facts both renderers and haproxy's runtime API share. */
#ifndef TETHER_RESOURCE_OPTS_H
#define TETHER_RESOURCE_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <cjson/cJSON.h>

#define RES_OPTS_TIMEOUT_MAX 86400.0      /* seconds */
#define RES_OPTS_HEADER_NAME_MAX 128
#define RES_OPTS_HEADER_VALUE_MAX 1024
#define RES_OPTS_HEADERS_MAX 64          /* names per set or remove list */
#define RES_OPTS_RETRIES_MAX 10
#define RES_OPTS_MAX_BODY 1099511627776.0 /* 1 TiB */

/* Validate the options of a route's (cluster's) body b: res names it
 * ("route/api") in the error, flags are resource_validate's (RES_STRICT:
 * unknown fields inside the options' objects are errors). 0, or -1 with err
 * "route/api: timeout.read: must be ...". */
int resource_opts_route(const char *res, unsigned flags, const cJSON *b, char *err, size_t errlen);
int resource_opts_cluster(const char *res, unsigned flags, const cJSON *b, char *err, size_t errlen);

/* Whether a route's body sets an option haproxy (2.6) allows only per
 * backend (a timeout, retries, websocket's tunnel timeout): its haproxy
 * rendering has a backend of its own, tether_r_NAME, with its cluster's
 * servers (and haproxy's runtime API updates those too). */
bool resource_opts_own_backend(const cJSON *route);
/* Whether a route's body sets any option at all. */
bool resource_opts_route_any(const cJSON *route);
/* A timeout of a route's body ("connect", "read", "send") in milliseconds,
 * at least 1; 0 when absent. */
long resource_opts_timeout_ms(const cJSON *route, const char *which);

#endif
