/* seal.c: sealed secrets at the node (docs/protocol.md, "Sealed secrets").
 * The node's key lives in STATE_DIR/node.key (made at the first start;
 * --rotate-key makes a new one and keeps the old as node.key.old until the
 * plane took the new one: keyreg.c). A push's sealed secrets stay sealed
 * in the state, last-good and the digest; before a candidate is staged
 * (and after --trust verified it) every sealed secret of the state it
 * makes needs a wrap of its data key for this node's key: those not in
 * the cache come from GET /v1/wraps (in batches the plane takes). None:
 * the push is held (a NACK with "held", once per version; the node keeps
 * serving). The fetch failing (the plane unreachable, a 5xx) is no NACK:
 * the push is asked for again after a backoff. A wrap that does not open,
 * opens to another data key, or a ciphertext that does not decrypt: a
 * verification NACK, and a backoff. The renderers get plaintext only
 * through seal_open, for one render, and wipe it after. The wraps are kept
 * per (secret, envelope id): STATE_DIR/wraps.json holds the applied
 * state's and, during an apply, the candidate's, and is pruned to the
 * applied state's only once an apply committed or failed, so an offline
 * boot opens last-good whatever became of an apply. After a rotation the
 * wraps for the new key replace those for the old one as the plane has
 * them; node.key.old goes only once the plane took the new key and no
 * wrap of the applied state needs the old one. The process is not
 * dumpable from the moment node.key is loaded. */
#include "agent_int.h"
#include "fault.h"
#include "json.h"
#include "json_syntax.h"
#include "log.h"
#include "resource.h"
#include "util.h"
#include "xmalloc.h"

#include <errno.h>
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/prctl.h>
#include <sys/vfs.h>
#include <unistd.h>

#define NODE_KEY_FILE "node.key"
#define NODE_KEY_OLD "node.key.old"
#define NODE_KEY_OLDER "node.key.older"
/* one GET /v1/wraps: the plane takes 1000 names (WRAPS_NAMES_MAX) and a
 * 16 KiB request head; a relay the same */
#define WRAPS_BATCH_NAMES 200
#define WRAPS_BATCH_URL 8192
#define WRAPS_FETCH_TIMEOUT_MS 10000L

char *seal_key_path(const struct agent *a, bool old)
{
	return xasprintf("%s/%s", a->cfg.state_dir, old ? NODE_KEY_OLD : NODE_KEY_FILE);
}

/* How many wraps held are for kid. */
static size_t wraps_for(const struct agent *a, const char *kid)
{
	size_t n = 0;
	for (size_t i = 0; i < a->seal.wraps.by_name.cap; i++) {
		const struct wrap_entry *e = (const struct wrap_entry *)a->seal.wraps.by_name.slots[i].val;
		if (a->seal.wraps.by_name.slots[i].key && strcmp(e->kid, kid) == 0)
			n++;
	}
	return n;
}

/* --rotate-key: the key now becomes node.key.old, a new one node.key. A
 * rotation under way already (node.key.old there: the plane never said
 * 200, e.g. a relay's 202) is replaced: the key it made becomes the old
 * one and endorses the new. Every step leaves node.key whole: a crash
 * after the link leaves node.key.old equal to node.key, which seal_init
 * takes for no rotation at all. */
static int rotate(struct agent *a, char *err, size_t errlen)
{
	char *cur = seal_key_path(a, false), *old = seal_key_path(a, true);
	int rc = -1;
	if (a->seal.has_prev) {
		/* the key before it still opens last-good's wraps: kept as
		 * node.key.older (only for those) until none needs it */
		bool needed = wraps_for(a, a->seal.prev.kid) > 0;
		log_warn("rotate-key: the rotation from %s to %s was not confirmed by the plane (behind a relay it "
			 "answers 202): %s now endorses a new key%s", a->seal.prev.kid, a->seal.key.kid, a->seal.key.kid,
			 needed ? "; the old key stays in node.key.older while last-good's wraps are for it"
				: "; the old key is dropped (no wrap held needs it)");
		char *older = xasprintf("%s/%s", a->cfg.state_dir, NODE_KEY_OLDER);
		if (needed) {
			if (a->seal.has_older && wraps_for(a, a->seal.older.kid))
				log_warn("rotate-key: key %s (node.key.older) is dropped: its wraps no longer open",
					 a->seal.older.kid);
			if (rename(old, older) < 0) {
				snprintf(err, errlen, "rotate-key: cannot keep %s as %s: %s", old, older, strerror(errno));
				free(older);
				goto out;
			}
			nodekey_forget(&a->seal.older);
			a->seal.older = a->seal.prev;
			a->seal.has_older = true;
		} else {
			nodekey_forget(&a->seal.prev);
		}
		sodium_memzero(&a->seal.prev, sizeof(a->seal.prev));
		a->seal.has_prev = false;
		free(older);
	}
	/* the old key is kept under its new name first (a link: node.key
	 * stays whole); a crash after it is undone at the next start */
	if (unlink(old) < 0 && errno != ENOENT) {
		snprintf(err, errlen, "rotate-key: cannot remove %s: %s", old, strerror(errno));
		goto out;
	}
	if (link(cur, old) < 0) {
		snprintf(err, errlen, "rotate-key: cannot keep %s as %s: %s", cur, old, strerror(errno));
		goto out;
	}
	fault_point("rotate-linked");
	struct node_key nk;
	if (nodekey_make(cur, &nk, err, errlen) < 0) {
		unlink(old);
		goto out;
	}
	a->seal.prev = a->seal.key;
	a->seal.has_prev = true;
	a->seal.prev_gone = false;
	a->seal.prev_taken = false;
	a->seal.key = nk;
	sodium_memzero(&nk, sizeof(nk));
	log_info("rotate-key: node key %s made to replace %s (kept in %s until the plane takes the new one and "
		 "serves wraps for it)", a->seal.key.kid, a->seal.prev.kid, old);
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
	/* the node's secret key is in memory from now on: no core dump, no
	 * ptrace by others of our uid */
	if (!a->seal.undumpable) {
		if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
			log_warn("sealed secrets: prctl(PR_SET_DUMPABLE, 0): %s", strerror(errno));
		else
			a->seal.undumpable = true;
	}
	if (made)
		log_info("node key %s made (%s)", a->seal.key.kid, cur);
	if (access(old, F_OK) == 0) {
		if (nodekey_load(old, &a->seal.prev, err, errlen) < 0)
			goto out;
		a->seal.has_prev = true;
		if (strcmp(a->seal.prev.kid, a->seal.key.kid) == 0) {
			/* a rotation that stopped between its link and its new key */
			log_warn("key: %s is node.key itself (a rotation stopped before it made its key): removed",
				 old);
			unlink(old);
			nodekey_forget(&a->seal.prev);
			a->seal.has_prev = false;
		}
	}
	char *older = xasprintf("%s/%s", a->cfg.state_dir, NODE_KEY_OLDER);
	if (access(older, F_OK) == 0) {
		if (nodekey_load(older, &a->seal.older, err, errlen) < 0) {
			free(older);
			goto out;
		}
		a->seal.has_older = true;
	}
	free(older);
	char werr[1024];
	if (wraps_load(a->cfg.state_dir, &a->seal.wraps, werr, sizeof(werr)) < 0)
		log_warn("sealed secrets: %s; ignored (the wraps are fetched again from the plane)", werr);
	if (a->cfg.rotate_key && !made && rotate(a, err, errlen) < 0)
		goto out;
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
	nodekey_forget(&a->seal.older);
	wraps_release(&a->seal.wraps);
}

/* The key that opens a wrap for kid: ours, or the one a rotation replaced. */
static const struct node_key *key_for(const struct agent *a, const char *kid)
{
	if (strcmp(kid, a->seal.key.kid) == 0)
		return &a->seal.key;
	if (a->seal.has_prev && strcmp(kid, a->seal.prev.kid) == 0)
		return &a->seal.prev;
	if (a->seal.has_older && strcmp(kid, a->seal.older.kid) == 0)
		return &a->seal.older;
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
	rc = 0;
out:
	envelope_release(&e);
	return rc;
}

/* The envelope id of a sealed secret's body into id. 0, or -1 with err. */
static int id_of(const struct res *r, char id[ENVELOPE_ID_LEN + 1], char *err, size_t errlen)
{
	struct envelope e;
	if (envelope_of(r, &e, err, errlen) < 0)
		return -1;
	memcpy(id, e.id, ENVELOPE_ID_LEN + 1);
	envelope_release(&e);
	return 0;
}

int seal_open(void *ctx, const struct res *r, cJSON **body, char *err, size_t errlen)
{
	struct agent *a = ctx;
	char id[ENVELOPE_ID_LEN + 1];
	*body = NULL;
	if (id_of(r, id, err, errlen) < 0)
		return -1;
	const struct wrap_entry *w = wraps_get(&a->seal.wraps, r->name, id);
	if (!w) {
		snprintf(err, errlen, "%s: no wrap for its envelope %s and this node's key %s", r->name, id,
			 a->seal.key.kid);
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
	bool fetch;              /* no wrap held for this node's key now */
	bool usable;             /* ... but one for the key a rotation replaced */
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
	const struct wrap_entry *w = wraps_get(&c->a->seal.wraps, r->name, x->id);
	x->usable = w && key_for(c->a, w->kid);
	x->fetch = !x->usable || strcmp(w->kid, c->a->seal.key.kid) != 0;
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

/* GET /v1/wraps for the names of c->v[from..] that need one (those with
 * only a usable old-key wrap: when upgrade), at most WRAPS_BATCH_NAMES
 * names and WRAPS_BATCH_URL bytes of path (the plane takes 1000 names and
 * a 16 KiB request head); *next gets where the next batch starts. What
 * comes for the envelope wanted goes into the cache. 0, or -1 with err. */
static int fetch_batch(struct agent *a, const char *kid, struct need *v, size_t n, size_t from, bool upgrade,
		       size_t *next, char *err, size_t errlen)
{
	struct buf path = BUF_INIT, answer = BUF_INIT;
	buf_printf(&path, "/v1/wraps?kid=%s&names=", kid);
	size_t count = 0, i = from;
	CURL *esc_h = curl_easy_init();   /* curl_easy_escape wants one before 7.82 */
	for (; i < n && count < WRAPS_BATCH_NAMES; i++) {
		if (!v[i].fetch || (v[i].usable && !upgrade))
			continue;
		char *esc = esc_h ? curl_easy_escape(esc_h, v[i].r->name, 0) : NULL;
		const char *nm = esc ? esc : v[i].r->name;
		if (count && path.len + 1 + strlen(nm) > WRAPS_BATCH_URL) {
			curl_free(esc);
			break;
		}
		buf_printf(&path, "%s%s", count ? "," : "", nm);
		curl_free(esc);
		count++;
	}
	*next = i;
	if (esc_h)
		curl_easy_cleanup(esc_h);
	if (!count) {
		buf_release(&path);
		return 0;
	}
	int rc = -1;
	char e2[1024];
	/* short: the loop waits meanwhile; a plane that does not answer in
	 * time is asked again after a backoff (no NACK) */
	long status = agent_get_now(a, path.data, &answer, WRAPS_FETCH_TIMEOUT_MS, e2, sizeof(e2));
	if (status < 0) {
		snprintf(err, errlen, "cannot fetch the wraps of its sealed secrets from %s: %s", sync_plane(a), e2);
		goto out;
	}
	if (status != 200) {
		char msg[300];
		snprintf(msg, sizeof(msg), "%.299s", answer.data ? answer.data : "");
		for (char *p = msg; *p; p++)
			if ((unsigned char)*p < 0x20)
				*p = ' ';
		snprintf(err, errlen, "cannot fetch the wraps of its sealed secrets from %s: HTTP %ld: %s",
			 sync_plane(a), status, msg);
		goto out;
	}
	struct wraps got;
	wraps_init(&got);
	if (wraps_parse(answer.data ? answer.data : "", answer.len, kid, &got, e2, sizeof(e2)) < 0) {
		snprintf(err, errlen, "%s answered GET /v1/wraps with something else: %s", sync_plane(a), e2);
		wraps_release(&got);
		goto out;
	}
	for (size_t k = from; k < i; k++) {
		/* a wrap of another envelope (the plane moved on meanwhile)
		 * is no use for this one */
		const struct wrap_entry *w = v[k].fetch ? wraps_get(&got, v[k].r->name, v[k].id) : NULL;
		if (w && strcmp(w->kid, kid) == 0) {
			wraps_put(&a->seal.wraps, w->name, w->id, w->kid, w->wrap);
			v[k].fetch = false;
			v[k].fetched = true;
			/* a wrap for the new key: the plane (the origin, behind
			 * a relay) took it */
			if (a->seal.has_prev && strcmp(kid, a->seal.key.kid) == 0)
				a->seal.prev_taken = true;
		}
	}
	wraps_release(&got);
	rc = 0;
out:
	buf_release(&path);
	buf_release(&answer);
	return rc;
}

/* Every batch of v's names that need a wrap for kid. 0, or -1 with err. */
static int fetch_for(struct agent *a, const char *kid, struct need *v, size_t n, bool upgrade, char *err,
		     size_t errlen)
{
	for (size_t i = 0; i < n;) {
		size_t next;
		if (fetch_batch(a, kid, v, n, i, upgrade, &next, err, errlen) < 0)
			return -1;
		i = next;
	}
	return 0;
}

/* The wraps for this node's key; during a rotation, what the plane has
 * for none of them but for the key it replaces (an envelope sealed before
 * the plane took the new key) is asked for that key's. 0, or -1 with err. */
static int fetch(struct agent *a, struct need *v, size_t n, bool upgrade, char *err, size_t errlen)
{
	if (fetch_for(a, a->seal.key.kid, v, n, upgrade, err, errlen) < 0)
		return -1;
	if (!a->seal.has_prev || a->seal.prev_gone)
		return 0;   /* node.key.old is gone: a wrap for it would not open after a restart */
	size_t missing = 0;
	for (size_t i = 0; i < n; i++)
		missing += v[i].fetch && !v[i].usable;
	return missing ? fetch_for(a, a->seal.prev.kid, v, n, false, err, errlen) : 0;
}

/* Whether the wraps for the old key are worth asking the plane for their
 * new key's now (not on every push while it has none: once a backoff). */
static bool upgrade_due(const struct agent *a)
{
	return a->seal.has_prev && now_ms() >= a->seal.upgrade_at_ms;
}

static void upgrade_later(struct agent *a)
{
	a->seal.upgrade_at_ms = now_ms() + (int64_t)(a->cfg.backoff_max * 1000.0);
}

/* Once per process, when sealed secrets are used with nginx or haproxy:
 * whether their plaintext files reach the disk. */
static void note_secrets_dir(struct agent *a)
{
	if (a->seal.dir_noted || strcmp(a->cfg.consumer, "files") == 0)
		return;
	a->seal.dir_noted = true;
	char *dir = a->cfg.secrets_dir ? xstrdup(a->cfg.secrets_dir) : xasprintf("%s/secrets", a->cfg.output_dir);
	struct statfs st;
	if (statfs(dir, &st) < 0)
		log_warn("sealed secrets: cannot tell the file system of %s: %s", dir, strerror(errno));
	else if (st.f_type == TMPFS_MAGIC || st.f_type == RAMFS_MAGIC)
		log_info("sealed secrets: their files go to %s: tmpfs", dir);
	else
		log_info("sealed secrets: their files go to %s: not tmpfs: secrets reach the disk (--secrets-dir "
			 "names a tmpfs)", dir);
	free(dir);
}

enum seal_result seal_prepare(struct agent *a, const struct candidate *cand, char *err, size_t errlen)
{
	/* a version that failed verification lately: no new fetch for it
	 * before its backoff ends */
	if (a->seal.bad_version && cand->version == a->seal.bad_version && now_ms() < a->seal.bad_until_ms) {
		snprintf(err, errlen, "%s", a->seal.bad_err);
		return SEAL_VERIFY;
	}
	struct collect c;
	if (collect(a, &a->state, cand, &c, err, errlen) < 0)
		return SEAL_VERIFY;
	enum seal_result res = SEAL_OK;
	if (c.n)
		note_secrets_dir(a);
	size_t missing = 0, old = 0;
	for (size_t i = 0; i < c.n; i++) {
		missing += c.v[i].fetch && !c.v[i].usable;
		old += c.v[i].fetch && c.v[i].usable;
	}
	bool upgrade = old && upgrade_due(a);
	if (missing || upgrade) {
		char e2[ERRLEN];
		if (fetch(a, c.v, c.n, upgrade, e2, sizeof(e2)) < 0) {
			if (missing) {
				snprintf(err, errlen, "%s", e2);
				res = SEAL_FAILED;
				goto out;
			}
			log_debug("sealed secrets: %s (the wraps for key %s still open them)", e2, a->seal.prev.kid);
		}
		if (upgrade) {
			size_t left = 0;
			for (size_t i = 0; i < c.n; i++)
				left += c.v[i].fetch && c.v[i].usable;
			if (left)
				upgrade_later(a);
		}
	}
	for (size_t i = 0; i < c.n; i++) {
		if (c.v[i].fetch && !c.v[i].usable) {
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
			/* the wrap that failed is not kept (the committed
			 * ones stay: seal_abandoned); this version is not
			 * fetched again before a backoff */
			wraps_del(&a->seal.wraps, c.v[i].r->name, c.v[i].id);
			a->seal.verify_failures++;
			double cap = a->cfg.backoff_min *
				     pow(2.0, a->seal.verify_failures > 20 ? 20 : a->seal.verify_failures);
			if (cap > a->cfg.backoff_max)
				cap = a->cfg.backoff_max;
			a->seal.bad_version = cand->version;
			a->seal.bad_until_ms = now_ms() + (int64_t)((0.5 + 0.5 * agent_rand01()) * cap * 1000.0);
			snprintf(a->seal.bad_err, sizeof(a->seal.bad_err), "%s", err);
			res = SEAL_VERIFY;
			goto out;
		}
		sealed_body_free(b);
	}
	a->seal.verify_failures = 0;
	/* kept before the apply goes live, beside the committed state's: a
	 * boot opens last-good, or finishes this apply (apply_resume) */
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

void seal_damaged_marker(const struct push *m, char *err, size_t errlen)
{
	for (size_t i = 0; i < m->nup; i++) {
		const cJSON *s = m->up[i].body ? cJSON_GetObjectItemCaseSensitive(m->up[i].body, "sealed") : NULL;
		if (s && cJSON_IsNull(s)) {
			snprintf(err, errlen, "%s: the plane sent its damaged-body marker: its stored sealed body is "
				 "damaged; write it again (tetherctl put %s --seal)", m->up[i].name, m->up[i].name);
			return;
		}
	}
}

/* ---- after a commit, and at boot ------------------------------------------- */

static bool keep_current(void *ctx, const struct wrap_entry *w)
{
	struct agent *a = ctx;
	const struct res *r = state_get(&a->state, w->name);
	if (!r || !sealed_is(r))
		return false;
	char id[ENVELOPE_ID_LEN + 1], e2[256];
	return id_of(r, id, e2, sizeof(e2)) == 0 && strcmp(id, w->id) == 0;
}

/* node.key.old goes once the plane took the new key (its 200, or a wrap
 * for the new key it served) and no wrap of the applied state needs it:
 * until then a restart still opens last-good offline. */
static void drop_prev_when_done(struct agent *a)
{
	if (a->seal.has_older && !wraps_for(a, a->seal.older.kid)) {
		char *older = xasprintf("%s/%s", a->cfg.state_dir, NODE_KEY_OLDER);
		if (unlink(older) < 0 && errno != ENOENT) {
			log_warn("key: cannot remove %s: %s", older, strerror(errno));
		} else {
			log_info("key: no wrap of the applied state is for key %s any more; %s removed",
				 a->seal.older.kid, older);
			nodekey_forget(&a->seal.older);
			a->seal.has_older = false;
		}
		free(older);
	}
	if (!a->seal.has_prev || a->seal.prev_gone || !a->seal.prev_taken || wraps_for(a, a->seal.prev.kid))
		return;
	char *old = seal_key_path(a, true);
	if (unlink(old) < 0 && errno != ENOENT) {
		log_warn("key: cannot remove %s: %s", old, strerror(errno));
	} else {
		log_info("key: the rotation from %s to %s is done (the plane took the new key and every sealed "
			 "secret applied opens with it); %s removed", a->seal.prev.kid, a->seal.key.kid, old);
		a->seal.prev_gone = true;
	}
	free(old);
}

/* Prunes the wraps to the applied state's and keeps them. */
static void keep_applied(struct agent *a)
{
	wraps_prune(&a->seal.wraps, keep_current, a);
	if (a->seal.wraps.dirty) {
		char err[1024];
		if (wraps_save(a->cfg.state_dir, &a->seal.wraps, a->seal.key.kid, err, sizeof(err)) < 0)
			log_warn("sealed secrets: %s (kept in memory; an offline boot fetches them again)", err);
	}
	drop_prev_when_done(a);
}

void seal_committed(struct agent *a)
{
	keep_applied(a);
}

void seal_abandoned(struct agent *a)
{
	keep_applied(a);
}

void seal_key_taken(struct agent *a)
{
	if (!a->seal.has_prev || a->seal.prev_gone)
		return;
	a->seal.prev_taken = true;
	a->seal.upgrade_at_ms = 0;   /* the wraps for the new key: asked for at once */
	drop_prev_when_done(a);
}

void seal_tick(struct agent *a)
{
	/* after a rotation, with no push to bring them: the applied
	 * state's wraps for the new key, asked for once a backoff, while
	 * connected (the plane answered) and nothing else is applying */
	if (!a->seal.has_prev || a->seal.prev_gone || !a->seal.reg_conn || a->nqueue ||
	    !(wraps_for(a, a->seal.prev.kid) + (a->seal.has_older ? wraps_for(a, a->seal.older.kid) : 0)) ||
	    !upgrade_due(a))
		return;
	struct collect c;
	char err[ERRLEN];
	if (collect(a, &a->state, NULL, &c, err, sizeof(err)) < 0)
		return;
	upgrade_later(a);
	if (fetch(a, c.v, c.n, true, err, sizeof(err)) < 0)
		log_debug("sealed secrets: %s (the wraps for key %s still open them)", err, a->seal.prev.kid);
	free(c.v);
	keep_applied(a);
}

int seal_check_state(struct agent *a, char *err, size_t errlen)
{
	struct collect c;
	if (collect(a, &a->state, NULL, &c, err, errlen) < 0)
		return -1;
	int rc = 0;
	if (c.n)
		note_secrets_dir(a);
	for (size_t i = 0; i < c.n && rc == 0; i++) {
		cJSON *b = NULL;
		rc = seal_open(a, c.v[i].r, &b, err, errlen);
		sealed_body_free(b);
	}
	free(c.v);
	return rc;
}
