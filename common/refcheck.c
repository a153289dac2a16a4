/* refcheck.c: candidate-state checks of a write (see refcheck.h). */
#include "refcheck.h"
#include "strmap.h"
#include "xmalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *bare(const char *fullname)
{
	const char *slash = strchr(fullname, '/');
	return slash ? slash + 1 : fullname;
}

struct check {
	const struct refcheck_base *b;
	const struct refcheck_change *ch;
	size_t n;
	struct strmap in_write;     /* name -> index in ch */
	struct strmap ref_delta;    /* name -> change of its referrer count */
	struct strmap paths;        /* path -> index of the upsert claiming it */
	struct strmap dirs;         /* dir -> change of files under it */
	char **owned;
	size_t nowned;
};

static const char *own(struct check *c, const char *s, size_t len)
{
	char *k = xstrndup(s, len);
	c->owned = xrealloc(c->owned, (c->nowned + 1) * sizeof(char *));
	c->owned[c->nowned++] = k;
	return k;
}

static bool in_write(void *ctx, const char *name)
{
	struct check *c = ctx;
	return strmap_get(&c->in_write, name, NULL);
}

static bool cand_exists(struct check *c, const char *name)
{
	intptr_t idx;
	if (strmap_get(&c->in_write, name, &idx))
		return c->ch[idx].upsert;
	return c->b->lookup(c->b->ctx, name, NULL, NULL, NULL, NULL);
}

/* Adds delta to every directory above path ("a/b/c" -> "a", "a/b"). */
static void dirs_adjust(struct check *c, const char *path, int delta)
{
	for (const char *s = strchr(path, '/'); s; s = strchr(s + 1, '/')) {
		intptr_t *slot = NULL;
		/* look up without allocating when already present */
		char tmp[4097];
		size_t len = (size_t)(s - path);
		if (len >= sizeof(tmp))
			continue;
		memcpy(tmp, path, len);
		tmp[len] = '\0';
		if (!strmap_get(&c->dirs, tmp, NULL))
			slot = strmap_ref(&c->dirs, own(c, path, len));
		else
			slot = strmap_ref(&c->dirs, tmp);
		*slot += delta;
	}
}

/* The base's file at path, unless the write removes or moves it. */
static const char *base_file_at(struct check *c, const char *path)
{
	const char *owner = c->b->file_at ? c->b->file_at(c->b->ctx, path) : NULL;
	if (owner && strmap_get(&c->in_write, owner, NULL))
		return NULL;   /* the write removes it, or rewrites it: its own claim counts */
	return owner;
}

/* The live file at path in the candidate, or NULL. */
static const char *cand_file_at(struct check *c, const char *path)
{
	intptr_t idx;
	if (strmap_get(&c->paths, path, &idx))
		return c->ch[idx].name;
	return base_file_at(c, path);
}

static uint32_t cand_files_under(struct check *c, const char *dir)
{
	intptr_t d = 0;
	strmap_get(&c->dirs, dir, &d);
	uint32_t base = c->b->files_under ? c->b->files_under(c->b->ctx, dir) : 0;
	return (uint32_t)((intptr_t)base + d);
}

static int check_paths(struct check *c, char *err, size_t errlen)
{
	for (size_t i = 0; i < c->n; i++) {
		const char *path = c->ch[i].upsert ? c->ch[i].file_path : NULL;
		if (!path)
			continue;
		/* a claim by another file of the write was refused earlier */
		const char *other = base_file_at(c, path);
		if (other && strcmp(other, c->ch[i].name) != 0) {
			snprintf(err, errlen, "%s: path '%s' is already the path of %s", c->ch[i].name, path, other);
			return -1;
		}
		if (cand_files_under(c, path) > 0) {
			snprintf(err, errlen, "%s: path '%s' is a directory of other files", c->ch[i].name, path);
			return -1;
		}
		char tmp[4097];
		for (const char *s = strchr(path, '/'); s; s = strchr(s + 1, '/')) {
			size_t len = (size_t)(s - path);
			if (len >= sizeof(tmp))
				break;
			memcpy(tmp, path, len);
			tmp[len] = '\0';
			const char *f = cand_file_at(c, tmp);
			if (f) {
				snprintf(err, errlen, "%s: path '%s' lies under '%s', the path of %s", c->ch[i].name,
					 path, tmp, f);
				return -1;
			}
		}
	}
	return 0;
}

int refcheck_candidate(const struct refcheck_base *b, const struct refcheck_change *ch, size_t n,
		       char *err, size_t errlen)
{
	struct check c = { .b = b, .ch = ch, .n = n };
	int rc = -1;
	strmap_init(&c.in_write);
	strmap_init(&c.ref_delta);
	strmap_init(&c.paths);
	strmap_init(&c.dirs);

	for (size_t i = 0; i < n; i++) {
		if (strmap_get(&c.in_write, ch[i].name, NULL)) {
			snprintf(err, errlen, "%s: named twice in one write", ch[i].name);
			goto out;
		}
		*strmap_ref(&c.in_write, ch[i].name) = (intptr_t)i;
	}

	/* how the write moves referrer counts and the files under each dir */
	for (size_t i = 0; i < n; i++) {
		const char *const *refs = NULL;
		int nrefs = 0;
		const char *old_path = NULL;
		if (b->lookup(b->ctx, ch[i].name, &refs, &nrefs, NULL, &old_path)) {
			for (int r = 0; r < nrefs; r++)
				(*strmap_ref(&c.ref_delta, refs[r]))--;
			if (old_path)
				dirs_adjust(&c, old_path, -1);
		}
		if (ch[i].upsert) {
			for (int r = 0; ch[i].refs && r < ch[i].refs->n; r++)
				(*strmap_ref(&c.ref_delta, ch[i].refs->name[r]))++;
			if (ch[i].file_path) {
				if (strmap_get(&c.paths, ch[i].file_path, NULL)) {
					intptr_t j;
					strmap_get(&c.paths, ch[i].file_path, &j);
					snprintf(err, errlen, "%s: path '%s' is already the path of %s", ch[i].name,
						 ch[i].file_path, ch[j].name);
					goto out;
				}
				*strmap_ref(&c.paths, ch[i].file_path) = (intptr_t)i;
				dirs_adjust(&c, ch[i].file_path, +1);
			}
		}
	}

	for (size_t i = 0; i < n; i++) {
		for (int r = 0; ch[i].upsert && ch[i].refs && r < ch[i].refs->n; r++) {
			const char *ref = ch[i].refs->name[r];
			if (!cand_exists(&c, ref)) {
				snprintf(err, errlen, "%s: unknown %s '%s'", ch[i].name,
					 resource_type_name(resource_type_of(ref)), bare(ref));
				goto out;
			}
		}
	}
	for (size_t i = 0; i < n; i++) {
		uint32_t referrers = 0;
		if (ch[i].upsert || !b->lookup(b->ctx, ch[i].name, NULL, NULL, &referrers, NULL))
			continue;
		intptr_t d = 0;
		strmap_get(&c.ref_delta, ch[i].name, &d);
		if ((intptr_t)referrers + d > 0) {
			/* an upsert of the write referring to it failed above as a
			 * dangling reference: the referrer is in the base */
			const char *who = b->referrer_of ? b->referrer_of(b->ctx, ch[i].name, in_write, &c) : NULL;
			snprintf(err, errlen, "cannot remove %s: %s refers to it", ch[i].name,
				 who ? who : "another resource");
			goto out;
		}
	}
	if (check_paths(&c, err, errlen) < 0)
		goto out;
	rc = 0;
out:
	strmap_release(&c.in_write);
	strmap_release(&c.ref_delta);
	strmap_release(&c.paths);
	strmap_release(&c.dirs);
	for (size_t i = 0; i < c.nowned; i++)
		free(c.owned[i]);
	free(c.owned);
	return rc;
}
