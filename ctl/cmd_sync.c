/* cmd_sync.c: tetherctl sync and export: the desired state as a directory
 * (DIR/<type>/<name>.json, tree.c) compared with the plane's, applied as
 * one conditional batch (one version, "base": the version compared
 * against, so a write in between makes it 409), or shown as a diff
 * (--dry-run, linediff.c) with the nodes each change reaches and checked
 * by the plane as a dry run of that batch (exit 4 refused, 3 would
 * change, 0 nothing to do); export
 * writes the plane's state in the same layout.
 *
 * Secrets: the plane shows a secret's key as "[redacted]" to everybody but
 * admins. Comparing against that would report every secret changed (and
 * export would write files the plane refuses), so when the answer is
 * redacted, secrets are left out on both sides, with a warning: sync and
 * export of secrets need an admin token. Sealed secrets: export writes
 * their push form (the envelope without the wraps); sync seals or matches
 * secret files first (sync_seal.c). */
#include "commands.h"
#include "buf.h"
#include "ctl.h"
#include "envelope.h"
#include "json.h"
#include "linediff.h"
#include "output.h"
#include "request.h"
#include "resource.h"
#include "secrets.h"
#include "sub.h"
#include "tree.h"
#include "util.h"
#include "xmalloc.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DIFF_CONTEXT 3
#define REDACTED "[redacted]"

#define C_ADD "\033[32m"
#define C_CHANGE "\033[33m"
#define C_DEL "\033[31m"
#define C_OFF "\033[0m"

/* The plane's state: names sorted, canonical bodies. */
struct remote {
	uint64_t version;
	size_t n;
	char **name, **body;
	bool redacted;          /* secrets were redacted (and are left out) */
	size_t secrets_skipped;
};

static void remote_release(struct remote *r)
{
	for (size_t i = 0; i < r->n; i++) {
		if (resource_type_of(r->name[i]) == RES_SECRET)   /* an admin's plaintext copy */
			sodium_memzero(r->body[i], strlen(r->body[i]));
		free(r->name[i]);
		cJSON_free(r->body[i]);
	}
	free(r->name);
	free(r->body);
	memset(r, 0, sizeof(*r));
}

static bool secret_redacted(const cJSON *body)
{
	for (const cJSON *m = body ? body->child : NULL; m; m = m->next)
		if (cJSON_IsString(m) && strcmp(m->valuestring, REDACTED) == 0)
			return true;
	return false;
}

/* Drops every secret from r: when the plane redacted some, sync leaves
 * secrets out on both sides (a sealed one is not redacted, but comparing
 * or pruning only some would be wrong and could print a plaintext file). */
static void remote_drop_secrets(struct remote *r)
{
	size_t k = 0;
	for (size_t i = 0; i < r->n; i++) {
		if (resource_type_of(r->name[i]) == RES_SECRET) {
			r->secrets_skipped++;
			sodium_memzero(r->body[i], strlen(r->body[i]));
			free(r->name[i]);
			cJSON_free(r->body[i]);
			continue;
		}
		r->name[k] = r->name[i];
		r->body[k] = r->body[i];
		k++;
	}
	r->n = k;
}

/* Whether a canonical body is a plaintext secret's: its text is never
 * printed (a dry run's diff shows that it changes, not how). */
static bool plaintext_secret(const char *name, const char *body)
{
	return resource_type_of(name) == RES_SECRET && body && strncmp(body, "{\"sealed\":", 10) != 0;
}

/* GET /v1/resources into r. Returns 0 or 1 (printed). */
static int remote_fetch(const struct ctl_ctx *cx, struct remote *r)
{
	struct client_answer ans = { 0, BUF_INIT, "" };
	cJSON *doc = NULL;
	int rc = 1;
	memset(r, 0, sizeof(*r));
	if (ctl_call(cx, "GET", "/v1/resources", NULL, 0, &ans) != 0)
		goto out;
	if (!(doc = ctl_answer_json(&ans)))
		goto out;
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(doc, "resources");
	if (!json_get_u64(cJSON_GetObjectItemCaseSensitive(doc, "version"), &r->version) || !cJSON_IsArray(list)) {
		ctl_error("unexpected answer from the plane: no version or resources");
		goto out;
	}
	size_t cap = (size_t)cJSON_GetArraySize(list);
	r->name = xcalloc(cap ? cap : 1, sizeof(*r->name));
	r->body = xcalloc(cap ? cap : 1, sizeof(*r->body));
	for (cJSON *e = list->child; e && r->n < cap; e = e->next) {
		const char *name = json_get_string(e, "name");
		cJSON *body = cJSON_GetObjectItemCaseSensitive(e, "body");
		char err[256];
		if (!name || !cJSON_IsObject(body) || resource_fullname_check(name, err, sizeof(err)) < 0) {
			ctl_error("unexpected answer from the plane: a resource without a valid name or body");
			goto out;
		}
		if (resource_type_of(name) == RES_SECRET && secret_redacted(body)) {
			r->redacted = true;
			r->secrets_skipped++;
			continue;
		}
		r->name[r->n] = xstrdup(name);
		r->body[r->n] = json_encode_canonical(body);
		r->n++;
	}
	rc = 0;
out:
	cJSON_Delete(doc);
	buf_release(&ans.body);
	return rc;
}

static bool use_color(void)
{
	const char *nc = getenv("NO_COLOR");
	return isatty(STDOUT_FILENO) && !(nc && *nc);
}

/* A canonical body pretty-printed, ending with a newline. */
static void pretty(struct buf *out, const char *canon)
{
	buf_reset(out);
	json_pretty(out, canon);
	if (!out->len || out->data[out->len - 1] != '\n')
		buf_putc(out, '\n');
}

/* ---- the difference ---------------------------------------------------- */

enum change_kind { CH_CREATE, CH_CHANGE, CH_DELETE };

struct change {
	enum change_kind kind;
	const char *name;         /* borrowed from the tree or the remote */
	const char *path;         /* the file, NULL for a delete */
	const char *old, *new;    /* canonical bodies (NULL when none) */
};

struct diff {
	size_t n, creates, changes, deletes, kept;   /* kept: on the plane only, no --prune */
	struct change *c;
};

static void diff_add(struct diff *d, enum change_kind k, const char *name, const char *path, const char *old,
		     const char *new)
{
	d->c = xrealloc(d->c, (d->n + 1) * sizeof(*d->c));
	d->c[d->n++] = (struct change){ k, name, path, old, new };
	d->creates += k == CH_CREATE;
	d->changes += k == CH_CHANGE;
	d->deletes += k == CH_DELETE;
}

/* Merges the sorted tree and remote lists into changes, sorted by name. */
static void diff_compute(const struct tree *t, const struct remote *r, bool prune, bool skip_secrets,
			 struct diff *d)
{
	size_t i = 0, j = 0;
	memset(d, 0, sizeof(*d));
	while (i < t->n || j < r->n) {
		int cmp = i == t->n ? 1 : j == r->n ? -1 : strcmp(t->e[i].name, r->name[j]);
		if (cmp < 0) {
			const struct tree_entry *e = &t->e[i++];
			if (skip_secrets && resource_type_of(e->name) == RES_SECRET)
				continue;
			diff_add(d, CH_CREATE, e->name, e->path, NULL, e->body);
		} else if (cmp > 0) {
			if (skip_secrets && resource_type_of(r->name[j]) == RES_SECRET)
				;   /* left out: not kept, not deleted */
			else if (prune)
				diff_add(d, CH_DELETE, r->name[j], NULL, r->body[j], NULL);
			else
				d->kept++;
			j++;
		} else {
			const struct tree_entry *e = &t->e[i++];
			bool skip = skip_secrets && resource_type_of(e->name) == RES_SECRET;
			if (!skip && strcmp(e->body, r->body[j]) != 0)
				diff_add(d, CH_CHANGE, e->name, e->path, r->body[j], e->body);
			j++;
		}
	}
}

/* ---- nodes reached ------------------------------------------------------ */

struct fleet {
	size_t n;
	struct sub *subs;   /* one per node; canon NULL: unknown, every name */
	bool known;         /* the plane answered */
};

static void fleet_fetch(const struct ctl_ctx *cx, struct fleet *f)
{
	struct client_answer ans = { 0, BUF_INIT, "" };
	memset(f, 0, sizeof(*f));
	char refusal[512];
	if (ctl_call_refusal(cx, "GET", "/v1/nodes", NULL, 0, &ans, refusal, sizeof(refusal)) != 0) {
		if (ans.status)
			ctl_error("warning: cannot count the nodes reached: %s", refusal);
		buf_release(&ans.body);
		return;
	}
	char err[256];
	struct json_limits lim = { 0, CTL_JSON_DEPTH };
	cJSON *doc = json_decode(ans.body.data, ans.body.len, &lim, err, sizeof(err));
	if (!cJSON_IsArray(doc)) {
		ctl_error("warning: cannot count the nodes reached: unexpected answer from the plane");
		goto out;
	}
	size_t cap = (size_t)cJSON_GetArraySize(doc);
	f->subs = xcalloc(cap ? cap : 1, sizeof(*f->subs));
	for (const cJSON *node = doc->child; node && f->n < cap; node = node->next) {
		const char *s = json_get_string(node, "sub");
		if (!s || sub_parse(s, &f->subs[f->n], err, sizeof(err)) < 0)
			memset(&f->subs[f->n], 0, sizeof(f->subs[f->n]));   /* unknown: every name */
		f->n++;
	}
	f->known = true;
out:
	cJSON_Delete(doc);
	buf_release(&ans.body);
}

static void fleet_release(struct fleet *f)
{
	for (size_t i = 0; i < f->n; i++)
		if (f->subs[i].canon)
			sub_release(&f->subs[i]);
	free(f->subs);
}

static bool reaches(const struct sub *s, const char *name)
{
	return !s->canon || sub_match(s, name);
}

/* ---- sync --------------------------------------------------------------- */

static const char *kind_word[] = { "create", "change", "delete" };
static const char kind_sign[] = { '+', '~', '-' };

static void print_diff(const struct diff *d, const struct fleet *f, const struct remote *r)
{
	bool color = use_color();
	const char *kc[] = { C_ADD, C_CHANGE, C_DEL };
	struct buf a = BUF_INIT, b = BUF_INIT, out = BUF_INIT;
	bool *hit = f->known ? xcalloc(f->n ? f->n : 1, sizeof(*hit)) : NULL;
	size_t reached = 0;
	for (size_t i = 0; i < d->n; i++) {
		const struct change *c = &d->c[i];
		printf("%s%c %s %s%s", color ? kc[c->kind] : "", kind_sign[c->kind], kind_word[c->kind], c->name,
		       color ? C_OFF : "");
		if (c->path)
			printf(" (%s)", c->path);
		if (f->known) {
			size_t count = 0;
			for (size_t k = 0; k < f->n; k++) {
				if (!reaches(&f->subs[k], c->name))
					continue;
				count++;
				if (!hit[k]) {
					hit[k] = true;
					reached++;
				}
			}
			printf(": reaches %zu node%s", count, count == 1 ? "" : "s");
		}
		putchar('\n');
		if (plaintext_secret(c->name, c->old) || plaintext_secret(c->name, c->new)) {
			printf("  (a plaintext secret: its body is not shown)\n");
			continue;
		}
		buf_reset(&a);
		buf_reset(&b);
		if (c->old)
			pretty(&a, c->old);
		if (c->new)
			pretty(&b, c->new);
		buf_reset(&out);
		linediff(a.len ? a.data : "", b.len ? b.data : "", DIFF_CONTEXT, color, &out);
		fwrite(out.data ? out.data : "", 1, out.len, stdout);
	}
	printf("%zu change%s against version %" PRIu64 ": %zu to create, %zu to change, %zu to delete", d->n,
	       d->n == 1 ? "" : "s", r->version, d->creates, d->changes, d->deletes);
	if (f->known)
		printf("; reaching %zu of %zu node%s", reached, f->n, f->n == 1 ? "" : "s");
	putchar('\n');
	free(hit);
	buf_release(&a);
	buf_release(&b);
	buf_release(&out);
}

/* The plane's message for a refused batch, with the resource it names
 * mapped back to its file. */
static void print_refusal(const struct tree *t, long status, const char *msg, uint64_t base, bool dry)
{
	if (status == 409) {
		ctl_error("%s", msg);
		ctl_error("the plane is no longer at version %" PRIu64 " (someone wrote in between): nothing was "
			  "%s; run sync again", base, dry ? "checked" : "applied");
		return;
	}
	size_t k = strcspn(msg, ":");
	char name[RES_FULLNAME_MAX + 1];
	const struct tree_entry *e = NULL;
	if (msg[k] == ':' && k < sizeof(name)) {
		memcpy(name, msg, k);
		name[k] = '\0';
		e = tree_find(t, name);
	}
	if (e)
		ctl_error("'%s': %s", e->path, msg);
	else
		ctl_error("%s", msg);
	if (e && strstr(msg, "a replayed envelope"))
		ctl_error("'%s' holds an envelope the plane has replaced since; to restore that value, sync its "
			  "plaintext (with --recovery-key) or put it with --seal: a new envelope", e->path);
	if (dry)
		ctl_error("the plane would refuse the batch (HTTP %ld): a sync would apply nothing", status);
	else
		ctl_error("the plane refused the batch (HTTP %ld): nothing was applied", status);
}

/* The batch of d against base, into batch. */
static void batch_of(const struct ctl_ctx *cx, const struct diff *d, uint64_t base, struct buf *out)
{
	struct buf batch = BUF_INIT;
	buf_printf(&batch, "{\"base\":%" PRIu64, base);
	if (cx->message) {
		buf_puts(&batch, ",\"message\":");
		buf_json_string(&batch, cx->message);
	}
	buf_puts(&batch, ",\"upserts\":[");
	bool first = true;
	for (size_t i = 0; i < d->n; i++) {
		if (d->c[i].kind == CH_DELETE)
			continue;
		buf_puts(&batch, first ? "{\"name\":" : ",{\"name\":");
		buf_json_string(&batch, d->c[i].name);
		buf_puts(&batch, ",\"body\":");
		buf_puts(&batch, d->c[i].new);
		buf_putc(&batch, '}');
		first = false;
	}
	buf_puts(&batch, "],\"removes\":[");
	first = true;
	for (size_t i = 0; i < d->n; i++) {
		if (d->c[i].kind != CH_DELETE)
			continue;
		if (!first)
			buf_putc(&batch, ',');
		buf_json_string(&batch, d->c[i].name);
		first = false;
	}
	buf_puts(&batch, "]}");
	*out = batch;
}

/* --dry-run: the plane runs every check of the write (POST
 * /v1/batch?dry_run=1) and stores nothing. 4 when it would refuse (its
 * reason printed, mapped to the file), else 3 (d is not empty). */
static int dry_run_ask(const struct ctl_ctx *cx, const struct tree *t, const struct diff *d, uint64_t base)
{
	struct buf batch = BUF_INIT;
	struct client_answer ans = { 0, BUF_INIT, "" };
	char refusal[2048];
	int rc = CTL_EXIT_FAILED;
	batch_of(cx, d, base, &batch);
	int r = ctl_call_refusal(cx, "POST", "/v1/batch?dry_run=1", batch.data, batch.len, &ans, refusal,
				 sizeof(refusal));
	if (r < 0 && (ans.status == 401 || ans.status == 403)) {
		/* a reader's token: the diff stands, unchecked by the plane */
		ctl_error("warning: the plane checks a dry run only for a token that may write (%s): the diff above "
			  "was not checked there", refusal);
		rc = CTL_EXIT_CHANGES;
		goto out;
	}
	if (r < 0) {
		print_refusal(t, ans.status, refusal, base, true);
		rc = CTL_EXIT_REFUSED;
	}
	if (r != 0)
		goto out;
	cJSON *doc = ctl_answer_json(&ans);
	if (!doc)
		goto out;
	if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(doc, "dry_run"))) {
		ctl_error("the plane does not know dry runs (an older plane?): nothing was checked there");
		cJSON_Delete(doc);
		goto out;
	}
	const char *frozen = json_get_string(doc, "frozen");
	if (cx->json) {
		print_raw(&ans);   /* the plane's dry run answer */
	} else {
		if (frozen)
			printf("note: %s (a dry run is not refused by a freeze; the sync would be)\n", frozen);
		printf("the plane would take it: every check passed (nothing was applied)\n");
	}
	cJSON_Delete(doc);
	rc = CTL_EXIT_CHANGES;
out:
	buf_release(&batch);
	buf_release(&ans.body);
	return rc;
}

static int apply(const struct ctl_ctx *cx, const struct tree *t, const struct diff *d, uint64_t base)
{
	struct buf batch = BUF_INIT;
	struct client_answer ans = { 0, BUF_INIT, "" };
	char refusal[2048];
	int rc = CTL_EXIT_FAILED;
	batch_of(cx, d, base, &batch);
	int r = ctl_call_refusal(cx, "POST", "/v1/batch", batch.data, batch.len, &ans, refusal, sizeof(refusal));
	if (r < 0)
		print_refusal(t, ans.status, refusal, base, false);
	if (r != 0)
		goto out;
	cJSON *doc = ctl_answer_json(&ans);
	uint64_t v;
	if (!doc || !json_get_u64(cJSON_GetObjectItemCaseSensitive(doc, "version"), &v)) {
		if (doc)
			ctl_error("unexpected answer from the plane: no version");
		cJSON_Delete(doc);
		goto out;
	}
	char *note = ctl_rollout_words(doc);   /* "queued behind rollout 5 (stage 2 of 3)" */
	cJSON_Delete(doc);
	if (cx->json) {
		print_raw(&ans);   /* the plane's answer to the batch */
		free(note);
		rc = CTL_EXIT_OK;
		goto out;
	}
	printf("version %" PRIu64 ": %zu created, %zu changed, %zu deleted%s%s\n", v, d->creates, d->changes, d->deletes,
	       note ? "; " : "", note ? note : "");
	free(note);
	rc = CTL_EXIT_OK;
out:
	buf_release(&batch);
	buf_release(&ans.body);
	return rc;
}

int cmd_sync(const struct ctl_ctx *cx, int argc, char **argv)
{
	struct tree t;
	struct remote r;
	struct diff d = { 0 };
	struct fleet f = { 0 };
	char err[2048];
	int rc = CTL_EXIT_FAILED;
	(void)argc;
	memset(&r, 0, sizeof(r));

	sealer_no_dumps();   /* secret files may hold plaintext */
	/* every file is read and checked before anything is sent */
	if (tree_read(argv[0], &t, err, sizeof(err)) < 0) {
		ctl_error("%s", err);
		ctl_error("nothing was sent");
		goto out;
	}
	if (remote_fetch(cx, &r) != 0)
		goto out;
	uint64_t base = r.version;
	if (cx->base) {
		if (parse_u64(cx->base, &base) < 0) {
			ctl_error("--base: '%s' is not a version", cx->base);
			rc = CTL_EXIT_USAGE;
			goto out;
		}
	}
	if (r.redacted) {
		remote_drop_secrets(&r);
		ctl_error("warning: the plane redacts secrets for this token (not an admin): %zu secret%s on the "
			  "plane and every secret/ file left out; sync them with an admin token",
			  r.secrets_skipped, r.secrets_skipped == 1 ? "" : "s");
	}
	/* secrets sealed, or matched to the plane's envelopes (sync_seal.c) */
	if (!r.redacted && sync_seal(cx, &t, r.n, r.name, r.body) != 0) {
		ctl_error("nothing was sent");
		goto out;
	}
	diff_compute(&t, &r, cx->prune, r.redacted, &d);
	if (d.n == 0 && cx->json) {
		/* no batch is sent: what the plane answers one that changes nothing */
		printf("{\"version\":%" PRIu64 ",\"changed\":false}\n", r.version);
		rc = CTL_EXIT_OK;
		goto out;
	}
	if (d.n == 0) {
		printf("nothing to do: '%s' matches the plane at version %" PRIu64 "\n", argv[0], r.version);
		if (d.kept)
			printf("%zu resource%s on the plane %s not in '%s' (kept; --prune deletes them)\n", d.kept,
			       d.kept == 1 ? "" : "s", d.kept == 1 ? "is" : "are", argv[0]);
		rc = CTL_EXIT_OK;
		goto out;
	}
	if (cx->dry_run && cx->json) {
		rc = dry_run_ask(cx, &t, &d, base);   /* the plane's dry run answer alone */
		goto out;
	}
	if (cx->dry_run) {
		fleet_fetch(cx, &f);
		print_diff(&d, &f, &r);
		if (d.kept)
			printf("%zu resource%s on the plane %s not in '%s' (kept; --prune deletes them)\n", d.kept,
			       d.kept == 1 ? "" : "s", d.kept == 1 ? "is" : "are", argv[0]);
		rc = dry_run_ask(cx, &t, &d, base);
		goto out;
	}
	rc = apply(cx, &t, &d, base);
out:
	fleet_release(&f);
	free(d.c);
	remote_release(&r);
	tree_release(&t);
	return rc;
}

/* ---- export ------------------------------------------------------------- */

/* Whether dir holds anything but hidden entries (.git). -1 on error. */
static int dir_used(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return -1;
	struct dirent *de;
	int used = 0;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.') {
			used = 1;
			break;
		}
	closedir(d);
	return used;
}

static bool remote_has(const struct remote *r, const char *name)
{
	for (size_t lo = 0, hi = r->n; lo < hi;) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(r->name[mid], name);
		if (c == 0)
			return true;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

/* --force: removes DIR/<type>/<name>.json files of resources the plane
 * lacks (a secret's, when secrets were redacted, is kept), so that DIR
 * is the plane's state. Other files are left alone. Returns how many. */
static int prune_files(const char *dir, const struct remote *r, size_t *removed)
{
	for (int ty = 0; ty < RES_TYPE_COUNT; ty++) {
		const char *type = resource_type_name((enum res_type)ty);
		if (r->redacted && ty == RES_SECRET)
			continue;
		char *tdir = xasprintf("%s/%s", dir, type);
		DIR *d = opendir(tdir);
		if (!d) {
			free(tdir);
			continue;
		}
		struct dirent *de;
		while ((de = readdir(d))) {
			char name[RES_FULLNAME_MAX + 16], why[512];
			if (tree_name_of(type, de->d_name, name, sizeof(name), why, sizeof(why)) != 1 ||
			    remote_has(r, name))
				continue;
			char *path = xasprintf("%s/%s", tdir, de->d_name);
			if (unlink(path) < 0) {
				ctl_error("cannot remove '%s': %s", path, strerror(errno));
				free(path);
				closedir(d);
				free(tdir);
				return -1;
			}
			(*removed)++;
			free(path);
		}
		closedir(d);
		free(tdir);
	}
	return 0;
}

int cmd_export(const struct ctl_ctx *cx, int argc, char **argv)
{
	const char *dir = argv[0];
	struct remote r;
	struct buf text = BUF_INIT;
	int rc = CTL_EXIT_FAILED;
	size_t removed = 0, damaged = 0;
	(void)argc;
	memset(&r, 0, sizeof(r));

	int used = dir_used(dir);
	if (used < 0 && errno != ENOENT) {
		ctl_error("cannot open '%s': %s", dir, strerror(errno));
		goto out;
	}
	if (used > 0 && !cx->force) {
		ctl_error("'%s' is not empty: export writes into a new or empty directory (--force: write into it, "
			  "removing the files of resources the plane does not have)", dir);
		goto out;
	}
	sealer_no_dumps();   /* an admin gets plaintext secrets */
	if (remote_fetch(cx, &r) != 0)
		goto out;
	if (used < 0 && mkdir(dir, 0755) < 0) {
		ctl_error("cannot create '%s': %s", dir, strerror(errno));
		goto out;
	}
	if (r.redacted)
		ctl_error("warning: the plane redacts secrets for this token (not an admin): %zu secret%s not "
			  "exported; export them with an admin token", r.secrets_skipped,
			  r.secrets_skipped == 1 ? "" : "s");
	for (size_t i = 0; i < r.n; i++) {
		char *path = tree_path_of(dir, r.name[i]);
		if (!path) {
			ctl_error("unexpected answer from the plane: a bad name");
			goto out;
		}
		/* the type's directory: path up to its last '/' */
		char *slash = strrchr(path, '/');
		*slash = '\0';
		if (mkdir(path, 0755) < 0 && errno != EEXIST) {
			ctl_error("cannot create '%s': %s", path, strerror(errno));
			free(path);
			goto out;
		}
		*slash = '/';
		/* a sealed secret as its push form: the envelope, not the wraps;
		 * a damaged one is not written at all */
		char *push = NULL, perr[512];
		size_t plen;
		if (resource_type_of(r.name[i]) == RES_SECRET &&
		    envelope_push_body_checked(r.body[i], strlen(r.body[i]), &push, &plen, perr, sizeof(perr)) < 0) {
			ctl_error("%s: the plane's sealed body is damaged: %s; not exported", r.name[i], perr);
			damaged++;
			free(path);
			continue;
		}
		pretty(&text, push ? push : r.body[i]);
		free(push);
		mode_t mode = resource_type_of(r.name[i]) == RES_SECRET ? 0600 : 0644;
		if (write_file_replace(path, text.data, text.len, mode, false) < 0) {
			ctl_error("cannot write '%s': %s", path, strerror(errno));
			free(path);
			goto out;
		}
		free(path);
	}
	if (used > 0 && prune_files(dir, &r, &removed) < 0)
		goto out;
	printf("exported %zu resource%s of version %" PRIu64 " to '%s'", r.n, r.n == 1 ? "" : "s", r.version, dir);
	if (removed)
		printf(" (%zu stale file%s removed)", removed, removed == 1 ? "" : "s");
	putchar('\n');
	if (damaged)
		ctl_error("%zu damaged sealed secret%s not exported (above)", damaged, damaged == 1 ? "" : "s");
	rc = damaged ? CTL_EXIT_FAILED : CTL_EXIT_OK;
out:
	buf_release(&text);
	remote_release(&r);
	return rc;
}
