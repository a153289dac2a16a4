/* core/guardcheck.c: the guards on a write (see guardcheck.h): collects
 * the guard/ resources of the candidate state (the store's, minus what
 * the write removes or replaces, plus what it brings) and hands the
 * changes to common/guards.c. A write that touches nothing a guard can
 * limit costs one scan of its own changes. */
#include "core/guardcheck.h"
#include "buf.h"
#include "core/overrides.h"
#include "envelope.h"
#include "guards.h"
#include "xmalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is_guard(const char *name)
{
	return strncmp(name, GUARDS_PREFIX, strlen(GUARDS_PREFIX)) == 0;
}

/* Whether the write changes ch[i] of a type a guard can limit. */
static bool limitable(const char *name)
{
	enum res_type t = resource_type_of(name);
	return t == RES_CLUSTER || t == RES_FILE || t == RES_SECRET;
}

static const struct store_change *in_write(const struct store_change *ch, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(ch[i].name, name) == 0)
			return &ch[i];
	return NULL;
}

int guardcheck_write(struct store *s, const struct store_change *ch, size_t n, const char *override,
		     char **passed, char *err, size_t errlen)
{
	*passed = override ? xstrdup("[]") : NULL;
	bool any = false;
	for (size_t i = 0; i < n && !any; i++)
		any = limitable(ch[i].name);
	if (!any)
		return 0;

	struct guards gs;
	guards_init(&gs);
	int rc = 0;
	char e[256];
	/* the candidate's guards: the store's unless the write touches them */
	for (const struct store_entry *x = store_newest(s); x; x = x->prev) {
		if (!x->body || x->rank != RES_GUARD || in_write(ch, n, x->name))
			continue;
		size_t len;
		const char *b = store_stored(x, &len);
		if (guards_add(&gs, x->name, b, len, e, sizeof(e)) < 0)
			continue;   /* validated when written: cannot happen */
	}
	for (size_t i = 0; i < n; i++)
		if (ch[i].body && is_guard(ch[i].name))
			(void)guards_add(&gs, ch[i].name, ch[i].body, ch[i].body_len, e, sizeof(e));
	if (!gs.n) {
		guards_release(&gs);
		return 0;
	}

	/* what nodes get is judged, as they judge it: a sealed secret's push
	 * body, not its stored form, whose wraps grow with the fleet (a
	 * reseal for a new node is no bigger a secret) */
	struct guard_change *gc = xcalloc(n, sizeof(*gc));
	char **pushed = xcalloc(n, sizeof(*pushed));
	size_t ng = 0;
	for (size_t i = 0; i < n; i++) {
		if (!limitable(ch[i].name))
			continue;
		const struct store_entry *x = store_get(s, ch[i].name);
		struct guard_change *g = &gc[ng];
		*g = (struct guard_change){ .name = ch[i].name };
		if (x && x->body) {
			g->before = x->body;
			g->before_len = x->body_len;
		}
		g->after = ch[i].body;
		g->after_len = ch[i].body_len;
		if (ch[i].body && resource_type_of(ch[i].name) == RES_SECRET &&
		    (pushed[i] = envelope_push_body(ch[i].body, ch[i].body_len, &g->after_len)))
			g->after = pushed[i];
		else
			g->after_len = ch[i].body_len;
		/* what does not change is not judged (as at a node, which sees
		 * only effective changes): a remove of what is absent, a body
		 * written again as it is */
		if (!g->before && !g->after)
			continue;
		if (g->before && g->after && g->before_len == g->after_len &&
		    memcmp(g->before, g->after, g->after_len) == 0)
			continue;
		ng++;
	}
	struct guard_report r;
	guard_report_init(&r);
	if (guards_check(&gs, gc, ng, &r) > 0) {
		if (override) {
			free(*passed);
			*passed = xstrdup(r.passed.data);
		} else {
			char msg[2048];
			guards_summary(&r, msg, sizeof(msg));
			snprintf(err, errlen, "%s; nothing was stored (an operator may pass with --override REASON)",
				 msg);
			rc = -1;
		}
	}
	guard_report_release(&r);
	for (size_t i = 0; i < n; i++)
		free(pushed[i]);
	free(pushed);
	free(gc);
	guards_release(&gs);
	return rc;
}

char *guardcheck_record(const char *override, const char *passed)
{
	if (!override)
		return NULL;
	struct buf b = BUF_INIT;
	buf_printf(&b, "{\"passed\":%s,\"reason\":", passed ? passed : "[]");
	buf_json_string(&b, override);
	buf_putc(&b, '}');
	return buf_detach(&b, NULL);
}

char *guardcheck_revert(struct store *s, struct overrides *o, uint64_t version, const struct store_change *ch,
			size_t n, const char *reason)
{
	char *passed = NULL, err[8];
	(void)guardcheck_write(s, ch, n, reason, &passed, err, sizeof(err));   /* with a reason: never refused */
	char *record = NULL;
	if (passed && strcmp(passed, "[]") != 0) {
		record = guardcheck_record(reason, passed);
		overrides_note(o, version);
	}
	free(passed);
	return record;
}
