/* persist/rollout_rec.c: a rollout record's state names and release (see
 * rollout_rec.h). */
#include "persist/rollout_rec.h"

#include <stdlib.h>
#include <string.h>

const char *ro_state_name(enum ro_state s)
{
	switch (s) {
	case RO_IN_PROGRESS: return "in_progress";
	case RO_COMPLETED: return "completed";
	case RO_ROLLED_BACK: return "rolled_back";
	case RO_ABORTED: return "aborted";
	}
	return "unknown";
}

void ro_run_release(struct ro_run *r)
{
	for (size_t i = 0; i < r->nmembers; i++)
		free(r->members[i]);
	free(r->members);
	free(r->reason);
	memset(r, 0, sizeof(*r));
}
