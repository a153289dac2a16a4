/* output.c: how tetherctl prints for people: re-indented JSON, scalar
 * values as text, aligned tables and "label: value" lines, with control
 * characters from the network never reaching the terminal (see
 * output.h). */
#include "output.h"
#include "json.h"
#include "xmalloc.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Prints the plane's JSON as it came, ending with a newline. */
void print_raw(const struct client_answer *ans)
{
	fwrite(ans->body.data, 1, ans->body.len, stdout);
	if (!ans->body.len || ans->body.data[ans->body.len - 1] != '\n')
		putchar('\n');
}

static void indent(struct buf *out, int depth)
{
	buf_putc(out, '\n');
	for (int i = 0; i < depth; i++)
		buf_puts(out, "  ");
}

/* Re-indents a valid JSON text, two spaces a level. Works on the text, so
 * numbers and strings keep their exact bytes. */
void json_pretty(struct buf *out, const char *s)
{
	int depth = 0;
	bool in_str = false, esc = false;
	for (const char *p = s; *p; p++) {
		char c = *p;
		if (in_str) {
			buf_putc(out, c);
			if (esc)
				esc = false;
			else if (c == '\\')
				esc = true;
			else if (c == '"')
				in_str = false;
			continue;
		}
		switch (c) {
		case ' ':
		case '\t':
		case '\n':
		case '\r':
			break;
		case '"':
			in_str = true;
			buf_putc(out, c);
			break;
		case '{':
		case '[': {
			const char *q = p + 1;
			q += strspn(q, " \t\r\n");
			buf_putc(out, c);
			if (*q == '}' || *q == ']') {
				buf_putc(out, *q);
				p = q;
			} else {
				indent(out, ++depth);
			}
			break;
		}
		case '}':
		case ']':
			indent(out, --depth);
			buf_putc(out, c);
			break;
		case ',':
			buf_putc(out, c);
			indent(out, depth);
			break;
		case ':':
			buf_puts(out, ": ");
			break;
		default:
			buf_putc(out, c);
		}
	}
	buf_putc(out, '\n');
}

/* Returns a new allocated text of a scalar or small value for a table or
 * a "label: value" line: strings as they are, null as "-", arrays of
 * scalars joined by ", ", anything else as compact JSON. */
char *value_text(const cJSON *v)
{
	if (!v || cJSON_IsNull(v))
		return xstrdup("-");
	if (cJSON_IsString(v))
		return xstrdup(v->valuestring);
	if (cJSON_IsBool(v))
		return xstrdup(cJSON_IsTrue(v) ? "yes" : "no");
	uint64_t u;
	if (json_get_u64(v, &u))
		return xasprintf("%" PRIu64, u);
	if (cJSON_IsArray(v)) {
		bool scalars = true;
		for (const cJSON *e = v->child; e && scalars; e = e->next)
			scalars = !cJSON_IsArray(e) && !cJSON_IsObject(e);
		if (scalars) {
			struct buf b = BUF_INIT;
			for (const cJSON *e = v->child; e; e = e->next) {
				char *t = value_text(e);
				buf_printf(&b, "%s%s", b.len ? ", " : "", t);
				free(t);
			}
			if (!b.len)
				buf_puts(&b, "-");
			return buf_detach(&b, NULL);
		}
	}
	/* objects as words, never raw JSON: "members 3, acked 2"; a list of
	 * them "; "-separated; nested ones in parentheses */
	struct buf b = BUF_INIT;
	if (cJSON_IsArray(v)) {
		for (const cJSON *e = v->child; e; e = e->next) {
			char *t = value_text(e);
			buf_printf(&b, "%s%s", b.len ? "; " : "", t);
			free(t);
		}
	} else if (cJSON_IsObject(v)) {
		for (const cJSON *m = v->child; m; m = m->next) {
			char *t = value_text(m);
			bool nested = cJSON_IsObject(m) || (cJSON_IsArray(m) && m->child && !cJSON_IsString(m->child) &&
							    !cJSON_IsNumber(m->child));
			buf_printf(&b, "%s%s %s%s%s", b.len ? ", " : "", m->string ? m->string : "?", nested ? "(" : "", t,
				   nested ? ")" : "");
			free(t);
		}
	} else if (cJSON_IsNumber(v)) {
		buf_printf(&b, "%g", v->valuedouble);
	}
	if (!b.len)
		buf_puts(&b, "-");
	return buf_detach(&b, NULL);
}

char *time_local_text(double epoch)
{
	if (!(epoch > 0) || epoch > 253402300799.0)   /* none, or past the year 9999 */
		return xstrdup("-");
	time_t tt = (time_t)epoch;
	struct tm tm;
	char out[48], off[8];
	/* local time (TZ honoured) with its offset as +HH:MM */
	if (!localtime_r(&tt, &tm) || !strftime(out, sizeof(out), "%Y-%m-%dT%H:%M:%S", &tm) ||
	    !strftime(off, sizeof(off), "%z", &tm) || strlen(off) != 5)
		return xasprintf("%.0f", epoch);
	return xasprintf("%s%.3s:%s", out, off, off + 3);
}

char *duration_text(double seconds)
{
	if (!(seconds > 0))   /* negative, or not a number */
		seconds = 0;
	if (seconds > 1e12)   /* tens of thousands of years: as many days as that */
		seconds = 1e12;
	unsigned long long s = (unsigned long long)(seconds + 0.5);
	if (s < 120)
		return xasprintf("%llu s", s);
	if (s < 2 * 3600)
		return xasprintf("%llu min", s / 60);
	if (s < 2 * 86400)
		return xasprintf("%llu h %llu min", s / 3600, s % 3600 / 60);
	return xasprintf("%llu days", s / 86400);
}

char *ago_text(double epoch)
{
	if (!(epoch > 0))
		return xstrdup("-");
	double d = (double)time(NULL) - epoch;
	if (d < -1) {
		char *t = duration_text(-d);
		char *r = xasprintf("in %s", t);
		free(t);
		return r;
	}
	if (d < 1)
		return xstrdup("just now");
	char *t = duration_text(d);
	char *r = xasprintf("%s ago", t);
	free(t);
	return r;
}

char *duration_until_text(double epoch)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return duration_text(epoch - ((double)ts.tv_sec + (double)ts.tv_nsec / 1e9));
}

char *time_and_ago_text(double epoch)
{
	if (!(epoch > 0))
		return xstrdup("-");
	char *t = time_local_text(epoch), *a = ago_text(epoch);
	char *r = xasprintf("%s (%s)", t, a);
	free(t);
	free(a);
	return r;
}

/* Display width of UTF-8 text: one column a code point. */
size_t text_width(const char *s)
{
	size_t w = 0;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		w += (*p & 0xc0) != 0x80;
	return w;
}

/* Returns a new allocated one-line copy of s for a table cell: control
 * characters become spaces, and past max columns it ends in "...". */
char *cell_text(const char *s, size_t max)
{
	struct buf b = BUF_INIT;
	size_t cols = 0, total = text_width(s);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		bool start = (*p & 0xc0) != 0x80;
		if (start && total > max && cols + 3 >= max) {
			buf_puts(&b, "...");
			break;
		}
		cols += start;
		buf_putc(&b, *p < 0x20 || *p == 0x7f ? ' ' : (char)*p);
	}
	if (!b.len)
		buf_puts(&b, "");
	return buf_detach(&b, NULL);
}

void table_row(struct table *t, char **row)
{
	t->cells = xrealloc(t->cells, (t->nrows + 1) * t->ncols * sizeof(*t->cells));
	for (size_t i = 0; i < t->ncols; i++)
		t->cells[t->nrows * t->ncols + i] = row[i];
	t->nrows++;
}

void table_print(const struct table *t)
{
	size_t *width = xcalloc(t->ncols, sizeof(*width));
	for (size_t r = 0; r < t->nrows; r++)
		for (size_t i = 0; i < t->ncols; i++) {
			size_t w = text_width(t->cells[r * t->ncols + i]);
			if (w > width[i])
				width[i] = w;
		}
	for (size_t r = 0; r < t->nrows; r++) {
		for (size_t i = 0; i < t->ncols; i++) {
			const char *cell = t->cells[r * t->ncols + i];
			fputs(cell, stdout);
			if (i + 1 < t->ncols)
				printf("%*s", (int)(width[i] - text_width(cell) + 2), "");
		}
		putchar('\n');
	}
	free(width);
}

void table_release(struct table *t)
{
	for (size_t i = 0; i < t->nrows * t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
	t->cells = NULL;
	t->nrows = 0;
}

void fields_add(struct fields *f, const char *label, char *value)
{
	f->label = xrealloc(f->label, (f->n + 1) * sizeof(*f->label));
	f->value = xrealloc(f->value, (f->n + 1) * sizeof(*f->value));
	f->label[f->n] = xstrdup(label);
	f->value[f->n] = value;
	f->n++;
}

void fields_print_release(struct fields *f)
{
	size_t width = 0;
	for (size_t i = 0; i < f->n; i++)
		if (strlen(f->label[i]) > width)
			width = strlen(f->label[i]);
	for (size_t i = 0; i < f->n; i++) {
		printf("%s:%*s", f->label[i], (int)(width - strlen(f->label[i]) + 1), "");
		for (const char *p = f->value[i]; *p; p++) {
			if (*p == '\n') {
				if (p[1])
					printf("\n%*s", (int)width + 2, "");
			} else {
				/* no terminal escapes from a file or the network */
				putchar((unsigned char)*p < 0x20 || *p == 0x7f ? ' ' : *p);
			}
		}
		putchar('\n');
		free(f->label[i]);
		free(f->value[i]);
	}
	free(f->label);
	free(f->value);
	f->n = 0;
}

/* Adds the known fields of obj in their order, then every other member
 * under its own key. */
void fields_from(struct fields *f, const cJSON *obj, const struct known_field *known, size_t nknown)
{
	for (size_t i = 0; i < nknown; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, known[i].key);
		if (v)
			fields_add(f, known[i].label, value_text(v));
	}
	for (const cJSON *m = obj->child; m; m = m->next) {
		bool seen = false;
		for (size_t i = 0; i < nknown && !seen; i++)
			seen = strcmp(m->string, known[i].key) == 0;
		if (!seen)
			fields_add(f, m->string, value_text(m));
	}
}
