/* plane.c: start-up and shutdown of the plane's parts, in order (see
 * plane.h). */
#include "plane.h"
#include "persist/persist.h"
#include "core/writer.h"
#include "core/digests.h"
#include "http/http.h"
#include "core/events.h"
#include "core/freshness.h"
#include "core/hub.h"
#include "log.h"
#include "core/nodes.h"
#include "core/pushcache.h"
#include "rollout/gate.h"
#include "rollout/rollout.h"
#include "core/statements.h"
#include "core/store.h"
#include "http/tls.h"
#include "core/tokens.h"
#include "util.h"
#include "xmalloc.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define PUSH_CACHE_ENTRIES 256
#define PUSH_CACHE_BYTES (64u << 20)
#define TOKEN_MAX 4096

int plane_load_token(struct plane *p, char *err, size_t errlen)
{
	char *tok = NULL;
	if (p->cfg.admin_token_file) {
		size_t len;
		tok = read_secret_file(p->cfg.admin_token_file, TOKEN_MAX, &len);
		if (tok && strlen(tok) != len) {
			snprintf(err, errlen, "admin token file '%s' holds a NUL byte", p->cfg.admin_token_file);
			free_secret(tok, len);
			return -1;
		}
		if (!tok) {
			snprintf(err, errlen, "cannot read admin token file '%s': %s", p->cfg.admin_token_file,
				 strerror(errno));
			return -1;
		}
		str_trim(tok);
		if (strlen(tok) < 16) {
			snprintf(err, errlen, "admin token in '%s' is shorter than 16 characters", p->cfg.admin_token_file);
			free_secret(tok, len);
			return -1;
		}
	}
	pthread_mutex_lock(&p->token_lock);
	if (p->admin_token)
		free_secret(p->admin_token, strlen(p->admin_token));
	p->admin_token = tok;
	pthread_mutex_unlock(&p->token_lock);
	return 0;
}

uint64_t plane_target(struct plane *p, const char *node)
{
	uint64_t t = rollout_target(p->rollout, node);
	uint64_t newest = hub_version(p->hub);
	return t == VERSION_LATEST || t > newest ? newest : t;
}

/* The store moved to version after from elsewhere (n changes): the
 * streams, the events and the keeper hear it. */
static void followed(struct plane *p, uint64_t after, size_t n)
{
	log_info("store: version %llu from %s (%zu changes)", (unsigned long long)after,
		 p->persist->ops->upstream ? "the upstream" : "another replica", n);
	hub_notify(p->hub, after);
	events_version(p->events, after, NULL, n, p->persist->ops->upstream ? "upstream" : "replica");
	/* a staged controller starts a rollout: on the keeper, not on this
	 * thread (a step writes to the backend this thread reads) */
	hub_wake_keeper(p->hub);
}

/* A version another replica committed, or the upstream sent (the
 * backend's follower thread): into the store, then to the streams, as a
 * local write would. */
static int follow_cb(void *ctx, struct persist_remote *ch, size_t n, char **pruned, size_t npruned,
		     uint64_t version, uint64_t horizon)
{
	struct plane *p = ctx;
	uint64_t before, after;
	if (p->catchup.on) {
		/* a step of a catch-up: under its lock, announced at its end */
		int rc = store_apply_remote(p->store, ch, n, pruned, npruned, version, horizon, &after);
		p->catchup.changes += n;
		return rc;
	}
	store_write_lock(p->store);
	before = store_version(p->store);
	int rc = store_apply_remote(p->store, ch, n, pruned, npruned, version, horizon, &after);
	store_write_unlock(p->store);
	if (after > before)
		followed(p, after, n);
	return rc;
}

/* A catch-up's steps are one change to the readers: the store's write lock
 * is held from its first step to its last, and only its end is sent. */
static void follow_catchup(void *ctx, bool begin, bool ok)
{
	struct plane *p = ctx;
	if (begin) {
		store_write_lock(p->store);
		store_hold(p->store, true);
		p->catchup.on = true;
		p->catchup.before = store_version(p->store);
		p->catchup.changes = 0;
		return;
	}
	if (!p->catchup.on)
		return;
	uint64_t after = store_version(p->store);
	p->catchup.on = false;
	store_hold(p->store, false);
	store_write_unlock(p->store);
	if (!ok)
		log_warn("store: a catch-up from the upstream failed at version %llu; its nodes stay at %llu until "
			 "it is done again", (unsigned long long)after, (unsigned long long)hub_version(p->hub));
	else if (after > p->catchup.before)
		followed(p, after, p->catchup.changes);
}

/* A node record another replica wrote: one fleet view everywhere. */
static int follow_node(void *ctx, const struct persist_node *n)
{
	struct plane *p = ctx;
	int rc = nodes_merge(p->nodes, n);
	rollout_record(p->rollout, n);   /* an ACK from another replica's node */
	const char *self = p->persist->ops->replica ? p->persist->ops->replica(p->persist) : NULL;
	if (!self || !n->replica || strcmp(n->replica, self) != 0)
		api_record_traffic(p, n, "another replica", false);   /* ours came back: recorded already */
	return rc;
}

/* A rollout record the controller wrote: what the nodes here get. */
static void follow_rollout(void *ctx, struct ro_run *run, bool has_released, uint64_t released)
{
	struct plane *p = ctx;
	rollout_follow(p->rollout, run, has_released, released);
}

/* A token another replica made or revoked: a revocation closes what the
 * token opened here too. */
static int follow_token(void *ctx, const struct persist_token *t)
{
	struct plane *p = ctx;
	uint64_t before = tokens_gen(p->tokens);
	if (tokens_merge(p->tokens, t) == 1) {
		size_t closed = hub_close_token(p->hub, t->id);
		log_info("tokens: token %s revoked on another replica; %zu streams closed here", t->id, closed);
	}
	if (tokens_gen(p->tokens) != before)
		hub_notify(p->hub, hub_version(p->hub));   /* relays below us take it */
	return 0;
}

/* A relay's: a statement the upstream signed. */
static void follow_statement(void *ctx, uint64_t version, const char *sub, const char *token)
{
	struct plane *p = ctx;
	if (p->statements)
		statements_put(p->statements, version, sub, token);
}

/* A relay reached an upstream: it hears every node record again. */
static void follow_resync(void *ctx)
{
	struct plane *p = ctx;
	nodes_resync(p->nodes);
	if (p->statements)
		statements_retry_now(p->statements);
	hub_wake_keeper(p->hub);
}

static char *fetch_statement(void *ctx, uint64_t version, const char *sub, char *err, size_t errlen)
{
	struct plane *p = ctx;
	return p->persist->ops->statement(p->persist, version, sub, err, errlen);
}

static bool relay_up_cb(void *ctx, const char *relay)
{
	struct plane *p = ctx;
	return p->hub && hub_relay_up(p->hub, relay);
}

static uint64_t target_cb(void *ctx, const char *node)
{
	return rollout_target(ctx, node);
}

void plane_reload(struct plane *p)
{
	char err[1024];
	if (plane_load_token(p, err, sizeof(err)) < 0)
		log_error("SIGHUP: %s (keeping the old admin token)", err);
	else if (p->cfg.admin_token_file)
		log_info("SIGHUP: admin token reloaded");
	if (p->tls) {
		if (tls_reload(p->tls, err, sizeof(err)) < 0)
			log_error("SIGHUP: %s (new connections keep the old certificate)", err);
		else
			log_info("SIGHUP: TLS certificate and key reloaded for new connections");
	}
	if (p->statements && p->cfg.signing_key) {
		if (statements_load_key(p->statements, p->cfg.signing_key, err, sizeof(err)) < 0)
			log_error("SIGHUP: %s (still signing with the old key)", err);
	}
}

void plane_sent(struct plane *p, const char *node, uint64_t version, const char *nonce, bool has_content)
{
	nodes_sent(p->nodes, node, version, nonce);
	rollout_sent(p->rollout, node, version, has_content);
}

void plane_nonce(struct plane *p, char *out, size_t cap)
{
	uint64_t seq = atomic_fetch_add(&p->nonce_seq, 1) + 1;
	snprintf(out, cap, "%s.%llx", p->boot_id, (unsigned long long)seq);
}

int plane_start(struct plane *p, char *err, size_t errlen)
{
	unsigned char rnd[4] = { 0 };
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		uint64_t t = (uint64_t)wall_ms();
		memcpy(rnd, &t, sizeof(rnd));
	}
	snprintf(p->boot_id, sizeof(p->boot_id), "%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3]);
	atomic_init(&p->nonce_seq, 0);
	atomic_init(&p->stopping, false);
	pthread_mutex_init(&p->token_lock, NULL);
	p->listen_fd = -1;
	p->started_ms = now_ms();

	if (sodium_init() < 0) {
		snprintf(err, errlen, "libsodium failed to initialise");
		return -1;
	}
	if (plane_load_token(p, err, errlen) < 0)
		return -1;
	if (p->cfg.tls_cert) {
		p->tls = tls_open(p->cfg.tls_cert, p->cfg.tls_key, p->cfg.client_ca, err, errlen);
		if (!p->tls)
			return -1;
		tls_set_cert_roles(p->tls, p->cfg.cert_roles);
	}
	p->persist = persist_open(&p->cfg, err, errlen);
	if (!p->persist)
		return -1;
	p->tokens = tokens_open(p->persist, err, errlen);
	if (!p->tokens)
		return -1;
	bool relay = p->persist->ops->upstream != NULL;
	if (!relay && !p->cfg.insecure && !p->admin_token && tokens_count(p->tokens, ROLE_ADMIN) == 0) {
		snprintf(err, errlen, "no admin credential: give --admin-token-file FILE (its token makes the other "
			 "tokens), or --insecure for a lab on loopback");
		return -1;
	}
	struct store_opts so = {
		.tombstone_keep = p->cfg.tombstone_keep,
		.tombstone_max_age = (int64_t)p->cfg.tombstone_max_age,
		.history_keep = p->cfg.history_keep,
		.history_max_age = (int64_t)p->cfg.history_max_age,
		.max_resources = p->cfg.max_resources,
	};
	p->store = store_open(p->persist, &so, err, errlen);
	if (!p->store)
		return -1;
	int64_t poll_window = (int64_t)(p->cfg.heartbeat * 3000);
	p->nodes = nodes_open(p->persist, p->cfg.max_nodes, poll_window, err, errlen);
	if (!p->nodes)
		return -1;
	p->gate = gate_new(&p->cfg, err, errlen);
	if (!p->gate && err[0])
		return -1;
	p->rollout = rollout_open(p, err, errlen);
	if (!p->rollout)
		return -1;
	nodes_set_target(p->nodes, target_cb, p->rollout, p->cfg.lag_alert);
	nodes_set_relay_up(p->nodes, relay_up_cb, p, relay);
	p->pushes = pushcache_new(p->store, PUSH_CACHE_ENTRIES, PUSH_CACHE_BYTES);
	pushcache_set_target(p->pushes, target_cb, p->rollout);
	if (p->cfg.signing_key) {
		int64_t ttl = (int64_t)p->cfg.statement_ttl;
		int64_t refresh = (int64_t)p->cfg.heartbeat;
		if (refresh > ttl / 4)
			refresh = ttl / 4;
		p->digests = digests_new(p->store);
		p->statements = statements_new(p->store, p->digests, ttl, refresh);
		if (statements_load_key(p->statements, p->cfg.signing_key, err, errlen) < 0)
			return -1;
		pushcache_set_digests(p->pushes, p->digests);
	} else if (relay) {
		/* a relay passes the upstream's statements on, never signs */
		int64_t refresh = (int64_t)p->cfg.heartbeat;
		p->statements = statements_new(p->store, NULL, (int64_t)p->cfg.statement_ttl, refresh);
		statements_set_source(p->statements, fetch_statement, p);
	}
	p->fresh = freshness_new();
	p->events = events_new(p->cfg.heartbeat);
	if (events_start(p->events, err, errlen) < 0)
		return -1;
	gate_set_events(p->gate, p->events);
	p->hub = hub_new(p, store_version(p->store));
	if (hub_start(p->hub, err, errlen) < 0)
		return -1;
	/* a shared store: what other replicas commit reaches our nodes too */
	struct persist_follow f = { .ctx = p, .store = follow_cb, .node = follow_node, .token = follow_token,
				    .rollout = follow_rollout, .statement = follow_statement, .resync = follow_resync,
				    .catchup = follow_catchup };
	if (p->persist->ops->follow && p->persist->ops->follow(p->persist, &f, err, errlen) < 0)
		return -1;
	/* a commit to etcd may wait seconds: never on the threads that
	 * serve the streams */
	if (p->persist->ops->follow && !(p->writer = writer_start(p, err, errlen)))
		return -1;
	if (http_start(p, err, errlen) < 0)
		return -1;
	if (p->cfg.insecure) {
		log_warn("--insecure: reads are open and any client may sync as any node; for a lab on loopback only");
		if (!p->admin_token && !relay)
			log_warn("--insecure without --admin-token-file: anyone who can reach %s can write",
				 p->listen_addr);
	}
	if (!p->tls && !http_listens_on_loopback(p)) {
		log_warn("**************************************************************************");
		log_warn("WARNING: %s is not a loopback address and TLS is off (no --tls-cert):", p->listen_addr);
		log_warn("WARNING: tokens, secrets and every push cross the network in clear text");
		log_warn("**************************************************************************");
	}
	if (relay)
		log_info("relay: writes go to the origin; pushes carry the statements the upstream signed");
	else if (!p->cfg.signing_key)
		log_info("no --signing-key: pushes carry no signed statement (agents with --trust refuse them)");
	return 0;
}

void plane_stop(struct plane *p)
{
	char err[512];
	atomic_store(&p->stopping, true);
	/* other replicas' changes stop here: what the follower touches (the
	 * store, the nodes, the tokens, the hub) is freed below */
	if (p->persist && p->persist->ops->unfollow)
		p->persist->ops->unfollow(p->persist);
	if (p->httpd)
		http_quiesce(p);
	events_stop(p->events);
	if (p->hub)
		hub_stop(p->hub);
	writer_stop(p->writer);   /* answers what waits; the requests resume */
	p->writer = NULL;
	http_stop(p);
	if (p->nodes && nodes_flush(p->nodes, err, sizeof(err)) < 0)
		log_error("nodes: cannot save node records at exit: %s", err);
	rollout_save(p->rollout);
	hub_free(p->hub);
	p->hub = NULL;
	gate_set_events(p->gate, NULL);
	events_free(p->events);
	freshness_free(p->fresh);
	p->fresh = NULL;
	p->events = NULL;
	pushcache_free(p->pushes);
	p->pushes = NULL;
	statements_free(p->statements);
	p->statements = NULL;
	digests_free(p->digests);
	p->digests = NULL;
	rollout_free(p->rollout);
	p->rollout = NULL;
	gate_free(p->gate);
	p->gate = NULL;
	nodes_free(p->nodes);
	p->nodes = NULL;
	tokens_free(p->tokens);
	p->tokens = NULL;
	store_free(p->store);
	p->store = NULL;
	persist_close(p->persist);
	p->persist = NULL;
	if (p->admin_token)
		free_secret(p->admin_token, strlen(p->admin_token));
	p->admin_token = NULL;
	tls_free(p->tls);
	p->tls = NULL;
	pthread_mutex_destroy(&p->token_lock);
}
