/* guardcheck.h: the guards (common/guards.h) at a node: after the
 * candidate is built (and, with --trust, verified) and before anything is
 * rendered, the candidate's own guards judge each change against what the
 * node serves. A violation is refused (NACKed) unless the plane says an
 * override happened after the version held: with --trust the verified
 * statement's "overridden", without it the push's unsigned one. */
#ifndef TETHER_AGENT_GUARDCHECK_H
#define TETHER_AGENT_GUARDCHECK_H

#include <stddef.h>
#include <stdint.h>

#include "state/push.h"
#include "state/state.h"

struct agent;

/* 0: nothing crossed, or crossed under an override (logged); -1 with err
 * ("guard/shrink: cluster/web: 4 -> 1 endpoints ...") for the NACK. */
int guardcheck_push(struct agent *a, const struct push *m, const struct candidate *c, char *err, size_t errlen);

/* The same judgment without the agent: the guards of state s with
 * candidate c applied, against s (the version held: s->version);
 * overridden is the plane's word. For the unit tests. */
int guardcheck_candidate(const struct state *s, const struct candidate *c, uint64_t overridden, char *err,
			 size_t errlen);

#endif
