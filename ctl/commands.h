/* commands.h: one function per tetherctl command. Each gets the parsed
 * global options and its own operands (argv without the command words) and
 * returns the exit status: 0 done, 1 refused or failed, 2 usage error. */
#ifndef TETHER_CTL_COMMANDS_H
#define TETHER_CTL_COMMANDS_H

#include <stdbool.h>
#include <cjson/cJSON.h>

#define CTL_DEFAULT_PLANE "http://127.0.0.1:7070"
#define CTL_DEFAULT_STATE_DIR "/var/lib/tetherd"
/* The largest FILE put and apply read (the plane has its own limits). */
#define CTL_MAX_INPUT ((size_t)64 << 20)

struct ctl_ctx {
	const char *plane;        /* base URL of the plane */
	const char *token_file;   /* NULL: no Authorization header */
	const char *ca_file;      /* NULL: the system's trust store */
	const char *cert, *key;   /* a client certificate (mutual TLS) */
	bool json;                /* --json: print the raw JSON */
	const char *state_dir;    /* status: the agent's state directory */
	const char *node, *role, *name;   /* token create: whose token */
	bool prune, dry_run;      /* sync */
	const char *message;      /* --message: the version log's why (writes, sync) */
	const char *override;     /* --override REASON: pass a guard or a freeze (X-Tether-Override) */
	const char *base;         /* sync: the version the batch must apply to (default: the one compared) */
	bool force;               /* export: into a non-empty directory */
	const char *limit;        /* log -n N */
	const char *at;           /* get --at VERSION */
	bool seal;                /* put --seal */
	bool recovery;            /* keygen --recovery: an X25519 recovery key */
	const char *recovery_key; /* --recovery-key FILE: put --seal, sync, secrets reseal */
	const char *output;       /* --output FILE: put --seal writes the stored form there */
	const char *until;        /* freeze --until TIME */
	bool off;                 /* freeze --off */
	bool now;                 /* revert --now: an emergency revert */
	bool approver;            /* keygen --approver: an approver's Ed25519 key */
	const char *approver_key; /* approve --key FILE: the approver's secret key */
	bool man;                 /* explain --man: the roff of tether-resources(5) */
	const char *ttl;          /* ui --ttl DURATION: the console session's life */
	bool open;                /* ui --open: hand the link to a browser */
};

int cmd_put(const struct ctl_ctx *cx, int argc, char **argv);
int cmd_get(const struct ctl_ctx *cx, int argc, char **argv);
int cmd_rm(const struct ctl_ctx *cx, int argc, char **argv);
int cmd_ls(const struct ctl_ctx *cx, int argc, char **argv);
int cmd_apply(const struct ctl_ctx *cx, int argc, char **argv);
int cmd_nodes(const struct ctl_ctx *cx, int argc, char **argv);
int cmd_rollout_status(const struct ctl_ctx *cx, int argc, char **argv);
int cmd_rollout_abort(const struct ctl_ctx *cx, int argc, char **argv);
int cmd_watch(const struct ctl_ctx *cx, int argc, char **argv);
int cmd_status(const struct ctl_ctx *cx, int argc, char **argv);
/* cmd_sync.c: sync exits 3 when --dry-run finds changes */
int cmd_sync(const struct ctl_ctx *cx, int argc, char **argv);
int cmd_export(const struct ctl_ctx *cx, int argc, char **argv);
/* cmd_history.c */
int cmd_log(const struct ctl_ctx *cx, int argc, char **argv);
int cmd_show(const struct ctl_ctx *cx, int argc, char **argv);
int cmd_diff(const struct ctl_ctx *cx, int argc, char **argv);
int cmd_revert(const struct ctl_ctx *cx, int argc, char **argv);
/* cmd_trust.c */
int cmd_keygen(const struct ctl_ctx *cx, int argc, char **argv);
int cmd_token_create(const struct ctl_ctx *cx, int argc, char **argv);
int cmd_token_ls(const struct ctl_ctx *cx, int argc, char **argv);
int cmd_token_revoke(const struct ctl_ctx *cx, int argc, char **argv);

/* cmd_explain.c: the resource types and fields (common/resource_schema.c) */
int cmd_explain(const struct ctl_ctx *cx, int argc, char **argv);

/* cmd_freeze.c: the freeze window; and the line rollout status prints
 * while one holds (nothing otherwise) */
int cmd_freeze(const struct ctl_ctx *cx, int argc, char **argv);
void ctl_print_freeze_line(const struct ctl_ctx *cx);
/* cmd_ui.c: a console session's link */
int cmd_ui(const struct ctl_ctx *cx, int argc, char **argv);
/* cmd_approve.c: approvals that nodes enforce */
int cmd_approve(const struct ctl_ctx *cx, int argc, char **argv);
int cmd_reject(const struct ctl_ctx *cx, int argc, char **argv);
/* A version's word on approvals ("pending approval 1/2 (1a2b3c4d...)",
 * "approved 2/2 (...)"), from a log entry or GET /v1/approvals; NULL when
 * it has none. Malloc'd. */
char *cmd_approve_log_text(const cJSON *v);

/* cmd_secrets.c: sealed secrets */
int cmd_put_sealed(const struct ctl_ctx *cx, int argc, char **argv);
int cmd_secrets_status(const struct ctl_ctx *cx, int argc, char **argv);
int cmd_secrets_reseal(const struct ctl_ctx *cx, int argc, char **argv);
int cmd_secrets_revoke(const struct ctl_ctx *cx, int argc, char **argv);
int cmd_secrets_approve(const struct ctl_ctx *cx, int argc, char **argv);

#endif
