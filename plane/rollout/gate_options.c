/* rollout/gate_options.c: the traffic gates' options (--gate-error-rate,
 * --gate-latency-p99, --gate-min-requests, --gate-unjudged): their values parsed and
 * checked, with errors that name the option (see gate.h). */
#include "rollout/gate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gate_parse_limit(const char *option, const char *s, bool rate, struct gate_limit *out, char *err,
		     size_t errlen)
{
	const char *want = rate ? "a rate between 0 and 1 above the baseline's (like 0.01) or a multiple of the "
				  "baseline's (like 2x)"
				: "milliseconds above the baseline's p99 (like 50) or a multiple of the baseline's (like 2x)";
	out->form = GATE_OFF;
	out->value = 0;
	size_t len = s ? strlen(s) : 0;
	bool mult = len > 0 && s[len - 1] == 'x';
	size_t digits = 0, dots = 0, n = mult ? len - 1 : len;
	for (size_t i = 0; i < n; i++) {
		if (s[i] >= '0' && s[i] <= '9')
			digits++;
		else if (s[i] == '.')
			dots++;
		else
			digits = n + 1;   /* anything else: refused below */
	}
	if (len == 0 || len > 24 || digits == 0 || digits + dots != n || dots > 1) {
		snprintf(err, errlen, "--%s: '%.32s' is not a value: give %s", option, s ? s : "", want);
		return -1;
	}
	char num[32];
	snprintf(num, sizeof(num), "%.*s", (int)n, s);
	double v = strtod(num, NULL);
	if (mult) {
		if (!(v >= 1) || v > 1000) {
			snprintf(err, errlen, "--%s: '%s': a multiple of the baseline must be 1x to 1000x", option, s);
			return -1;
		}
		out->form = GATE_MULT;
	} else if (rate) {
		if (!(v >= 0 && v <= 1)) {
			snprintf(err, errlen, "--%s: '%s' is not a rate between 0 and 1: give %s", option, s, want);
			return -1;
		}
		out->form = GATE_ABS;
	} else {
		if (!(v >= 0 && v <= 3600000)) {
			snprintf(err, errlen, "--%s: '%s': at most 3600000 ms", option, s);
			return -1;
		}
		out->form = GATE_ABS;
	}
	out->value = v;
	return 0;
}

int gate_parse_unjudged(const char *s, enum gate_unjudged *out, char *err, size_t errlen)
{
	*out = GATE_UNJUDGED_HOLD;
	if (!s || strcmp(s, "hold") == 0)
		return 0;
	if (strcmp(s, "pass") == 0) {
		*out = GATE_UNJUDGED_PASS;
		return 0;
	}
	if (strcmp(s, "revert") == 0) {
		*out = GATE_UNJUDGED_REVERT;
		return 0;
	}
	snprintf(err, errlen, "--gate-unjudged: '%.32s' is not pass, hold or revert (what a stage does whose nodes "
		 "do not count traffic)", s);
	return -1;
}

const char *gate_unjudged_name(enum gate_unjudged u)
{
	return u == GATE_UNJUDGED_PASS ? "pass" : u == GATE_UNJUDGED_REVERT ? "revert" : "hold";
}

bool gate_configured(const struct gate_options *c)
{
	return c->error_rate || c->latency_p99 || c->min_requests;
}

int gate_check_config(const struct gate_options *c, char *err, size_t errlen)
{
	struct gate_limit l;
	if (c->error_rate && gate_parse_limit("gate-error-rate", c->error_rate, true, &l, err, errlen) < 0)
		return -1;
	if (c->latency_p99 &&
	    gate_parse_limit("gate-latency-p99", c->latency_p99, false, &l, err, errlen) < 0)
		return -1;
	enum gate_unjudged u;
	if (gate_parse_unjudged(c->unjudged, &u, err, errlen) < 0)
		return -1;
	if (!gate_configured(c)) {
		if (c->unjudged) {
			snprintf(err, errlen, "--gate-unjudged needs a gate to apply to: --gate-error-rate or "
				 "--gate-latency-p99");
			return -1;
		}
		return 0;
	}
	const char *which = c->error_rate ? "--gate-error-rate"
			    : c->latency_p99 ? "--gate-latency-p99"
						  : "--gate-min-requests";
	if (c->relay) {
		snprintf(err, errlen, "%s: a relay (--upstream) judges no rollout; give the gates to the origin plane",
			 which);
		return -1;
	}
	if (!c->rollout || strcmp(c->rollout, "staged") != 0) {
		snprintf(err, errlen, "%s needs --rollout staged: the gates judge the stages of a staged rollout", which);
		return -1;
	}
	if (!c->error_rate && !c->latency_p99) {
		snprintf(err, errlen, "--gate-min-requests needs a gate to apply to: --gate-error-rate or "
			 "--gate-latency-p99");
		return -1;
	}
	return 0;
}
