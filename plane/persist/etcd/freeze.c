/* persist/etcd/freeze.c: the etcd backend's freeze window (see persist.h):
 * the key freeze under the prefix, its value the record as JSON; absent
 * when there is none. Every replica reads it there (a write's check, the
 * keeper's look once a second), so one replica's freeze holds on all. */
#include "persist/etcd/etcd.h"
#include "xmalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int etcd_freeze_load(struct persist *p, char **json, char *err, size_t errlen)
{
	char *key = persist_etcd_key(p, "freeze"), *v = NULL;
	size_t len = 0;
	*json = NULL;
	int rc = persist_etcd_get(p, key, &v, &len, err, errlen);
	free(key);
	if (rc == ETCD_UNAVAILABLE)
		return PERSIST_UNAVAILABLE;
	if (rc < 0)
		return -1;
	if (rc == 1) {
		*json = xstrndup(v ? v : "", len);
		free(v);
	}
	return rc;
}

int etcd_freeze_save(struct persist *p, const char *json, char *err, size_t errlen)
{
	char *key = persist_etcd_key(p, "freeze");
	int rc;
	if (json) {
		rc = persist_etcd_put(p, key, json, strlen(json), err, errlen);
	} else {
		cJSON *b = cJSON_CreateObject(), *resp = NULL;
		char *k64 = etcd_b64(key, strlen(key));
		cJSON_AddStringToObject(b, "key", k64);
		free(k64);
		rc = etcd_call(persist_etcd_client(p), "/v3/kv/deleterange", b, &resp, err, errlen);
		cJSON_Delete(resp);
	}
	free(key);
	if (rc == ETCD_UNAVAILABLE)
		return PERSIST_UNAVAILABLE;
	return rc < 0 ? -1 : 0;
}
