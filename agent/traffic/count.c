/* traffic/count.c: the live generation's counters from access log lines
 * (see traffic/count.h). */
#include "traffic/count.h"
#include "traffic/syslog.h"

#include <stdio.h>
#include <string.h>

void traffic_count_init(struct traffic_count *c)
{
	memset(c, 0, sizeof(*c));
	traffic_init(&c->t);
}

void traffic_count_release(struct traffic_count *c)
{
	traffic_release(&c->t);
	memset(c, 0, sizeof(*c));
}

bool traffic_count_live(struct traffic_count *c, const char *gen, uint64_t version, double now)
{
	if (!gen)
		gen = "";
	size_t len = strlen(gen);
	if (len >= TRAFFIC_GEN_LEN)
		len = TRAFFIC_GEN_LEN - 1;
	c->t.version = version;
	if (len == c->gen_len && memcmp(c->t.gen, gen, len) == 0)
		return false;
	traffic_clear(&c->t);
	memset(c->slot, 0, sizeof(c->slot));
	memcpy(c->t.gen, gen, len);
	c->t.gen[len] = '\0';
	c->gen_len = len;
	c->t.since = c->t.until = now;
	return true;
}

void traffic_count_restart(struct traffic_count *c, double now)
{
	traffic_clear(&c->t);   /* the generation and its version stay */
	memset(c->slot, 0, sizeof(c->slot));
	c->t.since = c->t.until = now;
}

/* The route called name (len bytes), added when new: through the index,
 * then traffic_route (which validates and appends); NULL when full. */
static struct traffic_route *route_of(struct traffic_count *c, const char *name, size_t len)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)name[i]) * 16777619u;
	for (size_t k = 0; k < TRAFFIC_COUNT_SLOTS; k++) {
		uint8_t *s = &c->slot[(h + k) & (TRAFFIC_COUNT_SLOTS - 1)];
		if (*s == 0) {
			size_t n = c->t.n;
			struct traffic_route *r = traffic_route(&c->t, name, len);
			if (r && c->t.n == n + 1)
				*s = (uint8_t)c->t.n;
			return r;
		}
		struct traffic_route *r = &c->t.routes[*s - 1];
		if (memcmp(r->name, name, len) == 0 && r->name[len] == '\0')
			return r;
	}
	return NULL;
}

static void drop(struct traffic_count *c, enum traffic_drop why)
{
	c->dropped[why]++;
	c->t.dropped++;
}

void traffic_count_datagram(struct traffic_count *c, const char *data, size_t len)
{
	if (len > TRAFFIC_SYSLOG_MAX) {
		drop(c, TD_TOO_LONG);
		return;
	}
	struct tsl_line l;
	if (tsl_parse(data, len, &l) < 0) {
		drop(c, TD_MALFORMED);
		return;
	}
	if (!c->gen_len || l.gen_len != c->gen_len || memcmp(l.gen, c->t.gen, l.gen_len) != 0) {
		c->other_gen++;
		return;
	}
	struct traffic_route *r = route_of(c, l.route, l.route_len);
	if (!r) {
		drop(c, TD_FULL);
		return;
	}
	traffic_observe(r, l.status, l.ms);
}

const char *traffic_drop_name(enum traffic_drop d)
{
	static const char *const names[TD_N] = { "malformed", "too_long", "full" };
	return (unsigned)d < TD_N ? names[d] : "?";
}
