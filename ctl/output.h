/* output.h: tetherctl's printing for people: re-indented JSON, values as
 * text, aligned tables, "label: value" lines. Nothing from the network
 * reaches the terminal as a control character. */
#ifndef TETHER_CTL_OUTPUT_H
#define TETHER_CTL_OUTPUT_H

#include <stddef.h>
#include <cjson/cJSON.h>

#include "buf.h"
#include "client.h"

/* A table of text cells printed with aligned columns. */
struct table {
	size_t ncols, nrows;
	char **cells;   /* row-major, owned */
};

/* "label: value" lines, values aligned; a value of several lines keeps
 * its later lines under the first. */
struct fields {
	size_t n;
	char **label, **value;   /* owned */
};

struct known_field {
	const char *key, *label;
};

/* Prints the plane's JSON as it came, ending with a newline. */
void print_raw(const struct client_answer *ans);
/* Re-indents a valid JSON text, two spaces a level. Works on the text, so
 * numbers and strings keep their exact bytes. */
void json_pretty(struct buf *out, const char *s);
/* Returns a new allocated text of a scalar or small value: strings as
 * they are, null as "-", arrays of scalars joined by ", ", an object as
 * words ("members 3, acked 2"), a list of objects "; "-separated: never
 * raw JSON. */
char *value_text(const cJSON *v);
/* Times for people (new allocated): local ISO 8601 with its offset
 * (TZ honoured): 2026-12-06T05:12:03+01:00; a
 * duration in words ("19 s", "2 min", "3 h 5 min", "2 days"); how long
 * ago ("2 min ago", "in 5 s"); the duration until epoch; and "TIME (AGO)".
 * epoch <= 0: "-". */
char *time_local_text(double epoch);
char *duration_text(double seconds);
char *ago_text(double epoch);
char *duration_until_text(double epoch);
char *time_and_ago_text(double epoch);
/* Display width of UTF-8 text: one column a code point. */
size_t text_width(const char *s);
/* Returns a new allocated one-line copy of s for a table cell, cut to max
 * columns with "...". */
char *cell_text(const char *s, size_t max);

/* Adds a row of ncols owned cells. */
void table_row(struct table *t, char **row);
void table_print(const struct table *t);
void table_release(struct table *t);

/* Adds a line (value is taken). */
void fields_add(struct fields *f, const char *label, char *value);
void fields_print_release(struct fields *f);
/* Adds the known fields of obj in their order, then every other member
 * under its own key. */
void fields_from(struct fields *f, const cJSON *obj, const struct known_field *known, size_t nknown);

#endif
