/* persist/sqlite/vlog.c: the version log in SQLite (see persist/sqlite/vlog.h). A version's
 * record is a vlog row; each change a vlog_changes row with the body
 * before and after (NULL: absent). meta "vlog_floor" is the oldest
 * version whose state the log can rebuild: every change after it is kept. */
#include "persist/sqlite/vlog.h"
#include "buf.h"
#include "log.h"

#include <stdio.h>
#include <string.h>

static int fail(struct db *db, char *err, size_t errlen)
{
	snprintf(err, errlen, "database: %s", sqlite3_errmsg(db->conn));
	return -1;
}

static int run(struct db *db, sqlite3_stmt *st, char *err, size_t errlen)
{
	int rc = sqlite3_step(st);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	if (rc != SQLITE_DONE)
		return fail(db, err, errlen);
	return 0;
}

/* The newest version recorded before cutoff and below below (0: none). */
static int aged(struct db *db, int64_t cutoff, uint64_t below, uint64_t *v, char *err, size_t errlen)
{
	sqlite3_stmt *st;
	*v = 0;
	if (sqlite3_prepare_v2(db->conn, "SELECT MAX(version) FROM vlog WHERE time < ? AND version < ?", -1, &st,
			       NULL) != SQLITE_OK)
		return fail(db, err, errlen);
	sqlite3_bind_int64(st, 1, cutoff);
	sqlite3_bind_int64(st, 2, below > INT64_MAX ? INT64_MAX : (sqlite3_int64)below);
	int step = sqlite3_step(st);
	if (step == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
		*v = (uint64_t)sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	if (step != SQLITE_ROW)
		return fail(db, err, errlen);
	return 0;
}

/* Drops versions <= drop and moves the floor to it, unless the floor is
 * there already (it never moves down). */
static int drop_through(struct db *db, uint64_t drop, char *err, size_t errlen)
{
	long long floor = 0;
	if (db_meta_get(db, "vlog_floor", &floor) < 0)
		return fail(db, err, errlen);
	if (drop <= (uint64_t)floor)
		return 0;
	sqlite3_stmt *a = NULL, *b = NULL;
	int rc = -1;
	if (sqlite3_prepare_v2(db->conn, "DELETE FROM vlog WHERE version <= ?", -1, &a, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db->conn, "DELETE FROM vlog_changes WHERE version <= ?", -1, &b, NULL) != SQLITE_OK) {
		fail(db, err, errlen);
		goto out;
	}
	sqlite3_bind_int64(a, 1, (sqlite3_int64)drop);
	sqlite3_bind_int64(b, 1, (sqlite3_int64)drop);
	if (run(db, a, err, errlen) < 0 || run(db, b, err, errlen) < 0 ||
	    db_meta_set(db, "vlog_floor", (long long)drop, err, errlen) < 0)
		goto out;
	rc = 0;
out:
	sqlite3_finalize(a);
	sqlite3_finalize(b);
	return rc;
}

/* Drops versions below the retention and moves the floor. */
static int trim(struct db *db, const struct persist_commit *c, char *err, size_t errlen)
{
	uint64_t drop = 0;    /* versions <= drop go */
	if (c->version > c->log_keep)
		drop = c->version - c->log_keep;   /* keep 0: this one too */
	if (c->log_max_age > 0) {
		uint64_t v;
		if (aged(db, c->now - c->log_max_age, c->version, &v, err, errlen) < 0)
			return -1;
		if (v > drop)
			drop = v;
	}
	return drop_through(db, drop, err, errlen);
}

int vlog_sqlite_write(struct db *db, const struct persist_commit *c, char *err, size_t errlen)
{
	sqlite3_stmt *rec = NULL, *ch = NULL, *mark = NULL;
	struct buf names = BUF_INIT;
	int rc = -1;
	if (sqlite3_prepare_v2(db->conn, "INSERT OR REPLACE INTO vlog(version,author,time,message,names,reverted_by,"
			       "override,emergency) VALUES(?,?,?,?,?,0,?,?)", -1, &rec, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db->conn, "INSERT OR REPLACE INTO vlog_changes(version,name,before,after) "
			       "VALUES(?,?,?,?)", -1, &ch, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db->conn, "UPDATE vlog SET reverted_by=?1 WHERE version > ?2 AND version <= ?3 "
			       "AND reverted_by=0", -1, &mark, NULL) != SQLITE_OK) {
		fail(db, err, errlen);
		goto out;
	}
	buf_putc(&names, '[');
	for (size_t i = 0; i < c->nchanges; i++) {
		const struct persist_change *x = &c->changes[i];
		if (i)
			buf_putc(&names, ',');
		buf_json_string(&names, x->name);
		sqlite3_bind_int64(ch, 1, (sqlite3_int64)c->version);
		sqlite3_bind_text(ch, 2, x->name, -1, SQLITE_STATIC);
		if (c->before && c->before[i])
			sqlite3_bind_text(ch, 3, c->before[i], (int)c->before_len[i], SQLITE_STATIC);
		else
			sqlite3_bind_null(ch, 3);
		if (x->body)
			sqlite3_bind_text(ch, 4, x->body, (int)x->body_len, SQLITE_STATIC);
		else
			sqlite3_bind_null(ch, 4);
		if (run(db, ch, err, errlen) < 0)
			goto out;
	}
	buf_putc(&names, ']');
	sqlite3_bind_int64(rec, 1, (sqlite3_int64)c->version);
	sqlite3_bind_text(rec, 2, c->author ? c->author : "", -1, SQLITE_STATIC);
	sqlite3_bind_int64(rec, 3, c->now);
	sqlite3_bind_text(rec, 4, c->message ? c->message : "", -1, SQLITE_STATIC);
	sqlite3_bind_text(rec, 5, names.data, (int)names.len, SQLITE_STATIC);
	if (c->override)
		sqlite3_bind_text(rec, 6, c->override, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(rec, 6);
	sqlite3_bind_int(rec, 7, c->emergency ? 1 : 0);
	if (run(db, rec, err, errlen) < 0)
		goto out;
	if (c->reverts_to) {
		sqlite3_bind_int64(mark, 1, (sqlite3_int64)c->version);
		sqlite3_bind_int64(mark, 2, (sqlite3_int64)c->reverts_from);
		sqlite3_bind_int64(mark, 3, (sqlite3_int64)c->reverts_to);
		if (run(db, mark, err, errlen) < 0)
			goto out;
	}
	rc = trim(db, c, err, errlen);
out:
	buf_release(&names);
	sqlite3_finalize(rec);
	sqlite3_finalize(ch);
	sqlite3_finalize(mark);
	return rc;
}

int vlog_sqlite_floor(struct db *db, uint64_t *floor, char *err, size_t errlen)
{
	long long f = 0;
	pthread_mutex_lock(&db->lock);
	int r = db_meta_get(db, "vlog_floor", &f);
	if (r < 0)
		fail(db, err, errlen);
	pthread_mutex_unlock(&db->lock);
	*floor = (uint64_t)(f > 0 ? f : 0);
	return r < 0 ? -1 : 0;
}

int vlog_sqlite_trim_aged(struct db *db, int64_t now, int64_t max_age, char *err, size_t errlen)
{
	if (max_age <= 0)
		return 0;
	int rc = -1;
	uint64_t drop;
	long long floor = 0;
	pthread_mutex_lock(&db->lock);
	if (aged(db, now - max_age, UINT64_MAX, &drop, err, errlen) < 0)
		goto out;
	if (db_meta_get(db, "vlog_floor", &floor) < 0) {
		fail(db, err, errlen);
		goto out;
	}
	rc = 0;
	if (drop <= (uint64_t)floor)
		goto out;   /* nothing aged: no transaction */
	rc = -1;
	if (db_set_sync(db, 1, err, errlen) < 0 || db_exec(db, "BEGIN IMMEDIATE", err, errlen) < 0)
		goto out;
	if (drop_through(db, drop, err, errlen) < 0 || db_exec(db, "COMMIT", err, errlen) < 0) {
		db_rollback(db);
		goto out;
	}
	rc = 1;
out:
	pthread_mutex_unlock(&db->lock);
	if (rc == 1) {
		log_info("history: dropped the versions through %llu, older than %llds",
			 (unsigned long long)drop, (long long)max_age);
		rc = 0;
	}
	return rc;
}

static int each_version(struct db *db, sqlite3_stmt *st, persist_version_cb cb, void *ctx, char *err,
			size_t errlen, int *found)
{
	int step;
	while ((step = sqlite3_step(st)) == SQLITE_ROW) {
		struct persist_version v = {
			.version = (uint64_t)sqlite3_column_int64(st, 0),
			.author = (const char *)sqlite3_column_text(st, 1),
			.time = sqlite3_column_int64(st, 2),
			.message = (const char *)sqlite3_column_text(st, 3),
			.names = (const char *)sqlite3_column_text(st, 4),
			.reverted_by = (uint64_t)sqlite3_column_int64(st, 5),
			.override = (const char *)sqlite3_column_text(st, 6),
			.emergency = sqlite3_column_int(st, 7) != 0,
		};
		(*found)++;
		if (cb(ctx, &v) < 0) {
			snprintf(err, errlen, "history: cannot read version %llu", (unsigned long long)v.version);
			return -1;
		}
	}
	if (step != SQLITE_DONE)
		return fail(db, err, errlen);
	return 0;
}

int vlog_sqlite_list(struct db *db, const char *name, size_t limit, persist_version_cb cb, void *ctx, char *err,
		     size_t errlen)
{
	sqlite3_stmt *st = NULL;
	int rc = -1, found = 0;
	pthread_mutex_lock(&db->lock);
	const char *sql = name ?
		"SELECT v.version, v.author, v.time, v.message, v.names, v.reverted_by, v.override, v.emergency FROM vlog v "
		"WHERE v.version IN (SELECT version FROM vlog_changes WHERE name=?2) ORDER BY v.version DESC LIMIT ?1" :
		"SELECT version, author, time, message, names, reverted_by, override, emergency FROM vlog ORDER BY version DESC LIMIT ?1";
	if (sqlite3_prepare_v2(db->conn, sql, -1, &st, NULL) != SQLITE_OK) {
		fail(db, err, errlen);
		goto out;
	}
	sqlite3_bind_int64(st, 1, (sqlite3_int64)limit);
	if (name)
		sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
	rc = each_version(db, st, cb, ctx, err, errlen, &found);
out:
	sqlite3_finalize(st);
	pthread_mutex_unlock(&db->lock);
	return rc;
}

static int each_change(struct db *db, sqlite3_stmt *st, persist_vchange_cb cb, void *ctx, char *err,
		       size_t errlen)
{
	int step;
	while ((step = sqlite3_step(st)) == SQLITE_ROW) {
		struct persist_vchange c = {
			.version = (uint64_t)sqlite3_column_int64(st, 0),
			.name = (const char *)sqlite3_column_text(st, 1),
			.before = (const char *)sqlite3_column_text(st, 2),
			.before_len = (size_t)sqlite3_column_bytes(st, 2),
			.after = (const char *)sqlite3_column_text(st, 3),
			.after_len = (size_t)sqlite3_column_bytes(st, 3),
		};
		if (!c.name || cb(ctx, &c) < 0) {
			snprintf(err, errlen, "history: cannot read a change of version %llu",
				 (unsigned long long)c.version);
			return -1;
		}
	}
	if (step != SQLITE_DONE)
		return fail(db, err, errlen);
	return 0;
}

int vlog_sqlite_get(struct db *db, uint64_t version, persist_version_cb vcb, persist_vchange_cb ccb, void *ctx,
		    char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL, *cs = NULL;
	int rc = -1, found = 0;
	pthread_mutex_lock(&db->lock);
	if (sqlite3_prepare_v2(db->conn, "SELECT version, author, time, message, names, reverted_by, override, emergency FROM vlog "
			       "WHERE version=?", -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db->conn, "SELECT version, name, before, after FROM vlog_changes WHERE version=? "
			       "ORDER BY name", -1, &cs, NULL) != SQLITE_OK) {
		fail(db, err, errlen);
		goto out;
	}
	sqlite3_bind_int64(st, 1, (sqlite3_int64)version);
	sqlite3_bind_int64(cs, 1, (sqlite3_int64)version);
	if (each_version(db, st, vcb, ctx, err, errlen, &found) < 0)
		goto out;
	if (found && each_change(db, cs, ccb, ctx, err, errlen) < 0)
		goto out;
	rc = found ? 1 : 0;
out:
	sqlite3_finalize(st);
	sqlite3_finalize(cs);
	pthread_mutex_unlock(&db->lock);
	return rc;
}

int vlog_sqlite_after(struct db *db, uint64_t v, uint64_t upto, const char *name, persist_vchange_cb cb,
		      void *ctx, char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL;
	int rc = -1;
	pthread_mutex_lock(&db->lock);
	/* per name, its first change after v (bare columns with MIN() take
	 * the row of the minimum in SQLite) */
	const char *sql = name ?
		"SELECT MIN(version), name, before, after FROM vlog_changes "
		"WHERE version > ?1 AND version <= ?2 AND name = ?3 GROUP BY name" :
		"SELECT MIN(version), name, before, after FROM vlog_changes "
		"WHERE version > ?1 AND version <= ?2 GROUP BY name ORDER BY name";
	if (sqlite3_prepare_v2(db->conn, sql, -1, &st, NULL) != SQLITE_OK) {
		fail(db, err, errlen);
		goto out;
	}
	sqlite3_bind_int64(st, 1, (sqlite3_int64)v);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)upto);
	if (name)
		sqlite3_bind_text(st, 3, name, -1, SQLITE_STATIC);
	rc = each_change(db, st, cb, ctx, err, errlen);
out:
	sqlite3_finalize(st);
	pthread_mutex_unlock(&db->lock);
	return rc;
}
