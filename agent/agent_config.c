/* agent_config.c: tetherd's options, defaults and checks (see
 * agent_config.h). */
#include "agent_config.h"
#include "buf.h"
#include "consumer/render.h"
#include "labels.h"
#include "listen.h"
#include "resource.h"
#include "traffic/syslog.h"
#include "urllist.h"
#include "util.h"
#include "xmalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const transports[] = { "sse", "poll", NULL };
static const char *const consumers[] = { "files", "nginx", "haproxy", NULL };
static const char *const levels[] = { "debug", "info", "warn", "error", NULL };
static const char *const signals[] = { "HUP", "USR1", "USR2", NULL };

#define OFF(f) offsetof(struct agent_config, f)

const struct opt_def agent_options[] = {
	{ "plane", 'p', OPT_STRING, OFF(plane), 0, 0, NULL, "URL[,URL...]",
	  "the plane's URL (required: http:// or https://); several: replicas or relays, tried in turn" },
	{ "node", 'n', OPT_STRING, OFF(node), 0, 0, NULL, "ID", "this node's id (default: the host name)" },
	{ "state-dir", 's', OPT_STRING, OFF(state_dir), 0, 0, NULL, "DIR",
	  "last-good state and status.json (default /var/lib/tetherd)" },
	{ "output-dir", 'o', OPT_STRING, OFF(output_dir), 0, 0, NULL, "DIR",
	  "where the consumer's files go (default /etc/tether)" },
	{ "secrets-dir", 0, OPT_STRING, OFF(secrets_dir), 0, 0, NULL, "DIR",
	  "where nginx's and haproxy's secret files go, 0600 (absolute; default OUTPUT_DIR/secrets): a tmpfs "
	  "keeps them off the disk" },
	{ "transport", 't', OPT_CHOICE, OFF(transport), 0, 0, transports, "sse|poll",
	  "a Server-Sent Events stream (default) or ETag long-polling" },
	{ "labels", 'l', OPT_STRING, OFF(labels), 0, 0, NULL, "k=v,...", "labels the plane groups nodes by" },
	{ "sub", 0, OPT_STRING, OFF(sub), 0, 0, NULL, "PREFIXES", "receive only names with these prefixes" },
	{ "consumer", 0, OPT_CHOICE, OFF(consumer), 0, 0, consumers, "NAME", "files (default), nginx or haproxy" },
	{ "check", 0, OPT_STRING, OFF(check), 0, 0, NULL, "CMD",
	  "run before new files go live; non-zero exit is a NACK with its stderr" },
	{ "reload", 0, OPT_STRING, OFF(reload), 0, 0, NULL, "CMD", "run after new files went live" },
	{ "pidfile", 0, OPT_STRING, OFF(pidfile), 0, 0, NULL, "FILE",
	  "reload by signalling the process in FILE (the consumer's master) instead of --reload" },
	{ "signal", 0, OPT_CHOICE, OFF(signal), 0, 0, signals, "SIG",
	  "the reload signal: HUP (nginx's default), USR2 (haproxy's, master-worker mode)" },
	{ "marker", 0, OPT_STRING, OFF(marker), 0, 0, NULL, "HOST:PORT",
	  "nginx/haproxy: where the rendered config answers which generation it is, to confirm a reload "
	  "(default 127.0.0.1:7099; off to not confirm)" },
	{ "reload-timeout", 0, OPT_SECONDS, OFF(reload_timeout), 0.1, 600, NULL, "SECONDS",
	  "how long the consumer may take to serve a new generation (default 10)" },
	{ "health", 0, OPT_STRING, OFF(health), 0, 0, NULL, "URL",
	  "probed after a reload; a failure puts the old generation back and NACKs" },
	{ "health-timeout", 0, OPT_SECONDS, OFF(health_timeout), 0.05, 600, NULL, "SECONDS",
	  "one health probe (default 2)" },
	{ "health-retries", 0, OPT_UINT, OFF(health_retries), 1, 100, NULL, "N",
	  "health probes before giving up (default 3)" },
	{ "min-reload-interval", 0, OPT_SECONDS, OFF(min_reload_interval), 0, 3600, NULL, "SECONDS",
	  "pushes arriving sooner after a reload wait and are merged (default 0)" },
	{ "max-draining", 0, OPT_UINT, OFF(max_draining), 0, 100000, NULL, "N",
	  "nginx/haproxy with --pidfile: hold a reload while more than N old workers still drain "
	  "(default: twice the live workers)" },
	{ "max-defer", 0, OPT_SECONDS, OFF(max_defer), 0, 3600, NULL, "SECONDS",
	  "the longest a reload is held for draining workers; then it goes anyway (default 60; 0: never held)" },
	{ "generations", 0, OPT_UINT, OFF(generations), 2, 100, NULL, "N",
	  "nginx/haproxy generations kept on disk (default 3)" },
	{ "nginx", 0, OPT_STRING, OFF(nginx), 0, 0, NULL, "PATH", "nginx binary for the default check (default nginx)" },
	{ "haproxy", 0, OPT_STRING, OFF(haproxy), 0, 0, NULL, "PATH",
	  "haproxy binary for the default check (default haproxy)" },
	{ "base-config", 0, OPT_STRING, OFF(base_config), 0, 0, NULL, "FILE",
	  "haproxy: the operator's base configuration, checked together with ours" },
	{ "strict", 0, OPT_FLAG, OFF(strict), 0, 0, NULL, NULL, "refuse resources with unknown fields" },
	{ "ca-file", 0, OPT_STRING, OFF(ca_file), 0, 0, NULL, "FILE",
	  "CA certificates that sign the plane's certificate (default: the system's store)" },
	{ "cert", 0, OPT_STRING, OFF(cert), 0, 0, NULL, "FILE", "this node's client certificate (mutual TLS)" },
	{ "key", 0, OPT_STRING, OFF(key), 0, 0, NULL, "FILE", "the client certificate's private key" },
	{ "token-file", 0, OPT_STRING, OFF(token_file), 0, 0, NULL, "FILE",
	  "this node's token (tetherctl token create --node ID), read at every connection" },
	{ "trust", 0, OPT_STRING, OFF(trust), 0, 0, NULL, "FILE",
	  "public keys whose signed statements this node trusts; every push must verify" },
	{ "approvers", 0, OPT_STRING, OFF(approvers), 0, 0, NULL, "FILE",
	  "approver public keys (tetherctl keygen --approver): with --approvals K, a version is accepted only "
	  "when K of them approved it (needs --trust)" },
	{ "approvals", 0, OPT_UINT, OFF(approvals), 1, 32, NULL, "K",
	  "distinct approver keys of --approvers that must have approved a version (1..32, at most the keys "
	  "in the file)" },
	{ "max-staleness", 0, OPT_SECONDS, OFF(max_staleness), 0, 31536000, NULL, "SECONDS",
	  "with --trust: report 'stale' when the newest statement is older than this (default 0: at its expiry)" },
	{ "metrics-file", 0, OPT_STRING, OFF(metrics_file), 0, 0, NULL, "FILE",
	  "write Prometheus text here (node_exporter's textfile collector) after every change" },
	{ "metrics-listen", 0, OPT_STRING, OFF(metrics_listen), 0, 0, NULL, "HOST:PORT",
	  "serve the metrics over HTTP at /metrics (port 0 picks a free one)" },
	{ "traffic-listen", 0, OPT_STRING, OFF(traffic_listen), 0, 0, NULL, "ADDR:PORT",
	  "nginx/haproxy: count the live generation's traffic from its access log, sent over syslog to this "
	  "UDP address (loopback only: 127.0.0.0/8 or [::1]) for traffic-aware gates; off: do not count "
	  "(default: a free loopback port, kept in the state directory)" },
	{ "traffic-socket", 0, OPT_STRING, OFF(traffic_socket), 0, 0, NULL, "PATH",
	  "haproxy: read per-cluster traffic from haproxy's stats socket at PATH (declared in the generated "
	  "configuration unless --base-config does; default: off)" },
	{ "runtime-api", 0, OPT_STRING, OFF(runtime_api), 0, 0, NULL, "PATH",
	  "haproxy: apply endpoint changes over haproxy's admin-level stats socket at PATH, without a reload "
	  "(declared in the generated configuration unless --base-config does; default: off)" },
	{ "stream-timeout", 0, OPT_SECONDS, OFF(stream_timeout), 0.1, 86400, NULL, "SECONDS",
	  "a stream silent this long is dead (default: three heartbeats)" },
	{ "backoff-max", 0, OPT_SECONDS, OFF(backoff_max), 0.1, 3600, NULL, "SECONDS",
	  "longest wait between reconnects (default 30)" },
	{ "backoff-min", 0, OPT_SECONDS, OFF(backoff_min), 0.01, 60, NULL, "SECONDS",
	  "first reconnect wait (default 0.5)" },
	{ "poll-wait", 0, OPT_SECONDS, OFF(poll_wait), 0, 300, NULL, "SECONDS",
	  "long-poll wait with --transport poll (default 30)" },
	{ "poll-interval", 0, OPT_SECONDS, OFF(poll_interval), 0.1, 3600, NULL, "SECONDS",
	  "with --transport poll --poll-wait 0: the time between polls (default 5), as behind an HTTP "
	  "cache, which a long-poll bypasses" },
	{ "command-timeout", 0, OPT_SECONDS, OFF(command_timeout), 0.1, 3600, NULL, "SECONDS",
	  "kill --check and --reload after this long (default 60)" },
	{ "connect-timeout", 0, OPT_SECONDS, OFF(connect_timeout), 0.1, 600, NULL, "SECONDS",
	  "connecting to the plane (default 10)" },
	{ "move-jitter", 0, OPT_SECONDS, OFF(move_jitter), 0, 600, NULL, "SECONDS",
	  "with several planes: when the plane says it is stale, look for a fresh one after a random wait "
	  "of up to this long (default 2), so a fleet does not move at once" },
	{ "max-push-bytes", 0, OPT_UINT, OFF(max_push_bytes), 1024, 1ULL << 32, NULL, "BYTES",
	  "largest push accepted (default 67108864)" },
	{ "max-depth", 0, OPT_UINT, OFF(max_depth), 4, 512, NULL, "N", "deepest JSON nesting accepted (default 32)" },
	{ "once", 0, OPT_FLAG, OFF(once), 0, 0, NULL, NULL,
	  "sync to the plane's current version, apply, exit 0 (non-zero on failure)" },
	{ "rotate-key", 0, OPT_FLAG, OFF(rotate_key), 0, 0, NULL, NULL,
	  "make a new node key (STATE_DIR/node.key) at start, register it endorsed by the old one, then run" },
	{ "check-config", 0, OPT_FLAG, OFF(check_config), 0, 0, NULL, NULL,
	  "check the configuration, print 'configuration OK', exit" },
	{ "log-level", 0, OPT_CHOICE, OFF(log_level), 0, 0, levels, "LEVEL", "debug, info (default), warn or error" },
	{ NULL, 0, 0, 0, 0, 0, NULL, NULL, NULL },
};

void agent_config_defaults(struct agent_config *c)
{
	memset(c, 0, sizeof(*c));
	c->state_dir = xstrdup("/var/lib/tetherd");
	c->output_dir = xstrdup("/etc/tether");
	c->transport = xstrdup("sse");
	c->consumer = xstrdup("files");
	c->log_level = xstrdup("info");
	c->backoff_max = 30;
	c->backoff_min = 0.5;
	c->poll_wait = 30;
	c->poll_interval = 5;
	c->command_timeout = 60;
	c->connect_timeout = 10;
	c->move_jitter = 2;
	c->max_push_bytes = 64ULL << 20;
	c->max_depth = 32;
	c->marker = xstrdup("127.0.0.1:7099");
	c->nginx = xstrdup("nginx");
	c->haproxy = xstrdup("haproxy");
	c->reload_timeout = 10;
	c->health_timeout = 2;
	c->health_retries = 3;
	c->generations = 3;
	c->max_draining = AGENT_DRAINING_AUTO;
	c->max_defer = 60;
}

static void planes_free(struct agent_config *c)
{
	for (size_t i = 0; i < c->nplanes; i++)
		free(c->planes[i]);
	free(c->planes);
	c->planes = NULL;
	c->nplanes = 0;
}

void agent_config_release(struct agent_config *c)
{
	planes_free(c);
	options_release(agent_options, c);
}

/* Splits c->plane ("URL[,URL...]") into c->planes: each http:// or
 * https:// with a host, trailing slashes dropped, blanks around commas
 * ignored; an empty entry, a duplicate (compared without case) or more
 * than AGENT_MAX_PLANES is an error. c->plane becomes the checked list
 * joined again, so a SIGHUP compares like with like. */
static int planes_parse(struct agent_config *c, char *err, size_t errlen)
{
	planes_free(c);
	c->planes = xcalloc(AGENT_MAX_PLANES, sizeof(*c->planes));
	char inner[512];
	int n = urllist_parse(c->plane, c->planes, AGENT_MAX_PLANES, inner, sizeof(inner));
	if (n < 0) {
		snprintf(err, errlen, "plane: %s", inner);
		return -1;
	}
	c->nplanes = (size_t)n;
	struct buf joined = BUF_INIT;
	for (size_t i = 0; i < c->nplanes; i++)
		buf_printf(&joined, "%s%s", i ? "," : "", c->planes[i]);
	free(c->plane);
	c->plane = buf_detach(&joined, NULL);
	return 0;
}

int agent_config_check(struct agent_config *c, char *err, size_t errlen)
{
	if (!c->node) {
		char host[256];
		if (gethostname(host, sizeof(host)) < 0) {
			snprintf(err, errlen, "node: no --node and no host name");
			return -1;
		}
		host[sizeof(host) - 1] = '\0';
		/* a host name may carry characters node ids do not: map them */
		for (char *p = host; *p; p++)
			if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
			      *p == '.' || *p == '_' || *p == '-'))
				*p = '-';
		c->node = xstrdup(host);
	}
	if (!resource_name_valid(c->node)) {
		snprintf(err, errlen, "node: '%s' must match [A-Za-z0-9._-]{1,200}", c->node);
		return -1;
	}
	if (!c->plane) {
		/* no default: an agent that dials a plane nobody named would
		 * only fail, again and again */
		snprintf(err, errlen, "plane: not set (give --plane URL, or plane = URL in the configuration file)");
		return -1;
	}
	if (planes_parse(c, err, errlen) < 0)
		return -1;
	if (c->labels) {
		char inner[256];
		cJSON *l = labels_parse(c->labels, inner, sizeof(inner));
		if (!l) {
			snprintf(err, errlen, "labels: %s", inner);
			return -1;
		}
		cJSON_Delete(l);
	}
	if (c->sub) {
		for (const char *p = c->sub; *p; p++) {
			bool ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
				  *p == '.' || *p == '_' || *p == '-' || *p == '/' || *p == ',';
			if (!ok) {
				snprintf(err, errlen, "sub: '%s' holds a character no name has", c->sub);
				return -1;
			}
		}
	}
	bool gen = strcmp(c->consumer, "files") != 0;
	if (gen && c->output_dir[0] != '/') {
		snprintf(err, errlen, "output-dir: the %s consumer needs an absolute path", c->consumer);
		return -1;
	}
	if (c->secrets_dir && c->secrets_dir[0] != '/') {
		snprintf(err, errlen, "secrets-dir: '%s' is not an absolute path (the consumer's configuration names "
			 "files in it)", c->secrets_dir);
		return -1;
	}
	if (gen && !c->reload && !c->pidfile) {
		snprintf(err, errlen, "the %s consumer needs --reload CMD or --pidfile FILE to reload it", c->consumer);
		return -1;
	}
	if (c->reload && c->pidfile) {
		snprintf(err, errlen, "give --reload or --pidfile, not both");
		return -1;
	}
	if (c->max_draining != AGENT_DRAINING_AUTO && (!gen || !c->pidfile)) {
		snprintf(err, errlen, "max-draining: the drain guard counts the workers of the master in --pidfile: "
			 "it needs --consumer nginx or haproxy and --pidfile FILE");
		return -1;
	}
	if (!c->signal)
		c->signal = xstrdup(strcmp(c->consumer, "haproxy") == 0 ? "USR2" : "HUP");
	if (strcmp(c->marker, "off") != 0) {
		const char *colon = strrchr(c->marker, ':');
		uint64_t port;
		if (!colon || colon == c->marker || parse_uint_range(colon + 1, 1, 65535, &port) < 0 ||
		    strpbrk(c->marker, " \t;{}#\"'")) {
			snprintf(err, errlen, "marker: '%s' is not HOST:PORT (or off)", c->marker);
			return -1;
		}
	}
	if (c->metrics_listen && listen_spec_check(c->metrics_listen) < 0) {
		snprintf(err, errlen, "metrics-listen: '%s' is not HOST:PORT ([ADDR]:PORT for IPv6)", c->metrics_listen);
		return -1;
	}
	if (c->traffic_listen && strcmp(c->traffic_listen, "off") != 0) {
		struct sockaddr_storage sa;
		socklen_t len;
		char inner[256];
		if (tsl_addr(c->traffic_listen, &sa, &len, inner, sizeof(inner)) < 0) {
			snprintf(err, errlen, "traffic-listen: %s", inner);
			return -1;
		}
		if (!gen) {
			snprintf(err, errlen, "traffic-listen: the files consumer serves no traffic (it needs --consumer "
				 "nginx or haproxy)");
			return -1;
		}
	}
	if (c->traffic_socket) {
		if (strcmp(c->consumer, "haproxy") != 0) {
			snprintf(err, errlen, "traffic-socket: haproxy's stats socket needs --consumer haproxy");
			return -1;
		}
		if (c->traffic_socket[0] != '/' || !render_safe(c->traffic_socket) ||
		    strlen(c->traffic_socket) >= 108) {
			snprintf(err, errlen, "traffic-socket: '%s' must be an absolute path of at most 107 bytes "
				 "without spaces or quotes", c->traffic_socket);
			return -1;
		}
	}
	if (c->runtime_api) {
		if (strcmp(c->consumer, "haproxy") != 0) {
			snprintf(err, errlen, "runtime-api: haproxy's runtime API needs --consumer haproxy");
			return -1;
		}
		if (c->runtime_api[0] != '/' || !render_safe(c->runtime_api) || strlen(c->runtime_api) >= 108) {
			snprintf(err, errlen, "runtime-api: '%s' must be an absolute path of at most 107 bytes "
				 "without spaces or quotes", c->runtime_api);
			return -1;
		}
	}
	if (c->health && strncmp(c->health, "http://", 7) != 0 && strncmp(c->health, "https://", 8) != 0) {
		snprintf(err, errlen, "health: '%s' must be an http:// or https:// URL", c->health);
		return -1;
	}
	if (c->backoff_min > c->backoff_max) {
		snprintf(err, errlen, "backoff-min (%g) must not exceed backoff-max (%g)", c->backoff_min, c->backoff_max);
		return -1;
	}
	if ((c->cert == NULL) != (c->key == NULL)) {
		snprintf(err, errlen, "--cert and --key go together (a client certificate and its key)");
		return -1;
	}
	if ((c->approvers != NULL) != (c->approvals > 0)) {
		snprintf(err, errlen, "--approvers FILE and --approvals K go together (the approver keys, and how many "
			 "of them must approve a version)");
		return -1;
	}
	if (c->approvers && !c->trust) {
		snprintf(err, errlen, "--approvers needs --trust (approvals are counted for the state a verified "
			 "statement signs)");
		return -1;
	}
	if (c->max_staleness > 0 && !c->trust) {
		snprintf(err, errlen, "--max-staleness needs --trust (staleness is judged on signed statements)");
		return -1;
	}
	if (!c->state_dir[0] || !c->output_dir[0]) {
		snprintf(err, errlen, "state-dir and output-dir must not be empty");
		return -1;
	}
	return 0;
}
