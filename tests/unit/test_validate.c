/* test_validate.c: unit tests of plane/core/validate.c: canonical upserts and the
 * candidate-state checks (references, removals, names twice, the limit). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "persist/persist.h"
#include "log.h"
#include "core/store.h"
#include "tmpdir.h"
#include "core/validate.h"

#define CLUSTER "{\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":80}]}"
#define LISTENER "{\"port\":8080}"
#define SECRET "{\"cert\":\"-----BEGIN C\",\"key\":\"-----BEGIN K\"}"

struct fixture {
	char dir[64];
	struct persist *db;
	struct store *s;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	if (test_tmpdir_make(f->dir, sizeof(f->dir), "validate") < 0) {
		free(f);
		return -1;
	}
	*state = f;
	char err[256];
	struct store_opts opts = { .tombstone_keep = 1000 };
	f->db = persist_sqlite_open(f->dir, err, sizeof(err));
	if (!f->db)
		return -1;
	f->s = store_open(f->db, &opts, err, sizeof(err));
	return f->s ? 0 : -1;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	store_free(f->s);
	persist_close(f->db);
	int rc = test_tmpdir_remove(f->dir);
	free(f);
	return rc;
}

static void up(struct store_change *c, const char *name, const char *json)
{
	cJSON *body = cJSON_Parse(json);
	if (!body)
		fail_msg("test body does not parse: %s", json);
	char err[256];
	int rc = validate_upsert(name, body, c, err, sizeof(err));
	cJSON_Delete(body);
	if (rc < 0)
		fail_msg("validate_upsert %s: %s", name, err);
}

static void rm(struct store_change *c, const char *name)
{
	memset(c, 0, sizeof(*c));
	c->name = name;
}

static void free_bodies(struct store_change *c, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(c[i].body);
		c[i].body = NULL;
	}
}

/* validate_candidate under the write lock; frees the bodies after. */
static int check(struct fixture *f, struct store_change *c, size_t n, size_t max, char *err, size_t errlen)
{
	store_write_lock(f->s);
	err[0] = '\0';
	int rc = validate_candidate(f->s, c, n, max, err, errlen);
	store_write_unlock(f->s);
	free_bodies(c, n);
	return rc;
}

/* validate, then commit when valid: the plane's write path. */
static int write_path(struct fixture *f, struct store_change *c, size_t n, char *err, size_t errlen)
{
	uint64_t v;
	bool changed;
	store_write_lock(f->s);
	int rc = validate_candidate(f->s, c, n, 0, err, errlen);
	if (rc == 0 && store_commit(f->s, c, n, &v, &changed, err, errlen) < 0)
		rc = -2;
	store_write_unlock(f->s);
	free_bodies(c, n);
	return rc;
}

static void seed(struct fixture *f)
{
	struct store_change c[4];
	char err[256];
	up(&c[0], "cluster/c", CLUSTER);
	up(&c[1], "listener/l", LISTENER);
	up(&c[2], "route/r", "{\"listener\":\"l\",\"cluster\":\"c\"}");
	up(&c[3], "secret/s", SECRET);
	if (write_path(f, c, 4, err, sizeof(err)) != 0)
		fail_msg("seed: %s", err);
}

/* ---- validate_upsert ---------------------------------------------------- */

static void test_upsert_canonicalizes(void **state)
{
	(void)state;
	struct store_change a, b;
	up(&a, "cluster/web", "{\"lb\":\"random\",\"endpoints\":[{\"port\":9001,\"address\":\"127.0.0.1\",\"weight\":2}]}");
	up(&b, "cluster/web", "{ \"endpoints\" : [ { \"weight\" : 2, \"address\" : \"127.0.0.1\", \"port\" : 9001 } ], \"lb\" : \"random\" }");
	assert_string_equal(a.body, "{\"endpoints\":[{\"address\":\"127.0.0.1\",\"port\":9001,\"weight\":2}],\"lb\":\"random\"}");
	assert_string_equal(a.body, b.body);
	assert_int_equal(a.body_len, strlen(a.body));
	assert_string_equal(a.name, "cluster/web");
	assert_int_equal(a.refs.n, 0);
	free(a.body);
	free(b.body);

	/* references come out with the change */
	up(&a, "route/r", "{\"cluster\":\"web\",\"listener\":\"front\"}");
	assert_string_equal(a.body, "{\"cluster\":\"web\",\"listener\":\"front\"}");
	assert_int_equal(a.refs.n, 2);
	assert_string_equal(a.refs.name[0], "listener/front");
	assert_string_equal(a.refs.name[1], "cluster/web");
	free(a.body);
}

static void test_upsert_keeps_unknown_fields(void **state)
{
	(void)state;
	struct store_change a;
	up(&a, "listener/l", "{\"zz\":{\"b\":1,\"a\":[true,null]},\"port\":443,\"http3\":true}");
	assert_string_equal(a.body, "{\"http3\":true,\"port\":443,\"zz\":{\"a\":[true,null],\"b\":1}}");
	free(a.body);
}

static void test_upsert_refuses_with_message(void **state)
{
	(void)state;
	struct store_change a;
	char err[256] = "";
	cJSON *body = cJSON_Parse("{\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":70000}]}");
	assert_int_equal(validate_upsert("cluster/web", body, &a, err, sizeof(err)), -1);
	assert_string_equal(err, "cluster/web: endpoints[0].port must be an integer in 1..65535");
	assert_null(a.body);
	assert_int_equal(validate_upsert("cluster/we b", body, &a, err, sizeof(err)), -1);
	assert_string_equal(err, "name 'we b' must match [A-Za-z0-9._-]{1,200}");
	assert_null(a.body);
	cJSON_Delete(body);
}

/* ---- validate_candidate ------------------------------------------------ */

static void test_route_before_its_cluster_passes(void **state)
{
	struct fixture *f = *state;
	struct store_change c[3];
	char err[256];
	up(&c[0], "route/r", "{\"listener\":\"l\",\"cluster\":\"c\"}");
	up(&c[1], "listener/l", LISTENER);
	up(&c[2], "cluster/c", CLUSTER);
	assert_int_equal(check(f, c, 3, 0, err, sizeof(err)), 0);
	assert_string_equal(err, "");
}

static void test_dangling_reference_refused(void **state)
{
	struct fixture *f = *state;
	seed(f);
	struct store_change c[2];
	char err[256];
	up(&c[0], "route/z", "{\"listener\":\"l\",\"cluster\":\"z\"}");
	assert_int_equal(check(f, c, 1, 0, err, sizeof(err)), -1);
	assert_string_equal(err, "route/z: unknown cluster 'z'");

	up(&c[0], "route/z", "{\"listener\":\"nope\",\"cluster\":\"c\"}");
	assert_int_equal(check(f, c, 1, 0, err, sizeof(err)), -1);
	assert_string_equal(err, "route/z: unknown listener 'nope'");

	up(&c[0], "listener/t", "{\"port\":443,\"tls\":{\"secret\":\"missing\"}}");
	assert_int_equal(check(f, c, 1, 0, err, sizeof(err)), -1);
	assert_string_equal(err, "listener/t: unknown secret 'missing'");

	/* a reference to something the same write removes */
	up(&c[0], "listener/t", "{\"port\":443,\"tls\":{\"secret\":\"s\"}}");
	rm(&c[1], "secret/s");
	assert_int_equal(check(f, c, 2, 0, err, sizeof(err)), -1);
	assert_string_equal(err, "listener/t: unknown secret 's'");

	/* and to a tombstone */
	rm(&c[0], "secret/s");
	assert_int_equal(write_path(f, c, 1, err, sizeof(err)), 0);
	up(&c[0], "listener/t", "{\"port\":443,\"tls\":{\"secret\":\"s\"}}");
	assert_int_equal(check(f, c, 1, 0, err, sizeof(err)), -1);
	assert_string_equal(err, "listener/t: unknown secret 's'");
}

static void test_file_path_conflicts(void **state)
{
	struct fixture *f = *state;
	struct store_change c[2];
	char err[256];
	up(&c[0], "file/a", "{\"path\":\"conf/x.conf\",\"content\":\"a\"}");
	assert_int_equal(write_path(f, c, 1, err, sizeof(err)), 0);

	/* the same path in the store */
	up(&c[0], "file/b", "{\"path\":\"conf/x.conf\",\"content\":\"b\"}");
	assert_int_equal(check(f, c, 1, 0, err, sizeof(err)), -1);
	assert_string_equal(err, "file/b: path 'conf/x.conf' is already the path of file/a");
	/* a file where another file's directory is */
	up(&c[0], "file/c", "{\"path\":\"conf\",\"content\":\"c\"}");
	assert_int_equal(check(f, c, 1, 0, err, sizeof(err)), -1);
	assert_string_equal(err, "file/c: path 'conf' is a directory of other files");
	/* a file under another file */
	up(&c[0], "file/d", "{\"path\":\"conf/x.conf/y\",\"content\":\"d\"}");
	assert_int_equal(check(f, c, 1, 0, err, sizeof(err)), -1);
	assert_string_equal(err, "file/d: path 'conf/x.conf/y' lies under 'conf/x.conf', the path of file/a");
	/* two new files with one path in one write */
	up(&c[0], "file/e", "{\"path\":\"e\",\"content\":\"1\"}");
	up(&c[1], "file/f", "{\"path\":\"e\",\"content\":\"2\"}");
	assert_int_equal(check(f, c, 2, 0, err, sizeof(err)), -1);
	assert_string_equal(err, "file/f: path 'e' is already the path of file/e");
	/* a path freed by the same write can be taken */
	up(&c[0], "file/a", "{\"path\":\"other\",\"content\":\"a\"}");
	up(&c[1], "file/b", "{\"path\":\"conf/x.conf\",\"content\":\"b\"}");
	assert_int_equal(check(f, c, 2, 0, err, sizeof(err)), 0);
	rm(&c[0], "file/a");
	assert_int_equal(check(f, c, 2, 0, err, sizeof(err)), 0);
	/* after the store moved the path, the old one is free */
	up(&c[0], "file/a", "{\"path\":\"other\",\"content\":\"a\"}");
	assert_int_equal(write_path(f, c, 1, err, sizeof(err)), 0);
	up(&c[0], "file/c", "{\"path\":\"conf\",\"content\":\"c\"}");
	assert_int_equal(check(f, c, 1, 0, err, sizeof(err)), 0);
}

static void test_remove_referenced_refused_naming_referrer(void **state)
{
	struct fixture *f = *state;
	seed(f);
	struct store_change c[2];
	char err[256];
	rm(&c[0], "cluster/c");
	assert_int_equal(check(f, c, 1, 0, err, sizeof(err)), -1);
	assert_string_equal(err, "cannot remove cluster/c: route/r refers to it");
	rm(&c[0], "listener/l");
	assert_int_equal(check(f, c, 1, 0, err, sizeof(err)), -1);
	assert_string_equal(err, "cannot remove listener/l: route/r refers to it");

	/* a referrer added by the same write is named */
	up(&c[0], "route/q", "{\"listener\":\"l\",\"cluster\":\"c\"}");
	rm(&c[1], "route/r");
	assert_int_equal(write_path(f, c, 2, err, sizeof(err)), 0);
	up(&c[0], "route/n", "{\"listener\":\"l\",\"cluster\":\"c2\"}");
	rm(&c[1], "cluster/c");
	/* route/n names cluster/c2, which does not exist: refused for that first */
	assert_int_equal(check(f, c, 2, 0, err, sizeof(err)), -1);
	assert_string_equal(err, "route/n: unknown cluster 'c2'");
	rm(&c[0], "cluster/c");
	assert_int_equal(check(f, c, 1, 0, err, sizeof(err)), -1);
	assert_string_equal(err, "cannot remove cluster/c: route/q refers to it");
}

static void test_remove_referrer_and_referenced_together(void **state)
{
	struct fixture *f = *state;
	seed(f);
	struct store_change c[3];
	char err[256];
	rm(&c[0], "cluster/c");
	rm(&c[1], "route/r");
	assert_int_equal(check(f, c, 2, 0, err, sizeof(err)), 0);
	/* retargeting the referrer in the same write */
	up(&c[0], "cluster/d", CLUSTER);
	up(&c[1], "route/r", "{\"listener\":\"l\",\"cluster\":\"d\"}");
	rm(&c[2], "cluster/c");
	assert_int_equal(check(f, c, 3, 0, err, sizeof(err)), 0);
	/* and it commits */
	rm(&c[0], "cluster/c");
	rm(&c[1], "route/r");
	rm(&c[2], "listener/l");
	assert_int_equal(write_path(f, c, 3, err, sizeof(err)), 0);
	assert_int_equal(store_count(f->s), 1);
}

static void test_referrer_in_same_write_blocks_later_removal(void **state)
{
	struct fixture *f = *state;
	/* the route is written before its cluster in one write ... */
	struct store_change c[3];
	char err[256];
	up(&c[0], "route/r", "{\"listener\":\"l\",\"cluster\":\"c\"}");
	up(&c[1], "listener/l", LISTENER);
	up(&c[2], "cluster/c", CLUSTER);
	assert_int_equal(write_path(f, c, 3, err, sizeof(err)), 0);
	/* ... and removing the cluster later must still be refused */
	rm(&c[0], "cluster/c");
	assert_int_equal(check(f, c, 1, 0, err, sizeof(err)), -1);
	assert_string_equal(err, "cannot remove cluster/c: route/r refers to it");
}

static void test_name_twice_refused(void **state)
{
	struct fixture *f = *state;
	seed(f);
	struct store_change c[3];
	char err[256];
	up(&c[0], "cluster/a", CLUSTER);
	up(&c[1], "cluster/b", CLUSTER);
	rm(&c[2], "cluster/a");
	assert_int_equal(check(f, c, 3, 0, err, sizeof(err)), -1);
	assert_string_equal(err, "cluster/a: named twice in one write");
	up(&c[0], "cluster/a", CLUSTER);
	up(&c[1], "cluster/a", CLUSTER);
	assert_int_equal(check(f, c, 2, 0, err, sizeof(err)), -1);
	assert_string_equal(err, "cluster/a: named twice in one write");
}

static void test_max_resources(void **state)
{
	struct fixture *f = *state;
	seed(f);   /* 4 live */
	struct store_change c[2];
	char err[256];
	up(&c[0], "cluster/n", CLUSTER);
	assert_int_equal(check(f, c, 1, 4, err, sizeof(err)), -1);
	assert_string_equal(err, "the write would hold 5 resources; the limit is 4");
	up(&c[0], "cluster/n", CLUSTER);
	assert_int_equal(check(f, c, 1, 5, err, sizeof(err)), 0);
	up(&c[0], "cluster/n", CLUSTER);
	assert_int_equal(check(f, c, 1, 0, err, sizeof(err)), 0);   /* 0: no limit */
	/* an update or a swap at the limit is fine */
	up(&c[0], "cluster/c", "{\"endpoints\":[]}");
	assert_int_equal(check(f, c, 1, 4, err, sizeof(err)), 0);
	up(&c[0], "cluster/n", CLUSTER);
	rm(&c[1], "secret/s");
	assert_int_equal(check(f, c, 2, 4, err, sizeof(err)), 0);
	/* removing an absent name frees nothing */
	up(&c[0], "cluster/n", CLUSTER);
	rm(&c[1], "secret/absent");
	assert_int_equal(check(f, c, 2, 4, err, sizeof(err)), -1);
	assert_string_equal(err, "the write would hold 5 resources; the limit is 4");
}

static void test_candidate_does_not_write(void **state)
{
	struct fixture *f = *state;
	seed(f);
	struct store_change c[2];
	char err[256];
	up(&c[0], "cluster/n", CLUSTER);
	rm(&c[1], "route/r");
	assert_int_equal(check(f, c, 2, 0, err, sizeof(err)), 0);
	assert_int_equal(store_version(f->s), 1);
	assert_int_equal(store_count(f->s), 4);
	assert_null(store_get(f->s, "cluster/n"));
	assert_non_null(store_get(f->s, "route/r")->body);
}

int main(void)
{
	log_init("test_validate", LOG_LVL_WARN);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_upsert_canonicalizes),
		cmocka_unit_test(test_upsert_keeps_unknown_fields),
		cmocka_unit_test(test_upsert_refuses_with_message),
		cmocka_unit_test_setup_teardown(test_route_before_its_cluster_passes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dangling_reference_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_file_path_conflicts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_remove_referenced_refused_naming_referrer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_remove_referrer_and_referenced_together, setup, teardown),
		cmocka_unit_test_setup_teardown(test_referrer_in_same_write_blocks_later_removal, setup, teardown),
		cmocka_unit_test_setup_teardown(test_name_twice_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_max_resources, setup, teardown),
		cmocka_unit_test_setup_teardown(test_candidate_does_not_write, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
