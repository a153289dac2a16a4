/* persist/sqlite/db.c: the plane's SQLite database: directory lock, WAL, schema, and
 * every file in the data directory 0600 (see db.h). */
#include "persist/sqlite/db.h"
#include "log.h"
#include "xmalloc.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* 2: the version log (vlog, vlog_changes); 3: nodes.sub; 4: a node's key
 * for sealed secrets (nodes.key, key_id, key_at, revoked) and its held
 * NACK (held_version, held_reason, held_at); 5: where the key came from
 * (nodes.key_via; key_at became the registrations' high-water mark,
 * kept when no key is live); 6: nodes.key_pending (a relay's key waiting
 * for an admin, --approve-relay-keys); 7: vlog.override (a write's
 * override of guards: {"reason","passed"} JSON, NULL: none), the freeze
 * window (table freeze), approvals (approval tokens per version, sub and
 * key: core/approvals.h); 8: vlog.emergency (1: an emergency revert,
 * tetherctl revert --now) */
#define SCHEMA_VERSION 8

static const char schema[] =
	"CREATE TABLE IF NOT EXISTS meta("
	"  key TEXT PRIMARY KEY, value INTEGER NOT NULL);"
	"CREATE TABLE IF NOT EXISTS resources("
	"  name TEXT PRIMARY KEY, version INTEGER NOT NULL, body TEXT NOT NULL);"
	"CREATE TABLE IF NOT EXISTS tombstones("
	"  name TEXT PRIMARY KEY, version INTEGER NOT NULL, deleted_at INTEGER NOT NULL);"
	"CREATE INDEX IF NOT EXISTS tombstones_version ON tombstones(version);"
	"CREATE TABLE IF NOT EXISTS history("
	"  name TEXT NOT NULL, version INTEGER NOT NULL, body TEXT,"
	"  PRIMARY KEY(name, version));"
	"CREATE TABLE IF NOT EXISTS vlog("
	"  version INTEGER PRIMARY KEY, author TEXT NOT NULL, time INTEGER NOT NULL,"
	"  message TEXT NOT NULL, names TEXT NOT NULL, reverted_by INTEGER NOT NULL DEFAULT 0,"
	"  override TEXT, emergency INTEGER NOT NULL DEFAULT 0);"
	"CREATE TABLE IF NOT EXISTS vlog_changes("
	"  version INTEGER NOT NULL, name TEXT NOT NULL, before TEXT, after TEXT,"
	"  PRIMARY KEY(version, name));"
	"CREATE INDEX IF NOT EXISTS vlog_changes_name ON vlog_changes(name, version);"
	"CREATE TABLE IF NOT EXISTS rollouts("
	"  id INTEGER PRIMARY KEY, state INTEGER NOT NULL, stage INTEGER NOT NULL,"
	"  reached INTEGER NOT NULL, from_version INTEGER NOT NULL, to_version INTEGER NOT NULL,"
	"  revert_version INTEGER NOT NULL, parent INTEGER NOT NULL, touched INTEGER NOT NULL,"
	"  reason TEXT NOT NULL, members TEXT NOT NULL, started_at INTEGER NOT NULL,"
	"  stage_at INTEGER NOT NULL, finished_at INTEGER NOT NULL, messages INTEGER NOT NULL,"
	"  revert_messages INTEGER NOT NULL, bump_messages INTEGER NOT NULL);"
	"CREATE TABLE IF NOT EXISTS nodes("
	"  node TEXT PRIMARY KEY, labels TEXT NOT NULL DEFAULT '{}',"
	"  first_seen INTEGER NOT NULL, last_seen INTEGER NOT NULL,"
	"  transport TEXT NOT NULL DEFAULT '',"
	"  sent_version INTEGER NOT NULL DEFAULT 0, sent_nonce TEXT NOT NULL DEFAULT '',"
	"  sent_at INTEGER NOT NULL DEFAULT 0,"
	"  acked_version INTEGER NOT NULL DEFAULT 0, acked_at INTEGER NOT NULL DEFAULT 0,"
	"  healthy INTEGER,"
	"  nack_version INTEGER, nack_nonce TEXT, nack_error TEXT, nack_at INTEGER,"
	"  acks INTEGER NOT NULL DEFAULT 0, nacks INTEGER NOT NULL DEFAULT 0,"
	"  stale_acks INTEGER NOT NULL DEFAULT 0, sub TEXT,"
	"  key TEXT, key_id TEXT, key_at INTEGER NOT NULL DEFAULT 0, revoked TEXT,"
	"  held_version INTEGER NOT NULL DEFAULT 0, held_reason TEXT, held_at INTEGER NOT NULL DEFAULT 0,"
	"  key_via TEXT, key_pending INTEGER NOT NULL DEFAULT 0);"
	"CREATE TABLE IF NOT EXISTS freeze("
	"  id INTEGER PRIMARY KEY CHECK (id = 1), record TEXT NOT NULL);"
	"CREATE TABLE IF NOT EXISTS approvals("
	"  version INTEGER NOT NULL, sub TEXT NOT NULL, kid TEXT NOT NULL, token TEXT NOT NULL,"
	"  PRIMARY KEY(version, sub, kid));";

/* Schema 4's to 6's columns of nodes, as an older database gets them. */
static const char *const nodes_added[][2] = {
	{ "key", "ALTER TABLE nodes ADD COLUMN key TEXT" },
	{ "key_id", "ALTER TABLE nodes ADD COLUMN key_id TEXT" },
	{ "key_at", "ALTER TABLE nodes ADD COLUMN key_at INTEGER NOT NULL DEFAULT 0" },
	{ "revoked", "ALTER TABLE nodes ADD COLUMN revoked TEXT" },
	{ "held_version", "ALTER TABLE nodes ADD COLUMN held_version INTEGER NOT NULL DEFAULT 0" },
	{ "held_reason", "ALTER TABLE nodes ADD COLUMN held_reason TEXT" },
	{ "held_at", "ALTER TABLE nodes ADD COLUMN held_at INTEGER NOT NULL DEFAULT 0" },
	{ "key_via", "ALTER TABLE nodes ADD COLUMN key_via TEXT" },   /* schema 5 */
	{ "key_pending", "ALTER TABLE nodes ADD COLUMN key_pending INTEGER NOT NULL DEFAULT 0" },   /* 6 */
};

/* Whether table has a column called col. */
static bool has_column(struct db *db, const char *table, const char *col)
{
	char sql[128];
	snprintf(sql, sizeof(sql), "SELECT 1 FROM pragma_table_info('%s') WHERE name = ?", table);
	sqlite3_stmt *st = NULL;
	bool found = false;
	if (sqlite3_prepare_v2(db->conn, sql, -1, &st, NULL) == SQLITE_OK) {
		sqlite3_bind_text(st, 1, col, -1, SQLITE_STATIC);
		found = sqlite3_step(st) == SQLITE_ROW;
	}
	sqlite3_finalize(st);
	return found;
}

int db_exec(struct db *db, const char *sql, char *err, size_t errlen)
{
	char *msg = NULL;
	if (sqlite3_exec(db->conn, sql, NULL, NULL, &msg) != SQLITE_OK) {
		snprintf(err, errlen, "database: %s", msg ? msg : sqlite3_errmsg(db->conn));
		sqlite3_free(msg);
		return -1;
	}
	return 0;
}

void db_rollback(struct db *db)
{
	char ignored[128];
	db_exec(db, "ROLLBACK", ignored, sizeof(ignored));
}

int db_set_sync(struct db *db, int full, char *err, size_t errlen)
{
	if (db->sync_full == full)
		return 0;
	if (db_exec(db, full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL", err, errlen) < 0)
		return -1;
	db->sync_full = full;
	return 0;
}

int db_meta_get(struct db *db, const char *key, long long *val)
{
	sqlite3_stmt *st;
	int found = 0;
	if (sqlite3_prepare_v2(db->conn, "SELECT value FROM meta WHERE key=?", -1, &st, NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW) {
		*val = sqlite3_column_int64(st, 0);
		found = 1;
	}
	sqlite3_finalize(st);
	return found;
}

int db_meta_set(struct db *db, const char *key, long long val, char *err, size_t errlen)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(db->conn, "INSERT INTO meta(key,value) VALUES(?,?) "
			       "ON CONFLICT(key) DO UPDATE SET value=excluded.value", -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "database: %s", sqlite3_errmsg(db->conn));
		return -1;
	}
	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, val);
	int rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		snprintf(err, errlen, "database: %s", sqlite3_errmsg(db->conn));
		return -1;
	}
	return 0;
}

/* Warns when group or others may list or write the data directory: its
 * files are 0600, but their names and count show, and whoever may write
 * there may replace them. */
static void check_dir_mode(const char *dir)
{
	struct stat st;
	if (stat(dir, &st) == 0 && (st.st_mode & (S_IRGRP | S_IWGRP | S_IROTH | S_IWOTH)))
		log_warn("data directory '%s' is mode %04o: group or others may list or write it; run chmod 700 '%s'",
			 dir, (unsigned)(st.st_mode & 07777), dir);
}

/* Makes fd, the file name in the data directory dir, 0600 when group or
 * others have any access to it (older planes created the database files
 * with the umask's mode, 0644 under umask 022), saying so. */
static void tighten(int fd, const char *dir, const char *name)
{
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || !(st.st_mode & 077))
		return;
	if (fchmod(fd, 0600) < 0)
		log_warn("data directory '%s': cannot make '%s' (mode %04o) 0600: %s; run chmod 600 '%s/%s'", dir, name,
			 (unsigned)(st.st_mode & 07777), strerror(errno), dir, name);
	else
		log_warn("data directory '%s': '%s' was mode %04o, now 0600 (only the plane's user may read it)", dir,
			 name, (unsigned)(st.st_mode & 07777));
}

/* Before SQLite opens it: creates DIR/tether.db 0600 if absent (SQLite
 * would create it with the umask's mode, and its -wal and -shm with the
 * database's) and tightens the database and the files beside it that an
 * older plane left wider. */
static int prepare_files(const char *dir, char *err, size_t errlen)
{
	static const char *const beside[] = { "tether.db-wal", "tether.db-shm", "tether.db-journal" };
	char *path = xasprintf("%s/tether.db", dir);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOCTTY, 0600);
	free(path);
	if (fd < 0) {
		snprintf(err, errlen, "cannot create database in '%s': %s", dir, strerror(errno));
		return -1;
	}
	tighten(fd, dir, "tether.db");
	close(fd);
	for (size_t i = 0; i < sizeof(beside) / sizeof(beside[0]); i++) {
		path = xasprintf("%s/%s", dir, beside[i]);
		fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
		free(path);
		if (fd >= 0) {
			tighten(fd, dir, beside[i]);
			close(fd);
		}
	}
	return 0;
}

struct db *db_open(const char *dir, char *err, size_t errlen)
{
	struct db *db = xcalloc(1, sizeof(*db));
	db->lock_fd = -1;
	db->sync_full = -1;
	pthread_mutex_init(&db->lock, NULL);

	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "cannot create data directory '%s': %s", dir, strerror(errno));
		goto fail;
	}
	char *lockpath = xasprintf("%s/lock", dir);
	db->lock_fd = open(lockpath, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	free(lockpath);
	if (db->lock_fd < 0) {
		snprintf(err, errlen, "cannot open lock file in '%s': %s", dir, strerror(errno));
		goto fail;
	}
	if (flock(db->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		snprintf(err, errlen, "data directory '%s' is in use by another tether-plane", dir);
		goto fail;
	}
	check_dir_mode(dir);
	tighten(db->lock_fd, dir, "lock");
	if (prepare_files(dir, err, errlen) < 0)
		goto fail;
	char *path = xasprintf("%s/tether.db", dir);
	int rc = sqlite3_open_v2(path, &db->conn, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
				 SQLITE_OPEN_FULLMUTEX, NULL);
	free(path);
	if (rc != SQLITE_OK) {
		snprintf(err, errlen, "cannot open database in '%s': %s", dir,
			 db->conn ? sqlite3_errmsg(db->conn) : sqlite3_errstr(rc));
		goto fail;
	}
	sqlite3_busy_timeout(db->conn, 5000);
	if (db_exec(db, "PRAGMA journal_mode=WAL", err, errlen) < 0 ||
	    db_set_sync(db, 1, err, errlen) < 0 ||
	    db_exec(db, "PRAGMA foreign_keys=OFF", err, errlen) < 0 ||
	    db_exec(db, schema, err, errlen) < 0)
		goto fail;
	long long ver = 0;
	int have = db_meta_get(db, "schema", &ver);
	if (have < 0) {
		snprintf(err, errlen, "database: cannot read schema version: %s", sqlite3_errmsg(db->conn));
		goto fail;
	}
	if (have && ver > SCHEMA_VERSION) {
		snprintf(err, errlen, "database in '%s' has schema %lld, newer than this plane (%d)",
			 dir, ver, SCHEMA_VERSION);
		goto fail;
	}
	if (!have || ver < 2) {
		/* the version log starts now: no state older than the
		 * database's version can be rebuilt */
		long long cur = 0;
		if (db_meta_get(db, "version", &cur) < 0 ||
		    db_meta_set(db, "vlog_floor", cur, err, errlen) < 0)
			goto fail;
		if (have)
			log_info("database in '%s': schema %lld upgraded to %d (the version log starts at version %lld)",
				 dir, ver, SCHEMA_VERSION, cur);
	}
	/* 3: a node's subscription is kept with its record (asked of the
	 * table itself: a database may hold the column whatever it says) */
	if (have && ver < 3 && !has_column(db, "nodes", "sub") &&
	    db_exec(db, "ALTER TABLE nodes ADD COLUMN sub TEXT", err, errlen) < 0)
		goto fail;
	/* 4: node keys and held NACKs; 5: key_via; 6: key_pending (each column
	 * asked of the table) */
	for (size_t i = 0; have && ver < 6 && i < sizeof(nodes_added) / sizeof(nodes_added[0]); i++)
		if (!has_column(db, "nodes", nodes_added[i][0]) && db_exec(db, nodes_added[i][1], err, errlen) < 0)
			goto fail;
	if (have && ver < 6)
		log_info("database in '%s': schema %lld upgraded to %d (node keys for sealed secrets)", dir, ver,
			 SCHEMA_VERSION);
	/* 7: a write's override of guards, kept in its version's record */
	if (have && ver < 7 && !has_column(db, "vlog", "override") &&
	    db_exec(db, "ALTER TABLE vlog ADD COLUMN override TEXT", err, errlen) < 0)
		goto fail;
	/* 8: an emergency revert, marked in its version's record */
	if (have && ver < 8 && !has_column(db, "vlog", "emergency") &&
	    db_exec(db, "ALTER TABLE vlog ADD COLUMN emergency INTEGER NOT NULL DEFAULT 0", err, errlen) < 0)
		goto fail;
	if ((!have || ver < SCHEMA_VERSION) && db_meta_set(db, "schema", SCHEMA_VERSION, err, errlen) < 0)
		goto fail;
	return db;
fail:
	db_close(db);
	return NULL;
}

void db_close(struct db *db)
{
	if (!db)
		return;
	if (db->conn)
		sqlite3_close(db->conn);
	if (db->lock_fd >= 0)
		close(db->lock_fd);
	pthread_mutex_destroy(&db->lock);
	free(db);
}
