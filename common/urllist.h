/* urllist.h: a comma-separated list of http:// or https:// URLs, as
 * --plane (tetherd, tetherctl) and --etcd (tether-plane) take them. */
#ifndef TETHER_URLLIST_H
#define TETHER_URLLIST_H

#include <stddef.h>

/* Splits list into urls (room for max; each new allocated): blanks around
 * commas ignored, trailing slashes dropped; an empty entry, a URL that is
 * not http:// or https:// with a host, a duplicate (compared without
 * case) or more than max is an error. Returns the count, or -1 with err
 * (nothing left allocated). */
int urllist_parse(const char *list, char **urls, int max, char *err, size_t errlen);
void urllist_free(char **urls, int n);

#endif
