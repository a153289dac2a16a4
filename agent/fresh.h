/* fresh.h: the pure part of fresh.c (whether the plane tetherd is on is
 * current, and the move to one that is): reading a plane's "stale" (a
 * heartbeat's or push's member, a poll answer's Tether-Stale header, a
 * /healthz answer) and the decisions -- which plane to probe next, how long
 * to wait before a probe. No I/O, no clock: times are passed in. */
#ifndef TETHER_FRESH_H
#define TETHER_FRESH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

/* The reason a plane gives, as kept (cut on a character boundary). */
#define FRESH_WHY_MAX 256
/* A plane that said stale within this long is probed after every other. */
#define FRESH_RECENT_STALE_MS 30000
/* Moves off a stale plane within this long ... */
#define FRESH_MOVE_WINDOW_MS 60000
/* ... each add this much to the wait before the next probe ... */
#define FRESH_MOVE_PENALTY_MS 2000
/* ... up to this much. */
#define FRESH_MOVE_PENALTY_MAX_MS 10000
/* The moves remembered for that (more than the cap needs). */
#define FRESH_MOVES_KEPT 8

/* What a plane says of itself: stale (cut off from its source) since when
 * (wall seconds; 0 unknown) and why, or not (on false: fresh). */
struct plane_stale {
	bool on;
	int64_t since;
	char why[FRESH_WHY_MAX];
};

/* A heartbeat's or push's "stale" member (NULL: absent): absent, null or
 * false is fresh; an object {"since":N,"why":"TEXT"} is stale (a field
 * missing or of another type reads 0 or ""), and so is anything else there
 * (the plane says stale, if not how). */
void fresh_stale_from_json(const cJSON *member, struct plane_stale *out);
/* A poll answer's Tether-Stale header value v[0..len) ("SINCE WHY...":
 * decimal wall seconds, a space, the reason), present: stale; a SINCE
 * that does not parse reads 0 and the whole value is the reason. */
void fresh_stale_from_header(const char *v, size_t len, struct plane_stale *out);
/* Copies src[0..len) into dst (cap bytes, cap >= 1), printable: control
 * characters and bytes that are not UTF-8 become '?', and a cut falls on a
 * character's boundary. Plane-given text goes into logs and status.json
 * only through it. */
void fresh_clean_text(char *dst, size_t cap, const char *src, size_t len);

/* What a /healthz answer (HTTP status, body) says of a candidate, for a
 * node that holds version have. */
enum fresh_verdict {
	FRESH_UP,       /* 200 {"status":"ok","version":V} with V >= have: move there */
	FRESH_STALE,    /* it answers, and says it is stale (out filled) */
	FRESH_DOWN      /* anything else (not a plane, behind us): not a candidate */
};
enum fresh_verdict fresh_judge(long status, const char *body, size_t len, uint64_t have, struct plane_stale *out);

/* The order to probe in: every plane of n but current, in list order,
 * except that those that said stale within FRESH_RECENT_STALE_MS of now
 * (seen_stale_ms[i], monotonic ms; 0 never) come after every other, in
 * list order too. Writes out[] (n - 1 at most); returns how many. */
size_t fresh_order(size_t n, size_t current, const int64_t *seen_stale_ms, int64_t now_ms, size_t *out);
/* The back-off of stale-driven moves: FRESH_MOVE_PENALTY_MS for each move
 * of moves_ms[0..n) (monotonic ms; 0 unused) within FRESH_MOVE_WINDOW_MS
 * of now, FRESH_MOVE_PENALTY_MAX_MS at most. */
int64_t fresh_backoff_ms(const int64_t *moves_ms, size_t n, int64_t now_ms);
/* The wait before a probe: base_s, plus a jitter r01 (uniform in [0, 1))
 * of jitter_s, plus backoff_ms; in ms. */
int64_t fresh_delay_ms(double base_s, double jitter_s, double r01, int64_t backoff_ms);

#endif
