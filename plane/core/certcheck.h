/* core/certcheck.h: a plaintext secret's certificate and key, parsed on
 * the plane before a write takes them (GnuTLS): the certificate (and any
 * chain after it) must be PEM certificates, the key a PEM private key,
 * and the key the one of the first certificate. Without it a "certificate"
 * of a PEM header and garbage reached every node, and only the canary's
 * nginx -t caught it. A sealed secret cannot be opened here: its node
 * checks it (the canary). */
#ifndef TETHER_CERTCHECK_H
#define TETHER_CERTCHECK_H

#include <stddef.h>

/* Checks cert and key (the PEM texts of secret/NAME's body). Returns 0,
 * or -1 with err "NAME: cert: ..." or "NAME: key: ..." (what is wrong
 * and what to do; never the key's text). */
int certcheck_pair(const char *name, const char *cert, const char *key, char *err, size_t errlen);

#endif
