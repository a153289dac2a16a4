/* strmap.h: a string-keyed hash map with borrowed keys (the caller keeps
 * them alive while they are in the map) and pointer-sized values. */
#ifndef TETHER_STRMAP_H
#define TETHER_STRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct strmap_slot {
	const char *key;
	intptr_t val;
};

struct strmap {
	struct strmap_slot *slots;
	size_t cap;     /* power of two */
	size_t len;
};

void strmap_init(struct strmap *m);
void strmap_release(struct strmap *m);
/* Returns a pointer to the value of key, inserting 0 when absent. */
intptr_t *strmap_ref(struct strmap *m, const char *key);
/* Sets key to val; the map then holds this key pointer (also when the key
 * was already present under another pointer to equal bytes). */
void strmap_put(struct strmap *m, const char *key, intptr_t val);
/* Returns true and sets *val when key is present. */
bool strmap_get(const struct strmap *m, const char *key, intptr_t *val);
/* Removes key; returns the key pointer the map held (for the caller to
 * free when it owned it), or NULL when absent. */
const char *strmap_del(struct strmap *m, const char *key);
uint64_t strmap_hash(const char *s);

#endif
