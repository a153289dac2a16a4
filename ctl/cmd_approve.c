/* cmd_approve.c: approvals that nodes enforce (docs/protocol.md,
 * "Approvals"): approve VERSION --key FILE (shows the change against the
 * last approved version, computes each subscription's state digest itself
 * from the state it fetches -- never the plane's --, signs and posts the
 * tokens), reject VERSION (the state before it, committed as a new
 * version), and the version log's word on approvals (cmd_history.c).
 *
 * The digest needs the bodies nodes get: a sealed secret's push form is
 * derived here from its sealed body, which every reader sees; a plaintext
 * secret's body is shown to admins only, so approving a state that holds
 * one needs an admin's token (a reader's gets "[redacted]" bodies, and the
 * plane refuses the approval: its digest differs). */
#include "approval.h"
#include "buf.h"
#include "commands.h"
#include "ctl.h"
#include "envelope.h"
#include "json.h"
#include "keys.h"
#include "lthash.h"
#include "output.h"
#include "request.h"
#include "strmap.h"
#include "sub.h"
#include "util.h"
#include "xmalloc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A state: names and the canonical bodies nodes get (NULL: absent),
 * indexed by name. */
struct cstate {
	char **name, **body;
	size_t n, cap;
	struct strmap idx;   /* name -> index + 1 */
};

static void cstate_put(struct cstate *s, const char *name, const char *body)
{
	intptr_t at = 0;
	if (s->idx.slots && strmap_get(&s->idx, name, &at) && at) {
		free(s->body[at - 1]);
		s->body[at - 1] = body ? xstrdup(body) : NULL;
		return;
	}
	if (!s->idx.slots)
		strmap_init(&s->idx);
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 64;
		s->name = xrealloc(s->name, s->cap * sizeof(*s->name));
		s->body = xrealloc(s->body, s->cap * sizeof(*s->body));
	}
	s->name[s->n] = xstrdup(name);
	s->body[s->n++] = body ? xstrdup(body) : NULL;
	strmap_put(&s->idx, s->name[s->n - 1], (intptr_t)s->n);
}

/* name's body in s, or NULL when absent. */
static const char *cstate_get(const struct cstate *s, const char *name)
{
	intptr_t at = 0;
	return s->idx.slots && strmap_get(&s->idx, name, &at) && at ? s->body[at - 1] : NULL;
}

static void cstate_release(struct cstate *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->name[i]);
		free(s->body[i]);
	}
	free(s->name);
	free(s->body);
	if (s->idx.slots)
		strmap_release(&s->idx);
	memset(s, 0, sizeof(*s));
}

/* The body a node gets, canonical (malloc'd), or NULL after saying why. */
static char *node_body(const char *name, cJSON *body)
{
	char *canon = json_encode_canonical(body);
	if (strncmp(name, "secret/", 7) != 0)
		return canon;
	char *out = NULL, err[300];
	size_t olen = 0;
	int rc = envelope_push_body_checked(canon, strlen(canon), &out, &olen, err, sizeof(err));
	if (rc < 0) {
		ctl_error("approve: %s: its sealed body is damaged (%s): nodes refuse it; write it again", name, err);
		free(canon);
		return NULL;
	}
	if (rc == 0 || !out) {
		/* a plaintext secret as a non-admin sees it (api/resources.c):
		 * the digest would not be the nodes' */
		static bool said;   /* once: both states are read */
		const cJSON *m;
		cJSON_ArrayForEach(m, body) {
			if (!said && cJSON_IsString(m) && strcmp(m->valuestring, "[redacted]") == 0) {
				said = true;
				fprintf(stderr, "tetherctl: approve: %s: its body reads [redacted] (a plaintext secret, "
					"shown to admins only): the plane will refuse this digest; approve with an "
					"admin's token\n", name);
				break;
			}
		}
		return canon;
	}
	free(canon);
	/* the push form, canonical as nodes digest it */
	char jerr[128];
	cJSON *pf = json_decode(out, olen, NULL, jerr, sizeof(jerr));
	free(out);
	if (!pf) {
		ctl_error("approve: %s: its push form does not parse: %s", name, jerr);
		return NULL;
	}
	char *c2 = json_encode_canonical(pf);
	cJSON_Delete(pf);
	return c2;
}

/* GET path as JSON; NULL after saying why. */
static cJSON *get_json(const struct ctl_ctx *cx, const char *path)
{
	struct client_answer ans = { 0, BUF_INIT, "" };
	cJSON *doc = NULL;
	if (ctl_call(cx, "GET", path, NULL, 0, &ans) == 0)
		doc = ctl_answer_json(&ans);
	buf_release(&ans.body);
	return doc;
}

/* The state at version v, as the plane's API shows it: the newest listing,
 * with what changed since v undone (GET /v1/diff). 0, or -1 after saying
 * why. */
static int state_at(const struct ctl_ctx *cx, uint64_t v, struct cstate *s)
{
	int rc = -1;
	cJSON *list = get_json(cx, "/v1/resources"), *diff = NULL;
	uint64_t cur;
	if (!list)
		return -1;
	const cJSON *res = cJSON_GetObjectItemCaseSensitive(list, "resources");
	if (!json_get_u64(cJSON_GetObjectItemCaseSensitive(list, "version"), &cur) || !cJSON_IsArray(res)) {
		ctl_error("unexpected answer from the plane: no resources");
		goto out;
	}
	if (v > cur) {
		ctl_error("approve: no version %" PRIu64 ": the plane is at version %" PRIu64, v, cur);
		goto out;
	}
	for (const cJSON *r = res->child; r; r = r->next) {
		const char *name = json_get_string(r, "name");
		cJSON *body = cJSON_GetObjectItemCaseSensitive(r, "body");
		if (!name || !cJSON_IsObject(body)) {
			ctl_error("unexpected answer from the plane: a resource without name or body");
			goto out;
		}
		char *nb = node_body(name, body);
		if (!nb)
			goto out;
		cstate_put(s, name, nb);
		free(nb);
	}
	if (v < cur) {
		char path[96];
		snprintf(path, sizeof(path), "/v1/diff?from=%" PRIu64 "&to=%" PRIu64, v, cur);
		if (!(diff = get_json(cx, path)))
			goto out;
		const cJSON *ch = cJSON_GetObjectItemCaseSensitive(diff, "changes");
		for (const cJSON *c = ch ? ch->child : NULL; c; c = c->next) {
			const char *name = json_get_string(c, "name");
			cJSON *before = cJSON_GetObjectItemCaseSensitive(c, "before");
			if (!name) {
				ctl_error("unexpected answer from the plane: a change without its name");
				goto out;
			}
			char *nb = cJSON_IsObject(before) ? node_body(name, before) : NULL;
			if (cJSON_IsObject(before) && !nb)
				goto out;
			cstate_put(s, name, nb);
			free(nb);
		}
	}
	rc = 0;
out:
	cJSON_Delete(list);
	cJSON_Delete(diff);
	return rc;
}

/* The digest of s as a node subscribed to sub sees it (lthash.h, as the
 * plane and tetherd compute it). */
static void digest_of(const struct cstate *s, const struct sub *sub, unsigned char out[LTHASH_DIGEST_BYTES])
{
	struct lthash h;
	unsigned char seed[LTHASH_SEED_BYTES];
	lthash_init(&h);
	for (size_t i = 0; i < s->n; i++) {
		if (!s->body[i] || !sub_match(sub, s->name[i]))
			continue;
		lthash_seed(s->name[i], s->body[i], strlen(s->body[i]), seed);
		lthash_add(&h, seed);
	}
	lthash_digest(&h, out);
}

struct change {
	const char *name, *what;
};

static int change_cmp(const void *x, const void *y)
{
	return strcmp(((const struct change *)x)->name, ((const struct change *)y)->name);
}

/* What changed from the state at base (old) to the state at v (cur) --
 * the very states whose digests are signed, compared here, not the
 * plane's word on what changed --, one line a name (or JSON members). */
static void show_change(const struct ctl_ctx *cx, uint64_t base, uint64_t v, const struct cstate *old,
			const struct cstate *cur, struct buf *json)
{
	struct change *ch = xcalloc(old->n + cur->n + 1, sizeof(*ch));
	size_t n = 0;
	for (size_t i = 0; i < cur->n; i++) {
		const char *was = cstate_get(old, cur->name[i]);
		if (!cur->body[i])
			continue;
		if (!was)
			ch[n++] = (struct change){ cur->name[i], "added" };
		else if (strcmp(was, cur->body[i]) != 0)
			ch[n++] = (struct change){ cur->name[i], "changed" };
	}
	for (size_t i = 0; i < old->n; i++)
		if (old->body[i] && !cstate_get(cur, old->name[i]))
			ch[n++] = (struct change){ old->name[i], "removed" };
	qsort(ch, n, sizeof(*ch), change_cmp);
	if (!cx->json)
		printf("version %" PRIu64 " against %" PRIu64 ":\n", v, base);
	for (size_t i = 0; i < n; i++) {
		if (cx->json) {
			buf_puts(json, i ? ",{\"name\":" : "{\"name\":");
			buf_json_string(json, ch[i].name);
			buf_printf(json, ",\"change\":\"%s\"}", ch[i].what);
		} else {
			printf("  %-8s %s\n", ch[i].what, ch[i].name);
		}
	}
	if (!cx->json && !n)
		printf("  (no change)\n");
	free(ch);
}

/* The approvals key k gave version base (GET /v1/approvals?version=base
 * has the tokens): each must sign the state fetched at base (was), else
 * the plane's word on base -- and so the change shown against it -- is not
 * what this key approved. 1: checked against at least one, 0: this key
 * approved none of base, -1 after saying why. */
static int check_base(const struct ctl_ctx *cx, uint64_t base, const struct cstate *was,
		      const struct signing_key *k)
{
	if (base == 0)
		return 0;
	char path[64];
	snprintf(path, sizeof(path), "/v1/approvals?version=%" PRIu64, base);
	cJSON *info = get_json(cx, path);
	if (!info)
		return -1;
	int rc = 0;
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(info, "approvals");
	for (const cJSON *a = list ? list->child : NULL; a && rc >= 0; a = a->next) {
		const cJSON *toks = cJSON_GetObjectItemCaseSensitive(a, "tokens");
		for (const cJSON *t = toks ? toks->child : NULL; t && rc >= 0; t = t->next) {
			struct approval ap;
			struct sub sub;
			char err[256];
			if (!cJSON_IsString(t) || approval_verify(t->valuestring, strlen(t->valuestring), &ap, err,
								  sizeof(err)) < 0)
				continue;
			if (ap.version == base && memcmp(ap.pk, k->pk, sizeof(ap.pk)) == 0 &&
			    sub_parse(ap.sub, &sub, err, sizeof(err)) == 0) {
				unsigned char d[LTHASH_DIGEST_BYTES];
				digest_of(was, &sub, d);
				if (lthash_digest_equal(d, ap.digest)) {
					rc = 1;
				} else {
					ctl_error("approve: the state the plane shows for version %" PRIu64 " is not the one "
						  "key %s approved for subscription '%.200s' (digest differs): the change "
						  "shown would be against another state. Not approved: find out why (a "
						  "plane or proxy that lies about history?)", base, k->kid, ap.sub);
					rc = -1;
				}
				sub_release(&sub);
			}
			approval_release(&ap);
		}
	}
	cJSON_Delete(info);
	return rc;
}

int cmd_approve(const struct ctl_ctx *cx, int argc, char **argv)
{
	(void)argc;
	uint64_t v;
	if (parse_u64(argv[0], &v) < 0 || v == 0) {
		ctl_error("approve: '%s' is not a version (a positive whole number)", argv[0]);
		return CTL_EXIT_USAGE;
	}
	if (!cx->approver_key) {
		ctl_error("approve: --key FILE is required (an approver key: tetherctl keygen --approver FILE)");
		return CTL_EXIT_USAGE;
	}
	char err[1024];
	struct signing_key k;
	if (keys_load_secret(cx->approver_key, &k, err, sizeof(err)) < 0) {
		ctl_error("approve: %s", err);
		return CTL_EXIT_FAILED;
	}
	int rc = CTL_EXIT_FAILED;
	struct cstate s = { 0 }, was = { 0 };
	struct buf json = BUF_INIT, body = BUF_INIT;
	struct client_answer ans = { 0, BUF_INIT, "" };
	char path[64];
	snprintf(path, sizeof(path), "/v1/approvals?version=%" PRIu64, v);
	cJSON *info = get_json(cx, path), *got = NULL;
	if (!info)
		goto out;
	uint64_t base = v - 1, last = 0;
	if (json_get_u64(cJSON_GetObjectItemCaseSensitive(info, "last_approved"), &last) && last > 0 && last < v)
		base = last;
	if (cx->json)
		buf_printf(&json, "{\"version\":%" PRIu64 ",\"base\":%" PRIu64 ",\"changes\":[", v, base);
	if (state_at(cx, v, &s) < 0 || state_at(cx, base, &was) < 0)
		goto out;
	int based = check_base(cx, base, &was, &k);
	if (based < 0)
		goto out;
	if (!based && base > 0 && !cx->json)
		fprintf(stderr, "tetherctl: approve: key %s did not approve version %" PRIu64 ": the change shown "
			"against it is the plane's word\n", k.kid, base);
	show_change(cx, base, v, &was, &s, &json);
	/* the subscriptions the approving nodes use (none connected yet: the
	 * whole state, as a node without --sub sees it) */
	const cJSON *subs = cJSON_GetObjectItemCaseSensitive(info, "subs");
	size_t nsubs = (size_t)cJSON_GetArraySize(subs);
	if (!nsubs && !cx->json)
		fprintf(stderr, "tetherctl: approve: no node that requires approvals is connected: approving the whole "
			"state (subscription \"\")\n");
	if (cx->json)
		buf_puts(&json, "],\"approvals\":[");
	buf_printf(&body, "{\"version\":%" PRIu64 ",\"approvals\":[", v);
	for (size_t i = 0; i < (nsubs ? nsubs : 1); i++) {
		const cJSON *it = nsubs ? cJSON_GetArrayItem(subs, (int)i) : NULL;
		const char *text = nsubs ? (cJSON_IsString(it) ? it->valuestring : NULL) : "";
		struct sub sub;
		if (!text || sub_parse(text, &sub, err, sizeof(err)) < 0) {
			ctl_error("unexpected answer from the plane: a subscription that does not parse");
			goto out;
		}
		struct approval ap = { .version = v, .sub = sub.canon ? sub.canon : (char *)"" };
		digest_of(&s, &sub, ap.digest);
		char *tok = approval_sign(&ap, &k);
		char hex[2 * LTHASH_DIGEST_BYTES + 1];
		lthash_digest_hex(ap.digest, hex);
		if (cx->json) {
			buf_puts(&json, i ? ",{\"sub\":" : "{\"sub\":");
			buf_json_string(&json, ap.sub);
			buf_printf(&json, ",\"digest\":\"%s\",\"kid\":\"%s\"}", hex, k.kid);
		} else {
			printf("signed version %" PRIu64 ", subscription '%s', digest %.16s... as key %s\n", v, ap.sub, hex,
			       k.kid);
		}
		buf_puts(&body, i ? "," : "");
		buf_json_string(&body, tok);
		free(tok);
		sub_release(&sub);
	}
	buf_puts(&body, "]}");
	if (ctl_call(cx, "POST", "/v1/approvals", body.data, body.len, &ans) != 0)
		goto out;
	if (!(got = ctl_answer_json(&ans)))
		goto out;
	if (cx->json) {
		buf_puts(&json, "],\"plane\":");
		char *t = cJSON_PrintUnformatted(got);
		buf_puts(&json, t);
		free(t);
		/* whether the base state is one this key approved (check_base) */
		buf_printf(&json, ",\"base_checked\":%s}", based > 0 ? "true" : "false");
		printf("%s\n", json.data);
	} else {
		char *t = cmd_approve_log_text(got);
		printf("version %" PRIu64 ": %s\n", v, t ? t : "approved");
		free(t);
	}
	rc = CTL_EXIT_OK;
out:
	keys_forget(&k);
	cJSON_Delete(info);
	cJSON_Delete(got);
	cstate_release(&s);
	cstate_release(&was);
	buf_release(&json);
	buf_release(&body);
	buf_release(&ans.body);
	return rc;
}

int cmd_reject(const struct ctl_ctx *cx, int argc, char **argv)
{
	(void)argc;
	uint64_t v;
	if (parse_u64(argv[0], &v) < 0 || v < 2) {
		ctl_error("reject: '%s' is not a version after the first (a whole number >= 2)", argv[0]);
		return CTL_EXIT_USAGE;
	}
	struct buf body = BUF_INIT;
	struct client_answer ans = { 0, BUF_INIT, "" };
	char *msg = xasprintf("reject %" PRIu64 ": %s", v, cx->message ? cx->message : "rejected");
	buf_printf(&body, "{\"version\":%" PRIu64 ",\"message\":", v - 1);
	buf_json_string(&body, msg);
	buf_putc(&body, '}');
	struct ctl_ctx plain = *cx;
	plain.message = NULL;   /* in the body, as revert sends it */
	int rc = CTL_EXIT_FAILED;
	if (ctl_call(&plain, "POST", "/v1/revert", body.data, body.len, &ans) == 0)
		rc = ctl_print_version(cx, &ans);
	free(msg);
	buf_release(&ans.body);
	buf_release(&body);
	return rc;
}

char *cmd_approve_log_text(const cJSON *v)
{
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(v, "approvals");
	uint64_t needed = 0;
	if (!cJSON_IsArray(list))
		return NULL;
	if (!json_get_u64(cJSON_GetObjectItemCaseSensitive(v, "approvals_needed"), &needed))
		json_get_u64(cJSON_GetObjectItemCaseSensitive(v, "needed"), &needed);
	/* distinct keys, over every subscription (the log shows the most any
	 * one subscription has) */
	struct buf kids = BUF_INIT;
	size_t best = 0;
	const char *best_sub = NULL;
	for (const cJSON *a = list->child; a; a = a->next) {
		const char *sub = json_get_string(a, "sub");
		size_t c = 0;
		const cJSON *ks = cJSON_GetObjectItemCaseSensitive(a, "kids");
		if (cJSON_IsArray(ks)) {
			c = (size_t)cJSON_GetArraySize(ks);   /* GET /v1/approvals: per sub */
		} else {
			for (const cJSON *b = list->child; b; b = b->next) {
				const char *sb = json_get_string(b, "sub");
				c += sub && sb && strcmp(sub, sb) == 0;
			}
		}
		if (c > best || !best_sub) {
			best = c;
			best_sub = sub;
		}
	}
	for (const cJSON *a = list->child; a; a = a->next) {
		const char *sub = json_get_string(a, "sub");
		if (!sub || !best_sub || strcmp(sub, best_sub) != 0)
			continue;
		const cJSON *ks = cJSON_GetObjectItemCaseSensitive(a, "kids");
		if (cJSON_IsArray(ks)) {
			for (const cJSON *k = ks->child; k; k = k->next)
				if (cJSON_IsString(k))
					buf_printf(&kids, "%s%.8s...", kids.len ? ", " : "", k->valuestring);
		} else {
			const char *kid = json_get_string(a, "kid");
			if (kid)
				buf_printf(&kids, "%s%.8s...", kids.len ? ", " : "", kid);
		}
	}
	char *out;
	if (needed && best < needed)
		out = xasprintf("pending approval %zu/%" PRIu64 "%s%s%s", best, needed, kids.len ? " (" : "",
				kids.len ? kids.data : "", kids.len ? ")" : "");
	else if (best)
		out = xasprintf("approved %zu/%" PRIu64 " (%s)", best, needed ? needed : (uint64_t)best, kids.data);
	else
		out = NULL;
	buf_release(&kids);
	return out;
}
