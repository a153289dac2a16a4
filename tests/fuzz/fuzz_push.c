/* fuzz_push.c: libFuzzer target for agent/state/push.c and the candidate it
 * builds. The input is a push message; it is decoded with bounds and, when
 * it decodes, built into a candidate against a small fixed state (strict
 * and not). Properties: a refusal always says why; a built candidate only
 * holds valid names; committing it and rebuilding the same push against the
 * new state gives no change at all (identical bodies are not changes). */
#include "fuzz.h"
#include "state/push.h"
#include "resource.h"
#include "state/state.h"

#include <stdlib.h>
#include <string.h>

static void seed_state(struct state *s)
{
	static const char *const seed =
		"{\"nonce\":\"n\",\"version\":1,\"base\":0,\"full\":true,\"upserts\":["
		"{\"name\":\"cluster/c\",\"version\":1,\"body\":{\"endpoints\":[{\"address\":\"127.0.0.1\",\"port\":80}]}},"
		"{\"name\":\"listener/l\",\"version\":1,\"body\":{\"port\":8080}},"
		"{\"name\":\"route/r\",\"version\":1,\"body\":{\"listener\":\"l\",\"cluster\":\"c\"}},"
		"{\"name\":\"file/f\",\"version\":1,\"body\":{\"path\":\"a/b\",\"content\":\"x\"}}],\"removed\":[]}";
	struct push p;
	struct candidate c;
	char err[512];
	state_init(s);
	if (push_decode(seed, strlen(seed), NULL, &p, err, sizeof(err)) < 0 ||
	    candidate_build(s, &p, 0, &c, err, sizeof(err)) < 0)
		abort();
	state_commit(s, &c);
	push_release(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct json_limits lim = { 1 << 20, 32 };
	struct push p;
	char err[1024] = "";
	if (push_decode((const char *)data, size, &lim, &p, err, sizeof(err)) < 0) {
		if (!err[0])
			abort();
		return 0;
	}
	for (unsigned strict = 0; strict < 2; strict++) {
		struct state s;
		struct candidate c;
		seed_state(&s);
		err[0] = '\0';
		if (p.version >= s.version && (p.full || p.base == s.version) &&
		    candidate_build(&s, &p, strict ? STATE_STRICT : 0, &c, err, sizeof(err)) == 0) {
			for (size_t i = 0; i < c.n; i++) {
				const char *nm = c.items[i].new_res ? c.items[i].new_res->name : c.items[i].old->name;
				if (resource_fullname_check(nm, err, sizeof(err)) < 0)
					abort();
			}
			state_commit(&s, &c);
			/* the same push again changes nothing (a delta's base moved) */
			p.base = s.version;
			struct candidate again;
			if (candidate_build(&s, &p, strict ? STATE_STRICT : 0, &again, err, sizeof(err)) == 0) {
				if (again.n != 0)
					abort();
				candidate_release(&again);
			}
		} else if (!err[0] && p.version >= s.version && (p.full || p.base == s.version)) {
			abort();   /* refused without a reason */
		}
		state_release(&s);
	}
	push_release(&p);
	return 0;
}
