/* seal.c: sealed secrets at the node (docs/protocol.md, "Sealed secrets").
 * The node's key lives in STATE_DIR/node.key (made at the first start;
 * --rotate-key makes a new one and keeps the old as node.key.old until the
 * plane took the new one: keyreg.c). A push's sealed secrets stay sealed
 * in the state, last-good and the digest; before a candidate is staged
 * (and after --trust verified it) every sealed secret of the state it
 * makes needs a wrap of its data key for this node's key: those not in
 * the cache come from one GET /v1/wraps per push. None: the push is held
 * (a NACK with "held", once per version; the node keeps serving). A wrap
 * that does not open, opens to another data key, or a ciphertext that
 * does not decrypt: a verification NACK. The renderers get plaintext only
 * through seal_open, for one render, and wipe it after; the wraps in use
 * go to STATE_DIR/wraps.json (wraps.h), so an offline boot opens
 * last-good. Once a secret was opened the process is not dumpable. */
#include "agent_int.h"
#include "json.h"
#include "json_syntax.h"
#include "log.h"
#include "resource.h"
#include "util.h"
#include "xmalloc.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#define NODE_KEY_FILE "node.key"
#define NODE_KEY_OLD "node.key.old"

char *seal_key_path(const struct agent *a, bool old)
{
	return xasprintf("%s/%s", a->cfg.state_dir, old ? NODE_KEY_OLD : NODE_KEY_FILE);
}

/* --rotate-key: the key now becomes node.key.old (unless a rotation is
 * under way already), a new one node.key. */
static int rotate(struct agent *a, char *err, size_t errlen)
{
	char *cur = seal_key_path(a, false), *old = seal_key_path(a, true);
	int rc = -1;
	if (a->seal.has_prev) {
		log_warn("rotate-key: a rotation is under way already (%s, key %s): registering its new key %s",
			 old, a->seal.prev.kid, a->seal.key.kid);
		rc = 0;
		goto out;
	}
	/* the old key is kept under its new name first (a link: node.key
	 * stays whole); a crash after it resumes the rotation */
	unlink(old);
	if (link(cur, old) < 0) {
		snprintf(err, errlen, "rotate-key: cannot keep %s as %s: %s", cur, old, strerror(errno));
		goto out;
	}
	struct node_key nk;
	if (nodekey_make(cur, &nk, err, errlen) < 0) {
		unlink(old);
		goto out;
	}
	a->seal.prev = a->seal.key;
	a->seal.has_prev = true;
	a->seal.key = nk;
	sodium_memzero(&nk, sizeof(nk));
	log_info("rotate-key: node key %s made to replace %s (kept in %s until the plane takes the new one)",
		 a->seal.key.kid, a->seal.prev.kid, old);
	rc = 0;
out:
	free(cur);
	free(old);
	return rc;
}

int seal_init(struct agent *a, char *err, size_t errlen)
{
	char *cur = seal_key_path(a, false), *old = seal_key_path(a, true);
	int rc = -1;
	bool made = false;
	wraps_init(&a->seal.wraps);
	a->seal.opener = (struct sealed_opener){ .open = seal_open, .ctx = a };
	if (nodekey_load_or_make(cur, &a->seal.key, &made, err, errlen) < 0)
		goto out;
	if (made)
		log_info("node key %s made (%s)", a->seal.key.kid, cur);
	if (access(old, F_OK) == 0) {
		if (nodekey_load(old, &a->seal.prev, err, errlen) < 0)
			goto out;
		a->seal.has_prev = true;
	}
	if (a->cfg.rotate_key && !made && rotate(a, err, errlen) < 0)
		goto out;
	char werr[1024];
	if (wraps_load(a->cfg.state_dir, &a->seal.wraps, werr, sizeof(werr)) < 0)
		log_warn("sealed secrets: %s; ignored (the wraps are fetched again from the plane)", werr);
	rc = 0;
out:
	free(cur);
	free(old);
	return rc;
}

void seal_release(struct agent *a)
{
	nodekey_forget(&a->seal.key);
	nodekey_forget(&a->seal.prev);
	wraps_release(&a->seal.wraps);
}

/* The key that opens a wrap for kid: ours, or the one a rotation replaced. */
static const struct node_key *key_for(const struct agent *a, const char *kid)
{
	if (strcmp(kid, a->seal.key.kid) == 0)
		return &a->seal.key;
	if (a->seal.has_prev && strcmp(kid, a->seal.prev.kid) == 0)
		return &a->seal.prev;
	return NULL;
}

/* The envelope of a sealed secret's body. 0, or -1 with err. */
static int envelope_of(const struct res *r, struct envelope *e, char *err, size_t errlen)
{
	char e2[256];
	cJSON *doc = json_decode(r->body, r->body_len, NULL, e2, sizeof(e2));
	const cJSON *s = doc ? cJSON_GetObjectItemCaseSensitive(doc, "sealed") : NULL;
	int rc = s ? envelope_decode(s, e, e2, sizeof(e2)) : -1;
	if (rc < 0)
		snprintf(err, errlen, "%s: its envelope: %s", r->name, doc ? e2 : "not JSON");
	cJSON_Delete(doc);
	return rc;
}

/* No member twice (cJSON keeps the first of two): the opened body is
 * parsed here, not by json_decode, which copies its text. */
static bool unique_members(const cJSON *v)
{
	for (const cJSON *x = v->child; x; x = x->next)
		for (const cJSON *y = x->next; y; y = y->next)
			if (x->string && y->string && strcmp(x->string, y->string) == 0)
				return false;
	return true;
}

/* Opens plaintext text (NUL-terminated, len bytes) as r's secret body. */
static cJSON *parse_plain(const struct res *r, const char *plain, size_t len, char *err, size_t errlen)
{
	char e2[512];
	if (json_syntax_check(plain, len, 4, e2, sizeof(e2)) < 0) {
		snprintf(err, errlen, "%s: its opened body is not JSON", r->name);
		return NULL;
	}
	const char *end = NULL;
	cJSON *b = cJSON_ParseWithLengthOpts(plain, len, &end, 0);
	while (end && end < plain + len && strchr(" \t\r\n", *end))
		end++;   /* white space after the value (checked above) */
	if (!b || end != plain + len || !cJSON_IsObject(b) || !unique_members(b) || envelope_is_sealed(b)) {
		snprintf(err, errlen, "%s: its opened body is not a secret's body", r->name);
		sealed_body_free(b);
		return NULL;
	}
	if (resource_validate(r->name, b, 0, NULL, e2, sizeof(e2)) < 0) {
		snprintf(err, errlen, "opened: %s", e2);
		sealed_body_free(b);
		return NULL;
	}
	return b;
}

/* Opens r with the wrap w. what gets why it failed (verification: the
 * wrap or the ciphertext was changed). */
static int open_with(struct agent *a, const struct res *r, const struct wrap_entry *w, cJSON **body, char *err,
		     size_t errlen)
{
	struct envelope e;
	char e2[256];
	if (envelope_of(r, &e, err, errlen) < 0)
		return -1;
	int rc = -1;
	const struct node_key *k = key_for(a, w->kid);
	unsigned char dk[ENVELOPE_DK_BYTES];
	if (strcmp(w->id, e.id) != 0) {
		snprintf(err, errlen, "%s: no wrap for its envelope %s (the wrap held is for %s)", r->name, e.id, w->id);
		goto out;
	}
	if (!k) {
		snprintf(err, errlen, "%s: its wrap is for key %s, which this node no longer holds (it has %s): "
			 "seal to the new key (tetherctl secrets reseal)", r->name, w->kid, a->seal.key.kid);
		goto out;
	}
	if (envelope_unwrap(&e, w->wrap, strlen(w->wrap), k->xpk, k->xsk, dk, e2, sizeof(e2)) < 0) {
		snprintf(err, errlen, "%s: the wrap for key %s %s: a relay or the plane changed it", r->name, w->kid, e2);
		goto out;
	}
	size_t len = 0;
	char *plain = envelope_open(&e, r->name, dk, &len, e2, sizeof(e2));
	sodium_memzero(dk, sizeof(dk));
	if (!plain) {
		snprintf(err, errlen, "%s: the ciphertext %s: a relay or the plane changed it", r->name, e2);
		goto out;
	}
	*body = parse_plain(r, plain, len, err, errlen);
	envelope_wipe(plain);
	if (!*body)
		goto out;
	if (!a->seal.undumpable) {
		/* plaintext key material lives in this process from now on:
		 * no core dump, no ptrace by others of our uid */
		if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
			log_warn("sealed secrets: prctl(PR_SET_DUMPABLE, 0): %s", strerror(errno));
		a->seal.undumpable = true;
	}
	rc = 0;
out:
	envelope_release(&e);
	return rc;
}

int seal_open(void *ctx, const struct res *r, cJSON **body, char *err, size_t errlen)
{
	struct agent *a = ctx;
	const struct wrap_entry *w = wraps_get(&a->seal.wraps, r->name);
	*body = NULL;
	if (!w) {
		snprintf(err, errlen, "%s: no wrap for this node's key %s", r->name, a->seal.key.kid);
		return -1;
	}
	return open_with(a, r, w, body, err, errlen);
}

/* ---- a candidate's sealed secrets -------------------------------------------- */

/* A sealed secret of the state a candidate makes, and its envelope id. */
struct need {
	const struct res *r;
	char id[ENVELOPE_ID_LEN + 1];
	bool changed;            /* the candidate brings it */
	bool fetch;              /* no usable wrap held */
	bool fetched;            /* ... and the plane sent one */
};

struct collect {
	struct agent *a;
	const struct strmap *skip;
	struct need *v;
	size_t n, cap;
	bool changed;
	int rc;
	char *err;
	size_t errlen;
};

static void collect_one(void *ctx, const struct res *r)
{
	struct collect *c = ctx;
	if (c->rc < 0 || !sealed_is(r) || (c->skip && strmap_get(c->skip, r->name, NULL)))
		return;
	struct envelope e;
	if (envelope_of(r, &e, c->err, c->errlen) < 0) {
		c->rc = -1;
		return;
	}
	if (c->n == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 8;
		c->v = xrealloc(c->v, c->cap * sizeof(*c->v));
	}
	struct need *x = &c->v[c->n++];
	x->r = r;
	memcpy(x->id, e.id, sizeof(x->id));
	envelope_release(&e);
	x->changed = c->changed;
	x->fetched = false;
	const struct wrap_entry *w = wraps_get(&c->a->seal.wraps, r->name);
	x->fetch = !w || strcmp(w->id, x->id) != 0 || !key_for(c->a, w->kid);
}

/* The sealed secrets of s with c applied (c NULL: s). 0, or -1 with err. */
static int collect(struct agent *a, const struct state *s, const struct candidate *cand, struct collect *c,
		   char *err, size_t errlen)
{
	struct strmap skip;
	strmap_init(&skip);
	for (size_t i = 0; cand && i < cand->n; i++) {
		const struct res *r = cand->items[i].new_res ? cand->items[i].new_res : cand->items[i].old;
		*strmap_ref(&skip, r->name) = 1;
	}
	*c = (struct collect){ .a = a, .skip = cand ? &skip : NULL, .err = err, .errlen = errlen };
	state_each(s, collect_one, c);
	c->skip = NULL;
	c->changed = true;
	for (size_t i = 0; cand && i < cand->n; i++)
		if (cand->items[i].new_res)
			collect_one(c, cand->items[i].new_res);
	strmap_release(&skip);
	if (c->rc < 0) {
		free(c->v);
		c->v = NULL;
	}
	return c->rc;
}

/* One GET /v1/wraps for the names that need a wrap; what comes for the
 * envelope wanted goes into the cache. 0, or -1 with err (not reached). */
static int fetch(struct agent *a, const struct collect *c, char *err, size_t errlen)
{
	struct buf path = BUF_INIT, answer = BUF_INIT;
	buf_printf(&path, "/v1/wraps?kid=%s&names=", a->seal.key.kid);
	bool first = true;
	CURL *esc_h = curl_easy_init();   /* curl_easy_escape wants one before 7.82 */
	for (size_t i = 0; i < c->n; i++) {
		if (!c->v[i].fetch)
			continue;
		char *esc = esc_h ? curl_easy_escape(esc_h, c->v[i].r->name, 0) : NULL;
		buf_printf(&path, "%s%s", first ? "" : ",", esc ? esc : c->v[i].r->name);
		curl_free(esc);
		first = false;
	}
	if (esc_h)
		curl_easy_cleanup(esc_h);
	int rc = -1;
	char e2[1024];
	long status = agent_get_now(a, path.data, &answer, 30000L, e2, sizeof(e2));
	if (status < 0) {
		snprintf(err, errlen, "cannot fetch the wraps of its sealed secrets from %s: %s", sync_plane(a), e2);
		goto out;
	}
	if (status != 200) {
		snprintf(err, errlen, "cannot fetch the wraps of its sealed secrets from %s: HTTP %ld: %.300s",
			 sync_plane(a), status, answer.data ? answer.data : "");
		goto out;
	}
	struct wraps got;
	wraps_init(&got);
	if (wraps_parse(answer.data ? answer.data : "", answer.len, a->seal.key.kid, &got, e2, sizeof(e2)) < 0) {
		snprintf(err, errlen, "%s answered GET /v1/wraps with something else: %s", sync_plane(a), e2);
		wraps_release(&got);
		goto out;
	}
	for (size_t i = 0; i < c->n; i++) {
		const struct wrap_entry *w = c->v[i].fetch ? wraps_get(&got, c->v[i].r->name) : NULL;
		/* a wrap of another envelope (the plane moved on meanwhile)
		 * is no use for this one */
		if (w && strcmp(w->id, c->v[i].id) == 0) {
			wraps_put(&a->seal.wraps, w->name, w->id, w->kid, w->wrap);
			c->v[i].fetch = false;
			c->v[i].fetched = true;
		}
	}
	wraps_release(&got);
	rc = 0;
out:
	buf_release(&path);
	buf_release(&answer);
	return rc;
}

enum seal_result seal_prepare(struct agent *a, const struct candidate *cand, char *err, size_t errlen)
{
	struct collect c;
	if (collect(a, &a->state, cand, &c, err, errlen) < 0)
		return SEAL_VERIFY;
	enum seal_result res = SEAL_OK;
	size_t nfetch = 0;
	for (size_t i = 0; i < c.n; i++)
		nfetch += c.v[i].fetch;
	if (nfetch && fetch(a, &c, err, errlen) < 0) {
		res = SEAL_FAILED;
		goto out;
	}
	for (size_t i = 0; i < c.n; i++) {
		if (c.v[i].fetch) {
			snprintf(err, errlen, "%s: no wrap for this node's key %s: the plane holds this node until a "
				 "writer seals to it (tetherctl secrets reseal)", c.v[i].r->name, a->seal.key.kid);
			res = SEAL_HELD;
			goto out;
		}
	}
	/* what is new opens now, before anything is staged: a wrap or a
	 * ciphertext changed on the way is a verification failure */
	for (size_t i = 0; i < c.n; i++) {
		if (!c.v[i].changed && !c.v[i].fetched)
			continue;
		cJSON *b = NULL;
		if (seal_open(a, c.v[i].r, &b, err, errlen) < 0) {
			/* a wrap that does not open is not kept: the next push of
			 * the envelope asks the plane again */
			wraps_del(&a->seal.wraps, c.v[i].r->name);
			res = SEAL_VERIFY;
			goto out;
		}
		sealed_body_free(b);
	}
	/* kept before the apply goes live, with the state's: a boot that
	 * finishes this apply (apply_resume) opens its secrets */
	if (a->seal.wraps.dirty) {
		char e2[1024];
		if (wraps_save(a->cfg.state_dir, &a->seal.wraps, a->seal.key.kid, e2, sizeof(e2)) < 0) {
			snprintf(err, errlen, "%s", e2);
			res = SEAL_FAILED;
		}
	}
out:
	free(c.v);
	return res;
}

/* ---- after a commit, and at boot ------------------------------------------- */

struct keep_ctx {
	struct agent *a;
};

static bool keep_current(void *ctx, const struct wrap_entry *w)
{
	struct agent *a = ((struct keep_ctx *)ctx)->a;
	const struct res *r = state_get(&a->state, w->name);
	if (!r || !sealed_is(r))
		return false;
	struct envelope e;
	char e2[256];
	if (envelope_of(r, &e, e2, sizeof(e2)) < 0)
		return false;
	bool same = strcmp(e.id, w->id) == 0;
	envelope_release(&e);
	return same;
}

void seal_committed(struct agent *a)
{
	struct keep_ctx k = { a };
	wraps_prune(&a->seal.wraps, keep_current, &k);
	if (!a->seal.wraps.dirty)
		return;
	char err[1024];
	if (wraps_save(a->cfg.state_dir, &a->seal.wraps, a->seal.key.kid, err, sizeof(err)) < 0)
		log_warn("sealed secrets: %s (kept in memory; an offline boot fetches them again)", err);
}

int seal_check_state(struct agent *a, char *err, size_t errlen)
{
	struct collect c;
	if (collect(a, &a->state, NULL, &c, err, errlen) < 0)
		return -1;
	int rc = 0;
	for (size_t i = 0; i < c.n && rc == 0; i++) {
		cJSON *b = NULL;
		rc = seal_open(a, c.v[i].r, &b, err, errlen);
		sealed_body_free(b);
	}
	free(c.v);
	return rc;
}
