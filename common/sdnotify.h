/* sdnotify.h: systemd's notify protocol (READY=1, STATUS=, WATCHDOG=1)
 * written by hand, without libsystemd: a datagram to $NOTIFY_SOCKET. Every
 * call is a no-op when the daemon does not run under a notify unit. */
#ifndef TETHER_SDNOTIFY_H
#define TETHER_SDNOTIFY_H

#include <stdbool.h>
#include <stdint.h>

/* Reads NOTIFY_SOCKET and WATCHDOG_USEC/WATCHDOG_PID once, opens the
 * socket, and clears them from the environment (children such as
 * `nginx -t` must not notify in our name). */
void sdnotify_init(void);

/* Sends one message (e.g. "READY=1\nSTATUS=..."); 0 on success or when
 * there is no socket, -1 (errno set) when the send failed. */
int sdnotify_send(const char *msg);

/* READY=1 with a STATUS= line. */
void sdnotify_ready(const char *status);

/* Whether there is a socket to notify (the daemon runs under a notify
 * unit): a caller may skip making a STATUS= line no one reads. */
bool sdnotify_active(void);

/* STATUS= alone, only when it changed since the last one sent. */
void sdnotify_status(const char *status);

/* The watchdog interval systemd asked for (WatchdogSec=), in ms; 0 when
 * none. */
int64_t sdnotify_watchdog_ms(void);

/* WATCHDOG=1, at most once per half interval: call it from the event loop
 * as often as it turns; cheap when nothing is due. Thread-safe. */
void sdnotify_watchdog_tick(void);

/* STOPPING=1. */
void sdnotify_stopping(void);

void sdnotify_close(void);

#endif
