/* consumer/render.h: turning the applied state into a consumer's configuration.
 * A renderer is a pure function of the state (and a few options): the same
 * state gives the same bytes, so an unchanged render means no reload. It
 * writes nothing; it returns the files of one generation. Every value it
 * prints went through the resource grammar (names, hosts, paths, addresses
 * hold no white space, quotes, ';', '{', '}' or '#'), and the renderers
 * check that again before printing, so no resource can inject
 * configuration. */
#ifndef TETHER_RENDER_H
#define TETHER_RENDER_H

#include <stddef.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "buf.h"
#include "resource.h"
#include "state/sealed.h"
#include "state/state.h"

struct render_file {
	char *path;          /* relative to the generation directory, or to the
	                      * secrets directory when secret */
	struct buf data;
	mode_t mode;
	bool secret;         /* key material: 0600, named by its content's hash,
	                      * shared by the generations that use it */
};

struct render_out {
	struct render_file *files;
	size_t n;
};

struct render_opts {
	const char *secrets_dir; /* absolute: where secret files are */
	const char *marker;      /* "127.0.0.1:7099", or NULL for none */
	/* traffic stats (traffic-aware gates); NULL: not wanted */
	const char *traffic_syslog; /* "127.0.0.1:PORT": the agent's syslog listener,
	                             * where the access log goes (one line per
	                             * request in the format of docs/gates.md) */
	const char *stats_socket;   /* haproxy: the stats socket to declare, level user */
	/* haproxy's runtime API (--runtime-api) */
	const char *admin_socket;   /* the admin-level stats socket to declare (NULL: none) */
	bool runtime_slots;         /* after each cluster's servers e0..e(n-1), disabled
	                             * slots e(n)..e(n+h-1), h = RENDER_HEADROOM(n), that
	                             * endpoints added at runtime take */
	/* sealed secrets: how their plaintext is had (NULL: a sealed secret
	 * cannot be rendered) */
	const struct sealed_opener *opener;
	/* a TLS listener's secret is read as the consumer will (pemcheck.h)
	 * and a bad one refused naming it; true only where the secrets are
	 * stand-ins on purpose (the renderers' unit tests and fuzzing) */
	bool skip_secret_check;
};

/* The disabled server slots after a cluster's n real servers with
 * runtime_slots: as many again, at least 4. */
#define RENDER_HEADROOM(n) ((n) > 4 ? (n) : 4)
/* Where a disabled slot points (never used: a slot is given its address
 * before it is made ready). */
#define RENDER_SLOT_ADDR "127.0.0.1"
#define RENDER_SLOT_PORT 1

/* A renderer fills out with the generation's files, the first being the
 * main configuration; then the marker is appended to that file once the
 * generation's id (a hash of everything else) is known. The id depends
 * only on the state, so equal states render equal bytes. */
struct renderer {
	const char *name;
	/* Renders s with c applied (c may be NULL). */
	int (*render)(const struct state *s, const struct candidate *c, const struct render_opts *o,
		      struct render_out *out, char *err, size_t errlen);
	/* Appends the marker: an HTTP server on o->marker answering
	 * GET /tether-generation with gen_id. */
	void (*marker)(struct buf *conf, const struct render_opts *o, const char *gen_id);
};

extern const struct renderer render_nginx;
extern const struct renderer render_haproxy;

/* Frees out; a secret file's data is wiped first. */
void render_out_release(struct render_out *out);
/* Adds a file; returns its buffer for the caller to fill (valid until the
 * next file is added: the array moves). */
struct buf *render_add(struct render_out *out, const char *path, mode_t mode);
/* Adds a secret file named "<name>-<hash of data>.<ext>" and returns that
 * name (owned by out). */
const char *render_add_secret(struct render_out *out, const char *name, const char *ext, const char *data,
			      size_t len);
/* Splits "host:port" or "[v6]:port" of a listener body into what a listen
 * line needs: "127.0.0.1:8080", "[::1]:8080" or "8080", one spelling per
 * address ("0:0::1" is "[::1]", "::ffff:127.0.0.1" is "127.0.0.1"). */
void render_listen_addr(const cJSON *listener, char *out, size_t cap);

/* ---- for the renderers: the state, parsed, by type and name ---------------- */

struct rres {
	const struct res *r;
	const char *bare;        /* the name after "type/" */
	cJSON *body;             /* parsed (owned) */
};

struct rstate {
	struct rres *by_type[RES_TYPE_COUNT];
	size_t n[RES_TYPE_COUNT];
};

/* Parses every resource of s with c applied (c may be NULL), sorted by
 * name within each type; a sealed secret's body is its opened plaintext
 * body (opener NULL: refused). */
int rstate_load(const struct state *s, const struct candidate *c, struct rstate *rs, char *err, size_t errlen);
int rstate_load_opened(const struct state *s, const struct candidate *c, const struct sealed_opener *opener,
		       struct rstate *rs, char *err, size_t errlen);
/* Frees rs; secrets' bodies (plaintext key material) are wiped first. */
void rstate_release(struct rstate *rs);
/* The resource of type t called bare, or NULL. */
const struct rres *rstate_find(const struct rstate *rs, enum res_type t, const char *bare);
struct rroute {
	const char *name;        /* "route/x" */
	const char *host;        /* "*" when the route has none */
	const char *path;        /* "/" when the route has none */
	const char *cluster;     /* bare */
	const cJSON *body;       /* the route's whole body (its options, its snippet) */
};

/* The routes of a listener: exact hosts first (by name), then wildcard
 * hosts (the longest first), then "*"; within a host the longest path
 * first. Hosts compare without case. Refuses two routes with the same host
 * and path. Returns 0 (caller frees *out) or -1. */
int render_routes_of(const struct rstate *rs, const char *listener, struct rroute **out, size_t *n,
		     char *err, size_t errlen);
/* True when two route hosts name the same host (host names have no case). */
bool render_same_host(const char *a, const char *b);
/* Refuses two listeners (or a listener and the marker) on one address. */
int render_check_listeners(const struct rstate *rs, const char *marker, char *err, size_t errlen);

/* What a renderer writes into its main file after the shared frame. */
typedef int (*render_body_fn)(const struct rstate *rs, const struct render_opts *o, struct render_out *out,
			      struct buf *main, char *err, size_t errlen);
/* The frame every renderer shares: parses s with c applied, makes the main
 * file (out->files[0], named main_name), writes the "generated" header,
 * refuses two listeners on one address, then lets body write the rest. */
int render_main(const struct state *s, const struct candidate *c, const struct render_opts *o,
		struct render_out *out, const char *main_name, render_body_fn body, char *err, size_t errlen);

/* Where a renderer needs the generation's id inside the configuration
 * (the access log's format names it), it writes RENDER_GEN_TOKEN; the
 * marker step replaces every one with the id once it is known (the id is a
 * hash of the files with the token in them). */
#define RENDER_GEN_TOKEN "@TETHER_GEN@"
void render_fill_gen(struct buf *conf, const char *gen_id);

/* A resource's snippet for one consumer (snippet.h), checked again and
 * pasted after the block's own lines, each line after indent, between
 * the marker lines that map a checker's refusal back to "res: snippet.X"
 * (checkmap.h); nothing when the body has none. render_snippet: nginx's
 * server, location and upstream blocks, haproxy's backend.
 * render_snippet_haproxy_frontend: a listener's frontend, after tether's
 * http-request rules and before its use_backend rules: each route's
 * rules, every one given " if { var(txn.tether_route) -m str route/NAME }"
 * (so the frontend must name the route: see render_snippet_haproxy_any),
 * then the listener's lines as they are. 0, or -1 with err. */
int render_snippet(struct buf *b, const char *res, const cJSON *body, const char *consumer, const char *indent,
		   char *err, size_t errlen);
int render_snippet_haproxy_frontend(struct buf *b, const struct rres *listener, const struct rroute *routes,
				    size_t n, char *err, size_t errlen);
/* Whether a listener or any of its routes has a haproxy snippet. */
bool render_snippet_haproxy_any(const struct rres *listener, const struct rroute *routes, size_t n);

/* True when s holds only characters safe to print unquoted in any of our
 * configuration languages: [A-Za-z0-9._:/%@+,=!*~-] and '[' ']'. */
bool render_safe(const char *s);

/* Endpoint n of cluster c, ready to render: its address (safe), port and
 * weight (0: none given). Returns 0, or -1 with err naming it. */
int render_endpoint(const struct rres *c, const cJSON *ep, int n, const char **addr, int *port, int *weight,
		    char *err, size_t errlen);

#endif
