/* core/guardcheck.h: the guards (common/guards.h) on a write: the guards
 * of the state the write makes, against each change's stored body before
 * and after. Hold the store's write lock (what is checked commits). */
#ifndef TETHER_GUARDCHECK_H
#define TETHER_GUARDCHECK_H

#include <stddef.h>

#include "core/store.h"

/* Checks changes ch[0..n) against the guards of the store with them
 * applied. Crossing none: 0 (*passed "[]"). Crossing some: without
 * override -1 with err listing them (the 422's message); with override 0,
 * and *passed the JSON array of the guards crossed. *passed is new
 * allocated (NULL when no override). */
int guardcheck_write(struct store *s, const struct store_change *ch, size_t n, const char *override,
		     char **passed, char *err, size_t errlen);

/* The version log's override record: {"passed":PASSED,"reason":REASON}
 * (new allocated), or NULL without an override. */
char *guardcheck_record(const char *override, const char *passed);

/* A rollout's own revert is never refused: when it crosses a guard (it
 * takes back a growth), it is an override of its own, so the nodes that
 * took the reverted version take the revert. Returns its record (new
 * allocated; NULL when it crosses none) with version, the one the commit
 * will make, marked overridden in o; the caller unmarks it with
 * overrides_forget when the commit does not make it. */
struct overrides;
char *guardcheck_revert(struct store *s, struct overrides *o, uint64_t version, const struct store_change *ch,
			size_t n, const char *reason);

#endif
