/* rollout_text.c: a rollout in words for `tetherctl rollout status` (see
 * rollout_text.h). */
#include "rollout_text.h"
#include "json.h"
#include "xmalloc.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t u64_of(const cJSON *o, const char *key)
{
	uint64_t v = 0;
	json_get_u64(cJSON_GetObjectItemCaseSensitive(o, key), &v);
	return v;
}

static double num_of(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/* "1 node" / "3 nodes" */
static const char *plural(uint64_t n)
{
	return n == 1 ? "" : "s";
}

/* One stage's nodes: "10%: 3 nodes, 2 ACKed, 1 NACKed" (or "not reached"). */
static void stage_words(struct buf *b, unsigned pct, const cJSON *sc)
{
	uint64_t members = u64_of(sc, "members"), acked = u64_of(sc, "acked"), nacked = u64_of(sc, "nacked"),
		 unhealthy = u64_of(sc, "unhealthy"), pending = u64_of(sc, "pending");
	buf_printf(b, "%u%%: %" PRIu64 " node%s", pct, members, plural(members));
	if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(sc, "reached"))) {
		buf_puts(b, ", not reached yet");
		return;
	}
	buf_printf(b, ", %" PRIu64 " ACKed", acked);
	if (nacked)
		buf_printf(b, ", %" PRIu64 " NACKed", nacked);
	if (unhealthy)
		buf_printf(b, ", %" PRIu64 " unhealthy", unhealthy);
	if (pending)
		buf_printf(b, ", %" PRIu64 " pending", pending);
}

static void add_time(struct fields *f, const char *label, const cJSON *doc, const char *key)
{
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(doc, key);
	if (cJSON_IsNumber(t) && t->valuedouble > 0)
		fields_add(f, label, time_and_ago_text(t->valuedouble));
}

static char *cell(const char *s)
{
	return cell_text(s ? s : "-", 300);
}

void rollout_text_fields(struct fields *f, const cJSON *doc)
{
	const char *state = json_get_string(doc, "state");
	bool none = !state || strcmp(state, "none") == 0;
	const cJSON *stages = cJSON_GetObjectItemCaseSensitive(doc, "stages");
	size_t nstages = cJSON_IsArray(stages) ? (size_t)cJSON_GetArraySize(stages) : 0;

	if (none) {
		fields_add(f, "rollout", xstrdup("none yet"));
	} else {
		char *st = cell(state);
		for (char *c = st; *c; c++)
			if (*c == '_')
				*c = ' ';
		fields_add(f, "rollout", xasprintf("%" PRIu64 " (%s): version %" PRIu64 " -> %" PRIu64, u64_of(doc, "id"),
						  st, u64_of(doc, "from_version"), u64_of(doc, "to_version")));
		free(st);
		uint64_t members = u64_of(doc, "members"), reached = u64_of(doc, "reached");
		uint64_t idx = u64_of(doc, "stage_index");
		fields_add(f, "stage", xasprintf("%" PRIu64 " of %zu (%" PRIu64 "%%): %" PRIu64 " of %" PRIu64
						" node%s reached", idx, nstages, u64_of(doc, "stage"), reached,
						members, plural(members)));
		const cJSON *acked = cJSON_GetObjectItemCaseSensitive(doc, "acked");
		const cJSON *counts = cJSON_GetObjectItemCaseSensitive(doc, "stage_counts");
		if (cJSON_IsArray(counts)) {
			/* the totals of the stages reached, then each stage */
			uint64_t a = 0, n = 0, u = 0, p = 0;
			struct buf b = BUF_INIT;
			size_t i = 0;
			const cJSON *pct = cJSON_IsArray(stages) ? stages->child : NULL;
			for (const cJSON *sc = counts->child; sc; sc = sc->next, i++) {
				a += u64_of(sc, "acked");
				n += u64_of(sc, "nacked");
				u += u64_of(sc, "unhealthy");
				p += u64_of(sc, "pending");
				if (b.len)
					buf_puts(&b, "; ");
				uint64_t pv = 0;
				if (pct && (!json_get_u64(pct, &pv) || pv > 100))
					pv = 0;
				stage_words(&b, (unsigned)pv, sc);
				pct = pct ? pct->next : NULL;
			}
			fields_add(f, "nodes", xasprintf("%" PRIu64 " of %" PRIu64 " ACKed, %" PRIu64 " NACKed, %" PRIu64
							 " unhealthy, %" PRIu64 " pending", a, reached, n, u, p));
			fields_add(f, "stages", buf_detach(&b, NULL));
		} else if (acked) {
			fields_add(f, "nodes", xasprintf("%" PRIu64 " of %" PRIu64 " in the stage ACKed",
							 u64_of(doc, "acked"), reached));
		}
		add_time(f, "started", doc, "started_at");
		if (state && strcmp(state, "in_progress") == 0)
			add_time(f, "stage started", doc, "stage_started_at");
		add_time(f, "finished", doc, "finished_at");
		const cJSON *bake = cJSON_GetObjectItemCaseSensitive(doc, "bake");
		if (cJSON_IsNumber(bake))
			fields_add(f, "bake", duration_text(bake->valuedouble));
		if (u64_of(doc, "revert_version"))
			fields_add(f, "reverted as", xasprintf("version %" PRIu64, u64_of(doc, "revert_version")));
		if (u64_of(doc, "parent"))
			fields_add(f, "carries on", xasprintf("rollout %" PRIu64, u64_of(doc, "parent")));
		const char *reason = json_get_string(doc, "reason");
		if (reason && *reason)
			fields_add(f, "reason", cell(reason));
		fields_add(f, "messages", xasprintf("%" PRIu64 " with the new version to %" PRIu64 " node%s, %" PRIu64
						    " with the revert, %" PRIu64 " version-only",
						    u64_of(doc, "messages"), u64_of(doc, "touched"),
						    plural(u64_of(doc, "touched")), u64_of(doc, "revert_messages"),
						    u64_of(doc, "version_only_messages")));
		const cJSON *held = cJSON_GetObjectItemCaseSensitive(doc, "held");
		for (const cJSON *h = cJSON_IsArray(held) ? held->child : NULL; h; h = h->next) {
			char *node = cell(json_get_string(h, "node")), *why = cell(json_get_string(h, "reason"));
			fields_add(f, "held", xasprintf("node %s: %s", node, why));
			free(node);
			free(why);
		}
		/* the plane's words carry a UTC time: the freeze line (local) says it */
		if (json_get_string(doc, "frozen"))
			fields_add(f, "frozen", xstrdup("held by the freeze window (tetherctl freeze)"));
		const char *controller = json_get_string(doc, "controller");
		if (controller)
			fields_add(f, "controller",
				   xasprintf("%s%s", controller[0] ? controller : "being elected",
					     cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(doc, "controller_here"))
						     ? " (this replica)" : ""));
	}
	const cJSON *w = cJSON_GetObjectItemCaseSensitive(doc, "waiting");
	if (cJSON_IsObject(w)) {
		char *left = duration_until_text(num_of(w, "until"));
		char *until = time_local_text(num_of(w, "until"));
		fields_add(f, "waiting", xasprintf("version %" PRIu64 " waits for nodes to reconnect: %" PRIu64 " of %"
						   PRIu64 " back, up to %s more (until %s)", u64_of(w, "version"),
						   u64_of(w, "back"), u64_of(w, "expected"), left, until));
		free(left);
		free(until);
	}
	const cJSON *q = cJSON_GetObjectItemCaseSensitive(doc, "queue");
	uint64_t queued = u64_of(doc, "queued");
	size_t listed = 0;
	for (const cJSON *e = cJSON_IsArray(q) ? q->child : NULL; e; e = e->next, listed++) {
		char *author = cell(json_get_string(e, "author")), *ago = ago_text(num_of(e, "since"));
		const char *m = json_get_string(e, "message");
		char *msg = m && *m ? cell(m) : NULL;
		fields_add(f, "queued", xasprintf("version %" PRIu64 " (%s, %s)%s%s%s", u64_of(e, "version"),
						  author[0] ? author : "-", ago, msg ? ": \"" : "", msg ? msg : "",
						  msg ? "\"" : ""));
		free(author);
		free(ago);
		free(msg);
	}
	if (queued > listed)
		fields_add(f, "queued", xasprintf("%" PRIu64 " more version%s", queued - listed, plural(queued - listed)));
	else if (!queued && cJSON_IsArray(q))
		fields_add(f, "queued", xstrdup("nothing"));
}
