/* http/tls.h: the plane's TLS (GnuTLS, in httpd.c's loops): its certificate
 * and key (--tls-cert, --tls-key), handed to each new handshake by a
 * callback so SIGHUP can load new ones while open streams keep theirs;
 * and client certificates (--client-ca): requested at the handshake,
 * verified per request against the CA (chain, validity, TLS client
 * purpose), and turned into a node identity, the subject's CN. */
#ifndef TETHER_TLS_H
#define TETHER_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include "net/httpd.h"

struct plane_tls;

/* Loads cert and key (and client_ca when not NULL). NULL with err. */
struct plane_tls *tls_open(const char *cert, const char *key, const char *client_ca, char *err, size_t errlen);
void tls_free(struct plane_tls *t);
/* Loads the files again; on failure the old ones stay. 0, or -1 with err. */
int tls_reload(struct plane_tls *t, char *err, size_t errlen);

/* What the HTTP server hands each handshake: the credentials (a
 * gnutls_certificate_credentials_t, whose certificate comes from a
 * callback), the priorities (a gnutls_priority_t), and the client CA's
 * PEM text (NULL when client certificates are not asked for). */
void *tls_credentials(struct plane_tls *t);
void *tls_priority(struct plane_tls *t);
const char *tls_client_ca_pem(struct plane_tls *t);

/* --cert-roles: a client certificate whose subject holds one OU of
 * tether-admin, tether-operator or tether-reader is a person with that
 * role (its CN names them), and one of tether-relay a relay; without it
 * every certificate is a node. */
void tls_set_cert_roles(struct plane_tls *t, bool on);

/* Whether a session's client certificate may be a credential (a
 * gnutls_session_t): not when the session resumed, whose chain came out of
 * a ticket (which whoever holds the ticket keys can forge, with any real
 * chain). */
bool tls_session_cert_usable(void *session);

/* Who the client certificate presented on c is: 1 with its CN in cn and
 * in *role ROLE_NODE (the CN is the node id) or, with --cert-roles, the
 * role its OU names; 0 when none was presented (or mutual TLS is off); -1
 * when one was presented but does not verify (err says why). role may be
 * NULL. */
int tls_peer_node(struct plane_tls *t, struct http_conn *c, char *cn, size_t cap, int *role, char *err,
		  size_t errlen);

#endif
