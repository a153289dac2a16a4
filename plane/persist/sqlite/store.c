/* persist/sqlite/store.c: the store's SQLite persistence (see persist/sqlite/store.h). */
#include "persist/sqlite/store.h"
#include "persist/sqlite/vlog.h"

#include <stdio.h>
#include <string.h>

int store_sqlite_load(struct db *db, persist_resource_cb cb, void *ctx, uint64_t *version,
		      uint64_t *horizon, char *err, size_t errlen)
{
	static const char sql[] =
		"SELECT name, body, version, 0 FROM resources "
		"UNION ALL SELECT name, NULL, version, deleted_at FROM tombstones "
		"ORDER BY 3";
	sqlite3_stmt *st = NULL;
	int rc = 0;
	long long v = 0, h = 0;

	pthread_mutex_lock(&db->lock);
	if (db_meta_get(db, "version", &v) < 0 || db_meta_get(db, "horizon", &h) < 0) {
		snprintf(err, errlen, "database: cannot read meta: %s", sqlite3_errmsg(db->conn));
		rc = -1;
		goto out;
	}
	if (sqlite3_prepare_v2(db->conn, sql, -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "database: %s", sqlite3_errmsg(db->conn));
		rc = -1;
		goto out;
	}
	int step;
	while ((step = sqlite3_step(st)) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(st, 0);
		const char *body = (const char *)sqlite3_column_text(st, 1);
		size_t len = body ? (size_t)sqlite3_column_bytes(st, 1) : 0;
		long long ver = sqlite3_column_int64(st, 2);
		long long del = sqlite3_column_int64(st, 3);
		if (!name || ver <= 0 || ver > v) {
			snprintf(err, errlen, "database: row '%s' has version %lld beyond the store's %lld",
				 name ? name : "?", ver, v);
			rc = -1;
			goto out;
		}
		if (cb(ctx, name, body, len, (uint64_t)ver, del) < 0) {
			snprintf(err, errlen, "database: cannot load '%s'", name);
			rc = -1;
			goto out;
		}
	}
	if (step != SQLITE_DONE) {
		snprintf(err, errlen, "database: %s", sqlite3_errmsg(db->conn));
		rc = -1;
		goto out;
	}
	*version = (uint64_t)v;
	*horizon = (uint64_t)h;
out:
	sqlite3_finalize(st);
	pthread_mutex_unlock(&db->lock);
	return rc;
}

static int step_done(struct db *db, sqlite3_stmt *st, char *err, size_t errlen)
{
	int rc = sqlite3_step(st);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	if (rc != SQLITE_DONE) {
		snprintf(err, errlen, "database write failed: %s", sqlite3_errmsg(db->conn));
		return -1;
	}
	return 0;
}

int store_sqlite_commit(struct db *db, const struct persist_commit *txn, struct persist_txn *tx, char *err,
			size_t errlen)
{
	sqlite3_stmt *put = NULL, *unput = NULL, *tomb = NULL, *untomb = NULL, *hist = NULL;
	int rc = -1;

	pthread_mutex_lock(&db->lock);
	if (db_set_sync(db, 1, err, errlen) < 0 || db_exec(db, "BEGIN IMMEDIATE", err, errlen) < 0)
		goto out;
	if (sqlite3_prepare_v2(db->conn, "INSERT OR REPLACE INTO resources(name,version,body) VALUES(?,?,?)", -1, &put, NULL) ||
	    sqlite3_prepare_v2(db->conn, "DELETE FROM resources WHERE name=?", -1, &unput, NULL) ||
	    sqlite3_prepare_v2(db->conn, "INSERT OR REPLACE INTO tombstones(name,version,deleted_at) VALUES(?,?,?)", -1, &tomb, NULL) ||
	    sqlite3_prepare_v2(db->conn, "DELETE FROM tombstones WHERE name=?", -1, &untomb, NULL) ||
	    sqlite3_prepare_v2(db->conn, "INSERT OR REPLACE INTO history(name,version,body) VALUES(?,?,?)", -1, &hist,
			       NULL)) {
		snprintf(err, errlen, "database: %s", sqlite3_errmsg(db->conn));
		goto rollback;
	}
	for (size_t i = 0; i < txn->nkept; i++) {
		const struct persist_state *e = &txn->kept[i];
		sqlite3_bind_text(hist, 1, e->name, -1, SQLITE_STATIC);
		sqlite3_bind_int64(hist, 2, (sqlite3_int64)e->version);
		if (e->body)
			sqlite3_bind_text(hist, 3, e->body, (int)e->body_len, SQLITE_STATIC);
		else
			sqlite3_bind_null(hist, 3);
		if (step_done(db, hist, err, errlen) < 0)
			goto rollback;
	}
	for (size_t i = 0; i < txn->nchanges; i++) {
		const struct persist_change *c = &txn->changes[i];
		if (c->body) {
			sqlite3_bind_text(put, 1, c->name, -1, SQLITE_STATIC);
			sqlite3_bind_int64(put, 2, (sqlite3_int64)txn->version);
			sqlite3_bind_text(put, 3, c->body, (int)c->body_len, SQLITE_STATIC);
			sqlite3_bind_text(untomb, 1, c->name, -1, SQLITE_STATIC);
			if (step_done(db, put, err, errlen) < 0 || step_done(db, untomb, err, errlen) < 0)
				goto rollback;
		} else {
			sqlite3_bind_text(unput, 1, c->name, -1, SQLITE_STATIC);
			sqlite3_bind_text(tomb, 1, c->name, -1, SQLITE_STATIC);
			sqlite3_bind_int64(tomb, 2, (sqlite3_int64)txn->version);
			sqlite3_bind_int64(tomb, 3, txn->now);
			if (step_done(db, unput, err, errlen) < 0 || step_done(db, tomb, err, errlen) < 0)
				goto rollback;
		}
	}
	for (size_t i = 0; i < txn->npruned; i++) {
		sqlite3_bind_text(untomb, 1, txn->pruned[i], -1, SQLITE_STATIC);
		if (step_done(db, untomb, err, errlen) < 0)
			goto rollback;
	}
	if (db_meta_set(db, "version", (long long)txn->version, err, errlen) < 0 ||
	    db_meta_set(db, "horizon", (long long)txn->horizon, err, errlen) < 0)
		goto rollback;
	if (txn->nchanges && vlog_sqlite_write(db, txn, err, errlen) < 0)
		goto rollback;
	if (txn->hook && txn->hook(txn->hook_ctx, tx, txn->version, err, errlen) < 0)
		goto rollback;
	if (db_exec(db, "COMMIT", err, errlen) < 0)
		goto rollback;
	rc = 0;
	goto out;
rollback:
	db_rollback(db);
out:
	sqlite3_finalize(put);
	sqlite3_finalize(unput);
	sqlite3_finalize(tomb);
	sqlite3_finalize(untomb);
	sqlite3_finalize(hist);
	pthread_mutex_unlock(&db->lock);
	return rc;
}

int store_sqlite_load_history(struct db *db, persist_history_cb cb, void *ctx, bool *keep, uint64_t *pin, char *err,
			      size_t errlen)
{
	sqlite3_stmt *st = NULL;
	int rc = 0;
	long long p = 0;
	pthread_mutex_lock(&db->lock);
	if (db_meta_get(db, "pin", &p) < 0 ||
	    sqlite3_prepare_v2(db->conn, "SELECT name, version, body FROM history ORDER BY name, version DESC", -1,
			       &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "database: %s", sqlite3_errmsg(db->conn));
		rc = -1;
		goto out;
	}
	int step;
	while ((step = sqlite3_step(st)) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(st, 0);
		const char *body = (const char *)sqlite3_column_text(st, 2);
		size_t len = body ? (size_t)sqlite3_column_bytes(st, 2) : 0;
		if (!name || cb(ctx, name, (uint64_t)sqlite3_column_int64(st, 1), body, len) < 0) {
			snprintf(err, errlen, "database: history of '%s', which the store does not hold", name ? name : "?");
			rc = -1;
			goto out;
		}
	}
	if (step != SQLITE_DONE) {
		snprintf(err, errlen, "database: %s", sqlite3_errmsg(db->conn));
		rc = -1;
	}
	/* meta "pin" holds floor + 1; 0 (or none): no history kept */
	*keep = p > 0;
	*pin = p > 0 ? (uint64_t)(p - 1) : 0;
out:
	sqlite3_finalize(st);
	pthread_mutex_unlock(&db->lock);
	return rc;
}

int store_sqlite_trim_history(struct db *db, bool keep, uint64_t floor, char *err, size_t errlen)
{
	/* keep rows newer than floor and, per name, the newest at or below it */
	static const char trim[] =
		"DELETE FROM history WHERE version <= ?1 AND version < "
		"(SELECT MAX(h2.version) FROM history h2 WHERE h2.name = history.name AND h2.version <= ?1)";
	/* names whose current state is at or below floor need no history */
	static const char done[] =
		"DELETE FROM history WHERE name IN (SELECT name FROM resources WHERE version <= ?1 "
		"UNION SELECT name FROM tombstones WHERE version <= ?1)";
	int rc = -1;
	sqlite3_stmt *st = NULL;
	pthread_mutex_lock(&db->lock);
	if (db_set_sync(db, 1, err, errlen) < 0 || db_exec(db, "BEGIN IMMEDIATE", err, errlen) < 0)
		goto out;
	if (!keep) {
		if (db_exec(db, "DELETE FROM history", err, errlen) < 0)
			goto rollback;
	} else {
		for (int i = 0; i < 2; i++) {
			if (sqlite3_prepare_v2(db->conn, i ? done : trim, -1, &st, NULL) != SQLITE_OK) {
				snprintf(err, errlen, "database: %s", sqlite3_errmsg(db->conn));
				goto rollback;
			}
			sqlite3_bind_int64(st, 1, (sqlite3_int64)floor);
			if (step_done(db, st, err, errlen) < 0)
				goto rollback;
			sqlite3_finalize(st);
			st = NULL;
		}
	}
	if (db_meta_set(db, "pin", keep ? (long long)floor + 1 : 0, err, errlen) < 0 ||
	    db_exec(db, "COMMIT", err, errlen) < 0)
		goto rollback;
	rc = 0;
	goto out;
rollback:
	db_rollback(db);
out:
	sqlite3_finalize(st);
	pthread_mutex_unlock(&db->lock);
	return rc;
}
