/* plane.h: the control plane process: its configuration, the parts it is
 * made of, and their start-up and shutdown order. One struct plane per
 * process; handlers reach every part through it. plane.c wires the wings:
 * it fills each one's options from the plane's, hands api/'s route table
 * to the server, and sets the hooks through which core tells the rollout
 * and the gates what happened. */
#ifndef TETHER_PLANE_H
#define TETHER_PLANE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/api.h"
#include "core/core.h"
#include "core/sealed.h"
#include "http/auth.h"
#include "http/http.h"
#include "options.h"
#include "rollout/gate.h"

struct plane_config {
	char *listen;
	char *data;
	char *store;                   /* the persistence backend: sqlite or etcd */
	char *etcd;                    /* etcd endpoints, comma-separated */
	char *etcd_prefix;
	char *etcd_ca, *etcd_cert, *etcd_key, *etcd_token_file;
	double lease_ttl;              /* the replica's etcd lease */
	char *upstream;                /* relay mode: the planes it follows, comma-separated */
	char *upstream_token_file, *upstream_ca, *upstream_cert, *upstream_key;
	char *relay_id;                /* its name upstream (default: the host name) */
	char *admin_token_file;
	char *rollout;
	char *stages;
	char *log_level;
	char *tls_cert, *tls_key;      /* HTTPS */
	double tls_ticket_rotation;    /* seconds; 0: no session tickets */
	char *client_ca;               /* mutual TLS: nodes by certificate */
	bool cert_roles;               /* and people, by OU=tether-ROLE */
	char *signing_key;             /* statements signed with it */
	char *sealed_secrets;          /* the recovery key's public file: secrets are kept sealed */
	bool approve_relay_keys;       /* a relay's first key for a node waits for an admin */
	bool insecure;                 /* open reads and anonymous nodes (a lab) */
	bool allow_unknown_fields;     /* writes may carry fields the schema does not know (a migration) */
	double statement_ttl;
	double heartbeat;
	double bake;
	char *gate_error_rate;         /* traffic gates: "0.01" or "2x"; NULL: none */
	char *gate_latency_p99;        /* "50" (ms) or "2x"; NULL: none */
	uint64_t gate_min_requests;    /* 0: not given (100) */
	char *gate_unjudged;           /* "pass", "hold", "revert"; NULL: hold */
	double ack_timeout;
	double lag_alert;
	double send_timeout;
	double tombstone_max_age;
	uint64_t max_body;
	uint64_t max_request;
	uint64_t max_resources;
	uint64_t max_depth;
	uint64_t max_nodes;
	uint64_t tombstone_keep;
	uint64_t history_keep;           /* versions the log keeps */
	double history_max_age;          /* seconds; 0: no age limit */
	uint64_t threads;
	uint64_t max_connections;
	double header_timeout;           /* seconds for a whole header block */
	uint64_t max_pending_per_address;
};

extern const struct opt_def plane_options[];

void plane_config_defaults(struct plane_config *c);
/* Cross-field checks after parsing. Returns 0, or -1 with err. */
int plane_config_check(struct plane_config *c, char *err, size_t errlen);

struct plane {
	struct plane_config cfg;
	struct core core;              /* store, streams, node records, writes (core/core.h) */
	struct auth auth;              /* who is asking (http/auth.h) */
	struct http_server http;       /* the server and its route table (http/http.h) */
	struct api api;                /* what every handler gets (api/api.h) */
	struct rollout *rollout;
	struct gate *gate;             /* traffic-aware gates; NULL: none configured */
	struct plane_tls *tls;         /* NULL: plain HTTP */
	struct ticket_keeper *tickets;       /* TLS session-ticket keys; NULL: none */
	struct sealed_conf sealed;     /* --sealed-secrets (core.sealed points here) */
	struct {                       /* the follower's thread: a relay's catch-up (plane.c) */
		bool on;
		uint64_t before;
		size_t changes;
	} catchup;
};

/* Opens the store, loads node records, starts the hub and HTTP server. */
int plane_start(struct plane *p, char *err, size_t errlen);
/* Closes every stream, stops the server, flushes node records, closes the
 * store. Safe on a partly started plane. */
void plane_stop(struct plane *p);
/* (Re)reads --admin-token-file. Returns 0, or -1 with err. */
int plane_load_token(struct plane *p, char *err, size_t errlen);
/* SIGHUP: the admin token, the TLS certificate and key (new connections
 * take them; open streams keep theirs) and the signing key, each kept as
 * it was when its file fails to load. */
void plane_reload(struct plane *p);
/* The options of each wing, from the plane's. */
struct gate_options plane_gate_options(const struct plane_config *c);

#endif
