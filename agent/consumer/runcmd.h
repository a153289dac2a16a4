/* consumer/runcmd.h: runs an operator's command (--check, --reload) with
 * /bin/sh -c, extra environment variables, a timeout (the whole process group
 * is killed), and its stderr captured (bounded) for the NACK message. */
#ifndef TETHER_RUNCMD_H
#define TETHER_RUNCMD_H

#include <stddef.h>

#define RUNCMD_OUTPUT_MAX 4096

struct runcmd_result {
	int exit_code;          /* -1 when killed by a signal or the timeout */
	int signal;             /* the signal that ended it, or 0 */
	int timed_out;
	char output[RUNCMD_OUTPUT_MAX];   /* its stderr (then stdout), trimmed */
};

/* env: NULL-terminated "NAME=value" strings added to the environment.
 * Returns 0 when the command ran (see res for how it ended), -1 when it
 * could not be started (err says why). */
int runcmd(const char *cmd, const char *const *env, double timeout_s, struct runcmd_result *res,
	   char *err, size_t errlen);

/* Formats how it ended: "exit 1: <output>", "killed by signal 9", ... */
void runcmd_describe(const struct runcmd_result *res, char *out, size_t cap);

#endif
