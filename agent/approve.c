/* approve.c: approvals a node enforces (--approvers FILE --approvals K;
 * docs/protocol.md, "Approvals"). After a push's statement verified, K
 * distinct keys of FILE must have signed exactly what it signs -- its
 * version, our subscription, its digest -- in the push's "approvals"
 * (common/approval.h). The plane's key alone, a key not in FILE, one key
 * twice, an approval of another version, subscription or state: not
 * counted. Fewer than K: the push is NACKed and the node keeps serving
 * what it has. A boot from last-good, or a resumed apply, needs none
 * again: they were counted when the push came. */
#include "agent_int.h"
#include "approval.h"
#include "log.h"

#include <stdio.h>
#include <string.h>

/* An approver key that also signs statements (in keys, --trust) would let
 * the plane's key alone approve: refused. 0, or -1 with err. */
static int apart(const struct agent *a, const struct trust *keys, const struct trust *approvers, char *err,
		 size_t errlen)
{
	for (size_t i = 0; i < approvers->n; i++) {
		const struct trusted_key *k = keys_find(keys, approvers->key[i].kid);
		if (k && memcmp(k->pk, approvers->key[i].pk, sizeof(k->pk)) == 0) {
			snprintf(err, errlen, "--approvers '%s': key %s is also a statement key of --trust '%s': a stolen "
				 "plane key would approve too. Give approvers their own keys (tetherctl keygen "
				 "--approver)", a->cfg.approvers, approvers->key[i].kid, a->cfg.trust);
			return -1;
		}
	}
	return 0;
}

int approve_init(struct agent *a, char *err, size_t errlen)
{
	if (!a->cfg.approvers)
		return 0;
	if (keys_load_trust(a->cfg.approvers, &a->trust.approvers, err, errlen) < 0)
		return -1;
	if (a->cfg.approvals > a->trust.approvers.n) {
		snprintf(err, errlen, "--approvals %llu: '%s' holds only %zu approver keys",
			 (unsigned long long)a->cfg.approvals, a->cfg.approvers, a->trust.approvers.n);
		return -1;
	}
	if (apart(a, &a->trust.keys, &a->trust.approvers, err, errlen) < 0)
		return -1;
	log_info("approvals: a version needs %llu of the %zu approver keys in %s, besides the plane's signature",
		 (unsigned long long)a->cfg.approvals, a->trust.approvers.n, a->cfg.approvers);
	return 0;
}

int approve_reload(struct agent *a, const struct trust *keys)
{
	if (!a->cfg.approvers)
		return 0;
	struct trust t;
	char err[512];
	if (keys_load_trust(a->cfg.approvers, &t, err, sizeof(err)) < 0) {
		log_error("SIGHUP: %s (keeping the approver keys)", err);
	} else if (a->cfg.approvals > t.n) {
		log_error("SIGHUP: '%s' holds only %zu approver keys, --approvals is %llu (keeping the approver keys)",
			  a->cfg.approvers, t.n, (unsigned long long)a->cfg.approvals);
	} else if (apart(a, keys, &t, err, sizeof(err)) < 0) {
		log_error("SIGHUP: %s (keeping the approver keys)", err);
	} else {
		a->trust.approvers = t;
		log_info("SIGHUP: %zu approver keys loaded from %s", t.n, a->cfg.approvers);
		return 0;
	}
	/* the old approver keys stay: apart from the statement keys too */
	if (apart(a, keys, &a->trust.approvers, err, sizeof(err)) < 0) {
		log_error("SIGHUP: %s (keeping the trusted keys)", err);
		return -1;
	}
	return 0;
}

int approve_check(struct agent *a, const struct push *p, uint64_t version, const unsigned char *digest, char *err,
		  size_t errlen)
{
	if (!a->cfg.approvals)
		return 0;
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(p->doc, "approvals");
	const char *toks[APPROVALS_MAX];
	size_t n = 0;
	if (arr && !cJSON_IsArray(arr)) {
		snprintf(err, errlen, "approvals: the push's approvals must be an array of tokens");
		return -1;
	}
	for (const cJSON *t = arr ? arr->child : NULL; t; t = t->next) {
		if (!cJSON_IsString(t)) {
			snprintf(err, errlen, "approvals: the push's approvals must be an array of tokens (strings)");
			return -1;
		}
		if (n == APPROVALS_MAX) {
			snprintf(err, errlen, "approvals: more than %d in one push", APPROVALS_MAX);
			return -1;
		}
		toks[n++] = t->valuestring;
	}
	char why[768];
	size_t got = approval_count(toks, n, &a->trust.approvers, a->cfg.approvers, version, a->trust.sub.canon,
				    digest, why, sizeof(why));
	if (got >= a->cfg.approvals)
		return 0;
	if (n == 0)
		snprintf(why, sizeof(why), "no approval came with version %llu: the plane's signature alone",
			 (unsigned long long)version);
	snprintf(err, errlen, "approvals: %zu of %llu needed for version %llu (%s)", got,
		 (unsigned long long)a->cfg.approvals, (unsigned long long)version, why);
	return -1;
}
