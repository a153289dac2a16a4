/* core/ticket_keeper.h: the plane's TLS session-ticket keys: kept in the
 * store (persist.h, ticket_keys_*), so a node's session resumes after the
 * plane restarts and on another replica; rotated every
 * --tls-ticket-rotation seconds, the previous key kept one more period. A
 * relay's backend keeps none: its keys live in its memory only. Secret:
 * never logged, never served; wiped when replaced. http/tickets.c hands
 * them to GnuTLS. */
#ifndef TETHER_TICKET_KEEPER_H
#define TETHER_TICKET_KEEPER_H

#include <stddef.h>
#include <stdint.h>
#include "persist/persist.h"

struct ticket_keeper;

/* Loads the keys (made and stored when there are none, rotated when they
 * are due) and starts the thread that rotates them and reads another
 * replica's rotation. NULL with err. */
struct ticket_keeper *ticket_keeper_open(struct persist *p, int64_t rotation_s, char *err, size_t errlen);
void ticket_keeper_free(struct ticket_keeper *t);

/* The keys now (a copy: the caller wipes it), and the period. */
void ticket_keeper_keys(struct ticket_keeper *t, struct persist_ticket_keys *out);
int64_t ticket_keeper_period(struct ticket_keeper *t);

/* Key rotations this process made or read from the store (for /metrics). */
uint64_t ticket_keeper_rotations(struct ticket_keeper *t);

#endif
