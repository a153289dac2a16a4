/* apply_runtime.c: the apply's runtime step (haproxy --runtime-api). After
 * the swap, in place of the reload: when the candidate changes only
 * clusters' endpoints (consumer/runtime.c decides), the running haproxy
 * is made to hold them over its admin-level stats socket and read back
 * (consumer/runtime_api.c); the new file is live on disk all the same,
 * so a restart or a later reload gives what the runtime holds. Anything
 * else -- another change, more endpoints than the running configuration
 * has slots, a command refused, a dead socket, a read-back that differs --
 * falls back to the reload, and one log line says why. Also the reloads'
 * reasons, for the metrics and the ACK. */
#include "agent_int.h"
#include "consumer/consumer.h"
#include "consumer/runtime.h"
#include "fault.h"
#include "log.h"

#include <stdio.h>

static const char *const reason_names[RR_N] = {
	"no_runtime_api", "change", "template_exhausted", "runtime_failed", "readback_differs", "boot", "revert",
};

const char *reload_reason_name(enum reload_reason r)
{
	return r < RR_N ? reason_names[r] : "change";
}

void apply_reloaded(struct agent *a, enum reload_reason r)
{
	if ((a->cfg.reload || a->cfg.pidfile) && r < RR_N)
		a->m.reloads[r]++;
}

bool apply_runtime(struct agent *a, const struct candidate *c, enum reload_reason *why)
{
	*why = RR_NO_RUNTIME_API;
	if (!a->cfg.runtime_api)
		return false;
	char err[1024];
	struct rt_plan plan;
	if (runtime_plan(&a->state, c, &plan, err, sizeof(err)) == 0) {
		*why = RR_CHANGE;
		log_info("runtime: version %llu reloads haproxy (change): %s", (unsigned long long)c->version, err);
		return false;
	}
	struct runtime_options o = { .socket = a->cfg.runtime_api, .timeout_s = a->cfg.reload_timeout,
				     .fault = fault_point };
	size_t sent = 0;
	enum runtime_result res = runtime_apply(&o, &plan, &sent, err, sizeof(err));
	size_t nclusters = plan.n;
	runtime_plan_release(&plan);
	switch (res) {
	case RUNTIME_APPLIED:
		break;
	case RUNTIME_EXHAUSTED:
		*why = RR_TEMPLATE_EXHAUSTED;
		break;
	case RUNTIME_DIFFERS:
		*why = RR_READBACK_DIFFERS;
		break;
	default:
		*why = RR_RUNTIME_FAILED;
		break;
	}
	a->runtime_failing = res == RUNTIME_DIFFERS || *why == RR_RUNTIME_FAILED;
	if (res != RUNTIME_APPLIED) {
		log_warn("runtime: version %llu reloads haproxy (%s, after %zu command%s): %s",
			 (unsigned long long)c->version, reload_reason_name(*why), sent, sent == 1 ? "" : "s", err);
		return false;
	}
	fault_point("runtime-applied");
	if (a->cons->ops->no_reload)
		a->cons->ops->no_reload(a->cons);
	a->m.runtime_updates++;
	log_debug("runtime: version %llu: %zu command%s over %s (%zu cluster%s), read back",
		  (unsigned long long)c->version, sent, sent == 1 ? "" : "s", a->cfg.runtime_api, nclusters,
		  nclusters == 1 ? "" : "s");
	return true;
}
