/* open_page.h: opens a link that holds a secret (a console session's
 * token) in a browser without putting it on any command line: the link
 * goes into a page only the user can read, and the browser opens that. */
#ifndef TETHER_OPEN_PAGE_H
#define TETHER_OPEN_PAGE_H

#include <stddef.h>

/* Writes, in a new directory under tmpdir (0700, mkdtemp), a page "open.html"
 * (0600) that moves the browser on to link; *dir and *page get their paths
 * (new allocated: free both). Returns 0, or -1 with err (nothing left
 * behind). */
int open_page_write(const char *tmpdir, const char *link, char **dir, char **page, char *err, size_t errlen);
/* Removes what open_page_write made (the page wiped first). */
void open_page_remove(const char *dir, const char *page);
/* Runs opener (one command word, looked up in PATH) with the page's path
 * as its only argument, and removes the page once something read it, or
 * when opener failed, or after wait_ms. Returns 0 when opener ran and the
 * page was read; -1 with err otherwise. */
int open_page_link(const char *opener, const char *link, int wait_ms, char *err, size_t errlen);

#endif
