/* persist/ticket_keys.h: the TLS session-ticket keys as the backends store
 * them: one line of text, "tether-ticket-keys 1 CREATED CUR PREV", the
 * keys in hex (PREV "-": none). Shared by persist/sqlite and persist/etcd. */
#ifndef TETHER_PERSIST_TICKET_KEYS_H
#define TETHER_PERSIST_TICKET_KEYS_H

#include "persist/persist.h"

/* The text's length at most (with its NUL). */
#define TICKET_KEYS_TEXT 320

/* Formats k into out (TICKET_KEYS_TEXT bytes); its length. The caller
 * wipes out when done (it is the secret). */
size_t ticket_keys_encode(const struct persist_ticket_keys *k, char out[TICKET_KEYS_TEXT]);
/* Parses len bytes of text into *k: 0, or -1 when it is not a whole, well
 * formed record (*k then holds nothing). Never says what it read. */
int ticket_keys_decode(const char *text, size_t len, struct persist_ticket_keys *k);

#endif
