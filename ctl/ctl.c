/* ctl.c: tetherctl's command line: global and command options, the
 * command table, usage and help, dispatch to commands.c (see ctl.h). */
#include "ctl.h"
#include "client.h"
#include "commands.h"
#include "log.h"
#include "util.h"
#include "xmalloc.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define USAGE_LINE "usage: tetherctl [--plane URL] [--token-file FILE] [--ca-file FILE] [--cert FILE --key FILE] COMMAND ..."

/* Options a command accepts besides the global ones. */
#define OPT_JSON 1u
#define OPT_STATE_DIR 2u
#define OPT_NODE 4u
#define OPT_ROLE 8u
#define OPT_NAME 16u
#define OPT_PRUNE 32u
#define OPT_DRY_RUN 64u
#define OPT_MESSAGE 128u
#define OPT_BASE 256u
#define OPT_FORCE 512u
#define OPT_LIMIT 1024u
#define OPT_AT 2048u
#define OPT_SEAL 4096u
#define OPT_RECOVERY 8192u
#define OPT_RECOVERY_KEY 16384u
#define OPT_OUTPUT 32768u
#define OPT_OVERRIDE 65536u
#define OPT_UNTIL 131072u
#define OPT_OFF 262144u
#define OPT_APPROVER 524288u
#define OPT_KEY 1048576u   /* approve --key FILE: an approver's key (not the client certificate's) */
#define OPT_MAN 2097152u   /* explain --man: tether-resources(5)'s roff */
#define OPT_NOW 4194304u   /* revert --now: an emergency revert, every node at once */
#define OPT_TTL 8388608u   /* ui --ttl DURATION */
#define OPT_OPEN 16777216u /* ui --open */

/* The option of each OPT_ bit, for "unknown option" messages. */
static const char *const opt_names[] = { "--json", "--state-dir", "--node", "--role", "--name",
					  "--prune", "--dry-run", "--message", "--base", "--force", "-n", "--at",
					  "--seal", "--recovery", "--recovery-key", "--output", "--override",
					  "--until", "--off", "--approver", "--key", "--man", "--now", "--ttl", "--open" };

struct command {
	const char *name, *sub;   /* "rollout" "status"; sub NULL for one word */
	const char *args;         /* operands and options, for the usage */
	const char *help;
	int min_args, max_args;
	unsigned opts;
	bool local;               /* does not talk to the plane */
	int (*run)(const struct ctl_ctx *cx, int argc, char **argv);
};

static const struct command commands[] = {
	{ "put", NULL, "NAME [FILE|-] [--dry-run] [--message TEXT] [--override REASON] [--seal [--recovery-key FILE] [--output FILE]] [--json]",
	  "upsert one resource (body: a JSON object; stdin without FILE); --dry-run: the plane checks it and "
	  "stores nothing (exit 4 refused, 3 would change, 0 the same); --seal: a secret sealed here "
	  "(--output: its stored form written to FILE, for sync)", 1, 2,
	  OPT_DRY_RUN | OPT_MESSAGE | OPT_OVERRIDE | OPT_SEAL | OPT_RECOVERY_KEY | OPT_OUTPUT | OPT_JSON, false, cmd_put },
	{ "get", NULL, "NAME [--at VERSION]", "print the body of a resource (as it was at VERSION)", 1, 1, OPT_AT,
	  false, cmd_get },
	{ "rm", NULL, "NAME [--message TEXT] [--override REASON] [--json]", "delete a resource", 1, 1,
	  OPT_MESSAGE | OPT_OVERRIDE | OPT_JSON, false, cmd_rm },
	{ "ls", NULL, "[PREFIX] [--json]", "list names with their versions", 0, 1, OPT_JSON, false, cmd_ls },
	{ "apply", NULL, "FILE [--message TEXT] [--override REASON] [--json]",
	  "one batch {\"upserts\":[...],\"removes\":[...]} as one version", 1, 1, OPT_MESSAGE | OPT_OVERRIDE | OPT_JSON,
	  false, cmd_apply },
	{ "sync", NULL, "DIR [--prune] [--dry-run] [--message TEXT] [--override REASON] [--base VERSION] [--recovery-key FILE] [--json]",
	  "make the plane match DIR/<type>/<name>.json, one version (--dry-run: the diff, checked by the plane: "
	  "exit 4 refused, 3 would change, 0 nothing to do)", 1, 1,
	  OPT_PRUNE | OPT_DRY_RUN | OPT_MESSAGE | OPT_OVERRIDE | OPT_BASE | OPT_RECOVERY_KEY | OPT_JSON, false, cmd_sync },
	{ "export", NULL, "DIR [--force]", "write the plane's resources as DIR/<type>/<name>.json", 1, 1, OPT_FORCE,
	  false, cmd_export },
	{ "log", NULL, "[NAME] [-n N] [--json]", "the versions, newest first: who, when, why, what (default 20)",
	  0, 1, OPT_LIMIT | OPT_JSON, false, cmd_log },
	{ "show", NULL, "VERSION [--json]", "what a version changed, with who, when and why", 1, 1, OPT_JSON, false,
	  cmd_show },
	{ "diff", NULL, "V1 V2 [--json]", "what differs between two versions", 2, 2, OPT_JSON, false, cmd_diff },
	{ "revert", NULL, "VERSION [--now] [--message TEXT] [--override REASON] [--json]",
	  "commit the state at VERSION as a new version (--now: an emergency revert, to every node at once: no "
	  "stages, no bakes; the rollout in progress is superseded)", 1, 1,
	  OPT_NOW | OPT_MESSAGE | OPT_OVERRIDE | OPT_JSON, false, cmd_revert },
	{ "nodes", NULL, "[--json]", "per node: acked version, lag, connection, key, last NACK, labels",
	  0, 0, OPT_JSON, false, cmd_nodes },
	{ "rollout", "status", "[--json]", "the current or last rollout", 0, 0, OPT_JSON, false,
	  cmd_rollout_status },
	{ "rollout", "abort", "[--json]", "stop the current rollout and revert", 0, 0, OPT_JSON, false,
	  cmd_rollout_abort },
	{ "freeze", NULL, "[--until TIME --message TEXT | --off] [--json]",
	  "show, set or end the freeze window: writes (423) and rollouts stop until TIME (2026-12-06T18:00:00Z, "
	  "or 90m, 2h, 1d from now); an admin's override passes", 0, 0, OPT_UNTIL | OPT_MESSAGE | OPT_OFF | OPT_JSON,
	  false, cmd_freeze },
	{ "ui", NULL, "[--ttl DURATION] [--open] [--json]",
	  "a link to the console with a read-only session that expires (default 15m, 1m..1d): PLANE/ui/#s=TOKEN; "
	  "--open: hand it to $BROWSER or xdg-open", 0, 0, OPT_TTL | OPT_OPEN | OPT_JSON, false, cmd_ui },
	{ "watch", NULL, "[--json]", "print the plane's events as they come (versions, ACKs, NACKs, rollouts)",
	  0, 0, OPT_JSON, false, cmd_watch },
	{ "explain", NULL, "[TYPE[.FIELD]] [--json | --man]",
	  "the resource types; a type's fields (name, type, required, limits, what it does) and an example; "
	  "one field and its members (route.timeout); --json: as JSON; --man: tether-resources(5)'s source",
	  0, 1, OPT_JSON | OPT_MAN, true, cmd_explain },
	{ "status", NULL, "[--state-dir DIR] [--json]", "the local agent's status (" CTL_DEFAULT_STATE_DIR
	  "/status.json)", 0, 0, OPT_JSON | OPT_STATE_DIR, true, cmd_status },
	{ "keygen", NULL, "FILE [--recovery | --approver]",
	  "a new Ed25519 signing key (--recovery: an X25519 recovery key; --approver: an approver's key for "
	  "tetherctl approve): FILE (secret, 0600) and FILE.pub", 1, 1,
	  OPT_RECOVERY | OPT_APPROVER, true, cmd_keygen },
	{ "approve", NULL, "VERSION --key FILE [--json]",
	  "show what VERSION changes since the last approved, digest it here, sign with the approver key FILE "
	  "and post the approval (nodes that require approvals wait for it)", 1, 1, OPT_KEY | OPT_JSON, false,
	  cmd_approve },
	{ "reject", NULL, "VERSION [--message TEXT] [--override REASON] [--json]",
	  "commit the state before VERSION as a new version (\"reject VERSION: ...\")", 1, 1,
	  OPT_MESSAGE | OPT_OVERRIDE | OPT_JSON, false, cmd_reject },
	{ "token", "create", "--node ID | --role ROLE [--name TEXT] [--json]",
	  "a new token (ROLE: admin, operator, reader, relay), printed once", 0, 0,
	  OPT_NODE | OPT_ROLE | OPT_NAME | OPT_JSON, false,
	  cmd_token_create },
	{ "token", "ls", "[--json]", "the tokens (never their secret part)", 0, 0, OPT_JSON, false, cmd_token_ls },
	{ "token", "revoke", "ID", "revoke a token at once (its open streams close)", 1, 1, 0, false,
	  cmd_token_revoke },
	{ "secrets", "status", "[--json]", "per secret: version, sealed, the nodes without a wrap", 0, 0, OPT_JSON,
	  false, cmd_secrets_status },
	{ "secrets", "reseal", "--recovery-key FILE [--message TEXT] [--override REASON] [--base VERSION]",
	  "wrap sealed secrets' data keys for the nodes that lack them, one version", 0, 0,
	  OPT_RECOVERY_KEY | OPT_MESSAGE | OPT_OVERRIDE | OPT_BASE, false, cmd_secrets_reseal },
	{ "secrets", "revoke", "NODE [--json]", "revoke a node's key (it must make a new one)", 1, 1, OPT_JSON, false,
	  cmd_secrets_revoke },
	{ "secrets", "approve", "NODE KID [--json]",
	  "approve a node's key that waits for an admin (the plane's --approve-relay-keys)", 2, 2, OPT_JSON, false,
	  cmd_secrets_approve },
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

void ctl_error(const char *fmt, ...)
{
	va_list ap;
	fputs("tetherctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* "rollout status [--json]": the words and arguments of a command. */
static void command_words(char *out, size_t cap, const struct command *c)
{
	snprintf(out, cap, "%s%s%s%s%s", c->name, c->sub ? " " : "", c->sub ? c->sub : "",
		 *c->args ? " " : "", c->args);
}

static void command_usage(FILE *f, const struct command *c)
{
	char words[128];
	command_words(words, sizeof(words), c);
	fprintf(f, "usage: tetherctl [global options] %s\n", words);
}

static void help(FILE *f)
{
	fprintf(f, "%s\n\n"
		   "Operates the tether control plane through its admin API.\n\n"
		   "commands:\n", USAGE_LINE);
	for (size_t i = 0; i < NCOMMANDS; i++) {
		char words[128];
		command_words(words, sizeof(words), &commands[i]);
		fprintf(f, "  %-34s %s\n", words, commands[i].help);
	}
	fprintf(f, "  %-34s %s\n", "help [COMMAND]", "show this help, or a command's usage");
	fprintf(f, "\noptions:\n"
		   "  --plane URL[,URL...]               the plane (default $TETHER_PLANE, else\n"
		   "                                     %s); several: replicas, the next\n"
		   "                                     tried when one is unreachable or answers 503\n"
		   "                                     (a read: also 502, 504)\n"
		   "  --token-file FILE                  send 'Authorization: Bearer TOKEN', the token\n"
		   "                                     read from FILE (default $TETHER_TOKEN_FILE)\n"
		   "  --ca-file FILE                     CA certificates that sign the plane's (default\n"
		   "                                     $TETHER_CA_FILE, else the system's store)\n"
		   "  --cert FILE, --key FILE            a client certificate and its key, for mutual TLS\n"
		   "                                     (default $TETHER_CERT, $TETHER_KEY)\n"
		   "  -v, --verbose                      log each request on stderr\n"
		   "  -h, --help                         show this help\n"
		   "  -V, --version                      show the version\n"
		   "\nNAME is TYPE/NAME: cluster/web, listener/l1, route/r1, secret/s1, file/f1, guard/g1\n"
		   "('tetherctl explain TYPE': its fields).\n"
		   "Exit status: 0 success, 1 refused request or unreachable plane, 2 usage error,\n"
		   "3 sync/put --dry-run: the plane would take it and something would change,\n"
		   "4 sync/put --dry-run: the plane would refuse it (its reason printed).\n",
		CTL_DEFAULT_PLANE);
}

/* A usage error: the message, the usage line, exit 2. */
static int usage_error(const struct command *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int usage_error(const struct command *c, const char *fmt, ...)
{
	va_list ap;
	fputs("tetherctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (c)
		command_usage(stderr, c);
	else
		fprintf(stderr, "%s\n", USAGE_LINE);
	fputs("run 'tetherctl --help' for the commands\n", stderr);
	return CTL_EXIT_USAGE;
}

static const struct command *find_command(const char *name, const char *sub, bool *name_known)
{
	*name_known = false;
	for (size_t i = 0; i < NCOMMANDS; i++) {
		if (strcmp(commands[i].name, name) != 0)
			continue;
		*name_known = true;
		if (!commands[i].sub || (sub && strcmp(commands[i].sub, sub) == 0))
			return &commands[i];
	}
	return NULL;
}

/* The value of "--opt VALUE" or "--opt=VALUE" at argv[*i]; NULL when arg
 * is not this option. Sets *missing when the value is absent or empty. */
static const char *option_value(int argc, char **argv, int *i, const char *opt, bool *missing)
{
	const char *arg = argv[*i];
	size_t n = strlen(opt);
	if (strncmp(arg, opt, n) != 0)
		return NULL;
	if (arg[n] == '=') {
		*missing = !arg[n + 1];
		return arg + n + 1;
	}
	if (arg[n])
		return NULL;
	if (*i + 1 >= argc || !*argv[*i + 1]) {
		*missing = true;
		return arg;
	}
	return argv[++*i];
}

struct parsed {
	struct ctl_ctx cx;
	bool help, version, verbose;
	unsigned opts_seen;         /* OPT_JSON, OPT_STATE_DIR given */
	int nargs;
	char **args;                /* operands, the command words included */
};

/* Global options may come before or after the command; "--" ends them. */
static int parse(int argc, char **argv, struct parsed *p)
{
	bool operands_only = false;
	p->args = xcalloc((size_t)argc + 1, sizeof(*p->args));
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v;
		bool missing = false;
		if (operands_only || a[0] != '-' || strcmp(a, "-") == 0) {
			p->args[p->nargs++] = argv[i];
			continue;
		}
		if (strcmp(a, "--") == 0) {
			operands_only = true;
		} else if ((v = option_value(argc, argv, &i, "--plane", &missing))) {
			if (missing)
				return usage_error(NULL, "option '--plane' needs a URL");
			p->cx.plane = v;
		} else if ((v = option_value(argc, argv, &i, "--token-file", &missing))) {
			if (missing)
				return usage_error(NULL, "option '--token-file' needs a file");
			p->cx.token_file = v;
		} else if ((v = option_value(argc, argv, &i, "--ca-file", &missing))) {
			if (missing)
				return usage_error(NULL, "option '--ca-file' needs a file");
			p->cx.ca_file = v;
		} else if ((v = option_value(argc, argv, &i, "--cert", &missing))) {
			if (missing)
				return usage_error(NULL, "option '--cert' needs a file");
			p->cx.cert = v;
		} else if ((v = option_value(argc, argv, &i, "--key", &missing))) {
			if (missing)
				return usage_error(NULL, "option '--key' needs a file");
			p->cx.key = v;
		} else if ((v = option_value(argc, argv, &i, "--node", &missing))) {
			if (missing)
				return usage_error(NULL, "option '--node' needs a node id");
			p->cx.node = v;
			p->opts_seen |= OPT_NODE;
		} else if ((v = option_value(argc, argv, &i, "--role", &missing))) {
			if (missing)
				return usage_error(NULL, "option '--role' needs admin, operator or reader");
			p->cx.role = v;
			p->opts_seen |= OPT_ROLE;
		} else if ((v = option_value(argc, argv, &i, "--name", &missing))) {
			if (missing)
				return usage_error(NULL, "option '--name' needs a text");
			p->cx.name = v;
			p->opts_seen |= OPT_NAME;
		} else if ((v = option_value(argc, argv, &i, "--message", &missing))) {
			if (missing && strncmp(a, "--message=", 10) != 0)
				return usage_error(NULL, "option '--message' needs a text");
			for (const char *m = v; *m; m++)
				if ((unsigned char)*m < 0x20 || *m == 0x7f)
					return usage_error(NULL, "option '--message': no control characters (one line)");
			if (strlen(v) > 1024)
				return usage_error(NULL, "option '--message': at most 1024 bytes");
			p->cx.message = v;
			p->opts_seen |= OPT_MESSAGE;
		} else if ((v = option_value(argc, argv, &i, "--override", &missing))) {
			if (missing || !*v)
				return usage_error(NULL, "option '--override' needs a reason");
			for (const char *m = v; *m; m++)
				if ((unsigned char)*m < 0x20 || *m == 0x7f)
					return usage_error(NULL, "option '--override': no control characters (one line)");
			if (strlen(v) > 1024)
				return usage_error(NULL, "option '--override': at most 1024 bytes");
			p->cx.override = v;
			p->opts_seen |= OPT_OVERRIDE;
		} else if ((v = option_value(argc, argv, &i, "--until", &missing))) {
			if (missing)
				return usage_error(NULL, "option '--until' needs a TIME (2026-12-06T18:00:00Z, or 90m, 2h, 1d)");
			p->cx.until = v;
			p->opts_seen |= OPT_UNTIL;
		} else if ((v = option_value(argc, argv, &i, "--ttl", &missing))) {
			if (missing)
				return usage_error(NULL, "option '--ttl' needs a DURATION (15m, 2h, 1d, or seconds)");
			p->cx.ttl = v;
			p->opts_seen |= OPT_TTL;
		} else if ((v = option_value(argc, argv, &i, "-n", &missing))) {
			if (missing)
				return usage_error(NULL, "option '-n' needs a number");
			p->cx.limit = v;
			p->opts_seen |= OPT_LIMIT;
		} else if ((v = option_value(argc, argv, &i, "--at", &missing))) {
			if (missing)
				return usage_error(NULL, "option '--at' needs a version");
			p->cx.at = v;
			p->opts_seen |= OPT_AT;
		} else if ((v = option_value(argc, argv, &i, "--recovery-key", &missing))) {
			if (missing)
				return usage_error(NULL, "option '--recovery-key' needs a file");
			p->cx.recovery_key = v;
			p->opts_seen |= OPT_RECOVERY_KEY;
		} else if ((v = option_value(argc, argv, &i, "--output", &missing))) {
			if (missing)
				return usage_error(NULL, "option '--output' needs a file");
			p->cx.output = v;
			p->opts_seen |= OPT_OUTPUT;
		} else if ((v = option_value(argc, argv, &i, "--state-dir", &missing))) {
			if (missing)
				return usage_error(NULL, "option '--state-dir' needs a directory");
			p->cx.state_dir = v;
			p->opts_seen |= OPT_STATE_DIR;
		} else if ((v = option_value(argc, argv, &i, "--base", &missing))) {
			if (missing)
				return usage_error(NULL, "option '--base' needs a version");
			uint64_t b;
			if (parse_u64(v, &b) < 0)
				return usage_error(NULL, "option '--base': '%s' is not a version", v);
			p->cx.base = v;
			p->opts_seen |= OPT_BASE;
		} else if (strcmp(a, "--prune") == 0) {
			p->cx.prune = true;
			p->opts_seen |= OPT_PRUNE;
		} else if (strcmp(a, "--dry-run") == 0) {
			p->cx.dry_run = true;
			p->opts_seen |= OPT_DRY_RUN;
		} else if (strcmp(a, "--seal") == 0) {
			p->cx.seal = true;
			p->opts_seen |= OPT_SEAL;
		} else if (strcmp(a, "--approver") == 0) {
			p->cx.approver = true;
			p->opts_seen |= OPT_APPROVER;
		} else if (strcmp(a, "--recovery") == 0) {
			p->cx.recovery = true;
			p->opts_seen |= OPT_RECOVERY;
		} else if (strcmp(a, "--now") == 0) {
			p->cx.now = true;
			p->opts_seen |= OPT_NOW;
		} else if (strcmp(a, "--open") == 0) {
			p->cx.open = true;
			p->opts_seen |= OPT_OPEN;
		} else if (strcmp(a, "--off") == 0) {
			p->cx.off = true;
			p->opts_seen |= OPT_OFF;
		} else if (strcmp(a, "--force") == 0) {
			p->cx.force = true;
			p->opts_seen |= OPT_FORCE;
		} else if (strcmp(a, "--man") == 0) {
			p->cx.man = true;
			p->opts_seen |= OPT_MAN;
		} else if (strcmp(a, "--json") == 0) {
			p->cx.json = true;
			p->opts_seen |= OPT_JSON;
		} else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			p->help = true;
		} else if (strcmp(a, "-V") == 0 || strcmp(a, "--version") == 0) {
			p->version = true;
		} else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
			p->verbose = true;
		} else {
			return usage_error(NULL, "unknown option '%s'", a);
		}
	}
	return CTL_EXIT_OK;
}

static int run(int argc, char **argv)
{
	struct parsed p;
	memset(&p, 0, sizeof(p));
	int rc = parse(argc, argv, &p);
	if (rc != CTL_EXIT_OK)
		goto out;

	if (p.version) {
		printf("tetherctl %s\n", PACKAGE_VERSION);
		goto out;
	}
	bool help_cmd = p.nargs > 0 && strcmp(p.args[0], "help") == 0;
	if (help_cmd && p.nargs > 1)
		p.help = true;
	if ((p.help || help_cmd) && p.nargs <= (help_cmd ? 1 : 0)) {
		help(stdout);
		goto out;
	}
	if (p.nargs == 0) {
		rc = usage_error(NULL, "no command given");
		goto out;
	}

	/* "help put" and "put --help" both show the command's usage */
	char **words = p.args + (help_cmd ? 1 : 0);
	int nwords = p.nargs - (help_cmd ? 1 : 0);
	bool name_known;
	const struct command *c = find_command(words[0], nwords > 1 ? words[1] : NULL, &name_known);
	if (!c && name_known && nwords == 1 && p.help) {
		for (size_t i = 0; i < NCOMMANDS; i++)
			if (strcmp(commands[i].name, words[0]) == 0)
				command_usage(stdout, &commands[i]);
		goto out;
	}
	if (!c) {
		if (name_known && nwords > 1)
			rc = usage_error(NULL, "unknown command '%s %s' (see 'tetherctl --help')", words[0],
					 words[1]);
		else if (name_known && strcmp(words[0], "token") == 0)
			rc = usage_error(NULL, "'token' needs a command: create, ls or revoke");
		else if (name_known && strcmp(words[0], "secrets") == 0)
			rc = usage_error(NULL, "'secrets' needs a command: status, reseal, revoke or approve");
		else if (name_known)
			rc = usage_error(NULL, "'%s' needs a command: status or abort", words[0]);
		else
			rc = usage_error(NULL, "unknown command '%s'", words[0]);
		goto out;
	}
	if (p.help) {
		command_usage(stdout, c);
		printf("%s\n", c->help);
		goto out;
	}
	char **args = words + (c->sub ? 2 : 1);
	int nargs = nwords - (c->sub ? 2 : 1);
	char cname[64];
	snprintf(cname, sizeof(cname), "%s%s%s", c->name, c->sub ? " " : "", c->sub ? c->sub : "");
	if (p.opts_seen & ~c->opts) {
		unsigned bad = p.opts_seen & ~c->opts;
		size_t bit = 0;
		while (!(bad & (1u << bit)))
			bit++;
		rc = usage_error(c, "%s: unknown option '%s'", cname, opt_names[bit]);
		goto out;
	}
	if (nargs < c->min_args) {
		rc = usage_error(c, "%s: missing %.*s", cname, (int)strcspn(c->args, " "), c->args);
		goto out;
	}
	if (nargs > c->max_args) {
		rc = usage_error(c, "%s: unexpected argument '%s'", cname, args[c->max_args]);
		goto out;
	}
	if (c->min_args > 0 && !*args[0]) {
		rc = usage_error(c, "%s: empty argument", cname);
		goto out;
	}

	if (c->run == cmd_approve) {
		/* approve --key FILE names the approver's key; a client
		 * certificate's key then comes from $TETHER_KEY */
		p.cx.approver_key = p.cx.key;
		p.cx.key = NULL;
	} else if (p.cx.recovery && p.cx.approver) {
		rc = usage_error(c, "%s: --recovery and --approver are two kinds of key: give one", cname);
		goto out;
	}
	const char *plane_from = "--plane";
	if (!p.cx.plane) {
		const char *env = getenv("TETHER_PLANE");
		p.cx.plane = env && *env ? env : CTL_DEFAULT_PLANE;
		plane_from = "TETHER_PLANE";
	}
	const struct {
		const char **field, *env;
	} envs[] = {
		{ &p.cx.token_file, "TETHER_TOKEN_FILE" }, { &p.cx.ca_file, "TETHER_CA_FILE" },
		{ &p.cx.cert, "TETHER_CERT" }, { &p.cx.key, "TETHER_KEY" },
	};
	for (size_t k = 0; k < sizeof(envs) / sizeof(envs[0]); k++) {
		const char *env = getenv(envs[k].env);
		if (!*envs[k].field && env && *env)
			*envs[k].field = env;
	}
	if (!c->local) {
		/* a bad list is a usage error, found before anything is sent */
		char perr[512], *urls[CLIENT_MAX_PLANES];
		int n = client_planes(p.cx.plane, urls, perr, sizeof(perr));
		if (n < 0) {
			rc = usage_error(NULL, "%s: %s", plane_from, perr);
			goto out;
		}
		client_planes_free(urls, n);
	}
	log_init("tetherctl", p.verbose ? LOG_LVL_DEBUG : LOG_LVL_WARN);
	if (!c->local && client_global_init() < 0) {
		ctl_error("cannot initialise libcurl");
		rc = CTL_EXIT_FAILED;
		goto out;
	}
	rc = c->run(&p.cx, nargs, args);
	if (!c->local)
		client_global_cleanup();
out:
	free(p.args);
	return rc;
}

int ctl_main(int argc, char **argv)
{
	int rc = run(argc, argv);
	/* output that could not be written is a failure, not a success */
	if (fflush(stdout) != 0 || ferror(stdout)) {
		ctl_error("cannot write the output");
		if (rc == CTL_EXIT_OK)
			rc = CTL_EXIT_FAILED;
	}
	return rc;
}
