/* consumer/consumer.c: picks a consumer backend by name (see
 * consumer/consumer.h). */
#include "consumer/consumer.h"

#include <stdio.h>
#include <string.h>

struct consumer *consumer_new(const struct consumer_options *o, char *err, size_t errlen)
{
	if (strcmp(o->consumer, "files") == 0)
		return consumer_files_new(o, err, errlen);
	if (strcmp(o->consumer, "nginx") == 0 || strcmp(o->consumer, "haproxy") == 0)
		return consumer_gen_new(o, err, errlen);
	snprintf(err, errlen, "unknown consumer '%s'", o->consumer);
	return NULL;
}

void consumer_free(struct consumer *c)
{
	if (c)
		c->ops->free(c);
}
