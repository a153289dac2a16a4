/* lastgood.h: the agent's last-good state on disk, in --state-dir:
 * generations of a zlib-compressed snapshot (BLAKE2b checksum) plus an
 * append-only journal of the pushes applied since (each record CRC-checked,
 * fsync'd before the ACK). A push costs one journal append, O(changed);
 * when the journal outgrows the snapshot a new generation is written
 * (temp file, fsync, rename, fsync dir) and the previous one is kept. A
 * damaged snapshot falls back to the previous generation; a torn journal
 * tail ends the replay at the last whole record. Each snapshot and record
 * keeps the signed statement of the state it leaves (with --trust), and a
 * generation whose state does not verify against it is refused. Beside
 * them, lastgood.pending records the apply in flight (below): what a boot
 * after a crash between the swap and the commit needs to finish it. A
 * state directory without it (an older agent's) loads as before. */
#ifndef TETHER_LASTGOOD_H
#define TETHER_LASTGOOD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "state/state.h"

struct lastgood;

/* Opens dir (creating it 0700). Returns NULL with err. */
struct lastgood *lastgood_open(const char *dir, char *err, size_t errlen);
void lastgood_close(struct lastgood *lg);

/* Judges a loaded generation (state s and the statement kept with it,
 * NULL when none): 0 takes it, -1 with err refuses it and the previous
 * generation is tried. */
typedef int (*lastgood_verify_fn)(void *ctx, const struct state *s, const char *statement, char *err,
				  size_t errlen);
void lastgood_set_verify(struct lastgood *lg, lastgood_verify_fn fn, void *ctx);
/* The signed statement of what last-good holds now (NULL: none). A
 * candidate's statement is kept with it; lastgood_compact keeps this one. */
const char *lastgood_statement(const struct lastgood *lg);
/* Whether the last lastgood_load refused a generation that did not verify. */
bool lastgood_refused(const struct lastgood *lg);

/* Loads the newest good generation into s (an empty, initialised state).
 * Returns 1 when something was loaded, 0 when there is no last-good yet,
 * -1 with err when no generation could be read. */
int lastgood_load(struct lastgood *lg, struct state *s, char *err, size_t errlen);

/* Persisting in two steps, so that a full disk is found before anything
 * goes live. lastgood_prepare readies the result of applying c to s (call
 * before state_commit: s is the old state, c the changes): the journal
 * record compressed and its space reserved past the journal's end, or a new
 * generation's snapshot written to a temp file and fsync'd. -1 with err
 * (ENOSPC among others), and then nothing is pending. lastgood_commit makes
 * it durable (append + fsync, or rename + fsync(dir)): 0, or -1 with err on
 * any I/O error, and then nothing was recorded. lastgood_abandon drops what
 * is pending (after a failed swap, reload or health probe). One pending
 * save at a time; prepare abandons an earlier one. */
int lastgood_prepare(struct lastgood *lg, const struct state *s, const struct candidate *c, char *err,
		     size_t errlen);
int lastgood_commit(struct lastgood *lg, char *err, size_t errlen);
void lastgood_abandon(struct lastgood *lg);

/* The apply in flight (STATE_DIR/lastgood.pending), so that an apply the
 * agent did not live to commit is finished at boot, not undone.
 * lastgood_pending records, before the candidate c goes live (the swap),
 * what it is -- its changes on s, last-good's state, with its version and
 * statement -- and the consumer's generation it goes live as (gen, NULL
 * when the consumer has none): one CRC-checked record, fdatasync'd. Call
 * it after lastgood_prepare of the same s and c (the journal record that
 * readied is reused). 0, or -1 with err (then nothing may go live). A successful lastgood_commit
 * makes it void (what it names is last-good now); lastgood_pending_drop
 * makes it void durably (before a refused candidate's output is put back:
 * a refusal is never finished at boot). */
int lastgood_pending(struct lastgood *lg, const struct state *s, const struct candidate *c, const char *gen,
		     char *err, size_t errlen);
void lastgood_pending_drop(struct lastgood *lg);
/* At boot, after lastgood_load: the apply in flight, against s (what was
 * loaded). 1: one is, of exactly this last-good (its base version,
 * generation and journal length): *c gets its changes on s (release it
 * with candidate_release; c->statement borrows *statement), *statement
 * and *gen (NULL: none) are the caller's to free. 0: none, or one that is
 * not of this last-good (committed since, or last-good fell back). -1 with
 * err: a damaged record (torn, a checksum, does not parse or does not
 * apply on s), to be ignored. On 0 and -1 the record is made void. */
int lastgood_pending_load(struct lastgood *lg, const struct state *s, struct candidate *c, char **statement,
			  char **gen, char *err, size_t errlen);

/* Prepare and commit in one go. */
int lastgood_save(struct lastgood *lg, const struct state *s, const struct candidate *c, char *err, size_t errlen);

/* Writes a new generation holding exactly s. */
int lastgood_compact(struct lastgood *lg, const struct state *s, char *err, size_t errlen);

struct lastgood_info {
	unsigned long long generation;
	size_t snapshot_bytes, journal_bytes, journal_records;
};
void lastgood_info(const struct lastgood *lg, struct lastgood_info *info);

#endif
