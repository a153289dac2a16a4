/* pathindex.c: output path ownership and directory counts (see
 * pathindex.h). */
#include "pathindex.h"
#include "xmalloc.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

void pathindex_init(struct pathindex *pi)
{
	strmap_init(&pi->files);
	strmap_init(&pi->dirs);
}

void pathindex_release(struct pathindex *pi)
{
	for (size_t i = 0; i < pi->dirs.cap; i++)
		free((char *)pi->dirs.slots[i].key);
	strmap_release(&pi->dirs);
	strmap_release(&pi->files);
}

static void dirs_adjust(struct pathindex *pi, const char *path, int delta)
{
	char tmp[4097];
	for (const char *s = strchr(path, '/'); s; s = strchr(s + 1, '/')) {
		size_t len = (size_t)(s - path);
		if (len >= sizeof(tmp))
			return;
		memcpy(tmp, path, len);
		tmp[len] = '\0';
		intptr_t cur = 0;
		bool have = strmap_get(&pi->dirs, tmp, &cur);
		if (!have) {
			if (delta <= 0)
				continue;
			*strmap_ref(&pi->dirs, xstrdup(tmp)) = delta;
		} else if (cur + delta <= 0) {
			free((char *)strmap_del(&pi->dirs, tmp));
		} else {
			*strmap_ref(&pi->dirs, tmp) = cur + delta;
		}
	}
}

void pathindex_add(struct pathindex *pi, const char *path, const char *owner)
{
	bool had = strmap_get(&pi->files, path, NULL);
	strmap_put(&pi->files, path, (intptr_t)owner);
	if (!had)
		dirs_adjust(pi, path, +1);
}

void pathindex_remove(struct pathindex *pi, const char *path)
{
	if (strmap_del(&pi->files, path))
		dirs_adjust(pi, path, -1);
}

const char *pathindex_file_at(const struct pathindex *pi, const char *path)
{
	intptr_t v;
	return strmap_get(&pi->files, path, &v) ? (const char *)v : NULL;
}

uint32_t pathindex_files_under(const struct pathindex *pi, const char *dir)
{
	intptr_t v;
	return strmap_get(&pi->dirs, dir, &v) ? (uint32_t)v : 0;
}
