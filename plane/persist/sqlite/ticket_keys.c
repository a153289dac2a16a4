/* persist/sqlite/ticket_keys.c: the SQLite backend's TLS session-ticket keys
 * (see persist.h): one row of table ticket_keys, its revision beside it,
 * written with synchronous=FULL. The database is 0600 (db.h); the text
 * read or written is wiped after use. */
#include "persist/sqlite/sqlite.h"
#include "persist/ticket_keys.h"

#include <stdio.h>
#include <string.h>

static const char schema[] = "CREATE TABLE IF NOT EXISTS ticket_keys("
			     "  id INTEGER PRIMARY KEY CHECK (id = 1), keys TEXT NOT NULL, rev INTEGER NOT NULL);";

int ticket_keys_sqlite_schema(struct db *db, char *err, size_t errlen)
{
	pthread_mutex_lock(&db->lock);
	int rc = db_exec(db, schema, err, errlen);
	pthread_mutex_unlock(&db->lock);
	return rc;
}

/* The row, under db->lock: 1 with *k and *rev, 0 none, PERSIST_MALFORMED
 * with *rev, -1 with err. */
static int read_row(struct db *db, struct persist_ticket_keys *k, uint64_t *rev, char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL;
	int rc = -1;
	if (sqlite3_prepare_v2(db->conn, "SELECT keys, rev FROM ticket_keys WHERE id = 1", -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "database: %s", sqlite3_errmsg(db->conn));
		return -1;
	}
	int step = sqlite3_step(st);
	if (step == SQLITE_ROW) {
		const char *text = (const char *)sqlite3_column_text(st, 0);
		size_t len = (size_t)sqlite3_column_bytes(st, 0);
		*rev = (uint64_t)sqlite3_column_int64(st, 1);
		if (!text || ticket_keys_decode(text, len, k) < 0) {
			snprintf(err, errlen, "database: the TLS session-ticket keys are malformed");
			rc = PERSIST_MALFORMED;
		} else
			rc = 1;
	} else if (step == SQLITE_DONE) {
		*rev = 0;
		rc = 0;
	} else {
		snprintf(err, errlen, "database: %s", sqlite3_errmsg(db->conn));
	}
	sqlite3_finalize(st);
	return rc;
}

int ticket_keys_sqlite_load(struct persist *p, struct persist_ticket_keys *k, uint64_t *rev, char *err,
			    size_t errlen)
{
	struct db *db = persist_sqlite_db(p);
	pthread_mutex_lock(&db->lock);
	int rc = read_row(db, k, rev, err, errlen);
	pthread_mutex_unlock(&db->lock);
	return rc;
}

int ticket_keys_sqlite_swap(struct persist *p, const struct persist_ticket_keys *k, uint64_t *rev, char *err,
			    size_t errlen)
{
	struct db *db = persist_sqlite_db(p);
	struct persist_ticket_keys was;
	uint64_t now_rev = 0;
	char text[TICKET_KEYS_TEXT];
	sqlite3_stmt *st = NULL;
	int rc = -1;
	pthread_mutex_lock(&db->lock);
	if (db_set_sync(db, 1, err, errlen) < 0 || db_exec(db, "BEGIN IMMEDIATE", err, errlen) < 0)
		goto out;
	int r = read_row(db, &was, &now_rev, err, errlen);
	if (r < 0 && r != PERSIST_MALFORMED) {   /* a malformed row is replaced */
		db_rollback(db);
		goto out;
	}
	explicit_bzero(&was, sizeof(was));
	if (now_rev != *rev) {
		db_rollback(db);
		snprintf(err, errlen, "the TLS session-ticket keys changed meanwhile");
		rc = PERSIST_CONFLICT;
		goto out;
	}
	size_t len = ticket_keys_encode(k, text);
	if (sqlite3_prepare_v2(db->conn, "INSERT INTO ticket_keys(id, keys, rev) VALUES(1, ?, ?) "
			       "ON CONFLICT(id) DO UPDATE SET keys = excluded.keys, rev = excluded.rev",
			       -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "database: %s", sqlite3_errmsg(db->conn));
		db_rollback(db);
		goto out;
	}
	sqlite3_bind_text(st, 1, text, (int)len, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)(now_rev + 1));
	if (sqlite3_step(st) != SQLITE_DONE) {
		snprintf(err, errlen, "database: %s", sqlite3_errmsg(db->conn));
		db_rollback(db);
		goto out;
	}
	if (db_exec(db, "COMMIT", err, errlen) < 0) {
		db_rollback(db);
		goto out;
	}
	*rev = now_rev + 1;
	rc = 0;
out:
	sqlite3_finalize(st);
	explicit_bzero(text, sizeof(text));
	pthread_mutex_unlock(&db->lock);
	return rc;
}
