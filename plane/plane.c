/* plane.c: start-up and shutdown of the plane's parts, in order (see
 * plane.h). */
#include "plane.h"
#include "api/api.h"
#include "core/approvals.h"
#include "core/digests.h"
#include "core/events.h"
#include "core/freeze_state.h"
#include "core/freshness.h"
#include "core/hub.h"
#include "core/nodes.h"
#include "core/pushcache.h"
#include "core/overrides.h"
#include "core/statements.h"
#include "core/store.h"
#include "core/ticket_keeper.h"
#include "core/tokens.h"
#include "core/writer.h"
#include "http/http.h"
#include "http/tls.h"
#include "log.h"
#include "persist/persist.h"
#include "rollout/gate.h"
#include "rollout/rollout.h"
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
	pthread_mutex_lock(&p->auth.token_lock);
	if (p->auth.admin_token)
		free_secret(p->auth.admin_token, strlen(p->auth.admin_token));
	p->auth.admin_token = tok;
	pthread_mutex_unlock(&p->auth.token_lock);
	return 0;
}

/* ---- the hooks through which core asks the rollout and the gates ---- */

static uint64_t hook_target(void *ctx, const char *node)
{
	struct plane *p = ctx;
	uint64_t t = rollout_target(p->rollout, node);   /* VERSION_LATEST: the newest */
	/* a node that requires approvals: held at the newest approved */
	return p->core.approvals ? approvals_target(p->core.approvals, node, t) : t;
}

static void hook_sent(void *ctx, const char *node, uint64_t version, bool has_content)
{
	struct plane *p = ctx;
	rollout_sent(p->rollout, node, version, has_content);
	if (p->core.approvals)
		approvals_sent(p->core.approvals, node, version);
}

static void hook_step(void *ctx)
{
	struct plane *p = ctx;
	rollout_step(p->rollout);
}

static bool hook_wants_reports(void *ctx)
{
	struct plane *p = ctx;
	return gate_wants_reports(p->gate);
}

static uint64_t hook_rollout_gen(void *ctx)
{
	struct plane *p = ctx;
	return rollout_gen(p->rollout);
}

static void hook_rollout_json(void *ctx, uint64_t v, struct buf *out)
{
	struct plane *p = ctx;
	rollout_relay_json(p->rollout, v, out);
}

static uint64_t hook_released(void *ctx, uint64_t v)
{
	struct plane *p = ctx;
	return rollout_released_now(p->rollout, v);
}

static void hook_write_note(void *ctx, uint64_t version, struct buf *out)
{
	struct plane *p = ctx;
	rollout_write_note(p->rollout, version, out);
}

/* The store moved to version after from elsewhere (n changes): the
 * streams, the events and the keeper hear it. */
static void followed(struct plane *p, uint64_t after, size_t n)
{
	log_info("store: version %llu from %s (%zu changes)", (unsigned long long)after,
		 p->core.persist->ops->upstream ? "the upstream" : "another replica", n);
	hub_notify(p->core.hub, after);
	events_version(p->core.events, after, NULL, n, p->core.persist->ops->upstream ? "upstream" : "replica");
	/* a staged controller starts a rollout: on the keeper, not on this
	 * thread (a step writes to the backend this thread reads) */
	hub_wake_keeper(p->core.hub);
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
		int rc = store_apply_remote(p->core.store, ch, n, pruned, npruned, version, horizon, &after);
		p->catchup.changes += n;
		return rc;
	}
	store_write_lock(p->core.store);
	before = store_version(p->core.store);
	int rc = store_apply_remote(p->core.store, ch, n, pruned, npruned, version, horizon, &after);
	store_write_unlock(p->core.store);
	if (after > before)
		followed(p, after, n);
	return rc;
}

/* Another replica's override of a guard (etcd): marked before its
 * version reaches the store, so no statement of it is signed without. */
static void follow_overridden(void *ctx, uint64_t version)
{
	struct plane *p = ctx;
	overrides_note(p->core.overrides, version);
}

/* A catch-up's steps are one change to the readers: the store's write lock
 * is held from its first step to its last, and only its end is sent. */
static void follow_catchup(void *ctx, bool begin, bool ok)
{
	struct plane *p = ctx;
	if (begin) {
		store_write_lock(p->core.store);
		store_hold(p->core.store, true);
		p->catchup.on = true;
		p->catchup.before = store_version(p->core.store);
		p->catchup.changes = 0;
		return;
	}
	if (!p->catchup.on)
		return;
	uint64_t after = store_version(p->core.store);
	p->catchup.on = false;
	store_hold(p->core.store, false);
	store_write_unlock(p->core.store);
	if (!ok)
		log_warn("store: a catch-up from the upstream failed at version %llu; its nodes stay at %llu until "
			 "it is done again", (unsigned long long)after, (unsigned long long)hub_version(p->core.hub));
	else if (after > p->catchup.before)
		followed(p, after, p->catchup.changes);
}

/* A node record another replica wrote: one fleet view everywhere. */
static int follow_node(void *ctx, const struct persist_node *n)
{
	struct plane *p = ctx;
	int rc = nodes_merge(p->core.nodes, n);
	const char *self = p->core.persist->ops->replica ? p->core.persist->ops->replica(p->core.persist) : NULL;
	bool theirs = !self || !n->replica || strcmp(n->replica, self) != 0;   /* ours: recorded already */
	/* why a node of another replica does not count, before its ACK moves
	 * the rollout: the gates name it (not through api_record_counts: a
	 * merge writes nothing back) */
	if (theirs && n->counts)
		gate_counts(p->api.gate, n->id, n->counts > 0, n->counts_reason);
	rollout_record(p->rollout, n);   /* an ACK from another replica's node */
	if (theirs)
		api_record_traffic(&p->api, n, "another replica", false);
	return rc;
}

/* A rollout record the controller wrote: what the nodes here get. */
/* A relay: the upstream's approvals replace ours; every stream looks at
 * its target again (the keeper moves the store's hold). */
static void follow_approvals(void *ctx, const struct persist_approval *list, size_t n)
{
	struct plane *p = ctx;
	approvals_replace(p->core.approvals, list, n);
	log_info("relay: %zu approvals from the upstream", n);
	hub_notify(p->core.hub, hub_version(p->core.hub));
	hub_wake_keeper(p->core.hub);
}

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
	uint64_t before = tokens_gen(p->core.tokens);
	if (tokens_merge(p->core.tokens, t) == 1) {
		size_t closed = hub_close_token(p->core.hub, t->id);
		log_info("tokens: token %s revoked on another replica; %zu streams closed here", t->id, closed);
	}
	if (tokens_gen(p->core.tokens) != before)
		hub_notify(p->core.hub, hub_version(p->core.hub));   /* relays below us take it */
	return 0;
}

/* A relay's: a statement the upstream signed. */
static void follow_statement(void *ctx, uint64_t version, const char *sub, const char *token)
{
	struct plane *p = ctx;
	if (p->core.statements)
		statements_put(p->core.statements, version, sub, token);
}

/* A relay reached an upstream: it hears every node record again. */
static void follow_resync(void *ctx)
{
	struct plane *p = ctx;
	nodes_resync(p->core.nodes);
	if (p->core.statements)
		statements_retry_now(p->core.statements);
	hub_wake_keeper(p->core.hub);
}

static char *fetch_statement(void *ctx, uint64_t version, const char *sub, char *err, size_t errlen)
{
	struct plane *p = ctx;
	return p->core.persist->ops->statement(p->core.persist, version, sub, err, errlen);
}

static bool relay_up_cb(void *ctx, const char *relay)
{
	struct plane *p = ctx;
	return p->core.hub && hub_relay_up(p->core.hub, relay);
}

static uint64_t target_cb(void *ctx, const char *node)
{
	return hook_target(ctx, node);   /* the rollout's, and approvals' hold */
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
	if (p->core.statements && p->cfg.signing_key) {
		if (statements_load_key(p->core.statements, p->cfg.signing_key, err, sizeof(err)) < 0)
			log_error("SIGHUP: %s (still signing with the old key)", err);
	}
}

/* The backend --store names ("sqlite", "etcd"), or a relay's with
 * --upstream. NULL with err. */
static struct persist *open_backend(const struct plane_config *c, char *err, size_t errlen)
{
	if (c->upstream) {
		struct persist_relay_options o = {
			.upstream = c->upstream, .relay_id = c->relay_id, .token_file = c->upstream_token_file,
			.ca = c->upstream_ca, .cert = c->upstream_cert, .key = c->upstream_key,
		};
		return persist_relay_open(&o, err, errlen);
	}
	const char *name = c->store ? c->store : "sqlite";
	if (strcmp(name, "sqlite") == 0)
		return persist_sqlite_open(c->data, err, errlen);
	if (strcmp(name, "etcd") == 0) {
		struct persist_etcd_options o = {
			.endpoints = c->etcd, .ca = c->etcd_ca, .cert = c->etcd_cert, .key = c->etcd_key,
			.token_file = c->etcd_token_file, .prefix = c->etcd_prefix, .lease_ttl = c->lease_ttl,
			.listen = c->listen,
		};
		return persist_etcd_open(&o, err, errlen);
	}
	snprintf(err, errlen, "store: unknown backend '%s'", name);
	return NULL;
}

int plane_start(struct plane *p, char *err, size_t errlen)
{
	core_init(&p->core);
	p->core.cfg = (struct core_config){ .heartbeat = p->cfg.heartbeat, .max_resources = p->cfg.max_resources };
	p->core.hooks = (struct core_hooks){
		.ctx = p, .target = hook_target, .sent = hook_sent, .step = hook_step,
		.wants_reports = hook_wants_reports, .rollout_gen = hook_rollout_gen,
		.rollout_json = hook_rollout_json, .released = hook_released, .write_note = hook_write_note,
	};
	pthread_mutex_init(&p->auth.token_lock, NULL);
	p->auth.insecure = p->cfg.insecure;
	p->http.listen_fd = -1;

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
	p->auth.tls = p->tls;
	p->core.persist = open_backend(&p->cfg, err, errlen);
	if (!p->core.persist)
		return -1;
	p->core.tokens = tokens_open(p->core.persist, err, errlen);
	if (!p->core.tokens)
		return -1;
	p->auth.tokens = p->core.tokens;
	p->core.approvals = approvals_new(p->core.persist);
	if (approvals_load(p->core.approvals, err, errlen) < 0)
		return -1;
	if (p->tls && p->cfg.tls_ticket_rotation > 0) {
		/* a relay's backend keeps no keys: its own, in memory */
		char terr[256];
		p->tickets = ticket_keeper_open(p->core.persist, (int64_t)p->cfg.tls_ticket_rotation, terr,
						sizeof(terr));
		if (!p->tickets) {
			/* tickets are a speed-up: without them, full handshakes */
			log_error("%s: running without TLS session tickets", terr);
		}
	}
	bool relay = p->core.persist->ops->upstream != NULL;
	if (!relay && !p->cfg.insecure && !p->auth.admin_token && tokens_count(p->core.tokens, ROLE_ADMIN) == 0) {
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
	p->core.store = store_open(p->core.persist, &so, err, errlen);
	if (!p->core.store)
		return -1;
	/* the versions that overrode a guard, as far as the log goes back */
	p->core.overrides = overrides_new();
	if (overrides_load(p->core.overrides, p->core.persist, p->cfg.history_keep ? p->cfg.history_keep : 1,
			   err, errlen) < 0)
		return -1;
	int64_t poll_window = (int64_t)(p->cfg.heartbeat * 3000);
	p->core.nodes = nodes_open(p->core.persist, p->cfg.max_nodes, poll_window, err, errlen);
	if (!p->core.nodes)
		return -1;
	struct gate_options go = plane_gate_options(&p->cfg);
	p->gate = gate_new(&go, err, errlen);
	if (!p->gate && err[0])
		return -1;
	struct rollout_options ro = {
		.mode = p->cfg.rollout, .stages = p->cfg.stages, .bake = p->cfg.bake, .ack_timeout = p->cfg.ack_timeout,
	};
	p->rollout = rollout_open(&p->core, p->gate, &ro, err, errlen);
	if (!p->rollout)
		return -1;
	p->api = (struct api){
		.cfg = { .max_body = p->cfg.max_body, .max_request = p->cfg.max_request, .max_depth = p->cfg.max_depth,
			 .heartbeat = p->cfg.heartbeat, .rollout = p->cfg.rollout,
			 .allow_unknown_fields = p->cfg.allow_unknown_fields },
		.core = &p->core, .auth = &p->auth, .http = &p->http, .rollout = p->rollout, .gate = p->gate,
	};
	if (p->cfg.sealed_secrets) {
		if (sealed_conf_load(p->cfg.sealed_secrets, &p->sealed, err, errlen) < 0)
			return -1;
		p->core.sealed = &p->sealed;
		log_info("--sealed-secrets: secrets are kept sealed (recovery key %s)", p->sealed.kid);
		store_rdlock(p->core.store);
		sealed_log_plaintext(p->core.store);
		store_rdunlock(p->core.store);
	}
	nodes_set_target(p->core.nodes, target_cb, p, p->cfg.lag_alert);
	nodes_set_relay_up(p->core.nodes, relay_up_cb, p, relay);
	nodes_set_approve_relay_keys(p->core.nodes, p->cfg.approve_relay_keys);
	nodes_set_approvals(p->core.nodes, p->core.approvals);
	p->core.pushes = pushcache_new(p->core.store, PUSH_CACHE_ENTRIES, PUSH_CACHE_BYTES);
	pushcache_set_target(p->core.pushes, target_cb, p);
	if (p->cfg.signing_key) {
		int64_t ttl = (int64_t)p->cfg.statement_ttl;
		int64_t refresh = (int64_t)p->cfg.heartbeat;
		if (refresh > ttl / 4)
			refresh = ttl / 4;
		p->core.digests = digests_new(p->core.store);
		p->core.statements = statements_new(p->core.store, p->core.digests, ttl, refresh);
		statements_set_overrides(p->core.statements, p->core.overrides);
		if (statements_load_key(p->core.statements, p->cfg.signing_key, err, errlen) < 0)
			return -1;
		pushcache_set_digests(p->core.pushes, p->core.digests);
	} else if (relay) {
		/* a relay passes the upstream's statements on, never signs */
		int64_t refresh = (int64_t)p->cfg.heartbeat;
		p->core.statements = statements_new(p->core.store, NULL, (int64_t)p->cfg.statement_ttl, refresh);
		statements_set_source(p->core.statements, fetch_statement, p);
	}
	p->core.fresh = freshness_new();
	p->core.events = events_new(p->cfg.heartbeat);
	if (events_start(p->core.events, err, errlen) < 0)
		return -1;
	gate_set_events(p->gate, p->core.events);
	p->core.freeze = freeze_state_new(p->core.persist, p->core.events);
	p->core.hub = hub_new(&p->core, store_version(p->core.store));
	if (hub_start(p->core.hub, err, errlen) < 0)
		return -1;
	/* a shared store: what other replicas commit reaches our nodes too */
	struct persist_follow f = { .ctx = p, .store = follow_cb, .node = follow_node, .token = follow_token,
				    .rollout = follow_rollout, .statement = follow_statement, .resync = follow_resync,
				    .approvals = follow_approvals,
				    .catchup = follow_catchup, .overridden = follow_overridden };
	if (p->core.persist->ops->follow && p->core.persist->ops->follow(p->core.persist, &f, err, errlen) < 0)
		return -1;
	/* a commit to etcd may wait seconds: never on the threads that
	 * serve the streams */
	if (p->core.persist->ops->follow && !(p->core.writer = writer_start(&p->core, &p->api, err, errlen)))
		return -1;
	p->http.opt = (struct http_options){
		.listen = p->cfg.listen,
		.threads = (unsigned)p->cfg.threads,
		.max_connections = (unsigned)p->cfg.max_connections,
		.max_pending_per_address = (unsigned)p->cfg.max_pending_per_address,
		.header_timeout = p->cfg.header_timeout,
		.send_timeout = p->cfg.send_timeout,
		.max_request = p->cfg.max_request,
	};
	p->http.routes = api_routes;
	p->http.ctx = &p->api;
	p->http.core = &p->core;
	p->http.auth = &p->auth;
	p->http.tls = p->tls;
	p->http.tickets = p->tickets;
	if (http_start(&p->http, err, errlen) < 0)
		return -1;
	if (p->cfg.insecure) {
		log_warn("--insecure: reads are open and any client may sync as any node; for a lab on loopback only");
		if (!p->auth.admin_token && !relay)
			log_warn("--insecure without --admin-token-file: anyone who can reach %s can write",
				 p->http.listen_addr);
	}
	if (p->cfg.allow_unknown_fields)
		log_info("--allow-unknown-fields: writes may carry fields the schema does not know (kept as they "
			 "are); drop it when the migration is done");
	if (!p->tls && !http_listens_on_loopback(&p->http)) {
		log_warn("**************************************************************************");
		log_warn("WARNING: %s is not a loopback address and TLS is off (no --tls-cert):", p->http.listen_addr);
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
	atomic_store(&p->core.stopping, true);
	/* other replicas' changes stop here: what the follower touches (the
	 * store, the nodes, the tokens, the hub) is freed below */
	if (p->core.persist && p->core.persist->ops->unfollow)
		p->core.persist->ops->unfollow(p->core.persist);
	if (p->http.httpd)
		http_quiesce(&p->http);
	events_stop(p->core.events);
	if (p->core.hub)
		hub_stop(p->core.hub);
	writer_stop(p->core.writer);   /* answers what waits; the requests resume */
	p->core.writer = NULL;
	http_stop(&p->http);
	if (p->core.nodes && nodes_flush(p->core.nodes, err, sizeof(err)) < 0)
		log_error("nodes: cannot save node records at exit: %s", err);
	rollout_save(p->rollout);
	hub_free(p->core.hub);
	p->core.hub = NULL;
	gate_set_events(p->gate, NULL);
	freeze_state_free(p->core.freeze);
	p->core.freeze = NULL;
	events_free(p->core.events);
	freshness_free(p->core.fresh);
	p->core.fresh = NULL;
	p->core.events = NULL;
	pushcache_free(p->core.pushes);
	p->core.pushes = NULL;
	statements_free(p->core.statements);
	p->core.statements = NULL;
	overrides_free(p->core.overrides);
	p->core.overrides = NULL;
	digests_free(p->core.digests);
	p->core.digests = NULL;
	rollout_free(p->rollout);
	p->rollout = NULL;
	gate_free(p->gate);
	p->gate = NULL;
	nodes_free(p->core.nodes);
	p->core.nodes = NULL;
	tokens_free(p->core.tokens);
	approvals_free(p->core.approvals);
	p->core.approvals = NULL;
	p->core.tokens = NULL;
	ticket_keeper_free(p->tickets);
	p->tickets = NULL;
	store_free(p->core.store);
	p->core.store = NULL;
	persist_close(p->core.persist);
	p->core.persist = NULL;
	if (p->auth.admin_token)
		free_secret(p->auth.admin_token, strlen(p->auth.admin_token));
	p->auth.admin_token = NULL;
	tls_free(p->tls);
	p->tls = NULL;
	pthread_mutex_destroy(&p->auth.token_lock);
}
