/* persist/persist.c: picks the persistence backend by name (--store) and the few
 * calls that dispatch through a commit in progress (see persist.h). */
#include "persist/persist.h"
#include "plane.h"

#include <stdio.h>
#include <string.h>

struct persist *persist_open(const struct plane_config *cfg, char *err, size_t errlen)
{
	if (cfg->upstream)
		return persist_relay_open(cfg, err, errlen);
	const char *name = cfg->store ? cfg->store : "sqlite";
	if (strcmp(name, "sqlite") == 0)
		return persist_sqlite_open(cfg->data, err, errlen);
	if (strcmp(name, "etcd") == 0)
		return persist_etcd_open(cfg, err, errlen);
	snprintf(err, errlen, "store: unknown backend '%s'", name);
	return NULL;
}

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
