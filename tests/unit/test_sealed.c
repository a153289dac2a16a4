/* test_sealed.c: unit tests of sealed secrets on the plane
 * (plane/core/sealed.c, and the node keys of plane/core/nodes.c): which
 * nodes lack a wrap (their subscriptions, one lookup each), the error
 * naming at most 20, and a write's checks against a real store and node
 * registry: plaintext refused with --sealed-secrets and taken without,
 * a malformed envelope, another recovery key, a missing wrap, the
 * plane's own "superseded" list and a replayed envelope refused, a
 * revoked key's wrap dropped; a guard's max_bytes judges the push body.
 * Keys and envelopes are real
 * (common/nodekey.c, common/envelope.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <sodium.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "buf.h"
#include "core/guardcheck.h"
#include "core/nodes.h"
#include "core/sealed.h"
#include "core/store.h"
#include "envelope.h"
#include "json.h"
#include "nodekey.h"
#include "persist/node_changes.h"
#include "persist/persist.h"
#include "tmpdir.h"
#include "util.h"

static struct nodes_key key_of(const char *node, const char *kid, const char *sub)
{
	struct nodes_key k = { .node = strdup(node), .key = strdup("k"), .sub = sub ? strdup(sub) : NULL };
	snprintf(k.kid, sizeof(k.kid), "%s", kid);
	return k;
}

static void test_missing(void **state)
{
	(void)state;
	struct nodes_keys keys = { 0 };
	keys.live = calloc(25, sizeof(*keys.live));
	keys.live[0] = key_of("web1", "0000000000000001", "secret/");
	keys.live[1] = key_of("db1", "0000000000000002", "cluster/,secret/db");
	keys.live[2] = key_of("any", "0000000000000003", NULL);   /* unknown yet: no name reaches it */
	keys.live[3] = key_of("all", "0000000000000004", "");
	keys.live[4] = key_of("bad", "0000000000000005", "secret/a b");   /* unreadable: none either */
	keys.nlive = 5;
	struct sealed_fleet f;
	sealed_fleet_of(&keys, &f);
	assert_int_equal(f.k->nlive, 3);   /* no sealing target while its sub is unknown */
	assert_string_equal(f.k->live[2].node, "all");
	cJSON *wraps = cJSON_Parse("{\"0000000000000001\":\"w\",\"00000000000000ff\":\"w\"}");
	size_t idx[25];
	assert_int_equal(sealed_missing(&f, "secret/tls", wraps, idx), 1);
	assert_int_equal(idx[0], 2);
	assert_int_equal(sealed_missing(&f, "secret/db", wraps, idx), 2);
	assert_int_equal(sealed_missing(&f, "secret/db", NULL, idx), 3);
	idx[0] = 0;
	idx[1] = 1;
	char err[2048];
	sealed_missing_error(&f, "secret/tls", idx, 2, err, sizeof(err));
	assert_string_equal(err, "secret/tls: no wrap for nodes web1, db1 (keys 0000000000000001, 0000000000000002): "
			    "seal to them (tetherctl put --seal) or run tetherctl secrets reseal");
	sealed_fleet_release(&f);

	/* 25 missing: 20 named, then how many more */
	memset(&keys, 0, sizeof(keys));
	keys.live = calloc(25, sizeof(*keys.live));
	for (int i = 0; i < 25; i++) {
		char node[16], kid[17];
		snprintf(node, sizeof(node), "n%02d", i);
		snprintf(kid, sizeof(kid), "%016x", i);
		keys.live[i] = key_of(node, kid, "");
	}
	keys.nlive = 25;
	sealed_fleet_of(&keys, &f);
	assert_int_equal(sealed_missing(&f, "secret/tls", NULL, idx), 25);
	sealed_missing_error(&f, "secret/tls", idx, 25, err, sizeof(err));
	assert_non_null(strstr(err, "n19 and 5 more (keys"));
	assert_null(strstr(err, "n20"));
	assert_non_null(strstr(err, "0000000000000013 and 5 more)"));
	sealed_fleet_release(&f);
	cJSON_Delete(wraps);
}

struct fixture {
	char dir[64];
	struct persist *db;
	struct store *s;
	struct nodes *n;
	struct sealed_conf conf;
	unsigned char other_pk[32];
	char other_kid[KEY_ID_LEN + 1];
	struct node_key k1;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char err[300], path[128];
	if (!f || test_tmpdir_make(f->dir, sizeof(f->dir), "sealed") < 0)
		return -1;
	*state = f;
	struct store_opts opts = { .tombstone_keep = 1000 };
	if (!(f->db = persist_sqlite_open(f->dir, err, sizeof(err))) ||
	    !(f->s = store_open(f->db, &opts, err, sizeof(err))) ||
	    !(f->n = nodes_open(f->db, 10, 60000, err, sizeof(err))))
		return -1;
	snprintf(path, sizeof(path), "%s/recovery", f->dir);
	if (recovery_generate(path, err, sizeof(err)) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/recovery.pub", f->dir);
	if (sealed_conf_load(path, &f->conf, err, sizeof(err)) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/other", f->dir);
	if (recovery_generate(path, err, sizeof(err)) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/other.pub", f->dir);
	if (recovery_load_public(path, f->other_pk, f->other_kid, err, sizeof(err)) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/n1.key", f->dir);
	return nodekey_make(path, &f->k1, err, sizeof(err));
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	nodes_free(f->n);
	store_free(f->s);
	persist_close(f->db);
	nodekey_forget(&f->k1);
	int rc = test_tmpdir_remove(f->dir);
	free(f);
	return rc;
}

/* A stored body of name sealed to rpk, wrapped for k (NULL: none), with
 * extra members (JSON text of an object's members, or NULL). */
static char *sealed_body(const char *name, const unsigned char rpk[32], const char *rkid, const struct node_key *k,
			 const char *extra)
{
	unsigned char dk[ENVELOPE_DK_BYTES];
	char err[300];
	const char *plain = "{\"cert\":\"-----BEGIN C\",\"key\":\"-----BEGIN K\"}";
	cJSON *sealed = envelope_seal(name, (const unsigned char *)plain, strlen(plain), rpk, rkid, dk, err, sizeof(err));
	assert_non_null(sealed);
	cJSON *doc = extra ? cJSON_Parse(extra) : cJSON_CreateObject();
	cJSON_AddItemToObject(doc, "sealed", sealed);
	cJSON *wraps = cJSON_AddObjectToObject(doc, "wraps");
	if (k) {
		char *w = envelope_wrap(dk, k->xpk);
		cJSON_AddStringToObject(wraps, k->kid, w);
		free(w);
	}
	char *text = json_encode_canonical(doc);
	cJSON_Delete(doc);
	return text;
}

/* Runs the checks on one change of name to body (taken); 0 commits it. */
static int write_as(struct fixture *f, const struct sealed_conf *conf, const char *name, char *body, bool revert,
		    char *err, size_t errlen, char **stored)
{
	struct store_change ch = { .name = name, .body = body, .body_len = strlen(body) };
	int rc = sealed_check(conf, f->s, f->n, &ch, 1, revert, err, errlen);
	if (rc == 0) {
		uint64_t v;
		bool changed;
		store_write_lock(f->s);
		assert_int_equal(store_commit(f->s, &ch, 1, &v, &changed, err, errlen), 0);
		store_write_unlock(f->s);
		if (stored) {
			size_t len;
			const char *t = store_stored(store_get(f->s, name), &len);
			*stored = strndup(t, len);
		}
	}
	free(ch.body);
	return rc;
}

static int write_one(struct fixture *f, const struct sealed_conf *conf, const char *name, char *body, char *err,
		     size_t errlen, char **stored)
{
	return write_as(f, conf, name, body, false, err, errlen, stored);
}

static const char *id_of(const char *stored, char *out)
{
	cJSON *doc = cJSON_Parse(stored);
	snprintf(out, ENVELOPE_ID_LEN + 1, "%s", json_get_string(cJSON_GetObjectItemCaseSensitive(doc, "sealed"), "id"));
	cJSON_Delete(doc);
	return out;
}

/* A guard's max_bytes on a sealed secret (core/guardcheck.c) judges what
 * nodes get and judge themselves, the push body: the wraps in the stored
 * form, which grow with the fleet, do not count. */
static void test_guard_measures_push_body(void **state)
{
	struct fixture *f = *state;
	char *body = sealed_body("secret/s", f->conf.pk, f->conf.kid, &f->k1, NULL);
	size_t plen;
	char *push = envelope_push_body(body, strlen(body), &plen);
	assert_non_null(push);
	assert_true(strlen(body) > plen);   /* the wrap is extra */
	for (int over = 0; over <= 1; over++) {
		char g[128], err[1024] = "", *passed = NULL;
		snprintf(g, sizeof(g), "{\"match\":\"secret/\",\"max_bytes\":%zu}", over ? plen - 1 : plen);
		struct store_change gc = { .name = "guard/s", .body = strdup(g), .body_len = strlen(g) };
		uint64_t v;
		bool changed;
		store_write_lock(f->s);
		assert_int_equal(store_commit(f->s, &gc, 1, &v, &changed, err, sizeof(err)), 0);
		struct store_change ch = { .name = "secret/s", .body = body, .body_len = strlen(body) };
		int rc = guardcheck_write(f->s, &ch, 1, NULL, &passed, err, sizeof(err));
		store_write_unlock(f->s);
		free(gc.body);
		assert_int_equal(rc, over ? -1 : 0);
		if (over) {
			char want[128];
			snprintf(want, sizeof(want), "guard/s: secret/s: body is %zu bytes, over max_bytes %zu", plen,
				 plen - 1);
			assert_non_null(strstr(err, want));
		}
		free(passed);
	}
	free(push);
	free(body);
}

static void test_check(void **state)
{
	struct fixture *f = *state;
	char err[2048], want[600];
	char *stored = NULL;
	/* n1 streams with sub secret/ and has a key */
	assert_int_equal(nodes_seen(f->n, "n1", NULL, "sse"), 0);
	nodes_set_sub(f->n, "n1", "secret/");
	char *reg = nodekey_registration("n1", &f->k1, NULL, 100);
	struct nodes_key_answer ans;
	assert_int_equal(nodes_key_register(f->n, "n2", reg, strlen(reg), NULL, &ans, err, sizeof(err)), -1);
	assert_int_equal(ans.http, 400);
	assert_non_null(strstr(err, "node: names another node"));
	assert_int_equal(nodes_key_register(f->n, "n1", reg, strlen(reg), NULL, &ans, err, sizeof(err)), 0);
	assert_string_equal(ans.status, "registered");
	free(reg);

	/* plaintext: refused with --sealed-secrets, taken without */
	const char *plain = "{\"cert\":\"-----BEGIN C\",\"key\":\"-----BEGIN K\"}";
	assert_int_equal(write_one(f, &f->conf, "secret/tls", strdup(plain), err, sizeof(err), NULL), -1);
	assert_string_equal(err, "secret/tls: plaintext refused: this plane keeps secrets sealed (--sealed-secrets); "
			    "write it with tetherctl put secret/tls --seal");
	assert_int_equal(write_one(f, NULL, "secret/plain", strdup(plain), err, sizeof(err), NULL), 0);
	/* malformed: the field named */
	assert_int_equal(write_one(f, &f->conf, "secret/tls", strdup("{\"sealed\":{\"v\":1}}"), err, sizeof(err), NULL),
			 -1);
	assert_non_null(strstr(err, "secret/tls: sealed."));
	/* another recovery key */
	char *b = sealed_body("secret/tls", f->other_pk, f->other_kid, &f->k1, NULL);
	assert_int_equal(write_one(f, &f->conf, "secret/tls", b, err, sizeof(err), NULL), -1);
	assert_non_null(strstr(err, "secret/tls: sealed.rk: "));
	/* no wrap for n1 */
	b = sealed_body("secret/tls", f->conf.pk, f->conf.kid, NULL, NULL);
	assert_int_equal(write_one(f, &f->conf, "secret/tls", b, err, sizeof(err), NULL), -1);
	snprintf(want, sizeof(want), "secret/tls: no wrap for nodes n1 (keys %s): seal to them", f->k1.kid);
	assert_non_null(strstr(err, want));
	/* A: taken; a client's "superseded" ignored */
	char *a = sealed_body("secret/tls", f->conf.pk, f->conf.kid, &f->k1,
			      "{\"superseded\":[\"00000000000000000000000000000000\"]}");
	char *a_copy = strdup(a);
	assert_int_equal(write_one(f, &f->conf, "secret/tls", a, err, sizeof(err), &stored), 0);
	assert_null(strstr(stored, "superseded"));
	char ida[ENVELOPE_ID_LEN + 1], idb[ENVELOPE_ID_LEN + 1];
	id_of(stored, ida);
	free(stored);
	/* what nodes get is the push form */
	const struct store_entry *e = store_get(f->s, "secret/tls");
	size_t plen;
	char *push = envelope_push_body(e->stored, e->stored_len, &plen);
	assert_int_equal(e->body_len, plen);
	assert_memory_equal(e->body, push, plen);
	assert_null(strstr(e->body, "wraps"));
	free(push);
	/* B replaces A: the plane lists A as superseded */
	b = sealed_body("secret/tls", f->conf.pk, f->conf.kid, &f->k1, NULL);
	assert_int_equal(write_one(f, &f->conf, "secret/tls", b, err, sizeof(err), &stored), 0);
	id_of(stored, idb);
	snprintf(want, sizeof(want), "\"superseded\":[\"%s\"]", ida);
	assert_non_null(strstr(stored, want));
	free(stored);
	/* A again: a replay, refused */
	assert_int_equal(write_one(f, &f->conf, "secret/tls", a_copy, err, sizeof(err), NULL), -1);
	snprintf(want, sizeof(want), "secret/tls: envelope %s was replaced before: a replayed envelope", ida);
	assert_string_equal(err, want);
	/* n1's key revoked: a wrap for it is dropped, and nothing is missing */
	char kid[KEY_ID_LEN + 1];
	assert_int_equal(nodes_key_revoke(f->n, "n1", kid), 0);
	assert_string_equal(kid, f->k1.kid);
	assert_int_equal(nodes_key_revoke(f->n, "n1", kid), 1);
	b = sealed_body("secret/tls", f->conf.pk, f->conf.kid, &f->k1, NULL);
	assert_int_equal(write_one(f, &f->conf, "secret/tls", b, err, sizeof(err), &stored), 0);
	assert_null(strstr(stored, f->k1.kid));
	snprintf(want, sizeof(want), "\"superseded\":[\"%s\",\"%s\"]", ida, idb);
	assert_non_null(strstr(stored, want));
	free(stored);
	/* and its registration is refused (rule 2) */
	reg = nodekey_registration("n1", &f->k1, NULL, 200);
	assert_int_equal(nodes_key_register(f->n, "n1", reg, strlen(reg), NULL, &ans, err, sizeof(err)), -1);
	assert_int_equal(ans.http, 403);
	free(reg);
}

/* Reverts (tetherctl revert, a rollout's): an older envelope back is no
 * replay; the superseded list stays the plane's (the replaced id
 * appended, the live one left out), so the live envelope may be written
 * again (a reseal) and a replaced one stays refused. */
static void test_revert(void **state)
{
	struct fixture *f = *state;
	char err[2048], want[600];
	char *stored = NULL;
	assert_int_equal(nodes_seen(f->n, "n1", NULL, "sse"), 0);
	nodes_set_sub(f->n, "n1", "secret/");
	char *reg = nodekey_registration("n1", &f->k1, NULL, 100);
	struct nodes_key_answer ans;
	assert_int_equal(nodes_key_register(f->n, "n1", reg, strlen(reg), NULL, &ans, err, sizeof(err)), 0);
	free(reg);
	char *a = sealed_body("secret/tls", f->conf.pk, f->conf.kid, &f->k1, NULL);
	char *a_again = strdup(a), *a_later = strdup(a), *a_revert = strdup(a);
	char ida[ENVELOPE_ID_LEN + 1], idb[ENVELOPE_ID_LEN + 1], idc[ENVELOPE_ID_LEN + 1];
	assert_int_equal(write_one(f, &f->conf, "secret/tls", a, err, sizeof(err), &stored), 0);
	id_of(stored, ida);
	free(stored);
	char *b = sealed_body("secret/tls", f->conf.pk, f->conf.kid, &f->k1, NULL);
	char *b_again = strdup(b);
	assert_int_equal(write_one(f, &f->conf, "secret/tls", b, err, sizeof(err), &stored), 0);
	id_of(stored, idb);
	free(stored);
	/* a plain write of A is a replay; the revert to A is taken */
	assert_int_equal(write_one(f, &f->conf, "secret/tls", a_again, err, sizeof(err), NULL), -1);
	assert_non_null(strstr(err, "a replayed envelope"));
	assert_int_equal(write_as(f, &f->conf, "secret/tls", a_revert, true, err, sizeof(err), &stored), 0);
	cJSON *doc = cJSON_Parse(stored);
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(doc, "superseded");
	assert_int_equal(cJSON_GetArraySize(list), 1);   /* B replaced; A live, so not listed */
	assert_string_equal(cJSON_GetArrayItem(list, 0)->valuestring, idb);
	assert_string_equal(json_get_string(cJSON_GetObjectItemCaseSensitive(doc, "sealed"), "id"), ida);
	cJSON_Delete(doc);
	free(stored);
	/* B again (plain): a replay */
	assert_int_equal(write_one(f, &f->conf, "secret/tls", b_again, err, sizeof(err), NULL), -1);
	snprintf(want, sizeof(want), "secret/tls: envelope %s was replaced before: a replayed envelope", idb);
	assert_string_equal(err, want);
	/* C replaces A: A is listed again, and a plain write of it refused */
	char *c = sealed_body("secret/tls", f->conf.pk, f->conf.kid, &f->k1, NULL);
	assert_int_equal(write_one(f, &f->conf, "secret/tls", c, err, sizeof(err), &stored), 0);
	id_of(stored, idc);
	snprintf(want, sizeof(want), "\"superseded\":[\"%s\",\"%s\"]", idb, ida);
	assert_non_null(strstr(stored, want));
	free(stored);
	assert_int_equal(write_one(f, &f->conf, "secret/tls", a_later, err, sizeof(err), NULL), -1);
	snprintf(want, sizeof(want), "secret/tls: envelope %s was replaced before: a replayed envelope", ida);
	assert_string_equal(err, want);
	/* a revert is not refused for a node that came since without a wrap */
	struct node_key k2;
	char path[160];
	snprintf(path, sizeof(path), "%s/n2.key", f->dir);
	assert_int_equal(nodekey_make(path, &k2, err, sizeof(err)), 0);
	assert_int_equal(nodes_seen(f->n, "n2", NULL, "sse"), 0);
	nodes_set_sub(f->n, "n2", "secret/");
	reg = nodekey_registration("n2", &k2, NULL, 100);
	assert_int_equal(nodes_key_register(f->n, "n2", reg, strlen(reg), NULL, &ans, err, sizeof(err)), 0);
	free(reg);
	char *d = sealed_body("secret/tls", f->conf.pk, f->conf.kid, &f->k1, NULL);
	char *d_revert = strdup(d);
	assert_int_equal(write_one(f, &f->conf, "secret/tls", d, err, sizeof(err), NULL), -1);
	assert_non_null(strstr(err, "no wrap for nodes n2"));
	assert_int_equal(write_as(f, &f->conf, "secret/tls", d_revert, true, err, sizeof(err), NULL), 0);
	nodekey_forget(&k2);

	/* a revert of two secrets whose first is refused (plaintext): the
	 * second still gets the plane's superseded list */
	char *e1 = sealed_body("secret/s", f->conf.pk, f->conf.kid, &f->k1, NULL);
	assert_int_equal(write_one(f, NULL, "secret/s", e1, err, sizeof(err), &stored), 0);
	char ide[ENVELOPE_ID_LEN + 1];
	id_of(stored, ide);
	free(stored);
	struct store_change two[2] = {
		{ .name = "secret/a-plain", .body = strdup("{\"cert\":\"x\",\"key\":\"y\"}") },
		{ .name = "secret/s", .body = sealed_body("secret/s", f->conf.pk, f->conf.kid, &f->k1, NULL) },
	};
	for (int i = 0; i < 2; i++)
		two[i].body_len = strlen(two[i].body);
	char *plain_before = strdup(two[0].body);
	assert_int_equal(sealed_check(&f->conf, f->s, f->n, two, 2, true, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "secret/a-plain: plaintext refused"));
	assert_string_equal(two[0].body, plain_before);   /* left as it was */
	snprintf(want, sizeof(want), "\"superseded\":[\"%s\"]", ide);
	assert_non_null(strstr(two[1].body, want));
	free(plain_before);
	free(two[0].body);
	free(two[1].body);
}

/* One key on two nodes (a copied node.key): revoked on one, it is revoked
 * on the other too, and no node registers it again. */
static void test_revoked_everywhere(void **state)
{
	struct fixture *f = *state;
	char err[600], kid[KEY_ID_LEN + 1];
	struct nodes_key_answer ans;
	const char *nodes[] = { "c1", "c2" };
	for (int i = 0; i < 2; i++) {
		char *reg = nodekey_registration(nodes[i], &f->k1, NULL, 100);
		assert_int_equal(nodes_key_register(f->n, nodes[i], reg, strlen(reg), NULL, &ans, err, sizeof(err)), 0);
		free(reg);
	}
	assert_int_equal(nodes_key_revoke(f->n, "c1", kid), 0);
	char **also;
	assert_int_equal(nodes_key_revoke_everywhere(f->n, kid, &also), 1);
	assert_string_equal(also[0], "c2");
	free(also[0]);
	free(also);
	struct nodes_keys keys;
	nodes_keys_get(f->n, &keys);
	assert_int_equal(keys.nlive, 0);
	nodes_keys_release(&keys);
	char *reg = nodekey_registration("c3", &f->k1, NULL, 200);
	assert_int_equal(nodes_key_register(f->n, "c3", reg, strlen(reg), NULL, &ans, err, sizeof(err)), -1);
	assert_int_equal(ans.http, 403);
	assert_non_null(strstr(err, "was revoked (on another node"));
	free(reg);
}

/* The store indexes a sealed secret's wraps by key id when it enters:
 * store_wrap and store_envelope_id answer without a parse, and follow a
 * replacement and a delete; a plaintext secret has none. */
static void test_wrap_index(void **state)
{
	struct fixture *f = *state;
	char err[600];
	char *stored = NULL;
	char *a = sealed_body("secret/w", f->conf.pk, f->conf.kid, &f->k1, NULL);
	assert_int_equal(write_one(f, NULL, "secret/w", a, err, sizeof(err), &stored), 0);
	char ida[ENVELOPE_ID_LEN + 1];
	id_of(stored, ida);
	cJSON *doc = cJSON_Parse(stored);
	const char *w = json_get_string(cJSON_GetObjectItemCaseSensitive(doc, "wraps"), f->k1.kid);
	store_rdlock(f->s);
	const struct store_entry *e = store_get(f->s, "secret/w");
	assert_string_equal(store_envelope_id(e), ida);
	assert_string_equal(store_wrap(e, f->k1.kid), w);
	assert_null(store_wrap(e, "00000000000000ff"));
	store_rdunlock(f->s);
	cJSON_Delete(doc);
	free(stored);
	/* replaced by an envelope without n1's wrap */
	char *b = sealed_body("secret/w", f->conf.pk, f->conf.kid, NULL, NULL);
	char *b_copy = strdup(b);
	assert_int_equal(write_one(f, NULL, "secret/w", b, err, sizeof(err), &stored), 0);
	char idb[ENVELOPE_ID_LEN + 1];
	id_of(stored, idb);
	free(stored);
	store_rdlock(f->s);
	e = store_get(f->s, "secret/w");
	assert_string_equal(store_envelope_id(e), idb);
	assert_null(store_wrap(e, f->k1.kid));
	store_rdunlock(f->s);
	/* deleted: none */
	struct store_change del = { .name = "secret/w" };
	uint64_t v;
	bool changed;
	store_write_lock(f->s);
	assert_int_equal(store_commit(f->s, &del, 1, &v, &changed, err, sizeof(err)), 0);
	e = store_get(f->s, "secret/w");
	assert_null(store_envelope_id(e));
	assert_null(store_wrap(e, f->k1.kid));
	store_write_unlock(f->s);
	/* replay across the delete: A and B were secret/w's: written again
	 * after the delete, each is a replay; a new one carries them on */
	char *a2 = sealed_body("secret/w", f->conf.pk, f->conf.kid, &f->k1, NULL);
	assert_int_equal(write_one(f, &f->conf, "secret/w", a2, err, sizeof(err), &stored), 0);   /* C */
	char idc[ENVELOPE_ID_LEN + 1];
	id_of(stored, idc);
	free(stored);
	store_write_lock(f->s);
	del.body = NULL;
	assert_int_equal(store_commit(f->s, &del, 1, &v, &changed, err, sizeof(err)), 0);
	store_write_unlock(f->s);
	store_rdlock(f->s);
	char want[200];
	snprintf(want, sizeof(want), "%s,%s", idb, idc);
	assert_non_null(strstr(store_gone_ids(store_get(f->s, "secret/w")), want));
	store_rdunlock(f->s);
	assert_int_equal(write_one(f, &f->conf, "secret/w", strdup(b_copy), err, sizeof(err), NULL), -1);
	snprintf(want, sizeof(want), "secret/w: envelope %s was replaced before: a replayed envelope", idb);
	assert_string_equal(err, want);
	char *d = sealed_body("secret/w", f->conf.pk, f->conf.kid, &f->k1, NULL);
	assert_int_equal(write_one(f, &f->conf, "secret/w", d, err, sizeof(err), &stored), 0);
	snprintf(want, sizeof(want), "\"superseded\":[\"%s\",\"%s\",\"%s\"]", ida, idb, idc);
	assert_non_null(strstr(stored, want));
	free(stored);
	free(b_copy);
	/* plaintext: none */
	assert_int_equal(write_one(f, NULL, "secret/p", strdup("{\"cert\":\"x\",\"key\":\"y\"}"), err, sizeof(err),
				   NULL), 0);
	store_rdlock(f->s);
	assert_null(store_envelope_id(store_get(f->s, "secret/p")));
	store_rdunlock(f->s);
}

/* The registry's shared snapshot of the sealing targets: the same one
 * while nothing moved (no fleet-sized copy per write), a new one once a
 * key or a subscription moved; one still held outlives the cache's. */
static void test_snapshot(void **state)
{
	struct fixture *f = *state;
	char err[600];
	assert_int_equal(nodes_seen(f->n, "n1", NULL, "sse"), 0);
	nodes_set_sub(f->n, "n1", "secret/");
	const struct nodes_keys *a = nodes_keys_hold(f->n);
	const struct nodes_keys *b = nodes_keys_hold(f->n);
	assert_ptr_equal(a, b);
	assert_int_equal(a->nlive, 0);
	nodes_keys_drop(f->n, b);
	char *reg = nodekey_registration("n1", &f->k1, NULL, 100);
	struct nodes_key_answer ans;
	assert_int_equal(nodes_key_register(f->n, "n1", reg, strlen(reg), NULL, &ans, err, sizeof(err)), 0);
	free(reg);
	b = nodes_keys_hold(f->n);
	assert_ptr_not_equal(a, b);
	assert_int_equal(b->nlive, 1);
	assert_true(sub_match(&b->subs[0], "secret/x"));
	assert_int_equal(a->nlive, 0);   /* still held: unchanged */
	nodes_keys_drop(f->n, a);
	/* an ACK moves nothing */
	nodes_sent(f->n, "n1", 1, "nonce1");
	a = nodes_keys_hold(f->n);
	assert_ptr_equal(a, b);
	nodes_keys_drop(f->n, a);
	/* a new subscription does */
	nodes_set_sub(f->n, "n1", "cluster/");
	a = nodes_keys_hold(f->n);
	assert_ptr_not_equal(a, b);
	assert_false(sub_match(&a->subs[0], "secret/x"));
	nodes_keys_drop(f->n, a);
	nodes_keys_drop(f->n, b);
}

/* A stored sealed body that is damaged (sealed but invalid: from etcd or
 * a relay's feed, never a write) is never pushed as it is: nodes get a
 * marker they refuse; the stored text stays beside it. */
static void test_damaged(void **state)
{
	struct fixture *f = *state;
	char dir[128], path[160], err[300];
	snprintf(dir, sizeof(dir), "%s/damaged", f->dir);
	struct store_opts opts = { .tombstone_keep = 1000 };
	struct persist *p = persist_sqlite_open(dir, err, sizeof(err));
	assert_non_null(p);
	struct store *s = store_open(p, &opts, err, sizeof(err));
	assert_non_null(s);
	const char *plain = "{\"cert\":\"-----BEGIN C\",\"key\":\"-----BEGIN K\"}";
	struct store_change ch = { .name = "secret/x", .body = strdup(plain), .body_len = strlen(plain) };
	uint64_t v;
	bool changed;
	store_write_lock(s);
	assert_int_equal(store_commit(s, &ch, 1, &v, &changed, err, sizeof(err)), 0);
	store_write_unlock(s);
	free(ch.body);
	store_free(s);
	persist_close(p);
	snprintf(path, sizeof(path), "%s/tether.db", dir);
	sqlite3 *db;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "UPDATE resources SET body = '{\"sealed\":{\"v\":1},\"wraps\":{\"k\":\"w\"}}'"
				      " WHERE name = 'secret/x'", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	p = persist_sqlite_open(dir, err, sizeof(err));
	assert_non_null(p);
	s = store_open(p, &opts, err, sizeof(err));
	assert_non_null(s);
	const struct store_entry *e = store_get(s, "secret/x");
	assert_non_null(e);
	assert_int_equal(e->body_len, strlen("{\"sealed\":null}"));
	assert_memory_equal(e->body, "{\"sealed\":null}", e->body_len);
	size_t len;
	assert_non_null(strstr(store_stored(e, &len), "wraps"));
	store_free(s);
	persist_close(p);
}

/* Registrations on the plane: a node with no record yet (it registers
 * before its first stream, directly or in a relay's 'k' line) gets one;
 * where its key came from; at's bound; the high-water mark of at kept
 * across a revoke and a restart (below, test_migration). */
static void test_register(void **state)
{
	struct fixture *f = *state;
	char err[600];
	struct nodes_key_answer ans;
	struct buf b = BUF_INIT;
	/* n1 has no record: taken, and made */
	char *reg = nodekey_registration("n1", &f->k1, NULL, 100);
	assert_int_equal(nodes_key_register(f->n, "n1", reg, strlen(reg), NULL, &ans, err, sizeof(err)), 0);
	assert_string_equal(ans.status, "registered");
	free(reg);
	assert_int_equal(nodes_one_to_json(f->n, "n1", 0, &b), 0);
	assert_non_null(strstr(b.data, "\"key_via\":\"\""));
	buf_release(&b);
	/* ... but its subscription is not known: no sealing target yet */
	struct nodes_keys keys;
	nodes_keys_get(f->n, &keys);
	assert_int_equal(keys.nlive, 1);
	struct sealed_fleet fl;
	sealed_fleet_of(&keys, &fl);
	assert_int_equal(fl.k->nlive, 0);
	sealed_fleet_release(&fl);
	/* n3 through relay r1 (a 'k' line before any 'c' line): refused, no
	 * record made (a relay cannot invent nodes) */
	struct node_key k3;
	char path[160];
	snprintf(path, sizeof(path), "%s/n3.key", f->dir);
	assert_int_equal(nodekey_make(path, &k3, err, sizeof(err)), 0);
	reg = nodekey_registration("n3", &k3, NULL, 100);
	assert_int_equal(nodes_key_register(f->n, "n3", reg, strlen(reg), "r1", &ans, err, sizeof(err)), -1);
	assert_int_equal(ans.http, 403);
	assert_non_null(strstr(err, "node 'n3' is unknown here, not behind relay r1: its 'k' line is not taken"));
	assert_int_equal(nodes_one_to_json(f->n, "n3", 0, &b), -1);
	/* after r1's 'c' line for it: taken, behind r1 */
	struct node_change c = { .kind = 'c', .node = "n3", .streaming = true, .transport = "sse", .via = "",
				 .sub = "secret/", .labels = "{}" };
	assert_int_equal(nodes_relay_change(f->n, "r1", &c, err, sizeof(err)), 0);
	assert_int_equal(nodes_key_register(f->n, "n3", reg, strlen(reg), "r1", &ans, err, sizeof(err)), 0);
	assert_int_equal(nodes_one_to_json(f->n, "n3", 0, &b), 0);
	assert_non_null(strstr(b.data, "\"key_via\":\"r1\""));
	assert_non_null(strstr(b.data, "\"via\":[\"r1\"]"));
	buf_release(&b);
	nodes_keys_get(f->n, &keys);
	assert_int_equal(keys.nlive, 2);
	for (size_t i = 0; i < keys.nlive; i++)
		assert_string_equal(keys.live[i].via, strcmp(keys.live[i].node, "n3") == 0 ? "r1" : "");
	nodes_keys_release(&keys);
	/* another relay's 'k' line for it: 403 */
	assert_int_equal(nodes_key_register(f->n, "n3", reg, strlen(reg), "r2", &ans, err, sizeof(err)), -1);
	assert_int_equal(ans.http, 403);
	free(reg);
	/* at more than 600 s ahead: 400 */
	reg = nodekey_registration("n3", &k3, NULL, wall_seconds() + 700);
	assert_int_equal(nodes_key_register(f->n, "n3", reg, strlen(reg), "r1", &ans, err, sizeof(err)), -1);
	assert_int_equal(ans.http, 400);
	assert_non_null(strstr(err, "at: more than 600 s ahead of the plane's clock: check the node's clock"));
	unsigned http;
	assert_int_equal(nodes_key_forward(f->n, "n3", reg, strlen(reg), NULL, &http, err, sizeof(err)), -1);
	assert_int_equal(http, 400);
	free(reg);
	/* a relay's forward of its own node's POST makes the record too */
	reg = nodekey_registration("n4", &k3, NULL, 100);
	assert_int_equal(nodes_key_forward(f->n, "n4", reg, strlen(reg), NULL, &http, err, sizeof(err)), 0);
	assert_int_equal(http, 202);
	assert_int_equal(nodes_one_to_json(f->n, "n4", 0, &b), 0);
	buf_release(&b);
	free(reg);
	/* ... but a forward of a 'k' line (a mid relay) does not */
	reg = nodekey_registration("n9", &k3, NULL, 100);
	assert_int_equal(nodes_key_forward(f->n, "n9", reg, strlen(reg), "r1", &http, err, sizeof(err)), -1);
	assert_int_equal(http, 403);
	assert_int_equal(nodes_one_to_json(f->n, "n9", 0, &b), -1);
	free(reg);

	/* n5 streams from this plane: no relay claims it, by a record
	 * (POST /v1/relay/nodes) or a 'c' line, and its 'k' lines are refused */
	assert_int_equal(nodes_seen(f->n, "n5", "{}", "sse"), 0);
	nodes_stream_open(f->n, "n5");
	struct persist_node pn = { .id = "n5", .labels = "{}", .transport = "sse", .streaming = true };
	assert_int_equal(nodes_relayed(f->n, &pn, "r1", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "node 'n5' streams from this plane"));
	pn.streaming = false;
	assert_int_equal(nodes_relayed(f->n, &pn, "r1", err, sizeof(err)), -1);
	c.node = "n5";
	assert_int_equal(nodes_relay_change(f->n, "r1", &c, err, sizeof(err)), -1);
	assert_int_equal(nodes_one_to_json(f->n, "n5", 0, &b), 0);
	assert_null(strstr(b.data, "\"via\":[\"r1\"]"));
	buf_release(&b);
	reg = nodekey_registration("n5", &k3, NULL, 100);
	assert_int_equal(nodes_key_register(f->n, "n5", reg, strlen(reg), "r1", &ans, err, sizeof(err)), -1);
	assert_int_equal(ans.http, 403);
	free(reg);
	/* n3 (behind r1) opens a stream here: r1's 'k' lines for it stop */
	nodes_stream_open(f->n, "n3");
	reg = nodekey_registration("n3", &k3, NULL, 200);
	assert_int_equal(nodes_key_register(f->n, "n3", reg, strlen(reg), "r1", &ans, err, sizeof(err)), -1);
	assert_int_equal(ans.http, 403);
	assert_non_null(strstr(err, "node 'n3' is streaming from this plane, not behind relay r1"));
	free(reg);
	/* a record for a node the registry does not know: behind r1 */
	pn.id = "n6";
	assert_int_equal(nodes_relayed(f->n, &pn, "r1", err, sizeof(err)), 0);
	nodekey_forget(&k3);
}

/* --approve-relay-keys: a first key through a relay waits (not live, not
 * a sealing target) until an admin approves that key id, or the node's
 * own registration of it; an endorsed rotation needs no approval; after a
 * revoke the next one through a relay waits again; the node's own new key
 * replaces a pending one; the state outlives a restart. */
static void test_pending(void **state)
{
	struct fixture *f = *state;
	char err[600], path[160];
	struct nodes_key_answer ans;
	struct buf b = BUF_INIT;
	nodes_set_approve_relay_keys(f->n, true);
	struct node_change c = { .kind = 'c', .node = "n7", .streaming = true, .transport = "sse", .via = "",
				 .sub = "secret/", .labels = "{}" };
	assert_int_equal(nodes_relay_change(f->n, "r1", &c, err, sizeof(err)), 0);
	struct node_key k2, k3;
	snprintf(path, sizeof(path), "%s/k2.key", f->dir);
	assert_int_equal(nodekey_make(path, &k2, err, sizeof(err)), 0);
	snprintf(path, sizeof(path), "%s/k3.key", f->dir);
	assert_int_equal(nodekey_make(path, &k3, err, sizeof(err)), 0);
	char *reg = nodekey_registration("n7", &f->k1, NULL, 100);
	assert_int_equal(nodes_key_register(f->n, "n7", reg, strlen(reg), "r1", &ans, err, sizeof(err)), 0);
	assert_string_equal(ans.status, "pending");
	assert_true(ans.changed);
	free(reg);
	struct nodes_keys keys;
	nodes_keys_get(f->n, &keys);
	assert_int_equal(keys.nlive, 0);
	assert_int_equal(keys.npending, 1);
	assert_string_equal(keys.pending[0].kid, f->k1.kid);
	nodes_keys_release(&keys);
	char want[80];
	snprintf(want, sizeof(want), "\"key_id\":null,\"key_pending\":\"%s\"", f->k1.kid);
	assert_int_equal(nodes_one_to_json(f->n, "n7", 0, &b), 0);
	assert_non_null(strstr(b.data, want));
	buf_release(&b);
	/* the same key through the relay again: still pending */
	reg = nodekey_registration("n7", &f->k1, NULL, 101);
	assert_int_equal(nodes_key_register(f->n, "n7", reg, strlen(reg), "r1", &ans, err, sizeof(err)), 0);
	free(reg);
	nodes_keys_get(f->n, &keys);
	assert_int_equal(keys.nlive, 0);
	nodes_keys_release(&keys);
	/* approval: another key id 409, no node 404, the key's id 200 */
	assert_int_equal(nodes_key_approve(f->n, "n7", k2.kid, err, sizeof(err)), 409);
	assert_non_null(strstr(err, "the key waiting for approval is"));
	assert_int_equal(nodes_key_approve(f->n, "nope", f->k1.kid, err, sizeof(err)), 404);
	assert_int_equal(nodes_key_approve(f->n, "n7", f->k1.kid, err, sizeof(err)), 200);
	assert_int_equal(nodes_key_approve(f->n, "n7", f->k1.kid, err, sizeof(err)), 409);   /* none waits */
	nodes_keys_get(f->n, &keys);
	assert_int_equal(keys.nlive, 1);
	assert_int_equal(keys.npending, 0);
	nodes_keys_release(&keys);
	/* an endorsed rotation through the relay: live at once */
	reg = nodekey_registration("n7", &k2, &f->k1, 200);
	assert_int_equal(nodes_key_register(f->n, "n7", reg, strlen(reg), "r1", &ans, err, sizeof(err)), 0);
	assert_string_equal(ans.status, "rotated");
	free(reg);
	nodes_keys_get(f->n, &keys);
	assert_int_equal(keys.nlive, 1);
	assert_string_equal(keys.live[0].kid, k2.kid);
	nodes_keys_release(&keys);
	/* revoked: the next key through the relay waits again */
	char kid[KEY_ID_LEN + 1];
	assert_int_equal(nodes_key_revoke(f->n, "n7", kid), 0);
	reg = nodekey_registration("n7", &k3, NULL, 300);
	assert_int_equal(nodes_key_register(f->n, "n7", reg, strlen(reg), "r1", &ans, err, sizeof(err)), 0);
	assert_string_equal(ans.status, "pending");
	free(reg);
	/* the state outlives a restart */
	assert_int_equal(nodes_flush(f->n, err, sizeof(err)), 0);
	nodes_free(f->n);
	f->n = nodes_open(f->db, 10, 60000, err, sizeof(err));
	assert_non_null(f->n);
	nodes_set_approve_relay_keys(f->n, true);
	nodes_keys_get(f->n, &keys);
	assert_int_equal(keys.nlive, 0);
	assert_int_equal(keys.npending, 1);
	nodes_keys_release(&keys);
	/* the node's own registration of it approves it */
	reg = nodekey_registration("n7", &k3, NULL, 301);
	assert_int_equal(nodes_key_register(f->n, "n7", reg, strlen(reg), NULL, &ans, err, sizeof(err)), 0);
	assert_string_equal(ans.status, "approved");
	free(reg);
	nodes_keys_get(f->n, &keys);
	assert_int_equal(keys.nlive, 1);
	nodes_keys_release(&keys);
	/* a relay's pending key for n8, and n8's own, other key: the node's replaces it */
	c.node = "n8";
	assert_int_equal(nodes_relay_change(f->n, "r1", &c, err, sizeof(err)), 0);
	struct node_key k4;   /* (k2 is revoked on n7: on no node again) */
	snprintf(path, sizeof(path), "%s/k4.key", f->dir);
	assert_int_equal(nodekey_make(path, &k4, err, sizeof(err)), 0);
	reg = nodekey_registration("n8", &k4, NULL, 100);
	assert_int_equal(nodes_key_register(f->n, "n8", reg, strlen(reg), "r1", &ans, err, sizeof(err)), 0);
	assert_string_equal(ans.status, "pending");
	free(reg);
	reg = nodekey_registration("n8", &f->k1, NULL, 101);
	assert_int_equal(nodes_key_register(f->n, "n8", reg, strlen(reg), NULL, &ans, err, sizeof(err)), 0);
	assert_string_equal(ans.status, "replaced");
	free(reg);
	snprintf(want, sizeof(want), "\"key_id\":\"%s\",\"key_pending\":null", f->k1.kid);
	assert_int_equal(nodes_one_to_json(f->n, "n8", 0, &b), 0);
	assert_non_null(strstr(b.data, want));
	buf_release(&b);
	nodekey_forget(&k2);
	nodekey_forget(&k3);
	nodekey_forget(&k4);
}

/* A database of schema 3 (before node keys) is upgraded in place: its
 * node records load, and a key registered then is kept across a restart. */
static void test_migration(void **state)
{
	struct fixture *f = *state;
	char dir[128], path[160], err[300];
	snprintf(dir, sizeof(dir), "%s/old", f->dir);
	assert_int_equal(mkdir(dir, 0700), 0);
	snprintf(path, sizeof(path), "%s/tether.db", dir);
	sqlite3 *db;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db,
		"CREATE TABLE meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL);"
		"INSERT INTO meta VALUES('schema', 3);"
		"CREATE TABLE nodes(node TEXT PRIMARY KEY, labels TEXT NOT NULL DEFAULT '{}',"
		"  first_seen INTEGER NOT NULL, last_seen INTEGER NOT NULL, transport TEXT NOT NULL DEFAULT '',"
		"  sent_version INTEGER NOT NULL DEFAULT 0, sent_nonce TEXT NOT NULL DEFAULT '',"
		"  sent_at INTEGER NOT NULL DEFAULT 0, acked_version INTEGER NOT NULL DEFAULT 0,"
		"  acked_at INTEGER NOT NULL DEFAULT 0, healthy INTEGER, nack_version INTEGER, nack_nonce TEXT,"
		"  nack_error TEXT, nack_at INTEGER, acks INTEGER NOT NULL DEFAULT 0, nacks INTEGER NOT NULL DEFAULT 0,"
		"  stale_acks INTEGER NOT NULL DEFAULT 0, sub TEXT);"
		"INSERT INTO nodes(node, first_seen, last_seen, transport, sub) VALUES('old1', 1, 2, 'sse', 'secret/');",
		NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	for (int round = 0; round < 3; round++) {
		struct persist *p = persist_sqlite_open(dir, err, sizeof(err));
		assert_non_null(p);
		struct nodes *n = nodes_open(p, 10, 60000, err, sizeof(err));
		assert_non_null(n);
		struct buf b = BUF_INIT;
		assert_int_equal(nodes_one_to_json(n, "old1", 0, &b), 0);
		char want[64];
		snprintf(want, sizeof(want), "\"key_id\":\"%s\"", f->k1.kid);
		if (round == 0) {
			assert_non_null(strstr(b.data, "\"key_id\":null"));
			char *reg = nodekey_registration("old1", &f->k1, NULL, 100);
			struct nodes_key_answer ans;
			assert_int_equal(nodes_key_register(n, "old1", reg, strlen(reg), NULL, &ans, err, sizeof(err)), 0);
			free(reg);
			assert_int_equal(nodes_flush(n, err, sizeof(err)), 0);
		} else if (round == 1) {
			assert_non_null(strstr(b.data, want));
			assert_non_null(strstr(b.data, "\"sub\":\"secret/\""));
			assert_non_null(strstr(b.data, "\"key_via\":\"\""));
			char kid[KEY_ID_LEN + 1];
			assert_int_equal(nodes_key_revoke(n, "old1", kid), 0);
			assert_int_equal(nodes_flush(n, err, sizeof(err)), 0);
		} else {
			/* the mark (100) outlived the revoke and the restart: a new
			 * key needs a registration after it */
			assert_non_null(strstr(b.data, "\"key_id\":null"));
			struct node_key k2;
			char kp[200];
			snprintf(kp, sizeof(kp), "%s/k2.key", dir);
			assert_int_equal(nodekey_make(kp, &k2, err, sizeof(err)), 0);
			char *reg = nodekey_registration("old1", &k2, NULL, 100);
			struct nodes_key_answer ans;
			assert_int_equal(nodes_key_register(n, "old1", reg, strlen(reg), NULL, &ans, err, sizeof(err)), -1);
			assert_int_equal(ans.http, 409);
			assert_non_null(strstr(err, "at: 100 is not after the newest registration taken"));
			assert_int_equal(ans.stale_mark, 100);   /* the answer's key_at: the node registers after it */
			free(reg);
			reg = nodekey_registration("old1", &k2, NULL, 101);
			assert_int_equal(nodes_key_register(n, "old1", reg, strlen(reg), NULL, &ans, err, sizeof(err)), 0);
			assert_int_equal(ans.stale_mark, 0);
			free(reg);
			nodekey_forget(&k2);
		}
		buf_release(&b);
		nodes_free(n);
		persist_close(p);
	}
}

int main(void)
{
	if (sodium_init() < 0)
		return 1;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_missing),
		cmocka_unit_test_setup_teardown(test_check, setup, teardown),
		cmocka_unit_test_setup_teardown(test_guard_measures_push_body, setup, teardown),
		cmocka_unit_test_setup_teardown(test_migration, setup, teardown),
		cmocka_unit_test_setup_teardown(test_revert, setup, teardown),
		cmocka_unit_test_setup_teardown(test_damaged, setup, teardown),
		cmocka_unit_test_setup_teardown(test_register, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pending, setup, teardown),
		cmocka_unit_test_setup_teardown(test_snapshot, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wrap_index, setup, teardown),
		cmocka_unit_test_setup_teardown(test_revoked_everywhere, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
