/* test_tree.c: unit tests of ctl/tree.c: file names to resource names and
 * back, and reading a tree: canonical bodies, skipped files, and each
 * refusal naming its file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tmpdir.h"
#include "tree.h"
#include "xmalloc.h"

static char dir[256];

static int setup(void **state)
{
	(void)state;
	return test_tmpdir_make(dir, sizeof(dir), "tree");
}

static int teardown(void **state)
{
	(void)state;
	test_tmpdir_remove(dir);
	return 0;
}

static void put_file(const char *rel, const char *text)
{
	char *path = xasprintf("%s/%s", dir, rel);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	free(path);
}

static void make_dir(const char *rel)
{
	char *path = xasprintf("%s/%s", dir, rel);
	assert_int_equal(mkdir(path, 0755), 0);
	free(path);
}

static void test_name_of(void **state)
{
	(void)state;
	char name[256], err[512];
	assert_int_equal(tree_name_of("cluster", "web.json", name, sizeof(name), err, sizeof(err)), 1);
	assert_string_equal(name, "cluster/web");
	/* a name may start with a dot */
	assert_int_equal(tree_name_of("file", ".motd.json", name, sizeof(name), err, sizeof(err)), 1);
	assert_string_equal(name, "file/.motd");
	assert_int_equal(tree_name_of("route", "a_b-1.2.json", name, sizeof(name), err, sizeof(err)), 1);
	assert_string_equal(name, "route/a_b-1.2");
	/* not .json: skipped, with a warning unless hidden */
	assert_int_equal(tree_name_of("cluster", "README", name, sizeof(name), err, sizeof(err)), 0);
	assert_non_null(strstr(err, "not a .json file"));
	assert_int_equal(tree_name_of("cluster", ".web.json.swp", name, sizeof(name), err, sizeof(err)), 0);
	assert_string_equal(err, "");
	assert_int_equal(tree_name_of("cluster", ".json", name, sizeof(name), err, sizeof(err)), 0);
	/* .json files with names no resource has */
	assert_int_equal(tree_name_of("cluster", "a b.json", name, sizeof(name), err, sizeof(err)), -1);
	assert_int_equal(tree_name_of("cluster", "..json", name, sizeof(name), err, sizeof(err)), -1);
	assert_int_equal(tree_name_of("cluster", "...json", name, sizeof(name), err, sizeof(err)), -1);
	char longname[300];
	memset(longname, 'a', 201);
	strcpy(longname + 201, ".json");
	assert_int_equal(tree_name_of("cluster", longname, name, sizeof(name), err, sizeof(err)), -1);
}

static void test_path_of(void **state)
{
	(void)state;
	char *p = tree_path_of("/srv/desired/", "cluster/web");
	assert_string_equal(p, "/srv/desired/cluster/web.json");
	free(p);
	p = tree_path_of("d", "file/.motd");
	assert_string_equal(p, "d/file/.motd.json");
	free(p);
	assert_null(tree_path_of("d", "cluster/.."));
	assert_null(tree_path_of("d", "nope/web"));
	assert_null(tree_path_of("d", "cluster/a/b"));
}

static void test_read(void **state)
{
	(void)state;
	make_dir("cluster");
	make_dir("route");
	make_dir(".git");
	put_file(".git/config", "x");
	put_file("README", "hello");
	put_file("cluster/web.json", "{ \"lb\": \"random\",\n \"endpoints\": [] }\n");
	put_file("cluster/api.json", "{\"endpoints\":[{\"port\":1,\"address\":\"a\"}]}");
	put_file("cluster/.web.json.swp", "junk");
	put_file("cluster/notes.txt", "junk");
	put_file("route/r.json", "{}");
	struct tree t;
	char err[1024];
	assert_int_equal(tree_read(dir, &t, err, sizeof(err)), 0);
	assert_int_equal(t.n, 3);
	assert_string_equal(t.e[0].name, "cluster/api");
	assert_string_equal(t.e[0].body, "{\"endpoints\":[{\"address\":\"a\",\"port\":1}]}");
	assert_string_equal(t.e[1].name, "cluster/web");
	assert_string_equal(t.e[1].body, "{\"endpoints\":[],\"lb\":\"random\"}");
	assert_string_equal(t.e[2].name, "route/r");
	char *want = xasprintf("%s/route/r.json", dir);
	assert_string_equal(t.e[2].path, want);
	free(want);
	assert_non_null(tree_find(&t, "cluster/web"));
	assert_null(tree_find(&t, "cluster/nope"));
	tree_release(&t);
}

/* reads dir, expecting a refusal whose message holds want */
static void refused(const char *want)
{
	struct tree t;
	char err[1024] = "";
	assert_int_equal(tree_read(dir, &t, err, sizeof(err)), -1);
	if (!strstr(err, want))
		fail_msg("'%s' does not say '%s'", err, want);
	tree_release(&t);
}

static void test_refusals(void **state)
{
	(void)state;
	make_dir("cluster");
	put_file("cluster/bad.json", "{\"a\":");
	refused("cluster/bad.json'");
	put_file("cluster/bad.json", "{\"a\":1,\"a\":2}");
	refused("cluster/bad.json'");
	put_file("cluster/bad.json", "\"text\"");
	refused("cluster/bad.json': cluster/bad must be a JSON object");
	char *p = xasprintf("%s/cluster/bad.json", dir);
	unlink(p);
	free(p);

	make_dir("cluster/sub.json");
	refused("cluster/sub.json': not a regular file");
	p = xasprintf("%s/cluster/sub.json", dir);
	rmdir(p);
	free(p);

	/* a symlink inside is followed, one out of the directory refused */
	put_file("cluster/real.json", "{}");
	p = xasprintf("%s/cluster/alias.json", dir);
	assert_int_equal(symlink("real.json", p), 0);
	struct tree t;
	char err[1024];
	assert_int_equal(tree_read(dir, &t, err, sizeof(err)), 0);
	assert_int_equal(t.n, 2);
	tree_release(&t);
	unlink(p);
	assert_int_equal(symlink("/etc/hostname", p), 0);
	refused("cluster/alias.json': a symlink that points out of the directory");
	unlink(p);
	free(p);

	make_dir("clusters");
	refused("clusters': not a resource type");
	p = xasprintf("%s/clusters", dir);
	rmdir(p);
	free(p);

	struct tree t2;
	assert_int_equal(tree_read("/nonexistent/tree", &t2, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "cannot open '/nonexistent/tree'"));
	tree_release(&t2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_name_of),
		cmocka_unit_test(test_path_of),
		cmocka_unit_test_setup_teardown(test_read, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
