/* persist/sqlite/tokens.c: the SQLite backend's token records (see persist.h):
 * table tokens, written with synchronous=FULL before the answer. Column
 * expires (a console session's end) is added to an older database's
 * table in place: an older plane reads the table as before, and admits
 * nothing with a session (its role, "ui-session", is unknown to it). */
#include "persist/sqlite/sqlite.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const char schema[] =
	"CREATE TABLE IF NOT EXISTS tokens("
	"  id TEXT PRIMARY KEY, hash TEXT NOT NULL UNIQUE, role TEXT NOT NULL,"
	"  node TEXT NOT NULL DEFAULT '', name TEXT NOT NULL DEFAULT '',"
	"  created INTEGER NOT NULL, revoked INTEGER NOT NULL DEFAULT 0,"
	"  expires INTEGER NOT NULL DEFAULT 0);";

static bool has_expires(struct db *db)
{
	sqlite3_stmt *st = NULL;
	bool found = false;
	if (sqlite3_prepare_v2(db->conn, "SELECT 1 FROM pragma_table_info('tokens') WHERE name = 'expires'", -1, &st,
			       NULL) == SQLITE_OK)
		found = sqlite3_step(st) == SQLITE_ROW;
	sqlite3_finalize(st);
	return found;
}

int tokens_sqlite_schema(struct db *db, char *err, size_t errlen)
{
	pthread_mutex_lock(&db->lock);
	int rc = db_exec(db, schema, err, errlen);
	if (rc == 0 && !has_expires(db))
		rc = db_exec(db, "ALTER TABLE tokens ADD COLUMN expires INTEGER NOT NULL DEFAULT 0", err, errlen);
	pthread_mutex_unlock(&db->lock);
	return rc;
}

static const char *text(sqlite3_stmt *st, int col)
{
	const unsigned char *t = sqlite3_column_text(st, col);
	return t ? (const char *)t : "";
}

int tokens_sqlite_load(struct persist *p, persist_token_cb cb, void *ctx, char *err, size_t errlen)
{
	struct db *db = persist_sqlite_db(p);
	sqlite3_stmt *st = NULL;
	int rc = -1;
	pthread_mutex_lock(&db->lock);
	if (sqlite3_prepare_v2(db->conn, "SELECT id, hash, role, node, name, created, revoked, expires FROM tokens ORDER BY created, id",
			       -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "database: %s", sqlite3_errmsg(db->conn));
		goto out;
	}
	int step;
	while ((step = sqlite3_step(st)) == SQLITE_ROW) {
		struct persist_token t = {
			.id = text(st, 0), .hash = text(st, 1), .role = text(st, 2), .node = text(st, 3),
			.name = text(st, 4), .created = sqlite3_column_int64(st, 5), .revoked = sqlite3_column_int64(st, 6),
			.expires = sqlite3_column_int64(st, 7),
		};
		if (cb(ctx, &t) < 0) {
			snprintf(err, errlen, "tokens: a record could not be loaded");
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

int tokens_sqlite_add(struct persist *p, const struct persist_token *t, char *err, size_t errlen)
{
	struct db *db = persist_sqlite_db(p);
	sqlite3_stmt *st = NULL;
	int rc = -1;
	pthread_mutex_lock(&db->lock);
	if (db_set_sync(db, 1, err, errlen) < 0)
		goto out;
	if (sqlite3_prepare_v2(db->conn, "INSERT INTO tokens(id, hash, role, node, name, created, expires) VALUES(?,?,?,?,?,?,?)",
			       -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "database: %s", sqlite3_errmsg(db->conn));
		goto out;
	}
	sqlite3_bind_text(st, 1, t->id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, t->hash, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, t->role, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, t->node, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 5, t->name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 6, t->created);
	sqlite3_bind_int64(st, 7, t->expires);
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

/* Runs sql (an UPDATE or DELETE of one record: "...id=?" last, and one
 * "?" before it for when, if it has two) durably. 0, or -1 with err. */
static int by_id(struct persist *p, const char *sql, const char *id, int64_t when, char *err, size_t errlen)
{
	struct db *db = persist_sqlite_db(p);
	sqlite3_stmt *st = NULL;
	int rc = -1;
	pthread_mutex_lock(&db->lock);
	if (db_set_sync(db, 1, err, errlen) < 0)
		goto out;
	if (sqlite3_prepare_v2(db->conn, sql, -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "database: %s", sqlite3_errmsg(db->conn));
		goto out;
	}
	int n = sqlite3_bind_parameter_count(st);
	if (n > 1)
		sqlite3_bind_int64(st, 1, when);
	sqlite3_bind_text(st, n, id, -1, SQLITE_STATIC);
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

int tokens_sqlite_revoke(struct persist *p, const char *id, int64_t when, char *err, size_t errlen)
{
	return by_id(p, "UPDATE tokens SET revoked=? WHERE id=?", id, when, err, errlen);
}

int tokens_sqlite_delete(struct persist *p, const char *id, char *err, size_t errlen)
{
	return by_id(p, "DELETE FROM tokens WHERE id=?", id, 0, err, errlen);
}
