/* resource_schema.h: the one table of the resource types and their fields
 * (name, JSON type, required, limits, a line of description), each type's
 * description and an example body the plane accepts. resource.c takes the
 * names it knows from it (a field cannot be accepted and undocumented),
 * `tetherctl explain` prints it and `tetherctl explain --man` makes
 * tether-resources(5) from it. Everything returned is static. */
#ifndef TETHER_RESOURCE_SCHEMA_H
#define TETHER_RESOURCE_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <cjson/cJSON.h>

#include "resource.h"

/* Field flags. */
#define RS_REQUIRED 1u  /* must be present in its object (a nested field: when its object is) */
#define RS_PENDING 2u   /* documented, but validated by code this tree does not have yet: the
			   unknown-field check refuses it as unknown (the merge of its validation
			   removes the flag) */
#define RS_SEALED 4u    /* a sealed secret's field: known beside "sealed" only */
#define RS_MAP 8u       /* an object whose member names the writer chooses (header names):
			   its members are not fields */

#define RS_CHILDREN_MAX 32   /* the most fields one object has */

struct rs_field {
	const char *path;    /* "endpoints[].address": parent names joined by '.', "[]" for an
				array's elements */
	const char *json;    /* "string", "integer", "number", "boolean", "object",
				"array of objects", "array of strings", "object of strings" */
	unsigned flags;
	const char *limits;  /* what the plane takes, default included; "" for none */
	const char *desc;    /* one line */
};

struct rs_type {
	enum res_type type;
	const char *desc;          /* a paragraph (one line of text, wrapped by the printer) */
	const char *example_name;  /* the example is TYPE/example_name */
	const char *example;       /* a body the plane accepts, indented JSON, ending in '\n' */
	const struct rs_field *fields;   /* ends with a NULL path */
};

/* The type's entry (t < RES_TYPE_COUNT), or the one named ("route"); NULL
 * for an unknown name. */
const struct rs_type *resource_schema(enum res_type t);
const struct rs_type *resource_schema_by_name(const char *name);

/* The field at path ("timeout.read"; "endpoints.address" and
 * "endpoints[].address" both name the endpoints' address), or NULL. */
const struct rs_field *resource_schema_field(enum res_type t, const char *path);

/* Is f the field at path prefix or beneath it ("timeout" covers
 * "timeout.read", "endpoints" covers "endpoints[].port")? */
bool resource_schema_under(const struct rs_field *f, const char *prefix);

/* The names of the fields directly in the object at parent ("" the body,
 * "tls", "endpoints[]"), in the table's order, leaving out fields with any
 * flag of skip. Returns their count (at most cap). */
size_t resource_schema_children(enum res_type t, const char *parent, unsigned skip, const char **names,
				size_t cap);

/* The name of names[] nearest to key when it is near enough to be a typo
 * (at most a third of the longer name's letters apart, and at least one;
 * or the same name in another case); NULL otherwise. */
const char *resource_schema_nearest(const char *key, const char *const *names, size_t n);

/* Checks the members of obj, the object at parent, against the table:
 * 0, or -1 with "unknown field 'x' (did you mean 'y'?)" or "unknown field
 * 'x' (known: a, b)" in err (no resource name: the caller adds it). Fields
 * with any flag of skip count as unknown (RS_PENDING always does). */
int resource_schema_check(enum res_type t, const char *parent, unsigned skip, const cJSON *obj, char *err,
			  size_t errlen);

#endif
