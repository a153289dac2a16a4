/* cmd_ui.c: tetherctl ui [--ttl DURATION] [--open]: asks the plane for a
 * short-lived, read-only console session (POST /v1/ui/session) and prints
 * one line, the link that opens the console with it: PLANE/ui/#s=TOKEN.
 * The token rides in the URL's fragment, which a browser never sends, so
 * no server or proxy log holds it. --open hands it to $BROWSER, or
 * xdg-open, in a private page (open_page.h), never on a command line. */
#include "commands.h"
#include "ctl.h"
#include "freeze.h"
#include "json.h"
#include "open_page.h"
#include "output.h"
#include "request.h"
#include "xmalloc.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* --ttl: seconds ("900"), or a duration (15m, 2h, 1d, 1h30m). */
static int parse_ttl(const char *s, int64_t *out)
{
	char err[256];
	if (!s || !*s || strchr(s, '-'))
		return -1;
	if (strspn(s, "0123456789") == strlen(s)) {
		if (strlen(s) > 9)
			return -1;
		*out = strtoll(s, NULL, 10);
		return 0;
	}
	return freeze_parse_time(s, 0, out, err, sizeof(err));
}

/* Hands link to $BROWSER (one command word) or xdg-open, through a
 * private page (open_page.h): never on a command line, which every local
 * user can read. 0 when the opener exited 0. */
static int open_link(const char *link)
{
	const char *opener = getenv("BROWSER");
	char err[512];
	if (!opener || !*opener)
		opener = "xdg-open";
	if (open_page_link(opener, link, err, sizeof(err)) < 0) {
		ctl_error("ui: %s (open the link above yourself)", err);
		return -1;
	}
	return 0;
}

/* The link: this --plane's URL (a path behind a proxy kept) when it names
 * one plane, else the plane's own answer. New allocated, or NULL. */
static char *link_for(const struct ctl_ctx *cx, const cJSON *doc, const char *token)
{
	char *urls[CLIENT_MAX_PLANES], err[256];
	int n = client_planes(cx->plane, urls, err, sizeof(err));
	char *link = NULL;
	if (n == 1) {
		link = xasprintf("%s/ui/#s=%s", urls[0], token);
	} else {
		const char *u = json_get_string(doc, "url");
		if (u && (strncmp(u, "http://", 7) == 0 || strncmp(u, "https://", 8) == 0))
			link = xstrdup(u);
	}
	if (n > 0)
		client_planes_free(urls, n);
	return link;
}

int cmd_ui(const struct ctl_ctx *cx, int argc, char **argv)
{
	(void)argc;
	(void)argv;
	char body[64] = "{}";
	if (cx->ttl) {
		int64_t ttl;
		if (parse_ttl(cx->ttl, &ttl) < 0) {
			fprintf(stderr, "tetherctl: ui: --ttl '%.64s': give seconds or a duration (15m, 2h, 1d), between 1m "
				"and 1d\nusage: tetherctl [global options] ui [--ttl DURATION] [--open] [--json]\n", cx->ttl);
			return CTL_EXIT_USAGE;
		}
		snprintf(body, sizeof(body), "{\"ttl\":%lld}", (long long)ttl);
	}
	struct client_answer ans;
	if (ctl_call(cx, "POST", "/v1/ui/session", body, strlen(body), &ans) != 0)
		return CTL_EXIT_FAILED;
	int rc = CTL_EXIT_FAILED;
	cJSON *doc = NULL;
	char *link = NULL;
	if (cx->json) {
		print_raw(&ans);
		rc = CTL_EXIT_OK;
		goto out;
	}
	doc = ctl_answer_json(&ans);
	const char *tok = doc ? json_get_string(doc, "token") : NULL;
	if (!tok) {
		if (doc)
			ctl_error("unexpected answer from the plane: no session token");
		goto out;
	}
	if (!(link = link_for(cx, doc, tok))) {
		ctl_error("ui: the plane gave no link; open /ui/ on it and give the token by hand");
		goto out;
	}
	printf("%s\n", link);
	fflush(stdout);
	const cJSON *exp = cJSON_GetObjectItemCaseSensitive(doc, "expires");
	if (cJSON_IsNumber(exp)) {
		time_t t = (time_t)exp->valuedouble;
		struct tm tm;
		char when[64];
		if (localtime_r(&t, &tm) && strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S%z", &tm)) {
			size_t l = strlen(when);   /* +0100 -> +01:00 */
			if (l > 2 && l + 1 < sizeof(when)) {
				memmove(when + l - 1, when + l - 2, 3);
				when[l - 2] = ':';
			}
			fprintf(stderr, "tetherctl: a read-only console session until %s; the link holds it "
				"(in its #fragment, which browsers never send): share it as you would a token\n", when);
		}
	}
	rc = cx->open && open_link(link) < 0 ? CTL_EXIT_FAILED : CTL_EXIT_OK;
out:
	if (link) {
		sodium_memzero(link, strlen(link));
		free(link);
	}
	cJSON_Delete(doc);
	/* the answer held the token: do not leave it in freed memory */
	if (ans.body.data)
		sodium_memzero(ans.body.data, ans.body.len);
	buf_release(&ans.body);
	return rc;
}
