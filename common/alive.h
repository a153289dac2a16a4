/* alive.h: which of the plane's long-lived threads still turn, for
 * systemd's watchdog. A thread enters under a name (also its name in
 * /proc, "tp-NAME"), beats each time it turns, and says when it parks
 * waiting for work: a parked thread is alive however long it waits. A
 * thread waiting on a backend is not parked but alive all the same: its
 * calls have timeouts (etcd's 5 s) well under the bound, and a stream's
 * progress callback beats while it waits. A thread stuck in a loop or on
 * a lock it will never get stops beating: the ticker then stops feeding
 * the watchdog and says which thread it is (hub.c). */
#ifndef TETHER_ALIVE_H
#define TETHER_ALIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The calling thread is watched from now on (at most 64 at once; past
 * that it is not watched). */
void alive_enter(const char *name);
/* It ends: no longer watched. */
void alive_leave(void);
/* It turned. */
void alive_beat(void);
/* It parks waiting for work for at most max_ms (-1: as long as no work
 * comes), or is back from that (alive_unpark: a beat). A thread that has
 * not come back from a wait with a bound by then is stuck like any other. */
void alive_park(int64_t max_ms);
void alive_unpark(void);

/* A curl transfer of the calling thread beats while it waits (curl calls
 * its progress function at least once a second): a backend that does not
 * answer keeps the thread waiting, alive, until the call's timeout. */
void alive_curl(void *curl);

/* 0 when every watched thread is parked or beat within bound_ms; -1 with
 * who ("keeper: 41 s since it last turned") for the one stuck longest. */
int alive_check(int64_t bound_ms, char *who, size_t cap);

#endif
