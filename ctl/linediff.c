/* linediff.c: a unified line diff of two texts (see linediff.h): the
 * common head and tail set aside, a longest common subsequence over the
 * rest, then hunks with context. */
#include "linediff.h"
#include "xmalloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define C_DEL "\033[31m"
#define C_ADD "\033[32m"
#define C_HUNK "\033[36m"
#define C_OFF "\033[0m"

struct line {
	const char *s;
	size_t len;
};

/* Splits text into lines (without their '\n'); a final '\n' ends the last
 * line rather than starting an empty one. Returns a new array. */
static struct line *split(const char *text, size_t *n)
{
	size_t count = 0, cap = 16;
	struct line *l = xmalloc(cap * sizeof(*l));
	const char *p = text ? text : "";
	while (*p) {
		size_t k = strcspn(p, "\n");
		if (count == cap) {
			cap *= 2;
			l = xrealloc(l, cap * sizeof(*l));
		}
		l[count].s = p;
		l[count].len = k;
		count++;
		p += k + (p[k] == '\n');
	}
	*n = count;
	return l;
}

static bool same(const struct line *x, const struct line *y)
{
	return x->len == y->len && memcmp(x->s, y->s, x->len) == 0;
}

/* One step of the edit script: ' ' keeps a[ai] (= b[bi]), '-' drops a[ai],
 * '+' adds b[bi]. */
struct op {
	char kind;
	size_t ai, bi;
};

static void push(struct op **ops, size_t *n, size_t *cap, char kind, size_t ai, size_t bi)
{
	if (*n == *cap) {
		*cap = *cap ? *cap * 2 : 64;
		*ops = xrealloc(*ops, *cap * sizeof(**ops));
	}
	(*ops)[*n].kind = kind;
	(*ops)[*n].ai = ai;
	(*ops)[*n].bi = bi;
	(*n)++;
}

/* The edit script of a[lo_a..hi_a) into b[lo_b..hi_b). */
static void middle(const struct line *a, size_t lo_a, size_t hi_a, const struct line *b, size_t lo_b,
		   size_t hi_b, struct op **ops, size_t *n, size_t *cap)
{
	size_t na = hi_a - lo_a, nb = hi_b - lo_b;
	if (na == 0 || nb == 0 || na > LINEDIFF_MAX_CELLS / nb) {
		for (size_t i = lo_a; i < hi_a; i++)
			push(ops, n, cap, '-', i, lo_b);
		for (size_t j = lo_b; j < hi_b; j++)
			push(ops, n, cap, '+', hi_a, j);
		return;
	}
	/* L[i][j]: the LCS of a[lo_a+i..hi_a) and b[lo_b+j..hi_b) */
	size_t w = nb + 1;
	uint32_t *L = xcalloc((na + 1) * w, sizeof(*L));
	for (size_t i = na; i-- > 0;)
		for (size_t j = nb; j-- > 0;)
			L[i * w + j] = same(&a[lo_a + i], &b[lo_b + j]) ? L[(i + 1) * w + j + 1] + 1
				       : L[(i + 1) * w + j] >= L[i * w + j + 1] ? L[(i + 1) * w + j]
										  : L[i * w + j + 1];
	size_t i = 0, j = 0;
	while (i < na || j < nb) {
		if (i < na && j < nb && same(&a[lo_a + i], &b[lo_b + j])) {
			push(ops, n, cap, ' ', lo_a + i, lo_b + j);
			i++, j++;
		} else if (j == nb || (i < na && L[(i + 1) * w + j] >= L[i * w + j + 1])) {
			push(ops, n, cap, '-', lo_a + i, lo_b + j);
			i++;
		} else {
			push(ops, n, cap, '+', lo_a + i, lo_b + j);
			j++;
		}
	}
	free(L);
}

static void line_out(struct buf *out, char kind, const struct line *l, bool color)
{
	const char *on = !color ? "" : kind == '-' ? C_DEL : kind == '+' ? C_ADD : "";
	buf_puts(out, on);
	buf_putc(out, kind);
	buf_append(out, l->s, l->len);
	if (*on)
		buf_puts(out, C_OFF);
	buf_putc(out, '\n');
}

size_t linediff(const char *a, const char *b, int ctx, bool color, struct buf *out)
{
	size_t na, nb, nops = 0, cap = 0, changed = 0;
	struct line *la = split(a, &na), *lb = split(b, &nb);
	struct op *ops = NULL;
	size_t head = 0, tail = 0;
	while (head < na && head < nb && same(&la[head], &lb[head]))
		head++;
	while (tail < na - head && tail < nb - head && same(&la[na - 1 - tail], &lb[nb - 1 - tail]))
		tail++;
	for (size_t i = 0; i < head; i++)
		push(&ops, &nops, &cap, ' ', i, i);
	middle(la, head, na - tail, lb, head, nb - tail, &ops, &nops, &cap);
	for (size_t k = tail; k-- > 0;)
		push(&ops, &nops, &cap, ' ', na - 1 - k, nb - 1 - k);
	if (ctx < 0)
		ctx = 0;

	for (size_t k = 0; k < nops;) {
		if (ops[k].kind == ' ') {
			k++;
			continue;
		}
		/* a hunk: from ctx lines before this change to ctx lines after
		 * the last change that lies within 2*ctx lines of the one before */
		size_t start = k > (size_t)ctx ? k - (size_t)ctx : 0, end = k, last = k;
		for (size_t q = k; q < nops; q++) {
			if (ops[q].kind == ' ')
				continue;
			if (q > last && q - last - 1 > 2 * (size_t)ctx)
				break;
			last = q;
		}
		end = last + 1 + (size_t)ctx < nops ? last + 1 + (size_t)ctx : nops;
		size_t a_n = 0, b_n = 0;
		for (size_t q = start; q < end; q++) {
			a_n += ops[q].kind != '+';
			b_n += ops[q].kind != '-';
		}
		size_t a0 = ops[start].ai, b0 = ops[start].bi;
		buf_printf(out, "%s@@ -%zu,%zu +%zu,%zu @@%s\n", color ? C_HUNK : "", a_n ? a0 + 1 : a0, a_n,
			   b_n ? b0 + 1 : b0, b_n, color ? C_OFF : "");
		for (size_t q = start; q < end; q++) {
			if (ops[q].kind == '+') {
				line_out(out, '+', &lb[ops[q].bi], color);
				changed++;
			} else {
				line_out(out, ops[q].kind, &la[ops[q].ai], color);
				changed += ops[q].kind == '-';
			}
		}
		k = end;
	}
	free(ops);
	free(la);
	free(lb);
	return changed;
}
