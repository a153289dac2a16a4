/* agent_config.h: tetherd's options (command line and the [agent] section
 * of -c FILE), their defaults and checks. */
#ifndef TETHER_AGENT_CONFIG_H
#define TETHER_AGENT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "options.h"

/* The most planes --plane lists (replicas or relays of one plane). */
#define AGENT_MAX_PLANES 16
/* --max-draining not given: twice the live workers (agent/guard.c). */
#define AGENT_DRAINING_AUTO UINT64_MAX

struct agent_config {
	char *plane;               /* as given; checked: the URLs joined by commas */
	char **planes;             /* plane split: nplanes base URLs, no trailing slash */
	size_t nplanes;
	char *node;
	char *state_dir;
	char *output_dir;
	char *secrets_dir;          /* --secrets-dir (NULL: OUTPUT_DIR/secrets) */
	char *transport;
	char *labels;
	char *sub;
	char *consumer;
	char *check;
	char *reload;
	char *log_level;
	char *pidfile;             /* the consumer's master process */
	char *signal;              /* sent to it to reload: HUP (nginx), USR2 (haproxy) */
	char *marker;              /* HOST:PORT of the generation marker, or "off" */
	char *health;              /* URL probed after a reload */
	char *nginx;               /* binaries for the default checks */
	char *haproxy;
	char *base_config;         /* haproxy: the operator's base, checked with ours */
	char *ca_file;             /* the CA of the plane's certificate (default: the system's) */
	char *cert, *key;          /* mutual TLS: this node's certificate and key */
	char *token_file;          /* this node's bearer token */
	char *trust;               /* trusted statement keys: verify every push */
	char *approvers;           /* approver keys: a push needs `approvals` of them besides the statement */
	uint64_t approvals;        /* distinct approver keys a version needs (0: none) */
	char *metrics_file;        /* Prometheus text for node_exporter's textfile collector */
	char *metrics_listen;      /* HOST:PORT serving the same text over HTTP */
	char *traffic_listen;      /* loopback ADDR:PORT: the access log over syslog (UDP) */
	char *traffic_socket;      /* haproxy's stats socket: its per-backend counters */
	char *runtime_api;         /* haproxy's admin-level stats socket: endpoint changes without reloads */
	double max_staleness;      /* newest statement older than this: stale (0: its expiry only) */
	bool strict;
	bool once;
	bool rotate_key;           /* make a new node key at start, endorsed by the old one */
	bool check_config;
	double stream_timeout;     /* 0: three advertised heartbeats */
	double backoff_max;
	double backoff_min;
	double poll_wait;
	double poll_interval;        /* between plain polls (poll_wait 0) */
	double command_timeout;
	double connect_timeout;
	double move_jitter;        /* the plane says stale: probe the others after up to this long */
	double reload_timeout;     /* until the marker shows the new generation */
	double health_timeout;
	double min_reload_interval;
	double max_defer;          /* the longest the drain guard holds a reload (0: never) */
	uint64_t max_draining;     /* hold a reload while more old workers drain (AGENT_DRAINING_AUTO) */
	uint64_t health_retries;
	uint64_t generations;
	uint64_t max_push_bytes;
	uint64_t max_depth;
};

extern const struct opt_def agent_options[];

void agent_config_defaults(struct agent_config *c);
/* Fills derived defaults (node from the host name, planes from plane) and
 * checks the whole configuration. Returns 0, or -1 with err. */
int agent_config_check(struct agent_config *c, char *err, size_t errlen);
void agent_config_release(struct agent_config *c);

#endif
