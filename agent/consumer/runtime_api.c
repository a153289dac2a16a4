/* consumer/runtime_api.c: makes the running haproxy hold a plan over its
 * runtime API (see consumer/runtime.h): per cluster, `show servers state`
 * (the slots the running configuration has, and what they hold), the
 * `set server` commands that make them hold the plan, then every cluster
 * read back and compared with what the file says. One command per
 * connection (common/haproxy_cli.c), all of it under one deadline. A
 * command is taken when haproxy answers nothing, or says it changed the
 * address or had no need to; anything else is its refusal, quoted. What
 * was changed before a failure stays: the caller reloads (onto the new
 * file, or the old one), which replaces every server's runtime state. */
#include "consumer/runtime.h"
#include "haproxy_cli.h"
#include "log.h"

#include <stdio.h>
#include <string.h>

/* Reads backend's servers into out. 0, or -1 with err. */
static int read_servers(const char *sock, const char *backend, double deadline, struct rt_servers *out, char *err,
			size_t errlen)
{
	struct buf cmd = BUF_INIT, ans = BUF_INIT;
	char inner[512];
	int rc = -1;
	buf_printf(&cmd, "show servers state %s\n", backend);
	memset(out, 0, sizeof(*out));
	if (haproxy_cli_ask(sock, cmd.data, deadline, RT_ANSWER_MAX, &ans, err, errlen) < 0)
		goto out;
	if (runtime_servers_parse(ans.data ? ans.data : "", ans.len, backend, out, inner, sizeof(inner)) < 0) {
		snprintf(err, errlen, "%s: show servers state %s: %s", sock, backend, inner);
		goto out;
	}
	rc = 0;
out:
	buf_release(&cmd);
	buf_release(&ans);
	return rc;
}

/* haproxy took the command (its answer ans, len bytes). */
static bool taken(const char *ans, size_t len)
{
	while (len && (ans[0] == ' ' || ans[0] == '\n' || ans[0] == '\r')) {
		ans++;
		len--;
	}
	return len == 0 || (len >= 10 && strncmp(ans, "IP changed", 10) == 0) ||
	       (len >= 17 && strncmp(ans, "no need to change", 17) == 0);
}

/* Sends one command (a line of cmds). 0, or -1 with err quoting haproxy's
 * refusal. */
static int send_one(const char *sock, const char *cmd, size_t cl, double deadline, char *err, size_t errlen)
{
	char line[600];
	struct buf ans = BUF_INIT;
	snprintf(line, sizeof(line), "%.*s\n", (int)(cl < sizeof(line) - 2 ? cl : sizeof(line) - 2), cmd);
	int rc = haproxy_cli_ask(sock, line, deadline, 4096, &ans, err, errlen);
	if (rc == 0 && !taken(ans.data ? ans.data : "", ans.len)) {
		char said[300];
		size_t o = 0;
		for (size_t i = 0; i < ans.len && o + 1 < sizeof(said); i++)
			said[o++] = ans.data[i] >= 0x20 && ans.data[i] < 0x7f ? ans.data[i] : ' ';
		while (o && said[o - 1] == ' ')
			o--;
		said[o] = '\0';
		snprintf(err, errlen, "haproxy refused '%.*s': %s", (int)cl, cmd, said);
		rc = -1;
	}
	buf_release(&ans);
	return rc;
}

static void fault(const struct runtime_options *o, const char *point)
{
	if (o->fault)
		o->fault(point);
}

enum runtime_result runtime_apply(const struct runtime_options *o, const struct rt_plan *p, size_t *sent, char *err,
				  size_t errlen)
{
	double deadline = haproxy_cli_now() + o->timeout_s;
	enum runtime_result res = RUNTIME_FAILED;
	struct rt_servers have = { 0 };
	struct buf cmds = BUF_INIT;
	*sent = 0;
	/* the slots first, every cluster's, before anything changes: an
	 * exhausted one means a reload, with nothing changed at runtime */
	for (size_t i = 0; i < p->n; i++) {
		const struct rt_cluster *c = &p->clusters[i];
		if (read_servers(o->socket, c->backend, deadline, &have, err, errlen) < 0)
			goto out;
		size_t slots = runtime_slots(&have);
		if (c->nwant > slots) {
			snprintf(err, errlen, "%s: %zu endpoints, and haproxy's running configuration has %zu slots in %s",
				 c->name, c->nwant, slots, c->backend);
			res = RUNTIME_EXHAUSTED;
			goto out;
		}
		runtime_commands(c, &have, &cmds);
		runtime_servers_release(&have);
	}
	for (size_t off = 0; off < cmds.len;) {
		const char *cmd = cmds.data + off;
		const char *nl = memchr(cmd, '\n', cmds.len - off);
		size_t cl = (size_t)(nl - cmd);
		off += cl + 1;
		if (send_one(o->socket, cmd, cl, deadline, err, errlen) < 0)
			goto out;
		(*sent)++;
		log_debug("runtime: %.*s", (int)cl, cmd);
		fault(o, "runtime-command");
	}
	fault(o, "runtime-sent");
	/* read back: every slot of every cluster is what the file says */
	res = RUNTIME_DIFFERS;
	for (size_t i = 0; i < p->n; i++) {
		const struct rt_cluster *c = &p->clusters[i];
		if (read_servers(o->socket, c->backend, deadline, &have, err, errlen) < 0) {
			res = RUNTIME_FAILED;
			goto out;
		}
		if (runtime_compare(c, &have, err, errlen) < 0)
			goto out;
		runtime_servers_release(&have);
	}
	res = RUNTIME_APPLIED;
out:
	runtime_servers_release(&have);
	buf_release(&cmds);
	return res;
}
