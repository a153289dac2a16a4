/* rollout/gate.h: traffic-aware gates of staged rollouts (--gate-error-rate,
 * --gate-latency-p99, --gate-min-requests). Nodes report the traffic of
 * the generation they serve (in ACKs and in POST /v1/report while a
 * rollout runs); during a stage's bake the gate compares each member on
 * the new version with the nodes still on the baseline, over the same
 * window. A member that crosses a gate fails the stage (it reverts as a
 * NACK does); a stage whose members saw too little traffic passes after
 * the bake, flagged.
 *
 * Windows. Per node the gate keeps the last report and a mark: the first
 * report seen after the current stage started, or zero (the generation
 * counts whole) when that report's generation went live after the stage
 * started (since >= stage start). A report of another generation or
 * version than the mark's, or whose counters went back, marks again at
 * zero: a new generation counts whole from its since. A node's window is
 * traffic_diff(last, mark). When a stage starts, every mark is dropped (a
 * report the gate saw after the start becomes the mark at once).
 *
 * Judgement (gate_judge, from rollout_step while a stage runs):
 * members are the stage's reached nodes that ACKed `to` and report a
 * version >= to; the baseline is every other node whose report is of
 * `from`, its windows merged per route. When that baseline has no route
 * with --gate-min-requests requests (the last stage: everyone moved), the
 * last baseline of this rollout that had is used instead (kept from an
 * earlier stage). Each member is judged alone, per route with at least
 * --gate-min-requests requests in its window:
 *   error rate  errors / requests;  p99  traffic_quantile(hist, 0.99)
 *   absolute R (rate) or MS (p99): fails above baseline + R; the
 *     baseline counts as 0 on a route where it has too little traffic
 *   Nx: fails above N * max(baseline, floor) (floor: 1/min-requests for
 *     the error rate, 1 ms for p99); skipped, with a note, on a route
 *     where the baseline has too little traffic
 * The first crossing fails the stage at once with a reason naming the
 * route, the node, both values and both windows. When the bake is over and
 * every member ACKed, the stage passes -- flagged low_traffic when some
 * reached, ACKed node had fewer than --gate-min-requests requests on
 * every route (or no report of the new version).
 *
 * Unjudged (fail closed): a member that reports no traffic counts at all
 * -- it says it does not count ("counts":false in its ACKs, with why), or
 * no report of it ever came -- cannot be judged. When the bake is over
 * and some are, --gate-unjudged decides: hold (the default: the stage
 * does not pass, its reason "held: unjudged: node-3, node-7 do not count
 * traffic (started with --traffic-listen off)", judged again as nodes
 * change), revert (the rollout reverts with that reason) or pass (the
 * stage passes, flagged unjudged). An event "gate" (verdict "unjudged")
 * says when a stage becomes so, and tether_gate_unjudged_total counts
 * such stages.
 *
 * Locks: one mutex, a leaf (the events bus is called after it is
 * released). The rollout never calls in with its own `lock` held. */
#ifndef TETHER_GATE_H
#define TETHER_GATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "traffic.h"

struct gate;
struct events;

/* The gates' options (the plane's, at start-up). */
struct gate_options {
	const char *error_rate;      /* --gate-error-rate: "0.01" or "2x"; NULL: none */
	const char *latency_p99;     /* --gate-latency-p99: "50" (ms) or "2x"; NULL: none */
	uint64_t min_requests;       /* --gate-min-requests; 0: not given */
	const char *unjudged;        /* --gate-unjudged: "pass", "hold", "revert"; NULL: hold */
	uint64_t max_nodes;          /* --max-nodes; 0: the default */
	const char *rollout;         /* --rollout: gates judge a staged one only */
	bool relay;                  /* --upstream: a relay judges nothing */
};

#define GATE_MIN_REQUESTS_DEFAULT 100
/* Reports alone are judged again at most this often (a judgement walks
 * every node's window); an ACK, the end of the bake or a new stage is
 * judged at once. */
#define GATE_JUDGE_EVERY_MS 1000

/* The gate the options ask for: NULL (and err empty) when none is
 * configured, NULL with err when an option is wrong. */
struct gate *gate_new(const struct gate_options *cfg, char *err, size_t errlen);
void gate_free(struct gate *g);

/* A node's report of the traffic its live generation served (from an ACK
 * or POST /v1/report), already validated. Any thread; g may be NULL. */
void gate_report(struct gate *g, const char *node, const struct traffic *t);
/* Whether a node counts its traffic, as its ACK says (counts false:
 * reason, one line, why not). Any thread; g may be NULL. */
void gate_counts(struct gate *g, const char *node, bool counts, const char *reason);
/* Whether nodes should report now (a gate is configured and a rollout is
 * in progress): heartbeats carry "report" then. g may be NULL. */
bool gate_wants_reports(struct gate *g);

/* ---- options ---------------------------------------------------------- */

enum gate_form { GATE_OFF, GATE_ABS, GATE_MULT };
struct gate_limit {
	enum gate_form form;
	double value;          /* the rate, the milliseconds, or N */
};
/* Parses one gate's value for option (its name, for the message):
 * "0.01" (rate: 0 <= R <= 1; latency: milliseconds >= 0) or "Nx" (N >= 1,
 * "2x", "1.5x"). 0, or -1 with err naming the option. */
int gate_parse_limit(const char *option, const char *s, bool rate, struct gate_limit *out, char *err,
		     size_t errlen);
/* What an unjudged stage does (--gate-unjudged). */
enum gate_unjudged { GATE_UNJUDGED_HOLD, GATE_UNJUDGED_PASS, GATE_UNJUDGED_REVERT };
/* Parses --gate-unjudged (NULL: hold). 0, or -1 with err. */
int gate_parse_unjudged(const char *s, enum gate_unjudged *out, char *err, size_t errlen);
const char *gate_unjudged_name(enum gate_unjudged u);
/* Whether any gate option is given. */
bool gate_configured(const struct gate_options *c);
/* The cross-checks of the gate options (plane_config_check): values well
 * formed, and any of them only with --rollout staged. 0, or -1 with err. */
int gate_check_config(const struct gate_options *c, char *err, size_t errlen);

/* ---- the rollout's side --------------------------------------------------- */

/* GATE_UNJUDGED: held (--gate-unjudged hold): the stage does not pass
 * while some members cannot be judged. */
enum gate_verdict { GATE_JUDGING, GATE_PASS, GATE_FAIL, GATE_LOW_TRAFFIC, GATE_UNJUDGED };
const char *gate_verdict_name(enum gate_verdict v);

/* The stage in progress as the rollout sees it. */
struct gate_stage_view {
	uint64_t run;                  /* the rollout's id */
	size_t stage;                  /* its index (0: the first) */
	unsigned percent;
	double started;                /* the stage's start, wall seconds */
	uint64_t from, to;             /* the baseline and the new version */
	char *const *reached;          /* the stage's members (reached so far) */
	const bool *acked;             /* which of them ACKed `to` */
	size_t nreached;
	bool baked;                    /* every member ACKed and the bake is over */
};

/* Judges the stage: GATE_FAIL (*reason: malloc'd, the judgement's
 * crossings worst first, or "unjudged: ..." with --gate-unjudged revert),
 * GATE_JUDGING while it bakes, GATE_PASS or GATE_LOW_TRAFFIC once baked,
 * GATE_UNJUDGED while held (it does not pass). A stage (run, stage) the
 * gate has not seen starts its windows. */
enum gate_verdict gate_judge(struct gate *g, const struct gate_stage_view *s, char **reason);
/* Sets how often reports alone are judged again (tests: 0). */
void gate_set_judge_interval(struct gate *g, int64_t ms);
/* Whether a rollout is in progress (gate_wants_reports). */
void gate_set_running(struct gate *g, bool running);
/* Where flagged stages are published (an event "gate"); NULL: nowhere. */
void gate_set_events(struct gate *g, struct events *e);

/* Appends ,"gate":{...} for rollout run (nothing when g is NULL); live:
 * the run is in progress (a stage not judged yet is "judging", else
 * "ended"). */
void gate_json(struct gate *g, uint64_t run, bool live, struct buf *out);
/* tether_gate_* lines for /metrics. */
void gate_metrics(struct gate *g, struct buf *out);

#endif
