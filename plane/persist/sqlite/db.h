/* persist/sqlite/db.h: the plane's SQLite database in --data DIR: opening with an
 * exclusive directory lock, WAL, the schema, and one mutex that every
 * transaction holds (one connection is shared by the store and the node
 * records). */
#ifndef TETHER_DB_H
#define TETHER_DB_H

#include <pthread.h>
#include <sqlite3.h>

struct db {
	sqlite3 *conn;
	pthread_mutex_t lock;
	int lock_fd;
	int sync_full;   /* current PRAGMA synchronous: 1 FULL, 0 NORMAL */
};

/* Opens DIR/tether.db, creating DIR (0700) and the schema. Every file the
 * plane keeps in DIR (the lock, the database, its -wal and -shm) is 0600
 * whatever the umask: one an older plane left wider is tightened, with a
 * warning; a DIR that group or others may list or write gets a warning
 * (chmod 700). NULL with err on failure. */
struct db *db_open(const char *dir, char *err, size_t errlen);
void db_close(struct db *db);

/* Runs sql (no results) on the connection; the caller holds db->lock. */
int db_exec(struct db *db, const char *sql, char *err, size_t errlen);
/* Rolls back the open transaction (after an error, already reported). */
void db_rollback(struct db *db);
/* Sets the durability of the next transactions: full (fsync per commit)
 * for resource writes, normal (survives a process crash) for node records. */
int db_set_sync(struct db *db, int full, char *err, size_t errlen);
/* Meta table: small integers by key. */
int db_meta_get(struct db *db, const char *key, long long *val);
int db_meta_set(struct db *db, const char *key, long long val, char *err, size_t errlen);

#endif
