/* fuzz_etcd.c: libFuzzer target for what the plane reads back from etcd,
 * which another replica, another version of tether or a damaged key may
 * have written: plane/persist/etcd/value.c (a resource's value, the decimal keys)
 * and persist/etcd/client.c's decoders (base64, a range or watch "kv" object).
 * Each input is used three ways:
 *
 *   1. as a value: etcd_value_parse either refuses it or gives a version
 *      >= 1 and a body inside the input (or none, for a tombstone); what
 *      it accepts formats back to the very same bytes.
 *   2. as a decimal: etcd_value_dec accepts only digits, and what it
 *      accepts prints back to the same digits (one spelling per number).
 *   3. as JSON: every object in it is decoded as a kv (live and deleted);
 *      a decoded key is the base64 of some bytes, and encoding them again
 *      decodes to the same bytes. Every object is also decoded as a
 *      rollout record (members or not), a node record and a token record
 *      (persist/etcd/records.c): a record accepted is whole and in range. */
#include "fuzz.h"
#include "persist/etcd/client.h"
#include "persist/etcd/value.h"
#include "persist/etcd/etcd.h"
#include "persist/records_json.h"
#include "persist/rollout_rec.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a broken promise: say which, and stop (libFuzzer keeps the input) */
#define FUZZ_ASSERT(c) \
	do { \
		if (!(c)) { \
			fprintf(stderr, "fuzz_etcd: %s:%d: %s\n", __FILE__, __LINE__, #c); \
			abort(); \
		} \
	} while (0)

static void as_value(const char *d, size_t n)
{
	uint64_t v;
	int64_t del;
	const char *body;
	size_t blen;
	if (etcd_value_parse(d, n, &v, &del, &body, &blen) < 0)
		return;
	FUZZ_ASSERT(v >= 1);
	FUZZ_ASSERT(!body || (body >= d && body + blen == d + n));
	FUZZ_ASSERT(del >= 0);
	size_t len;
	char *again = etcd_value_format(body, blen, v, del, &len);
	FUZZ_ASSERT(len == n && memcmp(again, d, n) == 0);
	free(again);
}

static void as_decimal(const char *d, size_t n)
{
	uint64_t v;
	if (!etcd_value_dec(d, n, &v))
		return;
	for (size_t i = 0; i < n; i++)
		FUZZ_ASSERT(d[i] >= '0' && d[i] <= '9');
	char back[32];
	snprintf(back, sizeof(back), "%llu", (unsigned long long)v);
	FUZZ_ASSERT(strlen(back) == n && memcmp(back, d, n) == 0);
}

static void as_records(const cJSON *c)
{
	for (int members = 0; members < 2; members++) {
		struct ro_run run;
		if (record_run_from_json(c, members, &run) == 0) {
			FUZZ_ASSERT(run.id != 0);
			FUZZ_ASSERT(run.state >= RO_IN_PROGRESS && run.state <= RO_ABORTED);
			FUZZ_ASSERT(!members || run.reached <= run.nmembers);
			FUZZ_ASSERT(run.reason != NULL);
			for (size_t i = 0; i < run.nmembers; i++)
				FUZZ_ASSERT(run.members[i] != NULL);
			ro_run_release(&run);
		}
	}
	struct persist_node pn;
	if (record_node_from_json(c, &pn) == 0)
		FUZZ_ASSERT(pn.id[0] && pn.labels[0] && pn.replica && pn.transport);
	struct persist_token pt;
	if (record_token_from_json(c, &pt) == 0)
		FUZZ_ASSERT(pt.id[0] && pt.hash[0]);
}

static void walk(const cJSON *j)
{
	for (const cJSON *c = j; c; c = c->next) {
		if (cJSON_IsObject(c)) {
			as_records(c);
			for (int deleted = 0; deleted < 2; deleted++) {
				struct etcd_kv kv;
				if (etcd_kv_decode(c, deleted, &kv) == 0) {
					FUZZ_ASSERT(kv.key != NULL);
					FUZZ_ASSERT(deleted ? kv.value == NULL : kv.value != NULL);
					char *b = etcd_b64(kv.key, kv.key_len);
					size_t n2;
					char *k2 = etcd_unb64(b, &n2);
					FUZZ_ASSERT(k2 && n2 == kv.key_len && memcmp(k2, kv.key, n2) == 0);
					free(k2);
					free(b);
					etcd_kv_release(&kv);
				}
			}
		}
		if (c->child)
			walk(c->child);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *d = (const char *)data;
	as_value(d, size);
	as_decimal(d, size);
	cJSON *j = cJSON_ParseWithLength(d, size);
	walk(j);
	cJSON_Delete(j);
	return 0;
}
