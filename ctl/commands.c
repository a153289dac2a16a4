/* commands.c: tetherctl's commands over resources, nodes, rollouts and
 * the local agent's status, one function each (see commands.h): build the
 * request, send it (request.c), print the answer for people (output.c) or
 * as the plane's raw JSON. The trust commands are in cmd_trust.c. */
#include "commands.h"
#include "buf.h"
#include "client.h"
#include "ctl.h"
#include "output.h"
#include "request.h"
#include "resource.h"
#include "rollout_gate.h"
#include "rollout_text.h"
#include "sealer.h"
#include "json.h"
#include "util.h"
#include "xmalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define STATUS_FILE_MAX ((size_t)16 << 20)
#define NACK_CELL_CHARS 48
#define LABELS_CELL_CHARS 60

static void resource_path(struct buf *path, const char *name)
{
	buf_puts(path, "/v1/resources/");
	client_escape(path, name, true);
}

/* ---- resources --------------------------------------------------------- */

/* put --dry-run: the body as a batch of one upsert, checked by the plane
 * (POST /v1/batch?dry_run=1: every check of the write, nothing stored).
 * 4 refused (the plane's reason printed), 3 would change, 0 the same. */
static int put_dry_run(const struct ctl_ctx *cx, const char *name, const char *body, size_t len)
{
	struct buf batch = BUF_INIT;
	struct client_answer ans = { 0, BUF_INIT, "" };
	char refusal[2048];
	int rc = CTL_EXIT_FAILED;
	buf_puts(&batch, "{\"upserts\":[{\"name\":");
	buf_json_string(&batch, name);
	buf_puts(&batch, ",\"body\":");
	buf_append(&batch, body, len);
	buf_puts(&batch, "}]}");
	int r = ctl_call_refusal(cx, "POST", "/v1/batch?dry_run=1", batch.data, batch.len, &ans, refusal,
				 sizeof(refusal));
	if (r < 0) {
		ctl_error("%s", refusal);
		ctl_error("the plane would refuse it (HTTP %ld): a put would store nothing", ans.status);
		rc = CTL_EXIT_REFUSED;
	}
	if (r != 0)
		goto out;
	cJSON *doc = ctl_answer_json(&ans);
	if (!doc)
		goto out;
	const cJSON *changes = cJSON_GetObjectItemCaseSensitive(doc, "changes");
	uint64_t v;
	if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(doc, "dry_run")) || !cJSON_IsArray(changes) ||
	    !json_get_u64(cJSON_GetObjectItemCaseSensitive(doc, "version"), &v)) {
		ctl_error("the plane does not know dry runs (an older plane?): nothing was checked there");
		cJSON_Delete(doc);
		goto out;
	}
	const char *frozen = json_get_string(doc, "frozen");
	if (frozen)
		printf("note: %s (a dry run is not refused by a freeze; the put would be)\n", frozen);
	const char *what = cJSON_GetArraySize(changes) ? json_get_string(changes->child, "change") : NULL;
	if (what) {
		printf("%s: would %s it against version %" PRIu64 " (every check passed; nothing was stored)\n", name,
		       what, v);
		rc = CTL_EXIT_CHANGES;
	} else {
		printf("nothing to do: %s matches the plane at version %" PRIu64 "\n", name, v);
		rc = CTL_EXIT_OK;
	}
	cJSON_Delete(doc);
out:
	if (resource_type_of(name) == RES_SECRET)
		sodium_memzero(batch.data, batch.cap);
	buf_release(&batch);
	buf_release(&ans.body);
	return rc;
}

int cmd_put(const struct ctl_ctx *cx, int argc, char **argv)
{
	struct buf path = BUF_INIT;
	struct client_answer ans = { 0, BUF_INIT, "" };
	size_t len;
	int rc = 1;
	if (cx->seal && cx->dry_run) {
		ctl_error("put: --dry-run does not go with --seal (each seal is a new envelope); check the sealed "
			  "file with 'sync --dry-run'");
		return CTL_EXIT_USAGE;
	}
	if (cx->seal)
		return cmd_put_sealed(cx, argc, argv);
	if (cx->recovery_key || cx->output) {
		ctl_error("put: %s goes with --seal", cx->recovery_key ? "--recovery-key" : "--output");
		return CTL_EXIT_USAGE;
	}
	/* a plaintext secret's text is wiped after use */
	bool secret = resource_type_of(argv[0]) == RES_SECRET;
	if (secret)
		sealer_no_dumps();
	char *body = secret ? ctl_read_json_object_secret(argc > 1 ? argv[1] : "-", "a resource body", &len)
			    : ctl_read_json_object(argc > 1 ? argv[1] : "-", "a resource body", &len);
	if (!body)
		goto fail;
	if (cx->dry_run) {
		rc = put_dry_run(cx, argv[0], body, len);
		goto fail;
	}
	resource_path(&path, argv[0]);
	if (ctl_call(cx, "PUT", path.data, body, len, &ans) != 0)
		goto fail;
	rc = ctl_print_version(cx, &ans);
fail:
	buf_release(&ans.body);
	buf_release(&path);
	if (body && secret)
		sodium_memzero(body, len);
	free(body);
	return rc;
}

int cmd_get(const struct ctl_ctx *cx, int argc, char **argv)
{
	struct buf path = BUF_INIT, out = BUF_INIT;
	struct client_answer ans = { 0, BUF_INIT, "" };
	cJSON *doc = NULL;
	char *text = NULL;
	int rc = 1;
	(void)argc;

	resource_path(&path, argv[0]);
	if (cx->at) {
		uint64_t at;
		if (parse_u64(cx->at, &at) < 0) {
			ctl_error("get: --at '%s' is not a version (a whole number)", cx->at);
			rc = CTL_EXIT_USAGE;
			goto fail;
		}
		buf_printf(&path, "?at=%" PRIu64, at);
	}
	if (ctl_call(cx, "GET", path.data, NULL, 0, &ans) != 0)
		goto fail;
	if (!(doc = ctl_answer_json(&ans)))
		goto fail;
	const cJSON *body = cJSON_GetObjectItemCaseSensitive(doc, "body");
	if (!cJSON_IsObject(body)) {
		ctl_error("unexpected answer from the plane: no body");
		goto fail;
	}
	text = cJSON_PrintUnformatted(body);
	if (!text) {
		ctl_error("cannot print the body of '%s'", argv[0]);
		goto fail;
	}
	json_pretty(&out, text);
	fwrite(out.data, 1, out.len, stdout);
	rc = 0;
fail:
	cJSON_free(text);
	cJSON_Delete(doc);
	buf_release(&out);
	buf_release(&ans.body);
	buf_release(&path);
	return rc;
}

int cmd_rm(const struct ctl_ctx *cx, int argc, char **argv)
{
	struct buf path = BUF_INIT;
	struct client_answer ans = { 0, BUF_INIT, "" };
	int rc = 1;
	(void)argc;

	resource_path(&path, argv[0]);
	if (ctl_call(cx, "DELETE", path.data, NULL, 0, &ans) != 0)
		goto fail;
	rc = ctl_print_version(cx, &ans);
fail:
	buf_release(&ans.body);
	buf_release(&path);
	return rc;
}

int cmd_ls(const struct ctl_ctx *cx, int argc, char **argv)
{
	struct buf path = BUF_INIT;
	struct client_answer ans = { 0, BUF_INIT, "" };
	cJSON *doc = NULL;
	int rc = 1;

	buf_puts(&path, "/v1/resources?bodies=0");
	if (argc > 0 && *argv[0]) {
		buf_puts(&path, "&prefix=");
		client_escape(&path, argv[0], true);
	}
	if (ctl_call(cx, "GET", path.data, NULL, 0, &ans) != 0)
		goto fail;
	if (cx->json) {
		print_raw(&ans);
		rc = 0;
		goto fail;
	}
	if (!(doc = ctl_answer_json(&ans)))
		goto fail;
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(doc, "resources");
	if (!cJSON_IsArray(list)) {
		ctl_error("unexpected answer from the plane: no resources");
		goto fail;
	}
	int width = 0;
	for (const cJSON *r = list->child; r; r = r->next) {
		const char *name = json_get_string(r, "name");
		if (name && (int)strlen(name) > width)
			width = (int)strlen(name);
	}
	for (const cJSON *r = list->child; r; r = r->next) {
		const char *name = json_get_string(r, "name");
		uint64_t v;
		if (!name || !json_get_u64(cJSON_GetObjectItemCaseSensitive(r, "version"), &v)) {
			ctl_error("unexpected answer from the plane: a resource without name or version");
			goto fail;
		}
		printf("%-*s %" PRIu64 "\n", width, name, v);
	}
	rc = 0;
fail:
	cJSON_Delete(doc);
	buf_release(&ans.body);
	buf_release(&path);
	return rc;
}

int cmd_apply(const struct ctl_ctx *cx, int argc, char **argv)
{
	struct client_answer ans = { 0, BUF_INIT, "" };
	size_t len;
	int rc = 1;
	(void)argc;
	char *body = ctl_read_json_object(argv[0], "a batch", &len);
	if (!body)
		goto fail;
	if (ctl_call(cx, "POST", "/v1/batch", body, len, &ans) != 0)
		goto fail;
	rc = ctl_print_version(cx, &ans);
fail:
	buf_release(&ans.body);
	free(body);
	return rc;
}

/* ---- nodes and rollouts ------------------------------------------------ */

/* A table cell of any value: value_text made one line and bounded. */
static char *value_cell(const cJSON *v)
{
	char *text = value_text(v);
	char *cell = cell_text(text, 200);
	free(text);
	return cell;
}

/* Where a node's live key came from: "-" direct or none, else the relays
 * it was registered through (whose holder could have made it). */
static char *via_cell(const cJSON *via)
{
	return cell_text(cJSON_IsString(via) && via->valuestring[0] ? via->valuestring : "-", 200);
}

/* the live key's id, else a pending one (--approve-relay-keys) as
 * "KID (pending)": no secret is sealed to it until an admin approves */
static char *key_cell(const cJSON *node)
{
	const cJSON *kid = cJSON_GetObjectItemCaseSensitive(node, "key_id");
	const cJSON *pending = cJSON_GetObjectItemCaseSensitive(node, "key_pending");
	if (!cJSON_IsString(kid) && cJSON_IsString(pending) && pending->valuestring[0]) {
		char *id = cell_text(pending->valuestring, 40);
		char *cell = xasprintf("%s (pending)", id);
		free(id);
		return cell;
	}
	return value_cell(kid);
}

static char *labels_cell(const cJSON *labels)
{
	struct buf b = BUF_INIT;
	for (const cJSON *l = labels ? labels->child : NULL; l; l = l->next) {
		char *v = value_text(l);
		buf_printf(&b, "%s%s=%s", b.len ? "," : "", l->string ? l->string : "?", v);
		free(v);
	}
	char *cell = cell_text(b.len ? b.data : "-", LABELS_CELL_CHARS);
	buf_release(&b);
	return cell;
}

static char *nack_cell(const cJSON *nack)
{
	if (!cJSON_IsObject(nack))
		return xstrdup("-");
	uint64_t v;
	const char *error = json_get_string(nack, "error");
	char *text = json_get_u64(cJSON_GetObjectItemCaseSensitive(nack, "version"), &v)
			     ? xasprintf("v%" PRIu64 ": %s", v, error ? error : "")
			     : xstrdup(error ? error : "?");
	char *cell = cell_text(text, NACK_CELL_CHARS);
	free(text);
	return cell;
}

/* "3", or "3 (lagging for 75 s)" when the plane flags the node: behind
 * its target for longer than the plane's --lag-alert. */
static char *lag_cell(const cJSON *node)
{
	char *lag = value_cell(cJSON_GetObjectItemCaseSensitive(node, "lag"));
	if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(node, "lagging")))
		return lag;
	uint64_t secs;
	char *cell;
	if (json_get_u64(cJSON_GetObjectItemCaseSensitive(node, "behind_seconds"), &secs)) {
		char *d = duration_text((double)secs);
		cell = xasprintf("%s (lagging for %s)", lag, d);
		free(d);
	} else {
		cell = xasprintf("%s (lagging)", lag);
	}
	free(lag);
	return cell;
}

int cmd_nodes(const struct ctl_ctx *cx, int argc, char **argv)
{
	struct client_answer ans = { 0, BUF_INIT, "" };
	struct table t = { 9, 0, NULL };
	cJSON *doc = NULL;
	int rc = 1;
	(void)argc;
	(void)argv;

	if (ctl_call(cx, "GET", "/v1/nodes", NULL, 0, &ans) != 0)
		goto fail;
	ctl_warn_stale(cx, &ans);
	if (cx->json) {
		print_raw(&ans);
		rc = 0;
		goto fail;
	}
	if (!(doc = ctl_answer_json(&ans)))
		goto fail;
	if (!cJSON_IsArray(doc)) {
		ctl_error("unexpected answer from the plane: nodes are not a list");
		goto fail;
	}
	char *head[] = { xstrdup("NODE"), xstrdup("TARGET"), xstrdup("ACKED"), xstrdup("LAG"), xstrdup("CONNECTED"),
			 xstrdup("KEY"), xstrdup("VIA"), xstrdup("LAST NACK"), xstrdup("LABELS") };
	table_row(&t, head);
	for (const cJSON *n = doc->child; n; n = n->next) {
		const char *id = json_get_string(n, "node");
		char *row[] = {
			cell_text(id ? id : "?", 200),
			value_cell(cJSON_GetObjectItemCaseSensitive(n, "target_version")),
			value_cell(cJSON_GetObjectItemCaseSensitive(n, "acked_version")),
			lag_cell(n),
			value_cell(cJSON_GetObjectItemCaseSensitive(n, "connected")),
			key_cell(n),
			via_cell(cJSON_GetObjectItemCaseSensitive(n, "key_via")),
			nack_cell(cJSON_GetObjectItemCaseSensitive(n, "last_nack")),
			labels_cell(cJSON_GetObjectItemCaseSensitive(n, "labels")),
		};
		table_row(&t, row);
	}
	table_print(&t);
	rc = 0;
fail:
	table_release(&t);
	cJSON_Delete(doc);
	buf_release(&ans.body);
	return rc;
}

/* Prints a rollout answer as "label: value" lines (or raw with --json). */
static int print_rollout(const struct ctl_ctx *cx, const struct client_answer *ans)
{
	struct fields f = { 0, NULL, NULL };
	if (cx->json) {
		print_raw(ans);
		return 0;
	}
	cJSON *doc = ctl_answer_json(ans);
	if (!doc)
		return 1;
	/* the traffic gates' comparison: a table of its own after the fields */
	cJSON *gate = cJSON_IsObject(doc) ? cJSON_DetachItemFromObjectCaseSensitive(doc, "gate") : NULL;
	if (cJSON_IsObject(doc))
		rollout_text_fields(&f, doc);
	else
		fields_add(&f, "answer", value_text(doc));
	fields_print_release(&f);
	if (gate) {
		putchar('\n');
		print_rollout_gate(gate);
	}
	cJSON_Delete(gate);
	cJSON_Delete(doc);
	return 0;
}

int cmd_rollout_status(const struct ctl_ctx *cx, int argc, char **argv)
{
	struct client_answer ans = { 0, BUF_INIT, "" };
	int rc = 1;
	(void)argc;
	(void)argv;
	if (ctl_call(cx, "GET", "/v1/rollouts/current", NULL, 0, &ans) == 0)
		rc = print_rollout(cx, &ans);
	buf_release(&ans.body);
	if (!cx->json)
		ctl_print_freeze_line(cx);   /* "frozen until TIME by WHO: MESSAGE" while one holds */
	return rc;
}

int cmd_rollout_abort(const struct ctl_ctx *cx, int argc, char **argv)
{
	struct client_answer ans = { 0, BUF_INIT, "" };
	int rc = 1;
	(void)argc;
	(void)argv;
	if (ctl_call(cx, "POST", "/v1/rollouts/current/abort", NULL, 0, &ans) == 0)
		rc = print_rollout(cx, &ans);
	buf_release(&ans.body);
	return rc;
}

/* ---- the local agent --------------------------------------------------- */

/* "2026-12-06T05:12:03+01:00 (12 s ago)" (local time) from epoch seconds or milliseconds;
 * strings are shown as they are. */
static char *sync_time_text(const cJSON *v)
{
	if (!v || cJSON_IsNull(v) || (cJSON_IsNumber(v) && v->valuedouble <= 0))
		return xstrdup("never");
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble > 1e15)
		return value_text(v);
	double d = v->valuedouble;
	return time_and_ago_text(d > 1e11 ? d / 1000 : d);   /* 1e11 s is year 5138 */
}

static const struct known_field status_fields[] = {
	{ "node", "node" }, { "version", "version" }, { "state", "state" },
	{ "last_error", "last error" }, { "last_sync", "last sync" },
};

int cmd_status(const struct ctl_ctx *cx, int argc, char **argv)
{
	struct fields f = { 0, NULL, NULL };
	char err[512];
	cJSON *doc = NULL;
	size_t len;
	int rc = 1;
	(void)argc;
	(void)argv;

	const char *dir = cx->state_dir ? cx->state_dir : CTL_DEFAULT_STATE_DIR;
	char *path = xasprintf("%s/status.json", dir);
	char *text = read_file_limited(path, STATUS_FILE_MAX, &len);
	if (!text) {
		if (errno == ENOENT)
			ctl_error("cannot read '%s': %s (is tetherd running with --state-dir %s?)", path,
				  strerror(errno), dir);
		else
			ctl_error("cannot read '%s': %s", path, strerror(errno));
		goto fail;
	}
	struct json_limits lim = { STATUS_FILE_MAX, CTL_JSON_DEPTH };
	doc = json_decode(text, len, &lim, err, sizeof(err));
	if (!doc || !cJSON_IsObject(doc)) {
		ctl_error("'%s': %s", path, doc ? "not a JSON object" : err);
		goto fail;
	}
	if (cx->json) {
		fwrite(text, 1, len, stdout);
		if (!len || text[len - 1] != '\n')
			putchar('\n');
		rc = 0;
		goto fail;
	}
	/* the agent's raw values, made readable before printing */
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(doc, "last_error");
	if (e && (cJSON_IsNull(e) || (cJSON_IsString(e) && !*e->valuestring)))
		cJSON_ReplaceItemInObjectCaseSensitive(doc, "last_error", cJSON_CreateString("none"));
	/* times (epoch seconds or milliseconds) as local ISO 8601 and how long ago */
	cJSON *times = cJSON_CreateObject();
	for (const cJSON *m = doc->child; m; m = m->next) {
		size_t kl = strlen(m->string);
		bool is_time = strcmp(m->string, "last_sync") == 0 || strcmp(m->string, "started") == 0 ||
			       (kl > 3 && strcmp(m->string + kl - 3, "_at") == 0) ||
			       (kl > 5 && strcmp(m->string + kl - 5, "_time") == 0) || strcmp(m->string, "since") == 0;
		if (is_time && (cJSON_IsNumber(m) || cJSON_IsNull(m))) {
			char *when = sync_time_text(m);
			cJSON_AddStringToObject(times, m->string, when);
			free(when);
		}
	}
	for (const cJSON *t = times->child; t; t = t->next)
		cJSON_ReplaceItemInObjectCaseSensitive(doc, t->string, cJSON_CreateString(t->valuestring));
	cJSON_Delete(times);
	fields_from(&f, doc, status_fields, sizeof(status_fields) / sizeof(status_fields[0]));
	fields_print_release(&f);
	rc = 0;
fail:
	cJSON_Delete(doc);
	free(text);
	free(path);
	return rc;
}
