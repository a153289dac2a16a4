/* labels.h: node labels "k=v,k2=v2" as the agent sends them and the plane
 * records them: keys [A-Za-z0-9._/-]{1,63}, values [A-Za-z0-9._-]{0,63},
 * at most 32 pairs, no key twice. */
#ifndef TETHER_LABELS_H
#define TETHER_LABELS_H

#include <stddef.h>
#include <cjson/cJSON.h>

#define LABELS_MAX 32

/* Parses s into a new JSON object of strings (caller deletes). Returns NULL
 * with err on a malformed list. An empty string gives an empty object. */
cJSON *labels_parse(const char *s, char *err, size_t errlen);

#endif
