/* main.c: tetherd's entry point: options, --check-config, run. */
#include "agent.h"
#include "credentials.h"
#include "keys.h"
#include "log.h"

#include <stdio.h>
#include <string.h>

#define SYNOPSIS "[-c FILE] [--plane URL[,URL...]] [--node ID] [--state-dir DIR] [--output-dir DIR]\n" \
		 "               [--transport sse|poll] [--labels k=v,...] [--consumer files|nginx|haproxy]\n" \
		 "               [--check CMD] [--reload CMD] [--strict] [--stream-timeout SECONDS]\n" \
		 "               [--once] [--check-config] [options]"

int main(int argc, char **argv)
{
	struct agent_config cfg;
	char err[1024];
	int first;

	log_init("tetherd", LOG_LVL_INFO);
	agent_config_defaults(&cfg);
	int rc = options_parse(agent_options, &cfg, argc, argv, "agent", SYNOPSIS, "tetherd " PACKAGE_VERSION,
			       &first, err, sizeof(err));
	if (rc == 1) {
		agent_config_release(&cfg);
		return 0;
	}
	if (rc < 0 || first < argc || agent_config_check(&cfg, err, sizeof(err)) < 0) {
		fprintf(stderr, "tetherd: %s\n", rc < 0 || first >= argc ? err : "unexpected argument");
		/* the usage helps a command line, not a configuration file's
		 * value (each skipped start would print it to the journal) */
		if (rc < 0 || first < argc)
			fprintf(stderr, "usage: tetherd %s\n", SYNOPSIS);
		agent_config_release(&cfg);
		return 2;
	}
	if (cfg.check_config) {
		/* the files the options name must load: a typo in --trust would
		 * refuse every push */
		struct trust t;
		char *tok = NULL;
		if ((cfg.trust && keys_load_trust(cfg.trust, &t, err, sizeof(err)) < 0) ||
		    (cfg.token_file && !(tok = credentials_read_token(cfg.token_file, err, sizeof(err))))) {
			fprintf(stderr, "tetherd: %s\n", err);
			agent_config_release(&cfg);
			return 2;
		}
		credentials_forget(tok);
		printf("configuration OK\n");
		agent_config_release(&cfg);
		return 0;
	}
	enum log_level lvl;
	if (log_parse_level(cfg.log_level, &lvl) == 0)
		log_set_level(lvl);
	return agent_run(&cfg, argc, argv);
}
