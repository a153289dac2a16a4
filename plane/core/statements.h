/* core/statements.h: the plane's signer. Every push and heartbeat carries a
 * statement (statement.h) for the version it brings a node to and the
 * node's subscription. A statement is signed once per (version,
 * subscription) -- never per node -- and signed again only to stay fresh:
 * when it is older than the refresh interval (a heartbeat, at most a
 * quarter of --statement-ttl). The key is --signing-key; SIGHUP loads it
 * again (a rotation), and every cached statement is signed anew. */
#ifndef TETHER_STATEMENTS_H
#define TETHER_STATEMENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/delta.h"
#include "lthash.h"

struct digests;
struct store;

/* ttl: how long a statement is good for; refresh: re-sign when older. */
struct statements *statements_new(struct store *s, struct digests *d, int64_t ttl_s, int64_t refresh_s);
void statements_free(struct statements *st);

/* Loads the signing key at path (NULL: signing off). On failure the
 * previous key stays. Returns 0, or -1 with err. */
int statements_load_key(struct statements *st, const char *path, char *err, size_t errlen);
bool statements_enabled(struct statements *st);
/* Where statements learn the newest overridden version <= theirs (the
 * "overridden" field, core/overrides.h). Set once, before any is signed. */
struct overrides;
void statements_set_overrides(struct statements *st, struct overrides *o);
/* The key id in use ("" when signing is off). */
void statements_kid(struct statements *st, char *out, size_t cap);

/* A new allocated token for (version, sub), or NULL when signing is off or
 * the state at version cannot be digested any more. digest, when not NULL,
 * is the state's digest already known (a push computed under the store's
 * lock); otherwise it is computed here (takes the store's read lock). */
char *statements_get(struct statements *st, uint64_t version, const struct sub *sub,
		     const unsigned char *digest);

struct statements_stats {
	uint64_t signed_total, cached, fetched;
};

/* Relays: statements are the upstream's, never signed here. fetch asks
 * the upstream for (version, sub) (new allocated; NULL with err): called
 * without the lock, by one thread per entry, only once the upstream was
 * seen to sign, and not again for 5 s after it failed. */
typedef char *(*statements_fetch_fn)(void *ctx, uint64_t version, const char *sub, char *err, size_t errlen);
void statements_set_source(struct statements *st, statements_fetch_fn fetch, void *ctx);
/* Whether pushes carry statements here: signing is on, or the upstream
 * signs (a relay that saw one). A push that should carry one and cannot
 * get it is held, not sent bare. */
bool statements_expected(struct statements *st);
/* A relay reached its upstream again: fetch at once, not after the wait
 * a failure set. */
void statements_retry_now(struct statements *st);
/* A statement the upstream sent (a state or a heartbeat): cached as
 * fresh. */
void statements_put(struct statements *st, uint64_t version, const char *sub_canon, const char *token);
void statements_stats(struct statements *st, struct statements_stats *out);

#endif
