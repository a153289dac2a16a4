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
 * as its only argument and waits for it; a detached process removes the
 * page 10 s after it was last read (an opener may read it to learn its
 * type before the browser does), within 2 minutes in any case, and at
 * once when opener failed. Returns 0 when opener exited 0; -1 with err
 * otherwise. */
int open_page_link(const char *opener, const char *link, char *err, size_t errlen);

#endif
