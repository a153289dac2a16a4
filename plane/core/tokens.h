/* core/tokens.h: bearer tokens the plane issues: one per node (it admits that
 * node's stream, poll and ACKs, nothing else) or one per person with a
 * role (admin, operator, reader). A token is shown once, when it is made;
 * the store keeps its BLAKE2b-256 hash, its id, what it is for, a name,
 * and when it was made and revoked. Lookups are by hash, in memory;
 * records are durable (through the backend, persist.h) before the answer.
 * A console session (POST /v1/ui/session) is a reader's token that
 * expires: past its end it is refused as expired, and its record is
 * dropped TOKENS_KEEP_EXPIRED seconds later. */
#ifndef TETHER_TOKENS_H
#define TETHER_TOKENS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "persist/persist.h"

enum role {
	ROLE_NONE = 0,
	ROLE_NODE,        /* one node's sync: stream, poll, ack */
	ROLE_READER,      /* read resources (secrets' key material redacted), nodes, rollouts, metrics */
	ROLE_OPERATOR,    /* a reader who may also abort a rollout */
	ROLE_ADMIN,       /* everything: writes, tokens */
	ROLE_RELAY,       /* a relay: follows the state (secrets in clear) and the token records, sends
			   * node records up; reads as a reader, writes nothing (not above ROLE_ADMIN:
			   * auth.c ranks it as a reader) */
};

#define TOKEN_ID_LEN 12
#define TOKEN_NAME_MAX 200
/* How long an expired session's record stays (so it is refused as
 * expired, not unknown, and token ls shows it) before it is dropped. */
#define TOKENS_KEEP_EXPIRED 86400
/* A session's role as stored (persist.h): a reader that expires. */
#define TOKENS_SESSION_ROLE "ui-session"

/* What a token grants (a copy). */
struct token_info {
	char id[TOKEN_ID_LEN + 1];
	enum role role;
	char node[201];                /* ROLE_NODE: the node it admits */
	char name[TOKEN_NAME_MAX + 1];
	bool revoked;
	bool session;                  /* a console session: ROLE_READER, expires */
	int64_t expires;               /* wall seconds; 0: never (only sessions expire) */
};

const char *role_name(enum role r);
/* "admin", "operator", "reader", "relay" (not "node"); ROLE_NONE otherwise. */
enum role role_parse(const char *s);

struct tokens *tokens_open(struct persist *p, char *err, size_t errlen);
void tokens_free(struct tokens *t);

/* Makes a token for a role, or for node (role ROLE_NODE). *token gets the
 * token itself (new allocated; show it once, then wipe it), info what it
 * grants. Returns 0, or -1 with err (the store could not persist it). */
int tokens_create(struct tokens *t, enum role role, const char *node, const char *name, char **token,
		  struct token_info *info, char *err, size_t errlen);
/* The most console sessions kept at once (live ones and those ended less
 * than a day ago): a reader cannot grow the store without bound. */
#define TOKENS_SESSIONS_MAX 10000
/* Makes a console session: a reader's token that expires at expires
 * (wall seconds), named name. As tokens_create otherwise; -2 with err
 * when TOKENS_SESSIONS_MAX are kept. */
int tokens_create_session(struct tokens *t, int64_t expires, const char *name, char **token,
			  struct token_info *info, char *err, size_t errlen);
/* Whether a token (its info) expired at now (wall seconds). */
bool tokens_expired(const struct token_info *info, int64_t now);
/* The keeper's, once in a while (now: wall seconds): *ids (new allocated,
 * *n of them; free it) gets the sessions that expired since the last
 * call, to close what they opened; and the records of sessions that
 * expired TOKENS_KEEP_EXPIRED seconds or more before now are dropped, here
 * and in the backend. Returns 0, or -1 with err (a record the backend
 * could not drop stays for the next call; *ids is filled either way). */
int tokens_expire(struct tokens *t, int64_t now, char (**ids)[TOKEN_ID_LEN + 1], size_t *n, char *err,
		  size_t errlen);
/* Takes in a record another replica wrote: a new token, or a revocation.
 * 1 when it revoked one here (close what it opened), 0 otherwise. */
int tokens_merge(struct tokens *t, const struct persist_token *pt);
/* Looks a presented token up. 1 found (info filled; check info->revoked),
 * 0 unknown. Constant time in the token's content. */
int tokens_lookup(struct tokens *t, const char *token, struct token_info *info);
/* Revokes by id. 1 revoked now, 0 unknown id, -1 with err. Revoking twice
 * is not an error. */
int tokens_revoke(struct tokens *t, const char *id, char *err, size_t errlen);
/* Whether the token with this id is revoked, or a session past its end
 * at now (wall seconds); an unknown id is neither. A stream registered
 * after the check that admitted it asks once more, so a revocation or an
 * end in between (whose closing found nothing to close) is not missed. */
bool tokens_ended(struct tokens *t, const char *id, int64_t now);
/* Appends the JSON array of every token (no secret, no hash). */
void tokens_to_json(struct tokens *t, struct buf *out);
/* How many tokens grant role (not revoked). */
size_t tokens_count(struct tokens *t, enum role role);
/* Moves on every new token and revocation: relays follow the records. */
uint64_t tokens_gen(struct tokens *t);
/* {"tokens":[record...]}: every record, hashes included (never a token),
 * for a relay to admit the same credentials (records_json.h). */
void tokens_records_json(struct tokens *t, struct buf *out);

#endif
