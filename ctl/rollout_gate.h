/* rollout_gate.h: `tetherctl rollout status`'s view of the traffic gates:
 * per stage, its verdict and the canary-vs-baseline table per route. */
#ifndef TETHER_CTL_ROLLOUT_GATE_H
#define TETHER_CTL_ROLLOUT_GATE_H

#include <cjson/cJSON.h>

/* Prints a rollout's "gate" object (from /v1/rollouts/current). */
void print_rollout_gate(const cJSON *gate);

#endif
