/* options.c: command line and INI options from one table (see options.h). */
#include "options.h"
#include "util.h"
#include "xmalloc.h"

#include <getopt.h>
#include <ini.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static const struct opt_def *find_def(const struct opt_def *defs, const char *name)
{
	for (; defs->name; defs++) {
		const char *a = defs->name, *b = name;
		while (*a && (*a == *b || (*a == '-' && *b == '_'))) {
			a++;
			b++;
		}
		if (!*a && !*b)
			return defs;
	}
	return NULL;
}

int options_set(const struct opt_def *defs, void *cfg, const char *name, const char *value,
		char *err, size_t errlen)
{
	const struct opt_def *d = find_def(defs, name);
	if (!d) {
		snprintf(err, errlen, "unknown option '%s'", name);
		return -1;
	}
	char *field = (char *)cfg + d->offset;
	switch (d->kind) {
	case OPT_STRING: {
		char **s = (char **)(void *)field;
		free(*s);
		*s = xstrdup(value);
		return 0;
	}
	case OPT_CHOICE: {
		for (const char *const *c = d->choices; *c; c++) {
			if (strcmp(*c, value) == 0) {
				char **s = (char **)(void *)field;
				free(*s);
				*s = xstrdup(value);
				return 0;
			}
		}
		char list[256] = "";
		for (const char *const *c = d->choices; *c; c++) {
			strncat(list, *c, sizeof(list) - strlen(list) - 1);
			if (c[1])
				strncat(list, ", ", sizeof(list) - strlen(list) - 1);
		}
		snprintf(err, errlen, "%s: '%s' is not one of %s", d->name, value, list);
		return -1;
	}
	case OPT_UINT: {
		uint64_t v;
		if (parse_uint_range(value, (uint64_t)d->min, (uint64_t)d->max, &v) < 0) {
			snprintf(err, errlen, "%s: '%s' is not an integer in %.0f..%.0f", d->name, value, d->min, d->max);
			return -1;
		}
		memcpy(field, &v, sizeof(v));
		return 0;
	}
	case OPT_SECONDS: {
		double v;
		if (parse_seconds(value, d->min, d->max, &v) < 0) {
			snprintf(err, errlen, "%s: '%s' is not a number of seconds in %g..%g", d->name, value, d->min, d->max);
			return -1;
		}
		memcpy(field, &v, sizeof(v));
		return 0;
	}
	case OPT_FLAG: {
		bool v;
		if (parse_bool(value, &v) < 0) {
			snprintf(err, errlen, "%s: '%s' is not yes or no", d->name, value);
			return -1;
		}
		memcpy(field, &v, sizeof(v));
		return 0;
	}
	}
	return -1;
}

struct ini_ctx {
	const struct opt_def *defs;
	void *cfg;
	const char *section;
	char *err;
	size_t errlen;
	int failed;
};

static int ini_on_pair(void *user, const char *section, const char *name, const char *value)
{
	struct ini_ctx *c = user;
	if (c->failed)
		return 0;
	if (strcmp(section, c->section) != 0) {
		snprintf(c->err, c->errlen, "unknown section [%s] (expected [%s])", section, c->section);
		c->failed = 1;
		return 0;
	}
	if (options_set(c->defs, c->cfg, name, value, c->err, c->errlen) < 0) {
		c->failed = 1;
		return 0;
	}
	return 1;
}

int options_load_file(const struct opt_def *defs, void *cfg, const char *path, const char *section,
		      char *err, size_t errlen)
{
	struct ini_ctx c = { defs, cfg, section, err, errlen, 0 };
	char inner[512] = "";
	c.err = inner;
	c.errlen = sizeof(inner);
	int rc = ini_parse(path, ini_on_pair, &c);
	if (rc < 0) {
		snprintf(err, errlen, "cannot read config file '%s'", path);
		return -1;
	}
	if (rc > 0) {
		snprintf(err, errlen, "%s:%d: %s", path, rc, c.failed ? inner : "syntax error");
		return -1;
	}
	return 0;
}

void options_usage(FILE *f, const char *prog, const char *synopsis, const struct opt_def *defs)
{
	fprintf(f, "usage: %s %s\n\noptions:\n", prog, synopsis);
	fprintf(f, "  -c, --config FILE          read options from an INI file (the command line wins)\n");
	for (; defs->name; defs++) {
		char left[64];
		if (defs->short_name)
			snprintf(left, sizeof(left), "-%c, --%s%s%s", defs->short_name, defs->name,
				 defs->arg ? " " : "", defs->arg ? defs->arg : "");
		else
			snprintf(left, sizeof(left), "    --%s%s%s", defs->name, defs->arg ? " " : "",
				 defs->arg ? defs->arg : "");
		fprintf(f, "  %-26s %s\n", left, defs->help);
	}
	fprintf(f, "  -h, --help                 show this help\n");
	fprintf(f, "  -V, --version              show the version\n");
}

int options_parse(const struct opt_def *defs, void *cfg, int argc, char **argv, const char *section,
		  const char *synopsis, const char *version, int *first_arg, char *err, size_t errlen)
{
	size_t n = 0;
	while (defs[n].name)
		n++;
	struct option *lo = xcalloc(n + 4, sizeof(*lo));
	char shorts[128] = "+c:hV";
	for (size_t i = 0; i < n; i++) {
		lo[i].name = defs[i].name;
		lo[i].has_arg = defs[i].kind == OPT_FLAG ? no_argument : required_argument;
		lo[i].val = 256 + (int)i;
		if (defs[i].short_name) {
			size_t l = strlen(shorts);
			shorts[l] = defs[i].short_name;
			shorts[l + 1] = defs[i].kind == OPT_FLAG ? '\0' : ':';
			shorts[l + 2] = '\0';
		}
	}
	lo[n] = (struct option){ "config", required_argument, NULL, 'c' };
	lo[n + 1] = (struct option){ "help", no_argument, NULL, 'h' };
	lo[n + 2] = (struct option){ "version", no_argument, NULL, 'V' };

	int rc = 0, c;
	/* pass 1: the config file, so the command line can override it */
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
		if (c == 'c' && options_load_file(defs, cfg, optarg, section, err, errlen) < 0) {
			rc = -1;
			goto out;
		}
	}
	/* pass 2: everything else */
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
		if (c == 'c')
			continue;
		if (c == 'h') {
			options_usage(stdout, argv[0], synopsis, defs);
			rc = 1;
			goto out;
		}
		if (c == 'V') {
			printf("%s\n", version);
			rc = 1;
			goto out;
		}
		if (c == '?' || c == ':') {
			if (optopt && optopt < 256)
				snprintf(err, errlen, "unknown option or missing value: -%c", optopt);
			else
				snprintf(err, errlen, "unknown option or missing value: %s", argv[optind - 1]);
			rc = -1;
			goto out;
		}
		const struct opt_def *d = NULL;
		if (c >= 256)
			d = &defs[c - 256];
		else
			for (size_t i = 0; i < n; i++)
				if (defs[i].short_name == c)
					d = &defs[i];
		if (!d) {
			snprintf(err, errlen, "unknown option");
			rc = -1;
			goto out;
		}
		if (options_set(defs, cfg, d->name, d->kind == OPT_FLAG ? "yes" : optarg, err, errlen) < 0) {
			rc = -1;
			goto out;
		}
	}
	*first_arg = optind;
out:
	free(lo);
	return rc;
}

void options_release(const struct opt_def *defs, void *cfg)
{
	for (; defs->name; defs++) {
		if (defs->kind == OPT_STRING || defs->kind == OPT_CHOICE) {
			char **s = (char **)(void *)((char *)cfg + defs->offset);
			free(*s);
			*s = NULL;
		}
	}
}
