/* traffic/auto.h: counting by default (docs/gates.md): without
 * --traffic-listen, an nginx or haproxy node binds a free loopback UDP
 * port itself for its consumer's access log -- the port it used last
 * (kept in STATE_DIR/traffic-listen, so a restart renders the same
 * configuration and reloads nothing) when it is still free, else one the
 * kernel picks (127.0.0.1:0). */
#ifndef TETHER_TRAFFIC_AUTO_H
#define TETHER_TRAFFIC_AUTO_H

#include <stddef.h>

/* The file in the state directory that remembers the port. */
#define TRAFFIC_AUTO_FILE "traffic-listen"

/* Binds the listener: the descriptor (nonblocking, close-on-exec) with
 * "127.0.0.1:PORT" in addr (cap bytes), or -1 with err. */
int traffic_auto_open(const char *state_dir, char *addr, size_t cap, char *err, size_t errlen);

#endif
