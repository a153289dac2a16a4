/* persist/records_json.c: rollout, node and token records as JSON (see
 * records_json.h). */
#include "persist/records_json.h"
#include "json.h"
#include "util.h"
#include "xmalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void num(cJSON *o, const char *k, uint64_t v)
{
	char s[24];
	snprintf(s, sizeof(s), "%llu", (unsigned long long)v);
	cJSON_AddStringToObject(o, k, s);
}

uint64_t record_u64(const cJSON *o, const char *field)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, field);
	uint64_t x = 0;
	if (cJSON_IsString(v) && parse_u64(v->valuestring, &x) == 0)
		return x;
	/* a number out of uint64's range (a lying peer) is not converted:
	 * the cast would be undefined */
	if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 18446744073709551616.0)
		return (uint64_t)v->valuedouble;
	return 0;
}

const char *record_str(const cJSON *o, const char *field)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, field);
	return cJSON_IsString(v) ? v->valuestring : "";
}

/* ---- rollouts ---------------------------------------------------------------- */

cJSON *record_run_to_json(const struct ro_run *run)
{
	cJSON *o = cJSON_CreateObject();
	num(o, "id", run->id);
	num(o, "state", (uint64_t)run->state);
	num(o, "stage", run->stage);
	num(o, "reached", run->reached);
	num(o, "from", run->from);
	num(o, "to", run->to);
	num(o, "revert", run->revert);
	num(o, "parent", run->parent);
	num(o, "touched", run->touched);
	cJSON_AddStringToObject(o, "reason", run->reason ? run->reason : "");
	cJSON *m = cJSON_AddArrayToObject(o, "members");
	for (size_t i = 0; i < run->nmembers; i++)
		cJSON_AddItemToArray(m, cJSON_CreateString(run->members[i]));
	num(o, "started_at", (uint64_t)run->started_at);
	num(o, "stage_at", (uint64_t)run->stage_at);
	num(o, "finished_at", (uint64_t)run->finished_at);
	num(o, "msgs", run->msgs);
	num(o, "revert_msgs", run->revert_msgs);
	num(o, "bump_msgs", run->bump_msgs);
	return o;
}

int record_run_from_json(const cJSON *o, bool with_members, struct ro_run *x)
{
	memset(x, 0, sizeof(*x));
	x->id = record_u64(o, "id");
	x->state = (enum ro_state)record_u64(o, "state");
	x->stage = (size_t)record_u64(o, "stage");
	x->reached = (size_t)record_u64(o, "reached");
	x->from = record_u64(o, "from");
	x->to = record_u64(o, "to");
	x->revert = record_u64(o, "revert");
	x->parent = record_u64(o, "parent");
	x->touched = (size_t)record_u64(o, "touched");
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "members"), *it;
	if (with_members) {
		x->members = xcalloc((size_t)cJSON_GetArraySize(m) + 1, sizeof(char *));
		cJSON_ArrayForEach(it, m)
			if (cJSON_IsString(it))
				x->members[x->nmembers++] = xstrdup(it->valuestring);
	} else {
		x->member_count = (size_t)cJSON_GetArraySize(m);
	}
	x->reason = xstrdup(record_str(o, "reason"));
	x->started_at = (int64_t)record_u64(o, "started_at");
	x->stage_at = (int64_t)record_u64(o, "stage_at");
	x->finished_at = (int64_t)record_u64(o, "finished_at");
	x->msgs = record_u64(o, "msgs");
	x->revert_msgs = record_u64(o, "revert_msgs");
	x->bump_msgs = record_u64(o, "bump_msgs");
	if (x->id == 0 || x->state < RO_IN_PROGRESS || x->state > RO_ABORTED ||
	    (with_members && x->reached > x->nmembers)) {
		ro_run_release(x);
		return -1;
	}
	return 0;
}

/* ---- nodes ------------------------------------------------------------------- */

cJSON *record_node_to_json(const struct persist_node *r)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "id", r->id);
	cJSON_AddStringToObject(o, "labels", r->labels);
	cJSON_AddStringToObject(o, "transport", r->transport);
	num(o, "first_seen", (uint64_t)r->first_seen);
	num(o, "last_seen", (uint64_t)r->last_seen);
	num(o, "sent_version", r->sent_version);
	cJSON_AddStringToObject(o, "sent_nonce", r->sent_nonce ? r->sent_nonce : "");
	num(o, "sent_at", (uint64_t)r->sent_at);
	num(o, "acked_version", r->acked_version);
	num(o, "acked_at", (uint64_t)r->acked_at);
	if (r->healthy >= 0)
		cJSON_AddNumberToObject(o, "healthy", r->healthy);
	if (r->has_nack) {
		cJSON_AddTrueToObject(o, "has_nack");
		num(o, "nack_version", r->nack_version);
		cJSON_AddStringToObject(o, "nack_nonce", r->nack_nonce ? r->nack_nonce : "");
		cJSON_AddStringToObject(o, "nack_error", r->nack_error ? r->nack_error : "");
		num(o, "nack_at", (uint64_t)r->nack_at);
	}
	num(o, "acks", r->acks);
	num(o, "nacks", r->nacks);
	num(o, "stale", r->stale);
	cJSON_AddStringToObject(o, "replica", r->replica ? r->replica : "");
	if (r->streaming)
		cJSON_AddTrueToObject(o, "streaming");
	if (r->via && r->via[0])
		cJSON_AddStringToObject(o, "via", r->via);
	if (r->sub)
		cJSON_AddStringToObject(o, "sub", r->sub);
	if (r->traffic)
		cJSON_AddStringToObject(o, "traffic", r->traffic);
	if (r->counts) {   /* whether it counts its traffic (the controller's gates) */
		cJSON_AddBoolToObject(o, "counts", r->counts > 0);
		if (r->counts < 0)
			cJSON_AddStringToObject(o, "counts_reason", r->counts_reason ? r->counts_reason : "");
	}
	if (r->verify_failures) {
		num(o, "verify_failures", r->verify_failures);
		num(o, "vf_version", r->vf_version);
		cJSON_AddStringToObject(o, "vf_error", r->vf_error ? r->vf_error : "");
		num(o, "vf_at", (uint64_t)r->vf_at);
	}
	if (r->key && r->key[0]) {
		cJSON_AddStringToObject(o, "key", r->key);
		cJSON_AddStringToObject(o, "key_id", r->key_id ? r->key_id : "");
		if (r->key_via && r->key_via[0])
			cJSON_AddStringToObject(o, "key_via", r->key_via);
		if (r->key_pending)
			cJSON_AddTrueToObject(o, "key_pending");
	}
	if (r->key_at > 0)   /* the registrations' high-water mark, key or none */
		num(o, "key_at", (uint64_t)r->key_at);
	if (r->revoked && r->revoked[0])
		cJSON_AddStringToObject(o, "revoked", r->revoked);
	if (r->held_at) {
		num(o, "held_version", r->held_version);
		cJSON_AddStringToObject(o, "held_reason", r->held_reason ? r->held_reason : "");
		num(o, "held_at", (uint64_t)r->held_at);
	}
	return o;
}

int record_node_from_json(const cJSON *o, struct persist_node *n)
{
	const cJSON *h = cJSON_GetObjectItemCaseSensitive(o, "healthy");
	*n = (struct persist_node){
		.id = record_str(o, "id"), .labels = record_str(o, "labels"), .transport = record_str(o, "transport"),
		.first_seen = (int64_t)record_u64(o, "first_seen"), .last_seen = (int64_t)record_u64(o, "last_seen"),
		.sent_version = record_u64(o, "sent_version"), .sent_nonce = record_str(o, "sent_nonce"),
		.sent_at = (int64_t)record_u64(o, "sent_at"), .acked_version = record_u64(o, "acked_version"),
		.acked_at = (int64_t)record_u64(o, "acked_at"),
		.healthy = cJSON_IsNumber(h) && (h->valueint == 0 || h->valueint == 1) ? h->valueint : -1,
		.has_nack = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "has_nack")),
		.nack_version = record_u64(o, "nack_version"), .nack_nonce = record_str(o, "nack_nonce"),
		.nack_error = record_str(o, "nack_error"), .nack_at = (int64_t)record_u64(o, "nack_at"),
		.acks = record_u64(o, "acks"), .nacks = record_u64(o, "nacks"), .stale = record_u64(o, "stale"),
		.replica = record_str(o, "replica"),
		.streaming = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "streaming")),
		.via = record_str(o, "via"),
		.verify_failures = record_u64(o, "verify_failures"), .vf_version = record_u64(o, "vf_version"),
		.vf_at = (int64_t)record_u64(o, "vf_at"),
		.key = record_str(o, "key"), .key_id = record_str(o, "key_id"),
		.key_at = (int64_t)(record_u64(o, "key_at") & INT64_MAX), .revoked = record_str(o, "revoked"),
		.key_via = record_str(o, "key_via"),
		.key_pending = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "key_pending")),
		.held_version = record_u64(o, "held_version"), .held_reason = record_str(o, "held_reason"),
		.held_at = (int64_t)(record_u64(o, "held_at") & INT64_MAX),
	};
	if (n->verify_failures)
		n->vf_error = record_str(o, "vf_error");
	const cJSON *sub = cJSON_GetObjectItemCaseSensitive(o, "sub");
	n->sub = cJSON_IsString(sub) ? sub->valuestring : NULL;
	const cJSON *traffic = cJSON_GetObjectItemCaseSensitive(o, "traffic");
	n->traffic = cJSON_IsString(traffic) ? traffic->valuestring : NULL;
	const cJSON *counts = cJSON_GetObjectItemCaseSensitive(o, "counts");
	n->counts = cJSON_IsBool(counts) ? (cJSON_IsTrue(counts) ? 1 : -1) : 0;
	n->counts_reason = n->counts < 0 ? record_str(o, "counts_reason") : NULL;
	return n->id[0] && n->labels[0] ? 0 : -1;
}

/* ---- tokens ------------------------------------------------------------------ */

cJSON *record_token_to_json(const struct persist_token *t)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "id", t->id);
	cJSON_AddStringToObject(o, "hash", t->hash);
	cJSON_AddStringToObject(o, "role", t->role);
	cJSON_AddStringToObject(o, "node", t->node ? t->node : "");
	cJSON_AddStringToObject(o, "name", t->name ? t->name : "");
	num(o, "created", (uint64_t)t->created);
	num(o, "revoked", (uint64_t)t->revoked);
	if (t->expires > 0)   /* a console session's */
		num(o, "expires", (uint64_t)t->expires);
	return o;
}

int record_approvals_from_json(const cJSON *o, struct persist_approval **list, size_t *n)
{
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(o, "approvals"), *t;
	*list = NULL;
	*n = 0;
	if (!cJSON_IsArray(arr))
		return -1;
	size_t cap = (size_t)cJSON_GetArraySize(arr), k = 0;
	struct persist_approval *l = xcalloc(cap ? cap : 1, sizeof(*l));
	cJSON_ArrayForEach(t, arr) {
		uint64_t v = 0;
		const char *sub = json_get_string(t, "sub"), *kid = json_get_string(t, "kid");
		const char *tok = json_get_string(t, "token");
		if (k < cap && json_get_u64(cJSON_GetObjectItemCaseSensitive(t, "version"), &v) && sub && kid && tok)
			l[k++] = (struct persist_approval){ v, sub, kid, tok };
	}
	*list = l;
	*n = k;
	return 0;
}

int record_token_from_json(const cJSON *o, struct persist_token *t)
{
	*t = (struct persist_token){
		.id = record_str(o, "id"), .hash = record_str(o, "hash"), .role = record_str(o, "role"),
		.node = record_str(o, "node"), .name = record_str(o, "name"),
		.created = (int64_t)record_u64(o, "created"), .revoked = (int64_t)record_u64(o, "revoked"),
		.expires = (int64_t)record_u64(o, "expires"),
	};
	return t->id[0] && t->hash[0] ? 0 : -1;
}
