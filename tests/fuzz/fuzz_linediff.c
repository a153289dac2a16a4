/* fuzz_linediff.c: libFuzzer target for linediff (tetherctl sync
 * --dry-run's diff) and the layout's file names (tree_name_of,
 * tree_path_of). The input is two texts split at the first NUL byte (the
 * second empty without one). Nothing crashes; the diff of a text with
 * itself is empty; with context wide enough for one hunk, applying the
 * hunk's ' ' and '+' lines gives the second text and its ' ' and '-'
 * lines the first; the count returned is the '-' and '+' lines. A file
 * name that maps to a resource maps back to the same path. */
#include "fuzz.h"
#include "buf.h"
#include "linediff.h"
#include "tree.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what, const char *a, const char *b)
{
	fprintf(stderr, "fuzz_linediff: %s\n  a: %.256s\n  b: %.256s\n", what, a, b);
	abort();
}

/* text with one '\n' ending every line (none for an empty text) */
static void lines_of(struct buf *out, const char *text)
{
	buf_reset(out);
	buf_puts(out, text);
	if (out->len && out->data[out->len - 1] != '\n')
		buf_putc(out, '\n');
	buf_puts(out, "");
}

static void check_names(const char *s)
{
	char name[256], err[512];
	if (strchr(s, '/') || strlen(s) > 300)
		return;
	int k = tree_name_of("cluster", s, name, sizeof(name), err, sizeof(err));
	if (k < 0 && !err[0])
		die("a refused file name without a message", s, "");
	if (k != 1)
		return;
	char *path = tree_path_of("d", name);
	if (!path)
		die("a name from a file has no path", s, name);
	if (strncmp(path, "d/cluster/", 10) != 0 || strcmp(path + 10, s) != 0)
		die("the path of a file's name is not the file", s, path);
	free(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 4096)
		return 0;
	char *s = malloc(size + 2);
	if (!s)
		abort();
	if (size)
		memcpy(s, data, size);
	s[size] = '\0';
	s[size + 1] = '\0';
	const char *a = s, *b = s + strlen(s) + (strlen(s) < size ? 1 : 0);
	if (b > s + size)
		b = s + size;

	struct buf out = BUF_INIT, want = BUF_INIT, got_a = BUF_INIT, got_b = BUF_INIT;
	if (linediff(a, a, 3, false, &out) != 0 || out.len)
		die("a text differs from itself", a, a);

	/* one hunk: context wider than either text */
	size_t changed = linediff(a, b, (int)size + 2, false, &out);
	buf_puts(&out, "");
	size_t counted = 0;
	const char *p = out.data;
	if (changed) {
		if (strncmp(p, "@@ -", 4) != 0)
			die("no hunk header", a, b);
		p += strcspn(p, "\n") + 1;
	} else if (out.len) {
		die("output for equal texts", a, b);
	}
	while (*p) {
		size_t k = strcspn(p, "\n");
		if (p[0] == '@')
			die("a second hunk under wide context", a, b);
		if (p[0] != ' ' && p[0] != '-' && p[0] != '+')
			die("a line that is not ' ', '-' or '+'", a, b);
		counted += p[0] != ' ';
		if (p[0] != '+') {
			buf_append(&got_a, p + 1, k - 1);
			buf_putc(&got_a, '\n');
		}
		if (p[0] != '-') {
			buf_append(&got_b, p + 1, k - 1);
			buf_putc(&got_b, '\n');
		}
		p += k + (p[k] == '\n');
	}
	if (counted != changed)
		die("the count is not the changed lines", a, b);
	if (changed) {
		buf_puts(&got_a, "");
		buf_puts(&got_b, "");
		lines_of(&want, a);
		if (strcmp(want.data, got_a.data) != 0)
			die("the hunk does not give back the first text", a, b);
		lines_of(&want, b);
		if (strcmp(want.data, got_b.data) != 0)
			die("the hunk does not give the second text", a, b);
	}
	check_names(a);
	buf_release(&out);
	buf_release(&want);
	buf_release(&got_a);
	buf_release(&got_b);
	free(s);
	return 0;
}
