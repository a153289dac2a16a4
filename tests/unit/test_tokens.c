/* test_tokens.c: unit tests of plane/core/tokens.c over a database in a
 * temporary directory: tokens for a node and for each role, lookups (and
 * near misses), revocation, the listing (which never shows a secret or a
 * hash), what the database keeps, and reopening it; console sessions (a
 * reader's token that expires): their end kept, refused past it, told once
 * to the keeper and dropped a day later, here and in the database; a
 * database of before the column; their records as JSON (etcd, relays). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <cjson/cJSON.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "persist/records_json.h"
#include "persist/sqlite/sqlite.h"
#include "log.h"
#include "tmpdir.h"
#include "core/tokens.h"
#include "util.h"

#define TOKEN_LEN 60
#define B64URL_ALPHABET "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

struct fixture {
	char dir[64];
	struct persist *db;
	struct tokens *t;
};

static int open_all(struct fixture *f)
{
	char err[256];
	f->db = persist_sqlite_open(f->dir, err, sizeof(err));
	if (!f->db) {
		fprintf(stderr, "db_open: %s\n", err);
		return -1;
	}
	f->t = tokens_open(f->db, err, sizeof(err));
	if (!f->t) {
		fprintf(stderr, "tokens_open: %s\n", err);
		return -1;
	}
	return 0;
}

static void close_all(struct fixture *f)
{
	tokens_free(f->t);
	persist_close(f->db);
	f->t = NULL;
	f->db = NULL;
}

static void reopen(struct fixture *f)
{
	close_all(f);
	assert_int_equal(open_all(f), 0);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	if (test_tmpdir_make(f->dir, sizeof(f->dir), "tokens") < 0) {
		free(f);
		return -1;
	}
	*state = f;
	return open_all(f);
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	close_all(f);
	int rc = test_tmpdir_remove(f->dir);
	free(f);
	return rc;
}

/* ---- helpers ------------------------------------------------------------------ */

static char *create(struct fixture *f, enum role role, const char *node, const char *name, struct token_info *info)
{
	char *tok = NULL;
	char err[256] = "";
	if (tokens_create(f->t, role, node, name, &tok, info, err, sizeof(err)) < 0)
		fail_msg("tokens_create: %s", err);
	assert_non_null(tok);
	return tok;
}

static void assert_info_equal(const struct token_info *a, const struct token_info *b)
{
	assert_string_equal(a->id, b->id);
	assert_int_equal(a->role, b->role);
	assert_string_equal(a->node, b->node);
	assert_string_equal(a->name, b->name);
	assert_int_equal(a->revoked, b->revoked);
}

static int lookup(struct fixture *f, const char *tok, struct token_info *info)
{
	memset(info, 0x5a, sizeof(*info));
	return tokens_lookup(f->t, tok, info);
}

static void hash_hex(const char *tok, char out[65])
{
	unsigned char h[32];
	crypto_generichash(h, sizeof(h), (const unsigned char *)tok, strlen(tok), NULL, 0);
	sodium_bin2hex(out, 65, h, sizeof(h));
}

static char *list_json(struct fixture *f)
{
	struct buf b = BUF_INIT;
	tokens_to_json(f->t, &b);
	buf_puts(&b, "");
	return buf_detach(&b, NULL);
}

static int cmp_by_id(const void *a, const void *b)
{
	const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
	return strcmp(cJSON_GetObjectItemCaseSensitive(x, "id")->valuestring,
		      cJSON_GetObjectItemCaseSensitive(y, "id")->valuestring);
}

/* The listing's entries sorted by id, printed: the listing promises no
 * order (in memory it is the order of creation; after a reopen, by the
 * creation second and then the id). */
static char *list_sorted(struct fixture *f)
{
	char *json = list_json(f);
	cJSON *arr = cJSON_Parse(json);
	assert_non_null(arr);
	int n = cJSON_GetArraySize(arr);
	cJSON **v = calloc((size_t)n + 1, sizeof(*v));
	assert_non_null(v);
	for (int i = 0; i < n; i++)
		v[i] = cJSON_GetArrayItem(arr, i);
	qsort(v, (size_t)n, sizeof(*v), cmp_by_id);
	struct buf b = BUF_INIT;
	for (int i = 0; i < n; i++) {
		char *one = cJSON_PrintUnformatted(v[i]);
		buf_printf(&b, "%s\n", one);
		free(one);
	}
	buf_puts(&b, "");
	free(v);
	cJSON_Delete(arr);
	free(json);
	return buf_detach(&b, NULL);
}

/* Every text column of the tokens table, concatenated. */
static char *dump_table(struct fixture *f)
{
	struct buf b = BUF_INIT;
	sqlite3_stmt *st = NULL;
	pthread_mutex_lock(&persist_sqlite_db(f->db)->lock);
	static const char sql[] = "SELECT id, hash, role, node, name, created, revoked FROM tokens";
	assert_int_equal(sqlite3_prepare_v2(persist_sqlite_db(f->db)->conn, sql, -1, &st, NULL), SQLITE_OK);
	while (sqlite3_step(st) == SQLITE_ROW) {
		for (int i = 0; i < 7; i++) {
			const unsigned char *v = sqlite3_column_text(st, i);
			buf_printf(&b, "%s|", v ? (const char *)v : "NULL");
		}
		buf_putc(&b, '\n');
	}
	sqlite3_finalize(st);
	pthread_mutex_unlock(&persist_sqlite_db(f->db)->lock);
	buf_puts(&b, "");
	return buf_detach(&b, NULL);
}

/* ---- tests --------------------------------------------------------------------- */

static void test_roles(void **state)
{
	(void)state;
	assert_string_equal(role_name(ROLE_NODE), "node");
	assert_string_equal(role_name(ROLE_READER), "reader");
	assert_string_equal(role_name(ROLE_OPERATOR), "operator");
	assert_string_equal(role_name(ROLE_ADMIN), "admin");
	assert_string_equal(role_name(ROLE_NONE), "none");
	assert_int_equal(role_parse("admin"), ROLE_ADMIN);
	assert_int_equal(role_parse("operator"), ROLE_OPERATOR);
	assert_int_equal(role_parse("reader"), ROLE_READER);
	/* a node token is made for a node, never asked for by role name */
	assert_int_equal(role_parse("node"), ROLE_NONE);
	assert_int_equal(role_parse("Admin"), ROLE_NONE);
	assert_int_equal(role_parse(""), ROLE_NONE);
	assert_int_equal(role_parse(NULL), ROLE_NONE);
}

static void test_create_and_lookup(void **state)
{
	struct fixture *f = *state;
	static const enum role roles[] = { ROLE_NODE, ROLE_READER, ROLE_OPERATOR, ROLE_ADMIN };
	static const char *const names[] = { "web-1 agent", "dashboards", "on-call", "alice \"root\" <a@b>" };
	char *toks[4];
	struct token_info infos[4];
	int64_t before = wall_seconds();
	for (int i = 0; i < 4; i++) {
		toks[i] = create(f, roles[i], "web-1", names[i], &infos[i]);
		/* "tt1_" + 12 hex id + "_" + 43 base64url */
		assert_int_equal(strlen(toks[i]), TOKEN_LEN);
		assert_true(strncmp(toks[i], "tt1_", 4) == 0);
		assert_int_equal(strspn(toks[i] + 4, "0123456789abcdef"), TOKEN_ID_LEN);
		assert_int_equal(toks[i][4 + TOKEN_ID_LEN], '_');
		const char *sec = toks[i] + 5 + TOKEN_ID_LEN;
		assert_int_equal(strlen(sec), 43);
		assert_int_equal(strspn(sec, B64URL_ALPHABET), 43);
		/* the id in the token is the public id */
		assert_int_equal(strlen(infos[i].id), TOKEN_ID_LEN);
		assert_true(strncmp(toks[i] + 4, infos[i].id, TOKEN_ID_LEN) == 0);
		assert_int_equal(infos[i].role, roles[i]);
		assert_string_equal(infos[i].name, names[i]);
		assert_false(infos[i].revoked);
		/* only a node token names a node */
		assert_string_equal(infos[i].node, roles[i] == ROLE_NODE ? "web-1" : "");
	}
	/* all different */
	for (int i = 0; i < 4; i++) {
		for (int j = i + 1; j < 4; j++) {
			assert_string_not_equal(toks[i], toks[j]);
			assert_string_not_equal(infos[i].id, infos[j].id);
			assert_memory_not_equal(toks[i] + 17, toks[j] + 17, 43);
		}
	}
	for (int i = 0; i < 4; i++) {
		struct token_info got;
		assert_int_equal(lookup(f, toks[i], &got), 1);
		assert_info_equal(&got, &infos[i]);
	}
	/* a node token with no node, and a name left out */
	struct token_info ni;
	char *t = create(f, ROLE_NODE, NULL, NULL, &ni);
	assert_string_equal(ni.node, "");
	assert_string_equal(ni.name, "");
	struct token_info got;
	assert_int_equal(lookup(f, t, &got), 1);
	assert_int_equal(got.role, ROLE_NODE);
	free(t);

	/* created is now, in the listing */
	char *json = list_json(f);
	cJSON *arr = cJSON_Parse(json);
	assert_non_null(arr);
	assert_int_equal(cJSON_GetArraySize(arr), 5);
	const cJSON *e = cJSON_GetArrayItem(arr, 0);
	double created = cJSON_GetObjectItemCaseSensitive(e, "created")->valuedouble;
	assert_true(created >= (double)before && created <= (double)wall_seconds());
	cJSON_Delete(arr);
	free(json);
	for (int i = 0; i < 4; i++) {
		sodium_memzero(toks[i], strlen(toks[i]));
		free(toks[i]);
	}
}

static void test_near_misses(void **state)
{
	struct fixture *f = *state;
	struct token_info info, got;
	char *tok = create(f, ROLE_ADMIN, NULL, "admin", &info);
	char *other = create(f, ROLE_READER, NULL, "reader", &info);
	char m[TOKEN_LEN + 8];
	static const char alpha[] = B64URL_ALPHABET;

	/* any one character changed */
	for (size_t i = 0; i < TOKEN_LEN; i++) {
		memcpy(m, tok, TOKEN_LEN + 1);
		const char *at = strchr(alpha, m[i]);
		m[i] = at ? alpha[(size_t)(at - alpha + 1) % 64] : 'x';
		if (lookup(f, m, &got) != 0)
			fail_msg("token with character %zu changed is found", i);
	}
	/* shorter, longer, blanks, case */
	memcpy(m, tok, TOKEN_LEN + 1);
	m[TOKEN_LEN - 1] = '\0';
	assert_int_equal(lookup(f, m, &got), 0);
	snprintf(m, sizeof(m), "%sA", tok);
	assert_int_equal(lookup(f, m, &got), 0);
	snprintf(m, sizeof(m), "%s ", tok);
	assert_int_equal(lookup(f, m, &got), 0);
	snprintf(m, sizeof(m), " %s", tok);
	assert_int_equal(lookup(f, m, &got), 0);
	snprintf(m, sizeof(m), "TT1_%s", tok + 4);
	assert_int_equal(lookup(f, m, &got), 0);
	/* the id alone, the secret alone, another token's id with this secret */
	snprintf(m, sizeof(m), "%.*s", 4 + TOKEN_ID_LEN, tok);
	assert_int_equal(lookup(f, m, &got), 0);
	assert_int_equal(lookup(f, tok + 5 + TOKEN_ID_LEN, &got), 0);
	snprintf(m, sizeof(m), "%.*s%s", 5 + TOKEN_ID_LEN, other, tok + 5 + TOKEN_ID_LEN);
	assert_int_equal(lookup(f, m, &got), 0);
	assert_int_equal(lookup(f, "", &got), 0);
	/* the stored hash is not a token */
	char h[65];
	hash_hex(tok, h);
	assert_int_equal(lookup(f, h, &got), 0);
	/* the real ones still work */
	assert_int_equal(lookup(f, tok, &got), 1);
	assert_int_equal(got.role, ROLE_ADMIN);
	assert_int_equal(lookup(f, other, &got), 1);
	assert_int_equal(got.role, ROLE_READER);
	free(tok);
	free(other);
}

static void test_revoke(void **state)
{
	struct fixture *f = *state;
	struct token_info a, b, got;
	char *ta = create(f, ROLE_NODE, "db-7", "db-7", &a);
	char *tb = create(f, ROLE_NODE, "db-8", "db-8", &b);
	char err[256] = "";
	assert_int_equal(tokens_count(f->t, ROLE_NODE), 2);

	assert_int_equal(tokens_revoke(f->t, a.id, err, sizeof(err)), 1);
	/* still found, marked revoked: the caller answers 401 */
	assert_int_equal(lookup(f, ta, &got), 1);
	assert_true(got.revoked);
	assert_string_equal(got.id, a.id);
	assert_string_equal(got.node, "db-7");
	/* the other is untouched */
	assert_int_equal(lookup(f, tb, &got), 1);
	assert_false(got.revoked);
	assert_int_equal(tokens_count(f->t, ROLE_NODE), 1);

	/* twice is not an error */
	assert_int_equal(tokens_revoke(f->t, a.id, err, sizeof(err)), 1);
	assert_int_equal(lookup(f, ta, &got), 1);
	assert_true(got.revoked);
	assert_int_equal(tokens_count(f->t, ROLE_NODE), 1);

	/* unknown ids */
	assert_int_equal(tokens_revoke(f->t, "000000000000", err, sizeof(err)), 0);
	assert_int_equal(tokens_revoke(f->t, "", err, sizeof(err)), 0);
	assert_int_equal(tokens_revoke(f->t, ta, err, sizeof(err)), 0);   /* the token is not its id */
	char upper[TOKEN_ID_LEN + 1];
	for (int i = 0; i <= TOKEN_ID_LEN; i++)
		upper[i] = (char)(b.id[i] >= 'a' && b.id[i] <= 'f' ? b.id[i] - 32 : b.id[i]);
	if (strcmp(upper, b.id) != 0)
		assert_int_equal(tokens_revoke(f->t, upper, err, sizeof(err)), 0);
	assert_int_equal(lookup(f, tb, &got), 1);
	assert_false(got.revoked);

	/* revoked shows in the listing with its time */
	char *json = list_json(f);
	cJSON *arr = cJSON_Parse(json);
	assert_non_null(arr);
	const cJSON *e;
	int seen = 0;
	cJSON_ArrayForEach(e, arr) {
		const char *id = cJSON_GetObjectItemCaseSensitive(e, "id")->valuestring;
		double rv = cJSON_GetObjectItemCaseSensitive(e, "revoked")->valuedouble;
		if (strcmp(id, a.id) == 0) {
			assert_true(rv > 0);
			seen++;
		} else {
			assert_true(rv == 0);
		}
	}
	assert_int_equal(seen, 1);
	cJSON_Delete(arr);
	free(json);
	free(ta);
	free(tb);
}

static void test_count(void **state)
{
	struct fixture *f = *state;
	struct token_info i1, i2;
	assert_int_equal(tokens_count(f->t, ROLE_ADMIN), 0);
	assert_int_equal(tokens_count(f->t, ROLE_NODE), 0);
	char *t1 = create(f, ROLE_ADMIN, NULL, "a1", &i1);
	char *t2 = create(f, ROLE_ADMIN, NULL, "a2", &i2);
	char *t3 = create(f, ROLE_READER, NULL, "r", &i2);
	char *t4 = create(f, ROLE_NODE, "n", "n", &i2);
	assert_int_equal(tokens_count(f->t, ROLE_ADMIN), 2);
	assert_int_equal(tokens_count(f->t, ROLE_READER), 1);
	assert_int_equal(tokens_count(f->t, ROLE_OPERATOR), 0);
	assert_int_equal(tokens_count(f->t, ROLE_NODE), 1);
	assert_int_equal(tokens_count(f->t, ROLE_NONE), 0);
	char err[128];
	assert_int_equal(tokens_revoke(f->t, i1.id, err, sizeof(err)), 1);
	assert_int_equal(tokens_count(f->t, ROLE_ADMIN), 1);
	assert_int_equal(tokens_count(f->t, ROLE_READER), 1);
	free(t1);
	free(t2);
	free(t3);
	free(t4);
}

static void test_listing_has_no_secret(void **state)
{
	struct fixture *f = *state;
	enum { N = 6 };
	char *toks[N];
	struct token_info infos[N];
	for (int i = 0; i < N; i++) {
		char name[32];
		snprintf(name, sizeof(name), "t%d", i);
		toks[i] = i % 3 == 0 ? create(f, ROLE_NODE, "web-2", name, &infos[i])
				     : create(f, i % 3 == 1 ? ROLE_OPERATOR : ROLE_ADMIN, NULL, name, &infos[i]);
	}
	char err[128];
	assert_int_equal(tokens_revoke(f->t, infos[1].id, err, sizeof(err)), 1);
	char *json = list_json(f);
	char *table = dump_table(f);
	for (int i = 0; i < N; i++) {
		char h[65];
		hash_hex(toks[i], h);
		const char *sec = toks[i] + 5 + TOKEN_ID_LEN;
		/* the listing: no token, no secret part (even a slice), no hash */
		assert_null(strstr(json, toks[i]));
		char slice[12];
		snprintf(slice, sizeof(slice), "%.10s", sec);
		assert_null(strstr(json, slice));
		snprintf(slice, sizeof(slice), "%.10s", sec + 30);
		assert_null(strstr(json, slice));
		assert_null(strstr(json, h));
		snprintf(slice, sizeof(slice), "%.10s", h + 20);
		assert_null(strstr(json, slice));
		/* the database: the hash, never the token or its secret */
		assert_non_null(strstr(table, h));
		assert_null(strstr(table, toks[i]));
		snprintf(slice, sizeof(slice), "%.10s", sec);
		assert_null(strstr(table, slice));
	}
	/* what the listing does say, per token */
	cJSON *arr = cJSON_Parse(json);
	assert_non_null(arr);
	assert_true(cJSON_IsArray(arr));
	assert_int_equal(cJSON_GetArraySize(arr), N);
	for (int i = 0; i < N; i++) {
		const cJSON *e = NULL, *x;
		cJSON_ArrayForEach(x, arr)
			if (strcmp(cJSON_GetObjectItemCaseSensitive(x, "id")->valuestring, infos[i].id) == 0)
				e = x;
		assert_non_null(e);
		int fields = 0;
		const cJSON *m;
		cJSON_ArrayForEach(m, e) {
			fields++;
			static const char *const allowed[] = { "id", "role", "node", "name", "created",
								"revoked" };
			bool ok = false;
			for (size_t k = 0; k < 6; k++)
				ok = ok || strcmp(m->string, allowed[k]) == 0;
			if (!ok)
				fail_msg("the listing has a field '%s'", m->string);
		}
		assert_string_equal(cJSON_GetObjectItemCaseSensitive(e, "id")->valuestring, infos[i].id);
		assert_string_equal(cJSON_GetObjectItemCaseSensitive(e, "role")->valuestring,
				    role_name(infos[i].role));
		assert_string_equal(cJSON_GetObjectItemCaseSensitive(e, "name")->valuestring, infos[i].name);
		const cJSON *node = cJSON_GetObjectItemCaseSensitive(e, "node");
		if (infos[i].role == ROLE_NODE) {
			assert_non_null(node);
			assert_string_equal(node->valuestring, "web-2");
			assert_int_equal(fields, 6);
		} else {
			assert_null(node);
			assert_int_equal(fields, 5);
		}
	}
	cJSON_Delete(arr);
	free(json);
	free(table);
	for (int i = 0; i < N; i++)
		free(toks[i]);
}

static void test_reopen(void **state)
{
	struct fixture *f = *state;
	struct token_info a, b, c, got;
	char *ta = create(f, ROLE_NODE, "edge-3", "edge-3 agent", &a);
	char *tb = create(f, ROLE_OPERATOR, NULL, "bob \"ops\"", &b);
	char *tc = create(f, ROLE_ADMIN, NULL, "ci", &c);
	char err[128];
	assert_int_equal(tokens_revoke(f->t, b.id, err, sizeof(err)), 1);
	b.revoked = true;
	char *before = list_sorted(f);

	reopen(f);
	assert_int_equal(lookup(f, ta, &got), 1);
	assert_info_equal(&got, &a);
	assert_int_equal(lookup(f, tb, &got), 1);
	assert_info_equal(&got, &b);
	assert_true(got.revoked);
	assert_int_equal(lookup(f, tc, &got), 1);
	assert_info_equal(&got, &c);
	assert_int_equal(tokens_count(f->t, ROLE_NODE), 1);
	assert_int_equal(tokens_count(f->t, ROLE_OPERATOR), 0);
	assert_int_equal(tokens_count(f->t, ROLE_ADMIN), 1);
	/* the same listing, revocation time included */
	char *after = list_sorted(f);
	assert_string_equal(after, before);
	/* a near miss still misses */
	ta[TOKEN_LEN - 1] = ta[TOKEN_LEN - 1] == 'A' ? 'B' : 'A';
	assert_int_equal(lookup(f, ta, &got), 0);

	/* revoking after the reopen is durable too, and twice is fine */
	assert_int_equal(tokens_revoke(f->t, c.id, err, sizeof(err)), 1);
	reopen(f);
	assert_int_equal(tokens_revoke(f->t, b.id, err, sizeof(err)), 1);
	assert_int_equal(lookup(f, tc, &got), 1);
	assert_true(got.revoked);
	assert_int_equal(tokens_count(f->t, ROLE_ADMIN), 0);
	/* new tokens after a reopen go alongside */
	struct token_info d;
	char *td = create(f, ROLE_READER, NULL, "late", &d);
	reopen(f);
	assert_int_equal(lookup(f, td, &got), 1);
	assert_info_equal(&got, &d);
	char *json = list_json(f);
	cJSON *arr = cJSON_Parse(json);
	assert_int_equal(cJSON_GetArraySize(arr), 4);
	cJSON_Delete(arr);
	free(json);
	free(before);
	free(after);
	free(ta);
	free(tb);
	free(tc);
	free(td);
}

static void test_unknown_role_in_db_admits_nothing(void **state)
{
	struct fixture *f = *state;
	struct token_info a, got;
	char *ta = create(f, ROLE_READER, NULL, "r", &a);
	/* a newer plane wrote a role this one does not know */
	char err[256];
	pthread_mutex_lock(&persist_sqlite_db(f->db)->lock);
	assert_int_equal(db_exec(persist_sqlite_db(f->db), "UPDATE tokens SET role='superuser'", err, sizeof(err)), 0);
	pthread_mutex_unlock(&persist_sqlite_db(f->db)->lock);
	log_set_level(LOG_LVL_ERROR);
	reopen(f);
	log_set_level(LOG_LVL_WARN);
	assert_int_equal(lookup(f, ta, &got), 1);
	assert_int_equal(got.role, ROLE_NONE);
	assert_true(got.revoked);
	assert_int_equal(tokens_count(f->t, ROLE_READER), 0);
	free(ta);
}

static char *create_session(struct fixture *f, int64_t expires, struct token_info *info)
{
	char *tok = NULL;
	char err[256] = "";
	if (tokens_create_session(f->t, expires, "ui session by test", &tok, info, err, sizeof(err)) < 0)
		fail_msg("tokens_create_session: %s", err);
	assert_non_null(tok);
	return tok;
}

static void test_session(void **state)
{
	struct fixture *f = *state;
	struct token_info s, got;
	int64_t now = wall_seconds();
	char *ts = create_session(f, now + 100, &s);
	assert_int_equal(strlen(ts), TOKEN_LEN);
	assert_true(s.session);
	assert_int_equal(s.role, ROLE_READER);
	assert_true(s.expires == now + 100);
	assert_int_equal(lookup(f, ts, &got), 1);
	assert_true(got.session && got.role == ROLE_READER && got.expires == now + 100 && !got.revoked);
	assert_false(tokens_expired(&got, now + 99));
	assert_true(tokens_expired(&got, now + 100));
	/* tokens that are not sessions never expire */
	struct token_info r;
	char *tr = create(f, ROLE_READER, NULL, "r", &r);
	assert_false(r.session);
	assert_int_equal((int)r.expires, 0);
	assert_false(tokens_expired(&r, INT64_MAX));
	/* a session needs an end */
	char *none = NULL, err[128];
	assert_int_equal(tokens_create_session(f->t, 0, "x", &none, &got, err, sizeof(err)), -1);
	assert_null(none);
	/* listed as a reader's session with its end */
	char *json = list_json(f);
	char want[128];
	snprintf(want, sizeof(want), "{\"id\":\"%s\",\"role\":\"reader\",\"session\":true,\"expires\":%lld,", s.id,
		 (long long)(now + 100));
	assert_non_null(strstr(json, want));
	assert_null(strstr(json, ts + 17));
	free(json);
	/* the database keeps its end, its role "ui-session" (an older plane
	 * admits nothing with it) */
	char *table = dump_table(f);
	snprintf(want, sizeof(want), "%s|", s.id);
	assert_non_null(strstr(table, want));
	assert_non_null(strstr(table, "|ui-session|"));
	free(table);
	reopen(f);
	assert_int_equal(lookup(f, ts, &got), 1);
	assert_true(got.session && got.role == ROLE_READER && got.expires == now + 100);
	assert_int_equal(lookup(f, tr, &got), 1);
	assert_false(got.session);
	assert_int_equal((int)got.expires, 0);
	free(ts);
	free(tr);
}

static size_t expire(struct fixture *f, int64_t now, char *first)
{
	char (*ids)[TOKEN_ID_LEN + 1] = NULL, err[256] = "";
	size_t n = 99;
	if (tokens_expire(f->t, now, &ids, &n, err, sizeof(err)) < 0)
		fail_msg("tokens_expire: %s", err);
	if (first)
		snprintf(first, TOKEN_ID_LEN + 1, "%s", n ? ids[0] : "");
	free(ids);
	return n;
}

static void test_expire(void **state)
{
	struct fixture *f = *state;
	struct token_info a, s1, s2, b, got;
	int64_t now = wall_seconds();
	char *ta = create(f, ROLE_ADMIN, NULL, "a", &a);
	char *t1 = create_session(f, now + 10, &s1);
	char *t2 = create_session(f, now + 20, &s2);
	char *tb = create(f, ROLE_NODE, "n1", "b", &b);
	char id[TOKEN_ID_LEN + 1];
	assert_int_equal(expire(f, now, id), 0);
	/* the first to end is told once, and stays (refused as expired) */
	assert_int_equal(expire(f, now + 10, id), 1);
	assert_string_equal(id, s1.id);
	assert_int_equal(expire(f, now + 11, NULL), 0);
	assert_int_equal(lookup(f, t1, &got), 1);
	assert_true(tokens_expired(&got, now + 11));
	assert_int_equal(expire(f, now + 20, id), 1);
	assert_string_equal(id, s2.id);
	/* a day after its end, a record is dropped, here and in the database */
	assert_int_equal(expire(f, now + 10 + TOKENS_KEEP_EXPIRED - 1, NULL), 0);
	assert_int_equal(lookup(f, t1, &got), 1);
	assert_int_equal(expire(f, now + 10 + TOKENS_KEEP_EXPIRED, NULL), 0);
	assert_int_equal(lookup(f, t1, &got), 0);
	assert_int_equal(lookup(f, t2, &got), 1);
	/* the others are found still (the records moved in memory) */
	assert_int_equal(lookup(f, ta, &got), 1);
	assert_info_equal(&got, &a);
	assert_int_equal(lookup(f, tb, &got), 1);
	assert_info_equal(&got, &b);
	assert_int_equal(expire(f, now + 20 + TOKENS_KEEP_EXPIRED, NULL), 0);
	assert_int_equal(lookup(f, t2, &got), 0);
	char *table = dump_table(f);
	assert_null(strstr(table, s1.id));
	assert_null(strstr(table, s2.id));
	assert_non_null(strstr(table, a.id));
	assert_non_null(strstr(table, b.id));
	free(table);
	reopen(f);
	assert_int_equal(lookup(f, t1, &got), 0);
	assert_int_equal(lookup(f, t2, &got), 0);
	assert_int_equal(lookup(f, ta, &got), 1);
	assert_int_equal(lookup(f, tb, &got), 1);
	/* a session that expired long ago, loaded at start: told, then dropped */
	char *t3 = create_session(f, now + 5, &s1);
	reopen(f);
	assert_int_equal(expire(f, now + 5 + TOKENS_KEEP_EXPIRED, id), 1);
	assert_string_equal(id, s1.id);
	assert_int_equal(lookup(f, t3, &got), 0);
	/* another replica's (or an upstream's) record as long expired is not taken in */
	struct persist_token pt = { .id = "0123456789ab", .hash = "00", .role = TOKENS_SESSION_ROLE, .node = "",
				    .name = "old", .created = now - 200000, .expires = now - TOKENS_KEEP_EXPIRED - 1 };
	assert_int_equal(tokens_merge(f->t, &pt), 0);
	char *json = list_json(f);
	assert_null(strstr(json, "0123456789ab"));
	free(json);
	pt.expires = now - 10;   /* one that expired lately is */
	assert_int_equal(tokens_merge(f->t, &pt), 0);
	json = list_json(f);
	assert_non_null(strstr(json, "0123456789ab"));
	free(json);
	free(ta);
	free(t1);
	free(t2);
	free(t3);
	free(tb);
}

/* A backend away while a record long expired is dropped: the record
 * stays for the next look, and the store answers lookups meanwhile (the
 * backend is called without the store's lock: a lookup from inside the
 * backend's call would hang the test otherwise). */
static struct tokens *away_tokens;
static const char *away_token;
static int away_calls, away_found;
static int (*real_delete)(struct persist *, const char *, char *, size_t);

static int away_delete(struct persist *p, const char *id, char *err, size_t errlen)
{
	struct token_info got;
	away_calls++;
	away_found += tokens_lookup(away_tokens, away_token, &got);
	if (away_calls == 1) {
		snprintf(err, errlen, "etcd: no leader");
		return -1;
	}
	return real_delete(p, id, err, errlen);
}

static void test_expire_backend_away(void **state)
{
	struct fixture *f = *state;
	struct token_info s, a, got;
	int64_t now = wall_seconds();
	char *ts = create_session(f, now + 5, &s);
	char *ta = create(f, ROLE_ADMIN, NULL, "a", &a);
	struct persist_ops ops = *f->db->ops;
	const struct persist_ops *was = f->db->ops;
	real_delete = ops.token_delete;
	ops.token_delete = away_delete;
	f->db->ops = &ops;
	away_tokens = f->t;
	away_token = ta;
	char (*ids)[TOKEN_ID_LEN + 1] = NULL, err[256] = "";
	size_t n = 0;
	/* nothing due: the backend is not asked */
	assert_int_equal(tokens_expire(f->t, now, &ids, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 0);
	free(ids);
	assert_int_equal(away_calls, 0);
	assert_int_equal(tokens_expire(f->t, now + 5 + TOKENS_KEEP_EXPIRED, &ids, &n, err, sizeof(err)), -1);
	assert_int_equal(n, 1);   /* told all the same */
	free(ids);
	assert_non_null(strstr(err, "no leader"));
	assert_int_equal(away_calls, 1);
	assert_int_equal(away_found, 1);
	assert_int_equal(lookup(f, ts, &got), 1);   /* stays, refused as expired */
	assert_true(tokens_expired(&got, now + 5));
	/* the next look drops it */
	assert_int_equal(tokens_expire(f->t, now + 6 + TOKENS_KEEP_EXPIRED, &ids, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 0);
	free(ids);
	assert_int_equal(away_calls, 2);
	assert_int_equal(lookup(f, ts, &got), 0);
	assert_int_equal(lookup(f, ta, &got), 1);
	/* and then nothing is due any more */
	assert_int_equal(tokens_expire(f->t, now + 7 + TOKENS_KEEP_EXPIRED, &ids, &n, err, sizeof(err)), 0);
	free(ids);
	assert_int_equal(away_calls, 2);
	f->db->ops = was;
	free(ts);
	free(ta);
}

/* etcd's watch may hand a replica its own new record before tokens_create
 * takes it in: one record all the same, so a revocation reaches the copy
 * lookups find. */
static struct tokens *watch_tokens;
static int (*real_add)(struct persist *, const struct persist_token *, char *, size_t);

static int watch_first_add(struct persist *p, const struct persist_token *pt, char *err, size_t errlen)
{
	int rc = real_add(p, pt, err, errlen);
	if (rc == 0)
		tokens_merge(watch_tokens, pt);   /* the watch, before the answer */
	return rc;
}

static void test_watch_first(void **state)
{
	struct fixture *f = *state;
	struct token_info s, got;
	char err[256] = "";
	struct persist_ops ops = *f->db->ops;
	const struct persist_ops *was = f->db->ops;
	real_add = ops.token_add;
	ops.token_add = watch_first_add;
	f->db->ops = &ops;
	watch_tokens = f->t;
	char *ts = create_session(f, wall_seconds() + 100, &s);
	f->db->ops = was;
	char *json = list_json(f);
	const char *first = strstr(json, s.id);
	assert_non_null(first);
	assert_null(strstr(first + 1, s.id));
	free(json);
	assert_int_equal(tokens_revoke(f->t, s.id, err, sizeof(err)), 1);
	assert_int_equal(lookup(f, ts, &got), 1);
	assert_true(got.revoked);
	free(ts);
}

/* tokens_ended: revoked, or a session past its end. */
static void test_ended(void **state)
{
	struct fixture *f = *state;
	struct token_info s, a;
	char err[256] = "";
	int64_t now = wall_seconds();
	char *ts = create_session(f, now + 5, &s);
	char *ta = create(f, ROLE_READER, NULL, "a", &a);
	assert_false(tokens_ended(f->t, s.id, now + 4));
	assert_true(tokens_ended(f->t, s.id, now + 5));
	assert_false(tokens_ended(f->t, a.id, now + 5 + 10 * TOKENS_KEEP_EXPIRED));
	assert_int_equal(tokens_revoke(f->t, a.id, err, sizeof(err)), 1);
	assert_true(tokens_ended(f->t, a.id, now));
	assert_false(tokens_ended(f->t, "0123456789ab", now));
	free(ts);
	free(ta);
}

/* A database of before the column: it gains it, its tokens never expire. */
static void test_old_database(void **state)
{
	struct fixture *f = *state;
	close_all(f);
	char path[128], err[256];
	snprintf(path, sizeof(path), "%s/tether.db", f->dir);
	sqlite3 *db = NULL;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "DROP TABLE tokens; CREATE TABLE tokens("
				      "  id TEXT PRIMARY KEY, hash TEXT NOT NULL UNIQUE, role TEXT NOT NULL,"
				      "  node TEXT NOT NULL DEFAULT '', name TEXT NOT NULL DEFAULT '',"
				      "  created INTEGER NOT NULL, revoked INTEGER NOT NULL DEFAULT 0);"
				      "INSERT INTO tokens VALUES('aaaaaaaaaaaa', 'ff', 'reader', '', 'old', 1, 0);",
				      NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(open_all(f), 0);
	char *json = list_json(f);
	assert_non_null(strstr(json, "\"id\":\"aaaaaaaaaaaa\",\"role\":\"reader\",\"name\""));
	free(json);
	struct token_info s;
	char *ts = create_session(f, wall_seconds() + 60, &s);
	reopen(f);
	struct token_info got;
	assert_int_equal(lookup(f, ts, &got), 1);
	assert_true(got.session && got.expires == s.expires);
	free(ts);
	(void)err;
}

/* The record as JSON (etcd's, a relay's): the end only when there is one. */
static void test_record_json(void **state)
{
	(void)state;
	struct persist_token t = { .id = "0123456789ab", .hash = "ab", .role = TOKENS_SESSION_ROLE, .node = "",
				   .name = "ui session by x", .created = 100, .expires = 1000 };
	cJSON *o = record_token_to_json(&t);
	struct persist_token back;
	assert_int_equal(record_token_from_json(o, &back), 0);
	assert_string_equal(back.role, TOKENS_SESSION_ROLE);
	assert_true(back.expires == 1000 && back.created == 100);
	cJSON_Delete(o);
	t.role = "reader";
	t.expires = 0;
	o = record_token_to_json(&t);
	assert_null(cJSON_GetObjectItemCaseSensitive(o, "expires"));
	assert_int_equal(record_token_from_json(o, &back), 0);
	assert_true(back.expires == 0);
	cJSON_Delete(o);
}

/* A reader cannot grow the store without bound: past TOKENS_SESSIONS_MAX
 * kept sessions (live or ended lately) a new one is refused with -2, and
 * an ordinary token is still made. */
static void test_sessions_capped(void **state)
{
	struct fixture *f = *state;
	int64_t now = wall_seconds();
	char id[16], hash[8];
	for (int i = 0; i < TOKENS_SESSIONS_MAX; i++) {
		snprintf(id, sizeof(id), "%012x", (unsigned)i);
		snprintf(hash, sizeof(hash), "%02x", (unsigned)(i & 0xff));
		struct persist_token pt = { .id = id, .hash = hash, .role = TOKENS_SESSION_ROLE, .node = "",
					    .name = "flood", .created = now, .expires = i % 2 ? now + 600 : now - 10 };
		assert_int_equal(tokens_merge(f->t, &pt), 0);
	}
	char *tok = NULL, err[256] = "";
	struct token_info info;
	assert_int_equal(tokens_create_session(f->t, now + 100, "one more", &tok, &info, err, sizeof(err)), -2);
	assert_null(tok);
	assert_non_null(strstr(err, "10000 console sessions are kept (at most 10000"));
	assert_non_null(strstr(err, "token revoke"));
	struct token_info r;
	char *tr = create(f, ROLE_READER, NULL, "still", &r);
	assert_non_null(tr);
	free(tr);
}

int main(void)
{
	if (sodium_init() < 0)
		return 1;
	log_set_level(LOG_LVL_WARN);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roles),
		cmocka_unit_test_setup_teardown(test_create_and_lookup, setup, teardown),
		cmocka_unit_test_setup_teardown(test_near_misses, setup, teardown),
		cmocka_unit_test_setup_teardown(test_revoke, setup, teardown),
		cmocka_unit_test_setup_teardown(test_count, setup, teardown),
		cmocka_unit_test_setup_teardown(test_listing_has_no_secret, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reopen, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unknown_role_in_db_admits_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_session, setup, teardown),
		cmocka_unit_test_setup_teardown(test_expire, setup, teardown),
		cmocka_unit_test_setup_teardown(test_expire_backend_away, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ended, setup, teardown),
		cmocka_unit_test_setup_teardown(test_watch_first, setup, teardown),
		cmocka_unit_test_setup_teardown(test_old_database, setup, teardown),
		cmocka_unit_test(test_record_json),
		cmocka_unit_test_setup_teardown(test_sessions_capped, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
