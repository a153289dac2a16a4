/* traffic/count.h: counting the live generation's requests from access log
 * datagrams: a new live generation starts from zero, lines of another
 * generation are counted apart (never as the live one's), and what cannot
 * be counted is dropped and counted by reason. Pure: no I/O, no clock. */
#ifndef TETHER_TRAFFIC_COUNT_H
#define TETHER_TRAFFIC_COUNT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "traffic.h"

enum traffic_drop {
	TD_MALFORMED,   /* not a line of docs/gates.md's format */
	TD_TOO_LONG,    /* over TRAFFIC_SYSLOG_MAX bytes */
	TD_FULL,        /* TRAFFIC_ROUTES_MAX routes are counted already */
	TD_N
};

/* Slots of the route index: twice TRAFFIC_ROUTES_MAX, a power of two. */
#define TRAFFIC_COUNT_SLOTS 256

struct traffic_count {
	struct traffic t;            /* the live generation's (gen "" while none is known);
	                              * t.dropped: drops since it went live */
	uint64_t dropped[TD_N];      /* since the agent started, by reason */
	uint64_t other_gen;          /* lines of another generation, since the start */
	size_t gen_len;
	/* t.routes by name's hash, open addressing: index + 1, 0 empty (a
	 * route's lookup costs the same with 1 or 128 routes) */
	uint8_t slot[TRAFFIC_COUNT_SLOTS];
};

void traffic_count_init(struct traffic_count *c);
void traffic_count_release(struct traffic_count *c);
/* The generation gen ("" or NULL: none known) serves version now. A
 * generation other than the one counted starts from zero, since now (wall
 * seconds); the same one keeps its counters (and takes the version).
 * Returns whether it was new. */
bool traffic_count_live(struct traffic_count *c, const char *gen, uint64_t version, double now);
/* The same generation serves something else from now (a runtime update:
 * haproxy changed its servers without a reload): its counters start from
 * zero, since now; lines of it still count. */
void traffic_count_restart(struct traffic_count *c, double now);
/* Counts one datagram: data, its real length len (more than
 * TRAFFIC_SYSLOG_MAX: too long; data then holds only the start). */
void traffic_count_datagram(struct traffic_count *c, const char *data, size_t len);
/* "malformed", "too_long", "full" */
const char *traffic_drop_name(enum traffic_drop d);

#endif
