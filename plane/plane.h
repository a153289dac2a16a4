/* plane.h: the control plane process: its configuration, the parts it is
 * made of, and their start-up and shutdown order. One struct plane per
 * process; handlers reach every part through it. */
#ifndef TETHER_PLANE_H
#define TETHER_PLANE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http/auth.h"
#include "options.h"

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
	char *client_ca;               /* mutual TLS: nodes by certificate */
	bool cert_roles;               /* and people, by OU=tether-ROLE */
	char *signing_key;             /* statements signed with it */
	bool insecure;                 /* open reads and anonymous nodes (a lab) */
	double statement_ttl;
	double heartbeat;
	double bake;
	char *gate_error_rate;         /* traffic gates: "0.01" or "2x"; NULL: none */
	char *gate_latency_p99;        /* "50" (ms) or "2x"; NULL: none */
	uint64_t gate_min_requests;    /* 0: not given (100) */
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

struct plane_counters {
	atomic_uint_fast64_t writes, write_errors, refused_writes;
	atomic_uint_fast64_t pushes, snapshots, push_bytes, heartbeats;
	atomic_uint_fast64_t polls, polls_not_modified;
	atomic_uint_fast64_t streams_opened, streams_replaced;
	atomic_uint_fast64_t requests;
	atomic_uint_fast64_t auth_refused[REFUSED_N];
};

struct plane {
	struct plane_config cfg;
	struct persist *persist;       /* the store's backend (--store) */
	struct writer *writer;         /* writes off the HTTP threads (a shared backend) */
	struct store *store;
	struct nodes *nodes;
	struct pushcache *pushes;
	struct rollout *rollout;
	struct hub *hub;
	struct events *events;         /* GET /v1/events */
	struct gate *gate;             /* traffic-aware gates; NULL: none configured */
	struct freshness *fresh;       /* whether it can vouch that it is current */
	struct {                       /* the follower's thread: a relay's catch-up (plane.c) */
		bool on;
		uint64_t before;
		size_t changes;
	} catchup;
	struct tokens *tokens;
	struct plane_tls *tls;         /* NULL: plain HTTP */
	struct digests *digests;       /* NULL: no signing */
	struct statements *statements;
	struct httpd *httpd;
	int listen_fd;
	char listen_addr[80];          /* "127.0.0.1:7070", the real port */
	pthread_mutex_t token_lock;
	char *admin_token;             /* NULL: writes need no token */
	char boot_id[12];
	atomic_uint_fast64_t nonce_seq;
	struct plane_counters ctr;
	atomic_bool stopping;
	int64_t started_ms;
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
/* Writes a fresh push nonce: "<boot id>.<sequence>". */
void plane_nonce(struct plane *p, char *out, size_t cap);
/* The version node should hold now: the newest, or its rollout target. */
uint64_t plane_target(struct plane *p, const char *node);
/* Records a push sent to node (node record and rollout counters). */
void plane_sent(struct plane *p, const char *node, uint64_t version, const char *nonce, bool has_content);

#endif
