/* test_wraps.c: unit tests of agent/wraps.c: the plane's GET /v1/wraps
 * answer and STATE_DIR/wraps.json parsed and refused, printed back, put,
 * pruned to a state's secrets, saved (0600, atomically) and loaded. */
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

#include "buf.h"
#include "tmpdir.h"
#include "util.h"
#include "wraps.h"

#define KID "0123456789abcdef"
#define KID2 "fedcba9876543210"
#define ID1 "0123456789abcdef0123456789abcdef"
#define ID2 "ffffffffffffffffffffffffffffffff"
/* base64 of 80 bytes */
#define WRAP "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+P0BBQkNERUZHSElKS0xNTk8="
#define WRAP2 "T05NTEtKSUhHRkVEQ0JBQD8+PTw7Ojk4NzY1NDMyMTAvLi0sKyopKCcmJSQjIiEgHx4dHBsaGRgXFhUUExIREA8ODQwLCgkIBwYFBAMCAQA="

static int parse(const char *text, const char *kid, struct wraps *w, char *err)
{
	return wraps_parse(text, strlen(text), kid, w, err, 512);
}

static void test_parse_answer(void **st)
{
	(void)st;
	struct wraps w;
	char err[512];
	wraps_init(&w);
	assert_int_equal(parse("{\"kid\":\"" KID "\",\"wraps\":{\"secret/a\":{\"id\":\"" ID1 "\",\"wrap\":\"" WRAP "\"},"
			       "\"secret/b\":{\"id\":\"" ID2 "\",\"kid\":\"" KID2 "\",\"wrap\":\"" WRAP2 "\"}}}",
			       KID, &w, err), 0);
	assert_int_equal(w.n, 2);
	assert_true(w.dirty);
	const struct wrap_entry *e = wraps_get(&w, "secret/a", ID1);
	assert_non_null(e);
	assert_string_equal(e->id, ID1);
	assert_string_equal(e->kid, KID);
	assert_string_equal(e->wrap, WRAP);
	e = wraps_get(&w, "secret/b", ID2);
	assert_non_null(e);
	assert_string_equal(e->kid, KID2);   /* an entry's own kid wins */
	assert_null(wraps_get(&w, "secret/c", ID1));
	assert_null(wraps_get(&w, "secret/a", ID2));   /* another envelope of a */
	/* printed back: sorted, the entry's own kid only where it differs */
	struct buf b = BUF_INIT;
	wraps_text(&w, KID, &b);
	assert_string_equal(b.data, "{\"kid\":\"" KID "\",\"wraps\":{\"secret/a\":{\"id\":\"" ID1 "\",\"wrap\":\"" WRAP
				    "\"},\"secret/b\":{\"id\":\"" ID2 "\",\"kid\":\"" KID2 "\",\"wrap\":\"" WRAP2 "\"}}}\n");
	buf_release(&b);
	wraps_release(&w);
}

static void test_parse_refusals(void **st)
{
	(void)st;
	static const struct {
		const char *text, *kid, *want;
	} cases[] = {
		{ "[", NULL, "not JSON" },
		{ "{\"wraps\":{}}", NULL, "kid: missing" },
		{ "{\"kid\":\"ABCDEF0123456789\",\"wraps\":{}}", NULL, "kid: missing, or not a key id" },
		{ "{\"kid\":\"" KID "\",\"wraps\":{}}", KID2, "not the key asked for" },
		{ "{\"kid\":\"" KID "\"}", NULL, "wraps: missing" },
		{ "{\"kid\":\"" KID "\",\"wraps\":{\"cluster/a\":{\"id\":\"" ID1 "\",\"wrap\":\"" WRAP "\"}}}", NULL,
		  "not a secret's name" },
		{ "{\"kid\":\"" KID "\",\"wraps\":{\"secret/../x\":{\"id\":\"" ID1 "\",\"wrap\":\"" WRAP "\"}}}", NULL,
		  "not a secret's name" },
		{ "{\"kid\":\"" KID "\",\"wraps\":{\"secret/a\":{\"id\":\"0123\",\"wrap\":\"" WRAP "\"}}}", NULL,
		  "wraps.secret/a.id" },
		{ "{\"kid\":\"" KID "\",\"wraps\":{\"secret/a\":{\"id\":\"" ID1 "\",\"wrap\":\"AAAA\"}}}", NULL,
		  "wraps.secret/a.wrap" },
		{ "{\"kid\":\"" KID "\",\"wraps\":{\"secret/a\":{\"id\":\"" ID1 "\",\"wrap\":\"" WRAP "\",\"kid\":7}}}", NULL,
		  "wraps.secret/a.kid" },
		{ "{\"kid\":\"" KID "\",\"wraps\":{\"secret/a\":{\"id\":\"" ID1 "\",\"wrap\":\"" WRAP "\",\"x\":1}}}", NULL,
		  "unknown field 'x'" },
		{ "{\"kid\":\"" KID "\",\"wraps\":{\"secret/a\":\"" WRAP "\"}}", NULL, "wraps.secret/a.id" },
		{ "{\"kid\":\"" KID "\",\"wraps\":{\"secret/a\":[]}}", NULL, "wraps.secret/a: 1 to 4 entries" },
		{ "{\"kid\":\"" KID "\",\"wraps\":{\"secret/a\":[{\"id\":\"" ID1 "\",\"wrap\":\"" WRAP "\"},"
		  "{\"id\":\"" ID2 "\",\"wrap\":\"AAAA\"}]}}", NULL, "wraps.secret/a.wrap" },
		{ "{\"kid\":\"" KID "\",\"wraps\":{\"secret/a\":[1]}}", NULL, "wraps.secret/a.id" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct wraps w;
		char err[512] = "";
		wraps_init(&w);
		wraps_put(&w, "secret/keep", ID1, KID, WRAP);
		if (parse(cases[i].text, cases[i].kid, &w, err) != -1 || !strstr(err, cases[i].want))
			fail_msg("case %zu: got '%s', want '%s'", i, err, cases[i].want);
		/* a refusal adds nothing */
		assert_int_equal(w.n, 1);
		wraps_release(&w);
	}
}

static bool even(void *ctx, const struct wrap_entry *e)
{
	(void)ctx;
	return atoi(e->name + strlen("secret/s")) % 2 == 0;
}

static void test_put_prune(void **st)
{
	(void)st;
	struct wraps w;
	wraps_init(&w);
	char name[32];
	for (int i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "secret/s%d", i);
		wraps_put(&w, name, ID1, KID, WRAP);
	}
	assert_int_equal(w.n, 100);
	w.dirty = false;
	wraps_put(&w, "secret/s7", ID1, KID, WRAP);   /* the same: no change */
	assert_false(w.dirty);
	/* another envelope of s7: beside the first, not instead of it */
	wraps_put(&w, "secret/s7", ID2, KID, WRAP2);
	assert_true(w.dirty);
	assert_int_equal(w.n, 101);
	assert_string_equal(wraps_get(&w, "secret/s7", ID2)->wrap, WRAP2);
	assert_string_equal(wraps_get(&w, "secret/s7", ID1)->wrap, WRAP);
	/* the same envelope for another key: replaced */
	wraps_put(&w, "secret/s7", ID2, KID2, WRAP);
	assert_int_equal(w.n, 101);
	assert_string_equal(wraps_get(&w, "secret/s7", ID2)->kid, KID2);
	w.dirty = false;
	wraps_del(&w, "secret/s7", ID2);
	wraps_del(&w, "secret/s7", ID2);
	wraps_del(&w, "secret/none", ID1);
	assert_true(w.dirty);
	assert_null(wraps_get(&w, "secret/s7", ID2));
	assert_non_null(wraps_get(&w, "secret/s7", ID1));
	assert_int_equal(w.n, 100);
	wraps_del(&w, "secret/s7", ID1);
	assert_int_equal(w.n, 99);
	wraps_put(&w, "secret/s7", ID2, KID, WRAP2);
	/* pruned to the even ones (a state's secrets) */
	wraps_prune(&w, even, NULL);
	assert_int_equal(w.n, 50);
	for (int i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "secret/s%d", i);
		assert_true((wraps_get(&w, name, i == 7 ? ID2 : ID1) != NULL) == (i % 2 == 0));
	}
	wraps_release(&w);
}

static void test_save_load(void **st)
{
	(void)st;
	char dir[64];
	char err[1024];
	assert_int_equal(test_tmpdir_make(dir, sizeof(dir), "wraps"), 0);
	struct wraps w, back;
	wraps_init(&w);
	wraps_init(&back);
	/* none yet: nothing, no error */
	assert_int_equal(wraps_load(dir, &back, err, sizeof(err)), 0);
	assert_int_equal(back.n, 0);
	wraps_put(&w, "secret/a", ID1, KID, WRAP);
	wraps_put(&w, "secret/old", ID2, KID2, WRAP2);
	assert_int_equal(wraps_save(dir, &w, KID, err, sizeof(err)), 0);
	assert_false(w.dirty);
	char path[128];
	snprintf(path, sizeof(path), "%s/wraps.json", dir);
	struct stat s;
	assert_int_equal(stat(path, &s), 0);
	assert_int_equal(s.st_mode & 0777, 0600);
	snprintf(path, sizeof(path), "%s/wraps.json.tmp", dir);
	assert_int_not_equal(access(path, F_OK), 0);   /* no temp file left */
	assert_int_equal(wraps_load(dir, &back, err, sizeof(err)), 0);
	assert_int_equal(back.n, 2);
	assert_false(back.dirty);
	assert_string_equal(wraps_get(&back, "secret/old", ID2)->kid, KID2);
	assert_string_equal(wraps_get(&back, "secret/a", ID1)->wrap, WRAP);
	wraps_release(&back);
	/* a damaged file: an error naming it, nothing loaded */
	snprintf(path, sizeof(path), "%s/wraps.json", dir);
	assert_int_equal(write_file_replace(path, "{\"kid\":", 7, 0600, false), 0);
	wraps_init(&back);
	assert_int_equal(wraps_load(dir, &back, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "wraps.json"));
	assert_int_equal(back.n, 0);
	wraps_release(&back);
	wraps_release(&w);
	test_tmpdir_remove(dir);
}

/* A secret with the committed envelope's wrap and a candidate's: both in
 * wraps.json (an array), both back, and one entry again once pruned. */
static bool only_id1(void *ctx, const struct wrap_entry *e)
{
	(void)ctx;
	return strcmp(e->id, ID1) == 0;
}

static void test_two_envelopes(void **st)
{
	(void)st;
	char dir[64];
	char err[1024];
	assert_int_equal(test_tmpdir_make(dir, sizeof(dir), "wraps2"), 0);
	struct wraps w, back;
	wraps_init(&w);
	wraps_init(&back);
	wraps_put(&w, "secret/a", ID1, KID2, WRAP);
	wraps_put(&w, "secret/a", ID2, KID, WRAP2);
	wraps_put(&w, "secret/b", ID1, KID, WRAP);
	struct buf b = BUF_INIT;
	wraps_text(&w, KID, &b);
	assert_string_equal(b.data, "{\"kid\":\"" KID "\",\"wraps\":{\"secret/a\":[{\"id\":\"" ID1 "\",\"kid\":\"" KID2
				    "\",\"wrap\":\"" WRAP "\"},{\"id\":\"" ID2 "\",\"wrap\":\"" WRAP2 "\"}],"
				    "\"secret/b\":{\"id\":\"" ID1 "\",\"wrap\":\"" WRAP "\"}}}\n");
	buf_release(&b);
	assert_int_equal(wraps_save(dir, &w, KID, err, sizeof(err)), 0);
	assert_int_equal(wraps_load(dir, &back, err, sizeof(err)), 0);
	assert_int_equal(back.n, 3);
	assert_string_equal(wraps_get(&back, "secret/a", ID1)->kid, KID2);
	assert_string_equal(wraps_get(&back, "secret/a", ID2)->wrap, WRAP2);
	wraps_prune(&back, only_id1, NULL);
	assert_int_equal(back.n, 2);
	assert_null(wraps_get(&back, "secret/a", ID2));
	wraps_release(&back);
	wraps_release(&w);
	test_tmpdir_remove(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_answer),
		cmocka_unit_test(test_parse_refusals),
		cmocka_unit_test(test_put_prune),
		cmocka_unit_test(test_save_load),
		cmocka_unit_test(test_two_envelopes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
