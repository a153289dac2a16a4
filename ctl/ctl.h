/* ctl.h: tetherctl, the operator's command line over the plane's admin
 * API: option parsing, dispatch and usage (ctl.c). */
#ifndef TETHER_CTL_H
#define TETHER_CTL_H

#define CTL_EXIT_OK 0
#define CTL_EXIT_FAILED 1   /* a refused request, an unreachable plane, a bad file */
#define CTL_EXIT_USAGE 2
#define CTL_EXIT_CHANGES 3  /* --dry-run: the plane would take it, and something would change */
#define CTL_EXIT_REFUSED 4  /* --dry-run: the plane would refuse it (its reason printed) */

/* Runs tetherctl on argv; returns the process exit status. */
int ctl_main(int argc, char **argv);

/* Prints "tetherctl: MESSAGE" on stderr. */
void ctl_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
