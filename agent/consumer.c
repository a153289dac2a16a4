/* consumer.c: picks a consumer backend by name (see consumer.h). */
#include "consumer.h"

#include <stdio.h>
#include <string.h>

struct consumer *consumer_new(const char *name, const char *output_dir, char *err, size_t errlen)
{
	if (strcmp(name, "files") == 0)
		return consumer_files_new(output_dir, err, errlen);
	snprintf(err, errlen, "consumer '%s' is not available in this version (use files)", name);
	return NULL;
}

void consumer_free(struct consumer *c)
{
	if (c)
		c->ops->free(c);
}
