/* plane_config.c: tether-plane's options, their defaults and checks. */
#include "core/nodes.h"
#include "plane.h"
#include "rollout/gate.h"
#include "rollout/rollout.h"
#include "xmalloc.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const rollout_choices[] = { "immediate", "staged", NULL };
static const char *const store_choices[] = { "sqlite", "etcd", NULL };
static const char *const level_choices[] = { "debug", "info", "warn", "error", NULL };

#define OFF(f) offsetof(struct plane_config, f)

const struct opt_def plane_options[] = {
	{ "listen", 'l', OPT_STRING, OFF(listen), 0, 0, NULL, "HOST:PORT",
	  "address to serve on (default 127.0.0.1:7070; port 0 picks a free one)" },
	{ "data", 'd', OPT_STRING, OFF(data), 0, 0, NULL, "DIR",
	  "directory of the embedded SQLite store (default /var/lib/tether)" },
	{ "store", 0, OPT_CHOICE, OFF(store), 0, 0, store_choices, "sqlite|etcd",
	  "where the state lives: sqlite (embedded, in --data; the default) or etcd (shared by replicas)" },
	{ "etcd", 0, OPT_STRING, OFF(etcd), 0, 0, NULL, "URL[,URL...]", "etcd's client endpoints (--store etcd)" },
	{ "etcd-prefix", 0, OPT_STRING, OFF(etcd_prefix), 0, 0, NULL, "PREFIX",
	  "the keys' prefix in etcd, ending in / (default /tether/)" },
	{ "etcd-ca", 0, OPT_STRING, OFF(etcd_ca), 0, 0, NULL, "FILE", "the CA of etcd's certificates" },
	{ "etcd-cert", 0, OPT_STRING, OFF(etcd_cert), 0, 0, NULL, "FILE", "a client certificate for etcd" },
	{ "etcd-key", 0, OPT_STRING, OFF(etcd_key), 0, 0, NULL, "FILE", "its key" },
	{ "etcd-token-file", 0, OPT_STRING, OFF(etcd_token_file), 0, 0, NULL, "FILE",
	  "USER:PASSWORD for etcd's own authentication" },
	{ "lease-ttl", 0, OPT_SECONDS, OFF(lease_ttl), 2, 300, NULL, "SECONDS",
	  "--store etcd: the replica's etcd lease (default 10): a replica silent this long is gone, and "
	  "another takes over as the rollout controller" },
	{ "upstream", 0, OPT_STRING, OFF(upstream), 0, 0, NULL, "URL[,URL...]",
	  "relay mode: follow this plane (the origin, or another relay) and serve its state to nodes" },
	{ "upstream-token-file", 0, OPT_STRING, OFF(upstream_token_file), 0, 0, NULL, "FILE",
	  "the relay's token for its upstream (tetherctl token create --role relay)" },
	{ "upstream-ca", 0, OPT_STRING, OFF(upstream_ca), 0, 0, NULL, "FILE", "the CA of the upstream's certificate" },
	{ "upstream-cert", 0, OPT_STRING, OFF(upstream_cert), 0, 0, NULL, "FILE",
	  "a client certificate for the upstream (mutual TLS)" },
	{ "upstream-key", 0, OPT_STRING, OFF(upstream_key), 0, 0, NULL, "FILE", "its key" },
	{ "relay-id", 0, OPT_STRING, OFF(relay_id), 0, 0, NULL, "NAME",
	  "the relay's name upstream, in the origin's via column (default: the host name)" },
	{ "heartbeat", 0, OPT_SECONDS, OFF(heartbeat), 0.1, 3600, NULL, "SECONDS",
	  "heartbeat interval on streams (default 10)" },
	{ "admin-token-file", 0, OPT_STRING, OFF(admin_token_file), 0, 0, NULL, "FILE",
	  "the bootstrap admin token ('Authorization: Bearer TOKEN'); it makes the other tokens" },
	{ "tls-cert", 0, OPT_STRING, OFF(tls_cert), 0, 0, NULL, "FILE",
	  "serve HTTPS with this certificate (PEM, chain after it); needs --tls-key" },
	{ "tls-key", 0, OPT_STRING, OFF(tls_key), 0, 0, NULL, "FILE", "the certificate's private key (PEM)" },
	{ "tls-ticket-rotation", 0, OPT_SECONDS, OFF(tls_ticket_rotation), 0, 604800, NULL, "SECONDS",
	  "TLS session resumption: the session-ticket key (kept in the store, shared by replicas) is replaced "
	  "this often, the previous one still accepted for one more period, and a ticket lives one period "
	  "(default 86400); 0: no session tickets (every handshake is a full one)" },
	{ "client-ca", 0, OPT_STRING, OFF(client_ca), 0, 0, NULL, "FILE",
	  "mutual TLS: a client certificate this CA signs identifies a node (its CN)" },
	{ "cert-roles", 0, OPT_FLAG, OFF(cert_roles), 0, 0, NULL, NULL,
	  "with --client-ca: a certificate whose subject has OU=tether-admin, tether-operator, tether-reader or "
	  "tether-relay has that role, named by its CN (without it every client certificate is a node)" },
	{ "signing-key", 0, OPT_STRING, OFF(signing_key), 0, 0, NULL, "FILE",
	  "sign every push's and heartbeat's statement with this Ed25519 key (tetherctl keygen)" },
	{ "sealed-secrets", 0, OPT_STRING, OFF(sealed_secrets), 0, 0, NULL, "RECOVERY.pub",
	  "keep secrets sealed: a write of a plaintext secret, of an envelope not sealed to this recovery key "
	  "(tetherctl keygen --recovery), or missing a wrap for a node key whose subscription reaches it is "
	  "refused (docs/protocol.md \"Sealed secrets\")" },
	{ "approve-relay-keys", 0, OPT_FLAG, OFF(approve_relay_keys), 0, 0, NULL, NULL,
	  "a node's first key (or first after a revoke) that comes through a relay waits for an admin's "
	  "POST /v1/nodes/ID/key/approve before secrets are sealed to it (without it: trust on first use)" },
	{ "statement-ttl", 0, OPT_SECONDS, OFF(statement_ttl), 10, 31536000, NULL, "SECONDS",
	  "how long a signed statement stays valid (default 3600)" },
	{ "allow-unknown-fields", 0, OPT_FLAG, OFF(allow_unknown_fields), 0, 0, NULL, NULL,
	  "take writes whose bodies carry fields the schema does not know, as earlier planes did, for a migration "
	  "(without it such a write is refused 422, naming the field and the nearest known one)" },
	{ "insecure", 0, OPT_FLAG, OFF(insecure), 0, 0, NULL, NULL,
	  "a lab on loopback: open reads and anonymous nodes (writes too, unless --admin-token-file)" },
	{ "rollout", 0, OPT_CHOICE, OFF(rollout), 0, 0, rollout_choices, "POLICY",
	  "immediate (default) or staged" },
	{ "stages", 0, OPT_STRING, OFF(stages), 0, 0, NULL, "LIST",
	  "staged rollout percentages (default 1,10,100)" },
	{ "bake", 0, OPT_SECONDS, OFF(bake), 0, 86400, NULL, "SECONDS",
	  "time each rollout stage bakes (default 60)" },
	{ "gate-error-rate", 0, OPT_STRING, OFF(gate_error_rate), 0, 0, NULL, "R|Nx",
	  "staged: a stage's node whose 5xx rate on a route is above the baseline's by R (0..1, like 0.01), or "
	  "above N times the baseline's (like 2x), fails the stage and reverts it" },
	{ "gate-latency-p99", 0, OPT_STRING, OFF(gate_latency_p99), 0, 0, NULL, "MS|Nx",
	  "staged: a stage's node whose p99 latency on a route is above the baseline's by MS milliseconds, or "
	  "above N times the baseline's (like 2x), fails the stage and reverts it" },
	{ "gate-min-requests", 0, OPT_UINT, OFF(gate_min_requests), 1, 1000000000, NULL, "N",
	  "the gates judge a route of a node only with at least N requests in its window (default 100); a stage "
	  "whose node saw fewer on every route passes flagged low_traffic" },
	{ "gate-unjudged", 0, OPT_STRING, OFF(gate_unjudged), 0, 0, NULL, "pass|hold|revert",
	  "a stage whose nodes do not count traffic (or never reported any) cannot be judged: hold it (the "
	  "default), revert it, or pass it flagged unjudged" },
	{ "ack-timeout", 0, OPT_SECONDS, OFF(ack_timeout), 1, 86400, NULL, "SECONDS",
	  "a stage's node that has not ACKed its version in this long fails the rollout (default 60)" },
	{ "lag-alert", 0, OPT_SECONDS, OFF(lag_alert), 0, 31536000, NULL, "SECONDS",
	  "flag a node lagging when its acked version trails its target this long (default 60)" },
	{ "send-timeout", 0, OPT_SECONDS, OFF(send_timeout), 1, 3600, NULL, "SECONDS",
	  "close a connection that makes no progress for this long (default 3 heartbeats, at least 30)" },
	{ "max-body", 0, OPT_UINT, OFF(max_body), 64, 64 << 20, NULL, "BYTES",
	  "largest resource body (default 1048576)" },
	{ "max-request", 0, OPT_UINT, OFF(max_request), 1024, 1ULL << 30, NULL, "BYTES",
	  "largest request body, batches included (default 33554432)" },
	{ "max-resources", 0, OPT_UINT, OFF(max_resources), 1, 100000000, NULL, "N",
	  "most live resources (default 1000000)" },
	{ "max-depth", 0, OPT_UINT, OFF(max_depth), 2, 512, NULL, "N",
	  "deepest JSON nesting accepted (default 32)" },
	{ "max-nodes", 0, OPT_UINT, OFF(max_nodes), 1, 10000000, NULL, "N",
	  "most node records (default 100000)" },
	{ "tombstone-keep", 0, OPT_UINT, OFF(tombstone_keep), 1, 100000000, NULL, "N",
	  "tombstones kept at most; older nodes get a snapshot (default 100000)" },
	{ "tombstone-max-age", 0, OPT_SECONDS, OFF(tombstone_max_age), 0, 31536000, NULL, "SECONDS",
	  "drop tombstones older than this; 0 keeps them (default 604800)" },
	{ "history-keep", 0, OPT_UINT, OFF(history_keep), 0, 100000000, NULL, "N",
	  "versions the history keeps (who, when, why, what changed); 0 keeps none (default 1000)" },
	{ "history-max-age", 0, OPT_SECONDS, OFF(history_max_age), 0, 315360000, NULL, "SECONDS",
	  "drop history older than this; 0 keeps it regardless of age (default 2592000)" },
	{ "threads", 0, OPT_UINT, OFF(threads), 1, 64, NULL, "N",
	  "HTTP worker threads (default 2)" },
	{ "max-connections", 0, OPT_UINT, OFF(max_connections), 16, 1000000, NULL, "N",
	  "most open connections, streams included (default: from the file limit)" },
	{ "header-timeout", 0, OPT_SECONDS, OFF(header_timeout), 0.1, 3600, NULL, "SECONDS",
	  "close a connection whose request line and headers are not all in after this long, however slowly "
	  "they trickle (default 10)" },
	{ "max-pending-per-address", 0, OPT_UINT, OFF(max_pending_per_address), 1, 1000000, NULL, "N",
	  "connections one client address may hold while they still send their headers; past it, its oldest "
	  "one sending for over half the header timeout is closed to make room (default 256)" },
	{ "log-level", 0, OPT_CHOICE, OFF(log_level), 0, 0, level_choices, "LEVEL",
	  "debug, info (default), warn or error" },
	{ NULL, 0, 0, 0, 0, 0, NULL, NULL, NULL },
};

void plane_config_defaults(struct plane_config *c)
{
	memset(c, 0, sizeof(*c));
	c->listen = xstrdup("127.0.0.1:7070");
	c->data = xstrdup("/var/lib/tether");
	c->store = xstrdup("sqlite");
	c->rollout = xstrdup("immediate");
	c->stages = xstrdup("1,10,100");
	c->log_level = xstrdup("info");
	c->heartbeat = 10;
	c->lease_ttl = 10;
	c->statement_ttl = 3600;
	c->tls_ticket_rotation = 86400;
	c->bake = 60;
	c->ack_timeout = 60;
	c->lag_alert = 60;
	c->send_timeout = 0;
	c->tombstone_max_age = 7 * 86400;
	c->max_body = 1 << 20;
	c->max_request = 32 << 20;
	c->max_resources = 1000000;
	c->max_depth = 32;
	c->max_nodes = 100000;
	c->tombstone_keep = 100000;
	c->history_keep = 1000;
	c->history_max_age = 30 * 86400;
	c->threads = 2;
	c->max_connections = 0;
	c->header_timeout = 10;
	c->max_pending_per_address = 256;
}

int plane_config_check(struct plane_config *c, char *err, size_t errlen)
{
	unsigned stages[ROLLOUT_MAX_STAGES];
	size_t nstages;
	if (rollout_parse_stages(c->stages, stages, &nstages, err, errlen) < 0)
		return -1;
	/* both are kept in whole seconds: a fraction would be 0 (no limit) */
	if (c->history_max_age > 0 && c->history_max_age < 1) {
		snprintf(err, errlen, "history-max-age (%g) must be 0 (no age limit) or at least 1 second",
			 c->history_max_age);
		return -1;
	}
	if (c->tombstone_max_age > 0 && c->tombstone_max_age < 1) {
		snprintf(err, errlen, "tombstone-max-age (%g) must be 0 (no age limit) or at least 1 second",
			 c->tombstone_max_age);
		return -1;
	}
	if (c->max_body > c->max_request) {
		snprintf(err, errlen, "max-body (%llu) must not exceed max-request (%llu)",
			 (unsigned long long)c->max_body, (unsigned long long)c->max_request);
		return -1;
	}
	if ((c->tls_cert == NULL) != (c->tls_key == NULL)) {
		snprintf(err, errlen, "--tls-cert and --tls-key go together");
		return -1;
	}
	bool etcd = strcmp(c->store, "etcd") == 0;
	if (etcd && !c->etcd) {
		snprintf(err, errlen, "--store etcd needs --etcd URL[,URL...]");
		return -1;
	}
	if (!etcd && (c->etcd || c->etcd_prefix || c->etcd_ca || c->etcd_cert || c->etcd_key || c->etcd_token_file)) {
		snprintf(err, errlen, "the --etcd options need --store etcd");
		return -1;
	}
	if ((c->etcd_cert == NULL) != (c->etcd_key == NULL)) {
		snprintf(err, errlen, "--etcd-cert and --etcd-key go together");
		return -1;
	}
	if (c->etcd_prefix && (!c->etcd_prefix[0] || c->etcd_prefix[strlen(c->etcd_prefix) - 1] != '/')) {
		snprintf(err, errlen, "etcd-prefix: '%s' must end with '/'", c->etcd_prefix);
		return -1;
	}
	if (c->upstream && (etcd || c->signing_key)) {
		snprintf(err, errlen, "--upstream makes a relay: it keeps no store (--store etcd) and signs nothing "
			 "(--signing-key); the origin does both");
		return -1;
	}
	if (!c->upstream && (c->upstream_token_file || c->upstream_ca || c->upstream_cert || c->upstream_key ||
			     c->relay_id)) {
		snprintf(err, errlen, "the --upstream-* and --relay-id options need --upstream");
		return -1;
	}
	if ((c->upstream_cert == NULL) != (c->upstream_key == NULL)) {
		snprintf(err, errlen, "--upstream-cert and --upstream-key go together");
		return -1;
	}
	if (c->relay_id && !nodes_id_valid(c->relay_id)) {
		snprintf(err, errlen, "relay-id: '%.64s' must match [A-Za-z0-9._-]{1,200}", c->relay_id);
		return -1;
	}
	struct gate_options go = plane_gate_options(c);
	if (gate_check_config(&go, err, errlen) < 0)
		return -1;
	if (c->upstream) {
		/* a relay serves the targets its upstream's rollouts say, and
		 * drops tombstones when the upstream does */
		free(c->rollout);
		c->rollout = xstrdup("staged");
		c->tombstone_max_age = 0;
	}
	if (c->cert_roles && !c->client_ca) {
		snprintf(err, errlen, "--cert-roles needs --client-ca (the CA that signs the people's certificates)");
		return -1;
	}
	if (c->tls_ticket_rotation > 0 && c->tls_ticket_rotation < 1) {
		snprintf(err, errlen, "--tls-ticket-rotation: 0 (no session tickets) or at least 1 second");
		return -1;
	}
	if (c->client_ca && !c->tls_cert) {
		snprintf(err, errlen, "--client-ca needs --tls-cert and --tls-key (client certificates travel in TLS)");
		return -1;
	}
	if (c->signing_key && c->statement_ttl < 3 * c->heartbeat) {
		snprintf(err, errlen, "statement-ttl (%g) must be at least three heartbeats (%g)", c->statement_ttl,
			 3 * c->heartbeat);
		return -1;
	}
	if (c->send_timeout == 0)
		c->send_timeout = c->heartbeat * 3 < 30 ? 30 : c->heartbeat * 3;
	if (c->send_timeout <= c->heartbeat) {
		snprintf(err, errlen, "send-timeout (%g) must be longer than the heartbeat (%g)",
			 c->send_timeout, c->heartbeat);
		return -1;
	}
	return 0;
}

struct gate_options plane_gate_options(const struct plane_config *c)
{
	return (struct gate_options){
		.error_rate = c->gate_error_rate,
		.latency_p99 = c->gate_latency_p99,
		.min_requests = c->gate_min_requests,
		.unjudged = c->gate_unjudged,
		.max_nodes = c->max_nodes,
		.rollout = c->rollout,
		.relay = c->upstream != NULL,
	};
}
