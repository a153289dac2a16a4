/* core/validate.h: turns admin writes into store changes. Each body is checked
 * (name grammar, known fields, types and ranges) and canonicalized; then the
 * whole candidate state -- the store with the changes applied -- is checked
 * for dangling references and the resource limit. Nothing here writes. */
#ifndef TETHER_VALIDATE_H
#define TETHER_VALIDATE_H

#include <stddef.h>
#include <cjson/cJSON.h>

#include "core/store.h"

/* Fills out from one upsert: out->body becomes the canonical text (caller
 * frees it). Returns 0, or -1 with err naming the resource and field. */
int validate_upsert(const char *name, cJSON *body, struct store_change *out, char *err, size_t errlen);
/* The same for a write of a client (PUT, batch): with VALIDATE_STRICT
 * unknown fields are refused (the default; --allow-unknown-fields drops
 * it), and a plaintext secret's certificate and key are parsed and must
 * match (common/pemcheck.h). A revert restores what the plane once took and
 * uses validate_upsert. */
#define VALIDATE_STRICT 1u
int validate_write(const char *name, cJSON *body, unsigned flags, struct store_change *out, char *err,
		   size_t errlen);

/* Checks the candidate state: no name twice in one write; every reference
 * of an upsert resolves in the candidate; no removal leaves a referrer
 * behind; at most max_resources live. Hold the store's write lock.
 * Returns 0, or -1 with err. */
int validate_candidate(struct store *s, const struct store_change *ch, size_t n,
		       size_t max_resources, char *err, size_t errlen);

#endif
