/* consumer/checkmap.h: a consumer checker's refusal (nginx -t, haproxy -c)
 * mapped back to the resource it came from, when the file it names is one
 * tether rendered from a resource: a secret's file under the secrets
 * directory ("NAME-HASH.crt", ".key", haproxy's ".pem") is secret/NAME's
 * cert or key; a line of the configuration tether rendered is the
 * resource whose block or comment it is under, or, between a snippet's
 * marker lines (snippet.h), that resource's snippet. */
#ifndef TETHER_CHECKMAP_H
#define TETHER_CHECKMAP_H

#include <stdbool.h>
#include <stddef.h>

/* Writes "secret/NAME: FIELD: " to out[cap] for the first secret file of
 * secrets_dir that output names (FIELD: cert for .crt, key for .key, and
 * for haproxy's .pem key when output speaks of the private key, else
 * cert), or "" when it names none. */
void checkmap_prefix(const char *output, const char *secrets_dir, char *out, size_t cap);

/* The FILE and LINE of the first "DIR/FILE:LINE" in output (FILE one name,
 * no '/'), into file[fcap] and *line; false when there is none. nginx says
 * "in DIR/tether.conf:12", haproxy "parsing [DIR/tether.cfg:12]". */
bool checkmap_file_line(const char *output, const char *dir, char *file, size_t fcap, unsigned long *line);

/* The resource line (from 1) of conf, a configuration tether rendered,
 * belongs to, as "TYPE/NAME: " in out[cap] ("" when none): the last
 * comment naming a resource ("# route/api", "# listener/web, host ...")
 * or block of one (nginx's "upstream tether_c_NAME", haproxy's "backend
 * tether_c_NAME", "frontend tether_l_NAME") at or before the line, or for
 * nginx's location line the comment right after it (its route); a line
 * of a snippet, whatever it says, as "TYPE/NAME: snippet.X: "; none
 * when a part of tether's own (a comment at a line's start naming no
 * resource, a haproxy section of no resource) comes between. */
void checkmap_owner(const char *conf, unsigned long line, char *out, size_t cap);

#endif
