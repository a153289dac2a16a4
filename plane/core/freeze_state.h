/* core/freeze_state.h: the freeze window as the plane keeps it
 * (docs/protocol.md "Freeze windows"): the record in the store's backend
 * (freeze_load / freeze_save), what this plane last saw of it, the check
 * every write makes (writer_commit), the hold on a staged rollout, the
 * freeze and thaw events, /v1/status's member and the tether_frozen
 * metric. A write, and a rollout before it moves, ask the backend itself,
 * so a freeze set on one replica holds at once on every other; the rest
 * (status, events, metric) reads what the keeper last saw
 * (it looks again once a second on a shared backend). One mutex, a leaf
 * (events only are called under it). */
#ifndef TETHER_FREEZE_STATE_H
#define TETHER_FREEZE_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "freeze.h"

struct persist;
struct events;
struct freeze_state;

/* Reads the stored record (a record that cannot be read is logged and
 * counts as none). NULL ps->ops->freeze_load: never frozen (a relay). */
struct freeze_state *freeze_state_new(struct persist *ps, struct events *ev);
void freeze_state_free(struct freeze_state *f);

/* The freeze that holds now, as last seen: true with *out (may be NULL). */
bool freeze_state_now(struct freeze_state *f, struct freeze_rec *out);
/* Asks the backend: 1 with *out (a freeze holds now), 0 none (or one that
 * ended), PERSIST_UNAVAILABLE or -1 with err. */
int freeze_state_read(struct freeze_state *f, struct freeze_rec *out, char *err, size_t errlen);
/* Stores rec (a new freeze) or, rec NULL, ends the freeze (ended_by: who
 * asked); the events follow. 0, or PERSIST_UNAVAILABLE or -1 with err. */
int freeze_state_set(struct freeze_state *f, const struct freeze_rec *rec, const char *ended_by, char *err,
		     size_t errlen);
/* From the keeper: looks at the backend again (a shared one, at most
 * once a second) and announces a freeze that ended by itself. */
void freeze_state_tick(struct freeze_state *f);

/* writer_commit's check of a write with override (X-Tether-Override, NULL:
 * none) by an admin or not: 0 when it goes on (*passed set when it goes on
 * only because an admin's override passed a freeze), else the status it
 * is refused with (423; 503 when the freeze cannot be read) and why in
 * err. NULL f: 0. */
unsigned freeze_state_check(struct freeze_state *f, const char *override, bool admin, bool *passed, char *err,
			    size_t errlen);
/* A write by author that passed a freeze with override landed as version:
 * logged, and the event freeze_passed {"version","by","reason","freeze"}. */
void freeze_state_passed(struct freeze_state *f, uint64_t version, const char *author, const char *override);

/* Whether a staged rollout is held now, as last seen (for its status):
 * true with why ("held: frozen until T by WHO: MESSAGE"; why may be NULL). */
bool freeze_state_holds(struct freeze_state *f, char *why, size_t cap);
/* Whether a staged rollout must stay where it is before it moves (a next
 * stage, completion, a new rollout), asked of the backend as a write's
 * check is (not the keeper's view, which may be a second old on a shared
 * backend): true while a freeze holds, or when it cannot be read (logged
 * once). NULL f: false. */
bool freeze_state_blocks(struct freeze_state *f);
/* ,"freeze":{record} when a freeze holds (nothing otherwise). */
void freeze_state_member(struct freeze_state *f, struct buf *out);
/* tether_frozen for /metrics. */
void freeze_state_metrics(struct freeze_state *f, struct buf *out);

#endif
