/* persist/sqlite/approvals.c: the SQLite backend's approvals (see
 * persist.h): table approvals (db.c's schema), one row per (version, sub,
 * kid), written with synchronous=FULL before the answer. */
#include "persist/sqlite/sqlite.h"

#include <stdio.h>
#include <string.h>

static const char *text(sqlite3_stmt *st, int col)
{
	const unsigned char *t = sqlite3_column_text(st, col);
	return t ? (const char *)t : "";
}

int approvals_sqlite_load(struct persist *p, persist_approval_cb cb, void *ctx, char *err, size_t errlen)
{
	struct db *db = persist_sqlite_db(p);
	sqlite3_stmt *st = NULL;
	int rc = -1;
	pthread_mutex_lock(&db->lock);
	if (sqlite3_prepare_v2(db->conn, "SELECT version, sub, kid, token FROM approvals ORDER BY version, sub, kid",
			       -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "database: %s", sqlite3_errmsg(db->conn));
		goto out;
	}
	int step;
	while ((step = sqlite3_step(st)) == SQLITE_ROW) {
		struct persist_approval a = {
			.version = (uint64_t)sqlite3_column_int64(st, 0), .sub = text(st, 1), .kid = text(st, 2),
			.token = text(st, 3),
		};
		if (cb(ctx, &a) < 0) {
			snprintf(err, errlen, "approvals: a record could not be loaded");
			goto out;
		}
	}
	if (step != SQLITE_DONE) {
		snprintf(err, errlen, "database: %s", sqlite3_errmsg(db->conn));
		goto out;
	}
	rc = 0;
out:
	sqlite3_finalize(st);
	pthread_mutex_unlock(&db->lock);
	return rc;
}

int approvals_sqlite_trim(struct persist *p, uint64_t below, char *err, size_t errlen)
{
	struct db *db = persist_sqlite_db(p);
	sqlite3_stmt *st = NULL;
	int rc = -1;
	pthread_mutex_lock(&db->lock);
	if (db_set_sync(db, 1, err, errlen) < 0)
		goto out;
	if (sqlite3_prepare_v2(db->conn, "DELETE FROM approvals WHERE version < ?", -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "database: %s", sqlite3_errmsg(db->conn));
		goto out;
	}
	sqlite3_bind_int64(st, 1, (sqlite3_int64)below);
	if (sqlite3_step(st) != SQLITE_DONE) {
		snprintf(err, errlen, "database: %s", sqlite3_errmsg(db->conn));
		goto out;
	}
	rc = 0;
out:
	sqlite3_finalize(st);
	pthread_mutex_unlock(&db->lock);
	return rc;
}

int approvals_sqlite_add(struct persist *p, const struct persist_approval *a, char *err, size_t errlen)
{
	struct db *db = persist_sqlite_db(p);
	sqlite3_stmt *st = NULL;
	int rc = -1;
	pthread_mutex_lock(&db->lock);
	if (db_set_sync(db, 1, err, errlen) < 0)
		goto out;
	if (sqlite3_prepare_v2(db->conn, "INSERT OR REPLACE INTO approvals(version, sub, kid, token) VALUES(?,?,?,?)",
			       -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "database: %s", sqlite3_errmsg(db->conn));
		goto out;
	}
	sqlite3_bind_int64(st, 1, (sqlite3_int64)a->version);
	sqlite3_bind_text(st, 2, a->sub, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, a->kid, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, a->token, -1, SQLITE_STATIC);
	if (sqlite3_step(st) != SQLITE_DONE) {
		snprintf(err, errlen, "database: %s", sqlite3_errmsg(db->conn));
		goto out;
	}
	rc = 0;
out:
	sqlite3_finalize(st);
	pthread_mutex_unlock(&db->lock);
	return rc;
}
