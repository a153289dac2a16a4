/* rollout/order.c: deterministic, label-stratified rollout order (see
 * rollout/order.h). */
#include "rollout/order.h"
#include "buf.h"
#include "strmap.h"
#include "xmalloc.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

size_t rollout_stage_size(size_t n, unsigned pct)
{
	if (n == 0)
		return 0;
	size_t k = (n * pct + 99) / 100;
	if (k < 1)
		k = 1;
	return k > n ? n : k;
}

struct item {
	size_t idx;            /* into nodes */
	uint64_t hash;         /* of the id: a fixed shuffle */
	const char *id;
	char **pairs;          /* "key=value" */
	size_t npairs;
	bool taken;
};

static int cmp_item(const void *a, const void *b)
{
	const struct item *x = a, *y = b;
	if (x->hash != y->hash)
		return x->hash < y->hash ? -1 : 1;
	return strcmp(x->id, y->id);
}

struct value {
	const char *text;      /* "key=value" */
	intptr_t holders;      /* nodes with it */
};

static int cmp_value(const void *a, const void *b)
{
	const struct value *x = a, *y = b;
	if (x->holders != y->holders)
		return x->holders < y->holders ? -1 : 1;
	return strcmp(x->text, y->text);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "key=value" for every string label (other values as their JSON). */
static void parse_pairs(const char *labels, struct item *it)
{
	cJSON *obj = labels ? cJSON_Parse(labels) : NULL;
	size_t cap = (size_t)(obj ? cJSON_GetArraySize(obj) : 0);
	it->pairs = xcalloc(cap ? cap : 1, sizeof(char *));
	const cJSON *kv;
	cJSON_ArrayForEach(kv, obj) {
		struct buf b = BUF_INIT;
		buf_puts(&b, kv->string ? kv->string : "");
		buf_putc(&b, '=');
		if (cJSON_IsString(kv)) {
			buf_puts(&b, kv->valuestring);
		} else {
			char *t = cJSON_PrintUnformatted(kv);
			buf_puts(&b, t ? t : "");
			cJSON_free(t);
		}
		it->pairs[it->npairs++] = buf_detach(&b, NULL);
	}
	cJSON_Delete(obj);
	qsort(it->pairs, it->npairs, sizeof(char *), cmp_str);
}

void rollout_order(const struct ro_node *nodes, size_t n, size_t *order)
{
	if (n == 0)
		return;
	struct item *items = xcalloc(n, sizeof(*items));
	for (size_t i = 0; i < n; i++) {
		items[i].idx = i;
		items[i].id = nodes[i].id;
		items[i].hash = strmap_hash(nodes[i].id);
		parse_pairs(nodes[i].labels, &items[i]);
	}
	qsort(items, n, sizeof(*items), cmp_item);
	size_t out = 0;

	/* 1. cover every distinct label value, rarest first (the minority
	 * a big canary would miss): for each value not yet covered, the first
	 * node in shuffle order that holds it */
	struct strmap count;
	strmap_init(&count);
	struct value *values = NULL;
	size_t nvalues = 0, cap = 0;
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < items[i].npairs; j++) {
			intptr_t *c = strmap_ref(&count, items[i].pairs[j]);
			if ((*c)++ == 0) {
				if (nvalues == cap) {
					cap = cap ? cap * 2 : 16;
					values = xrealloc(values, cap * sizeof(*values));
				}
				values[nvalues++].text = items[i].pairs[j];
			}
		}
	for (size_t v = 0; v < nvalues; v++)
		strmap_get(&count, values[v].text, &values[v].holders);
	if (nvalues > 1)
		qsort(values, nvalues, sizeof(*values), cmp_value);
	/* each value's first holder in shuffle order */
	struct strmap first, covered;
	strmap_init(&first);
	strmap_init(&covered);
	for (size_t i = n; i-- > 0;)
		for (size_t j = 0; j < items[i].npairs; j++)
			strmap_put(&first, items[i].pairs[j], (intptr_t)i);
	for (size_t v = 0; v < nvalues; v++) {
		if (strmap_get(&covered, values[v].text, NULL))
			continue;
		intptr_t at = 0;
		strmap_get(&first, values[v].text, &at);
		struct item *it = &items[at];   /* not taken: it would cover this value */
		it->taken = true;
		order[out++] = it->idx;
		for (size_t j = 0; j < it->npairs; j++)
			strmap_put(&covered, it->pairs[j], 1);
	}
	strmap_release(&first);
	strmap_release(&covered);
	strmap_release(&count);
	free(values);

	/* 2. the rest round-robin over the distinct label sets, sets in
	 * sorted order, members in shuffle order */
	struct strmap groups;
	strmap_init(&groups);
	size_t ngroups = 0;
	const char **gkeys = xcalloc(n, sizeof(*gkeys));
	for (size_t i = 0; i < n; i++) {
		const char *key = nodes[items[i].idx].labels ? nodes[items[i].idx].labels : "{}";
		if (!strmap_get(&groups, key, NULL)) {
			strmap_put(&groups, key, (intptr_t)ngroups);
			gkeys[ngroups++] = key;
		}
	}
	qsort(gkeys, ngroups, sizeof(*gkeys), cmp_str);
	for (size_t g = 0; g < ngroups; g++)
		strmap_put(&groups, gkeys[g], (intptr_t)g);
	size_t *gcursor = xcalloc(ngroups, sizeof(*gcursor));   /* next item to look at */
	size_t **gmembers = xcalloc(ngroups, sizeof(*gmembers));
	size_t *glen = xcalloc(ngroups, sizeof(*glen));
	for (size_t i = 0; i < n; i++) {
		intptr_t g = 0;
		strmap_get(&groups, nodes[items[i].idx].labels ? nodes[items[i].idx].labels : "{}", &g);
		gmembers[g] = xrealloc(gmembers[g], (glen[g] + 1) * sizeof(size_t));
		gmembers[g][glen[g]++] = i;
	}
	while (out < n) {
		for (size_t g = 0; g < ngroups; g++) {
			while (gcursor[g] < glen[g] && items[gmembers[g][gcursor[g]]].taken)
				gcursor[g]++;
			if (gcursor[g] < glen[g]) {
				struct item *it = &items[gmembers[g][gcursor[g]++]];
				it->taken = true;
				order[out++] = it->idx;
			}
		}
	}
	for (size_t g = 0; g < ngroups; g++)
		free(gmembers[g]);
	free(gmembers);
	free(glen);
	free(gcursor);
	free(gkeys);
	strmap_release(&groups);
	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; j < items[i].npairs; j++)
			free(items[i].pairs[j]);
		free(items[i].pairs);
	}
	free(items);
}
