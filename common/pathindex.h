/* pathindex.h: which file resource owns each output path, and how many
 * files lie under each directory -- the indexes refcheck asks about. Paths
 * and owner names are borrowed from the caller's entries; directory keys
 * are owned here. */
#ifndef TETHER_PATHINDEX_H
#define TETHER_PATHINDEX_H

#include <stdint.h>

#include "strmap.h"

struct pathindex {
	struct strmap files;   /* path -> owner name */
	struct strmap dirs;    /* directory -> files under it */
};

void pathindex_init(struct pathindex *pi);
void pathindex_release(struct pathindex *pi);
void pathindex_add(struct pathindex *pi, const char *path, const char *owner);
void pathindex_remove(struct pathindex *pi, const char *path);
const char *pathindex_file_at(const struct pathindex *pi, const char *path);
uint32_t pathindex_files_under(const struct pathindex *pi, const char *dir);

#endif
