/* linediff.h: a unified line diff of two texts, for tetherctl sync
 * --dry-run: what a change does to a resource's pretty-printed JSON. */
#ifndef TETHER_CTL_LINEDIFF_H
#define TETHER_CTL_LINEDIFF_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"

/* Above this many cells (lines of a times lines of b, once the common
 * head and tail are set aside) the middle is shown as removed then added
 * whole: still a correct diff, not a minimal one. */
#define LINEDIFF_MAX_CELLS ((size_t)4 << 20)

/* Appends to out the hunks ("@@ -A,N +B,M @@", then lines starting with
 * ' ', '-' or '+') turning text a into text b, with ctx lines of context
 * around each change; with color, ANSI colours (red '-', green '+', cyan
 * '@@'). Lines are split on '\n'; a missing final newline is ignored.
 * Returns the number of lines removed plus added (0: the texts are equal,
 * nothing appended). */
size_t linediff(const char *a, const char *b, int ctx, bool color, struct buf *out);

#endif
