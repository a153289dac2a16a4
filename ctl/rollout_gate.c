/* rollout_gate.c: prints the traffic gates of a rollout for people (see
 * rollout_gate.h): the options in force, then per stage its verdict (and
 * why) and a table of each route's canary and baseline: nodes, requests,
 * 5xx, the 5xx rate, p99 and the window. */
#include "rollout_gate.h"
#include "json.h"
#include "output.h"
#include "xmalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double num(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static char *text_of(const cJSON *o, const char *key, const char *none)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	return cell_text(cJSON_IsString(v) ? v->valuestring : none, 400);
}

static void side_row(struct table *t, const char *route, const char *group, const cJSON *s)
{
	char *row[] = {
		cell_text(route, 80),
		xstrdup(group),
		xasprintf("%.0f", num(s, "nodes")),
		xasprintf("%.0f", num(s, "requests")),
		xasprintf("%.0f", num(s, "errors")),
		xasprintf("%.2f%%", num(s, "error_rate") * 100),
		xasprintf("%.1f ms", num(s, "p99")),
		xasprintf("%.1f s", num(s, "window")),
	};
	table_row(t, row);
}

void print_rollout_gate(const cJSON *gate)
{
	if (!cJSON_IsObject(gate))
		return;
	char *err = text_of(gate, "error_rate", "-"), *p99 = text_of(gate, "latency_p99", "-");
	char *unjudged = text_of(gate, "unjudged", "");
	printf("gates: error rate %s, p99 %s, at least %.0f requests per route and node%s%s\n", err, p99,
	       num(gate, "min_requests"), *unjudged ? "; unjudged stages: " : "", unjudged);
	free(err);
	free(p99);
	free(unjudged);
	const cJSON *stages = cJSON_GetObjectItemCaseSensitive(gate, "stages");
	const cJSON *st;
	/* a stage held unjudged (members that do not count traffic): first */
	cJSON_ArrayForEach(st, stages)
	{
		if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(st, "held"))) {
			char *reason = text_of(st, "reason", "held: unjudged");
			printf("%s\n", reason);
			free(reason);
		}
	}
	cJSON_ArrayForEach(st, stages)
	{
		char *verdict = text_of(st, "verdict", "?"), *reason = text_of(st, "reason", "");
		char kept[64] = "";
		if (num(st, "baseline_stage") > 0)
			snprintf(kept, sizeof(kept), " (baseline kept from stage %.0f)", num(st, "baseline_stage"));
		/* an unjudged stage's reason starts with what it is ("held: unjudged: ...") */
		bool own = strcmp(verdict, "unjudged") == 0 && *reason;
		printf("\nstage %.0f (%.0f%%): %s%s%s%s\n", num(st, "stage"), num(st, "percent"), own ? "" : verdict,
		       *reason && !own ? ": " : "", reason, kept);
		free(verdict);
		free(reason);
		struct table t = { 8, 0, NULL };
		char *head[] = { xstrdup("ROUTE"), xstrdup("GROUP"), xstrdup("NODES"), xstrdup("REQUESTS"),
				 xstrdup("5XX"), xstrdup("5XX RATE"), xstrdup("P99"), xstrdup("WINDOW") };
		table_row(&t, head);
		const cJSON *r;
		size_t n = 0;
		cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(st, "routes"))
		{
			char *route = text_of(r, "route", "?");
			side_row(&t, route, "canary", cJSON_GetObjectItemCaseSensitive(r, "canary"));
			side_row(&t, "", "baseline", cJSON_GetObjectItemCaseSensitive(r, "baseline"));
			free(route);
			n++;
		}
		if (n)
			table_print(&t);
		else
			printf("no traffic reported yet\n");
		table_release(&t);
		cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(st, "routes"))
		{
			const cJSON *note = cJSON_GetObjectItemCaseSensitive(r, "note");
			if (cJSON_IsString(note)) {
				char *route = text_of(r, "route", "?"), *text = cell_text(note->valuestring, 200);
				printf("note: %s: %s\n", route, text);
				free(route);
				free(text);
			}
		}
	}
}
