/* sync_seal.c: tetherctl sync's sealed secrets (see secrets.h). For each
 * secret file, against the plane's stored body P:
 *   - a sealed file (export writes the push form, {"sealed":...}) is
 *     unchanged when its "sealed" is P's; otherwise it is sent with its
 *     own wraps (put --seal --output writes them; none in a push form),
 *     with --recovery-key's secret half the wraps of every node key it
 *     reaches added; without it, a node it reaches that has no wrap in
 *     it is an error naming the file and the two ways out;
 *   - a plaintext file, when P is sealed, is opened against P with
 *     --recovery-key (needed: else an error naming the file and the
 *     option): the same plaintext is unchanged, another is sealed anew;
 *     when P is sealed to a recovery key the plane no longer names (a
 *     replaced one), it is sealed anew without comparing;
 *   - a plaintext file, when P is plaintext or absent, is sealed when the
 *     plane requires sealed secrets (--sealed-secrets), as put --seal
 *     does, unless it equals P; otherwise it is sent as before.
 * "Unchanged" makes the entry's body P's own text, so the diff skips it.
 * Plaintext bodies replaced by their envelope are wiped first. */
#include "secrets.h"
#include "ctl.h"
#include "envelope.h"
#include "json.h"
#include "request.h"
#include "resource.h"
#include "xmalloc.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sync_seal {
	const struct sealer_fleet *fleet;
	const struct sealer_recovery *r;   /* --recovery-key, or NULL */
};

/* The plane's body of name (names sorted), or NULL. */
static const char *remote_body(size_t n, char *const *names, char *const *bodies, const char *name)
{
	for (size_t lo = 0, hi = n; lo < hi;) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(names[mid], name);
		if (c == 0)
			return bodies[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static cJSON *parse(const char *text)
{
	struct json_limits lim = { 0, CTL_JSON_DEPTH };
	char err[128];
	return json_decode(text, strlen(text), &lim, err, sizeof(err));
}

/* The entry's body replaced by text (taken); a plaintext one wiped. */
static void set_body(struct tree_entry *e, char *text)
{
	sodium_memzero(e->body, strlen(e->body));
	cJSON_free(e->body);
	e->body = text;
}

/* The canonical text of body's "sealed" (malloc'd), or NULL. */
static char *sealed_text(const cJSON *body)
{
	cJSON *c = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(body, "sealed"), true);
	char *text = c ? json_encode_canonical(c) : NULL;
	cJSON_Delete(c);
	return text;
}

static bool same_sealed(const cJSON *a, const cJSON *b)
{
	char *x = sealed_text(a), *y = sealed_text(b);
	bool same = x && y && strcmp(x, y) == 0;
	cJSON_free(x);
	cJSON_free(y);
	return same;
}

/* A sealed file: P's text when it holds the same envelope, else the file's
 * envelope in the stored form (with --recovery-key, wrapped for the
 * nodes it reaches). */
static int sealed_file(struct sync_seal *s, struct tree_entry *e, cJSON *fdoc, const char *p, const cJSON *pdoc)
{
	char err[1024];
	if (p && envelope_is_sealed(pdoc) && same_sealed(fdoc, pdoc)) {
		set_body(e, xstrdup(p));
		return 0;
	}
	cJSON_DeleteItemFromObjectCaseSensitive(fdoc, "superseded");
	if (!cJSON_GetObjectItemCaseSensitive(fdoc, "wraps"))
		cJSON_AddObjectToObject(fdoc, "wraps");
	if (envelope_check_stored(fdoc, err, sizeof(err)) < 0) {
		ctl_error("'%s': %s: %s", e->path, e->name, err);
		return 1;
	}
	if (s->r && s->r->has_secret) {
		if (sealer_add_wraps(fdoc, e->name, s->fleet, s->r, NULL, err, sizeof(err)) < 0) {
			ctl_error("'%s': %s", e->path, err);
			return 1;
		}
	} else {
		/* its own wraps only: every node it reaches must have one, else
		 * the plane refuses it (--sealed-secrets) or holds those nodes */
		struct buf who = BUF_INIT;
		size_t n = sealer_unwrapped(fdoc, e->name, s->fleet, &who);
		if (n) {
			ctl_error("'%s': %s: the file's envelope has no wraps for %zu node%s it reaches (%s): give "
				  "--recovery-key FILE (the secret half) to wrap them, or write the file with 'tetherctl "
				  "put %s --seal --output FILE'", e->path, e->name, n, n == 1 ? "" : "s", who.data,
				  e->name);
			buf_release(&who);
			return 1;
		}
		buf_release(&who);
	}
	set_body(e, json_encode_canonical(fdoc));
	return 0;
}

/* A plaintext file sealed anew, as put --seal does. */
static int seal_file(struct sync_seal *s, struct tree_entry *e, const cJSON *fdoc)
{
	char err[1024];
	if (resource_validate(e->name, fdoc, 0, NULL, err, sizeof(err)) < 0) {
		ctl_error("'%s': %s", e->path, err);
		return 1;
	}
	unsigned char rpk[32];
	char rkid[KEY_ID_LEN + 1];
	if (sealer_recovery_choose(s->fleet, s->r, rpk, rkid, err, sizeof(err)) < 0) {
		ctl_error("'%s': cannot seal %s: %s", e->path, e->name, err);
		return 1;
	}
	char *stored = sealer_stored_body(e->name, e->body, strlen(e->body), s->fleet, rpk, rkid, NULL, NULL, err,
					  sizeof(err));
	if (!stored) {
		ctl_error("'%s': %s", e->path, err);
		return 1;
	}
	set_body(e, stored);
	return 0;
}

static int plaintext_file(struct sync_seal *s, struct tree_entry *e, const cJSON *fdoc, const char *p,
			  const cJSON *pdoc)
{
	char err[1024];
	if (p && envelope_is_sealed(pdoc)) {
		/* sealed to a recovery key the plane no longer names (it was
		 * replaced): sealed again, whatever the plaintext */
		const char *rk = json_get_string(cJSON_GetObjectItemCaseSensitive(pdoc, "sealed"), "rk");
		if (s->fleet->has_recovery && rk && strcmp(rk, s->fleet->rkid) != 0)
			return seal_file(s, e, fdoc);
		if (!s->r || !s->r->has_secret) {
			ctl_error("'%s': %s is sealed on the plane and the file is plaintext: to compare them, give "
				  "--recovery-key FILE (the recovery key's secret half); or write the file sealed (export "
				  "writes it so), or put it with 'tetherctl put %s --seal'", e->path, e->name, e->name);
			return 1;
		}
		size_t len = 0;
		char *plain = sealer_open(pdoc, e->name, s->r, &len, err, sizeof(err));
		if (!plain) {
			ctl_error("'%s': the plane's copy does not open: %s", e->path, err);
			return 1;
		}
		/* the plane's plaintext in canonical form, as the tree's is */
		struct json_limits lim = { 0, CTL_JSON_DEPTH };
		char jerr[128];
		cJSON *pl = json_decode(plain, len, &lim, jerr, sizeof(jerr));
		char *canon = pl ? sealer_canonical_secret(pl, len) : NULL;
		bool same = canon && strcmp(canon, e->body) == 0;
		if (canon) {
			sodium_memzero(canon, strlen(canon));
			free(canon);
		}
		sealer_json_wipe(pl);
		cJSON_Delete(pl);
		envelope_wipe(plain);
		if (same) {
			set_body(e, xstrdup(p));
			return 0;
		}
		return seal_file(s, e, fdoc);
	}
	if (p && strcmp(p, e->body) == 0)
		return 0;
	return s->fleet->sealed_secrets ? seal_file(s, e, fdoc) : 0;
}

/* GET /v1/secrets; a plane that does not know it (404) has no sealed
 * secrets and no node keys. Returns 0 or 1 (printed). */
static int fetch(const struct ctl_ctx *cx, struct sealer_fleet *f)
{
	struct client_answer ans = { 0, BUF_INIT, "" };
	char refusal[1024], err[512];
	int rc = 0;
	memset(f, 0, sizeof(*f));
	if (ctl_call_refusal(cx, "GET", "/v1/secrets", NULL, 0, &ans, refusal, sizeof(refusal)) != 0) {
		if (ans.status != 404) {
			if (ans.status)
				ctl_error("%s", refusal);
			rc = 1;
		}
	} else if (sealer_fleet_parse(ans.body.data ? ans.body.data : "", ans.body.len, f, err, sizeof(err)) < 0) {
		ctl_error("unexpected answer from the plane to GET /v1/secrets: %s", err);
		rc = 1;
	}
	buf_release(&ans.body);
	return rc;
}

int sync_seal_rules(const struct sealer_fleet *f, const struct sealer_recovery *r, struct tree *t, size_t n,
		    char *const *names, char *const *bodies)
{
	struct sync_seal s = { f, r };
	int rc = 0;
	for (size_t i = 0; i < t->n && rc == 0; i++) {
		struct tree_entry *e = &t->e[i];
		if (resource_type_of(e->name) != RES_SECRET)
			continue;
		const char *p = remote_body(n, names, bodies, e->name);
		cJSON *fdoc = parse(e->body), *pdoc = p ? parse(p) : NULL;
		if (!fdoc)
			rc = 1;   /* tree_read parsed it once: cannot happen */
		else if (envelope_is_sealed(fdoc))
			rc = sealed_file(&s, e, fdoc, p, pdoc);
		else
			rc = plaintext_file(&s, e, fdoc, p, pdoc);
		sealer_json_wipe(fdoc);   /* a plaintext file's strings */
		cJSON_Delete(fdoc);
		sealer_json_wipe(pdoc);   /* an admin's plaintext copy */
		cJSON_Delete(pdoc);
	}
	return rc;
}

int sync_seal(const struct ctl_ctx *cx, struct tree *t, size_t n, char *const *names, char *const *bodies)
{
	struct sealer_fleet f;
	struct sealer_recovery r;
	char err[1024];
	bool any = false;
	memset(&f, 0, sizeof(f));
	memset(&r, 0, sizeof(r));
	for (size_t i = 0; i < t->n && !any; i++)
		any = resource_type_of(t->e[i].name) == RES_SECRET;
	if (!any)
		return 0;
	if (cx->recovery_key && sealer_recovery_load(cx->recovery_key, &r, err, sizeof(err)) < 0) {
		ctl_error("%s", err);
		return 1;
	}
	int rc = fetch(cx, &f);
	if (rc == 0)
		rc = sync_seal_rules(&f, cx->recovery_key ? &r : NULL, t, n, names, bodies);
	sealer_fleet_release(&f);
	sealer_recovery_forget(&r);
	return rc;
}
