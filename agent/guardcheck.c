/* guardcheck.c: the guards at a node (see guardcheck.h). The guards are
 * the candidate's: the state's guard/ resources the candidate does not
 * touch, and those it brings. A candidate that changes nothing a guard
 * limits (no cluster, file or secret) costs one pass over its changes. */
#include "guardcheck.h"
#include "agent_int.h"
#include "guards.h"
#include "log.h"
#include "resource.h"
#include "strmap.h"
#include "xmalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool limitable(const char *name)
{
	enum res_type t = resource_type_of(name);
	return t == RES_CLUSTER || t == RES_FILE || t == RES_SECRET;
}

struct collect {
	struct guards *gs;
	const struct strmap *touched;
};

static void collect_one(void *ctx, const struct res *r)
{
	struct collect *cl = ctx;
	char e[256];
	if (strncmp(r->name, GUARDS_PREFIX, strlen(GUARDS_PREFIX)) != 0 || strmap_get(cl->touched, r->name, NULL))
		return;
	(void)guards_add(cl->gs, r->name, r->body, r->body_len, e, sizeof(e));   /* validated on arrival */
}

/* Checks; the report r is filled. Returns the violations. */
static size_t check(const struct state *s, const struct candidate *c, struct guard_report *r)
{
	bool any = false;
	for (size_t i = 0; i < c->n && !any; i++) {
		const struct res *x = c->items[i].new_res ? c->items[i].new_res : c->items[i].old;
		any = x && limitable(x->name);
	}
	if (!any)
		return 0;
	struct guards gs;
	guards_init(&gs);
	struct strmap touched;
	strmap_init(&touched);
	for (size_t i = 0; i < c->n; i++) {
		const struct res *x = c->items[i].new_res ? c->items[i].new_res : c->items[i].old;
		if (x && strncmp(x->name, GUARDS_PREFIX, strlen(GUARDS_PREFIX)) == 0)
			*strmap_ref(&touched, x->name) = 1;
	}
	struct collect cl = { &gs, &touched };
	state_each(s, collect_one, &cl);
	char e[256];
	for (size_t i = 0; i < c->n; i++) {
		const struct res *x = c->items[i].new_res;
		if (x && strncmp(x->name, GUARDS_PREFIX, strlen(GUARDS_PREFIX)) == 0)
			(void)guards_add(&gs, x->name, x->body, x->body_len, e, sizeof(e));
	}
	strmap_release(&touched);
	size_t found = 0;
	if (gs.n) {
		struct guard_change *gc = xcalloc(c->n ? c->n : 1, sizeof(*gc));
		size_t ng = 0;
		for (size_t i = 0; i < c->n; i++) {
			const struct res *nw = c->items[i].new_res, *old = c->items[i].old;
			const struct res *x = nw ? nw : old;
			if (!x || !limitable(x->name))
				continue;
			gc[ng++] = (struct guard_change){
				.name = x->name,
				.before = old ? old->body : NULL, .before_len = old ? old->body_len : 0,
				.after = nw ? nw->body : NULL, .after_len = nw ? nw->body_len : 0,
			};
		}
		found = guards_check(&gs, gc, ng, r);
		free(gc);
	}
	guards_release(&gs);
	return found;
}

int guardcheck_candidate(const struct state *s, const struct candidate *c, uint64_t overridden, char *err,
			 size_t errlen)
{
	struct guard_report r;
	guard_report_init(&r);
	int rc = 0;
	if (check(s, c, &r) > 0 && overridden <= s->version) {
		guards_summary(&r, err, errlen);
		rc = -1;
	}
	guard_report_release(&r);
	return rc;
}

int guardcheck_push(struct agent *a, const struct push *m, const struct candidate *c, char *err, size_t errlen)
{
	/* with --trust only the signed word counts */
	uint64_t overridden = a->trust.on ? (m->verified.ok ? m->verified.overridden : 0) : m->overridden;
	struct guard_report r;
	guard_report_init(&r);
	int rc = 0;
	if (check(&a->state, c, &r) > 0) {
		char msg[2048];
		guards_summary(&r, msg, sizeof(msg));
		if (overridden > a->state.version) {
			a->guard_overridden++;
			log_warn("push %llu crosses guards under the plane's override of version %llu%s: %s",
				 (unsigned long long)m->version, (unsigned long long)overridden,
				 a->trust.on ? " (signed)" : "", msg);
		} else {
			snprintf(err, errlen,
				 "%s; no override since version %llu, the version served (a write with tetherctl "
				 "--override lets it through%s)", msg, (unsigned long long)a->state.version,
				 a->trust.on ? ", signed by the plane" : "");
			a->guard_refused++;
			rc = -1;
		}
	}
	guard_report_release(&r);
	return rc;
}
