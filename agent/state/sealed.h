/* state/sealed.h: sealed secrets in the applied state. The state, last-good
 * and the digest keep a sealed secret's push body ({"sealed":...}); only a
 * renderer needs its plaintext, and asks the core for it through an opener
 * each time it renders (agent/seal.c opens it in memory with the node's
 * key), and wipes it after (sealed_body_free). */
#ifndef TETHER_SEALED_H
#define TETHER_SEALED_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "state/state.h"

/* How a renderer gets a sealed secret's plaintext body: open returns 0
 * with *body (a validated secret body: free it with sealed_body_free), or
 * -1 with err naming the secret and what failed (never its content). */
struct sealed_opener {
	int (*open)(void *ctx, const struct res *r, cJSON **body, char *err, size_t errlen);
	void *ctx;
};

/* Is r a sealed secret (a secret whose body is {"sealed":...})? */
bool sealed_is(const struct res *r);
/* Wipes every string of v (values and keys), then frees it (NULL: nothing). */
void sealed_body_free(cJSON *v);

#endif
