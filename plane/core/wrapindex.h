/* core/wrapindex.h: a sealed secret's wraps by node key id, made once when
 * its stored body enters the store, so GET /v1/wraps and GET /v1/secrets
 * answer a name in O(log wraps) without parsing the body (which may hold
 * up to ENVELOPE_WRAPS_MAX wraps). */
#ifndef TETHER_WRAPINDEX_H
#define TETHER_WRAPINDEX_H

#include <stddef.h>

struct wrapindex;

/* The index of a stored body (a sealed secret's, with "wraps"); NULL when
 * it does not parse or holds no envelope id (a damaged body: nothing is
 * answered from it). */
struct wrapindex *wrapindex_make(const char *stored, size_t len);
void wrapindex_free(struct wrapindex *ix);
/* The envelope's id. */
const char *wrapindex_id(const struct wrapindex *ix);
/* The wrap for key kid, or NULL. ix may be NULL (none). */
const char *wrapindex_get(const struct wrapindex *ix, const char *kid);

#endif
