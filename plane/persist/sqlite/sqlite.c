/* persist/sqlite/sqlite.c: the embedded backend (--store sqlite, the default):
 * struct persist_ops over one SQLite database (see persist/sqlite/sqlite.h). A
 * commit is one transaction with synchronous=FULL; a hook's rollout record
 * is written inside it. */
#include "persist/sqlite/sqlite.h"
#include "persist/sqlite/rollout.h"
#include "persist/sqlite/store.h"
#include "persist/sqlite/vlog.h"
#include "xmalloc.h"

#include <stdlib.h>

struct persist_sqlite {
	struct persist base;
	struct db *db;
};

struct sqlite_txn {
	struct persist_txn base;
	struct db *db;
};

struct db *persist_sqlite_db(struct persist *p)
{
	return ((struct persist_sqlite *)p)->db;
}

static void sq_close(struct persist *p)
{
	db_close(persist_sqlite_db(p));
	free(p);
}

static int sq_load(struct persist *p, persist_resource_cb cb, void *ctx, uint64_t *version, uint64_t *horizon,
		   char *err, size_t errlen)
{
	return store_sqlite_load(persist_sqlite_db(p), cb, ctx, version, horizon, err, errlen);
}

static int sq_load_history(struct persist *p, persist_history_cb cb, void *ctx, bool *keep, uint64_t *pin,
			   char *err, size_t errlen)
{
	return store_sqlite_load_history(persist_sqlite_db(p), cb, ctx, keep, pin, err, errlen);
}

static int sq_commit(struct persist *p, const struct persist_commit *c, char *err, size_t errlen)
{
	struct sqlite_txn tx = { { p }, persist_sqlite_db(p) };
	return store_sqlite_commit(tx.db, c, &tx.base, err, errlen);
}

static int sq_trim_history(struct persist *p, bool keep, uint64_t floor, char *err, size_t errlen)
{
	return store_sqlite_trim_history(persist_sqlite_db(p), keep, floor, err, errlen);
}

static int sq_log_floor(struct persist *p, uint64_t *floor, char *err, size_t errlen)
{
	return vlog_sqlite_floor(persist_sqlite_db(p), floor, err, errlen);
}

static int sq_log_list(struct persist *p, const char *name, size_t limit, persist_version_cb cb, void *ctx,
		       char *err, size_t errlen)
{
	return vlog_sqlite_list(persist_sqlite_db(p), name, limit, cb, ctx, err, errlen);
}

static int sq_log_get(struct persist *p, uint64_t version, persist_version_cb vcb, persist_vchange_cb ccb,
		      void *ctx, char *err, size_t errlen)
{
	return vlog_sqlite_get(persist_sqlite_db(p), version, vcb, ccb, ctx, err, errlen);
}

static int sq_log_after(struct persist *p, uint64_t v, uint64_t upto, const char *name, persist_vchange_cb cb,
			void *ctx, char *err, size_t errlen)
{
	return vlog_sqlite_after(persist_sqlite_db(p), v, upto, name, cb, ctx, err, errlen);
}

static int sq_log_trim(struct persist *p, int64_t now, int64_t max_age, char *err, size_t errlen)
{
	return vlog_sqlite_trim_aged(persist_sqlite_db(p), now, max_age, err, errlen);
}

static int sq_rollout_save(struct persist *p, const struct ro_run *run, uint64_t released, char *err,
			   size_t errlen)
{
	return rollout_db_save(persist_sqlite_db(p), run, released, err, errlen);
}

static int sq_txn_rollout(struct persist_txn *tx, const struct ro_run *run, uint64_t released, char *err,
			  size_t errlen)
{
	/* inside store_sqlite_commit's transaction, with the db lock held */
	return rollout_db_write(((struct sqlite_txn *)tx)->db, run, released, err, errlen);
}

static int sq_rollout_load(struct persist *p, size_t max, bool with_members, struct ro_run **runs, size_t *n,
			   char *err, size_t errlen)
{
	return rollout_db_load(persist_sqlite_db(p), max, with_members, runs, n, err, errlen);
}

static int sq_released(struct persist *p, uint64_t *v)
{
	return rollout_db_released(persist_sqlite_db(p), v);
}

static int sq_set_released(struct persist *p, uint64_t v, char *err, size_t errlen)
{
	return rollout_db_set_released(persist_sqlite_db(p), v, err, errlen);
}

static const struct persist_ops persist_sqlite_ops = {
	.name = "sqlite",
	.close = sq_close,
	.load = sq_load,
	.load_history = sq_load_history,
	.commit = sq_commit,
	.trim_history = sq_trim_history,
	.log_floor = sq_log_floor,
	.log_list = sq_log_list,
	.log_get = sq_log_get,
	.log_after = sq_log_after,
	.log_trim = sq_log_trim,
	.rollout_save = sq_rollout_save,
	.txn_rollout = sq_txn_rollout,
	.rollout_load = sq_rollout_load,
	.released = sq_released,
	.set_released = sq_set_released,
	.nodes_load = nodes_sqlite_load,
	.nodes_save = nodes_sqlite_save,
	.tokens_load = tokens_sqlite_load,
	.token_add = tokens_sqlite_add,
	.token_revoke = tokens_sqlite_revoke,
	.token_delete = tokens_sqlite_delete,
	.approvals_load = approvals_sqlite_load,
	.approval_add = approvals_sqlite_add,
	.approvals_trim = approvals_sqlite_trim,
	.ticket_keys_load = ticket_keys_sqlite_load,
	.ticket_keys_swap = ticket_keys_sqlite_swap,
	.freeze_load = freeze_sqlite_load,
	.freeze_save = freeze_sqlite_save,
};

struct persist *persist_sqlite_open(const char *dir, char *err, size_t errlen)
{
	struct db *db = db_open(dir, err, errlen);
	if (!db)
		return NULL;
	if (tokens_sqlite_schema(db, err, errlen) < 0 || ticket_keys_sqlite_schema(db, err, errlen) < 0) {
		db_close(db);
		return NULL;
	}
	struct persist_sqlite *p = xcalloc(1, sizeof(*p));
	p->base.ops = &persist_sqlite_ops;
	p->db = db;
	return &p->base;
}
