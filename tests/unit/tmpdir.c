/* tmpdir.c: the unit tests' temporary directory (see tmpdir.h), one copy
 * for every test that needs a data directory or a root to write below. */
#include "tmpdir.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

int test_tmpdir_make(char *dir, size_t len, const char *tag)
{
	int n = snprintf(dir, len, "/tmp/tether-%s-XXXXXX", tag);
	if (n < 0 || (size_t)n >= len)
		return -1;
	return mkdtemp(dir) ? 0 : -1;
}

int test_tmpdir_remove(const char *dir)
{
	/* FTW_DEPTH: contents before their directory; FTW_PHYS: never follow
	 * the symlinks a test plants */
	return nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}
