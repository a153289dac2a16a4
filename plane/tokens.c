/* tokens.c: issued bearer tokens, stored as hashes (see tokens.h).
 *
 * A token is "tt1_" + its id (12 hex) + "_" + 32 random bytes in
 * base64url: 60 characters. The id is public (token ls, revoke); the
 * random part never leaves the answer that made it. */
#include "tokens.h"
#include "log.h"
#include "strmap.h"
#include "util.h"
#include "xmalloc.h"

#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HASH_HEX (2 * crypto_generichash_BYTES + 1)

struct record {
	struct token_info info;
	char hash[HASH_HEX];
	int64_t created, revoked_at;
};

struct tokens {
	struct db *db;
	pthread_mutex_t lock;
	struct record **rec;         /* each its own block: the map borrows its hash */
	size_t n, cap;
	struct strmap by_hash;       /* hash hex -> index + 1 */
};

static const char schema[] =
	"CREATE TABLE IF NOT EXISTS tokens("
	"  id TEXT PRIMARY KEY, hash TEXT NOT NULL UNIQUE, role TEXT NOT NULL,"
	"  node TEXT NOT NULL DEFAULT '', name TEXT NOT NULL DEFAULT '',"
	"  created INTEGER NOT NULL, revoked INTEGER NOT NULL DEFAULT 0);";

const char *role_name(enum role r)
{
	switch (r) {
	case ROLE_NODE: return "node";
	case ROLE_READER: return "reader";
	case ROLE_OPERATOR: return "operator";
	case ROLE_ADMIN: return "admin";
	default: return "none";
	}
}

enum role role_parse(const char *s)
{
	if (!s)
		return ROLE_NONE;
	if (strcmp(s, "admin") == 0)
		return ROLE_ADMIN;
	if (strcmp(s, "operator") == 0)
		return ROLE_OPERATOR;
	if (strcmp(s, "reader") == 0)
		return ROLE_READER;
	return ROLE_NONE;
}

static void hash_token(const char *token, char out[HASH_HEX])
{
	unsigned char h[crypto_generichash_BYTES];
	crypto_generichash(h, sizeof(h), (const unsigned char *)token, strlen(token), NULL, 0);
	sodium_bin2hex(out, HASH_HEX, h, sizeof(h));
}

static struct record *add(struct tokens *t)
{
	if (t->n == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 16;
		t->rec = xrealloc(t->rec, t->cap * sizeof(*t->rec));
	}
	struct record *r = xcalloc(1, sizeof(*r));
	t->rec[t->n++] = r;
	return r;
}

static void index_record(struct tokens *t, size_t i)
{
	*strmap_ref(&t->by_hash, t->rec[i]->hash) = (intptr_t)i + 1;
}

static void copy_text(char *dst, size_t cap, const unsigned char *src)
{
	snprintf(dst, cap, "%s", src ? (const char *)src : "");
}

struct tokens *tokens_open(struct db *db, char *err, size_t errlen)
{
	struct tokens *t = xcalloc(1, sizeof(*t));
	t->db = db;
	pthread_mutex_init(&t->lock, NULL);
	strmap_init(&t->by_hash);
	pthread_mutex_lock(&db->lock);
	sqlite3_stmt *st = NULL;
	int rc = -1;
	if (db_exec(db, schema, err, errlen) < 0)
		goto out;
	if (sqlite3_prepare_v2(db->conn, "SELECT id, hash, role, node, name, created, revoked FROM tokens ORDER BY created, id",
			       -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "database: %s", sqlite3_errmsg(db->conn));
		goto out;
	}
	int step;
	while ((step = sqlite3_step(st)) == SQLITE_ROW) {
		struct record *r = add(t);
		copy_text(r->info.id, sizeof(r->info.id), sqlite3_column_text(st, 0));
		copy_text(r->hash, sizeof(r->hash), sqlite3_column_text(st, 1));
		const char *role = (const char *)sqlite3_column_text(st, 2);
		r->info.role = role && strcmp(role, "node") == 0 ? ROLE_NODE : role_parse(role);
		copy_text(r->info.node, sizeof(r->info.node), sqlite3_column_text(st, 3));
		copy_text(r->info.name, sizeof(r->info.name), sqlite3_column_text(st, 4));
		r->created = sqlite3_column_int64(st, 5);
		r->revoked_at = sqlite3_column_int64(st, 6);
		r->info.revoked = r->revoked_at != 0;
		if (r->info.role == ROLE_NONE) {
			log_warn("tokens: token %s has an unknown role; it admits nothing", r->info.id);
			r->info.revoked = true;
		}
		index_record(t, t->n - 1);
	}
	if (step != SQLITE_DONE) {
		snprintf(err, errlen, "database: %s", sqlite3_errmsg(db->conn));
		goto out;
	}
	rc = 0;
out:
	sqlite3_finalize(st);
	pthread_mutex_unlock(&db->lock);
	if (rc < 0) {
		tokens_free(t);
		return NULL;
	}
	return t;
}

void tokens_free(struct tokens *t)
{
	if (!t)
		return;
	strmap_release(&t->by_hash);
	for (size_t i = 0; i < t->n; i++) {
		sodium_memzero(t->rec[i], sizeof(*t->rec[i]));
		free(t->rec[i]);
	}
	free(t->rec);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

int tokens_create(struct tokens *t, enum role role, const char *node, const char *name, char **token,
		  struct token_info *info, char *err, size_t errlen)
{
	unsigned char idb[TOKEN_ID_LEN / 2], secret[32];
	char id[TOKEN_ID_LEN + 1], sec64[sodium_base64_ENCODED_LEN(32, sodium_base64_VARIANT_URLSAFE_NO_PADDING)];
	randombytes_buf(idb, sizeof(idb));
	randombytes_buf(secret, sizeof(secret));
	sodium_bin2hex(id, sizeof(id), idb, sizeof(idb));
	sodium_bin2base64(sec64, sizeof(sec64), secret, sizeof(secret), sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	char *tok = xasprintf("tt1_%s_%s", id, sec64);
	sodium_memzero(secret, sizeof(secret));
	sodium_memzero(sec64, sizeof(sec64));

	struct record r;
	memset(&r, 0, sizeof(r));
	snprintf(r.info.id, sizeof(r.info.id), "%s", id);
	r.info.role = role;
	snprintf(r.info.node, sizeof(r.info.node), "%s", role == ROLE_NODE && node ? node : "");
	snprintf(r.info.name, sizeof(r.info.name), "%s", name ? name : "");
	hash_token(tok, r.hash);
	r.created = wall_seconds();

	pthread_mutex_lock(&t->db->lock);
	sqlite3_stmt *st = NULL;
	int rc = -1;
	if (db_set_sync(t->db, 1, err, errlen) < 0)
		goto out;
	if (sqlite3_prepare_v2(t->db->conn, "INSERT INTO tokens(id, hash, role, node, name, created) VALUES(?,?,?,?,?,?)",
			       -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "database: %s", sqlite3_errmsg(t->db->conn));
		goto out;
	}
	sqlite3_bind_text(st, 1, r.info.id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, r.hash, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, role_name(role), -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, r.info.node, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 5, r.info.name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 6, r.created);
	if (sqlite3_step(st) != SQLITE_DONE) {
		snprintf(err, errlen, "database: %s", sqlite3_errmsg(t->db->conn));
		goto out;
	}
	rc = 0;
out:
	sqlite3_finalize(st);
	pthread_mutex_unlock(&t->db->lock);
	if (rc < 0) {
		sodium_memzero(tok, strlen(tok));
		free(tok);
		return -1;
	}
	pthread_mutex_lock(&t->lock);
	*add(t) = r;
	index_record(t, t->n - 1);
	pthread_mutex_unlock(&t->lock);
	*info = r.info;
	*token = tok;
	return 0;
}

int tokens_lookup(struct tokens *t, const char *token, struct token_info *info)
{
	char h[HASH_HEX];
	/* the map is keyed by the hash: what the lookup compares is a hash of
	 * the secret, never the secret itself */
	hash_token(token, h);
	pthread_mutex_lock(&t->lock);
	intptr_t i = 0;
	int found = strmap_get(&t->by_hash, h, &i) && i > 0;
	if (found)
		*info = t->rec[i - 1]->info;
	pthread_mutex_unlock(&t->lock);
	return found;
}

int tokens_revoke(struct tokens *t, const char *id, char *err, size_t errlen)
{
	pthread_mutex_lock(&t->lock);
	struct record *r = NULL;
	for (size_t i = 0; i < t->n && !r; i++)
		if (strcmp(t->rec[i]->info.id, id) == 0)
			r = t->rec[i];
	if (!r) {
		pthread_mutex_unlock(&t->lock);
		return 0;
	}
	if (r->info.revoked) {
		pthread_mutex_unlock(&t->lock);
		return 1;
	}
	int64_t now = wall_seconds();
	pthread_mutex_lock(&t->db->lock);
	sqlite3_stmt *st = NULL;
	int rc = -1;
	if (db_set_sync(t->db, 1, err, errlen) < 0)
		goto out;
	if (sqlite3_prepare_v2(t->db->conn, "UPDATE tokens SET revoked=? WHERE id=?", -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "database: %s", sqlite3_errmsg(t->db->conn));
		goto out;
	}
	sqlite3_bind_int64(st, 1, now);
	sqlite3_bind_text(st, 2, id, -1, SQLITE_STATIC);
	if (sqlite3_step(st) != SQLITE_DONE) {
		snprintf(err, errlen, "database: %s", sqlite3_errmsg(t->db->conn));
		goto out;
	}
	r->info.revoked = true;
	r->revoked_at = now;
	rc = 1;
out:
	sqlite3_finalize(st);
	pthread_mutex_unlock(&t->db->lock);
	pthread_mutex_unlock(&t->lock);
	return rc;
}

bool tokens_revoked(struct tokens *t, const char *id)
{
	bool revoked = false;
	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->rec[i]->info.id, id) == 0)
			revoked = t->rec[i]->info.revoked;
	pthread_mutex_unlock(&t->lock);
	return revoked;
}

void tokens_to_json(struct tokens *t, struct buf *out)
{
	pthread_mutex_lock(&t->lock);
	buf_putc(out, '[');
	for (size_t i = 0; i < t->n; i++) {
		const struct record *r = t->rec[i];
		if (i)
			buf_putc(out, ',');
		buf_printf(out, "{\"id\":\"%s\",\"role\":\"%s\",", r->info.id, role_name(r->info.role));
		if (r->info.role == ROLE_NODE) {
			buf_puts(out, "\"node\":");
			buf_json_string(out, r->info.node);
			buf_putc(out, ',');
		}
		buf_puts(out, "\"name\":");
		buf_json_string(out, r->info.name);
		buf_printf(out, ",\"created\":%lld,\"revoked\":%lld}", (long long)r->created, (long long)r->revoked_at);
	}
	buf_putc(out, ']');
	pthread_mutex_unlock(&t->lock);
}

size_t tokens_count(struct tokens *t, enum role role)
{
	size_t n = 0;
	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < t->n; i++)
		n += t->rec[i]->info.role == role && !t->rec[i]->info.revoked;
	pthread_mutex_unlock(&t->lock);
	return n;
}
