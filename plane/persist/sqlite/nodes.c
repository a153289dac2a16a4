/* persist/sqlite/nodes.c: the SQLite backend's node records (see persist.h): table
 * nodes, a batch per transaction with synchronous=NORMAL (a process crash
 * loses nothing; a power cut may lose the last batch, and the nodes report
 * again). */
#include "persist/sqlite/sqlite.h"

#include <stdio.h>
#include <string.h>

static const char *text_or(sqlite3_stmt *st, int col, const char *dflt)
{
	const unsigned char *t = sqlite3_column_text(st, col);
	return t ? (const char *)t : dflt;
}

int nodes_sqlite_load(struct persist *p, persist_node_cb cb, void *ctx, char *err, size_t errlen)
{
	static const char sql[] =
		"SELECT node, labels, first_seen, last_seen, transport, sent_version, sent_nonce,"
		" sent_at, acked_version, acked_at, healthy, nack_version, nack_nonce, nack_error,"
		" nack_at, acks, nacks, stale_acks, sub, key, key_id, key_at, revoked, held_version,"
		" held_reason, held_at, key_via, key_pending FROM nodes";
	struct db *db = persist_sqlite_db(p);
	sqlite3_stmt *st = NULL;
	int rc = -1;
	pthread_mutex_lock(&db->lock);
	if (sqlite3_prepare_v2(db->conn, sql, -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "database: %s", sqlite3_errmsg(db->conn));
		goto out;
	}
	int step;
	while ((step = sqlite3_step(st)) == SQLITE_ROW) {
		const char *id = (const char *)sqlite3_column_text(st, 0);
		if (!id)
			continue;
		struct persist_node n = {
			.id = id, .labels = text_or(st, 1, "{}"), .first_seen = sqlite3_column_int64(st, 2),
			.last_seen = sqlite3_column_int64(st, 3), .transport = text_or(st, 4, ""),
			.sent_version = (uint64_t)sqlite3_column_int64(st, 5), .sent_nonce = text_or(st, 6, ""),
			.sent_at = sqlite3_column_int64(st, 7), .acked_version = (uint64_t)sqlite3_column_int64(st, 8),
			.acked_at = sqlite3_column_int64(st, 9),
			.healthy = sqlite3_column_type(st, 10) == SQLITE_NULL ? -1 : sqlite3_column_int(st, 10),
			.has_nack = sqlite3_column_type(st, 11) != SQLITE_NULL,
			.nack_version = (uint64_t)sqlite3_column_int64(st, 11), .nack_nonce = text_or(st, 12, ""),
			.nack_error = text_or(st, 13, ""), .nack_at = sqlite3_column_int64(st, 14),
			.acks = (uint64_t)sqlite3_column_int64(st, 15), .nacks = (uint64_t)sqlite3_column_int64(st, 16),
			.stale = (uint64_t)sqlite3_column_int64(st, 17),
			.sub = (const char *)sqlite3_column_text(st, 18),
			.key = text_or(st, 19, ""), .key_id = text_or(st, 20, ""), .key_at = sqlite3_column_int64(st, 21),
			.revoked = text_or(st, 22, ""), .held_version = (uint64_t)sqlite3_column_int64(st, 23),
			.held_reason = text_or(st, 24, ""), .held_at = sqlite3_column_int64(st, 25),
			.key_via = text_or(st, 26, ""), .key_pending = sqlite3_column_int(st, 27) != 0,
		};
		if (cb(ctx, &n) < 0) {
			snprintf(err, errlen, "nodes: a record could not be loaded");
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

int nodes_sqlite_save(struct persist *p, const struct persist_node *recs, size_t cnt, char *err, size_t errlen)
{
	static const char sql[] =
		"INSERT OR REPLACE INTO nodes(node, labels, first_seen, last_seen, transport,"
		" sent_version, sent_nonce, sent_at, acked_version, acked_at, healthy,"
		" nack_version, nack_nonce, nack_error, nack_at, acks, nacks, stale_acks, sub,"
		" key, key_id, key_at, revoked, held_version, held_reason, held_at, key_via, key_pending)"
		" VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";
	/* a record whose ACK part alone changed: that part (about half the
	 * cost of replacing the row) */
	static const char acks_sql[] =
		"UPDATE nodes SET last_seen = ?2, sent_version = ?3, sent_nonce = ?4, sent_at = ?5,"
		" acked_version = ?6, acked_at = ?7, healthy = ?8, acks = ?9 WHERE node = ?1";
	struct db *db = persist_sqlite_db(p);
	int rc = -1;
	sqlite3_stmt *st = NULL, *ack = NULL;
	pthread_mutex_lock(&db->lock);
	if (db_set_sync(db, 0, err, errlen) < 0 || db_exec(db, "BEGIN IMMEDIATE", err, errlen) < 0)
		goto out;
	if (sqlite3_prepare_v2(db->conn, sql, -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db->conn, acks_sql, -1, &ack, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "database: %s", sqlite3_errmsg(db->conn));
		goto rollback;
	}
	for (size_t i = 0; i < cnt; i++) {
		const struct persist_node *r = &recs[i];
		if (r->acks_only) {
			sqlite3_bind_text(ack, 1, r->id, -1, SQLITE_STATIC);
			sqlite3_bind_int64(ack, 2, r->last_seen);
			sqlite3_bind_int64(ack, 3, (sqlite3_int64)r->sent_version);
			sqlite3_bind_text(ack, 4, r->sent_nonce ? r->sent_nonce : "", -1, SQLITE_STATIC);
			sqlite3_bind_int64(ack, 5, r->sent_at);
			sqlite3_bind_int64(ack, 6, (sqlite3_int64)r->acked_version);
			sqlite3_bind_int64(ack, 7, r->acked_at);
			if (r->healthy < 0)
				sqlite3_bind_null(ack, 8);
			else
				sqlite3_bind_int(ack, 8, r->healthy);
			sqlite3_bind_int64(ack, 9, (sqlite3_int64)r->acks);
			int step = sqlite3_step(ack);
			sqlite3_reset(ack);
			if (step != SQLITE_DONE) {
				snprintf(err, errlen, "database: %s", sqlite3_errmsg(db->conn));
				goto rollback;
			}
			if (sqlite3_changes(db->conn) > 0)
				continue;
			/* not there after all: the whole row */
		}
		sqlite3_bind_text(st, 1, r->id, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, r->labels, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 3, r->first_seen);
		sqlite3_bind_int64(st, 4, r->last_seen);
		sqlite3_bind_text(st, 5, r->transport, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 6, (sqlite3_int64)r->sent_version);
		sqlite3_bind_text(st, 7, r->sent_nonce, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 8, r->sent_at);
		sqlite3_bind_int64(st, 9, (sqlite3_int64)r->acked_version);
		sqlite3_bind_int64(st, 10, r->acked_at);
		if (r->healthy < 0)
			sqlite3_bind_null(st, 11);
		else
			sqlite3_bind_int(st, 11, r->healthy);
		if (r->has_nack) {
			sqlite3_bind_int64(st, 12, (sqlite3_int64)r->nack_version);
			sqlite3_bind_text(st, 13, r->nack_nonce, -1, SQLITE_STATIC);
			sqlite3_bind_text(st, 14, r->nack_error ? r->nack_error : "", -1, SQLITE_STATIC);
			sqlite3_bind_int64(st, 15, r->nack_at);
		} else {
			for (int c = 12; c <= 15; c++)
				sqlite3_bind_null(st, c);
		}
		sqlite3_bind_int64(st, 16, (sqlite3_int64)r->acks);
		sqlite3_bind_int64(st, 17, (sqlite3_int64)r->nacks);
		sqlite3_bind_int64(st, 18, (sqlite3_int64)r->stale);
		if (r->sub)
			sqlite3_bind_text(st, 19, r->sub, -1, SQLITE_STATIC);
		else
			sqlite3_bind_null(st, 19);
		if (r->key && r->key[0]) {
			sqlite3_bind_text(st, 20, r->key, -1, SQLITE_STATIC);
			sqlite3_bind_text(st, 21, r->key_id ? r->key_id : "", -1, SQLITE_STATIC);
		} else {
			sqlite3_bind_null(st, 20);
			sqlite3_bind_null(st, 21);
		}
		sqlite3_bind_int64(st, 22, r->key_at);
		if (r->revoked && r->revoked[0])
			sqlite3_bind_text(st, 23, r->revoked, -1, SQLITE_STATIC);
		else
			sqlite3_bind_null(st, 23);
		sqlite3_bind_int64(st, 24, (sqlite3_int64)(r->held_at ? r->held_version : 0));
		if (r->held_at)
			sqlite3_bind_text(st, 25, r->held_reason ? r->held_reason : "", -1, SQLITE_STATIC);
		else
			sqlite3_bind_null(st, 25);
		sqlite3_bind_int64(st, 26, r->held_at);
		if (r->key && r->key[0] && r->key_via && r->key_via[0])
			sqlite3_bind_text(st, 27, r->key_via, -1, SQLITE_STATIC);
		else
			sqlite3_bind_null(st, 27);
		sqlite3_bind_int(st, 28, r->key && r->key[0] && r->key_pending);
		if (sqlite3_step(st) != SQLITE_DONE) {
			snprintf(err, errlen, "database: %s", sqlite3_errmsg(db->conn));
			goto rollback;
		}
		sqlite3_reset(st);
	}
	if (db_exec(db, "COMMIT", err, errlen) < 0)
		goto rollback;
	rc = 0;
	goto out;
rollback:
	db_rollback(db);
out:
	sqlite3_finalize(st);
	sqlite3_finalize(ack);
	pthread_mutex_unlock(&db->lock);
	return rc;
}
