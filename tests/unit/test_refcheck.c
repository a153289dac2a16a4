/* test_refcheck.c: unit tests of common/refcheck.c against a small
 * hand-written base: every rule and message of refcheck.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "refcheck.h"

/* ---- the base: a fixed table of resources -------------------------------- */

struct fres {
	const char *name;
	const char *refs[RES_MAX_REFS];
	int nrefs;
	const char *path;
	uint32_t referrers;     /* computed by fbase_init */
};

struct fbase {
	struct fres *r;
	size_t n;
	int lookups;            /* calls, to see the base is asked */
};

static struct fres base_table[] = {
	{ "secret/s", { NULL }, 0, NULL, 0 },
	{ "secret/unused", { NULL }, 0, NULL, 0 },
	{ "cluster/a", { NULL }, 0, NULL, 0 },
	{ "cluster/b", { NULL }, 0, NULL, 0 },
	{ "cluster/shared", { NULL }, 0, NULL, 0 },
	{ "listener/l", { "secret/s" }, 1, NULL, 0 },
	{ "listener/m", { NULL }, 0, NULL, 0 },
	{ "route/r", { "listener/l", "cluster/a" }, 2, NULL, 0 },
	{ "route/p", { "listener/m", "cluster/shared" }, 2, NULL, 0 },
	{ "route/q", { "listener/m", "cluster/shared" }, 2, NULL, 0 },
	{ "file/f1", { NULL }, 0, "etc/a.conf", 0 },
	{ "file/f2", { NULL }, 0, "etc/sub/b.conf", 0 },
	{ "file/f3", { NULL }, 0, "top", 0 },
};

static struct fbase fb;

static struct fres *fb_find(const char *name)
{
	for (size_t i = 0; i < fb.n; i++)
		if (strcmp(fb.r[i].name, name) == 0)
			return &fb.r[i];
	return NULL;
}

static bool fb_lookup(void *ctx, const char *name, const char *const **refs, int *nrefs, uint32_t *referrers,
		      const char **file_path)
{
	assert_ptr_equal(ctx, &fb);
	fb.lookups++;
	struct fres *r = fb_find(name);
	if (!r)
		return false;
	if (refs)
		*refs = r->refs;
	if (nrefs)
		*nrefs = r->nrefs;
	if (referrers)
		*referrers = r->referrers;
	if (file_path)
		*file_path = r->path;
	return true;
}

static const char *fb_file_at(void *ctx, const char *path)
{
	(void)ctx;
	for (size_t i = 0; i < fb.n; i++)
		if (fb.r[i].path && strcmp(fb.r[i].path, path) == 0)
			return fb.r[i].name;
	return NULL;
}

static uint32_t fb_files_under(void *ctx, const char *dir)
{
	(void)ctx;
	uint32_t n = 0;
	size_t len = strlen(dir);
	for (size_t i = 0; i < fb.n; i++)
		if (fb.r[i].path && strncmp(fb.r[i].path, dir, len) == 0 && fb.r[i].path[len] == '/')
			n++;
	return n;
}

static const char *fb_referrer_of(void *ctx, const char *name, bool (*skip_fn)(void *, const char *), void *sctx)
{
	(void)ctx;
	for (size_t i = 0; i < fb.n; i++) {
		if (skip_fn(sctx, fb.r[i].name))
			continue;
		for (int k = 0; k < fb.r[i].nrefs; k++)
			if (strcmp(fb.r[i].refs[k], name) == 0)
				return fb.r[i].name;
	}
	return NULL;
}

static struct refcheck_base the_base = {
	&fb, fb_lookup, fb_file_at, fb_files_under, fb_referrer_of,
};

static int setup(void **state)
{
	(void)state;
	fb.r = base_table;
	fb.n = sizeof(base_table) / sizeof(base_table[0]);
	fb.lookups = 0;
	for (size_t i = 0; i < fb.n; i++)
		fb.r[i].referrers = 0;
	for (size_t i = 0; i < fb.n; i++)
		for (int k = 0; k < fb.r[i].nrefs; k++)
			fb_find(fb.r[i].refs[k])->referrers++;
	return 0;
}

/* ---- building writes ------------------------------------------------------------ */

#define MAXCH 8

struct write {
	struct refcheck_change ch[MAXCH];
	struct res_refs refs[MAXCH];
	size_t n;
};

/* An upsert of name referring to the NULL-terminated list of names. */
static void up(struct write *w, const char *name, const char *path, ...)
{
	assert_true(w->n < MAXCH);
	size_t i = w->n++;
	struct res_refs *rr = &w->refs[i];
	rr->n = 0;
	va_list ap;
	va_start(ap, path);
	for (const char *r = va_arg(ap, const char *); r; r = va_arg(ap, const char *)) {
		assert_true(rr->n < RES_MAX_REFS);
		snprintf(rr->name[rr->n++], sizeof(rr->name[0]), "%s", r);
	}
	va_end(ap);
	w->ch[i].name = name;
	w->ch[i].upsert = true;
	w->ch[i].refs = rr;
	w->ch[i].file_path = path;
}

static void rm(struct write *w, const char *name)
{
	assert_true(w->n < MAXCH);
	size_t i = w->n++;
	w->ch[i].name = name;
	w->ch[i].upsert = false;
	w->ch[i].refs = NULL;
	w->ch[i].file_path = NULL;
}

static void expect_ok(const struct write *w)
{
	char err[512] = "";
	if (refcheck_candidate(&the_base, w->ch, w->n, err, sizeof(err)) != 0)
		fail_msg("refused: %s", err);
}

static void expect_err(const struct write *w, const char *msg)
{
	char err[512] = "";
	assert_int_equal(refcheck_candidate(&the_base, w->ch, w->n, err, sizeof(err)), -1);
	assert_string_equal(err, msg);
}

/* ---- tests ------------------------------------------------------------------------ */

static void test_empty_write(void **state)
{
	(void)state;
	struct write w = { .n = 0 };
	expect_ok(&w);
}

static void test_plain_upserts(void **state)
{
	(void)state;
	struct write w = { .n = 0 };
	up(&w, "cluster/new", NULL, NULL);
	up(&w, "route/new", NULL, "listener/l", "cluster/new", NULL);
	up(&w, "route/r", NULL, "listener/m", "cluster/b", NULL);
	expect_ok(&w);
	assert_true(fb.lookups > 0);
}

static void test_named_twice(void **state)
{
	(void)state;
	struct write w = { .n = 0 };
	up(&w, "cluster/a", NULL, NULL);
	up(&w, "cluster/x", NULL, NULL);
	up(&w, "cluster/a", NULL, NULL);
	expect_err(&w, "cluster/a: named twice in one write");
	w.n = 0;
	rm(&w, "cluster/b");
	up(&w, "cluster/b", NULL, NULL);
	expect_err(&w, "cluster/b: named twice in one write");
	w.n = 0;
	rm(&w, "cluster/zz");
	rm(&w, "cluster/zz");
	expect_err(&w, "cluster/zz: named twice in one write");
}

static void test_unknown_reference(void **state)
{
	(void)state;
	struct write w = { .n = 0 };
	up(&w, "route/z", NULL, "listener/l", "cluster/z", NULL);
	expect_err(&w, "route/z: unknown cluster 'z'");
	w.n = 0;
	up(&w, "route/z", NULL, "listener/nol", "cluster/a", NULL);
	expect_err(&w, "route/z: unknown listener 'nol'");
	w.n = 0;
	up(&w, "listener/t", NULL, "secret/nos", NULL);
	expect_err(&w, "listener/t: unknown secret 'nos'");
	/* removed in the same write: gone from the candidate */
	w.n = 0;
	up(&w, "route/z", NULL, "listener/l", "cluster/b", NULL);
	rm(&w, "cluster/b");
	expect_err(&w, "route/z: unknown cluster 'b'");
	/* a resource referring to itself by a name of another type is no help */
	w.n = 0;
	up(&w, "route/a", NULL, "listener/a", "cluster/a", NULL);
	expect_err(&w, "route/a: unknown listener 'a'");
}

static void test_reference_to_later_upsert(void **state)
{
	(void)state;
	/* make before break inside one write: the referrer may come first */
	struct write w = { .n = 0 };
	up(&w, "route/n", NULL, "listener/n", "cluster/n", NULL);
	up(&w, "listener/n", NULL, "secret/n", NULL);
	up(&w, "cluster/n", NULL, NULL);
	up(&w, "secret/n", NULL, NULL);
	expect_ok(&w);
}

static void test_remove_referenced(void **state)
{
	(void)state;
	struct write w = { .n = 0 };
	rm(&w, "cluster/a");
	expect_err(&w, "cannot remove cluster/a: route/r refers to it");
	w.n = 0;
	rm(&w, "secret/s");
	expect_err(&w, "cannot remove secret/s: listener/l refers to it");
	/* the referrer also goes: fine, in either order */
	w.n = 0;
	rm(&w, "cluster/a");
	rm(&w, "route/r");
	expect_ok(&w);
	w.n = 0;
	rm(&w, "route/r");
	rm(&w, "cluster/a");
	expect_ok(&w);
	/* the referrer is rewritten to point elsewhere */
	w.n = 0;
	rm(&w, "cluster/a");
	up(&w, "route/r", NULL, "listener/l", "cluster/b", NULL);
	expect_ok(&w);
	/* the referrer is rewritten but still points at it: its reference is
	 * dangling in the candidate */
	w.n = 0;
	up(&w, "route/r", NULL, "listener/m", "cluster/a", NULL);
	rm(&w, "cluster/a");
	expect_err(&w, "route/r: unknown cluster 'a'");
	/* a new referrer in the write */
	w.n = 0;
	rm(&w, "cluster/b");
	up(&w, "route/new", NULL, "listener/l", "cluster/b", NULL);
	expect_err(&w, "route/new: unknown cluster 'b'");
	/* unreferenced, and absent: both fine */
	w.n = 0;
	rm(&w, "cluster/b");
	rm(&w, "secret/unused");
	rm(&w, "cluster/never-was");
	expect_ok(&w);
}

static void test_remove_with_two_referrers(void **state)
{
	(void)state;
	struct write w = { .n = 0 };
	/* one referrer goes, the other stays: the message names the one left
	 * (referrer_of skips what the write touches) */
	rm(&w, "cluster/shared");
	rm(&w, "route/p");
	expect_err(&w, "cannot remove cluster/shared: route/q refers to it");
	w.n = 0;
	rm(&w, "route/q");
	rm(&w, "cluster/shared");
	expect_err(&w, "cannot remove cluster/shared: route/p refers to it");
	/* one rewritten away, one removed */
	w.n = 0;
	up(&w, "route/p", NULL, "listener/m", "cluster/a", NULL);
	rm(&w, "route/q");
	rm(&w, "cluster/shared");
	expect_ok(&w);
	/* listener/m has the same two referrers */
	w.n = 0;
	rm(&w, "listener/m");
	rm(&w, "route/p");
	rm(&w, "route/q");
	rm(&w, "cluster/shared");
	expect_ok(&w);
}

static void test_remove_without_referrer_of(void **state)
{
	(void)state;
	struct refcheck_base b = the_base;
	b.referrer_of = NULL;
	struct refcheck_change ch = { "cluster/a", false, NULL, NULL };
	char err[512];
	assert_int_equal(refcheck_candidate(&b, &ch, 1, err, sizeof(err)), -1);
	assert_string_equal(err, "cannot remove cluster/a: another resource refers to it");
}

static void test_files_same_path(void **state)
{
	(void)state;
	struct write w = { .n = 0 };
	up(&w, "file/x", "p/one", NULL);
	up(&w, "file/y", "p/one", NULL);
	expect_err(&w, "file/y: path 'p/one' is already the path of file/x");
	/* against the base */
	w.n = 0;
	up(&w, "file/n", "top", NULL);
	expect_err(&w, "file/n: path 'top' is already the path of file/f3");
	w.n = 0;
	up(&w, "file/n", "etc/sub/b.conf", NULL);
	expect_err(&w, "file/n: path 'etc/sub/b.conf' is already the path of file/f2");
	/* a file keeps its own path */
	w.n = 0;
	up(&w, "file/f3", "top", NULL);
	expect_ok(&w);
	/* its old owner moves away or goes in the same write: the path is free */
	w.n = 0;
	up(&w, "file/n", "top", NULL);
	up(&w, "file/f3", "top2", NULL);
	expect_ok(&w);
	w.n = 0;
	rm(&w, "file/f3");
	up(&w, "file/n", "top", NULL);
	expect_ok(&w);
	/* two files swap paths */
	w.n = 0;
	up(&w, "file/f1", "top", NULL);
	up(&w, "file/f3", "etc/a.conf", NULL);
	expect_ok(&w);
	/* a removed file's path cannot be claimed twice all the same */
	w.n = 0;
	rm(&w, "file/f3");
	up(&w, "file/n", "top", NULL);
	up(&w, "file/m", "top", NULL);
	expect_err(&w, "file/m: path 'top' is already the path of file/n");
}

static void test_file_path_is_a_directory(void **state)
{
	(void)state;
	struct write w = { .n = 0 };
	up(&w, "file/n", "etc", NULL);
	expect_err(&w, "file/n: path 'etc' is a directory of other files");
	w.n = 0;
	up(&w, "file/n", "etc/sub", NULL);
	expect_err(&w, "file/n: path 'etc/sub' is a directory of other files");
	/* one of the two files under etc goes: still a directory */
	w.n = 0;
	rm(&w, "file/f1");
	up(&w, "file/n", "etc", NULL);
	expect_err(&w, "file/n: path 'etc' is a directory of other files");
	/* both go (one removed, one moved away): the path is free */
	w.n = 0;
	rm(&w, "file/f1");
	up(&w, "file/f2", "other/b.conf", NULL);
	up(&w, "file/n", "etc", NULL);
	expect_ok(&w);
	/* a directory made in the same write */
	w.n = 0;
	up(&w, "file/x", "d/x", NULL);
	up(&w, "file/y", "d", NULL);
	expect_err(&w, "file/x: path 'd/x' lies under 'd', the path of file/y");
	/* a file moving from under a directory to the directory's own path */
	w.n = 0;
	up(&w, "file/f2", "etc/sub", NULL);
	expect_ok(&w);
}

static void test_file_under_a_file(void **state)
{
	(void)state;
	struct write w = { .n = 0 };
	up(&w, "file/n", "top/x", NULL);
	expect_err(&w, "file/n: path 'top/x' lies under 'top', the path of file/f3");
	w.n = 0;
	up(&w, "file/n", "etc/a.conf/deeper/x", NULL);
	expect_err(&w, "file/n: path 'etc/a.conf/deeper/x' lies under 'etc/a.conf', the path of file/f1");
	/* the file in the way moves: fine */
	w.n = 0;
	up(&w, "file/n", "top/x", NULL);
	up(&w, "file/f3", "elsewhere", NULL);
	expect_ok(&w);
	/* siblings and shared directories are fine */
	w.n = 0;
	up(&w, "file/n", "etc/c.conf", NULL);
	up(&w, "file/m", "etc/sub/d.conf", NULL);
	up(&w, "file/o", "topx", NULL);
	up(&w, "file/p", "to", NULL);
	expect_ok(&w);
}

static void test_non_file_changes_ignore_paths(void **state)
{
	(void)state;
	/* a removal of a file frees nothing more than its path */
	struct write w = { .n = 0 };
	rm(&w, "file/f2");
	up(&w, "file/n", "etc/sub", NULL);
	expect_ok(&w);
	/* upserts without a path take none */
	w.n = 0;
	up(&w, "cluster/top", NULL, NULL);
	expect_ok(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_empty_write, setup),
		cmocka_unit_test_setup(test_plain_upserts, setup),
		cmocka_unit_test_setup(test_named_twice, setup),
		cmocka_unit_test_setup(test_unknown_reference, setup),
		cmocka_unit_test_setup(test_reference_to_later_upsert, setup),
		cmocka_unit_test_setup(test_remove_referenced, setup),
		cmocka_unit_test_setup(test_remove_with_two_referrers, setup),
		cmocka_unit_test_setup(test_remove_without_referrer_of, setup),
		cmocka_unit_test_setup(test_files_same_path, setup),
		cmocka_unit_test_setup(test_file_path_is_a_directory, setup),
		cmocka_unit_test_setup(test_file_under_a_file, setup),
		cmocka_unit_test_setup(test_non_file_changes_ignore_paths, setup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
