/* fuzz_runtime_state.c: libFuzzer target for the parser of haproxy's
 * `show servers state` answer (agent/consumer/runtime_state.c), which
 * tetherd --runtime-api reads before and after its `set server` commands.
 * The socket's other end may be anything; the parser must refuse with a
 * message or give servers that hold together, never crash.
 *
 * Checks on what runtime_servers_parse accepts (backend tether_c_web): at
 * most RT_SERVERS_MAX servers; every string printable, without a blank,
 * within its field; no name twice; ports, weights and admin states in
 * range; each slot's index names the server of that slot, and only slots
 * are indexed; runtime_slots counts consecutive slots from e0. Parsing
 * again gives the same servers. Then the comparison and the commands on
 * them: whatever the comparison, it does not crash; when it finds the
 * servers hold what a cluster wants, the commands for that cluster (its
 * state unchanged) are none; the commands are `set server` lines of the
 * backend, printable, as many as counted. On a refusal, the message is printable and
 * nothing is left. */
#include "consumer/runtime.h"
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

static void printable(const char *s, size_t cap, bool blank_ok)
{
	size_t n = strnlen(s, cap);
	if (n == cap)
		abort();
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f || (!blank_ok && s[i] == ' '))
			abort();
}

static void check_servers(const struct rt_servers *s)
{
	if (s->n > RT_SERVERS_MAX)
		abort();
	size_t indexed = 0;
	for (size_t k = 0; k < s->n; k++) {
		const struct rt_server *v = &s->v[k];
		printable(v->name, sizeof(v->name), false);
		printable(v->addr, sizeof(v->addr), false);
		printable(v->fqdn, sizeof(v->fqdn), false);
		if (!v->name[0] || !v->addr[0] || v->port > 65535 || v->uweight > 256 || v->admin > 255)
			abort();
		for (size_t j = 0; j < k && s->n < 2000; j++)
			if (strcmp(s->v[j].name, v->name) == 0)
				abort();
		if (v->slot >= 0) {
			indexed++;
			if (runtime_slot(s, (size_t)v->slot) != v || v->name[0] != 'e')
				abort();
		}
	}
	size_t in_index = 0;
	for (size_t i = 0; i < s->nindex; i++)
		in_index += s->index[i] != 0;
	if (in_index != indexed)
		abort();
	size_t slots = runtime_slots(s);
	if (slots > s->n || (slots < s->nindex && runtime_slot(s, slots)))
		abort();
}

static void check_err(const char *err)
{
	if (!err[0])
		abort();
	printable(err, 512, true);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	char err[512] = "";
	struct rt_servers s, again;
	if (runtime_servers_parse(text, size, "tether_c_web", &s, err, sizeof(err)) < 0) {
		check_err(err);
		if (s.n || s.v || s.index)
			abort();
		return 0;
	}
	check_servers(&s);
	char err2[512];
	if (runtime_servers_parse(text, size, "tether_c_web", &again, err2, sizeof(err2)) != 0 || again.n != s.n ||
	    (s.n && memcmp(again.v, s.v, s.n * sizeof(*s.v)) != 0))
		abort();
	runtime_servers_release(&again);

	/* a cluster wanting what e0 and e1 hold (when they are slots), and
	 * one wanting a fixed endpoint */
	struct rt_endpoint want[2];
	size_t nwant = 0;
	for (size_t i = 0; i < 2; i++) {
		const struct rt_server *v = runtime_slot(&s, i);
		if (!v)
			break;
		memset(&want[nwant], 0, sizeof(want[nwant]));
		memcpy(want[nwant].addr, v->fqdn[0] ? v->fqdn : v->addr, strlen(v->fqdn[0] ? v->fqdn : v->addr) + 1);
		want[nwant].port = v->port;
		want[nwant].weight = v->uweight;
		nwant++;
	}
	struct rt_endpoint fixed = { .addr = "10.0.0.1", .port = 80, .weight = 1 };
	struct rt_cluster cs[2] = {
		{ .name = (char *)"cluster/web", .backend = (char *)"tether_c_web", .old = want, .nold = nwant,
		  .want = want, .nwant = nwant },
		{ .name = (char *)"cluster/web", .backend = (char *)"tether_c_web", .old = &fixed, .nold = 1,
		  .want = &fixed, .nwant = 1 },
	};
	for (size_t i = 0; i < 2; i++) {
		struct buf cmds = BUF_INIT;
		err[0] = '\0';
		int same = runtime_compare(&cs[i], &s, err, sizeof(err));
		if (same < 0)
			check_err(err);
		size_t n = cs[i].nwant <= runtime_slots(&s) ? runtime_commands(&cs[i], &s, &cmds) : 0;
		if (same == 0 && n != 0)
			abort();
		/* n lines, each a `set server` of this backend, printable */
		size_t lines = 0;
		for (size_t off = 0; off < cmds.len; lines++) {
			const char *line = cmds.data + off, *nl = memchr(line, '\n', cmds.len - off);
			if (!nl || strncmp(line, "set server tether_c_web/e", 25) != 0)
				abort();
			for (const char *p = line; p < nl; p++)
				if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
					abort();
			off += (size_t)(nl - line) + 1;
		}
		if (lines != n)
			abort();
		buf_release(&cmds);
	}
	runtime_servers_release(&s);
	return 0;
}
