/* http/tickets.h: TLS session resumption on the plane's GnuTLS sessions,
 * with the keys core/ticket_keeper.c keeps: a ticket made before a
 * restart, on another replica or with the previous key resumes; one
 * expired, unknown or from another deployment gets a full handshake. */
#ifndef TETHER_TICKETS_H
#define TETHER_TICKETS_H

#include <stddef.h>

struct ticket_keeper;

/* A new server session (a gnutls_session_t) may resume: its ticket key is
 * chosen when its ClientHello comes (the current key, or the previous one
 * for a ticket that key made). 0, or -1. */
int tickets_session(struct ticket_keeper *t, void *session);

/* The gnutls_init flags a session with tickets needs (GnuTLS sends no
 * ticket of its own accord: tickets_handshake_done does). */
unsigned tickets_init_flags(void);
/* A handshake is done: it gets one ticket (TLS 1.3's NewSessionTicket) to
 * resume with next time, GnuTLS would send two. A resumed one gets one
 * too: an OpenSSL client (tetherd's libcurl) does not offer a ticket it
 * resumed with again. */
/* None to a client that presented a certificate, none but on TLS 1.3.
 * 0 done (or nothing to send), 1 the socket is full: call again, before
 * any other record is sent, when it is writable; -1 the session failed. */
int tickets_handshake_done(struct ticket_keeper *t, void *session);

/* Whether a ClientHello's supported_versions offers TLS 1.3: 1, else 0. */
int tickets_hello_offers_tls13(const unsigned char *msg, size_t len);

/* The first 16 bytes of the first ticket a ClientHello (its handshake
 * message body, len bytes) offers: a TLS 1.3 pre_shared_key identity or a
 * TLS 1.2 SessionTicket. 1 found, 0 none (or a malformed hello: GnuTLS
 * refuses it itself). For the fuzzer too. */
int tickets_hello_key_name(const unsigned char *msg, size_t len, unsigned char name[16]);

#endif
