/* core/tokens.c: issued bearer tokens, stored as hashes (see tokens.h).
 *
 * A token is "tt1_" + its id (12 hex) + "_" + 32 random bytes in
 * base64url: 60 characters. The id is public (token ls, revoke); the
 * random part never leaves the answer that made it. A console session is
 * the same token, its record's role "ui-session" and its end kept. */
#include "core/tokens.h"
#include "log.h"
#include "persist/records_json.h"
#include "strmap.h"
#include "util.h"
#include "xmalloc.h"

#include <pthread.h>
#include <sys/types.h>
#include <stdatomic.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HASH_HEX (2 * crypto_generichash_BYTES + 1)

struct record {
	struct token_info info;
	char hash[HASH_HEX];
	int64_t created, revoked_at;
	bool expiry_told;            /* tokens_expire handed its id out */
};

struct tokens {
	struct persist *p;           /* borrowed: the backend */
	pthread_mutex_t lock;
	struct record **rec;         /* each its own block: the map borrows its hash */
	size_t n, cap;
	struct strmap by_hash;       /* hash hex -> index + 1 */
	_Atomic uint64_t gen;        /* moves with every record */
	int64_t next_due;            /* when tokens_expire has work next (0: none known) */
};

/* When record r gives tokens_expire work: at its end (told), then
 * TOKENS_KEEP_EXPIRED later (dropped); 0 for a token that never ends. */
static int64_t due_of(const struct record *r)
{
	if (r->info.expires <= 0)
		return 0;
	return r->expiry_told ? r->info.expires + TOKENS_KEEP_EXPIRED : r->info.expires;
}

/* next_due takes r's into account (the lock held). */
static void note_due(struct tokens *t, const struct record *r)
{
	int64_t d = due_of(r);
	if (d && (!t->next_due || d < t->next_due))
		t->next_due = d;
}


const char *role_name(enum role r)
{
	switch (r) {
	case ROLE_NODE: return "node";
	case ROLE_READER: return "reader";
	case ROLE_OPERATOR: return "operator";
	case ROLE_ADMIN: return "admin";
	case ROLE_RELAY: return "relay";
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
	if (strcmp(s, "relay") == 0)
		return ROLE_RELAY;
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

/* The index of the record of id, or -1 (the lock held). */
static ssize_t find(struct tokens *t, const char *id)
{
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->rec[i]->info.id, id) == 0)
			return (ssize_t)i;
	return -1;
}

static int load_one(void *ctx, const struct persist_token *pt)
{
	struct tokens *t = ctx;
	struct record *r = add(t);
	snprintf(r->info.id, sizeof(r->info.id), "%s", pt->id);
	snprintf(r->hash, sizeof(r->hash), "%s", pt->hash);
	r->info.session = strcmp(pt->role, TOKENS_SESSION_ROLE) == 0;
	r->info.role = strcmp(pt->role, "node") == 0 ? ROLE_NODE : r->info.session ? ROLE_READER : role_parse(pt->role);
	r->info.expires = pt->expires > 0 ? pt->expires : 0;
	snprintf(r->info.node, sizeof(r->info.node), "%s", pt->node);
	snprintf(r->info.name, sizeof(r->info.name), "%s", pt->name);
	r->created = pt->created;
	r->revoked_at = pt->revoked;
	r->info.revoked = r->revoked_at != 0;
	if (r->info.role == ROLE_NONE) {
		log_warn("tokens: token %s has an unknown role; it admits nothing", r->info.id);
		r->info.revoked = true;
	}
	if (r->info.session && !r->info.expires) {
		log_warn("tokens: session %s has no end; it admits nothing", r->info.id);
		r->info.revoked = true;
	}
	note_due(t, r);
	index_record(t, t->n - 1);
	atomic_fetch_add(&t->gen, 1);
	return 0;
}

struct tokens *tokens_open(struct persist *p, char *err, size_t errlen)
{
	struct tokens *t = xcalloc(1, sizeof(*t));
	t->p = p;
	pthread_mutex_init(&t->lock, NULL);
	strmap_init(&t->by_hash);
	if (p->ops->tokens_load(p, load_one, t, err, errlen) < 0) {
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

int tokens_merge(struct tokens *t, const struct persist_token *pt)
{
	pthread_mutex_lock(&t->lock);
	ssize_t at = find(t, pt->id);
	struct record *r = at >= 0 ? t->rec[at] : NULL;
	int rc = 0;
	if (!r) {
		/* a session's record the keeper dropped here, still listed by the
		 * upstream (a relay's) or not yet dropped by another replica */
		if (!(pt->expires > 0 && wall_seconds() - pt->expires >= TOKENS_KEEP_EXPIRED))
			load_one(t, pt);
	} else if (pt->revoked && !r->info.revoked) {
		r->info.revoked = true;
		r->revoked_at = pt->revoked;
		atomic_fetch_add(&t->gen, 1);
		rc = 1;
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

static int make(struct tokens *t, enum role role, const char *node, const char *name, int64_t expires, char **token,
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
	r.info.session = expires > 0;
	r.info.expires = expires;

	struct persist_token pt = {
		.id = r.info.id, .hash = r.hash, .role = r.info.session ? TOKENS_SESSION_ROLE : role_name(role),
		.node = r.info.node, .name = r.info.name, .created = r.created, .expires = expires,
	};
	int rc = t->p->ops->token_add(t->p, &pt, err, errlen);
	if (rc < 0) {
		sodium_memzero(tok, strlen(tok));
		free(tok);
		return -1;
	}
	pthread_mutex_lock(&t->lock);
	/* another replica's watch (etcd) may have taken the record in
	 * already: two copies would let a revocation mark one while lookups
	 * find the other */
	if (find(t, r.info.id) < 0) {
		struct record *nr = add(t);
		*nr = r;
		note_due(t, nr);
		index_record(t, t->n - 1);
		atomic_fetch_add(&t->gen, 1);
	}
	pthread_mutex_unlock(&t->lock);
	*info = r.info;
	*token = tok;
	return 0;
}

int tokens_create(struct tokens *t, enum role role, const char *node, const char *name, char **token,
		  struct token_info *info, char *err, size_t errlen)
{
	return make(t, role, node, name, 0, token, info, err, errlen);
}

int tokens_create_session(struct tokens *t, int64_t expires, const char *name, char **token,
			  struct token_info *info, char *err, size_t errlen)
{
	if (expires <= 0) {
		snprintf(err, errlen, "a session needs an end");
		return -1;
	}
	size_t kept = 0;
	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < t->n; i++)
		kept += t->rec[i]->info.session;
	pthread_mutex_unlock(&t->lock);
	if (kept >= TOKENS_SESSIONS_MAX) {
		snprintf(err, errlen, "%zu console sessions are kept (at most %d: live ones and those ended in the last "
			 "day); revoke some (tetherctl token ls, token revoke ID) or wait for them to end",
			 kept, TOKENS_SESSIONS_MAX);
		return -2;
	}
	return make(t, ROLE_READER, NULL, name, expires, token, info, err, errlen);
}

bool tokens_expired(const struct token_info *info, int64_t now)
{
	return info->expires > 0 && now >= info->expires;
}

/* Drops record i (the lock held): the last one takes its place. */
static void drop(struct tokens *t, size_t i)
{
	struct record *r = t->rec[i];
	strmap_del(&t->by_hash, r->hash);
	if (i != t->n - 1) {
		t->rec[i] = t->rec[t->n - 1];
		index_record(t, i);
	}
	t->n--;
	sodium_memzero(r, sizeof(*r));
	free(r);
}

/* Appends id to *ids (*n of them, room for *cap). */
static void push_id(char (**ids)[TOKEN_ID_LEN + 1], size_t *n, size_t *cap, const char *id)
{
	if (*n == *cap) {
		*cap = *cap ? 2 * *cap : 8;
		*ids = xrealloc(*ids, *cap * sizeof(**ids));
	}
	snprintf((*ids)[(*n)++], TOKEN_ID_LEN + 1, "%s", id);
}

int tokens_expire(struct tokens *t, int64_t now, char (**ids)[TOKEN_ID_LEN + 1], size_t *n, char *err,
		  size_t errlen)
{
	char (*gone)[TOKEN_ID_LEN + 1] = NULL;
	size_t cap = 0, ngone = 0, gcap = 0;
	int rc = 0;
	*ids = NULL;
	*n = 0;
	pthread_mutex_lock(&t->lock);
	/* called every second: a look at the records only when one is due */
	if (!t->next_due || now < t->next_due) {
		pthread_mutex_unlock(&t->lock);
		return 0;
	}
	t->next_due = 0;
	for (size_t i = 0; i < t->n; i++) {
		struct record *r = t->rec[i];
		if (tokens_expired(&r->info, now) && !r->expiry_told) {
			push_id(ids, n, &cap, r->info.id);
			r->expiry_told = true;
		}
		if (tokens_expired(&r->info, now) && now - r->info.expires >= TOKENS_KEEP_EXPIRED)
			push_id(&gone, &ngone, &gcap, r->info.id);
		else
			note_due(t, r);
	}
	pthread_mutex_unlock(&t->lock);
	/* the backend away (etcd electing) must not hold up every lookup:
	 * records are dropped there without the lock, then here */
	for (size_t k = 0; k < ngone; k++) {
		if (rc == 0 && t->p->ops->token_delete && t->p->ops->token_delete(t->p, gone[k], err, errlen) < 0)
			rc = -1;   /* the backend is away: again next time */
		pthread_mutex_lock(&t->lock);
		ssize_t i = find(t, gone[k]);
		if (i >= 0 && rc < 0)
			note_due(t, t->rec[i]);
		else if (i >= 0) {
			drop(t, (size_t)i);   /* the last record is at i now */
			atomic_fetch_add(&t->gen, 1);
		}
		pthread_mutex_unlock(&t->lock);
	}
	free(gone);
	return rc;
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
	ssize_t at = find(t, id);
	struct record *r = at >= 0 ? t->rec[at] : NULL;
	if (!r) {
		pthread_mutex_unlock(&t->lock);
		return 0;
	}
	if (r->info.revoked) {
		pthread_mutex_unlock(&t->lock);
		return 1;
	}
	int64_t now = wall_seconds();
	int rc = -1;
	if (t->p->ops->token_revoke(t->p, id, now, err, errlen) == 0) {
		r->info.revoked = true;
		r->revoked_at = now;
		atomic_fetch_add(&t->gen, 1);
		rc = 1;
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

bool tokens_ended(struct tokens *t, const char *id, int64_t now)
{
	pthread_mutex_lock(&t->lock);
	ssize_t i = find(t, id);
	bool ended = i >= 0 && (t->rec[i]->info.revoked || tokens_expired(&t->rec[i]->info, now));
	pthread_mutex_unlock(&t->lock);
	return ended;
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
		if (r->info.session)
			buf_printf(out, "\"session\":true,\"expires\":%lld,", (long long)r->info.expires);
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

uint64_t tokens_gen(struct tokens *t)
{
	return atomic_load(&t->gen);
}

void tokens_records_json(struct tokens *t, struct buf *out)
{
	cJSON *o = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(o, "tokens");
	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < t->n; i++) {
		const struct record *r = t->rec[i];
		struct persist_token pt = {
			.id = r->info.id, .hash = r->hash,
			.role = r->info.session ? TOKENS_SESSION_ROLE : role_name(r->info.role), .node = r->info.node,
			.name = r->info.name, .created = r->created, .revoked = r->revoked_at, .expires = r->info.expires,
		};
		cJSON_AddItemToArray(arr, record_token_to_json(&pt));
	}
	pthread_mutex_unlock(&t->lock);
	char *text = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	buf_puts(out, text);
	sodium_memzero(text, strlen(text));
	free(text);
}
