/* guards.h: the guard evaluator, one copy for the plane (every write) and
 * the agent (every push): given the guards of the NEW state (guard/NAME
 * resources, docs/protocol.md "Guards") and, for each changed resource,
 * its body before and after, it lists the violations, each naming the
 * guard, the resource, the field and the numbers:
 *   guard/shrink: cluster/web: 4 -> 1 endpoints loses 75% (max_shrink 0.5)
 * Guards themselves are not guarded. Nothing here allocates per resource
 * that a guard does not cover. */
#ifndef TETHER_GUARDS_H
#define TETHER_GUARDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define GUARDS_PREFIX "guard/"

struct guard_rule {
	char *name;                  /* "guard/shrink" */
	char *match;                 /* a name prefix; NULL: every resource */
	bool has_min_endpoints, has_max_shrink, has_max_bytes, has_max_growth;
	uint64_t min_endpoints;
	double max_shrink;
	uint64_t max_bytes;
	double max_growth;
};

struct guards {
	struct guard_rule *g;
	size_t n, cap;
};

void guards_init(struct guards *gs);
void guards_release(struct guards *gs);
/* Adds guard NAME from its (validated, canonical) body. A body that does
 * not parse, or a field of the wrong type, is -1 with err (the write's
 * validation refuses such a body before it gets here). */
int guards_add(struct guards *gs, const char *name, const char *body, size_t len, char *err, size_t errlen);

/* One changed resource: its body before (NULL: it did not exist) and after
 * (NULL: deleted). Strings borrowed. */
struct guard_change {
	const char *name;
	const char *before, *after;
	size_t before_len, after_len;
};

/* What crossed: the number of violations, the first few messages joined
 * by "; ", and the distinct guards crossed (JSON array text). */
struct guard_report {
	size_t count;
	struct buf text;             /* NUL-terminated when count > 0 */
	struct buf passed;           /* ["guard/a","guard/b"] */
	size_t nguards;
};
#define GUARDS_SHOWN 5           /* messages kept in text */

void guard_report_init(struct guard_report *r);
void guard_report_release(struct guard_report *r);

/* Checks changes against gs, adding to r. Returns the violations found. */
size_t guards_check(const struct guards *gs, const struct guard_change *ch, size_t n, struct guard_report *r);

/* The message of a refused write: "crosses 3 guards: A; B; C" (the first
 * few, then "and N more"), into out. */
void guards_summary(const struct guard_report *r, char *out, size_t outlen);

#endif
