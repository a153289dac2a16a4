/* consumer/checkmap.h: a consumer checker's refusal (nginx -t, haproxy -c)
 * mapped back to the resource it came from, when the file it names is one
 * tether rendered from a resource: a secret's file under the secrets
 * directory ("NAME-HASH.crt", ".key", haproxy's ".pem") is secret/NAME's
 * cert or key. */
#ifndef TETHER_CHECKMAP_H
#define TETHER_CHECKMAP_H

#include <stddef.h>

/* Writes "secret/NAME: FIELD: " to out[cap] for the first secret file of
 * secrets_dir that output names (FIELD: cert for .crt, key for .key, and
 * for haproxy's .pem key when output speaks of the private key, else
 * cert), or "" when it names none. */
void checkmap_prefix(const char *output, const char *secrets_dir, char *out, size_t cap);

#endif
