/* cmd_secrets.c: tetherctl's sealed secrets (docs/protocol.md, "Sealed
 * secrets"): put --seal, secrets status, secrets reseal, secrets revoke
 * and secrets approve. Sealing happens here, on the operator's machine: the plane gets
 * only the envelope and its wraps. The plaintext a command reads is wiped
 * once sealed and never printed. */
#include "commands.h"
#include "buf.h"
#include "ctl.h"
#include "envelope.h"
#include "json.h"
#include "output.h"
#include "request.h"
#include "resource.h"
#include "secrets.h"
#include "strmap.h"
#include "util.h"
#include "xmalloc.h"

#include <errno.h>
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MISSING_CELL_CHARS 80

int secrets_fetch(const struct ctl_ctx *cx, struct sealer_fleet *f)
{
	struct client_answer ans = { 0, BUF_INIT, "" };
	char err[512];
	memset(f, 0, sizeof(*f));
	if (ctl_call(cx, "GET", "/v1/secrets", NULL, 0, &ans) != 0)
		return 1;
	ctl_warn_stale(cx, &ans);
	int rc = 0;
	if (sealer_fleet_parse(ans.body.data ? ans.body.data : "", ans.body.len, f, err, sizeof(err)) < 0) {
		ctl_error("unexpected answer from the plane to GET /v1/secrets: %s", err);
		rc = 1;
	}
	buf_release(&ans.body);
	return rc;
}

/* --recovery-key FILE into r (when given). Returns 0, or 1 after printing why. */
static int recovery_from(const struct ctl_ctx *cx, struct sealer_recovery *r, bool *given)
{
	char err[1024];
	*given = cx->recovery_key != NULL;
	if (!*given)
		return 0;
	if (sealer_recovery_load(cx->recovery_key, r, err, sizeof(err)) < 0) {
		ctl_error("%s", err);
		return 1;
	}
	return 0;
}

/* ---- put --seal ------------------------------------------------------------- */

/* "secret/NAME sealed to recovery key R and N node keys[, K via relays
 * (r1, r2)]", and a warning when no node can open it. */
static void put_report(const char *name, const char *rkid, size_t nwraps, const cJSON *added, const char *where)
{
	struct buf who = BUF_INIT, via = BUF_INIT;
	size_t nvia = 0;
	for (const cJSON *a = added ? added->child : NULL; a; a = a->next) {
		const char *r = json_get_string(a, "via");
		if (r && *r) {
			buf_printf(&via, "%s%s: %s", nvia ? "; " : "", json_get_string(a, "node"), r);
			nvia++;
		}
	}
	sealer_added_text(added, &who);
	if (nwraps)
		printf("wrapped for %s\n", who.data);
	printf("%s sealed to recovery key %s and %zu node key%s", name, rkid, nwraps, nwraps == 1 ? "" : "s");
	if (nvia)
		printf(", %zu via relays (%s)", nvia, via.data);
	if (where)
		printf(": written to '%s'", where);
	putchar('\n');
	if (!nwraps)
		ctl_error("warning: %s reaches no node with a registered key: no node can open it until one "
			  "registers and 'tetherctl secrets reseal' runs", name);
	buf_release(&who);
	buf_release(&via);
}

int cmd_put_sealed(const struct ctl_ctx *cx, int argc, char **argv)
{
	const char *name = argv[0];
	struct sealer_fleet f = { 0 };
	struct sealer_recovery r;
	struct buf path = BUF_INIT;
	struct client_answer ans = { 0, BUF_INIT, "" };
	char err[1024], *plain = NULL, *stored = NULL;
	size_t len = 0, nwraps = 0;
	cJSON *doc = NULL, *added = cJSON_CreateArray();
	bool have_r = false;
	int rc = CTL_EXIT_FAILED;
	memset(&r, 0, sizeof(r));

	if (resource_type_of(name) != RES_SECRET) {
		ctl_error("put --seal: '%s' is not a secret: only secret/NAME is sealed", name);
		rc = CTL_EXIT_USAGE;
		goto out;
	}
	sealer_no_dumps();   /* before the plaintext is read */
	char *text = ctl_read_json_object_secret(argc > 1 ? argv[1] : "-", "a resource body", &len);
	if (!text)
		goto out;
	/* the plane cannot look inside an envelope: the body is checked here */
	struct json_limits lim = { CTL_MAX_INPUT, CTL_JSON_DEPTH };
	doc = json_decode(text, len, &lim, err, sizeof(err));
	sodium_memzero(text, len);
	free(text);
	if (!doc) {
		ctl_error("put --seal %s: %s", name, err);
		goto out;
	}
	if (envelope_is_sealed(doc)) {
		ctl_error("put --seal: the body of %s is sealed already: put it without --seal", name);
		goto out;
	}
	if (resource_validate(name, doc, 0, NULL, err, sizeof(err)) < 0) {
		ctl_error("%s", err);
		goto out;
	}
	plain = sealer_canonical_secret(doc, len);
	if (recovery_from(cx, &r, &have_r) != 0 || secrets_fetch(cx, &f) != 0)
		goto out;
	unsigned char rpk[32];
	char rkid[KEY_ID_LEN + 1];
	if (sealer_recovery_choose(&f, have_r ? &r : NULL, rpk, rkid, err, sizeof(err)) < 0) {
		ctl_error("put --seal %s: %s", name, err);
		goto out;
	}
	stored = sealer_stored_body(name, plain, strlen(plain), &f, rpk, rkid, &nwraps, added, err, sizeof(err));
	if (!stored) {
		ctl_error("put --seal: %s", err);
		goto out;
	}
	if (cx->output) {
		/* the stored form, wraps included: a file sync sends as it is */
		struct buf pretty_text = BUF_INIT;
		json_pretty(&pretty_text, stored);
		buf_putc(&pretty_text, '\n');
		int w = write_file_replace(cx->output, pretty_text.data, pretty_text.len, 0600, false);
		int saved = errno;
		buf_release(&pretty_text);
		if (w < 0) {
			ctl_error("put --seal: cannot write '%s': %s; nothing was written", cx->output, strerror(saved));
			goto out;
		}
		put_report(name, rkid, nwraps, added, cx->output);
		rc = CTL_EXIT_OK;
		goto out;
	}
	buf_puts(&path, "/v1/resources/");
	client_escape(&path, name, true);
	if (ctl_call(cx, "PUT", path.data, stored, strlen(stored), &ans) != 0)
		goto out;
	rc = ctl_print_version(cx, &ans);
	if (rc == 0)
		put_report(name, rkid, nwraps, added, NULL);
out:
	if (plain) {
		sodium_memzero(plain, strlen(plain));
		free(plain);
	}
	sealer_json_wipe(doc);   /* the parsed body's strings hold the plaintext too */
	cJSON_Delete(doc);
	cJSON_Delete(added);
	free(stored);
	buf_release(&ans.body);
	buf_release(&path);
	sealer_fleet_release(&f);
	sealer_recovery_forget(&r);
	return rc;
}

/* ---- secrets status ------------------------------------------------------------ */

static bool key_id_ok(const char *kid)
{
	return kid && strlen(kid) == KEY_ID_LEN && strspn(kid, "0123456789abcdef") == KEY_ID_LEN;
}

/* The plane's "pending" list (--approve-relay-keys): a line per key that
 * waits for an admin, with the command that approves it. The plane's text
 * is checked before it reaches the terminal. Returns how many. */
static size_t status_pending(const struct buf *body)
{
	char err[256];
	struct json_limits lim = { 0, 8 };
	cJSON *doc = json_decode(body->data ? body->data : "", body->len, &lim, err, sizeof(err));
	const cJSON *list = doc ? cJSON_GetObjectItemCaseSensitive(doc, "pending") : NULL;
	size_t n = 0;
	for (const cJSON *e = cJSON_IsArray(list) ? list->child : NULL; e; e = e->next) {
		const char *node = json_get_string(e, "node");
		const char *kid = json_get_string(e, "key_pending");
		const char *via = json_get_string(e, "key_via");
		if (!node || !resource_name_valid(node) || !key_id_ok(kid))
			continue;
		char *shown = cell_text(via && *via ? via : "-", 200);
		if (!n)
			printf("keys waiting for approval (--approve-relay-keys; no secret is sealed to them until "
			       "then):\n");
		printf("  node %s: key %s via %s: check it is the key the node logged (tetherd says \"node key "
		       "%s\"), then run 'tetherctl secrets approve %s %s'\n",
		       node, kid, shown, kid, node, kid);
		free(shown);
		n++;
	}
	cJSON_Delete(doc);
	return n;
}

int cmd_secrets_status(const struct ctl_ctx *cx, int argc, char **argv)
{
	struct sealer_fleet f;
	struct client_answer ans = { 0, BUF_INIT, "" };
	char err[512];
	(void)argc;
	(void)argv;
	if (ctl_call(cx, "GET", "/v1/secrets", NULL, 0, &ans) != 0)
		return CTL_EXIT_FAILED;
	ctl_warn_stale(cx, &ans);
	if (cx->json) {
		print_raw(&ans);
		buf_release(&ans.body);
		return CTL_EXIT_OK;
	}
	if (sealer_fleet_parse(ans.body.data ? ans.body.data : "", ans.body.len, &f, err, sizeof(err)) < 0) {
		ctl_error("unexpected answer from the plane to GET /v1/secrets: %s", err);
		buf_release(&ans.body);
		return CTL_EXIT_FAILED;
	}
	struct table t = { 4, 0, NULL };
	char *head[] = { xstrdup("SECRET"), xstrdup("VERSION"), xstrdup("SEALED"), xstrdup("MISSING") };
	table_row(&t, head);
	size_t plain = 0, lacking = 0;
	for (size_t i = 0; i < f.nsecrets; i++) {
		const struct sealer_secret *s = &f.secrets[i];
		struct buf m = BUF_INIT;
		for (size_t k = 0; k < s->nmissing; k++)
			buf_printf(&m, "%s%s", k ? "," : "", s->missing[k]);
		char *row[] = { cell_text(s->name, 200), xasprintf("%llu", s->version), xstrdup(s->sealed ? "yes" : "no"),
				cell_text(m.len ? m.data : "-", MISSING_CELL_CHARS) };
		table_row(&t, row);
		buf_release(&m);
		plain += !s->sealed;
		lacking += s->nmissing > 0;
	}
	table_print(&t);
	table_release(&t);
	printf("%zu secret%s: %zu plaintext, %zu with wraps missing; sealed secrets %s", f.nsecrets,
	       f.nsecrets == 1 ? "" : "s", plain, lacking, f.sealed_secrets ? "required" : "not required");
	if (f.has_recovery)
		printf(", recovery key %s", f.rkid);
	printf(", %zu node key%s\n", f.n, f.n == 1 ? "" : "s");
	/* keys a relay registered could be the relay's own (trust on first use) */
	struct buf via = BUF_INIT;
	size_t nvia = 0;
	for (size_t i = 0; i < f.n; i++)
		if (f.nodes[i].via && f.nodes[i].via[0])
			buf_printf(&via, "%s%s (key %s, via %s)", nvia++ ? ", " : "", f.nodes[i].node, f.nodes[i].kid,
				   f.nodes[i].via);
	if (nvia)
		printf("%zu node key%s registered through a relay (check before sealing to %s): %s\n", nvia,
		       nvia == 1 ? "" : "s", nvia == 1 ? "it" : "them", via.data);
	buf_release(&via);
	size_t npending = status_pending(&ans.body);
	if (lacking)
		printf("run 'tetherctl secrets reseal --recovery-key FILE' to wrap them for the missing nodes\n");
	else if (npending)
		printf("once approved, run 'tetherctl secrets reseal --recovery-key FILE' to wrap the sealed secrets "
		       "for them\n");
	sealer_fleet_release(&f);
	buf_release(&ans.body);
	return CTL_EXIT_OK;
}

/* ---- secrets reseal ------------------------------------------------------------- */


/* Adds the wraps to each wanted secret of the plane's list (resources),
 * appending its batch entry to batch and a line for people to report.
 * What it cannot do for a secret is printed, naming it, why and what to
 * do, and counted in *failed; the others go on. Returns the number of
 * secrets resealed. */
static int reseal_all(const cJSON *list, const struct sealer_fleet *f, const struct strmap *wanted,
		      const struct sealer_recovery *r, struct buf *batch, struct buf *report, size_t *wraps,
		      size_t *failed)
{
	intptr_t v;
	int n = 0;
	char err[1024];
	for (const cJSON *e = list->child; e; e = e->next) {
		const char *name = json_get_string(e, "name");
		cJSON *body = cJSON_GetObjectItemCaseSensitive(e, "body");
		if (!name || !strmap_get(wanted, name, &v))
			continue;
		if (!envelope_is_sealed(body)) {
			ctl_error("%s: the plane's copy is not sealed (it changed since GET /v1/secrets): left alone; "
				  "run secrets reseal again", name);
			(*failed)++;
			continue;
		}
		/* sealed to a recovery key the plane no longer names: reseal
		 * cannot help (the plane refuses it), a new envelope can */
		const char *rk = json_get_string(cJSON_GetObjectItemCaseSensitive(body, "sealed"), "rk");
		if (f->has_recovery && rk && strcmp(rk, f->rkid) != 0) {
			char shown[KEY_ID_LEN + 1];
			snprintf(shown, sizeof(shown), "%s", rk);
			for (char *c = shown; *c; c++)
				if (!strchr("0123456789abcdef", *c))
					*c = '?';   /* the plane's text, checked before a terminal */
			ctl_error("%s: sealed to recovery key %s (not the plane's %s): seal it again (tetherctl put %s "
				  "--seal, or sync its plaintext); left alone", name, shown, f->rkid, name);
			(*failed)++;
			continue;
		}
		cJSON *added = cJSON_CreateArray();
		int k = sealer_add_wraps(body, name, f, r, added, err, sizeof(err));
		if (k < 0) {
			ctl_error("%s; left alone", err);
			(*failed)++;
		} else if (k == 0) {
			ctl_error("warning: %s: the plane lists missing wraps, but every node it reaches has one "
				  "(left alone)", name);
		} else {
			char *text = json_encode_canonical(body);
			buf_puts(batch, n ? ",{\"name\":" : "{\"name\":");
			buf_json_string(batch, name);
			buf_printf(batch, ",\"body\":%s}", text);
			free(text);
			buf_printf(report, "%s: wrapped for ", name);
			sealer_added_text(added, report);
			buf_putc(report, '\n');
			*wraps += (size_t)k;
			n++;
		}
		cJSON_Delete(added);
	}
	return n;
}

int cmd_secrets_reseal(const struct ctl_ctx *cx, int argc, char **argv)
{
	struct sealer_fleet f = { 0 };
	struct sealer_recovery r;
	struct client_answer ans = { 0, BUF_INIT, "" }, wrote = { 0, BUF_INIT, "" };
	struct buf batch = BUF_INIT, report = BUF_INIT;
	cJSON *doc = NULL;
	bool have_r;
	int rc = CTL_EXIT_FAILED;
	struct strmap wanted;
	(void)argc;
	(void)argv;
	memset(&r, 0, sizeof(r));
	if (!cx->recovery_key) {
		ctl_error("secrets reseal: --recovery-key FILE is needed (the recovery key's secret half opens the "
			  "data keys)");
		return CTL_EXIT_USAGE;
	}
	strmap_init(&wanted);
	if (recovery_from(cx, &r, &have_r) != 0)
		goto out;
	if (!r.has_secret) {
		ctl_error("secrets reseal: '%s' is a public key: give the recovery key's secret half", cx->recovery_key);
		goto out;
	}
	if (secrets_fetch(cx, &f) != 0)
		goto out;
	if (f.has_recovery && strcmp(f.rkid, r.kid) != 0) {
		ctl_error("secrets reseal: the plane's recovery key is %s, --recovery-key's is %s: give the plane's",
			  f.rkid, r.kid);
		goto out;
	}
	/* the secrets the plane lists as sealed with missing wraps */
	for (size_t i = 0; i < f.nsecrets; i++)
		if (f.secrets[i].sealed && f.secrets[i].nmissing > 0)
			strmap_put(&wanted, f.secrets[i].name, 1);
	if (!wanted.len) {
		printf("nothing to reseal: every sealed secret has a wrap for each node key it reaches\n");
		rc = CTL_EXIT_OK;
		goto out;
	}
	if (ctl_call(cx, "GET", "/v1/resources?prefix=secret%2F", NULL, 0, &ans) != 0)
		goto out;
	if (!(doc = ctl_answer_json(&ans)))
		goto out;
	uint64_t base;
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(doc, "resources");
	if (!json_get_u64(cJSON_GetObjectItemCaseSensitive(doc, "version"), &base) || !cJSON_IsArray(list)) {
		ctl_error("unexpected answer from the plane: no version or resources");
		goto out;
	}
	if (cx->base && parse_u64(cx->base, &base) < 0) {   /* ctl.c checked it */
		ctl_error("--base: '%s' is not a version", cx->base);
		goto out;
	}
	buf_printf(&batch, "{\"base\":%" PRIu64 ",\"message\":", base);
	buf_json_string(&batch, cx->message ? cx->message : "tetherctl secrets reseal");
	buf_puts(&batch, ",\"upserts\":[");
	size_t wraps = 0, failed = 0;
	int n = reseal_all(list, &f, &wanted, &r, &batch, &report, &wraps, &failed);
	if (n == 0) {
		if (failed)
			ctl_error("secrets reseal: %zu secret%s left alone (above): nothing was written", failed,
				  failed == 1 ? "" : "s");
		else
			printf("nothing to reseal\n");
		rc = failed ? CTL_EXIT_FAILED : CTL_EXIT_OK;
		goto out;
	}
	buf_puts(&batch, "],\"removes\":[]}");
	char refusal[2048];
	if (ctl_call_refusal(cx, "POST", "/v1/batch", batch.data, batch.len, &wrote, refusal, sizeof(refusal)) != 0) {
		if (wrote.status)
			ctl_error("%s", refusal);
		if (wrote.status == 409)
			ctl_error("the plane is no longer at version %" PRIu64 " (someone wrote in between): nothing was "
				  "written; run secrets reseal again", base);
		else if (wrote.status == 403)
			ctl_error("secrets reseal needs an admin token (--token-file or TETHER_TOKEN_FILE): nothing was written");
		else if (wrote.status == 422)
			ctl_error("the plane refused the reseal (HTTP 422): nothing was written; if a node registered a "
				  "key in between, run secrets reseal again");
		else if (wrote.status)
			ctl_error("the plane refused the reseal (HTTP %ld): nothing was written", wrote.status);
		goto out;
	}
	cJSON *vdoc = ctl_answer_json(&wrote);
	uint64_t v = 0;
	if (!vdoc || !json_get_u64(cJSON_GetObjectItemCaseSensitive(vdoc, "version"), &v)) {
		if (vdoc)
			ctl_error("unexpected answer from the plane: no version");
		cJSON_Delete(vdoc);
		goto out;
	}
	cJSON_Delete(vdoc);
	fwrite(report.data, 1, report.len, stdout);
	printf("version %" PRIu64 ": %d secret%s resealed, %zu wrap%s added (nothing re-encrypted)\n", v, n,
	       n == 1 ? "" : "s", wraps, wraps == 1 ? "" : "s");
	if (failed)
		ctl_error("secrets reseal: %zu secret%s left alone (above)", failed, failed == 1 ? "" : "s");
	rc = failed ? CTL_EXIT_FAILED : CTL_EXIT_OK;
out:
	cJSON_Delete(doc);
	buf_release(&ans.body);
	buf_release(&wrote.body);
	buf_release(&batch);
	buf_release(&report);
	strmap_release(&wanted);
	sealer_fleet_release(&f);
	sealer_recovery_forget(&r);
	return rc;
}

/* ---- secrets revoke ---------------------------------------------------------------- */

int cmd_secrets_revoke(const struct ctl_ctx *cx, int argc, char **argv)
{
	struct buf path = BUF_INIT;
	struct client_answer ans = { 0, BUF_INIT, "" };
	int rc = CTL_EXIT_FAILED;
	(void)argc;
	if (!resource_name_valid(argv[0])) {
		ctl_error("secrets revoke: '%s' is not a node ID ([A-Za-z0-9._-])", argv[0]);
		return CTL_EXIT_USAGE;
	}
	buf_puts(&path, "/v1/nodes/");
	client_escape(&path, argv[0], false);
	buf_puts(&path, "/key");
	if (ctl_call(cx, "DELETE", path.data, NULL, 0, &ans) != 0)
		goto out;
	if (cx->json) {
		print_raw(&ans);
		rc = CTL_EXIT_OK;
		goto out;
	}
	cJSON *doc = ctl_answer_json(&ans);
	if (!doc)
		goto out;
	const char *kid = json_get_string(doc, "key_id");
	if (!key_id_ok(kid))
		kid = NULL;   /* the plane's text never reaches the terminal unchecked */
	printf("node %s: key %s revoked: it can no longer register, and writes drop its wraps; the node "
	       "registers a new key with 'tetherd --rotate-key', then run 'tetherctl secrets reseal'\n",
	       argv[0], kid ? kid : "?");
	cJSON_Delete(doc);
	rc = CTL_EXIT_OK;
out:
	buf_release(&ans.body);
	buf_release(&path);
	return rc;
}

/* ---- secrets approve --------------------------------------------------------------- */

int cmd_secrets_approve(const struct ctl_ctx *cx, int argc, char **argv)
{
	struct buf path = BUF_INIT, body = BUF_INIT;
	struct client_answer ans = { 0, BUF_INIT, "" };
	char refusal[1024];
	int rc = CTL_EXIT_FAILED;
	(void)argc;
	if (!resource_name_valid(argv[0])) {
		ctl_error("secrets approve: '%s' is not a node ID ([A-Za-z0-9._-])", argv[0]);
		return CTL_EXIT_USAGE;
	}
	if (!key_id_ok(argv[1])) {
		ctl_error("secrets approve %s: '%s' is not a key id (%d lowercase hex digits, as 'tetherctl secrets "
			  "status' and tetherd's \"node key KID\" show it)", argv[0], argv[1], KEY_ID_LEN);
		return CTL_EXIT_USAGE;
	}
	buf_puts(&path, "/v1/nodes/");
	client_escape(&path, argv[0], false);
	buf_puts(&path, "/key/approve");
	buf_puts(&body, "{\"key_id\":");
	buf_json_string(&body, argv[1]);
	buf_putc(&body, '}');
	if (ctl_call_refusal(cx, "POST", path.data, body.data, body.len, &ans, refusal, sizeof(refusal)) != 0) {
		if (ans.status)
			ctl_error("secrets approve %s %s: %s", argv[0], argv[1], refusal);
		if (ans.status == 409)
			ctl_error("the plane refused the approval (HTTP 409): nothing was approved; 'tetherctl secrets "
				  "status' lists the keys waiting for approval");
		else if (ans.status == 403)
			ctl_error("secrets approve needs an admin token at the origin plane (not a relay): nothing was "
				  "approved");
		goto out;
	}
	if (cx->json) {
		print_raw(&ans);
		rc = CTL_EXIT_OK;
		goto out;
	}
	cJSON *doc = ctl_answer_json(&ans);
	if (!doc)
		goto out;
	const char *status = json_get_string(doc, "status");
	if (!status || strcmp(status, "approved") != 0) {
		ctl_error("unexpected answer from the plane: no \"status\":\"approved\"");
		cJSON_Delete(doc);
		goto out;
	}
	printf("node %s: key %s approved: run 'tetherctl secrets reseal --recovery-key FILE' to wrap the sealed "
	       "secrets for it\n", argv[0], argv[1]);
	cJSON_Delete(doc);
	rc = CTL_EXIT_OK;
out:
	buf_release(&ans.body);
	buf_release(&path);
	buf_release(&body);
	return rc;
}
