/* state/state.h: the agent's applied state (every resource at its canonical
 * body) and candidates: a push applied to a copy-on-write overlay of the
 * state, validated whole -- fields, names, every reference, file paths --
 * before anything changes. Building a candidate costs O(changed) for a
 * delta (a snapshot is O(total) by nature); unchanged bodies are dropped,
 * so re-sending identical content is no change at all. */
#ifndef TETHER_STATE_H
#define TETHER_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pathindex.h"
#include "state/push.h"
#include "strmap.h"

struct res {
	char *name;           /* name and body share the struct's allocation */
	char *body;           /* canonical JSON */
	size_t body_len;
	uint64_t version;     /* the version of its last change */
	int nrefs;
	char **refs;
	uint32_t referrers;   /* live resources referring to it */
	char *file_path;      /* file resources: the output path */
};

struct state {
	uint64_t version;
	struct res **slots;      /* open addressing by name: 8 bytes a slot */
	size_t cap;
	size_t count;
	size_t raw_bytes;        /* names and bodies */
	struct pathindex paths;
};

struct cand_item {
	struct res *new_res;     /* NULL for a removal (owned until commit) */
	const struct res *old;   /* what it replaces, or NULL */
};

struct candidate {
	uint64_t version, base;
	bool full;
	char nonce[PUSH_NONCE_MAX];
	const char *statement;   /* the signed statement of its state (borrowed), or NULL */
	struct cand_item *items; /* effective changes only */
	size_t n;
};

#define STATE_STRICT 1u      /* refuse unknown fields */

void state_init(struct state *s);
void state_release(struct state *s);
const struct res *state_get(const struct state *s, const char *name);

/* Makes a resource from a canonical body (takes body); NULL and err when
 * the body does not parse or validate. For loading last-good. */
struct res *res_new(const char *name, char *body, size_t len, uint64_t version, char *err, size_t errlen);
void res_free(struct res *r);

/* Builds a candidate from a decoded push. Returns 0, or -1 with err (the
 * NACK's message). Does not touch s. */
int candidate_build(const struct state *s, const struct push *p, unsigned flags, struct candidate *c,
		    char *err, size_t errlen);
/* Checks a set of changes built by hand (last-good replay) the same way. */
int candidate_check(const struct state *s, const struct candidate *c, char *err, size_t errlen);
void candidate_release(struct candidate *c);

/* Applies a built candidate: s becomes the candidate state at c->version.
 * c is emptied (its resources now belong to s). */
void state_commit(struct state *s, struct candidate *c);

/* Calls fn for every resource (unordered). */
void state_each(const struct state *s, void (*fn)(void *ctx, const struct res *r), void *ctx);

#endif
