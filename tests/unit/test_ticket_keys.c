/* test_ticket_keys.c: unit tests of the TLS session-ticket keys' stored
 * form (plane/persist/ticket_keys.c), the SQLite backend's row (a swap
 * compares the revision; the database is 0600), the keeper
 * (plane/core/ticket_keeper.c: made once, kept across a reopen, rotated
 * when due with the previous key kept, a malformed row replaced) and the ClientHello's ticket name
 * (plane/http/tickets.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "core/ticket_keeper.h"
#include "http/tickets.h"
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_codec_round_trip), cmocka_unit_test(test_codec_refuses),
		cmocka_unit_test(test_sqlite_swap),      cmocka_unit_test(test_keeper),
		cmocka_unit_test(test_hello_key_name),   cmocka_unit_test(test_hello_offers_tls13),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
