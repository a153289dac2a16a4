/* request.c: one request of tetherctl to the plane, with the credentials
 * the command line and the environment give, tried on each plane of
 * --plane A,B in turn while client_try_next allows, the parsing of its
 * JSON answers, and reading a JSON object to send (see request.h). */
#include "request.h"
#include "credentials.h"
#include "ctl.h"
#include "json.h"
#include "log.h"
#include "output.h"
#include "sealer.h"
#include "xmalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int ctl_planes(const struct ctl_ctx *cx, char **urls, char **token, struct credentials *cr)
{
	char err[1024];
	*token = NULL;
	int n = client_planes(cx->plane, urls, err, sizeof(err));
	if (n < 0) {
		ctl_error("--plane: %s", err);
		return -1;
	}
	if (cx->token_file && !(*token = credentials_read_token(cx->token_file, err, sizeof(err)))) {
		ctl_error("%s", err);
		client_planes_free(urls, n);
		return -1;
	}
	if ((cx->cert == NULL) != (cx->key == NULL)) {
		ctl_error("--cert and --key go together (a client certificate and its key)");
		credentials_forget(*token);
		*token = NULL;
		client_planes_free(urls, n);
		return -1;
	}
	*cr = (struct credentials){ cx->ca_file, cx->cert, cx->key, *token };
	return n;
}

/* One request to the plane. Returns 0 with the answer (release its body),
 * or 1 after printing why it failed: with several planes, why each one
 * tried failed. */
static int call(const struct ctl_ctx *cx, const char *method, const char *path, const char *body,
		size_t body_len, struct client_answer *ans, char *refusal, size_t refusal_len)
{
	char *token = NULL;
	char *urls[CLIENT_MAX_PLANES];
	int n = 0, rc = 1;
	struct buf failures = BUF_INIT;   /* of the planes passed over */
	struct client_answer kept = { 0, BUF_INIT, "" };   /* a stale plane's answer, while others are asked */
	int kept_plane = 0;

	buf_init(&ans->body);
	ans->status = 0;
	struct credentials cr;
	if ((n = ctl_planes(cx, urls, &token, &cr)) < 0) {
		n = 0;
		goto out;
	}
	for (int i = 0; i < n; i++) {
		struct client *c = client_new(urls[i], &cr);
		if (!c) {
			ctl_error("cannot set up an HTTP client (libcurl)");
			break;
		}
		if (cx->message) {
			char *h = xasprintf("X-Tether-Message: %s", cx->message);
			client_set_header(c, h);
			free(h);
		}
		if (cx->override) {
			char *h = xasprintf("X-Tether-Override: %s", cx->override);
			client_set_header(c, h);
			free(h);
		}
		if (client_request(c, method, path, body, body_len, ans) == 0) {
			client_free(c);
			rc = 0;
			/* a stale plane's view (Tether-Stale) is judged against an old
			 * version: a read goes on to the next plane listed, and takes
			 * its answer when it is current (else the first one's) */
			if (ans->stale[0] && i + 1 < n && strcmp(method, "GET") == 0) {
				if (!kept.status) {
					kept = *ans;
					kept_plane = i;
				} else {
					buf_release(&ans->body);
				}
				log_info("%s is stale (%s); asking %s", urls[i], ans->stale, urls[i + 1]);
				buf_init(&ans->body);
				rc = 1;   /* until another answers */
				continue;
			}
			if (kept.status && ans->stale[0]) {
				buf_release(&ans->body);   /* every one stale: the first's answer, and its warning */
				*ans = kept;
				kept.status = 0;
			} else if (kept.status) {
				fprintf(stderr, "tetherctl: %s is stale; answered by %s, which is current\n", urls[kept_plane],
					urls[i]);
				buf_release(&kept.body);
				kept.status = 0;
			}
			break;
		}
		bool unsure;
		bool next = client_try_next(c, method, &unsure);
		if (next && i + 1 < n) {
			log_info("%s; trying %s", client_error(c), urls[i + 1]);
			buf_printf(&failures, "%s\n", client_error(c));
			buf_release(&ans->body);
			client_free(c);
			continue;
		}
		if (refusal && ans->status) {
			/* the plane refused: the caller words it */
			snprintf(refusal, refusal_len, "%s", client_error(c));
			client_free(c);
			rc = -1;
			break;
		}
		/* every plane tried has its say, in order */
		for (const char *l = failures.data; l && *l;) {
			size_t len = strcspn(l, "\n");
			ctl_error("%.*s", (int)len, l);
			l += len + (l[len] == '\n');
		}
		ctl_error("%s", client_error(c));
		if (unsure && i + 1 < n)
			ctl_error("not sent to %s: the plane at %s may have done it already (look before you retry)",
				  urls[i + 1], urls[i]);
		buf_release(&ans->body);
		client_free(c);
		break;
	}
out:
	if (kept.status && rc != 0) {
		/* the next planes failed: the stale one's answer, warned about */
		buf_release(&ans->body);
		*ans = kept;
		rc = 0;
	} else if (kept.status) {
		buf_release(&kept.body);
	}
	buf_release(&failures);
	client_planes_free(urls, n);
	credentials_forget(token);
	return rc;
}

int ctl_call(const struct ctl_ctx *cx, const char *method, const char *path, const char *body,
	     size_t body_len, struct client_answer *ans)
{
	return call(cx, method, path, body, body_len, ans, NULL, 0);
}

int ctl_call_refusal(const struct ctl_ctx *cx, const char *method, const char *path, const char *body,
		     size_t body_len, struct client_answer *ans, char *refusal, size_t refusal_len)
{
	return call(cx, method, path, body, body_len, ans, refusal, refusal_len);
}

/* Parses an answer of the plane; NULL after printing why. */
cJSON *ctl_answer_json(const struct client_answer *ans)
{
	char err[512];
	struct json_limits lim = { 0, CTL_JSON_DEPTH };
	cJSON *doc = json_decode(ans->body.data, ans->body.len, &lim, err, sizeof(err));
	if (!doc)
		ctl_error("unexpected answer from the plane: %s", err);
	return doc;
}

/* What a write's rollout does, in words (its "rollout" member): "queued
 * behind rollout 5 (stage 2 of 3)"; nothing when it says nothing (a
 * rollout that started with it: "version N" as it always was, which
 * scripts read). */
static void rollout_note(struct buf *out, const cJSON *ro)
{
	const char *state = json_get_string(ro, "state");
	uint64_t id = 0, stage = 0, stages = 0, queue = 0, back = 0, expected = 0, sup = 0;
	if (!state)
		return;
	json_get_u64(cJSON_GetObjectItemCaseSensitive(ro, "stages"), &stages);
	if (strcmp(state, "queued") == 0) {
		json_get_u64(cJSON_GetObjectItemCaseSensitive(ro, "behind"), &id);
		json_get_u64(cJSON_GetObjectItemCaseSensitive(ro, "stage"), &stage);
		json_get_u64(cJSON_GetObjectItemCaseSensitive(ro, "queue"), &queue);
		buf_printf(out, "queued behind rollout %" PRIu64 " (stage %" PRIu64 " of %" PRIu64 ")", id, stage,
			   stages);
		if (queue > 1)
			buf_printf(out, ", %" PRIu64 " versions waiting with this one", queue);
	} else if (strcmp(state, "waiting") == 0) {
		json_get_u64(cJSON_GetObjectItemCaseSensitive(ro, "back"), &back);
		json_get_u64(cJSON_GetObjectItemCaseSensitive(ro, "expected"), &expected);
		const cJSON *until = cJSON_GetObjectItemCaseSensitive(ro, "until");
		char *left = cJSON_IsNumber(until) ? duration_until_text(until->valuedouble) : xstrdup("a moment");
		buf_printf(out, "its rollout waits for nodes to reconnect (%" PRIu64 " of %" PRIu64 " back, up to %s more)",
			   back, expected, left);
		free(left);
	} else if (strcmp(state, "emergency") == 0) {
		buf_puts(out, "emergency revert, sent to every node at once (no stages, no bakes)");
		if (json_get_u64(cJSON_GetObjectItemCaseSensitive(ro, "superseded"), &sup) && sup)
			buf_printf(out, "; rollout %" PRIu64 " superseded", sup);
	}
}

char *ctl_rollout_words(const cJSON *answer)
{
	struct buf note = BUF_INIT;
	rollout_note(&note, cJSON_GetObjectItemCaseSensitive(answer, "rollout"));
	char *shown = note.len ? cell_text(note.data, 400) : NULL;
	buf_release(&note);
	return shown;
}

/* Prints "version N" from {"version": N, "changed": bool}, and what its
 * rollout does ("version 12: queued behind rollout 5 (stage 2 of 3)"). */
int ctl_print_version(const struct ctl_ctx *cx, const struct client_answer *ans)
{
	if (cx->json) {
		print_raw(ans);
		return 0;
	}
	cJSON *doc = ctl_answer_json(ans);
	uint64_t v;
	if (!doc)
		return 1;
	if (!json_get_u64(cJSON_GetObjectItemCaseSensitive(doc, "version"), &v)) {
		ctl_error("unexpected answer from the plane: no version");
		cJSON_Delete(doc);
		return 1;
	}
	const cJSON *changed = cJSON_GetObjectItemCaseSensitive(doc, "changed");
	char *note = ctl_rollout_words(doc);
	printf("version %" PRIu64 "%s%s%s\n", v, cJSON_IsFalse(changed) ? " (no change)" : "", note ? ": " : "",
	       note ? note : "");
	free(note);
	cJSON_Delete(doc);
	return 0;
}

void ctl_warn_stale(const struct ctl_ctx *cx, const struct client_answer *ans)
{
	if (!ans->stale[0])
		return;
	char *end = NULL;
	long long since = strtoll(ans->stale, &end, 10);
	char why[sizeof(ans->stale)];
	/* the plane's words, on a terminal: no control character passes */
	snprintf(why, sizeof(why), "%s", end && *end == ' ' ? end + 1 : ans->stale);
	for (char *c = why; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	char *when = since > 0 ? time_and_ago_text((double)since) : xstrdup("?");
	fprintf(stderr,
		"tetherctl: warning: %s is stale since %s (%s): what it says is judged against the version it "
		"holds, which may be old; ask a plane that is current\n",
		cx->plane ? cx->plane : "the plane", when, why);
	free(when);
}

/* ---- input to send ------------------------------------------------------------- */

/* Makes room to read into b. A secret's buffer is never realloc'd (that
 * would leave a copy behind): a bigger one is taken, the old one wiped. */
static void input_grow(struct buf *b, bool secret, size_t want)
{
	if (!secret) {
		buf_reserve(b, want);
		return;
	}
	if (b->cap > b->len + 1)
		return;
	size_t cap = b->cap ? b->cap * 2 : want + 1;
	char *n = xmalloc(cap);
	if (b->len)
		memcpy(n, b->data, b->len);
	n[b->len] = '\0';
	if (b->data) {
		sodium_memzero(b->data, b->cap);
		free(b->data);
	}
	b->data = n;
	b->cap = cap;
}

static void input_release(struct buf *b, bool secret)
{
	if (secret && b->data)
		sodium_memzero(b->data, b->cap);
	buf_release(b);
}

/* Reads FILE, or standard input for "-", whole: pipes and process
 * substitution included, which read_file_limited refuses. A secret's is
 * read into one buffer sized from fstat (wiped when it must grow or on
 * failure). Returns a new allocated NUL-terminated text, or NULL with a
 * message in err. */
static char *read_input(const char *path, size_t *len, bool secret, char *err, size_t errlen)
{
	bool is_stdin = strcmp(path, "-") == 0;
	const char *what = is_stdin ? "standard input" : path;
	struct buf b = BUF_INIT;
	struct stat st;
	size_t want = 65536;
	int fd = is_stdin ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) == 0) {
		if (S_ISDIR(st.st_mode)) {
			snprintf(err, errlen, "cannot read '%s': %s", what, strerror(EISDIR));
			goto fail;
		}
		if (S_ISREG(st.st_mode) && (uint64_t)st.st_size > CTL_MAX_INPUT)
			goto too_big;
		if (S_ISREG(st.st_mode) && secret)
			want = (size_t)st.st_size + 1;   /* one read, and one for the end */
	}
	for (;;) {
		input_grow(&b, secret, want);
		ssize_t r = read(fd, b.data + b.len, b.cap - b.len - 1);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			snprintf(err, errlen, "cannot read '%s': %s", what, strerror(errno));
			goto fail;
		}
		if (r == 0)
			break;
		b.len += (size_t)r;
		b.data[b.len] = '\0';
		if (b.len > CTL_MAX_INPUT)
			goto too_big;
	}
	if (!is_stdin)
		close(fd);
	return buf_detach(&b, len);
too_big:
	snprintf(err, errlen, "'%s' is larger than %zu MiB: refusing to read it", what, CTL_MAX_INPUT >> 20);
fail:
	if (!is_stdin)
		close(fd);
	input_release(&b, secret);
	return NULL;
}

static char *read_json_object(const char *path, const char *what, size_t *len, bool secret)
{
	char err[1024];
	cJSON *doc = NULL;
	char *shown = strcmp(path, "-") == 0 ? xstrdup("standard input") : xasprintf("'%s'", path);
	char *text = read_input(path, len, secret, err, sizeof(err));
	if (!text) {
		ctl_error("%s", err);
		goto fail;
	}
	struct json_limits lim = { CTL_MAX_INPUT, CTL_JSON_DEPTH };
	doc = json_decode(text, *len, &lim, err, sizeof(err));
	if (!doc) {
		ctl_error("%s: %s", shown, err);
		goto fail;
	}
	if (!cJSON_IsObject(doc)) {
		ctl_error("%s: %s must be a JSON object", shown, what);
		goto fail;
	}
	if (secret)
		sealer_json_wipe(doc);
	cJSON_Delete(doc);
	free(shown);
	return text;
fail:
	if (secret)
		sealer_json_wipe(doc);
	cJSON_Delete(doc);
	if (text && secret)
		sodium_memzero(text, *len);
	free(text);
	free(shown);
	return NULL;
}

char *ctl_read_json_object(const char *path, const char *what, size_t *len)
{
	return read_json_object(path, what, len, false);
}

char *ctl_read_json_object_secret(const char *path, const char *what, size_t *len)
{
	return read_json_object(path, what, len, true);
}
