/* tmpdir.h: the unit tests' temporary directory: made under /tmp by setup,
 * removed with everything in it by teardown. */
#ifndef TETHER_TEST_TMPDIR_H
#define TETHER_TEST_TMPDIR_H

#include <stddef.h>

/* Makes a fresh "/tmp/tether-<tag>-XXXXXX" and writes its name to dir
 * (len bytes). Returns 0, or -1 when the name does not fit or mkdtemp fails. */
int test_tmpdir_make(char *dir, size_t len, const char *tag);
/* Removes dir and everything below it, never following symlinks (rm -rf).
 * Returns 0, or -1 when something could not be removed; callers that do
 * not care may ignore it. */
int test_tmpdir_remove(const char *dir);

#endif
