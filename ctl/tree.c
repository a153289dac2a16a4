/* tree.c: the desired state as a directory, DIR/<type>/<name>.json (see
 * tree.h): names from paths and back, and reading a tree whole, every
 * file checked, before anything is sent. */
#include "tree.h"
#include "ctl.h"
#include "commands.h"
#include "json.h"
#include "request.h"
#include "resource.h"
#include "sealer.h"
#include "util.h"
#include "xmalloc.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SUFFIX ".json"

int tree_name_of(const char *type, const char *file, char *name, size_t cap, char *err, size_t errlen)
{
	size_t len = strlen(file), sl = strlen(SUFFIX);
	err[0] = '\0';
	if (len <= sl || strcmp(file + len - sl, SUFFIX) != 0) {
		if (file[0] != '.')
			snprintf(err, errlen, "skipping '%s/%s': not a .json file", type, file);
		return 0;
	}
	int n = snprintf(name, cap, "%s/%.*s", type, (int)(len - sl), file);
	if (n < 0 || (size_t)n >= cap) {
		snprintf(err, errlen, "'%.64s...': the name is longer than %d bytes", file, RES_NAME_MAX);
		return -1;
	}
	if (resource_fullname_check(name, err, errlen) < 0)
		return -1;
	return 1;
}

char *tree_path_of(const char *dir, const char *name)
{
	char err[256];
	if (resource_fullname_check(name, err, sizeof(err)) < 0)
		return NULL;
	size_t dl = strlen(dir);
	while (dl > 1 && dir[dl - 1] == '/')
		dl--;
	return xasprintf("%.*s/%s%s", (int)dl, dir, name, SUFFIX);
}

static void warn(const char *msg)
{
	ctl_error("warning: %s", msg);
}

/* Follows path when it is a symlink: its target must lie under root (a
 * real path). Fills st with what it points to. 0, or -1 with err. */
static int stat_inside(const char *root, const char *path, struct stat *st, char *err, size_t errlen)
{
	if (lstat(path, st) < 0) {
		snprintf(err, errlen, "cannot read '%s': %s", path, strerror(errno));
		return -1;
	}
	if (!S_ISLNK(st->st_mode))
		return 0;
	char *real = realpath(path, NULL);
	if (!real) {
		snprintf(err, errlen, "'%s': a symlink that cannot be followed: %s", path, strerror(errno));
		return -1;
	}
	size_t rl = strlen(root);
	bool inside = strncmp(real, root, rl) == 0 && (real[rl] == '/' || (rl == 1 && root[0] == '/'));
	free(real);
	if (!inside) {
		snprintf(err, errlen, "'%s': a symlink that points out of the directory", path);
		return -1;
	}
	if (stat(path, st) < 0) {
		snprintf(err, errlen, "cannot read '%s': %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(((const struct tree_entry *)a)->name, ((const struct tree_entry *)b)->name);
}

/* Reads one resource file: one JSON object, made canonical. */
static int read_one(struct tree *t, const char *path, const char *name, char *err, size_t errlen)
{
	size_t len;
	char jerr[512];
	char *text = read_file_limited(path, CTL_MAX_INPUT, &len);
	if (!text) {
		snprintf(err, errlen, "cannot read '%s': %s", path, strerror(errno));
		return -1;
	}
	/* a secret file's text and tree may hold plaintext: wiped */
	bool secret = resource_type_of(name) == RES_SECRET;
	struct json_limits lim = { CTL_MAX_INPUT, CTL_JSON_DEPTH };
	cJSON *doc = json_decode(text, len, &lim, jerr, sizeof(jerr));
	if (secret)
		sodium_memzero(text, len);
	free(text);
	if (!doc) {
		snprintf(err, errlen, "'%s': %s", path, jerr);
		return -1;
	}
	if (!cJSON_IsObject(doc)) {
		if (secret)
			sealer_json_wipe(doc);
		cJSON_Delete(doc);
		snprintf(err, errlen, "'%s': %s must be a JSON object", path, name);
		return -1;
	}
	if (t->n == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 64;
		t->e = xrealloc(t->e, t->cap * sizeof(*t->e));
	}
	struct tree_entry *e = &t->e[t->n++];
	e->name = xstrdup(name);
	e->path = xstrdup(path);
	e->body = secret ? sealer_canonical_secret(doc, len) : json_encode_canonical(doc);
	if (secret)
		sealer_json_wipe(doc);
	cJSON_Delete(doc);
	return 0;
}

static int read_type_dir(struct tree *t, const char *root, const char *dir, const char *type, char *err,
			 size_t errlen)
{
	char *tdir = xasprintf("%s/%s", dir, type);
	int rc = -1;
	DIR *d = opendir(tdir);
	if (!d) {
		snprintf(err, errlen, "cannot open '%s': %s", tdir, strerror(errno));
		goto out;
	}
	struct dirent *de;
	while ((errno = 0, de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		char name[RES_FULLNAME_MAX + 16], why[512];
		int k = tree_name_of(type, de->d_name, name, sizeof(name), why, sizeof(why));
		if (k == 0 && !why[0])
			continue;   /* hidden: an editor's swap file, .git */
		char *path = xasprintf("%s/%s", tdir, de->d_name);
		struct stat st;
		if (k < 0) {
			snprintf(err, errlen, "'%s': %s", path, why);
			free(path);
			goto out;
		}
		if (stat_inside(root, path, &st, err, errlen) < 0) {
			free(path);
			goto out;
		}
		if (!S_ISREG(st.st_mode)) {
			snprintf(err, errlen, "'%s': not a regular file (the layout is DIR/<type>/<name>.json)", path);
			free(path);
			goto out;
		}
		if (k == 0) {
			char msg[600];
			snprintf(msg, sizeof(msg), "skipping '%s': not a .json file", path);
			warn(msg);
			free(path);
			continue;
		}
		int r = read_one(t, path, name, err, errlen);
		free(path);
		if (r < 0)
			goto out;
	}
	if (errno) {
		snprintf(err, errlen, "cannot read '%s': %s", tdir, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (d)
		closedir(d);
	free(tdir);
	return rc;
}

int tree_read(const char *dir, struct tree *t, char *err, size_t errlen)
{
	memset(t, 0, sizeof(*t));
	char *root = realpath(dir, NULL);
	int rc = -1;
	DIR *d = NULL;
	if (!root) {
		snprintf(err, errlen, "cannot open '%s': %s", dir, strerror(errno));
		return -1;
	}
	if (!(d = opendir(dir))) {
		snprintf(err, errlen, "cannot open '%s': %s", dir, strerror(errno));
		goto out;
	}
	struct dirent *de;
	while ((errno = 0, de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		char *path = xasprintf("%s/%s", dir, de->d_name);
		struct stat st;
		if (stat_inside(root, path, &st, err, errlen) < 0) {
			free(path);
			goto out;
		}
		if (!S_ISDIR(st.st_mode)) {
			char msg[600];
			snprintf(msg, sizeof(msg), "skipping '%s': not a type directory", path);
			warn(msg);
			free(path);
			continue;
		}
		char probe[RES_FULLNAME_MAX + 8];
		snprintf(probe, sizeof(probe), "%.100s/x", de->d_name);
		if (strlen(de->d_name) > 100 || resource_type_of(probe) == RES_UNKNOWN) {
			snprintf(err, errlen,
				 "'%s': not a resource type (expected secret, cluster, listener, route, file or guard)", path);
			free(path);
			goto out;
		}
		free(path);
		if (read_type_dir(t, root, dir, de->d_name, err, errlen) < 0)
			goto out;
		errno = 0;
	}
	if (errno) {
		snprintf(err, errlen, "cannot read '%s': %s", dir, strerror(errno));
		goto out;
	}
	if (t->n)
		qsort(t->e, t->n, sizeof(*t->e), cmp_name);
	rc = 0;
out:
	if (d)
		closedir(d);
	free(root);
	return rc;
}

void tree_release(struct tree *t)
{
	for (size_t i = 0; i < t->n; i++) {
		if (t->e[i].body && resource_type_of(t->e[i].name) == RES_SECRET)
			sodium_memzero(t->e[i].body, strlen(t->e[i].body));
		free(t->e[i].name);
		free(t->e[i].path);
		cJSON_free(t->e[i].body);
	}
	free(t->e);
	memset(t, 0, sizeof(*t));
}

const struct tree_entry *tree_find(const struct tree *t, const char *name)
{
	if (!t->n)
		return NULL;
	struct tree_entry key = { (char *)name, NULL, NULL };
	return bsearch(&key, t->e, t->n, sizeof(*t->e), cmp_name);
}
