/* test_sealer.c: unit tests of ctl/sealer.c, tetherctl's sealing without the
 * network: the plane's GET /v1/secrets answer (keys checked against their
 * ids, subscriptions), which nodes a name reaches, a secret sealed to
 * them (each wrap opens with its node's key, none for the others), the
 * recovery key (file kinds, the plane's against the given one), reseal's
 * merge (wraps added only where missing, the envelope untouched,
 * superseded dropped, refusals) and opening with the recovery key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include "buf.h"
#include "envelope.h"
#include "json.h"
#include "nodekey.h"
#include "sealer.h"
#include "secrets.h"
#include "xmalloc.h"
#include "tmpdir.h"

static const char BODY[] = "{\"cert\":\"-----BEGIN CERTIFICATE-----\\nC\\n\",\"key\":\"-----BEGIN PRIVATE KEY-----\\nK\\n\"}";

/* Three nodes: a (every name: sub null), b ("secret/web"), c ("cluster/"). */
static struct {
	char dir[64], rpath[128], rpub[128];
	struct node_key a, b, c;
	struct sealer_recovery rec;   /* loaded from rpath */
	char *answer;               /* a GET /v1/secrets answer for them */
} T;

/* The canonical text of a copy of v. */
static char *canon_of(const cJSON *v)
{
	cJSON *c = cJSON_Duplicate(v, true);
	char *t = json_encode_canonical(c);
	cJSON_Delete(c);
	return t;
}

static char *b64(const unsigned char *p, size_t n)
{
	return keys_b64_encode(p, n);
}

static char *answer_for(const char *recovery_kid, const char *a_kid)
{
	char *ka = b64(T.a.pk, 32), *kb = b64(T.b.pk, 32), *kc = b64(T.c.pk, 32), *rk = b64(T.rec.pk, 32);
	struct buf b = BUF_INIT;
	buf_printf(&b, "{\"sealed_secrets\":true,\"recovery\":{\"key_id\":\"%s\",\"key\":\"%s\"},\"nodes\":["
		       "{\"node\":\"a\",\"key_id\":\"%s\",\"key\":\"%s\",\"sub\":null},"
		       "{\"node\":\"b\",\"key_id\":\"%s\",\"key\":\"%s\",\"sub\":\"secret/web\"},"
		       "{\"node\":\"c\",\"key_id\":\"%s\",\"key\":\"%s\",\"sub\":\"cluster/\"}],"
		       "\"secrets\":[{\"name\":\"secret/web\",\"version\":7,\"sealed\":true,\"id\":null,"
		       "\"missing\":[\"b\"]},{\"name\":\"secret/old\",\"version\":3,\"sealed\":false,\"id\":null,"
		       "\"missing\":[]}]}",
		   recovery_kid, rk, a_kid, ka, T.b.kid, kb, T.c.kid, kc);
	free(ka);
	free(kb);
	free(kc);
	free(rk);
	return buf_detach(&b, NULL);
}

static int group_setup(void **state)
{
	(void)state;
	char err[512];
	if (sodium_init() < 0 || test_tmpdir_make(T.dir, sizeof(T.dir), "seal") < 0)
		return -1;
	snprintf(T.rpath, sizeof(T.rpath), "%s/recovery", T.dir);
	snprintf(T.rpub, sizeof(T.rpub), "%s/recovery.pub", T.dir);
	char p[128];
	struct node_key *keys[] = { &T.a, &T.b, &T.c };
	for (int i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s/n%d.key", T.dir, i);
		if (nodekey_make(p, keys[i], err, sizeof(err)) < 0)
			return -1;
	}
	if (recovery_generate(T.rpath, err, sizeof(err)) < 0 || sealer_recovery_load(T.rpath, &T.rec, err, sizeof(err)) < 0)
		return -1;
	T.answer = answer_for(T.rec.kid, T.a.kid);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	free(T.answer);
	nodekey_forget(&T.a);
	nodekey_forget(&T.b);
	nodekey_forget(&T.c);
	sealer_recovery_forget(&T.rec);
	return test_tmpdir_remove(T.dir);
}

static void fleet(struct sealer_fleet *f)
{
	char err[512] = "";
	if (sealer_fleet_parse(T.answer, strlen(T.answer), f, err, sizeof(err)) < 0)
		fail_msg("answer refused: %s", err);
}

/* ---- the plane's answer ------------------------------------------------------- */

static void test_fleet_parse(void **state)
{
	(void)state;
	struct sealer_fleet f;
	fleet(&f);
	assert_true(f.sealed_secrets);
	assert_true(f.has_recovery);
	assert_string_equal(f.rkid, T.rec.kid);
	assert_memory_equal(f.rpk, T.rec.pk, 32);
	assert_int_equal(f.n, 3);
	assert_string_equal(f.nodes[1].node, "b");
	assert_string_equal(f.nodes[1].kid, T.b.kid);
	assert_memory_equal(f.nodes[1].xpk, T.b.xpk, 32);
	/* who reaches what: a every name, b only secret/web, c only cluster/ */
	assert_true(sealer_reaches(&f.nodes[0], "secret/web"));
	assert_true(sealer_reaches(&f.nodes[0], "secret/db"));
	assert_true(sealer_reaches(&f.nodes[1], "secret/web"));
	assert_true(sealer_reaches(&f.nodes[1], "secret/web2"));   /* a prefix */
	assert_false(sealer_reaches(&f.nodes[1], "secret/db"));
	assert_false(sealer_reaches(&f.nodes[2], "secret/web"));
	/* the secrets */
	assert_int_equal(f.nsecrets, 2);
	const struct sealer_secret *s = sealer_fleet_secret(&f, "secret/web");
	assert_non_null(s);
	assert_true(s->sealed);
	assert_int_equal(s->version, 7);
	assert_int_equal(s->nmissing, 1);
	assert_string_equal(s->missing[0], "b");
	s = sealer_fleet_secret(&f, "secret/old");
	assert_false(s->sealed);
	assert_null(sealer_fleet_secret(&f, "secret/none"));
	sealer_fleet_release(&f);

	/* a plane without sealed secrets: no recovery key */
	static const char plain[] = "{\"sealed_secrets\":false,\"recovery\":null,\"nodes\":[],\"secrets\":[]}";
	char err[512];
	assert_int_equal(sealer_fleet_parse(plain, strlen(plain), &f, err, sizeof(err)), 0);
	assert_false(f.sealed_secrets);
	assert_false(f.has_recovery);
	sealer_fleet_release(&f);
}

static void test_fleet_refusals(void **state)
{
	(void)state;
	struct sealer_fleet f;
	char err[512];
	/* a key whose id is not the one given (a plane that mixed them up) */
	char *t = answer_for(T.rec.kid, T.b.kid);
	assert_int_equal(sealer_fleet_parse(t, strlen(t), &f, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "nodes: node a: the key's id is"));
	free(t);
	t = answer_for("0123456789abcdef", T.a.kid);
	assert_int_equal(sealer_fleet_parse(t, strlen(t), &f, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "recovery: the key's id is"));
	free(t);
	static const char *const bad[] = {
		"{\"nodes\":[{\"node\":\"x\",\"key_id\":\"0123456789abcdef\",\"key\":\"AAAA\"}],\"secrets\":[]}",
		"{\"nodes\":[{\"node\":\"a b\",\"key_id\":\"0123456789abcdef\",\"key\":\"AAAA\"}],\"secrets\":[]}",
		"{\"nodes\":[],\"secrets\":[{\"name\":\"secret/x\"}]}",
		"{\"nodes\":[]}",
		"{\"recovery\":{\"key_id\":\"x\"},\"nodes\":[],\"secrets\":[]}",
		"[]",
		"",
		NULL,
	};
	for (int i = 0; bad[i]; i++) {
		err[0] = '\0';
		if (sealer_fleet_parse(bad[i], strlen(bad[i]), &f, err, sizeof(err)) == 0)
			fail_msg("accepted: %s", bad[i]);
		assert_true(err[0] != '\0');
		assert_int_equal(f.n, 0);
	}
}

/* ---- the recovery key ------------------------------------------------------------ */

static void test_recovery(void **state)
{
	(void)state;
	struct sealer_recovery r;
	char err[512];
	assert_int_equal(sealer_recovery_load(T.rpub, &r, err, sizeof(err)), 0);
	assert_false(r.has_secret);
	assert_string_equal(r.kid, T.rec.kid);
	assert_true(T.rec.has_secret);
	struct sealer_recovery none;
	assert_int_equal(sealer_recovery_load("/nonexistent/recovery", &none, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "--recovery-key: "));

	struct sealer_fleet f;
	fleet(&f);
	unsigned char pk[32];
	char kid[KEY_ID_LEN + 1];
	/* the plane's, the same given, or the given one when the plane has none */
	assert_int_equal(sealer_recovery_choose(&f, NULL, pk, kid, err, sizeof(err)), 0);
	assert_string_equal(kid, T.rec.kid);
	assert_int_equal(sealer_recovery_choose(&f, &r, pk, kid, err, sizeof(err)), 0);
	struct sealer_recovery other = r;
	memcpy(other.kid, "0123456789abcdef", KEY_ID_LEN + 1);
	assert_int_equal(sealer_recovery_choose(&f, &other, pk, kid, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "the plane's recovery key is"));
	f.has_recovery = false;
	assert_int_equal(sealer_recovery_choose(&f, NULL, pk, kid, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "--recovery-key FILE"));
	assert_int_equal(sealer_recovery_choose(&f, &other, pk, kid, err, sizeof(err)), 0);
	assert_string_equal(kid, "0123456789abcdef");
	sealer_fleet_release(&f);
}

/* ---- sealing ------------------------------------------------------------------------ */

/* Opens stored's wrap for k (must be there) and returns the plaintext. */
static char *open_as(const cJSON *stored, const char *name, const struct node_key *k)
{
	struct envelope e;
	char err[256];
	unsigned char dk[ENVELOPE_DK_BYTES];
	assert_int_equal(envelope_decode(cJSON_GetObjectItemCaseSensitive(stored, "sealed"), &e, err, sizeof(err)), 0);
	const char *w = json_get_string(cJSON_GetObjectItemCaseSensitive(stored, "wraps"), k->kid);
	assert_non_null(w);
	if (envelope_unwrap(&e, w, strlen(w), k->xpk, k->xsk, dk, err, sizeof(err)) < 0)
		fail_msg("unwrap: %s", err);
	char *plain = envelope_open(&e, name, dk, NULL, err, sizeof(err));
	assert_non_null(plain);
	envelope_release(&e);
	return plain;
}

static void test_stored_body(void **state)
{
	(void)state;
	struct sealer_fleet f;
	fleet(&f);
	char err[512];
	size_t nw = 99;
	char *text = sealer_stored_body("secret/web", BODY, strlen(BODY), &f, f.rpk, f.rkid, &nw, NULL, err, sizeof(err));
	if (!text)
		fail_msg("seal: %s", err);
	assert_int_equal(nw, 2);   /* a and b; c's subscription does not reach it */
	assert_null(strstr(text, "BEGIN"));
	cJSON *doc = cJSON_Parse(text);
	assert_int_equal(envelope_check_stored(doc, err, sizeof(err)), 0);
	const cJSON *wraps = cJSON_GetObjectItemCaseSensitive(doc, "wraps");
	assert_int_equal(cJSON_GetArraySize(wraps), 2);
	assert_null(cJSON_GetObjectItemCaseSensitive(wraps, T.c.kid));
	/* canonical: what the plane stores is what was sent */
	char *again = canon_of(doc);
	assert_string_equal(again, text);
	free(again);
	char *p = open_as(doc, "secret/web", &T.a);
	assert_string_equal(p, BODY);
	envelope_wipe(p);
	p = open_as(doc, "secret/web", &T.b);
	assert_string_equal(p, BODY);
	envelope_wipe(p);
	/* the recovery key opens it too */
	size_t len;
	p = sealer_open(doc, "secret/web", &T.rec, &len, err, sizeof(err));
	assert_non_null(p);
	assert_int_equal(len, strlen(BODY));
	envelope_wipe(p);
	/* a name nobody but a reaches */
	free(text);
	text = sealer_stored_body("secret/db", BODY, strlen(BODY), &f, f.rpk, f.rkid, &nw, NULL, err, sizeof(err));
	assert_int_equal(nw, 1);
	/* a name that is not a secret's */
	assert_null(sealer_stored_body("web", BODY, strlen(BODY), &f, f.rpk, f.rkid, &nw, NULL, err, sizeof(err)));
	assert_non_null(strstr(err, "secret/NAME"));
	free(text);
	cJSON_Delete(doc);
	sealer_fleet_release(&f);
}

/* ---- reseal's merge --------------------------------------------------------------- */

static void test_add_wraps(void **state)
{
	(void)state;
	struct sealer_fleet f;
	fleet(&f);
	char err[512];
	/* sealed when only a had a key: then b registered */
	struct sealer_fleet only_a = f;
	only_a.n = 1;
	char *text = sealer_stored_body("secret/web", BODY, strlen(BODY), &only_a, f.rpk, f.rkid, NULL, NULL, err, sizeof(err));
	assert_non_null(text);
	cJSON *doc = cJSON_Parse(text);
	cJSON_AddItemToObject(doc, "superseded", cJSON_CreateStringArray((const char *[]){ "0123456789abcdef0123456789abcdef" }, 1));
	char *sealed_before = canon_of(cJSON_GetObjectItemCaseSensitive(doc, "sealed"));
	char *wrap_a = strdup(json_get_string(cJSON_GetObjectItemCaseSensitive(doc, "wraps"), T.a.kid));

	cJSON *added = cJSON_CreateArray();
	int n = sealer_add_wraps(doc, "secret/web", &f, &T.rec, added, err, sizeof(err));
	if (n < 0)
		fail_msg("reseal: %s", err);
	assert_int_equal(n, 1);
	assert_int_equal(cJSON_GetArraySize(added), 1);
	assert_string_equal(json_get_string(cJSON_GetArrayItem(added, 0), "node"), "b");
	assert_string_equal(json_get_string(cJSON_GetArrayItem(added, 0), "key_id"), T.b.kid);
	struct buf shown = BUF_INIT;
	assert_int_equal(sealer_added_text(added, &shown), 0);   /* none via a relay */
	char want[128];
	snprintf(want, sizeof(want), "b (key %s)", T.b.kid);
	assert_string_equal(shown.data, want);
	buf_release(&shown);
	/* the envelope is the same (never re-encrypted), a's wrap kept as it was */
	char *sealed_after = canon_of(cJSON_GetObjectItemCaseSensitive(doc, "sealed"));
	assert_string_equal(sealed_before, sealed_after);
	assert_string_equal(json_get_string(cJSON_GetObjectItemCaseSensitive(doc, "wraps"), T.a.kid), wrap_a);
	assert_null(cJSON_GetObjectItemCaseSensitive(doc, "superseded"));
	assert_int_equal(envelope_check_stored(doc, err, sizeof(err)), 0);
	char *p = open_as(doc, "secret/web", &T.b);
	assert_string_equal(p, BODY);
	envelope_wipe(p);
	/* again: nothing left to add */
	assert_int_equal(sealer_add_wraps(doc, "secret/web", &f, &T.rec, NULL, err, sizeof(err)), 0);

	/* refusals: a public recovery key, another recovery key, no envelope */
	struct sealer_recovery pub;
	assert_int_equal(sealer_recovery_load(T.rpub, &pub, err, sizeof(err)), 0);
	assert_int_equal(sealer_add_wraps(doc, "secret/web", &f, &pub, NULL, err, sizeof(err)), -1);
	assert_string_equal(err, "secret/web: --recovery-key is a public key: opening needs the secret half");
	struct sealer_recovery other = T.rec;
	crypto_box_keypair(other.pk, other.sk);
	keys_id(other.pk, other.kid);
	assert_int_equal(sealer_add_wraps(doc, "secret/web", &f, &other, NULL, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "secret/web: sealed to recovery key"));
	/* a key with the right id but the wrong secret half does not open it */
	memcpy(other.kid, T.rec.kid, sizeof(other.kid));
	assert_int_equal(sealer_add_wraps(doc, "secret/web", &f, &other, NULL, err, sizeof(err)), -1);
	assert_string_equal(err, "secret/web: the recovery wrap does not open with this key");
	assert_null(sealer_open(doc, "secret/web", &other, NULL, err, sizeof(err)));
	sealer_recovery_forget(&other);
	cJSON *plain = cJSON_Parse(BODY);
	assert_int_equal(sealer_add_wraps(plain, "secret/web", &f, &T.rec, NULL, err, sizeof(err)), -1);
	assert_string_equal(err, "secret/web: sealed: must be an object");
	/* the envelope under another name does not open */
	assert_null(sealer_open(doc, "secret/db", &T.rec, NULL, err, sizeof(err)));
	assert_non_null(strstr(err, "does not decrypt"));
	sealer_json_wipe(plain);
	assert_string_equal(json_get_string(plain, "cert"), "");
	cJSON_Delete(plain);
	cJSON_Delete(added);
	free(wrap_a);
	free(sealed_before);
	free(sealed_after);
	free(text);
	cJSON_Delete(doc);
	sealer_fleet_release(&f);
}


/* ---- what the plane says, checked; unknown subscriptions ------------------------- */

/* An answer with one node (key of a) whose "sub" and "key_via" members are
 * given raw, and one secret entry given raw. */
static char *answer_raw(const char *sub, const char *via, const char *secret)
{
	char *ka = b64(T.a.pk, 32), *kb = b64(T.b.pk, 32), *rk = b64(T.rec.pk, 32);
	struct buf b = BUF_INIT;
	buf_printf(&b, "{\"sealed_secrets\":true,\"recovery\":{\"key_id\":\"%s\",\"key\":\"%s\"},\"nodes\":["
		       "{\"node\":\"a\",\"key_id\":\"%s\",\"key\":\"%s\",\"sub\":%s,\"key_via\":%s},"
		       "{\"node\":\"b\",\"key_id\":\"%s\",\"key\":\"%s\",\"sub\":\"cluster/\",\"key_via\":\"\"}],"
		       "\"secrets\":[%s]}",
		   T.rec.kid, rk, T.a.kid, ka, sub, via, T.b.kid, kb, secret);
	free(ka);
	free(kb);
	free(rk);
	return buf_detach(&b, NULL);
}

static void test_unknown_sub_reaches_all(void **state)
{
	(void)state;
	const char *subs[] = { "null", "\"%%not a sub((\"", "17" };
	for (size_t i = 0; i < 3; i++) {
		char *text = answer_raw(subs[i], "\"\"", ""), err[512] = "";
		struct sealer_fleet f;
		if (sealer_fleet_parse(text, strlen(text), &f, err, sizeof(err)) < 0)
			fail_msg("%s refused: %s", subs[i], err);
		/* as the plane counts it: every name is reached, so sealed to */
		assert_true(sealer_reaches(&f.nodes[0], "secret/web"));
		assert_true(sealer_reaches(&f.nodes[0], "secret/zzz"));
		assert_false(sealer_reaches(&f.nodes[1], "secret/web"));
		size_t nw = 0;
		char *stored = sealer_stored_body("secret/zzz", BODY, strlen(BODY), &f, f.rpk, f.rkid, &nw, NULL, err,
						  sizeof(err));
		assert_non_null(stored);
		assert_int_equal(nw, 1);
		cJSON *doc = cJSON_Parse(stored);
		assert_non_null(json_get_string(cJSON_GetObjectItemCaseSensitive(doc, "wraps"), T.a.kid));
		cJSON_Delete(doc);
		free(stored);
		sealer_fleet_release(&f);
		free(text);
	}
}

static void test_via_and_names(void **state)
{
	(void)state;
	char err[512], *text = answer_raw("null", "\"r1,r2\"", "");
	struct sealer_fleet f;
	assert_int_equal(sealer_fleet_parse(text, strlen(text), &f, err, sizeof(err)), 0);
	assert_string_equal(f.nodes[0].via, "r1,r2");
	assert_string_equal(f.nodes[1].via, "");
	cJSON *added = cJSON_CreateArray();
	char *stored = sealer_stored_body("secret/web", BODY, strlen(BODY), &f, f.rpk, f.rkid, NULL, added, err,
					  sizeof(err));
	assert_non_null(stored);
	struct buf shown = BUF_INIT;
	assert_int_equal(sealer_added_text(added, &shown), 1);
	char want[128];
	snprintf(want, sizeof(want), "a (key %s, via r1,r2)", T.a.kid);
	assert_string_equal(shown.data, want);
	buf_release(&shown);
	cJSON_Delete(added);
	free(stored);
	sealer_fleet_release(&f);
	free(text);
	/* the plane's text reaches a terminal: refused when it is not IDs and names */
	struct {
		const char *via, *secret, *err;
	} bad[] = {
		{ "\"r1,\\u001b[2J\"", "", "nodes: node a: key_via is not a list of relay IDs" },
		{ "\"\"", "{\"name\":\"cluster/web\",\"version\":1,\"sealed\":true,\"missing\":[]}",
		  "secrets: an entry whose name is not a secret's" },
		{ "\"\"", "{\"name\":\"secret/\\u001b[2J\",\"version\":1,\"sealed\":true,\"missing\":[]}",
		  "secrets: an entry whose name is not a secret's" },
		{ "\"\"", "{\"name\":\"secret/web\",\"version\":1,\"sealed\":true,\"missing\":[\"a b\"]}",
		  "secrets: secret/web: missing: an entry that is not a node ID" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		text = answer_raw("null", bad[i].via, bad[i].secret);
		assert_int_equal(sealer_fleet_parse(text, strlen(text), &f, err, sizeof(err)), -1);
		assert_string_equal(err, bad[i].err);
		free(text);
	}
}

static void test_unwrapped(void **state)
{
	(void)state;
	struct sealer_fleet f, only_a;
	fleet(&f);
	only_a = f;
	only_a.n = 1;
	char err[512];
	char *text = sealer_stored_body("secret/web", BODY, strlen(BODY), &only_a, f.rpk, f.rkid, NULL, NULL, err,
					sizeof(err));
	cJSON *doc = cJSON_Parse(text);
	struct buf who = BUF_INIT;
	assert_int_equal(sealer_unwrapped(doc, "secret/web", &f, &who), 1);   /* b; c is not reached */
	assert_string_equal(who.data, "b");
	assert_int_equal(sealer_unwrapped(doc, "secret/web", &only_a, NULL), 0);
	/* a push form (no wraps) lacks every reached node */
	cJSON_DeleteItemFromObjectCaseSensitive(doc, "wraps");
	assert_int_equal(sealer_unwrapped(doc, "secret/web", &f, NULL), 2);
	buf_release(&who);
	cJSON_Delete(doc);
	free(text);
	sealer_fleet_release(&f);
}

static void test_no_dumps(void **state)
{
	(void)state;
	sealer_no_dumps();
	assert_int_equal(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0), 0);
	struct rlimit rl;
	assert_int_equal(getrlimit(RLIMIT_CORE, &rl), 0);
	assert_int_equal(rl.rlim_cur, 0);
}

/* ---- sync's rules (sync_seal_rules) ------------------------------------------------- */

static void tree_one(struct tree *t, const char *name, const char *body)
{
	t->n = t->cap = 1;
	t->e = xcalloc(1, sizeof(*t->e));
	t->e[0].name = xstrdup(name);
	t->e[0].path = xasprintf("DIR/%s.json", name);
	t->e[0].body = xstrdup(body);
}

/* One sync rule: the file body, the plane's (NULL: none), the recovery key
 * (NULL: none). Returns sync_seal_rules's answer; *out the entry's body. */
static int rule(const struct sealer_fleet *f, const struct sealer_recovery *r, const char *file, const char *plane,
		char **out)
{
	struct tree t;
	char *names[] = { (char *)"secret/web" }, *bodies[] = { (char *)plane };
	tree_one(&t, "secret/web", file);
	int rc = sync_seal_rules(f, r, &t, plane ? 1 : 0, names, bodies);
	*out = xstrdup(t.e[0].body);
	tree_release(&t);
	return rc;
}

static void test_sync_rules(void **state)
{
	(void)state;
	struct sealer_fleet f, only_a, none;
	fleet(&f);
	only_a = f;
	only_a.n = 1;
	memset(&none, 0, sizeof(none));
	struct sealer_recovery pub;
	char err[512], *out, *plain = NULL;
	assert_int_equal(sealer_recovery_load(T.rpub, &pub, err, sizeof(err)), 0);
	/* a sealed file wrapped for a only; b (secret/web) has a key too */
	char *partial = sealer_stored_body("secret/web", BODY, strlen(BODY), &only_a, f.rpk, f.rkid, NULL, NULL, err,
					   sizeof(err));
	char *full = sealer_stored_body("secret/web", BODY, strlen(BODY), &f, f.rpk, f.rkid, NULL, NULL, err,
					sizeof(err));
	size_t plen;
	char *push = NULL;
	assert_int_equal(envelope_push_body_checked(partial, strlen(partial), &push, &plen, err, sizeof(err)), 1);

	/* without the recovery key's secret half: refused, naming b */
	assert_int_equal(rule(&f, NULL, partial, NULL, &out), 1);
	assert_string_equal(out, partial);
	free(out);
	assert_int_equal(rule(&f, &pub, push, NULL, &out), 1);
	free(out);
	/* with it: b's wrap added, a's kept, the envelope the same */
	assert_int_equal(rule(&f, &T.rec, push, NULL, &out), 0);
	cJSON *doc = cJSON_Parse(out);
	assert_int_equal(sealer_unwrapped(doc, "secret/web", &f, NULL), 0);
	plain = open_as(doc, "secret/web", &T.b);
	assert_string_equal(plain, BODY);
	envelope_wipe(plain);
	cJSON_Delete(doc);
	free(out);
	/* a file with every wrap it needs (put --seal --output): no key needed, sent as it is */
	assert_int_equal(rule(&f, NULL, full, NULL, &out), 0);
	assert_string_equal(out, full);
	free(out);
	/* the plane's envelope in the file (an export): the plane's text, unchanged */
	assert_int_equal(rule(&f, NULL, push, partial, &out), 0);
	assert_string_equal(out, partial);
	free(out);

	/* a plaintext file against a sealed copy: needs the secret half */
	char *canon = NULL;
	{
		cJSON *b = cJSON_Parse(BODY);
		canon = json_encode_canonical(b);
		cJSON_Delete(b);
	}
	assert_int_equal(rule(&f, NULL, canon, partial, &out), 1);
	free(out);
	assert_int_equal(rule(&f, &T.rec, canon, partial, &out), 0);   /* the same plaintext */
	assert_string_equal(out, partial);
	free(out);
	const char *other = "{\"cert\":\"-----BEGIN CERTIFICATE-----\\nD\\n\",\"key\":\"-----BEGIN PRIVATE KEY-----\\nL\\n\"}";
	assert_int_equal(rule(&f, &T.rec, other, partial, &out), 0);    /* another: sealed anew */
	doc = cJSON_Parse(out);
	assert_true(envelope_is_sealed(doc));
	assert_int_equal(sealer_unwrapped(doc, "secret/web", &f, NULL), 0);
	assert_null(strstr(out, "BEGIN"));
	cJSON_Delete(doc);
	free(out);
	/* a new plaintext file: sealed when the plane requires it, else sent as it is */
	assert_int_equal(rule(&f, NULL, canon, NULL, &out), 0);
	assert_null(strstr(out, "BEGIN"));
	free(out);
	assert_int_equal(rule(&none, NULL, canon, NULL, &out), 0);
	assert_string_equal(out, canon);
	free(out);
	/* equal to a plaintext copy on the plane: unchanged */
	assert_int_equal(rule(&f, NULL, canon, canon, &out), 0);
	assert_string_equal(out, canon);
	free(out);

	free(canon);
	free(push);
	free(partial);
	free(full);
	sealer_recovery_forget(&pub);
	sealer_fleet_release(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fleet_parse),
		cmocka_unit_test(test_fleet_refusals),
		cmocka_unit_test(test_recovery),
		cmocka_unit_test(test_stored_body),
		cmocka_unit_test(test_add_wraps),
		cmocka_unit_test(test_unknown_sub_reaches_all),
		cmocka_unit_test(test_via_and_names),
		cmocka_unit_test(test_unwrapped),
		cmocka_unit_test(test_no_dumps),
		cmocka_unit_test(test_sync_rules),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
