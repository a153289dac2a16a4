/* cmd_trust.c: tetherctl's trust commands: keygen (a signing key pair, or
 * sealed secrets' recovery key, made locally) and the plane's tokens
 * (create, ls, revoke). A token is printed once, on stdout, as one line:
 * the plane keeps only its hash. */
#include "buf.h"
#include "commands.h"
#include "ctl.h"
#include "json.h"
#include "keys.h"
#include "nodekey.h"
#include "output.h"
#include "request.h"
#include "xmalloc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int cmd_keygen(const struct ctl_ctx *cx, int argc, char **argv)
{
	char err[1024];
	(void)argc;
	if ((cx->recovery ? recovery_generate(argv[0], err, sizeof(err)) : keys_generate(argv[0], err, sizeof(err))) <
	    0) {
		ctl_error("keygen: %s", err);
		return CTL_EXIT_FAILED;
	}
	if (cx->recovery)
		printf("%s (recovery key, secret, mode 0600) and %s.pub written: keep %s offline; the plane takes "
		       "%s.pub (--sealed-secrets)\n", argv[0], argv[0], argv[0], argv[0]);
	else if (cx->approver)
		printf("%s (approver key, secret, mode 0600) and %s.pub written: nodes that require approvals list "
		       "%s.pub in their --approvers file; sign with tetherctl approve VERSION --key %s\n", argv[0],
		       argv[0], argv[0], argv[0]);
	else
		printf("%s (secret, mode 0600) and %s.pub written\n", argv[0], argv[0]);
	return CTL_EXIT_OK;
}

int cmd_token_create(const struct ctl_ctx *cx, int argc, char **argv)
{
	(void)argc;
	(void)argv;
	static const char usage[] = "usage: tetherctl [global options] token create --node ID | --role ROLE "
				    "[--name TEXT]\n";
	if ((cx->node != NULL) == (cx->role != NULL)) {
		fprintf(stderr, "tetherctl: token create: give either --node ID or --role admin|operator|reader|relay\n%s",
			usage);
		return CTL_EXIT_USAGE;
	}
	if (cx->role && strcmp(cx->role, "admin") != 0 && strcmp(cx->role, "operator") != 0 &&
	    strcmp(cx->role, "reader") != 0 && strcmp(cx->role, "relay") != 0) {
		fprintf(stderr, "tetherctl: token create: --role must be admin, operator, reader or relay\n%s", usage);
		return CTL_EXIT_USAGE;
	}
	struct buf body = BUF_INIT;
	buf_puts(&body, "{");
	buf_puts(&body, cx->node ? "\"node\":" : "\"role\":");
	buf_json_string(&body, cx->node ? cx->node : cx->role);
	if (cx->name) {
		buf_puts(&body, ",\"name\":");
		buf_json_string(&body, cx->name);
	}
	buf_puts(&body, "}");
	struct client_answer ans;
	int rc = CTL_EXIT_FAILED;
	if (ctl_call(cx, "POST", "/v1/tokens", body.data, body.len, &ans) != 0)
		goto out;
	if (cx->json) {
		print_raw(&ans);
		rc = CTL_EXIT_OK;
	} else {
		cJSON *doc = ctl_answer_json(&ans);
		const char *tok = doc ? json_get_string(doc, "token") : NULL;
		if (tok) {
			/* the only time anybody sees it: one line, nothing else */
			printf("%s\n", tok);
			rc = CTL_EXIT_OK;
		} else if (doc) {
			ctl_error("unexpected answer from the plane: no token");
		}
		cJSON_Delete(doc);
	}
	/* the answer held the token: do not leave it in freed memory */
	if (ans.body.data)
		memset(ans.body.data, 0, ans.body.len);
	buf_release(&ans.body);
out:
	buf_release(&body);
	return rc;
}

static char *time_cell(const cJSON *v)
{
	uint64_t t;
	if (!json_get_u64(v, &t) || t == 0)
		return xstrdup("-");
	return time_local_text((double)t);   /* local ISO 8601 */
}

int cmd_token_ls(const struct ctl_ctx *cx, int argc, char **argv)
{
	(void)argc;
	(void)argv;
	struct client_answer ans;
	if (ctl_call(cx, "GET", "/v1/tokens", NULL, 0, &ans) != 0)
		return CTL_EXIT_FAILED;
	int rc = CTL_EXIT_FAILED;
	cJSON *doc = NULL;
	if (cx->json) {
		print_raw(&ans);
		rc = CTL_EXIT_OK;
		goto out;
	}
	if (!(doc = ctl_answer_json(&ans)))
		goto out;
	if (!cJSON_IsArray(doc)) {
		ctl_error("unexpected answer from the plane: not a list of tokens");
		goto out;
	}
	struct table t = { 6, 0, NULL };
	char *head[] = { xstrdup("ID"), xstrdup("FOR"), xstrdup("NAME"), xstrdup("CREATED"), xstrdup("REVOKED"),
			 xstrdup("EXPIRES") };
	table_row(&t, head);
	for (const cJSON *e = doc->child; e; e = e->next) {
		const char *node = json_get_string(e, "node"), *role = json_get_string(e, "role");
		const char *id = json_get_string(e, "id"), *name = json_get_string(e, "name");
		/* a console session (tetherctl ui): a reader's token that expires */
		bool session = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "session"));
		char *row[6] = {
			cell_text(id ? id : "?", 40),
			node ? xasprintf("node %s", node) : session ? xstrdup("ui session") : xasprintf("%s", role ? role : "?"),
			cell_text(name && *name ? name : "-", 40),
			time_cell(cJSON_GetObjectItemCaseSensitive(e, "created")),
			time_cell(cJSON_GetObjectItemCaseSensitive(e, "revoked")),
			time_cell(cJSON_GetObjectItemCaseSensitive(e, "expires")),
		};
		char *cut = cell_text(row[1], 60);
		free(row[1]);
		row[1] = cut;
		table_row(&t, row);
	}
	table_print(&t);
	table_release(&t);
	rc = CTL_EXIT_OK;
out:
	cJSON_Delete(doc);
	buf_release(&ans.body);
	return rc;
}

int cmd_token_revoke(const struct ctl_ctx *cx, int argc, char **argv)
{
	(void)argc;
	struct buf path = BUF_INIT;
	buf_puts(&path, "/v1/tokens/");
	client_escape(&path, argv[0], false);
	struct client_answer ans;
	int rc = CTL_EXIT_FAILED;
	if (ctl_call(cx, "DELETE", path.data, NULL, 0, &ans) == 0) {
		printf("token %s revoked\n", argv[0]);
		buf_release(&ans.body);
		rc = CTL_EXIT_OK;
	}
	buf_release(&path);
	return rc;
}
