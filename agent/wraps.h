/* wraps.h: the wraps this node opens its sealed secrets with, one per
 * (secret, envelope id): the wrap of that envelope's data key for one of
 * the node's keys. The same form is the plane's answer to GET /v1/wraps and
 * STATE_DIR/wraps.json (0600, replaced atomically), which holds the
 * applied state's secrets and, while an apply is under way, its
 * candidate's too (a secret then has two entries, an array), so an offline
 * boot opens last-good with it whatever became of the apply:
 *   {"kid":"<16 hex>","wraps":{"secret/a":{"id":"<32 hex>","wrap":"<b64>"
 *                                          [,"kid":"<16 hex>"]}
 *                              | [{...},{...}], ...}}
 * (an entry's own "kid": a wrap for the key before a rotation). Wraps are
 * no secret (only the node's key opens them), but none is ever logged. */
#ifndef TETHER_WRAPS_H
#define TETHER_WRAPS_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "envelope.h"
#include "keys.h"
#include "strmap.h"

#define WRAPS_FILE "wraps.json"
#define WRAPS_B64_LEN 108               /* base64 of ENVELOPE_WRAP_BYTES */
#define WRAPS_TEXT_MAX (64u << 20)
#define WRAPS_PER_NAME_MAX 4            /* entries of one name in wraps.json */

struct wrap_entry {
	char *key;                           /* the map's key: "NAME\nID" */
	char *name;                          /* "secret/NAME" */
	char id[ENVELOPE_ID_LEN + 1];
	char kid[KEY_ID_LEN + 1];
	char wrap[WRAPS_B64_LEN + 1];
};

struct wraps {
	struct strmap by_name;               /* "NAME\nID" -> struct wrap_entry * */
	size_t n;
	bool dirty;                          /* changed since loaded or saved */
};

void wraps_init(struct wraps *w);
void wraps_release(struct wraps *w);
/* The entry of (name, envelope id), or NULL. */
const struct wrap_entry *wraps_get(const struct wraps *w, const char *name, const char *id);
/* Adds or replaces (name, id)'s entry (the values as checked by wraps_parse). */
void wraps_put(struct wraps *w, const char *name, const char *id, const char *kid, const char *wrap);
/* Drops (name, id)'s entry (none: nothing). */
void wraps_del(struct wraps *w, const char *name, const char *id);
/* Calls fn for every entry (unordered). */
void wraps_each(const struct wraps *w, void (*fn)(void *ctx, const struct wrap_entry *e), void *ctx);
/* Drops every entry keep says no to. */
void wraps_prune(struct wraps *w, bool (*keep)(void *ctx, const struct wrap_entry *e), void *ctx);

/* Parses the form above into w (adding; an entry without its own kid takes
 * the top one). kid, when given, must be the top "kid" (an answer for
 * another key is refused). Returns 0, or -1 with err naming the field. */
int wraps_parse(const char *text, size_t len, const char *kid, struct wraps *w, char *err, size_t errlen);
/* The form above, names sorted, top kid = kid. */
void wraps_text(const struct wraps *w, const char *kid, struct buf *out);

/* STATE_DIR/wraps.json: load (absent: 0, nothing added) and save
 * (temp file, fsync, rename, fsync of the directory; 0600). */
int wraps_load(const char *state_dir, struct wraps *w, char *err, size_t errlen);
int wraps_save(const char *state_dir, struct wraps *w, const char *kid, char *err, size_t errlen);

#endif
