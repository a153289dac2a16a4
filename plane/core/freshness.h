/* core/freshness.h: whether this plane can vouch that what it serves is
 * current. A replica cut off from etcd, or a relay cut off from its
 * upstream (or following a stale one), is stale: it keeps serving what it
 * holds (static stability) but says so -- in every heartbeat and push
 * ("stale":{"since","why"}), in /healthz (503), /v1/status, /metrics and
 * the console -- and refuses writes. Nodes then move to a plane that is
 * not stale. The backend judges (persist_ops.stale); the ticker asks it
 * and announces each change once. */
#ifndef TETHER_FRESHNESS_H
#define TETHER_FRESHNESS_H

#include <stdbool.h>
#include <stdint.h>

#include "buf.h"

struct persist;

struct fresh_view {
	bool stale;
	int64_t since;               /* wall seconds it went stale */
	char why[256];
};

struct freshness *freshness_new(void);
void freshness_free(struct freshness *f);
/* Asks the backend now (the ticker). True when the plane went stale or
 * fresh (logged, one line each way). *recheck_ms: the monotonic time by
 * which to ask again (its answer may change without news). */
bool freshness_update(struct freshness *f, struct persist *p, int64_t *recheck_ms);
void freshness_get(struct freshness *f, struct fresh_view *v);
/* The backend's word now, without announcing it (a write asks: the
 * ticker's last answer may be up to half a second old). */
void freshness_ask(struct persist *p, struct fresh_view *v);
bool freshness_stale(struct freshness *f);
/* While stale: appends ,"stale":{"since":N,"why":"..."} (a JSON member
 * for a heartbeat, a push or /v1/status). */
void freshness_member(struct freshness *f, struct buf *b);
/* The same with only the reason's first clause (the open /healthz: the
 * addresses and errors in the rest are for readers, GET /v1/status). */
void freshness_member_brief(struct freshness *f, struct buf *b);
/* The value of a Tether-Stale header ("SINCE WHY"), or false when fresh. */
bool freshness_header(struct freshness *f, char *out, size_t cap);
/* Times the plane went stale since it started. */
uint64_t freshness_episodes(struct freshness *f);

#endif
