/* agent_config.h: tetherd's options (command line and the [agent] section
 * of -c FILE), their defaults and checks. */
#ifndef TETHER_AGENT_CONFIG_H
#define TETHER_AGENT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "options.h"

struct agent_config {
	char *plane;
	char *node;
	char *state_dir;
	char *output_dir;
	char *transport;
	char *labels;
	char *sub;
	char *consumer;
	char *check;
	char *reload;
	char *log_level;
	bool strict;
	bool once;
	bool check_config;
	double stream_timeout;     /* 0: three advertised heartbeats */
	double backoff_max;
	double backoff_min;
	double poll_wait;
	double command_timeout;
	double connect_timeout;
	uint64_t max_push_bytes;
	uint64_t max_depth;
};

extern const struct opt_def agent_options[];

void agent_config_defaults(struct agent_config *c);
/* Fills derived defaults (node from the host name) and checks the whole
 * configuration. Returns 0, or -1 with err. */
int agent_config_check(struct agent_config *c, char *err, size_t errlen);
void agent_config_release(struct agent_config *c);

#endif
