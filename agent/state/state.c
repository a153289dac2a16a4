/* state/state.c: the agent's applied state and candidates (see
 * state/state.h). */
#include "state/state.h"
#include "buf.h"
#include "json.h"
#include "log.h"
#include "refcheck.h"
#include "resource.h"
#include "xmalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the name table: slots hold the resources themselves, keyed by their
 * name, linear probing, at most three quarters full ------------------------ */

static size_t tab_home(const struct state *s, const char *name)
{
	return strmap_hash(name) & (s->cap - 1);
}

static struct res **tab_find(const struct state *s, const char *name)
{
	if (!s->cap)
		return NULL;
	size_t i = tab_home(s, name);
	while (s->slots[i] && strcmp(s->slots[i]->name, name) != 0)
		i = (i + 1) & (s->cap - 1);
	return &s->slots[i];
}

static void tab_grow(struct state *s)
{
	struct state bigger = *s;
	bigger.cap = s->cap ? s->cap * 2 : 64;
	bigger.slots = xcalloc(bigger.cap, sizeof(*bigger.slots));
	for (size_t i = 0; i < s->cap; i++)
		if (s->slots[i])
			*tab_find(&bigger, s->slots[i]->name) = s->slots[i];
	free(s->slots);
	s->slots = bigger.slots;
	s->cap = bigger.cap;
}

/* Puts r in (replacing a resource of the same name); the caller counts. */
static void tab_put(struct state *s, struct res *r)
{
	if ((s->count + 1) * 4 > s->cap * 3)
		tab_grow(s);
	*tab_find(s, r->name) = r;
}

static void tab_del(struct state *s, const char *name)
{
	struct res **slot = tab_find(s, name);
	if (!slot || !*slot)
		return;
	/* backward-shift deletion keeps probe chains whole */
	size_t i = (size_t)(slot - s->slots), j = i;
	for (;;) {
		j = (j + 1) & (s->cap - 1);
		if (!s->slots[j])
			break;
		size_t home = tab_home(s, s->slots[j]->name);
		bool between = i <= j ? (home > i && home <= j) : (home > i || home <= j);
		if (!between) {
			s->slots[i] = s->slots[j];
			i = j;
		}
	}
	s->slots[i] = NULL;
}

void state_init(struct state *s)
{
	memset(s, 0, sizeof(*s));
	pathindex_init(&s->paths);
}

void res_free(struct res *r)
{
	if (!r)
		return;
	for (int i = 0; i < r->nrefs; i++)
		free(r->refs[i]);
	free(r->refs);
	free(r->file_path);
	free(r);   /* name and body live in the same block */
}

void state_release(struct state *s)
{
	for (size_t i = 0; i < s->cap; i++)
		res_free(s->slots[i]);
	free(s->slots);
	pathindex_release(&s->paths);
	memset(s, 0, sizeof(*s));
}

const struct res *state_get(const struct state *s, const char *name)
{
	struct res **slot = tab_find(s, name);
	return slot ? *slot : NULL;
}

void state_each(const struct state *s, void (*fn)(void *ctx, const struct res *r), void *ctx)
{
	for (size_t i = 0; i < s->cap; i++)
		if (s->slots[i])
			fn(ctx, s->slots[i]);
}

/* Fills r's refs and file path from a validated body. */
static void res_fill(struct res *r, const cJSON *body, const struct res_refs *refs)
{
	r->nrefs = refs->n;
	r->refs = refs->n ? xmalloc((size_t)refs->n * sizeof(char *)) : NULL;
	for (int i = 0; i < refs->n; i++)
		r->refs[i] = xstrdup(refs->name[i]);
	if (resource_type_of(r->name) == RES_FILE) {
		const char *path = json_get_string(body, "path");
		r->file_path = path ? xstrdup(path) : NULL;
	}
}

/* One block holds the struct, the name and the body: a resource costs one
 * allocation, not three (it matters at 100,000 resources). */
static struct res *res_alloc(const char *name, const char *body, size_t len, uint64_t version)
{
	size_t nl = strlen(name);
	struct res *r = xmalloc(sizeof(*r) + nl + 1 + len + 1);
	memset(r, 0, sizeof(*r));
	r->name = (char *)(r + 1);
	memcpy(r->name, name, nl + 1);
	r->body = r->name + nl + 1;
	memcpy(r->body, body, len);
	r->body[len] = '\0';
	r->body_len = len;
	r->version = version;
	return r;
}

struct res *res_new(const char *name, char *body, size_t len, uint64_t version, char *err, size_t errlen)
{
	char inner[512];
	cJSON *v = json_decode(body, len, NULL, inner, sizeof(inner));
	if (!v) {
		snprintf(err, errlen, "%s: %s", name, inner);
		free(body);
		return NULL;
	}
	struct res_refs refs;
	if (resource_validate(name, v, 0, &refs, err, errlen) < 0) {
		cJSON_Delete(v);
		free(body);
		return NULL;
	}
	struct res *r = res_alloc(name, body, len, version);
	free(body);
	res_fill(r, v, &refs);
	cJSON_Delete(v);
	return r;
}

/* ---- refcheck's view of the state ------------------------------------- */

static bool base_lookup(void *ctx, const char *name, const char *const **refs, int *nrefs,
			uint32_t *referrers, const char **file_path)
{
	const struct res *r = state_get(ctx, name);
	if (!r)
		return false;
	if (refs)
		*refs = (const char *const *)r->refs;
	if (nrefs)
		*nrefs = r->nrefs;
	if (referrers)
		*referrers = r->referrers;
	if (file_path)
		*file_path = r->file_path;
	return true;
}

static const char *base_file_at(void *ctx, const char *path)
{
	const struct state *s = ctx;
	return pathindex_file_at(&s->paths, path);
}

static uint32_t base_files_under(void *ctx, const char *dir)
{
	const struct state *s = ctx;
	return pathindex_files_under(&s->paths, dir);
}

static const char *base_referrer_of(void *ctx, const char *name, bool (*skip)(void *, const char *), void *sctx)
{
	const struct state *s = ctx;
	/* only on the error path: a scan is fine */
	for (size_t i = 0; i < s->cap; i++) {
		const struct res *r = s->slots[i];
		if (!r || skip(sctx, r->name))
			continue;
		for (int k = 0; k < r->nrefs; k++)
			if (strcmp(r->refs[k], name) == 0)
				return r->name;
	}
	return NULL;
}

int candidate_check(const struct state *s, const struct candidate *c, char *err, size_t errlen)
{
	struct refcheck_change *ch = xcalloc(c->n ? c->n : 1, sizeof(*ch));
	struct res_refs *refs = xcalloc(c->n ? c->n : 1, sizeof(*refs));
	for (size_t i = 0; i < c->n; i++) {
		const struct res *r = c->items[i].new_res;
		ch[i].name = r ? r->name : c->items[i].old->name;
		ch[i].upsert = r != NULL;
		if (r) {
			refs[i].n = r->nrefs;
			for (int k = 0; k < r->nrefs; k++)
				snprintf(refs[i].name[k], sizeof(refs[i].name[k]), "%s", r->refs[k]);
			ch[i].refs = &refs[i];
			ch[i].file_path = r->file_path;
		}
	}
	struct refcheck_base b = {
		.ctx = (void *)s, .lookup = base_lookup, .file_at = base_file_at,
		.files_under = base_files_under, .referrer_of = base_referrer_of,
	};
	int rc = refcheck_candidate(&b, ch, c->n, err, errlen);
	free(ch);
	free(refs);
	return rc;
}

/* ---- candidates --------------------------------------------------------- */

static void cand_push(struct candidate *c, size_t *cap, struct res *new_res, const struct res *old)
{
	if (c->n == *cap) {
		*cap = *cap ? *cap * 2 : 16;
		c->items = xrealloc(c->items, *cap * sizeof(*c->items));
	}
	c->items[c->n].new_res = new_res;
	c->items[c->n].old = old;
	c->n++;
}

struct full_ctx {
	const struct push *p;
	struct strmap *in_push;
	struct candidate *c;
	size_t *cap;
};

static void full_removal(void *ctx, const struct res *r)
{
	struct full_ctx *f = ctx;
	if (!strmap_get(f->in_push, r->name, NULL))
		cand_push(f->c, f->cap, NULL, r);
}

int candidate_build(const struct state *s, const struct push *p, unsigned flags, struct candidate *c,
		    char *err, size_t errlen)
{
	size_t cap = 0;
	struct strmap seen;
	struct buf canon = BUF_INIT;   /* reused: no temporary block per resource */
	strmap_init(&seen);
	memset(c, 0, sizeof(*c));
	c->version = p->version;
	c->base = p->base;
	c->full = p->full;
	snprintf(c->nonce, sizeof(c->nonce), "%s", p->nonce);

	for (size_t i = 0; i < p->nup; i++) {
		const struct push_upsert *u = &p->up[i];
		if (strmap_get(&seen, u->name, NULL)) {
			snprintf(err, errlen, "%s: named twice in one push", u->name);
			goto fail;
		}
		*strmap_ref(&seen, u->name) = 1;
		struct res_refs refs;
		if (resource_validate(u->name, u->body, (flags & STATE_STRICT) ? RES_STRICT : 0, &refs, err, errlen) < 0)
			goto fail;
		size_t len = json_encode_canonical_buf(u->body, &canon);
		const struct res *old = state_get(s, u->name);
		if (old && old->body_len == len && memcmp(old->body, canon.data, len) == 0)
			continue;    /* the same body: not a change */
		struct res *r = res_alloc(u->name, canon.data, len, u->version ? u->version : p->version);
		res_fill(r, u->body, &refs);
		cand_push(c, &cap, r, old);
	}
	for (size_t i = 0; i < p->nrm; i++) {
		const char *name = p->removed[i];
		if (strmap_get(&seen, name, NULL)) {
			snprintf(err, errlen, "%s: named twice in one push", name);
			goto fail;
		}
		*strmap_ref(&seen, name) = 1;
		const struct res *old = state_get(s, name);
		if (old)
			cand_push(c, &cap, NULL, old);
	}
	if (p->full) {
		/* a snapshot replaces everything: what it lacks is removed */
		struct full_ctx f = { p, &seen, c, &cap };
		state_each(s, full_removal, &f);
	}
	if (candidate_check(s, c, err, errlen) < 0)
		goto fail;
	strmap_release(&seen);
	buf_release(&canon);
	return 0;
fail:
	strmap_release(&seen);
	buf_release(&canon);
	candidate_release(c);
	return -1;
}

void candidate_release(struct candidate *c)
{
	for (size_t i = 0; i < c->n; i++)
		res_free(c->items[i].new_res);
	free(c->items);
	c->items = NULL;
	c->n = 0;
}

static void refs_adjust(struct state *s, const struct res *r, int delta)
{
	for (int i = 0; i < r->nrefs; i++) {
		struct res **t = tab_find(s, r->refs[i]);
		if (t && *t)
			(*t)->referrers = (uint32_t)((int64_t)(*t)->referrers + delta);
	}
}

static void detach(struct state *s, struct res *old)
{
	if (old->file_path)
		pathindex_remove(&s->paths, old->file_path);
	tab_del(s, old->name);
	s->count--;
	s->raw_bytes -= strlen(old->name) + old->body_len;
}

void state_commit(struct state *s, struct candidate *c)
{
	/* drop the references of everything replaced or removed while all of
	 * it is still there, take it out, put in the new, add the new
	 * references: counts stay right whatever the order inside the push */
	for (size_t i = 0; i < c->n; i++)
		if (c->items[i].old)
			refs_adjust(s, c->items[i].old, -1);
	for (size_t i = 0; i < c->n; i++) {
		struct res *old = (struct res *)c->items[i].old;
		if (old) {
			uint32_t keep = old->referrers;
			detach(s, old);
			if (c->items[i].new_res)
				c->items[i].new_res->referrers = keep;
		}
	}
	for (size_t i = 0; i < c->n; i++) {
		struct res *r = c->items[i].new_res;
		if (!r)
			continue;
		tab_put(s, r);
		s->count++;
		s->raw_bytes += strlen(r->name) + r->body_len;
		if (r->file_path)
			pathindex_add(&s->paths, r->file_path, r->name);
	}
	for (size_t i = 0; i < c->n; i++) {
		if (c->items[i].new_res)
			refs_adjust(s, c->items[i].new_res, +1);
		res_free((struct res *)c->items[i].old);
		c->items[i].new_res = NULL;
		c->items[i].old = NULL;
	}
	s->version = c->version;
	free(c->items);
	c->items = NULL;
	c->n = 0;
}
