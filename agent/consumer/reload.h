/* consumer/reload.h: making a consumer take a new generation and proving it
 * did: the operator's hooks (--check, --reload) with TETHER_* in their
 * environment, a reload by signal to the consumer's master (--pidfile,
 * --signal), the marker probe that shows which generation really serves
 * (`nginx -s reload` exits 0 even when nginx refused the new config), and the
 * health probe (--health). Each returns 0, or -1 with a message for the NACK. */
#ifndef TETHER_RELOAD_H
#define TETHER_RELOAD_H

#include <stddef.h>
#include <stdint.h>

/* What the hooks and the reload take of tetherd's options: the core fills
 * it in at each use (SIGHUP changes them). */
struct reload_options {
	const char *output_dir;     /* TETHER_OUTPUT */
	double command_timeout;     /* each command's */
	const char *reload;         /* --reload CMD, or NULL: the signal */
	const char *pidfile;        /* the consumer's master process (NULL: none) */
	const char *signal;         /* sent to it to reload: HUP, USR1 or USR2 */
};

/* Runs an operator command: what ("check", "reload") names it in err. */
int hook_run(const struct reload_options *o, const char *what, const char *cmd, uint64_t version,
	     const char *staging, char *err, size_t errlen);
/* --reload CMD, or the signal to the process in --pidfile. Returns 0, 1
 * when the pidfile says the consumer is not running (nothing to reload: it
 * reads the live output when it starts), or -1 with err. */
int reload_consumer(const struct reload_options *o, uint64_t version, const char *staging, char *err,
		    size_t errlen);
/* Polls http://MARKER/tether-generation until it answers gen, for at most
 * timeout_s. */
int reload_confirm(const char *marker, const char *gen, double timeout_s, char *err, size_t errlen);
/* One GET of http://MARKER/tether-generation, within timeout_s: the
 * generation it answers (trimmed, cut to cap) into out. 0, or -1 when it
 * does not answer 200. */
int reload_marker_read(const char *marker, double timeout_s, char *out, size_t cap);
/* GETs url until a 2xx or 3xx, at most retries times. */
int reload_health(const char *url, double timeout_s, unsigned retries, char *err, size_t errlen);

#endif
