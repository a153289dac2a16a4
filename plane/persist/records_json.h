/* persist/records_json.h: the plane's records as small JSON objects, one form for
 * every place they travel: etcd keeps them (persist/etcd/records.c) and a
 * relay passes them along (persist/relay/link.c, api/relay.c). Numbers are decimal
 * strings (a double cannot hold every uint64). The *_from_json functions
 * borrow strings from the object: use the record while it lives. */
#ifndef TETHER_RECORDS_JSON_H
#define TETHER_RECORDS_JSON_H

#include <stdbool.h>

#include <cjson/cJSON.h>
#include "persist/persist.h"
#include "persist/rollout_rec.h"

uint64_t record_u64(const cJSON *o, const char *field);
const char *record_str(const cJSON *o, const char *field);

/* A new object (the caller deletes it). */
cJSON *record_run_to_json(const struct ro_run *run);
/* 0, or -1 (x released) for a record with a bad id, state or stage. */
int record_run_from_json(const cJSON *o, bool with_members, struct ro_run *x);

cJSON *record_node_to_json(const struct persist_node *n);
/* 0, or -1 when the id or the labels are missing. */
int record_node_from_json(const cJSON *o, struct persist_node *n);

cJSON *record_token_to_json(const struct persist_token *t);
/* 0, or -1 when the id or the hash is missing. */
int record_token_from_json(const cJSON *o, struct persist_token *t);
/* A relay stream's "approvals" event, {"approvals":[{"version","sub","kid",
 * "token"}...]}: *list (malloc'd; its strings borrowed from o) gets the
 * well-formed entries (a malformed one is skipped: the nodes verify every
 * token), *n their count. 0, or -1 when o has no "approvals" array. */
int record_approvals_from_json(const cJSON *o, struct persist_approval **list, size_t *n);

#endif
