/* persist/persist.c: the few calls that dispatch through the backend in
 * hand or a commit in progress (see persist/persist.h). */
#include "persist/persist.h"

#include <stdio.h>
#include <string.h>

void persist_close(struct persist *p)
{
	if (p)
		p->ops->close(p);
}

int persist_txn_rollout(struct persist_txn *tx, const struct ro_run *run, uint64_t released, char *err,
			size_t errlen)
{
	return tx->p->ops->txn_rollout(tx, run, released, err, errlen);
}
