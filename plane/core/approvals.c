/* core/approvals.c: the plane's approvals: tokens kept, nodes that require
 * them, the hold (see approvals.h). Returned buffers are the caller's. */
#include "core/approvals.h"
#include "approval.h"
#include "core/store.h"
#include "log.h"
#include "strmap.h"
#include "util.h"
#include "xmalloc.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct entry {
	uint64_t version;
	char *sub, *kid, *token;
};

struct anode {
	char *name, *sub;
	unsigned k;
	uint64_t held;
	int64_t seen_ms;   /* it connected, polled, got a push or a heartbeat */
};

struct approvals {
	struct persist *persist;
	uint64_t trimmed;        /* approvals below this version are gone */
	atomic_uint_fast64_t gen;   /* moves when the set changes (relay streams) */
	/* what approvals_keep last told the store (its callers take turns:
	 * the keeper, a POST's keep, a connection) */
	pthread_mutex_t keep_lock;
	bool kept_on;
	uint64_t kept_floor;
	pthread_mutex_t lock;
	struct entry *e;
	size_t n, cap;
	struct anode *nodes;
	size_t nnodes, capnodes;
	int64_t relay_seen_ms;   /* a relay's stream was last sent to (0: never) */
	struct strmap by_node;   /* name -> index + 1 in nodes */
};

struct approvals *approvals_new(struct persist *p)
{
	struct approvals *a = xcalloc(1, sizeof(*a));
	a->persist = p;
	pthread_mutex_init(&a->lock, NULL);
	pthread_mutex_init(&a->keep_lock, NULL);
	strmap_init(&a->by_node);
	return a;
}

void approvals_free(struct approvals *a)
{
	if (!a)
		return;
	for (size_t i = 0; i < a->n; i++) {
		free(a->e[i].sub);
		free(a->e[i].kid);
		free(a->e[i].token);
	}
	free(a->e);
	for (size_t i = 0; i < a->nnodes; i++) {
		free(a->nodes[i].name);
		free(a->nodes[i].sub);
	}
	free(a->nodes);
	strmap_release(&a->by_node);
	pthread_mutex_destroy(&a->lock);
	pthread_mutex_destroy(&a->keep_lock);
	free(a);
}

/* Call with the lock held. Entries stay sorted by version (a version's
 * entries side by side): the hold reads them newest first. 1 new, 0
 * replaced. */
static int put(struct approvals *a, uint64_t version, const char *sub, const char *kid, const char *token)
{
	size_t at = a->n;
	while (at > 0 && a->e[at - 1].version > version)
		at--;
	for (size_t i = at; i > 0 && a->e[i - 1].version == version; i--) {
		struct entry *e = &a->e[i - 1];
		if (strcmp(e->sub, sub) == 0 && strcmp(e->kid, kid) == 0) {
			if (strcmp(e->token, token) != 0)
				atomic_fetch_add(&a->gen, 1);
			free(e->token);
			e->token = xstrdup(token);
			return 0;
		}
	}
	if (a->n == a->cap) {
		a->cap = a->cap ? a->cap * 2 : 16;
		a->e = xrealloc(a->e, a->cap * sizeof(*a->e));
	}
	memmove(&a->e[at + 1], &a->e[at], (a->n - at) * sizeof(*a->e));
	a->e[at] = (struct entry){ version, xstrdup(sub), xstrdup(kid), xstrdup(token) };
	a->n++;
	atomic_fetch_add(&a->gen, 1);
	return 1;
}

/* The first entry of version (or where it would go): sorted by version,
 * a binary search. Lock held. */
static size_t first_of(const struct approvals *a, uint64_t version)
{
	size_t lo = 0, hi = a->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (a->e[mid].version < version)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Whether (version, sub, kid) is kept: O(log n + that version's). Lock
 * held. */
static bool has(const struct approvals *a, uint64_t version, const char *sub, const char *kid)
{
	for (size_t i = first_of(a, version); i < a->n && a->e[i].version == version; i++)
		if (strcmp(a->e[i].sub, sub) == 0 && strcmp(a->e[i].kid, kid) == 0)
			return true;
	return false;
}

struct loaded {
	struct entry *e;
	size_t n, cap;
};

static int load_cb(void *ctx, const struct persist_approval *pa)
{
	struct loaded *l = ctx;
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 16;
		l->e = xrealloc(l->e, l->cap * sizeof(*l->e));
	}
	l->e[l->n++] = (struct entry){ pa->version, xstrdup(pa->sub), xstrdup(pa->kid), xstrdup(pa->token) };
	return 0;
}

int approvals_load(struct approvals *a, char *err, size_t errlen)
{
	if (!a->persist->ops->approvals_load)
		return 0;
	/* read without the lock (a leaf: targets are asked meanwhile), then
	 * merged */
	struct loaded l = { 0 };
	int rc = a->persist->ops->approvals_load(a->persist, load_cb, &l, err, errlen);
	int added = 0;
	pthread_mutex_lock(&a->lock);
	for (size_t i = 0; i < l.n; i++) {
		/* every second with replicas: a search, not a scan per entry */
		bool had = has(a, l.e[i].version, l.e[i].sub, l.e[i].kid);
		if (rc == 0 && !had && l.e[i].version >= a->trimmed)
			added += put(a, l.e[i].version, l.e[i].sub, l.e[i].kid, l.e[i].token);
		free(l.e[i].sub);
		free(l.e[i].kid);
		free(l.e[i].token);
	}
	pthread_mutex_unlock(&a->lock);
	free(l.e);
	return rc < 0 ? -1 : added;
}


static size_t count(const struct approvals *a, uint64_t version, const char *sub);

int approvals_add(struct approvals *a, uint64_t version, const char *sub, const char *kid, const char *token,
		  char *err, size_t errlen)
{
	struct persist_approval pa = { version, sub, kid, token };
	/* bounded: a push carries them all, and a node takes APPROVALS_MAX */
	pthread_mutex_lock(&a->lock);
	bool full = !has(a, version, sub, kid) &&
		    (count(a, version, sub) >= APPROVALS_MAX || a->n >= APPROVALS_KEPT_MAX);
	size_t kept = a->n;
	pthread_mutex_unlock(&a->lock);
	if (full) {
		if (kept >= APPROVALS_KEPT_MAX)
			snprintf(err, errlen, "the plane keeps at most %d approvals (%zu now): they go when the version "
				 "log drops their versions (--history-keep)", APPROVALS_KEPT_MAX, kept);
		else
			snprintf(err, errlen, "version %llu already has %d approvals for subscription '%.200s', the most "
				 "a push carries", (unsigned long long)version, APPROVALS_MAX, sub);
		return -2;
	}
	if (a->persist->ops->approval_add && a->persist->ops->approval_add(a->persist, &pa, err, errlen) < 0)
		return -1;
	pthread_mutex_lock(&a->lock);
	int rc = put(a, version, sub, kid, token);
	pthread_mutex_unlock(&a->lock);
	return rc;
}

int approvals_trim(struct approvals *a, uint64_t log_floor, char *err, size_t errlen)
{
	pthread_mutex_lock(&a->lock);
	uint64_t below = log_floor;
	/* the newest version kept for each subscription stays (sorted: newest
	 * first from the end, the first seen of a sub is its newest): O(n) */
	struct strmap seen;
	strmap_init(&seen);
	for (size_t i = a->n; i > 0; i--) {
		intptr_t *had = strmap_ref(&seen, a->e[i - 1].sub);
		if (*had)
			continue;
		*had = 1;
		if (a->e[i - 1].version < below)
			below = a->e[i - 1].version;
	}
	strmap_release(&seen);
	bool due = below > a->trimmed;
	pthread_mutex_unlock(&a->lock);
	if (!due)
		return 0;
	if (a->persist->ops->approvals_trim && a->persist->ops->approvals_trim(a->persist, below, err, errlen) < 0)
		return -1;
	int n = 0;
	pthread_mutex_lock(&a->lock);
	/* sorted: the ones below come first */
	while ((size_t)n < a->n && a->e[n].version < below) {
		free(a->e[n].sub);
		free(a->e[n].kid);
		free(a->e[n].token);
		n++;
	}
	if (n) {   /* none: a->e may be NULL, which memmove may not be given */
		memmove(&a->e[0], &a->e[n], (a->n - (size_t)n) * sizeof(*a->e));
		a->n -= (size_t)n;
		atomic_fetch_add(&a->gen, 1);
	}
	if (below > a->trimmed)
		a->trimmed = below;
	pthread_mutex_unlock(&a->lock);
	return n;
}

uint64_t approvals_gen(struct approvals *a)
{
	return atomic_load(&a->gen);
}

void approvals_all_json(struct approvals *a, struct buf *out)
{
	pthread_mutex_lock(&a->lock);
	buf_puts(out, "{\"approvals\":[");
	for (size_t i = 0; i < a->n; i++) {
		const struct entry *e = &a->e[i];
		buf_printf(out, "%s{\"version\":%llu,\"sub\":", i ? "," : "", (unsigned long long)e->version);
		buf_json_string(out, e->sub);
		buf_puts(out, ",\"kid\":");
		buf_json_string(out, e->kid);
		buf_puts(out, ",\"token\":");
		buf_json_string(out, e->token);
		buf_putc(out, '}');
	}
	buf_puts(out, "]}");
	pthread_mutex_unlock(&a->lock);
}

void approvals_replace(struct approvals *a, const struct persist_approval *list, size_t n)
{
	pthread_mutex_lock(&a->lock);
	for (size_t i = 0; i < a->n; i++) {
		free(a->e[i].sub);
		free(a->e[i].kid);
		free(a->e[i].token);
	}
	a->n = 0;
	for (size_t i = 0; i < n; i++)
		put(a, list[i].version, list[i].sub, list[i].kid, list[i].token);
	atomic_fetch_add(&a->gen, 1);
	pthread_mutex_unlock(&a->lock);
}

/* Distinct keys that approved (version, sub). Lock held. */
static size_t count(const struct approvals *a, uint64_t version, const char *sub)
{
	size_t c = 0;
	for (size_t i = first_of(a, version); i < a->n && a->e[i].version == version; i++)
		c += strcmp(a->e[i].sub, sub) == 0;   /* (version, sub, kid) is kept once */
	return c;
}

/* The newest version in [from, below) with at least k approvals for sub,
 * or 0. */
static uint64_t approved_in(const struct approvals *a, const char *sub, unsigned k, uint64_t from, uint64_t below)
{
	/* newest first, one version's entries at a time: O(entries) */
	for (size_t i = a->n; i > 0;) {
		uint64_t v = a->e[i - 1].version;
		size_t c = 0;
		for (; i > 0 && a->e[i - 1].version == v; i--)
			c += strcmp(a->e[i - 1].sub, sub) == 0;
		if (v < from)
			break;
		if (v < below && c >= k && c > 0)
			return v;
	}
	return 0;
}

static uint64_t newest_approved(const struct approvals *a, const char *sub, unsigned k, uint64_t from)
{
	return approved_in(a, sub, k, from, UINT64_MAX);
}

static struct anode *find_node(struct approvals *a, const char *node)
{
	intptr_t v = 0;
	return strmap_get(&a->by_node, node, &v) && v ? &a->nodes[v - 1] : NULL;
}

void approvals_node(struct approvals *a, const char *node, unsigned k, const char *sub, uint64_t held)
{
	pthread_mutex_lock(&a->lock);
	struct anode *n = find_node(a, node);
	if (!k) {
		if (n) {
			/* forget it: the last one moves into its place */
			size_t at = (size_t)(n - a->nodes);
			const char *key = strmap_del(&a->by_node, node);
			(void)key;
			free(n->name);
			free(n->sub);
			a->nodes[at] = a->nodes[--a->nnodes];
			if (at < a->nnodes)
				strmap_put(&a->by_node, a->nodes[at].name, (intptr_t)at + 1);
		}
		pthread_mutex_unlock(&a->lock);
		return;
	}
	if (!n) {
		if (a->nnodes == a->capnodes) {
			a->capnodes = a->capnodes ? a->capnodes * 2 : 8;
			a->nodes = xrealloc(a->nodes, a->capnodes * sizeof(*a->nodes));
			/* the names moved with their records: the map keys them again */
			for (size_t i = 0; i < a->nnodes; i++)
				strmap_put(&a->by_node, a->nodes[i].name, (intptr_t)i + 1);
		}
		n = &a->nodes[a->nnodes++];
		memset(n, 0, sizeof(*n));
		n->name = xstrdup(node);
		strmap_put(&a->by_node, n->name, (intptr_t)a->nnodes);
		log_info("approvals: node %s requires %u approvals", node, k);
	}
	n->k = k;
	free(n->sub);
	n->sub = xstrdup(sub ? sub : "");
	n->held = held;
	n->seen_ms = now_ms();
	pthread_mutex_unlock(&a->lock);
}

void approvals_sent(struct approvals *a, const char *node, uint64_t version)
{
	pthread_mutex_lock(&a->lock);
	struct anode *n = find_node(a, node);
	if (n && version > n->held)
		n->held = version;
	if (n)
		n->seen_ms = now_ms();
	pthread_mutex_unlock(&a->lock);
}

void approvals_relay_seen(struct approvals *a)
{
	pthread_mutex_lock(&a->lock);
	a->relay_seen_ms = now_ms();
	pthread_mutex_unlock(&a->lock);
}

void approvals_seen(struct approvals *a, const char *node)
{
	pthread_mutex_lock(&a->lock);
	struct anode *n = find_node(a, node);
	if (n)
		n->seen_ms = now_ms();
	pthread_mutex_unlock(&a->lock);
}

uint64_t approvals_target(struct approvals *a, const char *node, uint64_t target)
{
	pthread_mutex_lock(&a->lock);
	struct anode *n = find_node(a, node);
	if (n) {
		uint64_t ok = newest_approved(a, n->sub, n->k, n->held);
		if (!ok)
			ok = n->held;
		if (ok < target)
			target = ok;
		if (target < n->held)
			target = n->held;
	}
	pthread_mutex_unlock(&a->lock);
	return target;
}

bool approvals_floor(struct approvals *a, uint64_t *floor)
{
	return approvals_floor_at(a, now_ms(), floor);
}

bool approvals_floor_at(struct approvals *a, int64_t now, uint64_t *floor)
{
	pthread_mutex_lock(&a->lock);
	uint64_t f = UINT64_MAX;
	/* a node gone (not heard of for APPROVALS_NODE_GONE_MS) keeps no
	 * history: else one that left while held pins every state since */
	for (size_t i = 0; i < a->nnodes; i++)
		if (a->nodes[i].held < f && now - a->nodes[i].seen_ms <= APPROVALS_NODE_GONE_MS)
			f = a->nodes[i].held;
	/* and from the oldest approval kept, while a relay follows: its nodes
	 * (whom this plane does not see) may hold it, and their relay asks
	 * for its statement. Without relays, approvals alone (kept long after
	 * their nodes left) pin no history */
	bool relays = a->relay_seen_ms && now - a->relay_seen_ms <= APPROVALS_NODE_GONE_MS;
	if (relays && a->n && a->e[0].version < f)
		f = a->e[0].version;
	bool any = f != UINT64_MAX;   /* a node there, or an approval kept */
	pthread_mutex_unlock(&a->lock);
	*floor = any ? f : 0;
	return any;
}

void approvals_keep(struct approvals *a, struct store *s)
{
	uint64_t floor;
	bool on = approvals_floor(a, &floor);
	/* the store's locks only when the hold moves: the keeper asks every
	 * second, and readers would wait behind a writer each time */
	pthread_mutex_lock(&a->keep_lock);
	if (on != a->kept_on || floor != a->kept_floor) {
		store_set_hold(s, on, floor);
		a->kept_on = on;
		a->kept_floor = floor;
	}
	pthread_mutex_unlock(&a->keep_lock);
}

/* The kids (or the tokens) kept for (version, sub), as comma-separated
 * JSON strings. Lock held. */
static void strings_of(const struct approvals *a, uint64_t version, const char *sub, bool tokens, struct buf *out)
{
	bool first = true;
	for (size_t i = first_of(a, version); i < a->n && a->e[i].version == version; i++) {
		if (strcmp(a->e[i].sub, sub) != 0)
			continue;
		if (!first)
			buf_putc(out, ',');
		first = false;
		buf_json_string(out, tokens ? a->e[i].token : a->e[i].kid);
	}
}

void approvals_push_json(struct approvals *a, const char *node, uint64_t version, struct buf *out)
{
	pthread_mutex_lock(&a->lock);
	struct anode *n = find_node(a, node);
	if (n) {
		buf_puts(out, "\"approvals\":[");
		strings_of(a, version, n->sub, true, out);
		buf_puts(out, "],");
	}
	pthread_mutex_unlock(&a->lock);
}

/* The largest K a node requires (0: none). Lock held. */
static unsigned needed(const struct approvals *a)
{
	unsigned k = 0;
	for (size_t i = 0; i < a->nnodes; i++)
		if (a->nodes[i].k > k)
			k = a->nodes[i].k;
	return k;
}

/* The distinct subscriptions in use: of the nodes that require approvals,
 * and of the approvals kept for version. Lock held. */
static void subs_of(const struct approvals *a, uint64_t version, bool with_kept, const char ***out, size_t *n)
{
	size_t cap = a->nnodes + a->n + 1;
	const char **s = xcalloc(cap, sizeof(*s));
	size_t k = 0;
	for (size_t i = 0; i < a->nnodes + a->n; i++) {
		const char *sub;
		if (i < a->nnodes)
			sub = a->nodes[i].sub;
		else if (with_kept && a->e[i - a->nnodes].version == version)
			sub = a->e[i - a->nnodes].sub;
		else
			continue;
		bool seen = false;
		for (size_t j = 0; j < k && !seen; j++)
			seen = strcmp(s[j], sub) == 0;
		if (!seen)
			s[k++] = sub;
	}
	*out = s;
	*n = k;
}

void approvals_version_json(struct approvals *a, uint64_t version, struct buf *out)
{
	pthread_mutex_lock(&a->lock);
	/* the newest earlier version some node could take: what approvers
	 * compare against */
	uint64_t last = 0;
	for (size_t i = 0; i < a->nnodes; i++) {
		uint64_t v = approved_in(a, a->nodes[i].sub, a->nodes[i].k, 0, version);
		if (v > last)
			last = v;
	}
	buf_printf(out, "{\"version\":%llu,\"needed\":%u,\"last_approved\":%llu,\"approvals\":[",
		   (unsigned long long)version, needed(a), (unsigned long long)last);
	const char **subs;
	size_t nsubs;
	subs_of(a, version, true, &subs, &nsubs);
	bool first = true;
	for (size_t s = 0; s < nsubs; s++) {
		if (!count(a, version, subs[s]))
			continue;
		if (!first)
			buf_putc(out, ',');
		first = false;
		buf_puts(out, "{\"sub\":");
		buf_json_string(out, subs[s]);
		buf_puts(out, ",\"kids\":[");
		strings_of(a, version, subs[s], false, out);
		/* the tokens too, in the same order (they are no secret: pushes
		 * carry them): an approver checks its own against the state it
		 * fetches (tetherctl approve) */
		buf_puts(out, "],\"tokens\":[");
		strings_of(a, version, subs[s], true, out);
		buf_puts(out, "]}");
	}
	free(subs);
	buf_puts(out, "],\"subs\":[");
	subs_of(a, version, false, &subs, &nsubs);
	for (size_t s = 0; s < nsubs; s++) {
		if (s)
			buf_putc(out, ',');
		buf_json_string(out, subs[s]);
	}
	free(subs);
	buf_puts(out, "]}");
	pthread_mutex_unlock(&a->lock);
}

void approvals_node_json(struct approvals *a, const char *node, struct buf *out)
{
	pthread_mutex_lock(&a->lock);
	struct anode *n = find_node(a, node);
	if (n)
		buf_printf(out, ",\"approvals\":%u,\"approved_version\":%llu", n->k,
			   (unsigned long long)newest_approved(a, n->sub, n->k, 0));
	pthread_mutex_unlock(&a->lock);
}

void approvals_log_json(struct approvals *a, uint64_t version, struct buf *out)
{
	pthread_mutex_lock(&a->lock);
	unsigned k = needed(a);
	size_t from = first_of(a, version), to = from;   /* version's entries: [from, to) */
	while (to < a->n && a->e[to].version == version)
		to++;
	if (k || to > from) {
		buf_puts(out, ",\"approvals\":[");
		bool first = true;
		for (size_t i = from; i < to; i++) {
			if (!first)
				buf_putc(out, ',');
			first = false;
			buf_puts(out, "{\"kid\":");
			buf_json_string(out, a->e[i].kid);
			buf_puts(out, ",\"sub\":");
			buf_json_string(out, a->e[i].sub);
			buf_putc(out, '}');
		}
		buf_printf(out, "],\"approvals_needed\":%u", k);
	}
	pthread_mutex_unlock(&a->lock);
}
