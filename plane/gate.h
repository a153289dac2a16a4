/* gate.h: traffic-aware gates of staged rollouts (--gate-error-rate,
 * --gate-latency-p99, --gate-min-requests). Nodes report the traffic of
 * the generation they serve (in ACKs and in POST /v1/report while a
 * rollout runs); during a stage's bake the gate compares each member on
 * the new version with the nodes still on the baseline, over the same
 * window. A member that crosses a gate fails the stage (it reverts as a
 * NACK does); a stage whose members saw too little traffic passes after
 * the bake, flagged. */
#ifndef TETHER_GATE_H
#define TETHER_GATE_H

#include <stdbool.h>

#include "traffic.h"

struct gate;
struct plane_config;

/* The gate the options ask for: NULL (and err empty) when none is
 * configured, NULL with err when an option is wrong. */
struct gate *gate_new(const struct plane_config *cfg, char *err, size_t errlen);
void gate_free(struct gate *g);

/* A node's report of the traffic its live generation served (from an ACK
 * or POST /v1/report), already validated. Any thread; g may be NULL. */
void gate_report(struct gate *g, const char *node, const struct traffic *t);
/* Whether nodes should report now (a gate is configured and a rollout is
 * in progress): heartbeats carry "report" then. g may be NULL. */
bool gate_wants_reports(struct gate *g);

#endif
