/* tree.h: the desired state as a directory, DIR/<type>/<name>.json, one
 * resource a file, for tetherctl sync and export: the mapping between
 * file paths and resource names, and reading a whole tree. */
#ifndef TETHER_CTL_TREE_H
#define TETHER_CTL_TREE_H

#include <stddef.h>

/* One resource read from the tree. */
struct tree_entry {
	char *name;    /* "cluster/web" */
	char *path;    /* "DIR/cluster/web.json", as shown in messages */
	char *body;    /* canonical JSON (keys sorted, compact) */
};

struct tree {
	size_t n, cap;
	struct tree_entry *e;   /* sorted by name after tree_read */
};

/* What file (a name inside the directory of type) is: 1, a resource, its
 * "type/name" in name (cap bytes); 0, not part of the layout (no ".json"
 * suffix), skipped, with a warning in err when it is not a hidden file
 * (err empty for those: editors' swap files); -1, a ".json" file whose
 * name is not a resource name, with err. */
int tree_name_of(const char *type, const char *file, char *name, size_t cap, char *err, size_t errlen);
/* The path of resource name under dir, "DIR/type/name.json", new
 * allocated; NULL when name is not a valid "type/name". */
char *tree_path_of(const char *dir, const char *name);

/* Reads every resource under dir into t (initialised here; release it
 * with tree_release even on failure). The layout's rules:
 *   - entries whose name starts with '.' at the top (.git) are skipped;
 *   - a directory at the top must be named for a type (cluster, listener,
 *     route, secret, file): another is an error (a typo that --prune
 *     would turn into deletions);
 *   - other files at the top (README) are skipped with a warning;
 *   - inside a type directory, NAME.json is resource type/NAME; other
 *     files are skipped (hidden ones silently, others with a warning);
 *     directories, devices, pipes and sockets are errors;
 *   - a symlink is followed when its target lies inside dir, else error;
 *   - a file must hold one JSON object (no duplicate keys, no NUL).
 * Warnings go to stderr. Returns 0, or -1 with err naming the file. */
int tree_read(const char *dir, struct tree *t, char *err, size_t errlen);
void tree_release(struct tree *t);
/* The entry for name, or NULL (t sorted by tree_read). */
const struct tree_entry *tree_find(const struct tree *t, const char *name);

#endif
