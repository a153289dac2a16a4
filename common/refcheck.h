/* refcheck.h: checks a write against the whole candidate state -- the base
 * state with the write applied -- without building the candidate: every
 * reference of an upsert resolves, no removal leaves a referrer behind, no
 * name appears twice, and no two files claim one path (or a file's path is
 * another file's directory). Cost O(changed): the base answers lookups and
 * keeps referrer counts and path indexes. The plane (store) and the agent
 * (applied state) both check writes with it, so they always agree. */
#ifndef TETHER_REFCHECK_H
#define TETHER_REFCHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "resource.h"

struct refcheck_change {
	const char *name;
	bool upsert;                   /* false: a removal */
	const struct res_refs *refs;   /* an upsert's references */
	const char *file_path;         /* an upserted file's path, else NULL */
};

struct refcheck_base {
	void *ctx;
	/* Is name live in the base? If so, its references, its count of live
	 * referrers and (files) its path. */
	bool (*lookup)(void *ctx, const char *name, const char *const **refs, int *nrefs,
		       uint32_t *referrers, const char **file_path);
	/* The live file at exactly path, or NULL. */
	const char *(*file_at)(void *ctx, const char *path);
	/* How many live files lie under directory path ("a/b" for "a/b/c"). */
	uint32_t (*files_under)(void *ctx, const char *dir);
	/* Some live referrer of name that skip() does not reject, for the
	 * message; NULL when unknown. */
	const char *(*referrer_of)(void *ctx, const char *name, bool (*skip)(void *sctx, const char *name),
				   void *sctx);
};

/* Returns 0, or -1 with err ("route/z: unknown cluster 'z'", "cannot remove
 * cluster/x: route/y refers to it", "file/b: path 'x' is already the path
 * of file/a"). */
int refcheck_candidate(const struct refcheck_base *b, const struct refcheck_change *ch, size_t n,
		       char *err, size_t errlen);

#endif
