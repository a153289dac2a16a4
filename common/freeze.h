/* freeze.h: a freeze window's rules, shared by the plane and tetherctl
 * (docs/protocol.md "Freeze windows"): the TIME a person gives (RFC 3339
 * UTC or a duration from now), the checks on a freeze's end and message,
 * the record {until, message, by, at} as JSON both ways, and the words a
 * refused write gets. No allocation but the parsers' cJSON. */
#ifndef TETHER_FREEZE_H
#define TETHER_FREEZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct buf;

#define FREEZE_MESSAGE_MAX 1024               /* bytes of a freeze's message */
#define FREEZE_BY_MAX 320                     /* bytes of its author (as the version log's) */
#define FREEZE_MAX_AHEAD (30 * 86400)         /* a freeze ends at most 30 days from now */
#define FREEZE_RECORD_MAX 8192                /* bytes of a record or a PUT body as JSON */

/* A freeze: it holds while now < until (wall seconds). */
struct freeze_rec {
	int64_t until;                        /* when it ends by itself */
	int64_t at;                           /* when it was set */
	char message[FREEZE_MESSAGE_MAX + 1]; /* why (one line) */
	char by[FREEZE_BY_MAX + 1];           /* who set it */
};

/* TIME as tetherctl takes it: "2026-12-06T18:00:00Z" (RFC 3339, UTC,
 * whole seconds) or a duration from now: digits and a unit s, m, h or d,
 * one or more ("90m", "2h", "1d", "1h30m"). 0 with *out (wall seconds),
 * or -1 with err naming what is wrong. */
int freeze_parse_time(const char *s, int64_t now, int64_t *out, char *err, size_t errlen);

/* Writes t as RFC 3339 UTC ("2026-12-06T18:00:00Z"); out holds 32 bytes. */
void freeze_time_text(int64_t t, char out[32]);

/* The checks on a freeze being set at now: until in the future and at
 * most FREEZE_MAX_AHEAD ahead; a message, one line (no control
 * characters), at most FREEZE_MESSAGE_MAX bytes. 0, or -1 with err naming
 * the field and what to do. */
int freeze_check(int64_t until, const char *message, int64_t now, char *err, size_t errlen);

/* Whether f holds at now. */
bool freeze_active(const struct freeze_rec *f, int64_t now);

/* Appends the record: {"at":A,"by":B,"message":M,"until":T} (sorted keys). */
void freeze_rec_json(const struct freeze_rec *f, struct buf *out);
/* Reads a record (what freeze_rec_json writes; a stored one): every
 * member present and typed, nothing else; message and by within their
 * bounds. 0, or -1 with err. */
int freeze_rec_parse(const char *text, size_t len, struct freeze_rec *f, char *err, size_t errlen);
/* Reads PUT /v1/freeze's body {"until":T,"message":M}: until in wall
 * seconds, a message; other members refused. Checks freeze_check at now.
 * 0 with f's until and message (by and at left), or -1 with err. */
int freeze_body_parse(const char *text, size_t len, int64_t now, struct freeze_rec *f, char *err, size_t errlen);

/* The version log's override record's "passed" list with "freeze" first:
 * passed is a JSON array of strings (new allocated, or NULL: none),
 * taken; returns a new allocated array ("[\"freeze\"]" from NULL or
 * "[]"). For a write an admin's override passed through a freeze. */
char *freeze_passed_add(char *passed);

/* What a write refused by f is told: "frozen until 2026-12-06T18:00:00Z by
 * alice: MESSAGE (an admin may pass with --override REASON)". */
void freeze_refusal(const struct freeze_rec *f, char *out, size_t cap);
/* What a held rollout says: "held: frozen until T by WHO: MESSAGE". */
void freeze_hold_text(const struct freeze_rec *f, char *out, size_t cap);

#endif
