/* consumer/consumer.h: what the agent drives to make a state live. A consumer
 * renders a candidate into a staging area (the check runs on it), swaps it
 * live keeping the way back, and reverts or finishes; at boot it tells
 * whether an apply cut short had gone live (resume). Backends:
 * consumer/files.c (file resources under --output-dir) and consumer/gen.c
 * (nginx and haproxy: whole generations behind an atomic symlink). */
#ifndef TETHER_CONSUMER_H
#define TETHER_CONSUMER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "state/sealed.h"
#include "state/state.h"

struct consumer;

/* What the consumers take of tetherd's options: the core fills it in at
 * start-up, and a consumer copies what it keeps. */
struct consumer_options {
	const char *consumer;       /* files, nginx or haproxy */
	const char *output_dir;
	const char *secrets_dir;    /* nginx, haproxy: the secret files' (absolute; NULL: OUTPUT_DIR/secrets) */
	const char *marker;         /* HOST:PORT of the generation marker; NULL or "off": none */
	const char *nginx;          /* binaries for the default checks */
	const char *haproxy;
	const char *base_config;    /* haproxy: the operator's base, checked with ours (NULL: none) */
	const char *traffic_syslog; /* where the access log goes (render_opts.traffic_syslog; NULL: off) */
	const char *stats_socket;   /* haproxy: the stats socket the renderer declares (NULL: none) */
	const char *admin_socket;   /* haproxy: the admin-level socket it declares (NULL: none) */
	bool runtime_api;           /* haproxy: --runtime-api (free server slots rendered; the
	                             * generation served is followed apart from current) */
	uint64_t generations;       /* generations kept on disk (0: 3) */
	/* How a renderer opens a sealed secret (the core's; kept by
	 * reference: it lives as long as the consumer); NULL: none. */
	const struct sealed_opener *opener;
	/* Called at the consumers' fault points (the core's fault_point); NULL: none. */
	void (*fault)(const char *point);
};

struct consumer_ops {
	const char *name;
	/* Makes the live output match s (start-up, and after a crash): only
	 * what differs is written. Returns 1 when the live output changed, 0
	 * when it already matched, -1 on error. */
	int (*boot)(struct consumer *c, const struct state *s, char *err, size_t errlen);
	/* Renders the candidate's effect on the output into a staging area.
	 * Returns 1 when the output does not change (no check, no reload),
	 * 0 when staged, -1 on an I/O error (worth a retry), -2 when the
	 * consumer could never take it (a refusal: final). */
	int (*stage)(struct consumer *c, const struct state *s, const struct candidate *cand, char *err,
		     size_t errlen);
	/* The staging area, for TETHER_STAGING. */
	const char *(*staging_dir)(struct consumer *c);
	/* The consumer's own check of the staged output (nginx -t, haproxy
	 * -c), run when the operator gave no --check; NULL when it has none.
	 * Returns 0, or -1 with the checker's message. */
	int (*check)(struct consumer *c, double timeout_s, char *err, size_t errlen);
	/* The id of the staged generation the marker will answer once the
	 * consumer serves it; NULL when the consumer has no marker. */
	const char *(*generation)(struct consumer *c);
	/* The id of the generation the consumer serves now, as its access
	 * log names it (traffic is counted per generation): what it loaded
	 * last, which after runtime updates (no_reload) is not what the
	 * output points at; NULL when the consumer has none. */
	const char *(*live)(struct consumer *c);
	/* The id of the staged generation (what swap makes live), kept in
	 * last-good's record of the apply in flight; NULL when the consumer
	 * has no generations (resume compares its files instead). */
	const char *(*staged_id)(struct consumer *c);
	/* Boot, when an apply was in flight (lastgood.pending): whether the
	 * live output is what cand makes of s, as generation gen (staged_id's
	 * then; NULL: none). 1: it is -- the swap happened -- and it is staged
	 * as if just swapped in, for its check again (staging_dir, generation;
	 * finish forgets that, boot puts s back instead). 0: it is not (the
	 * swap did not happen, or not all of it). -1 with err on an I/O error. */
	int (*resume)(struct consumer *c, const struct state *s, const struct candidate *cand, const char *gen,
		      char *err, size_t errlen);
	/* Puts the staged output live, keeping what it replaced. */
	int (*swap)(struct consumer *c, char *err, size_t errlen);
	/* Puts back what swap replaced. */
	int (*revert)(struct consumer *c, char *err, size_t errlen);
	/* After swap: the new output went live without a reload (haproxy's
	 * runtime API), so the consumer still serves the generation it had
	 * loaded, and live keeps naming that one (until a reload, or revert).
	 * NULL when the consumer has no generations. */
	void (*no_reload)(struct consumer *c);
	/* Forgets staging and what swap kept (after commit or revert). */
	void (*finish)(struct consumer *c);
	void (*free)(struct consumer *c);
};

struct consumer {
	const struct consumer_ops *ops;
	char *output_dir;
};

/* Makes the consumer the options name, over its output directory. NULL
 * with err when it cannot be used. */
struct consumer *consumer_new(const struct consumer_options *o, char *err, size_t errlen);
void consumer_free(struct consumer *c);

struct consumer *consumer_files_new(const struct consumer_options *o, char *err, size_t errlen);
struct consumer *consumer_gen_new(const struct consumer_options *o, char *err, size_t errlen);

#endif
