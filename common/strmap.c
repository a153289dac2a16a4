/* strmap.c: open-addressing string map with linear probing (see strmap.h). */
#include "strmap.h"
#include "xmalloc.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

uint64_t strmap_hash(const char *s)
{
	uint64_t h = 14695981039346656037ULL;   /* FNV-1a */
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ULL;
	}
	return h;
}

void strmap_init(struct strmap *m)
{
	m->slots = NULL;
	m->cap = 0;
	m->len = 0;
}

void strmap_release(struct strmap *m)
{
	free(m->slots);
	strmap_init(m);
}

static struct strmap_slot *probe(struct strmap_slot *slots, size_t cap, const char *key)
{
	size_t i = strmap_hash(key) & (cap - 1);
	while (slots[i].key && strcmp(slots[i].key, key) != 0)
		i = (i + 1) & (cap - 1);
	return &slots[i];
}

static void grow(struct strmap *m)
{
	size_t cap = m->cap ? m->cap * 2 : 16;
	struct strmap_slot *slots = xcalloc(cap, sizeof(*slots));
	for (size_t i = 0; i < m->cap; i++) {
		if (m->slots[i].key)
			*probe(slots, cap, m->slots[i].key) = m->slots[i];
	}
	free(m->slots);
	m->slots = slots;
	m->cap = cap;
}

/* Linear probing stays quick up to three quarters full. */
static bool full(const struct strmap *m)
{
	return (m->len + 1) * 4 > m->cap * 3;
}

intptr_t *strmap_ref(struct strmap *m, const char *key)
{
	if (full(m))
		grow(m);
	struct strmap_slot *s = probe(m->slots, m->cap, key);
	if (!s->key) {
		s->key = key;
		s->val = 0;
		m->len++;
	}
	return &s->val;
}

void strmap_put(struct strmap *m, const char *key, intptr_t val)
{
	if (full(m))
		grow(m);
	struct strmap_slot *s = probe(m->slots, m->cap, key);
	if (!s->key)
		m->len++;
	s->key = key;
	s->val = val;
}

bool strmap_get(const struct strmap *m, const char *key, intptr_t *val)
{
	if (!m->cap)
		return false;
	const struct strmap_slot *s = probe(m->slots, m->cap, key);
	if (!s->key)
		return false;
	if (val)
		*val = s->val;
	return true;
}

const char *strmap_del(struct strmap *m, const char *key)
{
	if (!m->cap)
		return NULL;
	struct strmap_slot *s = probe(m->slots, m->cap, key);
	if (!s->key)
		return NULL;
	const char *held = s->key;
	/* backward-shift deletion keeps every probe chain unbroken */
	size_t i = (size_t)(s - m->slots), j = i;
	for (;;) {
		j = (j + 1) & (m->cap - 1);
		if (!m->slots[j].key)
			break;
		size_t home = strmap_hash(m->slots[j].key) & (m->cap - 1);
		/* move j back into i when its home is not in (i, j] */
		bool between = i <= j ? (home > i && home <= j) : (home > i || home <= j);
		if (!between) {
			m->slots[i] = m->slots[j];
			i = j;
		}
	}
	m->slots[i].key = NULL;
	m->slots[i].val = 0;
	m->len--;
	return held;
}
