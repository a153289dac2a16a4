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
	assert_string_equal(st.via, "r1,r2");
	assert_int_equal(st.key_at, 152);
	/* the same key again, older: 200 unchanged, the mark not lowered */
	c.at = 60;
	assert_int_equal(nodekeys_judge(&st, "n1", &c, NOW, NULL, &changed, err, sizeof(err)), NK_UNCHANGED);
	assert_false(changed);
	assert_int_equal(st.key_at, 152);
	assert_string_equal(st.via, "r1,r2");
	/* a rotation sets where the new key came from ("" direct) */
	struct nodekey_reg d = reg_of(4, 153, 3);
	assert_int_equal(nodekeys_judge(&st, "n1", &d, NOW, NULL, &changed, err, sizeof(err)), NK_ROTATED);
	assert_string_equal(st.via, "");
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
	for (const char *p = st.revoked; *p; p++)
		commas += *p == ',';
	assert_int_equal(commas + 1, NODEKEYS_REVOKED_MAX);
	assert_false(nodekeys_listed(st.revoked, "0000000000000004"));
	assert_true(nodekeys_listed(st.revoked, "0000000000000005"));
	assert_true(nodekeys_listed(st.revoked, "0000000000000014"));
	assert_false(nodekeys_listed(st.revoked, "000000000000001"));
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
	assert_true(nodekeys_listed(s2.revoked, r.kid));
	assert_true(nodekeys_listed(s2.revoked, "0000000000000002"));
	/* from a damaged or hostile record only key ids are taken: no quote,
	 * no other length, no upper case */
	struct nodekey_state s3;
	memset(&s3, 0, sizeof(s3));
	assert_false(nodekeys_take_revoked(&s3, "\"],\"x\":[\",abc,000000000000000A,00000000000000001"));
	assert_string_equal(s3.revoked, "");
	assert_true(nodekeys_take_revoked(&s3, "x\",00000000000000ab"));
	assert_string_equal(s3.revoked, "00000000000000ab");
	/* a key is valid only with its own id */
	char real[KEY_ID_LEN + 1];
	keys_id(r.pk, real);
	assert_true(nodekeys_key_valid(r.key_b64, real));
	assert_false(nodekeys_key_valid(r.key_b64, r.kid));   /* (the tests' made-up id) */
	assert_false(nodekeys_key_valid("bm90IGEga2V5", real));
	assert_true(nodekeys_kid_valid("0123456789abcdef", 16));
	assert_false(nodekeys_kid_valid("0123456789abcdeF", 16));
}

int main(void)
{
	if (sodium_init() < 0)
		return 1;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rules),
		cmocka_unit_test(test_revoked_list),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
