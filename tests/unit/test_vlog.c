/* test_vlog.c: unit tests of the version log in SQLite (persist/sqlite/vlog.c)
 * through the store and persist ops, in a temporary data directory: the
 * record of a commit (author, message, names, before and after), listing
 * by name, the first change after a version (what get --at and revert
 * read), a rollout's revert marks, retention by count moving the floor,
 * retention by age (in a commit, and without one: store_trim_log), and
 * the upgrade of a schema 1 database. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "persist/sqlite/sqlite.h"
#include "core/store.h"
#include "tmpdir.h"
#include "core/validate.h"

struct fixture {
	char dir[64];
	struct persist *p;
	struct store *s;
	struct store_opts opts;
};

static int open_store(struct fixture *f)
{
	char err[256];
	f->p = persist_sqlite_open(f->dir, err, sizeof(err));
	if (!f->p) {
		fprintf(stderr, "open: %s\n", err);
		return -1;
	}
	f->s = store_open(f->p, &f->opts, err, sizeof(err));
	if (!f->s) {
		fprintf(stderr, "store_open: %s\n", err);
		return -1;
	}
	return 0;
}

static void close_store(struct fixture *f)
{
	store_free(f->s);
	persist_close(f->p);
	f->s = NULL;
	f->p = NULL;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	if (!f || test_tmpdir_make(f->dir, sizeof(f->dir), "vlog") < 0) {
		free(f);
		return -1;
	}
	f->opts.tombstone_keep = 1000;
	f->opts.history_keep = 3;
	*state = f;
	return open_store(f);
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	close_store(f);
	int rc = test_tmpdir_remove(f->dir);
	free(f);
	return rc;
}

/* One change (json NULL: a removal) as one version, with author and message. */
static uint64_t write1(struct fixture *f, const char *name, const char *json, const struct store_meta *meta)
{
	struct store_change c;
	memset(&c, 0, sizeof(c));
	c.name = name;
	char err[256] = "";
	if (json) {
		cJSON *body = cJSON_Parse(json);
		assert_non_null(body);
		assert_int_equal(validate_upsert(name, body, &c, err, sizeof(err)), 0);
		cJSON_Delete(body);
	}
	uint64_t v = 0;
	bool changed = false;
	store_write_lock(f->s);
	int rc = store_commit_meta(f->s, &c, 1, NULL, NULL, meta, &v, &changed, err, sizeof(err));
	store_write_unlock(f->s);
	free(c.body);
	if (rc < 0)
		fail_msg("commit: %s", err);
	return v;
}

static int list_cb(void *ctx, const struct persist_version *v)
{
	buf_printf(ctx, "%s%llu:%s:%s:%s:%llu", ((struct buf *)ctx)->len ? " " : "", (unsigned long long)v->version,
		   v->author, v->message, v->names, (unsigned long long)v->reverted_by);
	return 0;
}

static int change_cb(void *ctx, const struct persist_vchange *c)
{
	buf_printf(ctx, " [%s@%llu %.*s -> %.*s]", c->name, (unsigned long long)c->version,
		   (int)(c->before ? c->before_len : 4), c->before ? c->before : "null",
		   (int)(c->after ? c->after_len : 4), c->after ? c->after : "null");
	return 0;
}

static char *listing(struct fixture *f, const char *name)
{
	struct buf b = BUF_INIT;
	char err[256];
	buf_puts(&b, "");
	assert_int_equal(f->p->ops->log_list(f->p, name, 100, list_cb, &b, err, sizeof(err)), 0);
	return buf_detach(&b, NULL);
}

static uint64_t floor_of(struct fixture *f)
{
	uint64_t fl = 99;
	char err[256];
	assert_int_equal(f->p->ops->log_floor(f->p, &fl, err, sizeof(err)), 0);
	return fl;
}

#define A "{\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":80}]}"
#define B "{\"endpoints\":[{\"address\":\"10.0.0.2\",\"port\":80}]}"

static void test_records(void **state)
{
	struct fixture *f = *state;
	struct store_meta alice = { "alice (admin token)", "first", 0, 0, NULL, false };
	assert_int_equal(write1(f, "cluster/a", A, &alice), 1);
	assert_int_equal(write1(f, "cluster/b", A, NULL), 2);
	assert_int_equal(write1(f, "cluster/a", B, &alice), 3);
	char *l = listing(f, NULL);
	assert_string_equal(l, "3:alice (admin token):first:[\"cluster/a\"]:0 2:plane::[\"cluster/b\"]:0 "
			       "1:alice (admin token):first:[\"cluster/a\"]:0");
	free(l);
	l = listing(f, "cluster/b");
	assert_string_equal(l, "2:plane::[\"cluster/b\"]:0");
	free(l);

	struct buf b = BUF_INIT;
	char err[256];
	buf_puts(&b, "");
	assert_int_equal(f->p->ops->log_get(f->p, 3, list_cb, change_cb, &b, err, sizeof(err)), 1);
	assert_string_equal(b.data, "3:alice (admin token):first:[\"cluster/a\"]:0 [cluster/a@3 " A " -> " B "]");
	buf_reset(&b);
	assert_int_equal(f->p->ops->log_get(f->p, 7, list_cb, change_cb, &b, err, sizeof(err)), 0);

	/* the first change after 1 of each name: its before is the state at 1 */
	buf_reset(&b);
	assert_int_equal(f->p->ops->log_after(f->p, 1, 3, NULL, change_cb, &b, err, sizeof(err)), 0);
	assert_string_equal(b.data, " [cluster/a@3 " A " -> " B "] [cluster/b@2 null -> " A "]");
	buf_reset(&b);
	assert_int_equal(f->p->ops->log_after(f->p, 1, 2, "cluster/a", change_cb, &b, err, sizeof(err)), 0);
	assert_int_equal(b.len, 0);   /* upto bounds it */
	buf_release(&b);
	assert_int_equal(floor_of(f), 0);
}

static int override_cb(void *ctx, const struct persist_version *v)
{
	buf_printf(ctx, "%s%llu:%s", ((struct buf *)ctx)->len ? " " : "", (unsigned long long)v->version,
		   v->override ? v->override : "-");
	return 0;
}

static int no_change(void *ctx, const struct persist_vchange *c)
{
	(void)ctx;
	(void)c;
	return 0;
}

/* What cb says of the log (list: want_list) and of version (get:
 * want_get), and the same after a reopen. */
static void read_back(struct fixture *f, persist_version_cb cb, uint64_t version, const char *want_list,
		      const char *want_get)
{
	struct buf b = BUF_INIT;
	char err[256];
	for (int round = 0; round < 2; round++) {
		buf_reset(&b);
		buf_puts(&b, "");
		assert_int_equal(f->p->ops->log_list(f->p, NULL, 10, cb, &b, err, sizeof(err)), 0);
		assert_string_equal(b.data, want_list);
		buf_reset(&b);
		buf_puts(&b, "");
		assert_int_equal(f->p->ops->log_get(f->p, version, cb, no_change, &b, err, sizeof(err)), 1);
		assert_string_equal(b.data, want_get);
		close_store(f);
		assert_int_equal(open_store(f), 0);
	}
	buf_release(&b);
}

/* A write's override of the guards is kept in its record (NULL: none),
 * read back by list and get, and across a reopen. */
static void test_override_record(void **state)
{
	struct fixture *f = *state;
	struct store_meta ov = { "bob", "shrink", 0, 0, "{\"passed\":[\"guard/shrink\"],\"reason\":\"incident 7\"}", false };
	write1(f, "cluster/a", A, NULL);                 /* 1 */
	assert_int_equal(write1(f, "cluster/a", B, &ov), 2);
	read_back(f, override_cb, 2, "2:{\"passed\":[\"guard/shrink\"],\"reason\":\"incident 7\"} 1:-",
		  "2:{\"passed\":[\"guard/shrink\"],\"reason\":\"incident 7\"}");
}

static int emergency_cb(void *ctx, const struct persist_version *v)
{
	buf_printf(ctx, "%s%llu:%s", ((struct buf *)ctx)->len ? " " : "", (unsigned long long)v->version,
		   v->emergency ? "emergency" : "-");
	return 0;
}

/* An emergency revert (revert --now) is marked in its record, read back
 * by list and get, and across a reopen. */
static void test_emergency_record(void **state)
{
	struct fixture *f = *state;
	struct store_meta em = { "oscar", "emergency revert to version 1", 1, 2, NULL, true };
	write1(f, "cluster/a", A, NULL);                 /* 1 */
	write1(f, "cluster/a", B, NULL);                 /* 2 */
	assert_int_equal(write1(f, "cluster/a", A, &em), 3);
	read_back(f, emergency_cb, 3, "3:emergency 2:- 1:-", "3:emergency");
}

static void test_revert_marks_and_retention(void **state)
{
	struct fixture *f = *state;
	write1(f, "cluster/a", A, NULL);                 /* 1 */
	write1(f, "cluster/a", B, NULL);                 /* 2 */
	struct store_meta ro = { "rollout 2", "revert of version 2", 1, 2, NULL, false };
	assert_int_equal(write1(f, "cluster/a", A, &ro), 3);
	char *l = listing(f, NULL);
	assert_string_equal(l, "3:rollout 2:revert of version 2:[\"cluster/a\"]:0 2:plane::[\"cluster/a\"]:3 "
			       "1:plane::[\"cluster/a\"]:0");
	free(l);
	write1(f, "cluster/a", NULL, NULL);              /* 4: keep 3 drops 1 */
	l = listing(f, NULL);
	assert_string_equal(l, "4:plane::[\"cluster/a\"]:0 3:rollout 2:revert of version 2:[\"cluster/a\"]:0 "
			       "2:plane::[\"cluster/a\"]:3");
	free(l);
	assert_int_equal(floor_of(f), 1);
	/* it survives a reopen */
	close_store(f);
	assert_int_equal(open_store(f), 0);
	assert_int_equal(floor_of(f), 1);
}

/* Makes every version recorded so far secs older (the store closed). */
static void backdate(struct fixture *f, int secs)
{
	close_store(f);
	char path[128], sql[128];
	snprintf(path, sizeof(path), "%s/tether.db", f->dir);
	snprintf(sql, sizeof(sql), "UPDATE vlog SET time = time - %d", secs);
	sqlite3 *db;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(open_store(f), 0);
}

static void test_age_in_a_commit(void **state)
{
	struct fixture *f = *state;
	close_store(f);
	f->opts.history_keep = 100;
	f->opts.history_max_age = 60;
	assert_int_equal(open_store(f), 0);
	write1(f, "cluster/a", A, NULL);                 /* 1 */
	write1(f, "cluster/a", B, NULL);                 /* 2 */
	backdate(f, 120);
	write1(f, "cluster/b", A, NULL);                 /* 3: 1 and 2 are past the age */
	char *l = listing(f, NULL);
	assert_string_equal(l, "3:plane::[\"cluster/b\"]:0");
	free(l);
	assert_int_equal(floor_of(f), 2);
}

static void test_age_without_a_commit(void **state)
{
	struct fixture *f = *state;
	char err[256];
	close_store(f);
	f->opts.history_keep = 100;
	f->opts.history_max_age = 60;
	assert_int_equal(open_store(f), 0);
	write1(f, "cluster/a", A, NULL);                 /* 1 */
	write1(f, "cluster/a", B, NULL);                 /* 2 */
	backdate(f, 120);
	write1(f, "cluster/b", A, NULL);                 /* 3 (1 and 2 go with it) */
	write1(f, "cluster/b", B, NULL);                 /* 4 */
	int64_t now = (int64_t)time(NULL);
	/* nothing past the age yet: nothing goes */
	assert_int_equal(store_trim_log(f->s, now, err, sizeof(err)), 0);
	char *l = listing(f, NULL);
	assert_string_equal(l, "4:plane::[\"cluster/b\"]:0 3:plane::[\"cluster/b\"]:0");
	free(l);
	assert_int_equal(floor_of(f), 2);
	/* a minute on, no write came: every version goes, the newest too */
	assert_int_equal(store_trim_log(f->s, now + 61, err, sizeof(err)), 0);
	l = listing(f, NULL);
	assert_string_equal(l, "");
	free(l);
	assert_int_equal(floor_of(f), 4);
	struct buf b = BUF_INIT;
	assert_int_equal(f->p->ops->log_get(f->p, 3, list_cb, change_cb, &b, err, sizeof(err)), 0);
	buf_release(&b);
	/* the next commit starts the log again; the floor stays */
	assert_int_equal(write1(f, "cluster/a", A, NULL), 5);
	l = listing(f, NULL);
	assert_string_equal(l, "5:plane::[\"cluster/a\"]:0");
	free(l);
	assert_int_equal(floor_of(f), 4);
	/* no age limit: the trim does nothing */
	close_store(f);
	f->opts.history_max_age = 0;
	assert_int_equal(open_store(f), 0);
	assert_int_equal(store_trim_log(f->s, now + 100000, err, sizeof(err)), 0);
	assert_int_equal(floor_of(f), 4);
}

/* Makes the store's database one of schema (its vlog without column),
 * and opens it again: upgraded in place. */
static void back_to_schema(struct fixture *f, const char *column, int schema)
{
	close_store(f);
	char path[128], sql[160];
	snprintf(path, sizeof(path), "%s/tether.db", f->dir);
	snprintf(sql, sizeof(sql), "ALTER TABLE vlog DROP COLUMN %s; UPDATE meta SET value=%d WHERE key='schema'", column,
		 schema);
	sqlite3 *db;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(open_store(f), 0);
}

/* A schema 6 database (a vlog without its override column) gains it;
 * its records read back without one. */
static void test_upgrade_from_schema_6(void **state)
{
	struct fixture *f = *state;
	write1(f, "cluster/a", A, NULL);
	back_to_schema(f, "override", 6);
	struct store_meta ov = { "bob", "", 0, 0, "{\"passed\":[],\"reason\":\"r\"}", false };
	assert_int_equal(write1(f, "cluster/a", B, &ov), 2);
	struct buf b = BUF_INIT;
	char err[256];
	buf_puts(&b, "");
	assert_int_equal(f->p->ops->log_list(f->p, NULL, 10, override_cb, &b, err, sizeof(err)), 0);
	assert_string_equal(b.data, "2:{\"passed\":[],\"reason\":\"r\"} 1:-");
	buf_release(&b);
}

/* A schema 7 database (a vlog without its emergency column) gains it,
 * upgraded in place: its records read back as not emergencies. */
static void test_upgrade_from_schema_7(void **state)
{
	struct fixture *f = *state;
	write1(f, "cluster/a", A, NULL);
	back_to_schema(f, "emergency", 7);
	char path[128];
	snprintf(path, sizeof(path), "%s/tether.db", f->dir);
	sqlite3 *db;
	struct store_meta em = { "oscar", "", 0, 1, NULL, true };
	assert_int_equal(write1(f, "cluster/a", B, &em), 2);
	struct buf b = BUF_INIT;
	char err[256];
	buf_puts(&b, "");
	assert_int_equal(f->p->ops->log_list(f->p, NULL, 10, emergency_cb, &b, err, sizeof(err)), 0);
	assert_string_equal(b.data, "2:emergency 1:-");
	buf_release(&b);
	close_store(f);
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	sqlite3_stmt *st;
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key='schema'", -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_int_equal(sqlite3_column_int(st, 0), 8);
	sqlite3_finalize(st);
	sqlite3_close(db);
	assert_int_equal(open_store(f), 0);
}

static void test_upgrade_from_schema_1(void **state)
{
	struct fixture *f = *state;
	write1(f, "cluster/a", A, NULL);
	write1(f, "cluster/b", A, NULL);
	close_store(f);
	/* make it a schema 1 database: no log tables, no nodes.sub */
	char path[128];
	snprintf(path, sizeof(path), "%s/tether.db", f->dir);
	sqlite3 *db;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "DROP TABLE vlog; DROP TABLE vlog_changes; "
				      "ALTER TABLE nodes DROP COLUMN sub; "
				      "DELETE FROM meta WHERE key='vlog_floor'; UPDATE meta SET value=1 WHERE key='schema'",
				      NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(open_store(f), 0);
	/* its history starts at the version it had */
	assert_int_equal(floor_of(f), 2);
	char *l = listing(f, NULL);
	assert_string_equal(l, "");
	free(l);
	assert_int_equal(write1(f, "cluster/a", B, NULL), 3);
	l = listing(f, NULL);
	assert_string_equal(l, "3:plane::[\"cluster/a\"]:0");
	free(l);
	/* the nodes table has its sub column again */
	close_store(f);
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "SELECT sub FROM nodes", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(open_store(f), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_records, setup, teardown),
		cmocka_unit_test_setup_teardown(test_override_record, setup, teardown),
		cmocka_unit_test_setup_teardown(test_emergency_record, setup, teardown),
		cmocka_unit_test_setup_teardown(test_upgrade_from_schema_7, setup, teardown),
		cmocka_unit_test_setup_teardown(test_revert_marks_and_retention, setup, teardown),
		cmocka_unit_test_setup_teardown(test_age_in_a_commit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_age_without_a_commit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_upgrade_from_schema_1, setup, teardown),
		cmocka_unit_test_setup_teardown(test_upgrade_from_schema_6, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
