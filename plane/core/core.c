/* core/core.c: what the core's parts share: the boot id and push nonces,
 * and the hooks through which it asks the wings above it (see core.h). */
#include "core/core.h"
#include "core/hub.h"
#include "core/nodes.h"
#include "persist/persist.h"
#include "util.h"

#include <stdio.h>
#include <string.h>
#include <sys/random.h>

void core_init(struct core *c)
{
	unsigned char rnd[4] = { 0 };
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		uint64_t t = (uint64_t)wall_ms();
		memcpy(rnd, &t, sizeof(rnd));
	}
	snprintf(c->boot_id, sizeof(c->boot_id), "%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3]);
	atomic_init(&c->nonce_seq, 0);
	atomic_init(&c->stopping, false);
	c->started_ms = now_ms();
}

void core_nonce(struct core *c, char *out, size_t cap)
{
	uint64_t seq = atomic_fetch_add(&c->nonce_seq, 1) + 1;
	snprintf(out, cap, "%s.%llx", c->boot_id, (unsigned long long)seq);
}

uint64_t core_target(struct core *c, const char *node)
{
	uint64_t t = c->hooks.target ? c->hooks.target(c->hooks.ctx, node) : UINT64_MAX;
	uint64_t newest = hub_version(c->hub);
	return t > newest ? newest : t;
}

void core_sent(struct core *c, const char *node, uint64_t version, const char *nonce, bool has_content)
{
	nodes_sent(c->nodes, node, version, nonce);
	if (c->hooks.sent)
		c->hooks.sent(c->hooks.ctx, node, version, has_content);
}

void core_step(struct core *c)
{
	if (c->hooks.step)
		c->hooks.step(c->hooks.ctx);
}

bool core_wants_reports(struct core *c)
{
	return c->hooks.wants_reports && c->hooks.wants_reports(c->hooks.ctx);
}

uint64_t core_rollout_gen(struct core *c)
{
	return c->hooks.rollout_gen ? c->hooks.rollout_gen(c->hooks.ctx) : 0;
}

void core_rollout_json(struct core *c, uint64_t v, struct buf *out)
{
	if (c->hooks.rollout_json)
		c->hooks.rollout_json(c->hooks.ctx, v, out);
}

uint64_t core_released(struct core *c, uint64_t v)
{
	return c->hooks.released ? c->hooks.released(c->hooks.ctx, v) : v;
}

bool core_is_relay(struct core *c)
{
	return c->persist->ops->upstream != NULL;
}

void core_upstream(struct core *c, char *up, size_t cap)
{
	if (cap)
		up[0] = '\0';
	if (c->persist->ops->upstream)
		c->persist->ops->upstream(c->persist, up, cap, NULL);
}
