/* pemcheck.h: a TLS secret's certificate and key read as nginx and
 * haproxy will read them (GnuTLS's PEM and X.509 parsers), so a bad one is
 * refused naming the resource and the field ("secret/site: cert: not a PEM
 * certificate") before a consumer's checker reports it as a temp path and
 * its library's words. The plane checks every plaintext secret's pair with
 * it on a write (core/validate.c); the agent before a render. Never quotes
 * the key's text. */
#ifndef TETHER_PEMCHECK_H
#define TETHER_PEMCHECK_H

#include <stddef.h>

/* Checks that cert holds one to 16 PEM certificates, each parsing (the
 * first being the server's, then its chain, whose order is not checked),
 * that key is one unencrypted PEM private key (PKCS#8, RSA or EC; an
 * encrypted one is refused as such), and that the key is the first
 * certificate's. name is the secret's resource name
 * ("secret/site"). Returns 0, or -1 with "NAME: cert: ...", "NAME: key:
 * ..." or "NAME: key: does not match cert ..." and what to do in err. */
int pemcheck_pair(const char *name, const char *cert, const char *key, char *err, size_t errlen);

#endif
