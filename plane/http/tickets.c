/* http/tickets.c: TLS session resumption on the plane's sessions (see
 * tickets.h).
 *
 * GnuTLS takes one 64-byte master key per session
 * (gnutls_session_ticket_enable_server) and derives the key that encrypts
 * tickets from it by time window (3 ticket lifetimes), accepting the
 * previous window's too. Our rotation (core/ticket_keeper.c) is of the
 * master key itself: every period a new one, the previous kept one more
 * period. A session gets its master when its ClientHello arrives (a
 * handshake hook): the previous one when the offered ticket's key name is
 * one the previous master derives (GnuTLS's derivation: SHA3-512 over the
 * window number, 8 bytes big-endian, then the master; the first 16 bytes
 * name the key), else the current one. A ticket neither made is refused
 * by GnuTLS: a full handshake. */
#include "http/tickets.h"
#include "core/ticket_keeper.h"
#include "util.h"

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

/* GnuTLS derives ticket keys by windows of this many lifetimes (its
 * STEK_ROTATION_PERIOD_PRODUCT) */
#define WINDOW_LIFETIMES 3
#define NAME_LEN 16

/* The keeper for the hook, which has no closure of its own: one plane a
 * process. */
static struct ticket_keeper *_Atomic the;

/* ---- the ClientHello ------------------------------------------------------- */

static bool take(const unsigned char **p, size_t *left, size_t n)
{
	if (*left < n)
		return false;
	*p += n;
	*left -= n;
	return true;
}

static bool len8(const unsigned char **p, size_t *left, size_t *out)
{
	if (*left < 1)
		return false;
	*out = (*p)[0];
	return take(p, left, 1);
}

static bool len16(const unsigned char **p, size_t *left, size_t *out)
{
	if (*left < 2)
		return false;
	*out = (size_t)(*p)[0] << 8 | (*p)[1];
	return take(p, left, 2);
}

/* Moves *p past a ClientHello's version, random, session id, cipher
 * suites and compression methods, and sets *left to its extensions'
 * length. */
static bool hello_extensions(const unsigned char *msg, size_t len, const unsigned char **p, size_t *left)
{
	size_t n;
	*p = msg;
	*left = len;
	if (!take(p, left, 2 + 32) || !len8(p, left, &n) || !take(p, left, n) || !len16(p, left, &n) ||
	    !take(p, left, n) || !len8(p, left, &n) || !take(p, left, n) || !len16(p, left, &n) || n > *left)
		return false;
	*left = n;
	return true;
}

/* The next extension of a ClientHello's (*p, *left: what hello_extensions
 * left): its type, and its body in *e, *el. 1: one; 0: no more, or one
 * that runs past the rest. */
static int next_extension(const unsigned char **p, size_t *left, unsigned *type, const unsigned char **e,
			  size_t *el)
{
	if (*left < 4)
		return 0;
	*type = (unsigned)(*p)[0] << 8 | (*p)[1];
	*el = (size_t)(*p)[2] << 8 | (*p)[3];
	take(p, left, 4);
	if (*el > *left)
		return 0;
	*e = *p;
	take(p, left, *el);
	return 1;
}

int tickets_hello_key_name(const unsigned char *msg, size_t len, unsigned char name[16])
{
	const unsigned char *p, *e;
	size_t left, el;
	unsigned type;
	if (!hello_extensions(msg, len, &p, &left))
		return 0;
	while (next_extension(&p, &left, &type, &e, &el)) {
		if (type == 41) {
			/* pre_shared_key: identities<7..2^16-1>, the first one's
			 * identity<1..2^16-1> */
			size_t ids, idlen;
			if (!len16(&e, &el, &ids) || ids > el || ids < 2 || !len16(&e, &el, &idlen) ||
			    idlen > ids - 2 || idlen > el || idlen < NAME_LEN)
				return 0;
			memcpy(name, e, NAME_LEN);
			return 1;
		}
		if (type == 35 && el >= NAME_LEN) {
			/* SessionTicket (TLS 1.2): the ticket, the whole extension */
			memcpy(name, e, NAME_LEN);
			return 1;
		}
	}
	return 0;
}

int tickets_hello_offers_tls13(const unsigned char *msg, size_t len)
{
	const unsigned char *p, *e;
	size_t left, el, vl;
	unsigned type;
	if (!hello_extensions(msg, len, &p, &left))
		return 0;
	while (next_extension(&p, &left, &type, &e, &el)) {
		if (type != 43)
			continue;
		/* supported_versions: versions<2..254>, two bytes each */
		if (!len8(&e, &el, &vl) || vl > el)
			return 0;
		for (size_t i = 0; i + 1 < vl; i += 2)
			if (e[i] == 0x03 && e[i + 1] == 0x04)
				return 1;
		return 0;
	}
	return 0;
}

/* The key name GnuTLS derives from master for window w. */
static void derived_name(const unsigned char *master, uint64_t w, unsigned char out[NAME_LEN])
{
	unsigned char in[8 + PERSIST_TICKET_KEY], h[64];
	for (int i = 0; i < 8; i++)
		in[i] = (unsigned char)(w >> (56 - 8 * i));
	memcpy(in + 8, master, PERSIST_TICKET_KEY);
	gnutls_hash_fast(GNUTLS_DIG_SHA3_512, in, sizeof(in), h);
	memcpy(out, h, NAME_LEN);
	explicit_bzero(in, sizeof(in));
	explicit_bzero(h, sizeof(h));
}

/* Whether the ticket named name was made with master (in this window or
 * the one before: GnuTLS accepts no older). */
static bool made_with(const unsigned char *master, const unsigned char name[NAME_LEN], int64_t lifetime)
{
	uint64_t w = (uint64_t)wall_seconds() / (uint64_t)(lifetime * WINDOW_LIFETIMES);
	unsigned char n[NAME_LEN];
	for (int back = 0; back < 2 && w >= (uint64_t)back; back++) {
		derived_name(master, w - (uint64_t)back, n);
		if (memcmp(n, name, NAME_LEN) == 0)
			return true;
	}
	return false;
}

static int on_hello(gnutls_session_t s, unsigned htype, unsigned when, unsigned incoming, const gnutls_datum_t *msg)
{
	(void)htype;
	(void)when;
	struct ticket_keeper *t = atomic_load(&the);
	if (!incoming || !t || gnutls_session_get_ptr(s) != t)
		return 0;
	gnutls_session_set_ptr(s, NULL);   /* once: a second ClientHello (after a retry request) keeps it */
	/* TLS 1.3 only: a TLS 1.2 ticket holds the master secret itself, and
	 * whoever has the key decrypts a recorded session with it. A hello
	 * without TLS 1.3 gets tickets neither made nor taken. */
	if (tickets_hello_offers_tls13(msg->data, msg->size) != 1)
		return 0;
	unsigned char name[NAME_LEN];
	struct persist_ticket_keys k;
	ticket_keeper_keys(t, &k);
	int64_t period = ticket_keeper_period(t);
	if (wall_seconds() - k.created >= 2 * period) {
		/* overdue (the store has not let the keeper rotate it): no
		 * tickets rather than a key kept forever */
		explicit_bzero(&k, sizeof(k));
		return 0;
	}
	gnutls_datum_t key = { k.cur, PERSIST_TICKET_KEY };
	if (k.has_prev && tickets_hello_key_name(msg->data, msg->size, name) == 1 &&
	    !made_with(k.cur, name, period) && made_with(k.prev, name, period))
		key.data = k.prev;
	gnutls_session_ticket_enable_server(s, &key);
	explicit_bzero(&k, sizeof(k));
	return 0;
}

int tickets_session(struct ticket_keeper *t, void *session)
{
	gnutls_session_t s = session;
	if (!t)
		return 0;
	atomic_store(&the, t);
	/* a ticket lives one period; GnuTLS's own key windows are three */
	gnutls_db_set_cache_expiration(s, (int)ticket_keeper_period(t));
	gnutls_session_set_ptr(s, t);
	gnutls_handshake_set_hook_function(s, GNUTLS_HANDSHAKE_CLIENT_HELLO, GNUTLS_HOOK_PRE, on_hello);
	return 0;
}

unsigned tickets_init_flags(void)
{
	return GNUTLS_NO_AUTO_SEND_TICKET;
}

int tickets_handshake_done(struct ticket_keeper *t, void *session)
{
	gnutls_session_t s = session;
	if (!t || gnutls_protocol_get_version(s) != GNUTLS_TLS1_3)
		return 0;
	/* no ticket to a client that showed a certificate: a ticket carries
	 * the chain, and whoever holds the keys could forge one with any
	 * real chain; such clients always do full handshakes (and
	 * tls_peer_node takes no chain from a resumed session) */
	unsigned n = 0;
	if (gnutls_certificate_get_peers(s, &n) && n > 0)
		return 0;
	/* right after the handshake the socket takes the few hundred bytes;
	 * if not, the caller calls again (with nothing else sent between:
	 * GnuTLS keeps the encrypted ticket in its record buffer) */
	int rc = gnutls_session_ticket_send(s, 1, 0);
	if (rc == GNUTLS_E_AGAIN || rc == GNUTLS_E_INTERRUPTED)
		return 1;
	return rc < 0 ? -1 : 0;
}
