/* core/overrides.h: the versions whose write carried an override of the
 * guards (tetherctl --override), in memory, so that a statement (and a
 * push) for version V can say the newest such version <= V ("overridden",
 * statement.h). Filled from the version log at start, by this plane's
 * commits, and by other replicas' commits as the follower sees them. One
 * mutex, a leaf. */
#ifndef TETHER_OVERRIDES_H
#define TETHER_OVERRIDES_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "persist/persist.h"

struct overrides;

struct overrides *overrides_new(void);
void overrides_free(struct overrides *o);
/* Notes the overridden versions among the newest limit of the version
 * log (a backend without a log: none). Returns 0, or -1 with err. */
int overrides_load(struct overrides *o, struct persist *p, size_t limit, char *err, size_t errlen);
/* Marks version v overridden; takes back one mark (a commit that did not
 * land): v stays marked while another mark holds (another replica's real
 * override of the same number, seen meanwhile). */
void overrides_note(struct overrides *o, uint64_t v);
void overrides_forget(struct overrides *o, uint64_t v);
/* The newest overridden version <= v, 0 when none. NULL o: 0. */
uint64_t overrides_at(struct overrides *o, uint64_t v);
/* The relay stream's state event member ,"overridden":[V...] (nothing when
 * none): the overridden versions in (lo, hi], so that a relay knows them
 * without a statement (an unsigned plane) and without a log. */
void overrides_relay_member(struct overrides *o, uint64_t lo, uint64_t hi, struct buf *out);
/* A push's unsigned "overridden":N, member (with its comma; nothing when
 * none) for version: this plane's record, or on a relay, which keeps
 * none, what the statement stmt it forwards says (NULL: not a relay). */
void overrides_push_field(struct overrides *o, uint64_t version, const char *stmt, struct buf *out);

#endif
