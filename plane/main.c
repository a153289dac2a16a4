/* main.c: tether-plane's entry point: options, signals, start, wait, stop. */
#include "config.h"
#include "core/hub.h"
#include "log.h"
#include "plane.h"
#include "sdnotify.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SYNOPSIS "[-c FILE] [--listen HOST:PORT] [--data DIR] [--heartbeat SECONDS]\n" \
		 "                    [--admin-token-file FILE] [--rollout immediate|staged] [--stages 1,10,100]\n" \
		 "                    [--bake SECONDS] [options]"

int main(int argc, char **argv)
{
	struct plane p;
	char err[1024];
	int first;

	memset(&p, 0, sizeof(p));
	plane_config_defaults(&p.cfg);
	log_init("tether-plane", LOG_LVL_INFO);
	int rc = options_parse(plane_options, &p.cfg, argc, argv, "plane", SYNOPSIS,
			       "tether-plane " PACKAGE_VERSION, &first, err, sizeof(err));
	if (rc == 1) {
		options_release(plane_options, &p.cfg);
		return 0;
	}
	if (rc < 0 || first < argc || plane_config_check(&p.cfg, err, sizeof(err)) < 0) {
		fprintf(stderr, "tether-plane: %s\n", rc < 0 || first >= argc ? err : "unexpected argument");
		fprintf(stderr, "usage: tether-plane %s\n", SYNOPSIS);
		options_release(plane_options, &p.cfg);
		return 2;
	}
	enum log_level lvl;
	if (log_parse_level(p.cfg.log_level, &lvl) == 0)
		log_set_level(lvl);

	/* signals are taken by sigwait in this thread only */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	sdnotify_init();
	if (plane_start(&p, err, sizeof(err)) < 0) {
		log_error("%s", err);
		plane_stop(&p);
		options_release(plane_options, &p.cfg);
		return 1;
	}
	log_info("ready: version %s, %s %s, heartbeat %gs", PACKAGE_VERSION, p.cfg.upstream ? "upstream" : "data",
		 p.cfg.upstream ? p.cfg.upstream : p.cfg.data, p.cfg.heartbeat);
	/* the store is open and it listens */
	char ready[200];
	snprintf(ready, sizeof(ready), "tether-plane %s listening on %s, store at version %llu", PACKAGE_VERSION,
		 p.http.listen_addr, (unsigned long long)hub_version(p.core.hub));
	sdnotify_ready(ready);

	for (;;) {
		int sig = 0;
		if (sigwait(&set, &sig) != 0)
			continue;
		if (sig == SIGHUP) {
			plane_reload(&p);
			continue;
		}
		log_info("%s: shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
		sdnotify_stopping();
		break;
	}
	plane_stop(&p);
	options_release(plane_options, &p.cfg);
	log_info("stopped");
	return 0;
}
