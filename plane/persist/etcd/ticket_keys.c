/* persist/etcd/ticket_keys.c: the etcd backend's TLS session-ticket keys
 * (see persist.h): the key ticket_keys under the prefix, shared by the
 * replicas; a swap compares its mod_revision (or its absence), so two
 * replicas rotating at once store one new key. Whoever may read the
 * prefix in etcd may read the keys: etcd's own auth guards them. */
#include "persist/etcd/etcd.h"
#include "persist/ticket_keys.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int etcd_ticket_keys_load(struct persist *p, struct persist_ticket_keys *k, uint64_t *rev, char *err,
			  size_t errlen)
{
	char *key = persist_etcd_key(p, "ticket_keys"), *k64 = etcd_b64(key, strlen(key));
	cJSON *b = cJSON_CreateObject(), *resp = NULL;
	cJSON_AddStringToObject(b, "key", k64);
	free(k64);
	*rev = 0;
	int rc = etcd_call(persist_etcd_client(p), "/v3/kv/range", b, &resp, err, errlen);
	if (rc < 0) {
		free(key);
		return rc == ETCD_UNAVAILABLE ? PERSIST_UNAVAILABLE : -1;
	}
	const cJSON *kv = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(resp, "kvs"), 0);
	rc = 0;
	if (kv) {
		struct etcd_kv d;
		rc = -1;
		if (etcd_kv_decode(kv, false, &d) == 0) {
			*rev = d.mod_revision;
			rc = PERSIST_MALFORMED;
			if (d.value && ticket_keys_decode(d.value, d.value_len, k) == 0)
				rc = 1;
			if (d.value)
				explicit_bzero(d.value, d.value_len);
			etcd_kv_release(&d);
		}
		if (rc < 0)
			snprintf(err, errlen, "etcd: '%s' (the TLS session-ticket keys) is malformed", key);
		if (rc == -1)
			*rev = 0;   /* not even a key-value: not replaced */
	}
	free(key);
	cJSON_Delete(resp);
	return rc;
}

int etcd_ticket_keys_swap(struct persist *p, const struct persist_ticket_keys *k, uint64_t *rev, char *err,
			  size_t errlen)
{
	char *key = persist_etcd_key(p, "ticket_keys"), *k64 = etcd_b64(key, strlen(key)), num[24];
	char text[TICKET_KEYS_TEXT];
	cJSON *b = cJSON_CreateObject(), *resp = NULL;
	cJSON *cmp = cJSON_AddArrayToObject(b, "compare"), *c = cJSON_CreateObject();
	cJSON_AddStringToObject(c, "key", k64);
	cJSON_AddStringToObject(c, "result", "EQUAL");
	snprintf(num, sizeof(num), "%llu", (unsigned long long)*rev);
	if (*rev == 0) {
		cJSON_AddStringToObject(c, "target", "CREATE");
		cJSON_AddStringToObject(c, "create_revision", "0");
	} else {
		cJSON_AddStringToObject(c, "target", "MOD");
		cJSON_AddStringToObject(c, "mod_revision", num);
	}
	cJSON_AddItemToArray(cmp, c);
	free(k64);
	size_t len = ticket_keys_encode(k, text);
	persist_etcd_txn_put(cJSON_AddArrayToObject(b, "success"), key, text, len);
	explicit_bzero(text, sizeof(text));
	free(key);
	int rc = etcd_call(persist_etcd_client(p), "/v3/kv/txn", b, &resp, err, errlen);
	if (rc == 0) {
		if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resp, "succeeded"))) {
			*rev = etcd_u64(cJSON_GetObjectItemCaseSensitive(resp, "header"), "revision");
		} else {
			snprintf(err, errlen, "the TLS session-ticket keys changed meanwhile");
			rc = PERSIST_CONFLICT;
		}
	} else {
		rc = rc == ETCD_UNAVAILABLE ? PERSIST_UNAVAILABLE : -1;
	}
	cJSON_Delete(resp);
	return rc;
}
