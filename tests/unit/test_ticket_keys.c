/* test_ticket_keys.c: unit tests of the TLS session-ticket keys' stored
 * form (plane/persist/ticket_keys.c), the SQLite backend's row (a swap
 * compares the revision; the database is 0600), the keeper
 * (plane/core/ticket_keeper.c: made once, kept across a reopen, rotated
 * when due with the previous key kept, a malformed row replaced), the
 * client-certificate rule (no ticket to such a client; a resumed
 * session's certificate is no credential: in-process GnuTLS) and the
 * ClientHello's ticket name (plane/http/tickets.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "core/ticket_keeper.h"
#include "http/tickets.h"
#include "http/tls.h"
#include "persist/persist.h"
#include "persist/ticket_keys.h"
#include "tmpdir.h"
#include "util.h"

static struct persist_ticket_keys sample(bool prev)
{
	struct persist_ticket_keys k = { .created = 1733370000, .has_prev = prev };
	for (int i = 0; i < PERSIST_TICKET_KEY; i++) {
		k.cur[i] = (unsigned char)(i * 7 + 1);
		k.prev[i] = prev ? (unsigned char)(255 - i) : 0;
	}
	return k;
}

static void test_codec_round_trip(void **state)
{
	(void)state;
	for (int p = 0; p < 2; p++) {
		struct persist_ticket_keys k = sample(p), back;
		char text[TICKET_KEYS_TEXT];
		size_t len = ticket_keys_encode(&k, text);
		assert_int_equal(len, strlen(text));
		assert_true(len < TICKET_KEYS_TEXT);
		assert_int_equal(ticket_keys_decode(text, len, &back), 0);
		assert_int_equal(back.created, k.created);
		assert_int_equal(back.has_prev, k.has_prev);
		assert_memory_equal(back.cur, k.cur, PERSIST_TICKET_KEY);
		if (p)
			assert_memory_equal(back.prev, k.prev, PERSIST_TICKET_KEY);
	}
}

static void test_codec_refuses(void **state)
{
	(void)state;
	struct persist_ticket_keys k = sample(true), back;
	char text[TICKET_KEYS_TEXT], bad[TICKET_KEYS_TEXT + 8];
	size_t len = ticket_keys_encode(&k, text);
	/* every truncation */
	for (size_t n = 0; n < len; n++)
		assert_int_equal(ticket_keys_decode(text, n, &back), -1);
	/* a byte more */
	memcpy(bad, text, len);
	bad[len] = '0';
	assert_int_equal(ticket_keys_decode(bad, len + 1, &back), -1);
	/* a non-hex digit in a key, another version, no created time */
	memcpy(bad, text, len);
	bad[len - 3] = 'g';
	assert_int_equal(ticket_keys_decode(bad, len, &back), -1);
	assert_int_equal(ticket_keys_decode("tether-ticket-keys 2 1 -", 24, &back), -1);
	snprintf(bad, sizeof(bad), "tether-ticket-keys 1  %s", text + 32);
	assert_int_equal(ticket_keys_decode(bad, strlen(bad), &back), -1);
	/* a refusal leaves nothing of what it read */
	static const unsigned char zero[PERSIST_TICKET_KEY];
	memcpy(bad, text, len);
	bad[len - 1] = 'x';
	assert_int_equal(ticket_keys_decode(bad, len, &back), -1);
	assert_memory_equal(back.cur, zero, PERSIST_TICKET_KEY);
}

static void test_sqlite_swap(void **state)
{
	(void)state;
	char dir[64], err[256], db[128];
	assert_int_equal(test_tmpdir_make(dir, sizeof(dir), "ticketkeys"), 0);
	struct persist *p = persist_sqlite_open(dir, err, sizeof(err));
	assert_non_null(p);
	struct persist_ticket_keys k = sample(false), got;
	uint64_t rev = 0;
	assert_int_equal(p->ops->ticket_keys_load(p, &got, &rev, err, sizeof(err)), 0);
	assert_int_equal(rev, 0);
	/* the first store; a second "first" one conflicts */
	assert_int_equal(p->ops->ticket_keys_swap(p, &k, &rev, err, sizeof(err)), 0);
	assert_true(rev > 0);
	uint64_t stale = 0;
	assert_int_equal(p->ops->ticket_keys_swap(p, &k, &stale, err, sizeof(err)), PERSIST_CONFLICT);
	uint64_t r2 = 0;
	assert_int_equal(p->ops->ticket_keys_load(p, &got, &r2, err, sizeof(err)), 1);
	assert_int_equal(r2, rev);
	assert_memory_equal(got.cur, k.cur, PERSIST_TICKET_KEY);
	/* a rotation at the revision read */
	struct persist_ticket_keys n = sample(true);
	n.cur[0] ^= 0xff;
	assert_int_equal(p->ops->ticket_keys_swap(p, &n, &r2, err, sizeof(err)), 0);
	assert_true(r2 > rev);
	/* one at the old revision conflicts */
	assert_int_equal(p->ops->ticket_keys_swap(p, &k, &rev, err, sizeof(err)), PERSIST_CONFLICT);
	persist_close(p);
	/* kept across a reopen, in a 0600 file */
	p = persist_sqlite_open(dir, err, sizeof(err));
	assert_non_null(p);
	assert_int_equal(p->ops->ticket_keys_load(p, &got, &rev, err, sizeof(err)), 1);
	assert_memory_equal(got.cur, n.cur, PERSIST_TICKET_KEY);
	assert_true(got.has_prev);
	persist_close(p);
	struct stat st;
	snprintf(db, sizeof(db), "%s/tether.db", dir);
	assert_int_equal(stat(db, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	test_tmpdir_remove(dir);
}

static void test_keeper(void **state)
{
	(void)state;
	char dir[64], err[256];
	assert_int_equal(test_tmpdir_make(dir, sizeof(dir), "keeper"), 0);
	struct persist *p = persist_sqlite_open(dir, err, sizeof(err));
	assert_non_null(p);
	struct ticket_keeper *t = ticket_keeper_open(p, 86400, err, sizeof(err));
	assert_non_null(t);
	struct persist_ticket_keys a, b;
	ticket_keeper_keys(t, &a);
	assert_false(a.has_prev);
	ticket_keeper_free(t);
	/* a second keeper (a restart, a replica) takes the same key */
	t = ticket_keeper_open(p, 86400, err, sizeof(err));
	assert_non_null(t);
	ticket_keeper_keys(t, &b);
	assert_memory_equal(a.cur, b.cur, PERSIST_TICKET_KEY);
	ticket_keeper_free(t);
	/* a key older than the period: rotated at open, the old one previous */
	uint64_t rev;
	assert_int_equal(p->ops->ticket_keys_load(p, &b, &rev, err, sizeof(err)), 1);
	b.created -= 86400 + 10;
	assert_int_equal(p->ops->ticket_keys_swap(p, &b, &rev, err, sizeof(err)), 0);
	t = ticket_keeper_open(p, 86400, err, sizeof(err));
	assert_non_null(t);
	ticket_keeper_keys(t, &b);
	assert_true(b.has_prev);
	assert_memory_equal(b.prev, a.cur, PERSIST_TICKET_KEY);
	assert_memory_not_equal(b.cur, a.cur, PERSIST_TICKET_KEY);
	ticket_keeper_free(t);
	/* one older than two periods: nothing it made is valid, no previous */
	assert_int_equal(p->ops->ticket_keys_load(p, &b, &rev, err, sizeof(err)), 1);
	b.created -= 3 * 86400;
	assert_int_equal(p->ops->ticket_keys_swap(p, &b, &rev, err, sizeof(err)), 0);
	t = ticket_keeper_open(p, 86400, err, sizeof(err));
	assert_non_null(t);
	ticket_keeper_keys(t, &a);
	assert_false(a.has_prev);
	ticket_keeper_free(t);
	/* a malformed row: keys are disposable, new ones over it (a
	 * compare-and-swap at its revision), not a plane that will not start */
	char path[128];
	snprintf(path, sizeof(path), "%s/tether.db", dir);
	sqlite3 *db;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "UPDATE ticket_keys SET keys = 'not keys', rev = rev + 1", NULL, NULL, NULL),
			 SQLITE_OK);
	assert_int_equal(p->ops->ticket_keys_load(p, &b, &rev, err, sizeof(err)), PERSIST_MALFORMED);
	uint64_t bad_rev = rev;
	assert_true(bad_rev > 0);
	t = ticket_keeper_open(p, 86400, err, sizeof(err));
	assert_non_null(t);
	ticket_keeper_keys(t, &b);
	assert_false(b.has_prev);
	assert_memory_not_equal(b.cur, a.cur, PERSIST_TICKET_KEY);
	ticket_keeper_free(t);
	struct persist_ticket_keys c;
	assert_int_equal(p->ops->ticket_keys_load(p, &c, &rev, err, sizeof(err)), 1);
	assert_true(rev > bad_rev);
	assert_memory_equal(c.cur, b.cur, PERSIST_TICKET_KEY);
	/* the same while running: the minute's refresh replaces it */
	t = ticket_keeper_open(p, 8, err, sizeof(err));   /* refreshes every 2 s */
	assert_non_null(t);
	assert_int_equal(sqlite3_exec(db, "UPDATE ticket_keys SET keys = 'x', rev = rev + 1", NULL, NULL, NULL),
			 SQLITE_OK);
	int loaded = 0;
	for (int i = 0; i < 60 && loaded != 1; i++) {
		struct timespec ts = { 0, 100 * 1000 * 1000 };
		nanosleep(&ts, NULL);
		loaded = p->ops->ticket_keys_load(p, &c, &rev, err, sizeof(err));
	}
	assert_int_equal(loaded, 1);
	ticket_keeper_keys(t, &b);
	assert_memory_equal(c.cur, b.cur, PERSIST_TICKET_KEY);
	ticket_keeper_free(t);
	sqlite3_close(db);
	/* a backend without keys (a relay's): in memory */
	t = ticket_keeper_open(NULL, 86400, err, sizeof(err));
	assert_non_null(t);
	ticket_keeper_keys(t, &a);
	assert_true(a.created > 0);
	ticket_keeper_free(t);
	persist_close(p);
	test_tmpdir_remove(dir);
}

/* A ClientHello body: version, random, session id, suites, compression,
 * then the extensions given. */
static size_t hello(unsigned char *out, const unsigned char *ext, size_t elen)
{
	size_t n = 0;
	out[n++] = 3;
	out[n++] = 3;
	memset(out + n, 0xaa, 32);
	n += 32;
	out[n++] = 0;          /* session id */
	out[n++] = 0;
	out[n++] = 2;          /* one suite */
	out[n++] = 0x13;
	out[n++] = 0x01;
	out[n++] = 1;          /* compression: null */
	out[n++] = 0;
	out[n++] = (unsigned char)(elen >> 8);
	out[n++] = (unsigned char)elen;
	memcpy(out + n, ext, elen);
	return n + elen;
}

static void test_hello_key_name(void **state)
{
	(void)state;
	unsigned char msg[512], ext[256], name[16];
	size_t e = 0;
	/* an unrelated extension first (server_name, empty) */
	ext[e++] = 0;
	ext[e++] = 0;
	ext[e++] = 0;
	ext[e++] = 0;
	/* pre_shared_key: identities<2> { identity<2> (20 bytes), age<4> }, binders */
	size_t at = e;
	ext[e++] = 0;
	ext[e++] = 41;
	ext[e++] = 0;
	ext[e++] = 0;          /* length, below */
	ext[e++] = 0;
	ext[e++] = 26;         /* identities: 2 + 20 + 4 */
	ext[e++] = 0;
	ext[e++] = 20;
	for (int i = 0; i < 20; i++)
		ext[e++] = (unsigned char)(0x40 + i);
	memset(ext + e, 0, 4);
	e += 4;
	ext[e++] = 0;          /* binders: one of 0 bytes (not checked here) */
	ext[e++] = 1;
	ext[e++] = 0;
	ext[at + 3] = (unsigned char)(e - at - 4);
	size_t len = hello(msg, ext, e);
	assert_int_equal(tickets_hello_key_name(msg, len, name), 1);
	for (int i = 0; i < 16; i++)
		assert_int_equal(name[i], 0x40 + i);
	/* every truncation is no ticket, not a read past the end */
	for (size_t n = 0; n < len - 7; n++)
		assert_int_equal(tickets_hello_key_name(msg, n, name), 0);
	/* identities shorter than their own length field (0 or 1 bytes):
	 * none, not an identity read past the extension */
	unsigned char shortids[] = { 0, 41, 0, 20, 0, 1, 0, 16, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };
	len = hello(msg, shortids, sizeof(shortids));
	assert_int_equal(tickets_hello_key_name(msg, len, name), 0);
	shortids[5] = 0;
	len = hello(msg, shortids, sizeof(shortids));
	assert_int_equal(tickets_hello_key_name(msg, len, name), 0);
	/* a SessionTicket (TLS 1.2) */
	unsigned char st[24] = { 0, 35, 0, 20 };
	for (int i = 0; i < 20; i++)
		st[4 + i] = (unsigned char)(0x80 + i);
	len = hello(msg, st, sizeof(st));
	assert_int_equal(tickets_hello_key_name(msg, len, name), 1);
	assert_int_equal(name[0], 0x80);
	/* none: no extensions; an empty SessionTicket */
	len = hello(msg, st, 0);
	assert_int_equal(tickets_hello_key_name(msg, len, name), 0);
	unsigned char empty[4] = { 0, 35, 0, 0 };
	len = hello(msg, empty, sizeof(empty));
	assert_int_equal(tickets_hello_key_name(msg, len, name), 0);
}

/* Tickets are TLS 1.3 only: whether a ClientHello's supported_versions
 * offers 0x0304. */
static void test_hello_offers_tls13(void **state)
{
	(void)state;
	unsigned char msg[512];
	unsigned char both[] = { 0, 43, 0, 5, 4, 0x03, 0x04, 0x03, 0x03 };
	size_t len = hello(msg, both, sizeof(both));
	assert_int_equal(tickets_hello_offers_tls13(msg, len), 1);
	for (size_t n = 0; n < len; n++)
		assert_int_equal(tickets_hello_offers_tls13(msg, n), 0);
	unsigned char only12[] = { 0, 43, 0, 3, 2, 0x03, 0x03 };
	len = hello(msg, only12, sizeof(only12));
	assert_int_equal(tickets_hello_offers_tls13(msg, len), 0);
	/* a TLS 1.2 hello: no supported_versions, a SessionTicket */
	unsigned char st[24] = { 0, 35, 0, 20 };
	len = hello(msg, st, sizeof(st));
	assert_int_equal(tickets_hello_offers_tls13(msg, len), 0);
	/* a list longer than its extension */
	unsigned char lying[] = { 0, 43, 0, 3, 6, 0x03, 0x04 };
	len = hello(msg, lying, sizeof(lying));
	assert_int_equal(tickets_hello_offers_tls13(msg, len), 0);
}

/* ---- in-process TLS: a client certificate and tickets ---------------------- */

/* A self-signed certificate (CA:TRUE, good for both ends) and its key. */
static void make_cert(const char *cn, gnutls_x509_crt_t *crt, gnutls_x509_privkey_t *key)
{
	assert_int_equal(gnutls_x509_privkey_init(key), 0);
	assert_int_equal(gnutls_x509_privkey_generate(*key, GNUTLS_PK_ECDSA,
						      GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0), 0);
	assert_int_equal(gnutls_x509_crt_init(crt), 0);
	gnutls_x509_crt_set_version(*crt, 3);
	unsigned char serial[4] = { 1, 2, 3, 4 };
	gnutls_x509_crt_set_serial(*crt, serial, sizeof(serial));
	time_t now = time(NULL);
	gnutls_x509_crt_set_activation_time(*crt, now - 60);
	gnutls_x509_crt_set_expiration_time(*crt, now + 3600);
	gnutls_x509_crt_set_dn_by_oid(*crt, GNUTLS_OID_X520_COMMON_NAME, 0, cn, (unsigned)strlen(cn));
	gnutls_x509_crt_set_key(*crt, *key);
	gnutls_x509_crt_set_basic_constraints(*crt, 1, -1);
	assert_true(gnutls_x509_crt_sign2(*crt, *crt, *key, GNUTLS_DIG_SHA256, 0) >= 0);
}

struct client_run {
	int fd;
	gnutls_certificate_credentials_t creds;
	gnutls_datum_t in;      /* a session to resume (size 0: none) */
	gnutls_datum_t out;     /* the session after (gnutls_free) */
	int resumed, rc;
};

static void *client(void *arg)
{
	struct client_run *r = arg;
	gnutls_session_t s;
	gnutls_init(&s, GNUTLS_CLIENT);
	gnutls_priority_set_direct(s, "NORMAL:-VERS-ALL:+VERS-TLS1.3", NULL);
	gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, r->creds);
	gnutls_transport_set_int(s, r->fd);
	if (r->in.size)
		gnutls_session_set_data(s, r->in.data, r->in.size);
	int rc;
	do
		rc = gnutls_handshake(s);
	while (rc < 0 && !gnutls_error_is_fatal(rc));
	r->rc = rc;
	if (rc == 0) {
		r->resumed = gnutls_session_is_resumed(s);
		/* the server's one byte, after any ticket */
		char b;
		do
			rc = (int)gnutls_record_recv(s, &b, 1);
		while (rc == GNUTLS_E_AGAIN || rc == GNUTLS_E_INTERRUPTED);
		gnutls_session_get_data2(s, &r->out);
	}
	gnutls_bye(s, GNUTLS_SHUT_WR);
	gnutls_deinit(s);
	return NULL;
}

/* One connection: the server side with creds (a CA to request client
 * certificates of), ticket key key; the plane's own path when t is given
 * (its hook, one ticket after the handshake), else GnuTLS's own tickets
 * (what whoever holds the keys can make). Returns whether the server
 * resumed; *usable whether a certificate came and may be a credential. */
static int connect_once(gnutls_certificate_credentials_t screds, gnutls_certificate_credentials_t ccreds,
			struct ticket_keeper *t, const gnutls_datum_t *key, gnutls_datum_t *sess, int *peers,
			int *usable)
{
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	struct client_run r = { .fd = sv[1], .creds = ccreds, .in = *sess };
	pthread_t th;
	pthread_create(&th, NULL, client, &r);
	gnutls_session_t s;
	gnutls_init(&s, GNUTLS_SERVER | (t ? tickets_init_flags() : 0));
	gnutls_priority_set_direct(s, "NORMAL:-VERS-ALL:+VERS-TLS1.3", NULL);
	gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, screds);
	gnutls_certificate_server_set_request(s, GNUTLS_CERT_REQUEST);
	if (t)
		tickets_session(t, s);
	else
		gnutls_session_ticket_enable_server(s, key);
	gnutls_transport_set_int(s, sv[0]);
	int rc;
	do
		rc = gnutls_handshake(s);
	while (rc < 0 && !gnutls_error_is_fatal(rc));
	assert_int_equal(rc, 0);
	if (t)
		assert_int_equal(tickets_handshake_done(t, s), 0);
	unsigned n = 0;
	*peers = gnutls_certificate_get_peers(s, &n) != NULL && n > 0;
	*usable = tls_session_cert_usable(s);
	int resumed = gnutls_session_is_resumed(s);
	do
		rc = (int)gnutls_record_send(s, "x", 1);
	while (rc == GNUTLS_E_AGAIN || rc == GNUTLS_E_INTERRUPTED);
	pthread_join(th, NULL);
	assert_int_equal(r.rc, 0);
	assert_int_equal(r.resumed, resumed);
	gnutls_deinit(s);
	close(sv[0]);
	close(sv[1]);
	if (sess->size)
		gnutls_free(sess->data);
	*sess = r.out;
	return resumed;
}

/* A client that shows a certificate gets no ticket from the plane (it
 * never resumes), one without does; and a certificate out of a resumed
 * session (a ticket made with the keys: what their thief can forge) is no
 * credential. */
static void test_no_ticket_with_client_cert(void **state)
{
	(void)state;
	gnutls_x509_crt_t scrt, ccrt;
	gnutls_x509_privkey_t skey, ckey;
	make_cert("server", &scrt, &skey);
	make_cert("n1", &ccrt, &ckey);
	gnutls_certificate_credentials_t screds, ccert, canon;
	gnutls_certificate_allocate_credentials(&screds);
	gnutls_certificate_set_x509_key(screds, &scrt, 1, skey);
	gnutls_certificate_set_x509_trust(screds, &ccrt, 1);
	gnutls_certificate_allocate_credentials(&ccert);
	gnutls_certificate_set_x509_key(ccert, &ccrt, 1, ckey);
	gnutls_certificate_allocate_credentials(&canon);
	char err[256];
	struct ticket_keeper *t = ticket_keeper_open(NULL, 86400, err, sizeof(err));
	assert_non_null(t);
	gnutls_datum_t key = { NULL, 0 }, sess = { NULL, 0 };
	int peers, usable;
	/* the plane's path, with a certificate: a full handshake, no ticket */
	assert_int_equal(connect_once(screds, ccert, t, NULL, &sess, &peers, &usable), 0);
	assert_true(peers);
	assert_true(usable);
	assert_int_equal(connect_once(screds, ccert, t, NULL, &sess, &peers, &usable), 0);
	assert_true(usable);
	if (sess.size)
		gnutls_free(sess.data);
	sess = (gnutls_datum_t){ NULL, 0 };
	/* without one: a ticket, and it resumes */
	assert_int_equal(connect_once(screds, canon, t, NULL, &sess, &peers, &usable), 0);
	assert_false(peers);
	assert_int_equal(connect_once(screds, canon, t, NULL, &sess, &peers, &usable), 1);
	if (sess.size)
		gnutls_free(sess.data);
	sess = (gnutls_datum_t){ NULL, 0 };
	/* a ticket with a chain in it, made with the key (GnuTLS's own
	 * tickets): the resumed session has the chain, which is no credential */
	assert_int_equal(gnutls_session_ticket_key_generate(&key), 0);
	assert_int_equal(connect_once(screds, ccert, NULL, &key, &sess, &peers, &usable), 0);
	assert_true(peers && usable);
	assert_int_equal(connect_once(screds, ccert, NULL, &key, &sess, &peers, &usable), 1);
	assert_true(peers);
	assert_false(usable);
	if (sess.size)
		gnutls_free(sess.data);
	gnutls_free(key.data);
	ticket_keeper_free(t);
	gnutls_certificate_free_credentials(screds);
	gnutls_certificate_free_credentials(ccert);
	gnutls_certificate_free_credentials(canon);
	gnutls_x509_crt_deinit(scrt);
	gnutls_x509_crt_deinit(ccrt);
	gnutls_x509_privkey_deinit(skey);
	gnutls_x509_privkey_deinit(ckey);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_codec_round_trip), cmocka_unit_test(test_codec_refuses),
		cmocka_unit_test(test_sqlite_swap),      cmocka_unit_test(test_keeper),
		cmocka_unit_test(test_hello_key_name),   cmocka_unit_test(test_hello_offers_tls13),
		cmocka_unit_test(test_no_ticket_with_client_cert),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
