/* test_nodekeys.c: unit tests of a node key registration's rules 2 to 5
 * (plane/core/nodekeys.c): trust on first use, the same key again, a
 * rotation only when the stored key endorsed it and it is newer, a revoked
 * key never back, and the revoked list (at most 16, the oldest dropped;
 * a replica's revocations taken). Registrations are built here already
 * "parsed" (rule 1, nodekey_reg_parse, is common/nodekey.c's). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "core/nodekeys.h"

#define NOW 1000   /* the plane's clock in these tests */

/* A registration of key number k (its bytes all k) at time at; prev: the
 * key number that endorsed it (0: none). */
static struct nodekey_reg reg_of(unsigned char k, int64_t at, unsigned char prev)
{
	struct nodekey_reg r;
	memset(&r, 0, sizeof(r));
	snprintf(r.node, sizeof(r.node), "n1");
	memset(r.pk, k, sizeof(r.pk));
	sodium_bin2base64(r.key_b64, sizeof(r.key_b64), r.pk, sizeof(r.pk), sodium_base64_VARIANT_ORIGINAL);
	snprintf(r.kid, sizeof(r.kid), "%016x", (unsigned)k);
	r.at = at;
	if (prev) {
		r.has_prev = true;
		memset(r.prev, prev, sizeof(r.prev));
		snprintf(r.prev_kid, sizeof(r.prev_kid), "%016x", (unsigned)prev);
	}
	return r;
}

static void test_rules(void **state)
{
	(void)state;
	struct nodekey_state st;
	memset(&st, 0, sizeof(st));
	char err[400];
	bool changed;
	/* 3: first use */
	struct nodekey_reg a = reg_of(1, 100, 0);
	assert_int_equal(nodekeys_judge(&st, "n1", &a, NOW, NULL, &changed, err, sizeof(err)), NK_REGISTERED);
	assert_true(changed);
	assert_string_equal(st.kid, a.kid);
	assert_string_equal(nodekeys_status(NK_REGISTERED), "registered");
	assert_int_equal(nodekeys_http(NK_REGISTERED), 200);
	/* 4: the same key: a newer time moves key_at only, an older nothing */
	a.at = 150;
	assert_int_equal(nodekeys_judge(&st, "n1", &a, NOW, NULL, &changed, err, sizeof(err)), NK_UNCHANGED);
	assert_true(changed);
	assert_int_equal(st.key_at, 150);
	a.at = 120;
	assert_int_equal(nodekeys_judge(&st, "n1", &a, NOW, NULL, &changed, err, sizeof(err)), NK_UNCHANGED);
	assert_false(changed);
	assert_int_equal(st.key_at, 150);
	/* 5: another key without endorsement, endorsed by another, or not newer: 409 */
	struct nodekey_reg b = reg_of(2, 200, 0);
	assert_int_equal(nodekeys_judge(&st, "n1", &b, NOW, NULL, &changed, err, sizeof(err)), NK_CONFLICT);
	assert_false(changed);
	assert_int_equal(nodekeys_http(NK_CONFLICT), 409);
	char want[400];
	snprintf(want, sizeof(want), "node n1 already has key %s; a new key must be endorsed by it (tetherd "
		 "--rotate-key does), or an admin revokes it first: tetherctl secrets revoke n1", a.kid);
	assert_string_equal(err, want);
	b = reg_of(2, 200, 3);
	assert_int_equal(nodekeys_judge(&st, "n1", &b, NOW, NULL, &changed, err, sizeof(err)), NK_CONFLICT);
	b = reg_of(2, 150, 1);
	assert_int_equal(nodekeys_judge(&st, "n1", &b, NOW, NULL, &changed, err, sizeof(err)), NK_STALE);
	assert_int_equal(nodekeys_http(NK_STALE), 409);
	assert_non_null(strstr(err, "at: 150 is not after the newest registration taken for this node (150)"));
	assert_string_equal(st.kid, a.kid);
	/* 5: endorsed by the stored key and newer: rotated */
	b = reg_of(2, 151, 1);
	assert_int_equal(nodekeys_judge(&st, "n1", &b, NOW, NULL, &changed, err, sizeof(err)), NK_ROTATED);
	assert_true(changed);
	assert_string_equal(st.kid, b.kid);
	assert_string_equal(st.key, b.key_b64);
	/* the old key again: refused (its endorsement is not the stored key's) */
	a.at = 500;
	assert_int_equal(nodekeys_judge(&st, "n1", &a, NOW, NULL, &changed, err, sizeof(err)), NK_CONFLICT);
	/* revoke, then: 2 the revoked key is refused even as a first use */
	assert_true(nodekeys_revoke(&st));
	assert_false(nodekeys_revoke(&st));
	assert_string_equal(st.key, "");
	b.at = 900;
	assert_int_equal(nodekeys_judge(&st, "n1", &b, NOW, NULL, &changed, err, sizeof(err)), NK_REVOKED);
	assert_int_equal(nodekeys_http(NK_REVOKED), 403);
	snprintf(want, sizeof(want), "node n1: key %s was revoked; make a new one: tetherd --rotate-key", b.kid);
	assert_string_equal(err, want);
	/* the mark (the rotation's 151: the refused 500 and 900 moved
	 * nothing) stays across the revoke: a first
	 * use after it needs a newer at; a rotated-out key's old
	 * registration (a's, at 150) is never taken again */
	assert_int_equal(st.key_at, 151);
	a.at = 150;
	assert_int_equal(nodekeys_judge(&st, "n1", &a, NOW, NULL, &changed, err, sizeof(err)), NK_STALE);
	assert_false(changed);
	struct nodekey_reg c = reg_of(3, 151, 0);
	assert_int_equal(nodekeys_judge(&st, "n1", &c, NOW, NULL, &changed, err, sizeof(err)), NK_STALE);
	assert_string_equal(st.key, "");
	/* a new key, newer: first use again, and where it came from */
	c.at = 152;
	assert_int_equal(nodekeys_judge(&st, "n1", &c, NOW, "r1,r2", &changed, err, sizeof(err)), NK_REGISTERED);
	assert_string_equal(nodekeys_via(&st), "r1,r2");
	assert_int_equal(st.key_at, 152);
	/* the same key again, older: 200 unchanged, the mark not lowered */
	c.at = 60;
	assert_int_equal(nodekeys_judge(&st, "n1", &c, NOW, NULL, &changed, err, sizeof(err)), NK_UNCHANGED);
	assert_false(changed);
	assert_int_equal(st.key_at, 152);
	assert_string_equal(nodekeys_via(&st), "r1,r2");
	/* a rotation sets where the new key came from ("" direct) */
	struct nodekey_reg d = reg_of(4, 153, 3);
	assert_int_equal(nodekeys_judge(&st, "n1", &d, NOW, NULL, &changed, err, sizeof(err)), NK_ROTATED);
	assert_string_equal(nodekeys_via(&st), "");
	/* at more than 600 s ahead of the plane's clock: 400, nothing moves */
	struct nodekey_reg e = reg_of(5, NOW + NODEKEYS_SKEW_MAX + 1, 4);
	assert_int_equal(nodekeys_judge(&st, "n1", &e, NOW, NULL, &changed, err, sizeof(err)), NK_FUTURE);
	assert_int_equal(nodekeys_http(NK_FUTURE), 400);
	assert_string_equal(err, "node n1: key registration: at: more than 600 s ahead of the plane's clock: check "
			    "the node's clock");
	assert_false(changed);
	assert_string_equal(st.kid, d.kid);
	e.at = NOW + NODEKEYS_SKEW_MAX;   /* the bound itself is taken */
	assert_int_equal(nodekeys_judge(&st, "n1", &e, NOW, NULL, &changed, err, sizeof(err)), NK_ROTATED);
	nodekeys_state_release(&st);
}

static void test_revoked_list(void **state)
{
	(void)state;
	struct nodekey_state st;
	memset(&st, 0, sizeof(st));
	char err[400];
	bool changed;
	/* 20 keys revoked one after the other: the 16 newest are kept */
	for (unsigned char k = 1; k <= 20; k++) {
		struct nodekey_reg r = reg_of(k, k, 0);
		assert_int_equal(nodekeys_judge(&st, "n1", &r, NOW, NULL, &changed, err, sizeof(err)), NK_REGISTERED);
		assert_true(nodekeys_revoke(&st));
	}
	size_t commas = 0;
	for (const char *p = nodekeys_revoked(&st); *p; p++)
		commas += *p == ',';
	assert_int_equal(commas + 1, NODEKEYS_REVOKED_MAX);
	assert_false(nodekeys_listed(nodekeys_revoked(&st), "0000000000000004"));
	assert_true(nodekeys_listed(nodekeys_revoked(&st), "0000000000000005"));
	assert_true(nodekeys_listed(nodekeys_revoked(&st), "0000000000000014"));
	assert_false(nodekeys_listed(nodekeys_revoked(&st), "000000000000001"));
	/* a replica's revocation of the live key clears it here */
	struct nodekey_state s2;
	memset(&s2, 0, sizeof(s2));
	struct nodekey_reg r = reg_of(30, 1, 0);
	assert_int_equal(nodekeys_judge(&s2, "n1", &r, NOW, NULL, &changed, err, sizeof(err)), NK_REGISTERED);
	assert_true(nodekeys_take_revoked(&s2, "0000000000000001"));   /* the list grew; the key stays */
	assert_false(nodekeys_take_revoked(&s2, "0000000000000001"));
	assert_string_equal(s2.kid, r.kid);
	assert_false(nodekeys_take_revoked(&s2, ""));
	char list[64];
	snprintf(list, sizeof(list), "0000000000000002,%s", r.kid);
	assert_true(nodekeys_listed(list, r.kid));
	assert_true(nodekeys_take_revoked(&s2, list));
	assert_string_equal(s2.key, "");
	assert_true(nodekeys_listed(nodekeys_revoked(&s2), r.kid));
	assert_true(nodekeys_listed(nodekeys_revoked(&s2), "0000000000000002"));
	/* from a damaged or hostile record only key ids are taken: no quote,
	 * no other length, no upper case */
	struct nodekey_state s3;
	memset(&s3, 0, sizeof(s3));
	assert_false(nodekeys_take_revoked(&s3, "\"],\"x\":[\",abc,000000000000000A,00000000000000001"));
	assert_string_equal(nodekeys_revoked(&s3), "");
	assert_true(nodekeys_take_revoked(&s3, "x\",00000000000000ab"));
	assert_string_equal(nodekeys_revoked(&s3), "00000000000000ab");
	/* a key is valid only with its own id */
	char real[KEY_ID_LEN + 1];
	keys_id(r.pk, real);
	assert_true(nodekeys_key_valid(r.key_b64, real));
	assert_false(nodekeys_key_valid(r.key_b64, r.kid));   /* (the tests' made-up id) */
	assert_false(nodekeys_key_valid("bm90IGEga2V5", real));
	assert_true(nodekeys_kid_valid("0123456789abcdef", 16));
	assert_false(nodekeys_kid_valid("0123456789abcdeF", 16));
	nodekeys_state_release(&st);
	nodekeys_state_release(&s2);
	nodekeys_state_release(&s3);
}

/* via and revoked are NULL while empty, heap strings while not: a key
 * revoked 17 times (the list full, the oldest dropped, one string of the
 * same bytes a fixed buffer held), via set and cleared, a deep copy, and
 * a release (valgrind sees every string freed once). */
static void test_strings(void **state)
{
	(void)state;
	struct nodekey_state st;
	memset(&st, 0, sizeof(st));
	char err[400], want[NODEKEYS_REVOKED_LEN] = "";
	bool changed;
	assert_null(st.revoked);
	assert_string_equal(nodekeys_revoked(&st), "");
	assert_false(nodekeys_revoke(&st));   /* no live key: nothing listed */
	assert_null(st.revoked);
	for (unsigned char k = 1; k <= 17; k++) {
		struct nodekey_reg r = reg_of(k, k, 0);
		assert_int_equal(nodekeys_judge(&st, "n1", &r, NOW, k % 2 ? "r1" : NULL, &changed, err, sizeof(err)),
				 NK_REGISTERED);
		if (k % 2)
			assert_string_equal(st.via, "r1");
		else
			assert_null(st.via);   /* direct: no string */
		assert_true(nodekeys_revoke(&st));
		assert_null(st.via);   /* the via goes with the key */
		assert_non_null(st.revoked);
	}
	for (unsigned k = 2; k <= 17; k++)
		snprintf(want + strlen(want), sizeof(want) - strlen(want), "%s%016x", k > 2 ? "," : "", k);
	assert_string_equal(st.revoked, want);   /* 1 dropped, 2..17 kept, oldest first */
	assert_int_equal(strlen(st.revoked), NODEKEYS_REVOKED_LEN - 1);
	/* an 18th from a replica's list: 2 goes, one already listed adds nothing */
	assert_true(nodekeys_take_revoked(&st, "0000000000000011,00000000000000ff"));
	assert_false(nodekeys_listed(st.revoked, "0000000000000002"));
	assert_true(nodekeys_listed(st.revoked, "00000000000000ff"));
	assert_int_equal(strlen(st.revoked), NODEKEYS_REVOKED_LEN - 1);

	/* via: set, "" and NULL clear it, a long one is cut as a 256-byte
	 * buffer cut it, and st's own via may be set again */
	nodekeys_set_via(&st, "r1,r2");
	assert_string_equal(nodekeys_via(&st), "r1,r2");
	nodekeys_set_via(&st, nodekeys_via(&st));
	assert_string_equal(st.via, "r1,r2");
	nodekeys_set_via(&st, "");
	assert_null(st.via);
	assert_string_equal(nodekeys_via(&st), "");
	char longer[400];
	memset(longer, 'a', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	nodekeys_set_via(&st, longer);
	assert_int_equal(strlen(st.via), NODEKEYS_VIA_LEN - 1);
	nodekeys_set_via(&st, NULL);
	assert_null(st.via);

	/* a copy owns its strings: the original moving leaves it as it was */
	struct nodekey_reg r = reg_of(40, 40, 0);
	assert_int_equal(nodekeys_judge(&st, "n1", &r, NOW, "r9", &changed, err, sizeof(err)), NK_REGISTERED);
	struct nodekey_state copy;
	nodekeys_state_copy(&copy, &st);
	assert_ptr_not_equal(copy.via, st.via);
	assert_ptr_not_equal(copy.revoked, st.revoked);
	assert_true(nodekeys_revoke(&st));
	assert_string_equal(copy.via, "r9");
	assert_string_equal(copy.kid, r.kid);
	assert_false(nodekeys_listed(copy.revoked, r.kid));
	assert_true(nodekeys_listed(st.revoked, r.kid));
	nodekeys_state_release(&copy);
	assert_null(copy.via);
	assert_null(copy.revoked);
	/* an empty state copies as empty: no strings made */
	struct nodekey_state empty, e2;
	memset(&empty, 0, sizeof(empty));
	nodekeys_state_copy(&e2, &empty);
	assert_null(e2.via);
	assert_null(e2.revoked);
	nodekeys_state_release(&e2);
	nodekeys_state_release(&st);
	nodekeys_state_release(&st);   /* twice is harmless: NULLs */
}

int main(void)
{
	if (sodium_init() < 0)
		return 1;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rules),
		cmocka_unit_test(test_revoked_list),
		cmocka_unit_test(test_strings),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
