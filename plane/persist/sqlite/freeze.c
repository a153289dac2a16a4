/* persist/sqlite/freeze.c: the SQLite backend's freeze window (see
 * persist.h): one row of table freeze (schema 7, db.c), the record as
 * JSON; no row when there is none. Written with synchronous=FULL. */
#include "persist/sqlite/sqlite.h"
#include "xmalloc.h"

#include <stdio.h>
#include <string.h>

int freeze_sqlite_load(struct persist *p, char **json, char *err, size_t errlen)
{
	struct db *db = persist_sqlite_db(p);
	sqlite3_stmt *st = NULL;
	int rc = -1;
	*json = NULL;
	pthread_mutex_lock(&db->lock);
	if (sqlite3_prepare_v2(db->conn, "SELECT record FROM freeze WHERE id = 1", -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "database: %s", sqlite3_errmsg(db->conn));
		goto out;
	}
	int step = sqlite3_step(st);
	if (step == SQLITE_ROW) {
		const char *text = (const char *)sqlite3_column_text(st, 0);
		*json = xstrndup(text ? text : "", (size_t)sqlite3_column_bytes(st, 0));
		rc = 1;
	} else if (step == SQLITE_DONE) {
		rc = 0;
	} else {
		snprintf(err, errlen, "database: %s", sqlite3_errmsg(db->conn));
	}
out:
	sqlite3_finalize(st);
	pthread_mutex_unlock(&db->lock);
	return rc;
}

int freeze_sqlite_save(struct persist *p, const char *json, char *err, size_t errlen)
{
	struct db *db = persist_sqlite_db(p);
	sqlite3_stmt *st = NULL;
	int rc = -1;
	pthread_mutex_lock(&db->lock);
	if (db_set_sync(db, 1, err, errlen) < 0)
		goto out;
	const char *sql = json ? "INSERT INTO freeze(id, record) VALUES(1, ?) "
				 "ON CONFLICT(id) DO UPDATE SET record = excluded.record"
			       : "DELETE FROM freeze WHERE id = 1";
	if (sqlite3_prepare_v2(db->conn, sql, -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "database: %s", sqlite3_errmsg(db->conn));
		goto out;
	}
	if (json)
		sqlite3_bind_text(st, 1, json, -1, SQLITE_STATIC);
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
