/* resource.h: the resource model shared by plane and agent: names, types,
 * the make-before-break order, field validation and references. One copy of
 * these rules, so the plane's validator and the agent's can never disagree. */
#ifndef TETHER_RESOURCE_H
#define TETHER_RESOURCE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <cjson/cJSON.h>

#define RES_NAME_MAX 200        /* bytes in the part after "type/" */
#define RES_FULLNAME_MAX 220    /* "listener/" + name, with room */
#define RES_MAX_REFS 3

/* Types in make-before-break order: what is referenced comes first. */
enum res_type {
	RES_SECRET,
	RES_CLUSTER,
	RES_LISTENER,
	RES_ROUTE,
	RES_FILE,
	RES_GUARD,           /* limits on what a write may do (guards.h); renders nothing */
	RES_TYPE_COUNT,
	RES_UNKNOWN = RES_TYPE_COUNT,
};

/* Flags for resource_validate. */
#define RES_STRICT 1u        /* unknown fields are errors, naming the nearest known
				one: the agent's --strict, and the plane's writes
				unless --allow-unknown-fields */
#define RES_V_PLAINTEXT 2u   /* a secret must be plaintext, never sealed: the body
				an envelope opened to (the agent, after envelope_open) */
#define RES_V_STORED 4u      /* a sealed secret must be its stored form, with
				"wraps" ({} for none): a write (the plane) */

struct res_refs {
	int n;
	char name[RES_MAX_REFS][RES_FULLNAME_MAX + 1];   /* "cluster/web" */
};

const char *resource_type_name(enum res_type t);
enum res_type resource_type_of(const char *fullname);
/* The rank used to order a push: 0 for secrets .. 5 for guards. */
int resource_rank(const char *fullname);

/* Checks the bare-name grammar: [A-Za-z0-9._-]{1,200}, not "." or "..". */
bool resource_name_valid(const char *name);
/* Checks "type/name" with a known type. Returns 0, or -1 with err set. */
int resource_fullname_check(const char *fullname, char *err, size_t errlen);

/* Validates a body of a known type: an object; known fields of the right
 * type and range; with RES_STRICT, no unknown fields. A secret is
 * plaintext (cert, key) or sealed (envelope.h): without RES_V_* flags,
 * either, and a sealed one in its stored or its push form (what a node
 * receives); RES_V_PLAINTEXT refuses a sealed one, RES_V_STORED its push
 * form. On success fills refs
 * (may be NULL) with the names the body references. Errors name the
 * resource and the field: "cluster/web: endpoints[0].port must be ...". */
int resource_validate(const char *fullname, const cJSON *body, unsigned flags,
		      struct res_refs *refs, char *err, size_t errlen);

/* Writes "RES: " and the message into err (validation's errors, resource.c's
 * and resource_opts.c's); returns -1. */
int resource_vfail(char *err, size_t errlen, const char *res, const char *fmt, va_list ap)
	__attribute__((format(printf, 4, 0)));
/* Checks a route's path (and rewrite): starts with '/', URL path characters
 * only (no white space, quotes, ';', '{', '}', '$', '#', '?' or '\'), at
 * most 1024 bytes. */
bool resource_route_path_valid(const char *s);
/* Checks a file resource's path: relative, no "..", no empty or "."
 * component, no component starting ".tether" (the agent's work files), no
 * control characters, at most 4096 bytes. */
bool resource_file_path_valid(const char *path);
/* The path of a file resource from its (canonical) body, new allocated;
 * NULL for other types or a body without one. */
char *resource_file_path(const char *fullname, const char *body, size_t len);

#endif
