/* agent.c: tetherd's life: boot from last-good (an apply cut short finished
 * first, apply_resume; then last-good rendered before dialling),
 * the event loop over libcurl's multi handle (the sync transfer and the
 * ACKs share it), signals (SIGTERM stops, SIGHUP re-reads the config),
 * status.json, and --once. The parts are in sync.c, apply.c, ack.c,
 * fresh.c (its probes share the multi handle) and traffic/report.c (its
 * access log listener is one more descriptor the loop waits on). */
#include "agent.h"
#include "agent_int.h"
#include "consumer/consumer.h"
#include "fault.h"
#include "lastgood.h"
#include "log.h"
#include "metrics_http.h"
#include "sdnotify.h"
#include "traffic/auto.h"
#include "traffic/haproxy_stats.h"
#include "util.h"
#include "xmalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

static int sig_pipe[2] = { -1, -1 };
static volatile sig_atomic_t got_term, got_hup;

static void on_signal(int sig)
{
	int e = errno;
	if (sig == SIGHUP)
		got_hup = 1;
	else
		got_term = 1;
	if (sig_pipe[1] >= 0) {
		ssize_t w = write(sig_pipe[1], "x", 1);
		(void)w;
	}
	errno = e;
}

void agent_set_state(struct agent *a, enum agent_state st)
{
	a->astate = st;
}

/* systemd's STATUS= line: what `systemctl status tetherd` shows. */
static void notify_status(const struct agent *a, enum agent_state shown)
{
	char line[256];
	snprintf(line, sizeof(line), "version %llu, %s%s%.180s", (unsigned long long)a->state.version,
		 status_state_name(shown), a->last_error[0] ? ": " : "", a->last_error);
	sdnotify_status(line);
}

void agent_write_status(struct agent *a)
{
	/* stale says more than synced, syncing or offline: what runs is no
	 * longer vouched for, or the plane it comes from is cut off from its
	 * source; a refusal (degraded) says more still */
	enum agent_state shown = a->astate;
	bool stale = (a->trust.on && a->trust.stale) || a->fresh.now.on;
	if (stale && (shown == ST_SYNCED || shown == ST_SYNCING || shown == ST_OFFLINE))
		shown = ST_STALE;
	struct status s = {
		.node = a->cfg.node, .version = a->state.version, .state = shown,
		.last_error = a->last_error, .last_sync = a->last_sync, .plane = sync_plane(a),
		.planes = (const char *const *)a->cfg.planes, .nplanes = a->cfg.nplanes,
		.transport = a->cfg.transport, .consumer = a->cfg.consumer, .plane_version = a->plane_version,
		.resources = a->state.count, .state_bytes = a->state.raw_bytes, .applied = a->applied,
		.rejected = a->rejected, .started = a->started,
		.trusted = a->trust.on, .stale = a->trust.on && a->trust.stale, .verified_version = a->trust.hwm,
		.key_id = a->trust.kid, .approvals = a->cfg.approvals, .approvers = a->cfg.approvers,
		.plane_stale = a->fresh.now.on, .plane_stale_since = a->fresh.now.since,
		.plane_stale_why = a->fresh.now.why,
	};
	/* only real changes are written: heartbeats alone do not touch disk */
	if (a->status_valid && a->written.version == s.version && a->written.state == s.state &&
	    a->written.last_sync == s.last_sync && a->written.applied == s.applied &&
	    a->written.rejected == s.rejected && strcmp(a->written.last_error, s.last_error) == 0 &&
	    a->written.verified_version == s.verified_version && a->written.stale == s.stale &&
	    strcmp(a->written.plane ? a->written.plane : "", s.plane) == 0 &&
	    strcmp(a->written.key_id ? a->written.key_id : "", s.key_id) == 0 &&
	    a->written.plane_stale == s.plane_stale && a->written.plane_stale_since == s.plane_stale_since &&
	    strcmp(a->written.plane_stale_why ? a->written.plane_stale_why : "", s.plane_stale_why) == 0) {
		metrics_write(a);   /* counters move without a new status */
		return;
	}
	char err[512];
	if (status_write(a->cfg.state_dir, &s, err, sizeof(err)) < 0) {
		log_warn("status: %s", err);
		return;
	}
	free((char *)a->written.last_error);
	free((char *)a->written.key_id);
	free((char *)a->written.plane);
	free((char *)a->written.plane_stale_why);
	a->written = s;
	a->written.last_error = xstrdup(s.last_error);
	a->written.key_id = xstrdup(s.key_id);
	a->written.plane = xstrdup(s.plane);
	a->written.plane_stale_why = xstrdup(s.plane_stale_why);
	a->written.planes = NULL;   /* cfg's: gone after a SIGHUP */
	a->status_valid = true;
	metrics_write(a);
	notify_status(a, shown);
}

double agent_rand01(void)
{
	uint32_t r;
	if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
		r = (uint32_t)now_ms() * 2654435761u;
	return (double)r / 4294967296.0;
}

/* ---- what the core lends traffic/report.c ------------------------------------ */

static uint64_t traffic_version(void *ctx)
{
	return ((struct agent *)ctx)->state.version;
}

static const char *traffic_live(void *ctx)
{
	struct agent *a = ctx;
	if (!a->cons)
		return NULL;
	const char *gen = a->cons->ops->live ? a->cons->ops->live(a->cons) : NULL;
	return gen ? gen : "";
}

static CURL *traffic_post(void *ctx, const char *path, const struct buf *body, struct buf *answer, long timeout_ms,
			  struct curl_slist **headers)
{
	return agent_post(ctx, path, body, answer, timeout_ms, headers);
}

static void traffic_metrics_write(void *ctx)
{
	metrics_write(ctx);
}

/* Where the consumer's access log goes: --traffic-listen, or the port
 * bound by default (traffic/auto.c); NULL: not counted (off, files, or
 * --traffic-socket alone). */
static const char *traffic_listen_addr(const struct agent *a)
{
	if (a->cfg.traffic_listen)
		return strcmp(a->cfg.traffic_listen, "off") ? a->cfg.traffic_listen : NULL;
	return a->traffic_addr[0] ? a->traffic_addr : NULL;
}

/* Counting by default: nginx and haproxy, without --traffic-listen (or
 * --traffic-socket, which counts already), bind a free loopback port
 * before the consumer renders its access log to it. Why a node does not
 * count is said in its ACKs. 0, or -1 with err. */
static int traffic_auto(struct agent *a, char *err, size_t errlen)
{
	const struct agent_config *c = &a->cfg;
	bool files = strcmp(c->consumer, "files") == 0;
	a->traffic.why_off = files ? "consumer files does not count traffic"
			     : c->traffic_listen && !strcmp(c->traffic_listen, "off") ? "started with --traffic-listen off"
			     : c->once ? "runs with --once"
				       : "it collects no traffic";
	if (files || c->once || c->traffic_listen || c->traffic_socket)
		return 0;
	a->traffic_auto_fd = traffic_auto_open(c->state_dir, a->traffic_addr, sizeof(a->traffic_addr), err, errlen);
	return a->traffic_auto_fd < 0 ? -1 : 0;
}

/* Starts collecting the live generation's traffic (--traffic-listen or
 * the port bound by default, --traffic-socket; not for --once). 0, or -1
 * with err. */
static int traffic_start(struct agent *a, char *err, size_t errlen)
{
	struct traffic_report_host host = { .ctx = a, .multi = a->multi, .version = traffic_version,
					    .live = traffic_live, .post = traffic_post,
					    .metrics_write = traffic_metrics_write };
	int fd = a->traffic_auto_fd;
	a->traffic_auto_fd = -1;
	return traffic_report_start(&a->traffic, &host, traffic_listen_addr(a), fd, a->cfg.traffic_socket, err,
				    errlen);
}

/* What the consumers take of the options (consumer/consumer.h). */
static void consumer_options_of(struct agent *a, struct consumer_options *o)
{
	const struct agent_config *cfg = &a->cfg;
	*o = (struct consumer_options){ .opener = &a->seal.opener,
		.consumer = cfg->consumer, .output_dir = cfg->output_dir, .secrets_dir = cfg->secrets_dir,
		.marker = cfg->marker,
		.nginx = cfg->nginx, .haproxy = cfg->haproxy, .base_config = cfg->base_config,
		.traffic_syslog = traffic_listen_addr(a), .generations = cfg->generations, .fault = fault_point,
	};
	/* the renderer declares the stats socket unless the operator's base
	 * configuration does (haproxy refuses one path bound twice) */
	if (cfg->traffic_socket && (!cfg->base_config || !haproxy_stats_declared(cfg->base_config, cfg->traffic_socket)))
		o->stats_socket = cfg->traffic_socket;
	/* the runtime API's socket, level admin: one declaration when it is
	 * --traffic-socket's path too (admin reads the counters as well) */
	o->runtime_api = cfg->runtime_api != NULL;
	if (cfg->runtime_api) {
		char level[64];
		if (!cfg->base_config || !haproxy_stats_declared_at(cfg->base_config, cfg->runtime_api, level, sizeof(level)))
			o->admin_socket = cfg->runtime_api;
		else if (strcmp(level, "admin") != 0)
			log_warn("runtime-api: %s declares the stats socket %s at level %s: haproxy refuses `set server` "
				 "there, so every change will reload; declare it with `level admin`", cfg->base_config,
				 cfg->runtime_api, level);
		if (o->stats_socket && strcmp(o->stats_socket, cfg->runtime_api) == 0)
			o->stats_socket = NULL;
	}
}

static int agent_boot(struct agent *a, char *err, size_t errlen)
{
	a->started = wall_seconds();
	agent_set_state(a, ST_BOOTING);
	state_init(&a->state);
	a->lg = lastgood_open(a->cfg.state_dir, err, errlen);
	if (!a->lg)
		return -1;
	if (traffic_auto(a, err, errlen) < 0)
		return -1;
	if (trust_init(a, err, errlen) < 0)
		return -1;
	/* the node key (made at the first start; --rotate-key) and the wraps
	 * last-good's sealed secrets open with */
	if (seal_init(a, err, errlen) < 0)
		return -1;
	/* with --trust a generation is loaded only when its statement
	 * verifies and its state is what the statement signs */
	if (a->trust.on)
		lastgood_set_verify(a->lg, trust_boot_verify, a);
	agent_write_status(a);
	struct consumer_options co;
	consumer_options_of(a, &co);
	a->cons = consumer_new(&co, err, errlen);
	if (!a->cons)
		return -1;
	char lerr[1024];
	int loaded = lastgood_load(a->lg, &a->state, lerr, sizeof(lerr));
	bool refused = loaded < 0 && lastgood_refused(a->lg);
	if (loaded < 0) {
		log_error("last-good: %s; starting empty (the plane will send a snapshot)", lerr);
		snprintf(a->last_error, sizeof(a->last_error), "last-good unusable: %s", lerr);
	} else if (loaded == 0) {
		log_info("last-good: none yet in %s", a->cfg.state_dir);
	}
	if (refused) {
		/* nothing that verifies: what serves now is left alone (an
		 * empty render would take the consumer's configuration away) and
		 * the plane's signed snapshot replaces it */
		log_error("last-good: refused; the live output is left as it is until a verified push");
		agent_set_state(a, ST_OFFLINE);
		return 0;
	}
	/* an apply cut short between its swap and its commit is finished
	 * (or, refused, dropped) before the consumer boots on last-good */
	if (loaded >= 0)
		apply_resume(a);
	/* last-good's sealed secrets open with the wraps kept beside it
	 * (per envelope: an apply that failed or was cut short left its
	 * candidate's beside them, pruned here); when they do not
	 * (wraps.json lost, node.key replaced by hand), what
	 * serves now is left alone and the plane's snapshot brings the state
	 * back, its wraps fetched afresh */
	if (a->state.version > 0 && seal_check_state(a, lerr, sizeof(lerr)) < 0) {
		log_error("last-good: version %llu cannot be rendered here: %s; the live output is left as it is "
			  "until the plane's snapshot", (unsigned long long)a->state.version, lerr);
		snprintf(a->last_error, sizeof(a->last_error), "last-good's sealed secrets do not open: %s", lerr);
		state_release(&a->state);
		state_init(&a->state);
		/* --trust: the digest is the empty state's now (last-good's
		 * would make every push a mismatch) */
		lthash_init(&a->trust.digest);
		free(a->trust.statement);
		a->trust.statement = NULL;
		agent_set_state(a, ST_OFFLINE);
		return 0;
	}
	if (a->state.version > 0)
		seal_abandoned(a);
	/* whether the plane has our ACK of what we hold is the plane's to
	 * know (it may have been lost with us): until we ACK a version, the
	 * stream asks for a push of it to ACK, which the plane sends only
	 * when it holds no ACK of it */
	a->unacked = a->state.version > 0;
	/* render last-good before dialling: the consumer runs on it offline */
	int changed = a->cons->ops->boot(a->cons, &a->state, err, errlen);
	if (changed < 0)
		return -1;
	if (changed)
		apply_boot_reload(a);
	if (a->astate != ST_DEGRADED)   /* a refusal at boot (apply_resume) shows */
		agent_set_state(a, ST_OFFLINE);
	malloc_trim(0);   /* loading last-good used twice its size for a moment */
	return 0;
}

static bool same_str(const char *x, const char *y)
{
	return (!x && !y) || (x && y && strcmp(x, y) == 0);
}

static void reload_config(struct agent *a)
{
	struct agent_config nc;
	char err[1024];
	int first;
	agent_config_defaults(&nc);
	int rc = options_parse(agent_options, &nc, a->argc, a->argv, "agent", "", "", &first, err, sizeof(err));
	if (rc != 0 || agent_config_check(&nc, err, sizeof(err)) < 0) {
		log_error("SIGHUP: %s; keeping the running configuration", rc == 1 ? "unexpected --help" : err);
		agent_config_release(&nc);
		return;
	}
	bool redial_creds = !same_str(nc.ca_file, a->cfg.ca_file) || !same_str(nc.cert, a->cfg.cert) ||
			    !same_str(nc.key, a->cfg.key);
	if (strcmp(nc.state_dir, a->cfg.state_dir) || strcmp(nc.output_dir, a->cfg.output_dir) ||
	    strcmp(nc.consumer, a->cfg.consumer) || !same_str(nc.traffic_listen, a->cfg.traffic_listen) ||
	    !same_str(nc.traffic_socket, a->cfg.traffic_socket) || !same_str(nc.runtime_api, a->cfg.runtime_api) ||
	    !same_str(nc.secrets_dir, a->cfg.secrets_dir))
		log_warn("SIGHUP: state-dir, output-dir, secrets-dir, consumer, traffic-listen, traffic-socket and "
			 "runtime-api change only on restart");
	bool redial = strcmp(nc.plane, a->cfg.plane) || strcmp(nc.node, a->cfg.node) ||
		      strcmp(nc.transport, a->cfg.transport) || (nc.labels == NULL) != (a->cfg.labels == NULL) ||
		      (nc.labels && strcmp(nc.labels, a->cfg.labels)) || (nc.sub == NULL) != (a->cfg.sub == NULL) ||
		      (nc.sub && strcmp(nc.sub, a->cfg.sub)) || redial_creds;
	/* keep the parts that only a restart changes */
	char *keep[7] = { nc.state_dir, nc.output_dir, nc.consumer, nc.traffic_listen, nc.traffic_socket,
			  nc.runtime_api, nc.secrets_dir };
	nc.secrets_dir = a->cfg.secrets_dir;
	nc.state_dir = a->cfg.state_dir;
	nc.output_dir = a->cfg.output_dir;
	nc.consumer = a->cfg.consumer;
	nc.traffic_listen = a->cfg.traffic_listen;
	nc.traffic_socket = a->cfg.traffic_socket;
	nc.runtime_api = a->cfg.runtime_api;
	a->cfg.state_dir = keep[0];
	a->cfg.output_dir = keep[1];
	a->cfg.consumer = keep[2];
	a->cfg.traffic_listen = keep[3];
	a->cfg.traffic_socket = keep[4];
	a->cfg.runtime_api = keep[5];
	a->cfg.secrets_dir = keep[6];
	fresh_carry(a, &nc);
	sync_carry_plane(a, &nc);
	agent_config_release(&a->cfg);
	a->cfg = nc;
	enum log_level lvl;
	if (log_parse_level(a->cfg.log_level, &lvl) == 0)
		log_set_level(lvl);
	/* the trusted keys are read again (a rotation); a new --sub is the
	 * subscription statements must name */
	char serr[256];
	struct sub ns;
	if (sub_parse(a->cfg.sub, &ns, serr, sizeof(serr)) == 0) {
		sub_release(&a->trust.sub);
		a->trust.sub = ns;
	}
	trust_reload(a);
	log_info("SIGHUP: configuration reloaded%s", redial ? "; reconnecting" : "");
	if (redial) {
		sync_stop(a);
		apply_drop_queue(a);
		a->etag[0] = '\0';
		sync_schedule(a, false);
		a->status_valid = false;   /* the list of planes may have changed */
		agent_write_status(a);
	}
}

static void agent_free(struct agent *a)
{
	sync_stop(a);
	ack_release(a);
	fresh_release(a);
	keyreg_release(a);   /* its transfer leaves the multi handle before it goes */
	traffic_report_release(&a->traffic);
	if (a->traffic_auto_fd >= 0)
		close(a->traffic_auto_fd);
	a->traffic_auto_fd = -1;
	apply_drop_queue(a);
	free(a->queue);
	if (a->multi)
		curl_multi_cleanup(a->multi);
	if (a->share)
		curl_share_cleanup(a->share);
	if (a->share_old)
		curl_share_cleanup(a->share_old);
	consumer_free(a->cons);
	lastgood_close(a->lg);
	state_release(&a->state);
	sse_parser_release(&a->sse);
	buf_release(&a->body);
	buf_release(&a->resp_statement);
	trust_release(a);
	seal_release(a);
	metrics_release();
	free((char *)a->written.last_error);
	free((char *)a->written.key_id);
	free((char *)a->written.plane);
	free((char *)a->written.plane_stale_why);
}

/* Runs the one transfer in flight to its end; returns its result. */
static CURLcode run_until_done(struct agent *a)
{
	int running = 1;
	while (running) {
		curl_multi_poll(a->multi, NULL, 0, 1000, NULL);
		curl_multi_perform(a->multi, &running);
	}
	CURLMsg *m;
	int left;
	CURLcode code = CURLE_OK;
	while ((m = curl_multi_info_read(a->multi, &left))) {
		if (m->msg != CURLMSG_DONE)
			continue;
		if (m->easy_handle == a->seal.reg_h)
			keyreg_done(a, m->data.result);   /* the node key's registration, beside the poll */
		else
			code = m->data.result;
	}
	return code;
}

/* --once: one poll, apply, ACK (a few tries, each plane in turn), exit
 * status. */
static int run_once(struct agent *a)
{
	char *saved = a->cfg.transport;
	double saved_wait = a->cfg.poll_wait;
	a->cfg.transport = xstrdup("poll");
	a->cfg.poll_wait = 0;
	int rc = 1;
	for (size_t tries = 0; tries < 3 * a->cfg.nplanes && rc != 0; tries++) {
		uint64_t rejected = a->rejected;
		if (tries) {
			int64_t wait = a->next_sync_ms - now_ms();
			if (wait > 0)
				curl_multi_poll(a->multi, NULL, 0, (int)wait, NULL);
		}
		char *plane = xstrdup(sync_plane(a));   /* sync_done may move on */
		sync_start(a);
		CURLcode code = run_until_done(a);
		long status = 0;
		curl_easy_getinfo(a->sync, CURLINFO_RESPONSE_CODE, &status);
		sync_done(a, code);
		/* refused, or held for want of a wrap of a sealed secret:
		 * not synced either way */
		if (a->rejected > rejected || a->seal.held_version > a->state.version) {
			free(plane);
			rc = 1;
			break;
		}
		if (code == CURLE_OK && (status == 200 || status == 304))
			rc = 0;
		else
			log_error("once: cannot sync with %s (%s)", plane,
				  code != CURLE_OK ? curl_easy_strerror(code) : "HTTP error");
		free(plane);
	}
	/* the node key's registration, when the plane answered */
	keyreg_tick(a);
	if (a->seal.reg_h)
		run_until_done(a);
	/* deliver the ACK or NACK before leaving */
	for (int tries = 0; tries < 5 && ack_waiting(a); tries++) {
		ack_start(a);
		ack_done(a, run_until_done(a));
	}
	free(a->cfg.transport);
	a->cfg.transport = saved;
	a->cfg.poll_wait = saved_wait;
	agent_write_status(a);
	log_info("once: %s at version %llu", rc == 0 ? "synced" : "failed", (unsigned long long)a->state.version);
	return rc;
}

int agent_run(struct agent_config *cfg, int argc, char **argv)
{
	struct agent a;
	char err[ERRLEN];
	int code = 0;
	memset(&a, 0, sizeof(a));
	a.cfg = *cfg;
	memset(cfg, 0, sizeof(*cfg));
	a.argc = argc;
	a.argv = argv;
	a.live_healthy = -1;
	a.traffic.fd = -1;
	a.traffic_auto_fd = -1;
	sse_parser_init(&a.sse, (size_t)a.cfg.max_push_bytes + 64, (size_t)a.cfg.max_push_bytes);
	buf_init(&a.body);

	if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		fatal("cannot create a pipe: %s", strerror(errno));
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* a write past RLIMIT_FSIZE fails with EFBIG (a NACK), not a kill */
	signal(SIGXFSZ, SIG_IGN);

	/* before any child: `nginx -t` must not inherit NOTIFY_SOCKET */
	sdnotify_init();
	curl_global_init(strstr(a.cfg.plane, "https:") ? CURL_GLOBAL_DEFAULT : CURL_GLOBAL_NOTHING);
	a.multi = curl_multi_init();
	if ((a.share = curl_share_init()) != NULL &&
	    curl_share_setopt(a.share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION) != CURLSHE_OK) {
		curl_share_cleanup(a.share);
		a.share = NULL;
	}

	if (agent_boot(&a, err, sizeof(err)) < 0) {
		log_error("%s", err);
		code = 1;
		goto out;
	}
	agent_write_status(&a);
	if (a.cfg.metrics_listen && !a.cfg.once && metrics_http_open(&a, err, sizeof(err)) < 0) {
		log_error("%s", err);
		code = 1;
		goto out;
	}
	if (!a.cfg.once && traffic_start(&a, err, sizeof(err)) < 0) {
		log_error("%s", err);
		code = 1;
		goto out;
	}
	log_info("node %s at version %llu (%zu resources); plane %s over %s", a.cfg.node,
		 (unsigned long long)a.state.version, a.state.count, a.cfg.plane, a.cfg.transport);
	/* booted from last-good, the output in place: ready (the unit's
	 * dependents may start the consumer now) */
	char ready[256];
	snprintf(ready, sizeof(ready), "version %llu, %s (booted from last-good; dialling %s)",
		 (unsigned long long)a.state.version, status_state_name(a.written.state), a.cfg.plane);
	sdnotify_ready(ready);
	if (a.cfg.once) {
		code = run_once(&a);
		goto out;
	}

	sync_schedule(&a, false);
	int64_t wd = sdnotify_watchdog_ms();
	while (!got_term) {
		/* the watchdog is fed only by a loop that turns */
		sdnotify_watchdog_tick();
		int64_t now = now_ms();
		if (!a.sync && now >= a.next_sync_ms)
			sync_start(&a);
		if (a.sync && a.kind == SYNC_STREAM && now > sync_stream_deadline(&a)) {
			/* silence is not progress, nor is a trickle: resume from
			 * what we applied */
			if (now - a.last_byte_ms > (int64_t)(sync_stream_timeout_s(&a) * 1000))
				log_warn("stream: silent for %.1fs (timeout %.1fs): reconnecting from version %llu",
					 (double)(now - a.last_byte_ms) / 1000.0, sync_stream_timeout_s(&a),
					 (unsigned long long)a.state.version);
			else
				log_warn("stream: no complete event for %.1fs (%llu bytes of one so far): "
					 "reconnecting from version %llu", (double)(now - a.last_event_ms) / 1000.0,
					 (unsigned long long)a.event_bytes, (unsigned long long)a.state.version);
			sync_dead(&a, a.got_event ? "a dead stream" : "no answer");
		}
		if (ack_waiting(&a) && !a.ack.h && now >= a.ack.next_ms)
			ack_start(&a);
		keyreg_tick(&a);
		seal_tick(&a);
		if (a.retry_at_ms && now >= a.retry_at_ms) {
			/* resync: the plane sends the gap from our version again
			 * (a long poll in flight waits for a newer version: it
			 * is started again too) */
			a.retry_at_ms = 0;
			a.etag[0] = '\0';
			if (a.sync) {
				sync_stop(&a);
				sync_schedule(&a, false);
			}
		}

		int64_t wake = now + 1000;
		apply_pending(&a, &wake);
		trust_tick(&a, &wake);
		fresh_tick(&a, &wake);
		traffic_report_live(&a.traffic);
		traffic_report_tick(&a.traffic, a.cfg.node, a.cfg.metrics_listen || a.cfg.metrics_file,
				    a.cfg.metrics_file != NULL, &wake);
		if (a.retry_at_ms && a.retry_at_ms < wake)
			wake = a.retry_at_ms;
		if (!a.sync && a.next_sync_ms < wake)
			wake = a.next_sync_ms;
		if (a.sync && a.kind == SYNC_STREAM) {
			int64_t dead = sync_stream_deadline(&a) + 1;
			if (dead < wake)
				wake = dead;
		}
		if (ack_waiting(&a) && !a.ack.h && a.ack.next_ms < wake)
			wake = a.ack.next_ms;
		if (a.seal.reg_due)
			wake = now;   /* a registration to start */
		if (a.seal.reg_retry_ms && !a.seal.reg_h && a.seal.reg_retry_ms < wake)
			wake = a.seal.reg_retry_ms;
		if (wd > 0 && now + wd / 2 < wake)
			wake = now + wd / 2;
		metrics_http_service(&a, &wake);
		now = now_ms();
		int timeout = (int)(wake > now ? wake - now : 0);
		struct curl_waitfd wfd[1 + 1 + 1 + 8] = { { sig_pipe[0], CURL_WAIT_POLLIN, 0 } };
		unsigned nfd = 1;
		if (traffic_report_fd(&a.traffic) >= 0)
			wfd[nfd++] = (struct curl_waitfd){ traffic_report_fd(&a.traffic), CURL_WAIT_POLLIN, 0 };
		nfd += metrics_http_fds(wfd + nfd, 9);
		curl_multi_poll(a.multi, wfd, nfd, timeout, NULL);
		char drain[64];
		while (read(sig_pipe[0], drain, sizeof(drain)) > 0)
			;
		metrics_http_service(&a, NULL);
		/* a bounded batch: a flood of datagrams never holds the loop */
		traffic_report_read(&a.traffic);
		if (got_hup) {
			got_hup = 0;
			reload_config(&a);
		}
		int running;
		curl_multi_perform(a.multi, &running);
		CURLMsg *m;
		int left;
		while ((m = curl_multi_info_read(a.multi, &left))) {
			if (m->msg != CURLMSG_DONE)
				continue;
			if (m->easy_handle == a.sync)
				sync_done(&a, m->data.result);
			else if (m->easy_handle == a.ack.h)
				ack_done(&a, m->data.result);
			else if (m->easy_handle == a.traffic.h)
				traffic_report_done(&a.traffic, m->data.result);
			else if (m->easy_handle == a.fresh.h)
				fresh_done(&a, m->data.result);
			else if (m->easy_handle == a.seal.reg_h)
				keyreg_done(&a, m->data.result);
		}
	}
	log_info("stopping at version %llu", (unsigned long long)a.state.version);
	sdnotify_stopping();
out:
	agent_free(&a);
	agent_config_release(&a.cfg);
	curl_global_cleanup();
	metrics_http_close();
	sdnotify_close();
	close(sig_pipe[0]);
	close(sig_pipe[1]);
	sig_pipe[0] = sig_pipe[1] = -1;
	return code;
}
