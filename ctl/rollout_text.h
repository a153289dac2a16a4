/* rollout_text.h: `tetherctl rollout status`'s words for a rollout (from
 * /v1/rollouts/current): its state, stages and their nodes as counts in
 * words, times as local ISO 8601 with how long ago, what a new version
 * waits for, and the versions queued behind it. Never raw JSON. */
#ifndef TETHER_CTL_ROLLOUT_TEXT_H
#define TETHER_CTL_ROLLOUT_TEXT_H

#include <cjson/cJSON.h>

#include "output.h"

/* Adds the rollout's lines to f (the gate is printed apart: rollout_gate.h). */
void rollout_text_fields(struct fields *f, const cJSON *doc);

#endif
