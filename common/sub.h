/* sub.h: a subscription: the name prefixes a node asks for (none: every
 * name). Its canonical text -- the prefixes sorted and comma-joined -- is
 * what the plane keys pushes by and what a signed statement names, so the
 * plane and the agent derive it with this one function. */
#ifndef TETHER_SUB_H
#define TETHER_SUB_H

#include <stdbool.h>
#include <stddef.h>

#include "resource.h"

#define SUB_MAX_PREFIXES 64
/* the longest canonical text: every prefix at its longest, comma-joined */
#define SUB_TEXT_MAX (SUB_MAX_PREFIXES * (RES_FULLNAME_MAX + 1))

struct sub {
	size_t n;
	char **prefix;
	char *canon;     /* the prefixes sorted and comma-joined */
};

/* Parses "cluster/,route/web-" (commas; empty parts ignored; a prefix that
 * another covers, or a repeated one, dropped: "c,cluster/,c" is "c").
 * Returns 0, or -1 with err for a prefix with characters no name can hold,
 * or more than SUB_MAX_PREFIXES distinct ones. */
int sub_parse(const char *s, struct sub *out, char *err, size_t errlen);
void sub_release(struct sub *s);
/* Whether name belongs to s: a prefix of s starts it, or s is empty; a
 * guard (guard/...) belongs to every subscription. */
bool sub_match(const struct sub *s, const char *name);

#endif
