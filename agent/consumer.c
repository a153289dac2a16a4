/* consumer.c: picks a consumer backend by name (see consumer.h). */
#include "consumer.h"
#include "agent_config.h"

#include <stdio.h>
#include <string.h>

struct consumer *consumer_new(const struct agent_config *cfg, char *err, size_t errlen)
{
	if (strcmp(cfg->consumer, "files") == 0)
		return consumer_files_new(cfg->output_dir, err, errlen);
	if (strcmp(cfg->consumer, "nginx") == 0 || strcmp(cfg->consumer, "haproxy") == 0)
		return consumer_gen_new(cfg, err, errlen);
	snprintf(err, errlen, "unknown consumer '%s'", cfg->consumer);
	return NULL;
}

void consumer_free(struct consumer *c)
{
	if (c)
		c->ops->free(c);
}
