/* test_seal.c: unit tests of agent/seal.c, the node's side of sealed
 * secrets, with real envelopes (envelope_seal) and a real node key: the
 * key file made 0600 and loaded again; a sealed secret opened to its body
 * (and refused when its wrap is another envelope's, for another key, or
 * it is opened as another secret); a candidate's secrets prepared from the
 * wraps held (wraps.json written, pruned after the commit) or, with none
 * and no plane, a failure to fetch, or a wrap that does not open (a
 * verification failure, the wrap dropped); the nginx and haproxy renderers
 * writing the plaintext only into the secret files while the state keeps
 * the sealed body; a boot's check of last-good's secrets; --rotate-key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent_int.h"
#include "buf.h"
#include "consumer/render.h"
#include "envelope.h"
#include "json.h"
#include "log.h"
#include "state/push.h"
#include "state/sealed.h"
#include "state/state.h"
#include "tmpdir.h"
#include "util.h"
#include "xmalloc.h"

#define CERT "-----BEGIN CERTIFICATE-----\\nMIIBsecretcert\\n-----END CERTIFICATE-----\\n"
#define KEY "-----BEGIN PRIVATE KEY-----\\nMIIEsecretkey\\n-----END PRIVATE KEY-----\\n"
#define PLAIN "{\"cert\":\"" CERT "\",\"key\":\"" KEY "\"}"

struct fx {
	char dir[64];
	struct agent a;
	char *planes[1];
	unsigned char rpk[32], rsk[32];
	char rkid[KEY_ID_LEN + 1];
};

static int setup(void **st)
{
	struct fx *f = xcalloc(1, sizeof(*f));
	if (test_tmpdir_make(f->dir, sizeof(f->dir), "seal") < 0)
		return -1;
	f->a.cfg.state_dir = f->dir;
	f->a.cfg.node = (char *)"n1";
	f->planes[0] = (char *)"http://127.0.0.1:1";   /* nothing listens: a fetch fails */
	f->a.cfg.planes = f->planes;
	f->a.cfg.nplanes = 1;
	f->a.cfg.connect_timeout = 2;
	f->a.cfg.backoff_min = 1;
	f->a.cfg.backoff_max = 30;
	f->a.cfg.output_dir = f->dir;
	f->a.cfg.consumer = (char *)"nginx";
	state_init(&f->a.state);
	char err[512];
	if (seal_init(&f->a, err, sizeof(err)) < 0) {
		fprintf(stderr, "seal_init: %s\n", err);
		return -1;
	}
	crypto_box_keypair(f->rpk, f->rsk);
	keys_id(f->rpk, f->rkid);
	*st = f;
	return 0;
}

static int teardown(void **st)
{
	struct fx *f = *st;
	seal_release(&f->a);
	state_release(&f->a.state);
	test_tmpdir_remove(f->dir);
	free(f);
	return 0;
}

/* The push body of a new envelope of plain for name; *wrap gets the wrap
 * of its data key for xpk (NULL: none), *id its id. */
static char *seal_body(struct fx *f, const char *name, const char *plain, const unsigned char *xpk, char **wrap,
		       char id[ENVELOPE_ID_LEN + 1])
{
	unsigned char dk[ENVELOPE_DK_BYTES];
	char err[256];
	cJSON *sealed = envelope_seal(name, (const unsigned char *)plain, strlen(plain), f->rpk, f->rkid, dk, err,
				      sizeof(err));
	if (!sealed)
		fail_msg("envelope_seal: %s", err);
	snprintf(id, ENVELOPE_ID_LEN + 1, "%s", json_get_string(sealed, "id"));
	if (wrap)
		*wrap = xpk ? envelope_wrap(dk, xpk) : NULL;
	sodium_memzero(dk, sizeof(dk));
	cJSON *body = cJSON_CreateObject();
	cJSON_AddItemToObject(body, "sealed", sealed);
	char *text = json_encode_canonical(body);
	cJSON_Delete(body);
	return text;
}

static void commit_push(struct state *s, const char *text)
{
	struct push p;
	struct candidate c;
	char err[1024];
	if (push_decode(text, strlen(text), NULL, &p, err, sizeof(err)) < 0 ||
	    candidate_build(s, &p, 0, &c, err, sizeof(err)) < 0)
		fail_msg("push: %s", err);
	state_commit(s, &c);
	candidate_release(&c);
	push_release(&p);
}

/* A push text upserting name with body (JSON) at version. */
static char *push_of(uint64_t version, uint64_t base, const char *name, const char *body)
{
	return xasprintf("{\"version\":%llu,\"base\":%llu,\"full\":false,\"nonce\":\"n\",\"upserts\":["
			 "{\"name\":\"%s\",\"version\":%llu,\"body\":%s}],\"removed\":[]}",
			 (unsigned long long)version, (unsigned long long)base, name, (unsigned long long)version, body);
}

static void test_node_key_file(void **st)
{
	struct fx *f = *st;
	char *path = seal_key_path(&f->a, false);
	struct stat s;
	assert_int_equal(stat(path, &s), 0);
	assert_int_equal(s.st_mode & 0777, 0600);
	/* loaded again, the same key */
	struct node_key k;
	bool made = true;
	char err[256];
	assert_int_equal(nodekey_load_or_make(path, &k, &made, err, sizeof(err)), 0);
	assert_false(made);
	assert_string_equal(k.kid, f->a.seal.key.kid);
	nodekey_forget(&k);
	free(path);
	/* not dumpable from the moment the key is loaded, before any secret
	 * was opened */
	assert_int_equal(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0), 0);
	assert_true(f->a.seal.undumpable);
}

static void test_open(void **st)
{
	struct fx *f = *st;
	char *wrap, id[ENVELOPE_ID_LEN + 1];
	char *body = seal_body(f, "secret/web", PLAIN, f->a.seal.key.xpk, &wrap, id);
	char err[1024];
	struct res *r = res_new("secret/web", xstrdup(body), strlen(body), 1, err, sizeof(err));
	if (!r)
		fail_msg("res_new: %s", err);
	assert_true(sealed_is(r));
	cJSON *b = NULL;
	/* no wrap yet */
	assert_int_equal(seal_open(&f->a, r, &b, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "secret/web: no wrap for its envelope"));
	wraps_put(&f->a.seal.wraps, "secret/web", id, f->a.seal.key.kid, wrap);
	assert_int_equal(seal_open(&f->a, r, &b, err, sizeof(err)), 0);
	assert_non_null(b);
	assert_string_equal(json_get_string(b, "key"), "-----BEGIN PRIVATE KEY-----\nMIIEsecretkey\n-----END PRIVATE KEY-----\n");
	sealed_body_free(b);
	assert_true(f->a.seal.undumpable);

	/* another envelope's wrap (same key) under this envelope's id: opens
	 * to another data key */
	char *wrap2, id2[ENVELOPE_ID_LEN + 1];
	char *body2 = seal_body(f, "secret/web", PLAIN, f->a.seal.key.xpk, &wrap2, id2);
	wraps_put(&f->a.seal.wraps, "secret/web", id, f->a.seal.key.kid, wrap2);
	assert_int_equal(seal_open(&f->a, r, &b, err, sizeof(err)), -1);
	assert_null(b);
	assert_non_null(strstr(err, "secret/web: the wrap for key"));
	assert_non_null(strstr(err, "a relay or the plane changed it"));
	/* a wrap for another key does not open with ours */
	unsigned char opk[32], osk[32];
	crypto_box_keypair(opk, osk);
	char *wrap3, id3[ENVELOPE_ID_LEN + 1];
	char *body3 = seal_body(f, "secret/web", PLAIN, opk, &wrap3, id3);
	struct res *r3 = res_new("secret/web", xstrdup(body3), strlen(body3), 1, err, sizeof(err));
	assert_non_null(r3);
	wraps_put(&f->a.seal.wraps, "secret/web", id3, f->a.seal.key.kid, wrap3);
	assert_int_equal(seal_open(&f->a, r3, &b, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "a relay or the plane changed it"));
	/* the envelope of secret/web handed over as secret/other: its
	 * ciphertext does not decrypt under that name */
	struct res *r4 = res_new("secret/other", xstrdup(body), strlen(body), 1, err, sizeof(err));
	assert_non_null(r4);
	wraps_put(&f->a.seal.wraps, "secret/other", id, f->a.seal.key.kid, wrap);
	assert_int_equal(seal_open(&f->a, r4, &b, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "secret/other: the ciphertext"));
	/* the error never holds the plaintext */
	assert_null(strstr(err, "secretkey"));
	/* plaintext that is not a secret's body: refused, named */
	char *wrap5, id5[ENVELOPE_ID_LEN + 1];
	char *body5 = seal_body(f, "secret/odd", "{\"cert\":\"x\"}", f->a.seal.key.xpk, &wrap5, id5);
	struct res *r5 = res_new("secret/odd", xstrdup(body5), strlen(body5), 1, err, sizeof(err));
	assert_non_null(r5);
	wraps_put(&f->a.seal.wraps, "secret/odd", id5, f->a.seal.key.kid, wrap5);
	assert_int_equal(seal_open(&f->a, r5, &b, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "opened: secret/odd"));
	res_free(r);
	res_free(r3);
	res_free(r4);
	res_free(r5);
	free(body);
	free(body2);
	free(body3);
	free(body5);
	free(wrap);
	free(wrap2);
	free(wrap3);
	free(wrap5);
}

/* A state with listener/l (TLS from secret/web, sealed) at version 1. */
static void sealed_state(struct fx *f, char **wrap, char id[ENVELOPE_ID_LEN + 1])
{
	char *body = seal_body(f, "secret/web", PLAIN, f->a.seal.key.xpk, wrap, id);
	char *text = xasprintf("{\"version\":1,\"base\":0,\"full\":true,\"nonce\":\"n\",\"upserts\":["
			       "{\"name\":\"secret/web\",\"version\":1,\"body\":%s},"
			       "{\"name\":\"listener/l\",\"version\":1,\"body\":{\"port\":8443,\"tls\":{\"secret\":\"web\"}}}"
			       "],\"removed\":[]}", body);
	commit_push(&f->a.state, text);
	free(text);
	free(body);
}

static void test_render_opened(void **st)
{
	struct fx *f = *st;
	char *wrap, id[ENVELOPE_ID_LEN + 1];
	sealed_state(f, &wrap, id);
	char err[1024];
	/* without the wrap, nothing renders */
	struct render_opts o = { .secrets_dir = "/etc/tether/secrets", .opener = &f->a.seal.opener,
				 .skip_secret_check = true };
	struct render_out out = { 0 };
	assert_int_equal(render_nginx.render(&f->a.state, NULL, &o, &out, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "secret/web"));
	render_out_release(&out);
	assert_int_equal(seal_check_state(&f->a, err, sizeof(err)), -1);
	/* no opener at all: refused, said so */
	struct render_opts none = { .secrets_dir = "/etc/tether/secrets", .skip_secret_check = true };
	assert_int_equal(render_nginx.render(&f->a.state, NULL, &none, &out, err, sizeof(err)), -1);
	assert_string_equal(err, "secret/web: sealed, and nothing here can open it");
	render_out_release(&out);
	wraps_put(&f->a.seal.wraps, "secret/web", id, f->a.seal.key.kid, wrap);
	assert_int_equal(seal_check_state(&f->a, err, sizeof(err)), 0);
	if (render_nginx.render(&f->a.state, NULL, &o, &out, err, sizeof(err)) < 0)
		fail_msg("render: %s", err);
	size_t secrets = 0;
	for (size_t i = 0; i < out.n; i++) {
		if (!out.files[i].secret) {
			assert_null(strstr(out.files[i].data.data, "secretkey"));
			continue;
		}
		secrets++;
		assert_int_equal(out.files[i].mode, 0600);
		assert_true(strstr(out.files[i].data.data, "secretcert") || strstr(out.files[i].data.data, "secretkey"));
	}
	assert_int_equal(secrets, 2);
	render_out_release(&out);
	/* haproxy: one file, the certificate and its key */
	if (render_haproxy.render(&f->a.state, NULL, &o, &out, err, sizeof(err)) < 0)
		fail_msg("render: %s", err);
	secrets = 0;
	for (size_t i = 0; i < out.n; i++) {
		if (!out.files[i].secret)
			continue;
		secrets++;
		assert_non_null(strstr(out.files[i].data.data, "secretcert"));
		assert_non_null(strstr(out.files[i].data.data, "secretkey"));
	}
	assert_int_equal(secrets, 1);
	render_out_release(&out);
	/* the state keeps the sealed body */
	const struct res *r = state_get(&f->a.state, "secret/web");
	assert_non_null(r);
	assert_true(sealed_is(r));
	assert_null(strstr(r->body, "secret"));
	free(wrap);
}

static void test_prepare(void **st)
{
	struct fx *f = *st;
	char *wrap, id[ENVELOPE_ID_LEN + 1];
	sealed_state(f, &wrap, id);
	wraps_put(&f->a.seal.wraps, "secret/web", id, f->a.seal.key.kid, wrap);
	char err[1024];
	/* a new envelope of secret/web comes; its wrap is held already */
	char *wrap2, id2[ENVELOPE_ID_LEN + 1];
	char *body2 = seal_body(f, "secret/web", PLAIN, f->a.seal.key.xpk, &wrap2, id2);
	wraps_put(&f->a.seal.wraps, "secret/web", id2, f->a.seal.key.kid, wrap2);
	char *text = push_of(2, 1, "secret/web", body2);
	struct push p;
	struct candidate c;
	assert_int_equal(push_decode(text, strlen(text), NULL, &p, err, sizeof(err)), 0);
	assert_int_equal(candidate_build(&f->a.state, &p, 0, &c, err, sizeof(err)), 0);
	if (seal_prepare(&f->a, &c, err, sizeof(err)) != SEAL_OK)
		fail_msg("seal_prepare: %s", err);
	/* kept before the apply goes live */
	struct wraps disk;
	wraps_init(&disk);
	assert_int_equal(wraps_load(f->dir, &disk, err, sizeof(err)), 0);
	assert_non_null(wraps_get(&disk, "secret/web", id2));
	/* ... beside the committed envelope's: an apply that fails or is cut
	 * short leaves last-good openable */
	assert_non_null(wraps_get(&disk, "secret/web", id));
	wraps_release(&disk);
	char path[128];
	snprintf(path, sizeof(path), "%s/wraps.json", f->dir);
	size_t len;
	char *file = read_file_limited(path, 1 << 20, &len);
	assert_non_null(file);
	assert_null(strstr(file, "secretkey"));
	free(file);
	state_commit(&f->a.state, &c);
	candidate_release(&c);
	push_release(&p);
	free(text);
	seal_committed(&f->a);
	assert_int_equal(f->a.seal.wraps.n, 1);
	assert_non_null(wraps_get(&f->a.seal.wraps, "secret/web", id2));
	wraps_init(&disk);
	assert_int_equal(wraps_load(f->dir, &disk, err, sizeof(err)), 0);
	assert_int_equal(disk.n, 1);   /* pruned at the commit */
	wraps_release(&disk);

	/* a wrap held for the envelope that opens to another data key: a
	 * verification failure; that wrap is dropped, the committed one
	 * stays, and the version is not fetched again before a backoff */
	char *wrap6, id6[ENVELOPE_ID_LEN + 1], *wrap7, id7[ENVELOPE_ID_LEN + 1];
	char *body6 = seal_body(f, "secret/web", PLAIN, f->a.seal.key.xpk, &wrap6, id6);
	char *body7 = seal_body(f, "secret/web", PLAIN, f->a.seal.key.xpk, &wrap7, id7);
	wraps_put(&f->a.seal.wraps, "secret/web", id6, f->a.seal.key.kid, wrap7);
	text = push_of(3, 2, "secret/web", body6);
	assert_int_equal(push_decode(text, strlen(text), NULL, &p, err, sizeof(err)), 0);
	assert_int_equal(candidate_build(&f->a.state, &p, 0, &c, err, sizeof(err)), 0);
	assert_int_equal(seal_prepare(&f->a, &c, err, sizeof(err)), SEAL_VERIFY);
	assert_non_null(strstr(err, "secret/web: the wrap for key"));
	assert_null(wraps_get(&f->a.seal.wraps, "secret/web", id6));
	assert_non_null(wraps_get(&f->a.seal.wraps, "secret/web", id2));
	assert_int_equal(f->a.seal.bad_version, 3);
	char first[1024];
	snprintf(first, sizeof(first), "%s", err);
	err[0] = '\0';
	assert_int_equal(seal_prepare(&f->a, &c, err, sizeof(err)), SEAL_VERIFY);
	assert_string_equal(err, first);   /* remembered, not fetched */
	f->a.seal.bad_until_ms = 0;
	candidate_release(&c);
	push_release(&p);
	free(text);
	free(body6);
	free(body7);
	free(wrap6);
	free(wrap7);

	/* an envelope whose wrap is not held, and no plane to ask: a failure
	 * to fetch (tried again), not a hold */
	char id3[ENVELOPE_ID_LEN + 1];
	char *body3 = seal_body(f, "secret/api", PLAIN, NULL, NULL, id3);
	text = push_of(3, 2, "secret/api", body3);
	assert_int_equal(push_decode(text, strlen(text), NULL, &p, err, sizeof(err)), 0);
	assert_int_equal(candidate_build(&f->a.state, &p, 0, &c, err, sizeof(err)), 0);
	assert_int_equal(seal_prepare(&f->a, &c, err, sizeof(err)), SEAL_FAILED);
	assert_non_null(strstr(err, "cannot fetch the wraps"));
	candidate_release(&c);
	seal_abandoned(&f->a);
	assert_int_equal(f->a.seal.wraps.n, 1);
	push_release(&p);
	free(text);
	free(body2);
	free(body3);
	free(wrap);
	free(wrap2);
}

/* The wrap held for (secret/web, id). */
static const char *held_wrap(struct fx *f, const char *id)
{
	const struct wrap_entry *w = wraps_get(&f->a.seal.wraps, "secret/web", id);
	assert_non_null(w);
	return w->wrap;
}

static void test_rotate(void **st)
{
	struct fx *f = *st;
	char old_kid[KEY_ID_LEN + 1];
	snprintf(old_kid, sizeof(old_kid), "%s", f->a.seal.key.kid);
	char *wrap, id[ENVELOPE_ID_LEN + 1];
	sealed_state(f, &wrap, id);
	wraps_put(&f->a.seal.wraps, "secret/web", id, f->a.seal.key.kid, wrap);
	seal_release(&f->a);
	/* a restart with --rotate-key: a new key, the old kept as node.key.old */
	memset(&f->a.seal, 0, sizeof(f->a.seal));
	f->a.cfg.rotate_key = true;
	char err[512];
	assert_int_equal(seal_init(&f->a, err, sizeof(err)), 0);
	assert_string_not_equal(f->a.seal.key.kid, old_kid);
	assert_true(f->a.seal.has_prev);
	assert_string_equal(f->a.seal.prev.kid, old_kid);
	char *old = seal_key_path(&f->a, true);
	struct stat s;
	assert_int_equal(stat(old, &s), 0);
	assert_int_equal(s.st_mode & 0777, 0600);
	/* the old key's wraps still open during the rotation */
	wraps_put(&f->a.seal.wraps, "secret/web", id, old_kid, wrap);
	assert_int_equal(seal_check_state(&f->a, err, sizeof(err)), 0);
	/* the registration carries the old key's endorsement */
	char *reg = nodekey_registration("n1", &f->a.seal.key, &f->a.seal.prev, 100);
	struct nodekey_reg r;
	assert_int_equal(nodekey_reg_parse(reg, strlen(reg), &r, err, sizeof(err)), 0);
	assert_true(r.has_prev);
	assert_string_equal(r.prev_kid, old_kid);
	free(reg);
	/* the plane has no wrap for the new key yet (none to ask here): a
	 * candidate of the state still prepares with the old key's wrap --
	 * not held, not a failure */
	char *text = push_of(2, 1, "listener/l", "{\"port\":8444,\"tls\":{\"secret\":\"web\"}}");
	struct push p;
	struct candidate c;
	assert_int_equal(push_decode(text, strlen(text), NULL, &p, err, sizeof(err)), 0);
	assert_int_equal(candidate_build(&f->a.state, &p, 0, &c, err, sizeof(err)), 0);
	if (seal_prepare(&f->a, &c, err, sizeof(err)) != SEAL_OK)
		fail_msg("seal_prepare after a rotation: %s", err);
	assert_true(f->a.seal.upgrade_at_ms > now_ms());   /* asked for again only after a backoff */
	candidate_release(&c);
	push_release(&p);
	free(text);
	/* the plane took the new key (a 200): node.key.old stays while the
	 * applied state's wraps are for it (a restart opens last-good) ... */
	seal_key_taken(&f->a);
	assert_int_equal(stat(old, &s), 0);
	assert_false(f->a.seal.prev_gone);
	/* ... and goes once they are for the new key */
	unsigned char dk[ENVELOPE_DK_BYTES];
	struct envelope e;
	const struct res *web = state_get(&f->a.state, "secret/web");
	cJSON *doc = json_decode(web->body, web->body_len, NULL, err, sizeof(err));
	assert_int_equal(envelope_decode(cJSON_GetObjectItemCaseSensitive(doc, "sealed"), &e, err, sizeof(err)), 0);
	assert_int_equal(envelope_unwrap(&e, wrap, strlen(wrap), f->a.seal.prev.xpk, f->a.seal.prev.xsk, dk, err,
					 sizeof(err)), 0);
	char *wrap_new = envelope_wrap(dk, f->a.seal.key.xpk);
	sodium_memzero(dk, sizeof(dk));
	envelope_release(&e);
	cJSON_Delete(doc);
	wraps_put(&f->a.seal.wraps, "secret/web", id, f->a.seal.key.kid, wrap_new);
	seal_committed(&f->a);
	assert_true(f->a.seal.prev_gone);
	assert_int_not_equal(stat(old, &s), 0);
	assert_int_equal(seal_check_state(&f->a, err, sizeof(err)), 0);
	free(wrap_new);

	/* a crash between the rotation's link and its new key: node.key.old
	 * is node.key; the next start takes it for no rotation, and
	 * --rotate-key then rotates */
	char new_kid[KEY_ID_LEN + 1];
	snprintf(new_kid, sizeof(new_kid), "%s", f->a.seal.key.kid);
	char *cur = seal_key_path(&f->a, false);
	assert_int_equal(link(cur, old), 0);
	seal_release(&f->a);
	memset(&f->a.seal, 0, sizeof(f->a.seal));
	f->a.cfg.rotate_key = false;
	assert_int_equal(seal_init(&f->a, err, sizeof(err)), 0);
	assert_false(f->a.seal.has_prev);
	assert_int_not_equal(stat(old, &s), 0);
	assert_int_equal(link(cur, old), 0);
	seal_release(&f->a);
	memset(&f->a.seal, 0, sizeof(f->a.seal));
	f->a.cfg.rotate_key = true;
	assert_int_equal(seal_init(&f->a, err, sizeof(err)), 0);
	assert_string_not_equal(f->a.seal.key.kid, new_kid);
	assert_true(f->a.seal.has_prev);
	assert_string_equal(f->a.seal.prev.kid, new_kid);

	/* a second --rotate-key while that one is unconfirmed (a relay's
	 * 202): a new key anyway, endorsed by the unconfirmed one */
	char mid_kid[KEY_ID_LEN + 1];
	snprintf(mid_kid, sizeof(mid_kid), "%s", f->a.seal.key.kid);
	seal_release(&f->a);
	memset(&f->a.seal, 0, sizeof(f->a.seal));
	assert_int_equal(seal_init(&f->a, err, sizeof(err)), 0);
	assert_string_not_equal(f->a.seal.key.kid, mid_kid);
	assert_string_not_equal(f->a.seal.key.kid, new_kid);
	assert_string_equal(f->a.seal.prev.kid, mid_kid);
	/* ... and the key before it, which last-good's wrap is for, stays in
	 * node.key.older: last-good still opens */
	assert_true(f->a.seal.has_older);
	assert_string_equal(f->a.seal.older.kid, new_kid);
	char *older = xasprintf("%s/node.key.older", f->dir);
	assert_int_equal(stat(older, &s), 0);
	assert_int_equal(seal_check_state(&f->a, err, sizeof(err)), 0);
	seal_release(&f->a);
	memset(&f->a.seal, 0, sizeof(f->a.seal));
	f->a.cfg.rotate_key = false;
	assert_int_equal(seal_init(&f->a, err, sizeof(err)), 0);   /* a restart: still opens */
	assert_true(f->a.seal.has_older);
	assert_int_equal(seal_check_state(&f->a, err, sizeof(err)), 0);
	/* once the applied wraps are for the newest key, node.key.older goes */
	web = state_get(&f->a.state, "secret/web");
	doc = json_decode(web->body, web->body_len, NULL, err, sizeof(err));
	assert_int_equal(envelope_decode(cJSON_GetObjectItemCaseSensitive(doc, "sealed"), &e, err, sizeof(err)), 0);
	assert_int_equal(envelope_unwrap(&e, held_wrap(f, id), strlen(held_wrap(f, id)), f->a.seal.older.xpk,
					 f->a.seal.older.xsk, dk, err, sizeof(err)), 0);
	char *wrap4 = envelope_wrap(dk, f->a.seal.key.xpk);
	sodium_memzero(dk, sizeof(dk));
	envelope_release(&e);
	cJSON_Delete(doc);
	wraps_put(&f->a.seal.wraps, "secret/web", id, f->a.seal.key.kid, wrap4);
	seal_committed(&f->a);
	assert_false(f->a.seal.has_older);
	assert_int_not_equal(stat(older, &s), 0);
	assert_int_equal(seal_check_state(&f->a, err, sizeof(err)), 0);
	free(wrap4);
	free(older);
	free(cur);
	free(old);
	free(wrap);
}

/* The plane's marker of a damaged stored body: the refusal says so, and
 * what to do. */
static void test_damaged_marker(void **st)
{
	(void)st;
	struct state s;
	state_init(&s);
	char *text = push_of(1, 0, "secret/tls", "{\"sealed\":null}");
	struct push p;
	struct candidate c;
	char err[1024];
	assert_int_equal(push_decode(text, strlen(text), NULL, &p, err, sizeof(err)), 0);
	assert_int_equal(candidate_build(&s, &p, 0, &c, err, sizeof(err)), -1);
	seal_damaged_marker(&p, err, sizeof(err));
	assert_string_equal(err, "secret/tls: the plane sent its damaged-body marker: its stored sealed body is "
				 "damaged; write it again (tetherctl put secret/tls --seal)");
	push_release(&p);
	free(text);
	/* another refusal keeps its words */
	text = push_of(1, 0, "secret/tls", "{\"sealed\":1}");
	assert_int_equal(push_decode(text, strlen(text), NULL, &p, err, sizeof(err)), 0);
	assert_int_equal(candidate_build(&s, &p, 0, &c, err, sizeof(err)), -1);
	char before[1024];
	snprintf(before, sizeof(before), "%s", err);
	seal_damaged_marker(&p, err, sizeof(err));
	assert_string_equal(err, before);
	push_release(&p);
	free(text);
	state_release(&s);
}

int main(void)
{
	log_init("test_seal", LOG_LVL_ERROR);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_node_key_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open, setup, teardown),
		cmocka_unit_test_setup_teardown(test_render_opened, setup, teardown),
		cmocka_unit_test_setup_teardown(test_prepare, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rotate, setup, teardown),
		cmocka_unit_test(test_damaged_marker),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
