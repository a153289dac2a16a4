/* consumer/runtime.h: changes without reloads, over haproxy's runtime API
 * (tetherd --runtime-api, an admin-level stats socket). With it the
 * haproxy renderer gives each backend tether_c_NAME, after its servers
 * e0..e(n-1), free disabled slots (render.h, RENDER_HEADROOM); a change
 * that touches only clusters' endpoints is then made by `set server`
 * commands on the running haproxy instead of a reload, and read back.
 *
 *   consumer/runtime.c        which changes can go that way (the plan: a
 *                             diff of the state and the candidate) and the
 *                             commands that make haproxy hold what the
 *                             plan wants
 *   consumer/runtime_state.c  haproxy's `show servers state` answer, parsed,
 *                             and compared slot by slot with the plan
 *   consumer/runtime_api.c    the talking: slots read, commands sent,
 *                             read back (common/haproxy_cli.c)
 *
 * Endpoints map to slots by position: endpoints[i] is server e<i>, in the
 * rendered file and at runtime alike, so the file on disk says what the
 * runtime holds (a restart or a later reload gives the same servers). */
#ifndef TETHER_RUNTIME_H
#define TETHER_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "state/state.h"

/* ---- the plan (consumer/runtime.c) ------------------------------------------- */

/* An endpoint as a server slot holds it. */
struct rt_endpoint {
	char addr[256];   /* an IP literal or a host name, as the resource says */
	unsigned port;
	unsigned weight;  /* 1 when the resource says none */
};

/* A cluster whose endpoints change and nothing else. */
struct rt_cluster {
	char *name;                 /* "cluster/web" */
	char *backend;              /* "tether_c_web" */
	struct rt_endpoint *old;    /* before (the applied state) */
	size_t nold;
	struct rt_endpoint *want;   /* after (the candidate): slots e0..e(nwant-1) */
	size_t nwant;
};

struct rt_plan {
	struct rt_cluster *clusters;
	size_t n;
};

/* Whether candidate c (its items name what they replace in the applied
 * state) changes only clusters' endpoints
 * (addresses, ports, weights, endpoints added or removed) of clusters that
 * exist before and after with every other field equal, and nothing else
 * (no listener, route, secret or file; no cluster added or removed). 1:
 * it does, and p holds each such cluster (release it), and once more for
 * each route of the applied state s (NULL: none) with a backend of its own
 * on it (tether_r_NAME, resource_opts_own_backend); 0: it does not,
 * and why says what else changes ("route/api changes"). */
int runtime_plan(const struct state *s, const struct candidate *c, struct rt_plan *p, char *why, size_t whylen);
void runtime_plan_release(struct rt_plan *p);

/* ---- what haproxy holds (consumer/runtime_state.c) ---------------------------- */

/* srv_admin_state's bits (haproxy's enum srv_admin): maintenance forced,
 * inherited, or for a failed resolution; drain forced or inherited. A
 * slot declared `disabled` is 0x05 (forced and configuration maintenance);
 * `set server ... state ready` clears the forced bits. */
#define RT_ADMIN_MAINT 0x23u
#define RT_ADMIN_DRAIN 0x18u

/* The most servers one answer may list (RENDER_HEADROOM of 10,000
 * endpoints is 20,000 slots) and the longest line. */
#define RT_SERVERS_MAX 65536
#define RT_LINE_MAX 4096
/* The largest answer read (20,000 rows of about 100 bytes, with room). */
#define RT_ANSWER_MAX (8u << 20)

struct rt_server {
	char name[128];      /* srv_name */
	int slot;            /* N of "eN" (no leading zero), -1 for another name */
	char addr[64];       /* srv_addr */
	char fqdn[256];      /* srv_fqdn ("" for "-" or when the column is absent) */
	unsigned port;       /* srv_port */
	unsigned uweight;    /* srv_uweight: the weight `set server weight` sets */
	unsigned admin;      /* srv_admin_state */
};

struct rt_servers {
	struct rt_server *v;   /* in haproxy's order */
	size_t n;
	size_t *index;         /* slot i -> its position in v + 1 (0: none) */
	size_t nindex;
};

/* Parses haproxy's answer to `show servers state BACKEND` (len bytes):
 * "1", the "# be_id be_name ..." header (columns found by name), one row
 * per server, each of backend. Strict and bounded: anything else is
 * refused, with haproxy's own words when it said something else ("Can't
 * find backend."). 0 (out filled; release it), or -1 with err (out
 * empty). */
int runtime_servers_parse(const char *text, size_t len, const char *backend, struct rt_servers *out, char *err,
			  size_t errlen);
void runtime_servers_release(struct rt_servers *s);
/* The server of slot i, or NULL. */
const struct rt_server *runtime_slot(const struct rt_servers *s, size_t i);
/* How many slots the running configuration has: e0..e(k-1) all there. */
size_t runtime_slots(const struct rt_servers *s);
/* Whether srv's address is addr: an IP address compares as an address
 * ("::ffff:127.0.0.1" is 127.0.0.1, "0:0::1" is "::1"), a host name with
 * srv_fqdn (the name it was configured with), without case. */
bool runtime_addr_is(const struct rt_server *srv, const char *addr);
/* Whether srv holds endpoint want, ready (not in maintenance, not
 * draining; its address as runtime_addr_is, its port and its weight);
 * want NULL: whether it is a free slot (in maintenance). */
bool runtime_slot_holds(const struct rt_server *srv, const struct rt_endpoint *want);
/* Whether every slot of have is what the file says of c: e<i> holds
 * want[i] for i < nwant, every other slot is free. 0, or -1 with err
 * naming the first slot and field that differ. */
int runtime_compare(const struct rt_cluster *c, const struct rt_servers *have, char *err, size_t errlen);

/* ---- the commands (consumer/runtime.c) ----------------------------------------- */

/* Appends to cmds, one a line, the `set server` commands that make have
 * (the running slots, at least c->nwant of them) hold what c wants: new or
 * changed endpoints first (addr and port, weight, then state ready for a
 * slot that was free), then the slots no endpoint wants any more, drained
 * then put in maintenance. A slot whose endpoint changed in the state is
 * set even when haproxy seems to hold it already. Returns how many. */
size_t runtime_commands(const struct rt_cluster *c, const struct rt_servers *have, struct buf *cmds);

/* ---- the talking (consumer/runtime_api.c) -------------------------------------- */

/* What the runtime updates take of tetherd's options. */
struct runtime_options {
	const char *socket;          /* --runtime-api: the admin-level stats socket */
	double timeout_s;            /* the whole update, every command and reading */
	void (*fault)(const char *point);   /* the core's fault points (NULL: none) */
};

enum runtime_result {
	RUNTIME_APPLIED,     /* haproxy holds the plan, read back */
	RUNTIME_EXHAUSTED,   /* more endpoints than the running configuration's slots */
	RUNTIME_FAILED,      /* the socket, a command or a reading failed */
	RUNTIME_DIFFERS,     /* read back, haproxy holds something else */
};

/* Makes the running haproxy hold plan p: per cluster, its slots read
 * (`show servers state`, which counts them: the running configuration
 * may be older than the file), the commands sent, one per connection;
 * then every cluster read back and compared. *sent counts the commands
 * haproxy took. Anything but RUNTIME_APPLIED comes with err saying what. */
enum runtime_result runtime_apply(const struct runtime_options *o, const struct rt_plan *p, size_t *sent, char *err,
				  size_t errlen);

#endif
