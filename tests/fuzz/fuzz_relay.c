/* fuzz_relay.c: libFuzzer target for what a relay reads from its upstream
 * (plane/persist/relay/state.c, plane/persist/records_json.c): the state event, and the
 * rollout, node, token and approval records of the other events and of a relay's
 * POST /v1/relay/nodes. An upstream is authenticated, but a broken or
 * lying one must get a clear refusal, never a crash or a half state.
 *
 * Checks on what relay_state_decode accepts: every change has a valid
 * name and a version in 1..the state's version, changes ascend by
 * version with no name twice in one version, a body is canonical (it
 * encodes back to the same bytes), overridden versions are in 1..version,
 * and horizon and released are at most
 * the version. Every record decoder is run on every object of the input. */
#include "fuzz.h"
#include "persist/records_json.h"
#include "persist/relay/state.h"
#include "resource.h"
#include "persist/rollout_rec.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void records(const cJSON *c)
{
	if (cJSON_IsObject(c)) {
		struct ro_run run;
		for (int members = 0; members < 2; members++)
			if (record_run_from_json(c, members, &run) == 0) {
				if (run.id == 0 || (members && run.reached > run.nmembers))
					abort();
				ro_run_release(&run);
			}
		struct persist_node pn;
		if (record_node_from_json(c, &pn) == 0 && (!pn.id[0] || !pn.labels[0]))
			abort();
		struct persist_token pt;
		if (record_token_from_json(c, &pt) == 0 && (!pt.id[0] || !pt.hash[0]))
			abort();
		struct persist_approval *ap;
		size_t nap;
		if (record_approvals_from_json(c, &ap, &nap) == 0) {
			if (nap > (size_t)cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(c, "approvals")))
				abort();
			for (size_t i = 0; i < nap; i++)
				if (!ap[i].sub || !ap[i].kid || !ap[i].token)
					abort();
			free(ap);
		}
	}
	for (const cJSON *it = c ? c->child : NULL; it; it = it->next)
		records(it);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct relay_state rs;
	char err[512];
	if (relay_state_decode((const char *)data, size, &rs, err, sizeof(err)) == 0) {
		if (rs.horizon > rs.version || rs.released > rs.version || (!rs.version && rs.n))
			abort();
		for (size_t i = 0; i < rs.noverridden; i++)   /* overridden versions: 1..version */
			if (rs.overridden[i] == 0 || rs.overridden[i] > rs.version)
				abort();
		for (size_t i = 0; i < rs.n; i++) {
			const struct persist_remote *c = &rs.ch[i];
			char nerr[160];
			if (resource_fullname_check(c->name, nerr, sizeof(nerr)) < 0 || c->version == 0 ||
			    c->version > rs.version)
				abort();
			if (i && (c->version < rs.ch[i - 1].version ||
				  (c->version == rs.ch[i - 1].version && strcmp(c->name, rs.ch[i - 1].name) <= 0)))
				abort();
			if (c->body) {
				cJSON *b = cJSON_ParseWithLength(c->body, c->body_len);
				char *again = b ? cJSON_PrintUnformatted(b) : NULL;
				if (!cJSON_IsObject(b) || !again || strlen(again) != c->body_len ||
				    memcmp(again, c->body, c->body_len) != 0)
					abort();
				free(again);
				cJSON_Delete(b);
			}
		}
		relay_state_release(&rs);
	} else if (!err[0]) {
		abort();   /* a refusal says why */
	}
	cJSON *j = cJSON_ParseWithLength((const char *)data, size);
	records(j);
	cJSON_Delete(j);
	return 0;
}
