/* persist/sqlite/rollout.c: rollout rows in SQLite (see persist/sqlite/rollout.h). */
#include "persist/sqlite/rollout.h"
#include "buf.h"
#include "xmalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(struct db *db, char *err, size_t errlen)
{
	snprintf(err, errlen, "database: %s", sqlite3_errmsg(db->conn));
	return -1;
}

int rollout_db_write(struct db *db, const struct ro_run *run, uint64_t released, char *err, size_t errlen)
{
	static const char sql[] =
		"INSERT OR REPLACE INTO rollouts(id,state,stage,reached,from_version,to_version,revert_version,"
		"parent,touched,reason,members,started_at,stage_at,finished_at,messages,revert_messages,"
		"bump_messages) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";
	/* node ids hold no newline: one per line */
	struct buf m = BUF_INIT;
	for (size_t i = 0; i < run->nmembers; i++) {
		buf_puts(&m, run->members[i]);
		buf_putc(&m, '\n');
	}
	sqlite3_stmt *st = NULL;
	int rc = -1;
	if (sqlite3_prepare_v2(db->conn, sql, -1, &st, NULL) != SQLITE_OK) {
		fail(db, err, errlen);
		goto out;
	}
	int k = 1;
	sqlite3_bind_int64(st, k++, (sqlite3_int64)run->id);
	sqlite3_bind_int(st, k++, (int)run->state);
	sqlite3_bind_int64(st, k++, (sqlite3_int64)run->stage);
	sqlite3_bind_int64(st, k++, (sqlite3_int64)run->reached);
	sqlite3_bind_int64(st, k++, (sqlite3_int64)run->from);
	sqlite3_bind_int64(st, k++, (sqlite3_int64)run->to);
	sqlite3_bind_int64(st, k++, (sqlite3_int64)run->revert);
	sqlite3_bind_int64(st, k++, (sqlite3_int64)run->parent);
	sqlite3_bind_int64(st, k++, (sqlite3_int64)run->touched);
	sqlite3_bind_text(st, k++, run->reason ? run->reason : "", -1, SQLITE_STATIC);
	sqlite3_bind_text(st, k++, m.data ? m.data : "", (int)m.len, SQLITE_STATIC);
	sqlite3_bind_int64(st, k++, run->started_at);
	sqlite3_bind_int64(st, k++, run->stage_at);
	sqlite3_bind_int64(st, k++, run->finished_at);
	sqlite3_bind_int64(st, k++, (sqlite3_int64)run->msgs);
	sqlite3_bind_int64(st, k++, (sqlite3_int64)run->revert_msgs);
	sqlite3_bind_int64(st, k++, (sqlite3_int64)run->bump_msgs);
	if (sqlite3_step(st) != SQLITE_DONE) {
		fail(db, err, errlen);
		goto out;
	}
	rc = db_meta_set(db, "released", (long long)released + 1, err, errlen);
out:
	sqlite3_finalize(st);
	buf_release(&m);
	return rc;
}

int rollout_db_save(struct db *db, const struct ro_run *run, uint64_t released, char *err, size_t errlen)
{
	int rc = -1;
	pthread_mutex_lock(&db->lock);
	if (db_set_sync(db, 1, err, errlen) < 0 || db_exec(db, "BEGIN IMMEDIATE", err, errlen) < 0)
		goto out;
	if (rollout_db_write(db, run, released, err, errlen) < 0 || db_exec(db, "COMMIT", err, errlen) < 0) {
		db_rollback(db);
		goto out;
	}
	rc = 0;
out:
	pthread_mutex_unlock(&db->lock);
	return rc;
}

static void split_members(const char *text, struct ro_run *r)
{
	size_t cap = 0;
	for (const char *p = text; p && *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		if (len) {
			if (r->nmembers == cap) {
				cap = cap ? cap * 2 : 16;
				r->members = xrealloc(r->members, cap * sizeof(char *));
			}
			r->members[r->nmembers++] = xstrndup(p, len);
		}
		p += len + (nl ? 1 : 0);
	}
}

int rollout_db_load(struct db *db, size_t max, bool with_members, struct ro_run **runs, size_t *n, char *err,
		    size_t errlen)
{
	static const char sql[] =
		"SELECT id,state,stage,reached,from_version,to_version,revert_version,parent,touched,reason,"
		"members,started_at,stage_at,finished_at,messages,revert_messages,bump_messages "
		"FROM rollouts ORDER BY id DESC LIMIT ?";
	sqlite3_stmt *st = NULL;
	*runs = NULL;
	*n = 0;
	pthread_mutex_lock(&db->lock);
	if (sqlite3_prepare_v2(db->conn, sql, -1, &st, NULL) != SQLITE_OK) {
		fail(db, err, errlen);
		pthread_mutex_unlock(&db->lock);
		return -1;
	}
	sqlite3_bind_int64(st, 1, (sqlite3_int64)max);
	struct ro_run *out = xcalloc(max ? max : 1, sizeof(*out));
	size_t len = 0;
	int step = SQLITE_DONE;
	while (len < max && (step = sqlite3_step(st)) == SQLITE_ROW) {
		struct ro_run *r = &out[len++];
		int k = 0;
		r->id = (uint64_t)sqlite3_column_int64(st, k++);
		r->state = (enum ro_state)sqlite3_column_int(st, k++);
		r->stage = (size_t)sqlite3_column_int64(st, k++);
		r->reached = (size_t)sqlite3_column_int64(st, k++);
		r->from = (uint64_t)sqlite3_column_int64(st, k++);
		r->to = (uint64_t)sqlite3_column_int64(st, k++);
		r->revert = (uint64_t)sqlite3_column_int64(st, k++);
		r->parent = (uint64_t)sqlite3_column_int64(st, k++);
		r->touched = (size_t)sqlite3_column_int64(st, k++);
		const char *reason = (const char *)sqlite3_column_text(st, k++);
		r->reason = xstrdup(reason ? reason : "");
		const char *members = (const char *)sqlite3_column_text(st, k++);
		if (with_members && len == 1)
			split_members(members, r);
		else
			for (const char *c = members; c && *c; c++)
				r->member_count += *c == '\n';
		r->started_at = sqlite3_column_int64(st, k++);
		r->stage_at = sqlite3_column_int64(st, k++);
		r->finished_at = sqlite3_column_int64(st, k++);
		r->msgs = (uint64_t)sqlite3_column_int64(st, k++);
		r->revert_msgs = (uint64_t)sqlite3_column_int64(st, k++);
		r->bump_msgs = (uint64_t)sqlite3_column_int64(st, k++);
		bool bad_reach = with_members && len == 1 && r->reached > r->nmembers;
		if (r->state < RO_IN_PROGRESS || r->state > RO_ABORTED || bad_reach) {
			snprintf(err, errlen, "database: rollout %llu has a bad state or stage", (unsigned long long)r->id);
			goto bad;
		}
	}
	if (len < max && step != SQLITE_DONE) {
		fail(db, err, errlen);
		goto bad;
	}
	sqlite3_finalize(st);
	pthread_mutex_unlock(&db->lock);
	*runs = out;
	*n = len;
	return 0;
bad:
	sqlite3_finalize(st);
	pthread_mutex_unlock(&db->lock);
	for (size_t i = 0; i < len; i++)
		ro_run_release(&out[i]);
	free(out);
	return -1;
}

int rollout_db_released(struct db *db, uint64_t *v)
{
	long long x = 0;
	pthread_mutex_lock(&db->lock);
	int rc = db_meta_get(db, "released", &x);
	pthread_mutex_unlock(&db->lock);
	if (rc < 0)
		return -1;
	if (rc == 0 || x <= 0)
		return 0;
	*v = (uint64_t)(x - 1);
	return 1;
}

int rollout_db_set_released(struct db *db, uint64_t v, char *err, size_t errlen)
{
	pthread_mutex_lock(&db->lock);
	int rc = db_set_sync(db, 1, err, errlen);
	if (rc == 0)
		rc = db_meta_set(db, "released", (long long)v + 1, err, errlen);
	pthread_mutex_unlock(&db->lock);
	return rc;
}
