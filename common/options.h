/* options.h: one table of options serves the command line (--name VALUE)
 * and the INI config file (name = value, dashes or underscores). The
 * command line wins: the file named by -c is read first, then argv. */
#ifndef TETHER_OPTIONS_H
#define TETHER_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum opt_kind {
	OPT_STRING,     /* char * (owned, malloc'd) */
	OPT_UINT,       /* uint64_t in [min, max] */
	OPT_SECONDS,    /* double in [min, max] */
	OPT_FLAG,       /* bool; no argument on the command line, yes/no in a file */
	OPT_CHOICE,     /* char * that must be one of choices */
};

struct opt_def {
	const char *name;             /* "stream-timeout" */
	char short_name;              /* 0 when none */
	enum opt_kind kind;
	size_t offset;                /* into the config struct */
	double min, max;
	const char *const *choices;   /* OPT_CHOICE: NULL-terminated */
	const char *arg;              /* "SECONDS" for the usage text */
	const char *help;
};

/* Sets one option from text. Returns 0, or -1 with err. */
int options_set(const struct opt_def *defs, void *cfg, const char *name, const char *value,
		char *err, size_t errlen);
/* Reads an INI file; keys must be in [section]. Returns 0, or -1 with err
 * naming the line. */
int options_load_file(const struct opt_def *defs, void *cfg, const char *path, const char *section,
		      char *err, size_t errlen);
/* Parses argv: -c FILE first (through the file), then every option.
 * Returns 0; 1 after --help or --version (printed); -1 with err. On
 * success *first_arg is the index of the first operand. */
int options_parse(const struct opt_def *defs, void *cfg, int argc, char **argv, const char *section,
		  const char *synopsis, const char *version, int *first_arg, char *err, size_t errlen);
void options_usage(FILE *f, const char *prog, const char *synopsis, const struct opt_def *defs);
/* Frees the strings options_set allocated. */
void options_release(const struct opt_def *defs, void *cfg);

#endif
