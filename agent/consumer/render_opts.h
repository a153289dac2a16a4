/* consumer/render_opts.h: what a route's and a cluster's options
 * (resource_opts.h) render to, for nginx (render_opts_nginx.c) and haproxy
 * (render_opts_haproxy.c): one call per block from the renderers. A body
 * without options renders exactly as before options existed. */
#ifndef TETHER_RENDER_OPTS_H
#define TETHER_RENDER_OPTS_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "buf.h"
#include "consumer/render.h"

/* ---- nginx ------------------------------------------------------------------ */

/* nginx keeps server names and proxy header names in hashes whose buckets
 * are a cache line (64 bytes) by default; a key takes 2 pointers and its
 * length + 2 rounded up to a pointer, and nginx refuses to start when the
 * longest does not fit ("could not build ..._hash"). The bucket size that
 * holds a key of longest bytes: 64, or the power of two above it. */
size_t render_opts_nginx_bucket(size_t longest);
/* At http level, once: the map websocket routes' Connection header needs
 * (nothing when no route sets websocket), and proxy_headers_hash_bucket_size
 * when a route sets, removes or hides a header name too long for the
 * default. */
void render_opts_nginx_http(const struct rstate *rs, struct buf *b);
/* Appended to each server line of a cluster's upstream (before its ';'):
 * health's max_fails= fail_timeout=. */
void render_opts_nginx_server(struct buf *b, const cJSON *cluster);
/* At the end of a cluster's upstream block: keepalive. */
void render_opts_nginx_upstream(struct buf *b, const cJSON *cluster);
/* A route's location after its proxy_pass: the proxy headers (ours, and
 * the route's set and removed ones) and every option of the route. */
void render_opts_nginx_location(struct buf *b, const cJSON *route);

/* ---- haproxy ---------------------------------------------------------------- */

/* A backend's timeout lines: 5s connect, 60s server, or the route's
 * (server: read, else send), and a websocket route's tunnel timeout (read,
 * else an hour); route NULL: a cluster's backend. */
void render_opts_haproxy_timeouts(struct buf *b, const cJSON *route);
/* A backend's lines after its timeouts: the route's retries (route may be
 * NULL) and the cluster's keepalive. */
void render_opts_haproxy_backend(struct buf *b, const cJSON *cluster, const cJSON *route);
/* Appended to each server (and server-template) line of a cluster's
 * backend: health's check and observe, keepalive's pool-max-conn. */
void render_opts_haproxy_server(struct buf *b, const cJSON *cluster);
/* Whether some route of a listener's n routes sets an option: its frontend
 * then picks the route by txn.tether_route (set before any rule changes
 * the request) and runs the options' rules under it. */
bool render_opts_haproxy_uses(const struct rstate *rs, const struct rroute *routes, size_t n);
/* The route's backend: tether_r_NAME when it has one of its own
 * (resource_opts_own_backend), else its cluster's tether_c_CLUSTER. */
void render_opts_haproxy_target(const struct rstate *rs, const struct rroute *r, char *out, size_t cap);
/* The frontend's option rules of the listener's routes, each under
 * `if { var(txn.tether_route) -m str route/NAME }`. */
void render_opts_haproxy_frontend(const struct rstate *rs, const struct rroute *routes, size_t n, struct buf *b);

/* The regular expression and replacement of a route's strip_prefix or
 * rewrite (false when it has neither): re matches the request path of the
 * route's prefix, capturing its rest ("^/api(/(.*))?$"); with nginx's
 * or haproxy's group syntax ('$' or '\\'). */
bool render_opts_path_rewrite(const cJSON *route, char group, struct buf *re, struct buf *repl);

#endif
