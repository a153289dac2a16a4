/* consumer/procfs.h: the parsers of the /proc text the drain count reads
 * (consumer/drain.c): a process's stat line (its parent, its start time, its
 * name), its status (VmRSS) and its title (cmdline). The bytes are taken as
 * read and may be anything (a process names itself: its comm may hold
 * spaces and parentheses); nothing here allocates. Fuzzed
 * (tests/fuzz/fuzz_procfs.c). */
#ifndef TETHER_PROCFS_H
#define TETHER_PROCFS_H

#include <stddef.h>
#include <stdint.h>

/* What a /proc/PID/stat line says of the process. */
struct procfs_stat {
	long pid;
	long ppid;
	char state;              /* R, S, D, Z, ... */
	char comm[64];           /* the kernel keeps 15 bytes; longer is cut */
	uint64_t start;          /* clock ticks after boot (field 22) */
};

/* Parses a stat line: "PID (COMM) STATE PPID ... STARTTIME ...". COMM runs
 * from the first '(' to the last ')'. 0, or -1 when it is not one (a field
 * missing, a number out of range). */
int procfs_parse_stat(const char *text, size_t len, struct procfs_stat *out);
/* The resident memory a /proc/PID/status gives ("VmRSS:  7420 kB"), in
 * bytes. 0, or -1 when there is no such line (a kernel thread, a zombie) or
 * it is malformed. */
int procfs_parse_rss(const char *text, size_t len, uint64_t *bytes);
/* A process's title from its /proc/PID/cmdline: the NULs between the
 * arguments as spaces, other control bytes as '?', trailing blanks
 * dropped, cut to fit out (outlen > 0). */
void procfs_title(const char *raw, size_t len, char *out, size_t outlen);

#endif
