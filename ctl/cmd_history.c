/* cmd_history.c: tetherctl's commands over the plane's version log: log
 * (who, when, why, what), show (one version's changes), diff (two
 * versions), revert (the state of a version as a new one). Changes print
 * as line diffs of the re-indented bodies. */
#include "commands.h"
#include "buf.h"
#include "client.h"
#include "ctl.h"
#include "output.h"
#include "request.h"
#include "json.h"
#include "util.h"
#include "xmalloc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Above this many line pairs a change prints as all minus then all plus. */
#define DIFF_CELLS_MAX ((size_t)4 << 20)

static int parse_version_arg(const char *s, const char *what, uint64_t *v)
{
	if (parse_u64(s, v) < 0) {
		ctl_error("%s: '%s' is not a version (a whole number)", what, s);
		return -1;
	}
	return 0;
}

/* The lines of a body re-indented (NULL body: no lines). */
static char **body_lines(const cJSON *body, size_t *n)
{
	*n = 0;
	if (!body || cJSON_IsNull(body))
		return NULL;
	char *text = cJSON_PrintUnformatted(body);
	struct buf out = BUF_INIT;
	json_pretty(&out, text ? text : "null");
	cJSON_free(text);
	char **lines = NULL;
	for (char *l = out.data; l && *l;) {
		size_t len = strcspn(l, "\n");
		lines = xrealloc(lines, (*n + 1) * sizeof(*lines));
		lines[(*n)++] = xstrndup(l, len);
		l += len + (l[len] == '\n');
	}
	buf_release(&out);
	return lines;
}

static void lines_free(char **l, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(l[i]);
	free(l);
}

/* Prints a line diff of a and b ("  ", "- ", "+ "), by their longest
 * common subsequence. */
static void print_line_diff(char **a, size_t na, char **b, size_t nb)
{
	if ((na + 1) * (nb + 1) > DIFF_CELLS_MAX) {
		for (size_t i = 0; i < na; i++)
			printf("- %s\n", a[i]);
		for (size_t j = 0; j < nb; j++)
			printf("+ %s\n", b[j]);
		return;
	}
	/* lcs[i][j]: of a[i..] and b[j..] */
	size_t w = nb + 1;
	unsigned *lcs = xcalloc((na + 1) * w, sizeof(*lcs));
	for (size_t i = na; i-- > 0;)
		for (size_t j = nb; j-- > 0;)
			lcs[i * w + j] = strcmp(a[i], b[j]) == 0 ? lcs[(i + 1) * w + j + 1] + 1 :
				lcs[(i + 1) * w + j] > lcs[i * w + j + 1] ? lcs[(i + 1) * w + j] : lcs[i * w + j + 1];
	size_t i = 0, j = 0;
	while (i < na || j < nb) {
		if (i < na && j < nb && strcmp(a[i], b[j]) == 0) {
			printf("  %s\n", a[i]);
			i++;
			j++;
		} else if (i < na && (j == nb || lcs[(i + 1) * w + j] >= lcs[i * w + j + 1])) {
			printf("- %s\n", a[i++]);
		} else {
			printf("+ %s\n", b[j++]);
		}
	}
	free(lcs);
}

/* One change {"name","before","after"}: a header and the line diff. */
static void print_change(const cJSON *ch, const char *from, const char *to)
{
	const char *name = json_get_string(ch, "name");
	const cJSON *before = cJSON_GetObjectItemCaseSensitive(ch, "before");
	const cJSON *after = cJSON_GetObjectItemCaseSensitive(ch, "after");
	bool had = before && !cJSON_IsNull(before), has = after && !cJSON_IsNull(after);
	char *shown = cell_text(name ? name : "?", 300);
	printf("%s %s\n", had ? (has ? "changed" : "removed") : "added", shown);
	printf("--- %s %s\n+++ %s %s\n", shown, from, shown, to);
	free(shown);
	size_t na, nb;
	char **a = body_lines(before, &na), **b = body_lines(after, &nb);
	print_line_diff(a, na, b, nb);
	lines_free(a, na);
	lines_free(b, nb);
}

/* A version's time as local ISO 8601 (with how long ago: show). */
static char *time_text(const cJSON *t, bool ago)
{
	uint64_t v;
	if (!json_get_u64(t, &v))
		return xstrdup("-");
	return ago ? time_and_ago_text((double)v) : time_local_text((double)v);
}

static char *names_text(const cJSON *names)
{
	char *t = value_text(names);
	char *cell = cell_text(t, 80);
	free(t);
	return cell;
}

/* A version's override of the guards ({"passed","reason"}), for people:
 * "REASON; passed guard/a, guard/b" (new allocated), or NULL. */
static char *override_text(const cJSON *o)
{
	if (!cJSON_IsObject(o))
		return NULL;
	const char *reason = json_get_string(o, "reason");
	struct buf b = BUF_INIT;
	buf_printf(&b, "%s; passed ", reason ? reason : "-");
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "passed");
	int n = 0;
	for (const cJSON *g = cJSON_IsArray(p) ? p->child : NULL; g; g = g->next)
		if (cJSON_IsString(g))
			buf_printf(&b, "%s%s", n++ ? ", " : "", g->valuestring);
	if (!n)
		buf_puts(&b, "(none crossed)");
	return buf_detach(&b, NULL);
}

int cmd_log(const struct ctl_ctx *cx, int argc, char **argv)
{
	struct buf path = BUF_INIT;
	struct client_answer ans = { 0, BUF_INIT, "" };
	cJSON *doc = NULL;
	struct table t = { 6, 0, NULL };
	int rc = 1;
	uint64_t limit = 20;
	if (cx->limit && (parse_u64(cx->limit, &limit) < 0 || limit < 1 || limit > 10000)) {
		ctl_error("log: -n must be a whole number in 1..10000");
		return CTL_EXIT_USAGE;
	}
	buf_printf(&path, "/v1/history?limit=%" PRIu64, limit);
	if (argc > 0) {
		buf_puts(&path, "&name=");
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
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(doc, "versions");
	if (!cJSON_IsArray(list)) {
		ctl_error("unexpected answer from the plane: no versions");
		goto fail;
	}
	/* a column for approvals when some node requires them (cmd_approve.c) */
	bool approvals = false;
	for (const cJSON *v = list->child; v; v = v->next)
		approvals = approvals || cJSON_GetObjectItemCaseSensitive(v, "approvals");
	t.ncols = approvals ? 7 : 6;
	char *head[] = { xstrdup("VERSION"), xstrdup("TIME"), xstrdup("AUTHOR"), xstrdup("MESSAGE"),
			 xstrdup("NAMES"), xstrdup("REVERTED BY"), approvals ? xstrdup("APPROVALS") : NULL };
	table_row(&t, head);
	for (const cJSON *v = list->child; v; v = v->next) {
		uint64_t ver, rb = 0;
		if (!json_get_u64(cJSON_GetObjectItemCaseSensitive(v, "version"), &ver)) {
			ctl_error("unexpected answer from the plane: a version without its number");
			goto fail;
		}
		json_get_u64(cJSON_GetObjectItemCaseSensitive(v, "reverted_by"), &rb);
		const char *author = json_get_string(v, "author"), *msg = json_get_string(v, "message");
		/* an override of the guards shows beside the message */
		char *ov = override_text(cJSON_GetObjectItemCaseSensitive(v, "override"));
		const char *m = msg && *msg ? msg : "-";
		/* an emergency revert (revert --now) is marked "! " */
		const char *em = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(v, "emergency")) ? "! " : "";
		char *mcell = ov ? xasprintf("%s%s [override: %s]", em, m, ov) : xasprintf("%s%s", em, m);
		free(ov);
		char *row[] = {
			xasprintf("%" PRIu64, ver), time_text(cJSON_GetObjectItemCaseSensitive(v, "time"), false),
			cell_text(author && *author ? author : "-", 60), cell_text(mcell, 120),
			names_text(cJSON_GetObjectItemCaseSensitive(v, "names")),
			rb ? xasprintf("%" PRIu64, rb) : xstrdup("-"), NULL,
		};
		if (approvals) {
			char *at = cmd_approve_log_text(v);
			row[6] = at ? at : xstrdup("-");
		}
		table_row(&t, row);
		free(mcell);
	}
	table_print(&t);
	rc = 0;
fail:
	table_release(&t);
	cJSON_Delete(doc);
	buf_release(&ans.body);
	buf_release(&path);
	return rc;
}

int cmd_show(const struct ctl_ctx *cx, int argc, char **argv)
{
	struct buf path = BUF_INIT;
	struct client_answer ans = { 0, BUF_INIT, "" };
	cJSON *doc = NULL;
	int rc = 1;
	uint64_t v;
	(void)argc;
	if (parse_version_arg(argv[0], "show", &v) < 0)
		return CTL_EXIT_USAGE;
	buf_printf(&path, "/v1/history/%" PRIu64, v);
	if (ctl_call(cx, "GET", path.data, NULL, 0, &ans) != 0)
		goto fail;
	if (cx->json) {
		print_raw(&ans);
		rc = 0;
		goto fail;
	}
	if (!(doc = ctl_answer_json(&ans)))
		goto fail;
	const cJSON *changes = cJSON_GetObjectItemCaseSensitive(doc, "changes");
	if (!cJSON_IsArray(changes)) {
		ctl_error("unexpected answer from the plane: no changes");
		goto fail;
	}
	struct fields f = { 0 };
	static const struct known_field known[] = {
		{ "version", "version" }, { "author", "author" }, { "time", "time" }, { "message", "message" },
		{ "names", "names" }, { "reverted_by", "reverted by" }, { "override", "override" },
		{ "emergency", "emergency" },
	};
	cJSON *shown = cJSON_Duplicate(doc, true);
	char *ov = override_text(cJSON_GetObjectItemCaseSensitive(shown, "override"));
	if (ov)
		cJSON_ReplaceItemInObjectCaseSensitive(shown, "override", cJSON_CreateString(ov));
	free(ov);
	cJSON_DeleteItemFromObjectCaseSensitive(shown, "changes");
	uint64_t rb = 0;
	if (json_get_u64(cJSON_GetObjectItemCaseSensitive(shown, "reverted_by"), &rb) && !rb)
		cJSON_ReplaceItemInObjectCaseSensitive(shown, "reverted_by", cJSON_CreateString("-"));
	char *at = cmd_approve_log_text(shown);   /* "approvals: pending approval 1/2 (...)" */
	cJSON_DeleteItemFromObjectCaseSensitive(shown, "approvals_needed");
	if (at)
		cJSON_ReplaceItemInObjectCaseSensitive(shown, "approvals", cJSON_CreateString(at));
	free(at);
	cJSON *t = cJSON_GetObjectItemCaseSensitive(shown, "time");
	if (t) {
		char *tt = time_text(t, true);
		cJSON_ReplaceItemInObjectCaseSensitive(shown, "time", cJSON_CreateString(tt));
		free(tt);
	}
	fields_from(&f, shown, known, sizeof(known) / sizeof(known[0]));
	cJSON_Delete(shown);
	fields_print_release(&f);
	char from[32], to[32];
	snprintf(from, sizeof(from), "@%" PRIu64, v ? v - 1 : 0);
	snprintf(to, sizeof(to), "@%" PRIu64, v);
	for (const cJSON *ch = changes->child; ch; ch = ch->next) {
		putchar('\n');
		print_change(ch, from, to);
	}
	rc = 0;
fail:
	cJSON_Delete(doc);
	buf_release(&ans.body);
	buf_release(&path);
	return rc;
}

int cmd_diff(const struct ctl_ctx *cx, int argc, char **argv)
{
	struct buf path = BUF_INIT;
	struct client_answer ans = { 0, BUF_INIT, "" };
	cJSON *doc = NULL;
	int rc = 1;
	uint64_t a, b;
	(void)argc;
	if (parse_version_arg(argv[0], "diff", &a) < 0 || parse_version_arg(argv[1], "diff", &b) < 0)
		return CTL_EXIT_USAGE;
	buf_printf(&path, "/v1/diff?from=%" PRIu64 "&to=%" PRIu64, a, b);
	if (ctl_call(cx, "GET", path.data, NULL, 0, &ans) != 0)
		goto fail;
	if (cx->json) {
		print_raw(&ans);
		rc = 0;
		goto fail;
	}
	if (!(doc = ctl_answer_json(&ans)))
		goto fail;
	const cJSON *changes = cJSON_GetObjectItemCaseSensitive(doc, "changes");
	if (!cJSON_IsArray(changes)) {
		ctl_error("unexpected answer from the plane: no changes");
		goto fail;
	}
	char from[32], to[32];
	snprintf(from, sizeof(from), "@%" PRIu64, a);
	snprintf(to, sizeof(to), "@%" PRIu64, b);
	bool first = true;
	for (const cJSON *ch = changes->child; ch; ch = ch->next) {
		if (!first)
			putchar('\n');
		first = false;
		print_change(ch, from, to);
	}
	rc = 0;
fail:
	cJSON_Delete(doc);
	buf_release(&ans.body);
	buf_release(&path);
	return rc;
}

int cmd_revert(const struct ctl_ctx *cx, int argc, char **argv)
{
	struct client_answer ans = { 0, BUF_INIT, "" };
	struct buf body = BUF_INIT;
	int rc = 1;
	uint64_t v;
	(void)argc;
	if (parse_version_arg(argv[0], "revert", &v) < 0)
		return CTL_EXIT_USAGE;
	buf_printf(&body, "{\"version\":%" PRIu64, v);
	if (cx->now)   /* an emergency revert: every node at once */
		buf_puts(&body, ",\"now\":true");
	if (cx->message) {
		buf_puts(&body, ",\"message\":");
		buf_json_string(&body, cx->message);
	}
	buf_putc(&body, '}');
	/* the message goes in the body: no X-Tether-Message for this one */
	struct ctl_ctx plain = *cx;
	plain.message = NULL;
	if (ctl_call(&plain, "POST", "/v1/revert", body.data, body.len, &ans) != 0)
		goto fail;
	rc = ctl_print_version(cx, &ans);
fail:
	buf_release(&ans.body);
	buf_release(&body);
	return rc;
}
