/* test_strmap.c: unit tests of common/strmap.c: insert, lookup, growth past
 * many entries, put and delete (probe chains intact), and the FNV-1a hash. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strmap.h"

#define MANY 20000

static void test_empty_map(void **state)
{
	(void)state;
	struct strmap m;
	strmap_init(&m);
	intptr_t v = 99;
	assert_false(strmap_get(&m, "a", &v));
	assert_int_equal(v, 99);
	assert_int_equal(m.len, 0);
	strmap_release(&m);
	assert_null(m.slots);
	assert_int_equal(m.cap, 0);
}

static void test_ref_inserts_zero_and_keeps_value(void **state)
{
	(void)state;
	struct strmap m;
	strmap_init(&m);
	intptr_t *p = strmap_ref(&m, "alpha");
	assert_non_null(p);
	assert_int_equal(*p, 0);
	*p = 7;
	assert_int_equal(m.len, 1);
	/* a second ref finds the same slot: no new entry, value kept */
	intptr_t *q = strmap_ref(&m, "alpha");
	assert_ptr_equal(p, q);
	assert_int_equal(*q, 7);
	assert_int_equal(m.len, 1);
	(*q)--;
	intptr_t v = 0;
	assert_true(strmap_get(&m, "alpha", &v));
	assert_int_equal(v, 6);
	assert_true(strmap_get(&m, "alpha", NULL));
	assert_false(strmap_get(&m, "alph", NULL));
	assert_false(strmap_get(&m, "alphab", NULL));
	assert_false(strmap_get(&m, "", NULL));
	/* the empty string is a key like any other */
	*strmap_ref(&m, "") = -5;
	assert_true(strmap_get(&m, "", &v));
	assert_int_equal(v, -5);
	assert_int_equal(m.len, 2);
	strmap_release(&m);
}

static void test_keys_compared_by_content(void **state)
{
	(void)state;
	struct strmap m;
	strmap_init(&m);
	char k1[] = "route/web", k2[] = "route/web";
	*strmap_ref(&m, k1) = 42;
	intptr_t v = 0;
	assert_true(strmap_get(&m, k2, &v));
	assert_int_equal(v, 42);
	assert_ptr_equal(strmap_ref(&m, k2), strmap_ref(&m, k1));
	assert_int_equal(m.len, 1);
	strmap_release(&m);
}

static void test_growth_past_many_entries(void **state)
{
	(void)state;
	char **keys = malloc(MANY * sizeof(*keys));
	assert_non_null(keys);
	struct strmap m;
	strmap_init(&m);
	for (int i = 0; i < MANY; i++) {
		char tmp[32];
		snprintf(tmp, sizeof(tmp), "cluster/c%d", i);
		keys[i] = strdup(tmp);
		assert_non_null(keys[i]);
		*strmap_ref(&m, keys[i]) = (intptr_t)i * 3 + 1;
		assert_int_equal(m.len, (size_t)i + 1);
		/* power of two, at most three quarters full */
		assert_int_equal(m.cap & (m.cap - 1), 0);
		assert_true(m.len * 4 <= m.cap * 3);
	}
	assert_true(m.cap * 3 >= 4 * MANY);
	for (int i = 0; i < MANY; i++) {
		intptr_t v = -1;
		char probe[32];
		snprintf(probe, sizeof(probe), "cluster/c%d", i);   /* another copy of the key */
		assert_true(strmap_get(&m, probe, &v));
		assert_int_equal(v, (intptr_t)i * 3 + 1);
	}
	assert_false(strmap_get(&m, "cluster/c20000", NULL));
	assert_false(strmap_get(&m, "cluster/c-1", NULL));
	/* every key sits in exactly one slot */
	size_t used = 0;
	for (size_t i = 0; i < m.cap; i++)
		used += m.slots[i].key != NULL;
	assert_int_equal(used, MANY);
	strmap_release(&m);
	for (int i = 0; i < MANY; i++)
		free(keys[i]);
	free(keys);
}

static void test_put_sets_and_replaces_key(void **state)
{
	(void)state;
	struct strmap m;
	strmap_init(&m);
	char k1[] = "file/a", k2[] = "file/a";
	strmap_put(&m, k1, 1);
	assert_int_equal(m.len, 1);
	strmap_put(&m, k2, 2);   /* equal bytes, another pointer */
	assert_int_equal(m.len, 1);
	intptr_t v = 0;
	assert_true(strmap_get(&m, "file/a", &v));
	assert_int_equal(v, 2);
	/* the map now holds the new pointer */
	const char *held = strmap_del(&m, "file/a");
	assert_ptr_equal(held, k2);
	assert_int_equal(m.len, 0);
	assert_false(strmap_get(&m, "file/a", NULL));
	strmap_release(&m);
}

static void test_del_absent(void **state)
{
	(void)state;
	struct strmap m;
	strmap_init(&m);
	assert_null(strmap_del(&m, "x"));   /* never allocated */
	strmap_put(&m, "a", 1);
	assert_null(strmap_del(&m, "b"));
	assert_int_equal(m.len, 1);
	assert_non_null(strmap_del(&m, "a"));
	assert_null(strmap_del(&m, "a"));
	assert_int_equal(m.len, 0);
	strmap_release(&m);
}

/* Keys whose home slot in a 16-slot table is `home`. */
static size_t keys_with_home(size_t home, size_t want, char (*out)[16])
{
	size_t n = 0;
	for (int i = 0; n < want && i < 100000; i++) {
		char k[16];
		snprintf(k, sizeof(k), "k%d", i);
		if ((strmap_hash(k) & 15) == home)
			memcpy(out[n++], k, sizeof(k));
	}
	return n;
}

static void test_del_keeps_wrapped_chains(void **state)
{
	(void)state;
	/* three keys at home 14 and two at home 15 fill 14, 15, 0, 1, 2:
	 * deleting from the front must pull the wrapped ones back */
	char h14[3][16], h15[2][16];
	assert_int_equal(keys_with_home(14, 3, h14), 3);
	assert_int_equal(keys_with_home(15, 2, h15), 2);
	for (int del = 0; del < 5; del++) {
		struct strmap m;
		strmap_init(&m);
		const char *keys[5] = { h14[0], h14[1], h15[0], h14[2], h15[1] };
		for (int i = 0; i < 5; i++)
			strmap_put(&m, keys[i], i + 1);
		assert_int_equal(m.cap, 16);
		assert_ptr_equal(strmap_del(&m, keys[del]), keys[del]);
		assert_int_equal(m.len, 4);
		for (int i = 0; i < 5; i++) {
			intptr_t v = 0;
			bool found = strmap_get(&m, keys[i], &v);
			if (i == del) {
				assert_false(found);
			} else {
				if (!found)
					fail_msg("after deleting %s, %s is lost", keys[del], keys[i]);
				assert_int_equal(v, i + 1);
			}
		}
		strmap_release(&m);
	}
}

static void test_random_ops_match_model(void **state)
{
	(void)state;
	enum { NKEYS = 300, OPS = 20000 };
	static char keys[NKEYS][16];
	intptr_t model[NKEYS];
	bool present[NKEYS];
	for (int i = 0; i < NKEYS; i++) {
		snprintf(keys[i], sizeof(keys[i]), "r%d", i);
		present[i] = false;
		model[i] = 0;
	}
	struct strmap m;
	strmap_init(&m);
	uint32_t seed = 12345;
	size_t live = 0;
	for (int op = 0; op < OPS; op++) {
		seed = seed * 1103515245u + 12345u;
		int k = (int)((seed >> 8) % NKEYS);
		switch ((seed >> 20) % 4) {
		case 0:
		case 1:
			if (!present[k])
				live++;
			present[k] = true;
			model[k] = op;
			strmap_put(&m, keys[k], op);
			break;
		case 2: {
			const char *held = strmap_del(&m, keys[k]);
			if (present[k]) {
				assert_ptr_equal(held, keys[k]);
				live--;
			} else {
				assert_null(held);
			}
			present[k] = false;
			break;
		}
		default: {
			intptr_t *p = strmap_ref(&m, keys[k]);
			if (!present[k]) {
				assert_int_equal(*p, 0);
				live++;
				present[k] = true;
				model[k] = 0;
			}
			assert_int_equal(*p, model[k]);
			break;
		}
		}
		assert_int_equal(m.len, live);
		if (op % 500 == 0 || op == OPS - 1) {
			for (int i = 0; i < NKEYS; i++) {
				intptr_t v = -1;
				bool found = strmap_get(&m, keys[i], &v);
				if (found != present[i])
					fail_msg("op %d: key %s found=%d, want %d", op, keys[i], found, present[i]);
				if (found)
					assert_int_equal(v, model[i]);
			}
		}
	}
	strmap_release(&m);
}

static void test_hash_is_fnv1a(void **state)
{
	(void)state;
	assert_int_equal(strmap_hash(""), 0xcbf29ce484222325ULL);
	assert_int_equal(strmap_hash("a"), 0xaf63dc4c8601ec8cULL);
	assert_int_equal(strmap_hash("foobar"), 0x85944171f73967e8ULL);
	assert_true(strmap_hash("ab") != strmap_hash("ba"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty_map),
		cmocka_unit_test(test_ref_inserts_zero_and_keeps_value),
		cmocka_unit_test(test_keys_compared_by_content),
		cmocka_unit_test(test_growth_past_many_entries),
		cmocka_unit_test(test_put_sets_and_replaces_key),
		cmocka_unit_test(test_del_absent),
		cmocka_unit_test(test_del_keeps_wrapped_chains),
		cmocka_unit_test(test_random_ops_match_model),
		cmocka_unit_test(test_hash_is_fnv1a),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
