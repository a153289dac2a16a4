/* cmd_explain.c: tetherctl explain [TYPE[.FIELD]] [--json | --man]: the
 * resource types and their fields from common/resource_schema.c, for a
 * terminal (as man(1) would lay them out), as JSON, or as the roff source
 * of tether-resources(5), which is made by this command and committed
 * (t0017 compares). Needs no plane. */
#include "buf.h"
#include "commands.h"
#include "ctl.h"
#include "resource_schema.h"
#include "util.h"
#include "xmalloc.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WIDTH 80          /* the terminal text's width */
#define MAN_DATE "2026-12-06"   /* the page's date: the table's last change */

/* ---- terminal text ------------------------------------------------------ */

/* Prints text wrapped at WIDTH, each line indented by ind spaces; the
 * first one starts with lead (NULL: none) in the indent, or under it when
 * lead is wider. */
static void wrap_after(struct buf *b, const char *lead, const char *text, int ind)
{
	bool fresh = true;   /* nothing yet on this line after its indent */
	int col = ind;
	if (lead && (int)strlen(lead) < ind)
		buf_printf(b, "%-*s", ind, lead);
	else
		buf_printf(b, "%s%s%*s", lead ? lead : "", lead ? "\n" : "", ind, "");
	for (const char *p = text; *p;) {
		while (*p == ' ')
			p++;
		size_t w = strcspn(p, " ");
		if (!w)
			break;
		if (!fresh && col + 1 + (int)w > WIDTH) {
			buf_printf(b, "\n%*s", ind, "");
			col = ind;
			fresh = true;
		}
		if (!fresh) {
			buf_putc(b, ' ');
			col++;
		}
		buf_append(b, p, w);
		col += (int)w;
		fresh = false;
		p += w;
	}
	buf_putc(b, '\n');
}

static void wrap(struct buf *b, const char *text, int ind)
{
	wrap_after(b, NULL, text, ind);
}

static void field_text(struct buf *b, const struct rs_field *f)
{
	buf_printf(b, "       %s (%s%s%s)\n", f->path, f->json, f->flags & RS_REQUIRED ? ", required" : "",
		   f->flags & RS_SEALED ? ", sealed secrets" : "");
	struct buf line = BUF_INIT;
	buf_printf(&line, "%s.", f->desc);
	wrap(b, line.data, 14);
	if (*f->limits) {
		buf_reset(&line);
		buf_printf(&line, "Limits: %s.", f->limits);
		wrap(b, line.data, 14);
	}
	buf_release(&line);
}

static void example_text(struct buf *b, const struct rs_type *t, const char *indent)
{
	for (const char *p = t->example; *p;) {
		size_t n = strcspn(p, "\n");
		buf_printf(b, "%s%.*s\n", indent, (int)n, p);
		p += n + (p[n] == '\n');
	}
}

static void upper(char *out, size_t cap, const char *s)
{
	size_t i = 0;
	for (; s[i] && i + 1 < cap; i++)
		out[i] = (char)(s[i] >= 'a' && s[i] <= 'z' ? s[i] - 'a' + 'A' : s[i]);
	out[i] = '\0';
}

static void type_text(struct buf *b, const struct rs_type *t)
{
	const char *name = resource_type_name(t->type);
	char up[32];
	upper(up, sizeof(up), name);
	buf_printf(b, "%s (%s/NAME)\n", up, name);
	wrap(b, t->desc, 7);
	buf_puts(b, "\nFIELDS\n");
	for (const struct rs_field *f = t->fields; f->path; f++) {
		if (f != t->fields)
			buf_putc(b, '\n');
		field_text(b, f);
	}
	buf_printf(b, "\nEXAMPLE\n       The body of %s/%s (tetherctl put %s/%s FILE):\n\n", name, t->example_name,
		   name, t->example_name);
	example_text(b, t, "           ");
}

/* "secret: A TLS certificate ..." (the first sentence) for each type. */
static void list_text(struct buf *b)
{
	buf_puts(b, "The resource types (tetherctl explain TYPE: its fields; TYPE.FIELD: one field;\n"
		    "man 5 tether-resources: all of them):\n\n");
	for (int i = 0; i < RES_TYPE_COUNT; i++) {
		const struct rs_type *t = resource_schema((enum res_type)i);
		const char *end = strstr(t->desc, ". ");
		int n = end ? (int)(end - t->desc) + 1 : (int)strlen(t->desc);
		char *first = xstrndup(t->desc, (size_t)n);
		wrap_after(b, resource_type_name(t->type), first, 10);
		free(first);
	}
}

/* ---- JSON --------------------------------------------------------------- */

static cJSON *field_json(const struct rs_field *f)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "name", f->path);
	cJSON_AddStringToObject(o, "type", f->json);
	cJSON_AddBoolToObject(o, "required", (f->flags & RS_REQUIRED) != 0);
	if (f->flags & RS_SEALED)
		cJSON_AddBoolToObject(o, "sealed", 1);
	cJSON_AddStringToObject(o, "limits", f->limits);
	cJSON_AddStringToObject(o, "description", f->desc);
	return o;
}

static cJSON *type_json(const struct rs_type *t)
{
	cJSON *o = cJSON_CreateObject(), *fields = cJSON_CreateArray();
	char name[64];
	cJSON_AddStringToObject(o, "type", resource_type_name(t->type));
	cJSON_AddStringToObject(o, "description", t->desc);
	for (const struct rs_field *f = t->fields; f->path; f++)
		cJSON_AddItemToArray(fields, field_json(f));
	cJSON_AddItemToObject(o, "fields", fields);
	cJSON *ex = cJSON_AddObjectToObject(o, "example");
	snprintf(name, sizeof(name), "%s/%s", resource_type_name(t->type), t->example_name);
	cJSON_AddStringToObject(ex, "name", name);
	cJSON_AddItemToObject(ex, "body", cJSON_Parse(t->example));
	return o;
}

static int print_json(cJSON *v)
{
	char *s = cJSON_Print(v);
	cJSON_Delete(v);
	if (!s) {
		ctl_error("explain: out of memory");
		return CTL_EXIT_FAILED;
	}
	printf("%s\n", s);
	cJSON_free(s);
	return CTL_EXIT_OK;
}

/* ---- the man page -------------------------------------------------------- */

/* Text for a roff text line: '\' as \e, '-' as \- (so it copies as a
 * minus), a leading '.' or '\'' made literal. */
static void roff(struct buf *b, const char *s)
{
	if (*s == '.' || *s == '\'')
		buf_puts(b, "\\&");
	for (; *s; s++) {
		if (*s == '\\')
			buf_puts(b, "\\e");
		else if (*s == '-')
			buf_puts(b, "\\-");
		else
			buf_putc(b, *s);
	}
}

/* Text for roff's fill mode, words joined by spaces, broken into source
 * lines of at most 80 bytes where it can (mandoc -T lint's style; what
 * man shows is the same), the first line starting after col bytes. */
static void roff_fill(struct buf *b, const char *s, size_t col)
{
	struct buf w = BUF_INIT;
	bool first = true;
	while (*s) {
		while (*s == ' ')
			s++;
		size_t n = strcspn(s, " ");
		if (!n)
			break;
		char *word = xstrndup(s, n);
		buf_reset(&w);
		roff(&w, word);
		free(word);
		s += n;
		if (!first && col + 1 + w.len > 80) {
			/* a line ending in . ? or ! would end a sentence (two
			 * spaces after it): \& keeps the one */
			if (strchr(".?!", b->data[b->len - 1]))
				buf_puts(b, "\\&");
			buf_putc(b, '\n');   /* roff() made a leading . or ' literal */
			col = w.len;
		} else {
			if (!first)
				buf_putc(b, ' ');
			col += (first ? 0 : 1) + w.len;
		}
		buf_append(b, w.data, w.len);
		first = false;
	}
	buf_release(&w);
}

static const char man_head[] =
	".\\\" tether-resources.5: GENERATED by 'tetherctl explain --man' from the table in\n"
	".\\\" common/resource_schema.c. Do not edit: change the table, then run\n"
	".\\\" tetherctl explain --man > docs/man/tether-resources.5 (t0017 compares them).\n"
	".TH TETHER\\-RESOURCES 5 \"" MAN_DATE "\" \"tether\" \"File Formats\"\n"
	".nh\n"
	".SH NAME\n"
	"tether\\-resources \\- the resource types of tether and their fields\n"
	".SH DESCRIPTION\n"
	"A resource is a JSON object that a\n"
	".BR tether\\-plane (8)\n"
	"keeps under a name\n"
	".IR TYPE / NAME :\n"
	".I TYPE\n"
	"is one of the types below and\n"
	".I NAME\n"
	"matches [A\\-Za\\-z0\\-9._\\-]{1,200} (not \\(lq.\\(rq or \\(lq..\\(rq).\n"
	".BR tetherctl (1)\n"
	"writes them\n"
	".RB ( put ,\n"
	".BR apply ,\n"
	".BR sync ,\n"
	"which reads\n"
	".IR DIR / TYPE / NAME .json),\n"
	"and each\n"
	".BR tetherd (8)\n"
	"renders those of its subscription for its consumer.\n"
	".PP\n"
	"The plane refuses a body that breaks a limit below (422), naming the\n"
	"resource, the field and what it must be:\n"
	".IR \"cluster/web: endpoints[0].port must be an integer in 1..65535\" .\n"
	"A field this page does not name is refused too, with the nearest known\n"
	"one:\n"
	".IR \"cluster/web: endpoints[0]: unknown field \\(aqwieght\\(aq (did you mean \\(aqweight\\(aq?)\" ,\n"
	"unless the plane runs with\n"
	".BR \\-\\-allow\\-unknown\\-fields ;\n"
	".B tetherd \\-\\-strict\n"
	"refuses them as well.\n"
	".PP\n"
	"A route names a listener and a cluster, and a listener with TLS a secret.\n"
	"A write that would leave such a reference dangling is refused; one batch\n"
	".RB ( \"tetherctl apply\" ,\n"
	".BR \"tetherctl sync\" )\n"
	"may create both sides in any order.\n"
	".PP\n"
	"Below, the field\n"
	".I a.b\n"
	"is the member\n"
	".I b\n"
	"of the object\n"
	".IR a ,\n"
	"and\n"
	".I a[].b\n"
	"the member\n"
	".I b\n"
	"of each element of the array\n"
	".IR a .\n"
	"A required field must be present in its object; a nested one only when its\n"
	"object is.\n"
	".B \"tetherctl explain\"\n"
	".I TYPE\n"
	"prints a type's part of this page,\n"
	".B \"tetherctl explain \\-\\-json\"\n"
	"all of it as JSON; this page is made from the same table by\n"
	".BR \"tetherctl explain \\-\\-man\" .\n";

static const char man_tail[] =
	".SH SEE ALSO\n"
	".BR tetherctl (1),\n"
	".BR tether\\-plane (8),\n"
	".BR tetherd (8)\n";

static void man_page(struct buf *b)
{
	buf_puts(b, man_head);
	for (int i = 0; i < RES_TYPE_COUNT; i++) {
		const struct rs_type *t = resource_schema((enum res_type)i);
		const char *name = resource_type_name(t->type);
		char up[32];
		upper(up, sizeof(up), name);
		buf_printf(b, ".SH %s\n", up);
		roff_fill(b, t->desc, 0);
		buf_puts(b, "\n.SS Fields\n");
		for (const struct rs_field *f = t->fields; f->path; f++) {
			buf_puts(b, ".TP\n\\fB");
			roff(b, f->path);
			buf_puts(b, "\\fR (");
			roff(b, f->json);
			buf_printf(b, "%s%s)\n", f->flags & RS_REQUIRED ? ", required" : "",
				   f->flags & RS_SEALED ? ", sealed secrets" : "");
			roff_fill(b, f->desc, 1);   /* the full stop after it */
			buf_puts(b, ".\n");
			if (*f->limits) {
				buf_puts(b, ".br\nLimits: ");
				roff_fill(b, f->limits, 9);
				buf_puts(b, ".\n");
			}
		}
		buf_printf(b, ".SS Example\nThe body of\n.BR %s/%s :\n.PP\n.RS\n.nf\n", name, t->example_name);
		for (const char *p = t->example; *p;) {
			size_t n = strcspn(p, "\n");
			char *line = xstrndup(p, n);
			roff(b, line);
			buf_putc(b, '\n');
			free(line);
			p += n + (p[n] == '\n');
		}
		buf_puts(b, ".fi\n.RE\n");
	}
	buf_puts(b, man_tail);
}

/* ---- TYPE.FIELD ---------------------------------------------------------- */

/* The object path a field's members are under ("tls", "endpoints[]"). */
static void members_of(const struct rs_field *f, char *out, size_t cap)
{
	snprintf(out, cap, "%s%s", f->path, strncmp(f->json, "array of objects", 16) == 0 ? "[]" : "");
}

/* An unknown type or field: what is known, the nearest first; exit 2. */
static int unknown(const char *what, const char *key, const char *const *names, size_t n, const char *known_as)
{
	struct buf list = BUF_INIT;
	char show[STR_SHOW_BUF];
	const char *near = resource_schema_nearest(key, names, n);
	for (size_t i = 0; i < n; i++)
		buf_printf(&list, "%s%s", i ? ", " : "", names[i]);
	str_show(key, show);   /* what was typed, without control characters */
	if (near)
		ctl_error("explain: unknown %s '%s' (did you mean '%s'?); %s: %s", what, show, near, known_as,
			  n ? list.data : "none");
	else
		ctl_error("explain: unknown %s '%s'; %s: %s", what, show, known_as, n ? list.data : "none");
	buf_release(&list);
	return CTL_EXIT_USAGE;
}

/* Finds TYPE.FIELD's field, component by component, so an unknown one is
 * named with its object's fields. NULL after saying why. */
static const struct rs_field *find_field(const struct rs_type *t, const char *path)
{
	const struct rs_field *f = NULL;
	char parent[256] = "";   /* the table's path of the object searched */
	const char *tname = resource_type_name(t->type);
	for (const char *p = path; *p;) {
		size_t n = strcspn(p, ".");
		char comp[128], want[512];
		snprintf(comp, sizeof(comp), "%.*s", (int)(n < sizeof(comp) ? n : sizeof(comp) - 1), p);
		size_t cl = strlen(comp);
		if (cl >= 2 && strcmp(comp + cl - 2, "[]") == 0)
			comp[cl - 2] = '\0';
		if (f && (f->flags & RS_MAP)) {
			ctl_error("explain: %s.%s: its members are names the writer chooses, not fields", tname,
				  f->path);
			return NULL;
		}
		snprintf(want, sizeof(want), "%s%s%s", parent, *parent ? "." : "", comp);
		const struct rs_field *g = *comp ? resource_schema_field(t->type, want) : NULL;
		if (!g) {
			const char *names[RS_CHILDREN_MAX];
			size_t k = resource_schema_children(t->type, parent, 0, names, RS_CHILDREN_MAX);
			char known_as[300];
			snprintf(known_as, sizeof(known_as), "the fields of %s%s%s", tname, f ? "." : "",
				 f ? f->path : "");
			unknown("field", comp, names, k, known_as);
			return NULL;
		}
		f = g;
		members_of(f, parent, sizeof(parent));
		p += n + (p[n] == '.');
	}
	return f;
}

int cmd_explain(const struct ctl_ctx *cx, int argc, char **argv)
{
	struct buf b = BUF_INIT;
	const char *type_names[RES_TYPE_COUNT];
	for (int i = 0; i < RES_TYPE_COUNT; i++)
		type_names[i] = resource_type_name(resource_schema((enum res_type)i)->type);
	if (cx->man && cx->json) {
		ctl_error("explain: --json and --man are two forms: give one");
		return CTL_EXIT_USAGE;
	}
	if (cx->man && argc > 0) {
		ctl_error("explain: --man prints the whole page (tether-resources(5)): give no TYPE");
		return CTL_EXIT_USAGE;
	}
	if (argc == 0) {
		if (cx->json) {
			cJSON *all = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(all, "types");
			for (int i = 0; i < RES_TYPE_COUNT; i++)
				cJSON_AddItemToArray(arr, type_json(resource_schema((enum res_type)i)));
			return print_json(all);
		}
		if (cx->man)
			man_page(&b);
		else
			list_text(&b);
		goto print;
	}

	char tname[32];
	const char *arg = argv[0];
	size_t tn = strcspn(arg, ".");
	snprintf(tname, sizeof(tname), "%.*s", (int)(tn < sizeof(tname) ? tn : sizeof(tname) - 1), arg);
	const struct rs_type *t = resource_schema_by_name(tname);
	if (!t || tn >= sizeof(tname))
		return unknown("type", tname, type_names, RES_TYPE_COUNT, "the types");
	if (!arg[tn]) {
		if (cx->json)
			return print_json(type_json(t));
		type_text(&b, t);
		goto print;
	}
	if (!arg[tn + 1]) {
		char show[STR_SHOW_BUF];
		ctl_error("explain: '%s': a field's name after the '.' (tetherctl explain %s lists them)",
			  str_show(arg, show), tname);
		return CTL_EXIT_USAGE;
	}
	const struct rs_field *f = find_field(t, arg + tn + 1);
	if (!f)
		return CTL_EXIT_USAGE;
	if (cx->json) {
		cJSON *o = cJSON_CreateObject(), *arr;
		cJSON_AddStringToObject(o, "type", tname);
		arr = cJSON_AddArrayToObject(o, "fields");
		for (const struct rs_field *g = t->fields; g->path; g++)
			if (resource_schema_under(g, f->path))
				cJSON_AddItemToArray(arr, field_json(g));
		return print_json(o);
	}
	buf_printf(&b, "%s.%s\n", tname, f->path);
	bool first = true;
	for (const struct rs_field *g = t->fields; g->path; g++) {
		if (!resource_schema_under(g, f->path))
			continue;
		if (!first)
			buf_putc(&b, '\n');
		first = false;
		field_text(&b, g);
	}
print:
	fwrite(b.data, 1, b.len, stdout);
	buf_release(&b);
	return CTL_EXIT_OK;
}
