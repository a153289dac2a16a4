/* rollout/gate.c: the traffic-aware gates of staged rollouts (see gate.h): the
 * nodes' reports and marks, the judgement of a stage, and how it shows
 * (the rollout's JSON, /metrics, the events bus). The options are parsed
 * in gate_options.c. */
#include "rollout/gate.h"
#include "core/events.h"
#include "log.h"
#include "rollout/rollout.h"
#include "strmap.h"
#include "util.h"
#include "xmalloc.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REASON_MAX 1024
#define GATE_WHY_MAX 160
#define UNJUDGED_SHOWN 5             /* nodes an unjudged stage's reason names */

struct gnode {
	char *id;
	struct traffic last, mark;
	struct traffic win;          /* traffic_diff(last, mark), kept with them */
	bool have_last, have_mark;
	double last_seen;            /* wall seconds the last report came */
	int counts;                  /* it counts (1: a report came, or its ACKs say so), does not (0), or unknown (-1) */
	char why[GATE_WHY_MAX];      /* ... why not, as it says */
	uint64_t stamp;              /* == gate.stamp: reached in the stage being judged */
};

/* One side of a route's comparison. */
struct side {
	size_t nodes;
	uint64_t requests, errors;
	double p99;                  /* ms */
	double window;               /* seconds */
};

struct row {
	char name[TRAFFIC_ROUTE_LEN];
	struct side canary, baseline;
	const char *note;            /* static text, or NULL */
};

struct stage_rec {
	size_t stage;                /* index, 0 first */
	unsigned percent;
	enum gate_verdict verdict;
	enum gate_verdict out;       /* what the rollout gets (an unjudged stage's by --gate-unjudged) */
	bool unjudged_counted;       /* tether_gate_unjudged_total counted it */
	size_t baseline_stage;       /* the baseline shown was kept from this stage (1-based) */
	struct row *rows;
	size_t nrows;
	char *reason;                /* the failure, or what was too little */
};

struct gate {
	pthread_mutex_t lock;
	struct gate_limit err, p99;
	char err_text[32], p99_text[32];
	uint64_t min;
	enum gate_unjudged unjudged; /* --gate-unjudged */
	uint64_t max_nodes;
	_Atomic bool running;
	struct events *events;
	/* under lock */
	struct strmap idx;           /* node id -> index in nodes (keys: the nodes' ids) */
	struct gnode **nodes;
	size_t nnodes, cap;
	bool dirty;                  /* a report came since the last judgement */
	int64_t every_ms, judged_ms; /* reports alone are judged this often at most */
	uint64_t stamp;
	bool have_stage;
	uint64_t run;
	size_t stage;
	double started;
	size_t acked_seen;
	bool baked_seen;
	struct traffic kept;         /* the last baseline of this run that had traffic */
	size_t kept_nodes, kept_stage;
	bool have_kept;
	struct stage_rec stages[ROLLOUT_MAX_STAGES];
	size_t nstages;
	uint64_t failures, low_traffic, unjudged_total;
};

/* ---- the gate ------------------------------------------------------------ */

struct gate *gate_new(const struct gate_options *cfg, char *err, size_t errlen)
{
	if (errlen)
		err[0] = 0;
	if (!gate_configured(cfg))
		return NULL;
	if (gate_check_config(cfg, err, errlen) < 0)
		return NULL;
	struct gate *g = xcalloc(1, sizeof(*g));
	pthread_mutex_init(&g->lock, NULL);
	strmap_init(&g->idx);
	traffic_init(&g->kept);
	atomic_init(&g->running, false);
	if (cfg->error_rate) {
		gate_parse_limit("gate-error-rate", cfg->error_rate, true, &g->err, err, errlen);
		snprintf(g->err_text, sizeof(g->err_text), "%s", cfg->error_rate);
	}
	if (cfg->latency_p99) {
		gate_parse_limit("gate-latency-p99", cfg->latency_p99, false, &g->p99, err, errlen);
		snprintf(g->p99_text, sizeof(g->p99_text), "%s", cfg->latency_p99);
	}
	g->min = cfg->min_requests ? cfg->min_requests : GATE_MIN_REQUESTS_DEFAULT;
	gate_parse_unjudged(cfg->unjudged, &g->unjudged, err, errlen);
	g->max_nodes = cfg->max_nodes ? cfg->max_nodes : 100000;
	g->every_ms = GATE_JUDGE_EVERY_MS;
	return g;
}

static void stage_rec_release(struct stage_rec *s)
{
	free(s->rows);
	free(s->reason);
	memset(s, 0, sizeof(*s));
}

void gate_free(struct gate *g)
{
	if (!g)
		return;
	for (size_t i = 0; i < g->nnodes; i++) {
		traffic_release(&g->nodes[i]->last);
		traffic_release(&g->nodes[i]->mark);
		traffic_release(&g->nodes[i]->win);
		free(g->nodes[i]->id);
		free(g->nodes[i]);
	}
	free(g->nodes);
	strmap_release(&g->idx);
	for (size_t i = 0; i < g->nstages; i++)
		stage_rec_release(&g->stages[i]);
	traffic_release(&g->kept);
	pthread_mutex_destroy(&g->lock);
	free(g);
}

void gate_set_events(struct gate *g, struct events *e)
{
	if (g)
		g->events = e;
}

void gate_set_judge_interval(struct gate *g, int64_t ms)
{
	if (g)
		g->every_ms = ms;
}

void gate_set_running(struct gate *g, bool running)
{
	if (g)
		atomic_store(&g->running, running);
}

bool gate_wants_reports(struct gate *g)
{
	return g && atomic_load(&g->running);
}

const char *gate_verdict_name(enum gate_verdict v)
{
	switch (v) {
	case GATE_PASS:
		return "pass";
	case GATE_FAIL:
		return "fail";
	case GATE_LOW_TRAFFIC:
		return "low_traffic";
	case GATE_UNJUDGED:
		return "unjudged";
	default:
		return "judging";
	}
}

/* ---- reports and marks (under lock) ---------------------------------------- */

static double now_seconds(void)
{
	return (double)wall_ms() / 1000.0;
}

static struct gnode *find_node(const struct gate *g, const char *id)
{
	intptr_t i;
	return strmap_get(&g->idx, id, &i) ? g->nodes[i] : NULL;
}

/* The mark at zero: t's generation counts whole from its since. */
static void zero_mark(struct gnode *n, const struct traffic *t)
{
	traffic_copy(&n->mark, t);
	traffic_clear(&n->mark);
	n->mark.until = t->since;
	n->have_mark = true;
}

/* The first report seen in the stage: the mark, or zero when its
 * generation went live after the stage started. */
static void first_mark(const struct gate *g, struct gnode *n, const struct traffic *t)
{
	if (t->since >= g->started) {
		zero_mark(n, t);
	} else {
		traffic_copy(&n->mark, t);
		n->have_mark = true;
	}
}

static const struct traffic_route *route_of(const struct traffic *t, const char *name)
{
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->routes[i].name, name) == 0)
			return &t->routes[i];
	return NULL;
}

/* Whether t counts less than before on some route: the consumer started
 * counting again (same generation id, e.g. the agent restarted). */
static bool went_back(const struct traffic *t, const struct traffic *before)
{
	for (size_t i = 0; i < before->n; i++) {
		/* routes keep the order they were first seen in: try the same place first */
		const struct traffic_route *r = i < t->n && strcmp(t->routes[i].name, before->routes[i].name) == 0
							? &t->routes[i]
							: route_of(t, before->routes[i].name);
		if (!r || r->requests < before->routes[i].requests || r->errors < before->routes[i].errors)
			return true;
	}
	return false;
}

/* Under lock: node's entry, made when new; NULL when the gate keeps as
 * many as the plane keeps records of already. */
static struct gnode *node_entry(struct gate *g, const char *node)
{
	struct gnode *n = find_node(g, node);
	if (n)
		return n;
	if (g->nnodes >= g->max_nodes)
		return NULL;
	if (g->nnodes == g->cap) {
		g->cap = g->cap ? g->cap * 2 : 16;
		g->nodes = xrealloc(g->nodes, g->cap * sizeof(*g->nodes));
	}
	n = xcalloc(1, sizeof(*n));
	n->id = xstrdup(node);
	n->counts = -1;
	traffic_init(&n->last);
	traffic_init(&n->mark);
	traffic_init(&n->win);
	g->nodes[g->nnodes] = n;
	strmap_put(&g->idx, n->id, (intptr_t)g->nnodes);
	g->nnodes++;
	return n;
}

void gate_counts(struct gate *g, const char *node, bool counts, const char *reason)
{
	if (!g || !node)
		return;
	pthread_mutex_lock(&g->lock);
	struct gnode *n = node_entry(g, node);
	if (n) {
		char why[GATE_WHY_MAX] = "";
		if (!counts)
			snprintf(why, sizeof(why), "%s", reason && *reason ? reason : "it says it does not count");
		if (n->counts != (int)counts || strcmp(n->why, why) != 0)
			g->dirty = true;
		n->counts = counts;
		memcpy(n->why, why, sizeof(why));
	}
	pthread_mutex_unlock(&g->lock);
}

void gate_report(struct gate *g, const char *node, const struct traffic *t)
{
	if (!g || !node || !t)
		return;
	pthread_mutex_lock(&g->lock);
	struct gnode *n = node_entry(g, node);
	if (!n) {
		pthread_mutex_unlock(&g->lock);
		return;   /* bounded: as many as the plane keeps records of */
	}
	if (n->have_last && traffic_replayed(t, n->last.gen, n->last.version, n->last.until, traffic_total(&n->last))) {
		pthread_mutex_unlock(&g->lock);
		return;   /* an older report than the last (one replayed by another replica's records) */
	}
	if (g->have_stage) {
		if (!n->have_mark)
			first_mark(g, n, t);
		else if (strcmp(t->gen, n->mark.gen) != 0 || t->version != n->mark.version ||
			 (n->have_last && strcmp(t->gen, n->last.gen) == 0 && t->version == n->last.version &&
			  went_back(t, &n->last)))
			zero_mark(n, t);   /* another generation, or counting again: whole */
	}
	traffic_copy(&n->last, t);
	n->have_last = true;
	n->counts = 1;   /* a report: it counts (an agent restarted counting need not ACK again) */
	n->why[0] = '\0';
	n->last_seen = now_seconds();
	if (n->have_mark)
		traffic_diff(&n->last, &n->mark, &n->win);   /* here, once, not at every judgement */
	g->dirty = true;
	pthread_mutex_unlock(&g->lock);
}

/* A stage the gate has not seen: windows start again (a report seen after
 * the stage's start marks at once); a new run forgets the last's. */
static void begin_stage(struct gate *g, const struct gate_stage_view *s)
{
	if (!g->have_stage || s->run != g->run) {
		for (size_t i = 0; i < g->nstages; i++)
			stage_rec_release(&g->stages[i]);
		g->nstages = 0;
		g->have_kept = false;
		traffic_clear(&g->kept);
	}
	g->have_stage = true;
	g->run = s->run;
	g->stage = s->stage;
	g->started = s->started;
	for (size_t i = 0; i < g->nnodes; i++) {
		struct gnode *n = g->nodes[i];
		n->have_mark = false;
		if (n->have_last && n->last_seen >= s->started) {
			first_mark(g, n, &n->last);
			traffic_diff(&n->last, &n->mark, &n->win);
		}
	}
	if (g->nstages == ROLLOUT_MAX_STAGES)
		stage_rec_release(&g->stages[--g->nstages]);
	struct stage_rec *rec = &g->stages[g->nstages++];
	memset(rec, 0, sizeof(*rec));
	rec->stage = s->stage;
	rec->percent = s->percent;
	rec->verdict = GATE_JUDGING;
	rec->out = GATE_JUDGING;
	g->dirty = true;
	g->judged_ms = 0;
	g->acked_seen = 0;
	g->baked_seen = false;
}

/* ---- judgement ---------------------------------------------------------------- */

static bool has_traffic(const struct traffic *t, uint64_t min)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->routes[i].requests >= min && t->routes[i].requests > 0)
			return true;
	return false;
}

static double span(const struct traffic *t)
{
	return t->until > t->since ? t->until - t->since : 0;
}

static double rate_of(uint64_t errors, uint64_t requests)
{
	return requests ? (double)errors / (double)requests : 0;
}

static double p99_of(const struct traffic_route *r)
{
	return r ? traffic_quantile(r->hist, 0.99) : 0;
}

/* The baseline as a reason shows it. */
struct base_view {
	const struct traffic *t;
	size_t nodes;
	size_t kept_from;            /* 1-based stage, 0: this stage's own */
};

static void base_note(const struct base_view *b, bool small, char *out, size_t cap)
{
	char kept[48] = "";
	if (b->kept_from)
		snprintf(kept, sizeof(kept), ", kept from stage %zu", b->kept_from);
	snprintf(out, cap, "%.1f s, %zu node%s%s%s", span(b->t), b->nodes, b->nodes == 1 ? "" : "s", kept,
		 small ? "; too little traffic: counted as 0" : "");
}

/* The crossings of a judgement: the CROSS_SHOWN worst, kept in order
 * (error rates before latencies, each by how far over its limit), and
 * how many there were in all. */
#define CROSS_SHOWN 3
struct crossing {
	bool error;                  /* the error rate; else p99 */
	double over;                 /* value / limit */
	char *text;
};
struct crossings {
	struct crossing top[CROSS_SHOWN];
	size_t n, total;
};

static bool worse(const struct crossing *a, const struct crossing *b)
{
	return a->error != b->error ? a->error : a->over > b->over;
}

static void cross_add(struct crossings *c, bool error, double value, double limit, char *text)
{
	struct crossing x = { error, limit > 0 ? value / limit : 1e12 * value, text };
	c->total++;
	size_t at = c->n;
	while (at > 0 && worse(&x, &c->top[at - 1]))
		at--;
	if (at == CROSS_SHOWN) {
		free(text);
		return;
	}
	if (c->n == CROSS_SHOWN)
		free(c->top[--c->n].text);
	memmove(&c->top[at + 1], &c->top[at], (c->n - at) * sizeof(c->top[0]));
	c->top[at] = x;
	c->n++;
}

/* The reason of a failed stage: the worst crossing, then the others
 * shown, then how many more; NULL when none. Frees the texts. */
static char *cross_reason(struct crossings *c)
{
	if (!c->n)
		return NULL;
	struct buf b = BUF_INIT;
	for (size_t i = 0; i < c->n; i++) {
		buf_printf(&b, "%s%s", i ? "; also " : "", c->top[i].text);
		free(c->top[i].text);
	}
	if (c->total > c->n)
		buf_printf(&b, "; and %zu more", c->total - c->n);
	c->n = 0;
	return buf_detach(&b, NULL);
}

/* Every gate route r of node id (its window w) crosses, into c. */
static void check_route(const struct gate *g, const char *id, const struct traffic *w,
			const struct traffic_route *r, const struct base_view *b, struct crossings *c)
{
	const struct traffic_route *br = route_of(b->t, r->name);
	uint64_t breq = br ? br->requests : 0, berr = br ? br->errors : 0;
	bool bsmall = breq < g->min;
	char bn[160];
	if (g->err.form != GATE_OFF && !(g->err.form == GATE_MULT && bsmall)) {
		double rate = rate_of(r->errors, r->requests), brate = rate_of(berr, breq);
		double limit = g->err.form == GATE_ABS ? (bsmall ? 0 : brate) + g->err.value
						       : g->err.value * fmax(brate, 1.0 / (double)g->min);
		if (rate > limit) {
			base_note(b, bsmall && g->err.form == GATE_ABS, bn, sizeof(bn));
			cross_add(c, true, rate, limit,
				  xasprintf("gate: %s on node %s: error rate %.1f%% (%llu of %llu requests, %.1f s) vs "
					    "baseline %.1f%% (%llu of %llu, %s): above --gate-error-rate %s (limit %.2f%%)",
					    r->name, id, rate * 100, (unsigned long long)r->errors,
					    (unsigned long long)r->requests, span(w), brate * 100, (unsigned long long)berr,
					    (unsigned long long)breq, bn, g->err_text, limit * 100));
		}
	}
	if (g->p99.form != GATE_OFF && !(g->p99.form == GATE_MULT && bsmall)) {
		double p = p99_of(r), bp = bsmall ? 0 : p99_of(br);
		double limit = g->p99.form == GATE_ABS ? bp + g->p99.value : g->p99.value * fmax(bp, 1.0);
		if (p > limit) {
			base_note(b, bsmall && g->p99.form == GATE_ABS, bn, sizeof(bn));
			cross_add(c, false, p, limit,
				  xasprintf("gate: %s on node %s: p99 %.1f ms (%llu requests, %.1f s) vs baseline p99 "
					    "%.1f ms (%llu requests, %s): above --gate-latency-p99 %s (limit %.1f ms)",
					    r->name, id, p, (unsigned long long)r->requests, span(w), bsmall ? 0 : bp,
					    (unsigned long long)breq, bn, g->p99_text, limit));
		}
	}
}

static void fill_side(struct side *s, const struct traffic *t, const char *name, size_t nodes)
{
	const struct traffic_route *r = route_of(t, name);
	s->nodes = nodes;
	s->requests = r ? r->requests : 0;
	s->errors = r ? r->errors : 0;
	s->p99 = p99_of(r);
	s->window = span(t);
}

/* The per-route table of the stage: canary routes first, then the
 * baseline's others. */
static void fill_rows(const struct gate *g, struct stage_rec *rec, const struct traffic *canary, size_t cnodes,
		      const struct base_view *b)
{
	free(rec->rows);
	rec->rows = xcalloc(canary->n + b->t->n + 1, sizeof(*rec->rows));
	rec->nrows = 0;
	for (int pass = 0; pass < 2; pass++) {
		const struct traffic *t = pass ? b->t : canary;
		for (size_t i = 0; i < t->n; i++) {
			const char *name = t->routes[i].name;
			if (pass && route_of(canary, name))
				continue;
			struct row *row = &rec->rows[rec->nrows++];
			snprintf(row->name, sizeof(row->name), "%s", name);
			fill_side(&row->canary, canary, name, cnodes);
			fill_side(&row->baseline, b->t, name, b->nodes);
			bool mult = g->err.form == GATE_MULT || g->p99.form == GATE_MULT;
			if (row->canary.requests < g->min)
				row->note = "canary: fewer requests than --gate-min-requests, not judged";
			else if (row->baseline.requests < g->min)
				row->note = mult ? "baseline: fewer requests than --gate-min-requests, the Nx gates skip "
						   "this route"
						 : "baseline: fewer requests than --gate-min-requests, counted as 0";
		}
	}
}

static void publish(struct gate *g, uint64_t run, const struct stage_rec *rec)
{
	if (!g->events)
		return;
	struct buf b = BUF_INIT;
	buf_printf(&b, "{\"rollout\":%llu,\"stage\":%zu,\"percent\":%u,\"verdict\":\"%s\",\"reason\":",
		   (unsigned long long)run, rec->stage + 1, rec->percent, gate_verdict_name(rec->verdict));
	buf_json_string(&b, rec->reason ? rec->reason : "");
	buf_printf(&b, ",\"time\":%.3f}", now_seconds());
	events_publish(g->events, "gate", &b);
}

/* The members that cannot be judged: how many, the first few and why. */
struct unjudged {
	size_t n;
	const char *names[UNJUDGED_SHOWN];
	const char *whys[UNJUDGED_SHOWN];
};

static void unjudged_add(struct unjudged *u, const char *node, const char *why)
{
	if (u->n < UNJUDGED_SHOWN) {
		u->names[u->n] = node;
		u->whys[u->n] = why;
	}
	u->n++;
}

/* "unjudged: node-3, node-7 do not count traffic (started with
 * --traffic-listen off)": the first few, how many more, and why (each
 * node's when they differ). */
static char *unjudged_text(const struct unjudged *u)
{
	struct buf b = BUF_INIT;
	size_t shown = u->n < UNJUDGED_SHOWN ? u->n : UNJUDGED_SHOWN;
	buf_puts(&b, "unjudged: ");
	for (size_t i = 0; i < shown; i++)
		buf_printf(&b, "%s%s", i ? ", " : "", u->names[i]);
	if (u->n > shown)
		buf_printf(&b, " and %zu more", u->n - shown);
	buf_puts(&b, u->n == 1 ? " does not count traffic (" : " do not count traffic (");
	bool same = true;
	for (size_t i = 1; i < shown; i++)
		same &= strcmp(u->whys[i], u->whys[0]) == 0;
	for (size_t i = 0; i < shown; i++) {
		if (same) {
			buf_puts(&b, u->whys[0]);
			break;
		}
		buf_printf(&b, "%s%s: %s", i ? "; " : "", u->names[i], u->whys[i]);
	}
	buf_putc(&b, ')');
	return buf_detach(&b, NULL);
}

/* Under lock, the bake over and un->n members unjudged: the stage's
 * verdict by --gate-unjudged (a revert's reason into *reason). Whether
 * it is news to publish (it became unjudged, or why changed). */
static bool unjudged_verdict(struct gate *g, const struct gate_stage_view *s, struct stage_rec *rec,
			     const struct unjudged *un, char **reason)
{
	char *text = unjudged_text(un);
	char *full = g->unjudged == GATE_UNJUDGED_HOLD   ? xasprintf("held: %s", text)
		     : g->unjudged == GATE_UNJUDGED_PASS ? xasprintf("%s; passed (--gate-unjudged pass)", text)
							 : xstrdup(text);
	bool news = rec->verdict != GATE_UNJUDGED || !rec->reason || strcmp(rec->reason, full) != 0;
	rec->verdict = GATE_UNJUDGED;
	rec->out = g->unjudged == GATE_UNJUDGED_HOLD   ? GATE_UNJUDGED
		   : g->unjudged == GATE_UNJUDGED_PASS ? GATE_PASS
						       : GATE_FAIL;
	free(rec->reason);
	rec->reason = full;
	if (!rec->unjudged_counted) {
		rec->unjudged_counted = true;
		g->unjudged_total++;
	}
	if (news)
		log_warn("rollout %llu: stage %u%%: %s", (unsigned long long)s->run, s->percent, full);
	if (rec->out == GATE_FAIL)
		*reason = text;
	else
		free(text);
	return news;
}

enum gate_verdict gate_judge(struct gate *g, const struct gate_stage_view *s, char **reason)
{
	*reason = NULL;
	if (!g)
		return GATE_PASS;
	pthread_mutex_lock(&g->lock);
	if (!g->have_stage || s->run != g->run || s->stage != g->stage)
		begin_stage(g, s);
	struct stage_rec *rec = &g->stages[g->nstages - 1];
	/* held unjudged: judged again as nodes change (they may start counting) */
	bool open = rec->verdict == GATE_JUDGING || (rec->verdict == GATE_UNJUDGED && rec->out == GATE_UNJUDGED);
	size_t acked = 0;
	for (size_t i = 0; i < s->nreached; i++)
		acked += s->acked[i];
	/* again when an ACK came or the bake ended; for reports alone, at
	 * most every every_ms (a judgement walks every node) */
	bool moved = acked != g->acked_seen || s->baked != g->baked_seen;
	if (!open || (!moved && (!g->dirty || now_ms() - g->judged_ms < g->every_ms))) {
		enum gate_verdict v = rec->out;
		pthread_mutex_unlock(&g->lock);
		return v;   /* decided already (the rollout acts on it), or nothing new */
	}
	g->dirty = false;
	g->judged_ms = now_ms();
	g->acked_seen = acked;
	g->baked_seen = s->baked;

	struct traffic base, canary;
	traffic_init(&base);
	traffic_init(&canary);
	g->stamp++;
	for (size_t i = 0; i < s->nreached; i++) {
		struct gnode *n = find_node(g, s->reached[i]);
		if (n)
			n->stamp = g->stamp;
	}
	/* the baseline: the nodes outside the stage still on `from` */
	size_t bnodes = 0;
	for (size_t i = 0; i < g->nnodes; i++) {
		struct gnode *n = g->nodes[i];
		if (n->stamp == g->stamp || !n->have_last || !n->have_mark || n->last.version != s->from)
			continue;
		traffic_merge(&base, &n->win);
		bnodes++;
	}
	struct base_view bv = { &base, bnodes, 0 };
	if (has_traffic(&base, g->min)) {
		traffic_copy(&g->kept, &base);
		g->kept_nodes = bnodes;
		g->kept_stage = s->stage + 1;
		g->have_kept = true;
	} else if (g->have_kept) {
		bv.t = &g->kept;
		bv.nodes = g->kept_nodes;
		bv.kept_from = g->kept_stage == s->stage + 1 ? 0 : g->kept_stage;
	}
	/* the members, each judged alone */
	size_t cnodes = 0, nlow = 0, nacked = 0;
	struct crossings cx = { 0 };
	char low[REASON_MAX] = "";
	struct unjudged un = { 0 };
	for (size_t i = 0; i < s->nreached; i++) {
		if (!s->acked[i])
			continue;
		nacked++;
		struct gnode *n = find_node(g, s->reached[i]);
		if (!n || n->counts == 0 || !n->have_last) {
			/* no counts at all: it cannot be judged (not "few requests") */
			unjudged_add(&un, s->reached[i], n && n->counts == 0 ? n->why : "sent no traffic report");
			continue;
		}
		if (!n->have_mark || n->last.version < s->to) {
			nlow++;
			if (!low[0])
				snprintf(low, sizeof(low), "node %s sent no report of version %llu", s->reached[i],
					 (unsigned long long)s->to);
			continue;
		}
		const struct traffic *win = &n->win;
		traffic_merge(&canary, win);
		cnodes++;
		bool enough = false;
		for (size_t k = 0; k < win->n; k++) {
			if (win->routes[k].requests < g->min)
				continue;
			enough = true;
			check_route(g, n->id, win, &win->routes[k], &bv, &cx);
		}
		nlow += !enough;
		if (!enough && !low[0])
			snprintf(low, sizeof(low), "node %s served %llu requests in %.1f s, fewer than --gate-min-requests "
				 "%llu on every route", n->id, (unsigned long long)traffic_total(win), span(win),
				 (unsigned long long)g->min);
	}
	char *fail = cross_reason(&cx);
	fill_rows(g, rec, &canary, cnodes, &bv);
	rec->baseline_stage = bv.kept_from;
	bool published = false;
	if (fail) {
		rec->verdict = GATE_FAIL;
		rec->out = GATE_FAIL;
		free(rec->reason);
		rec->reason = xstrdup(fail);
		g->failures++;
		*reason = fail;
		published = true;
	} else if (s->baked && un.n) {
		published = unjudged_verdict(g, s, rec, &un, reason);
	} else if (s->baked) {
		rec->verdict = low[0] ? GATE_LOW_TRAFFIC : GATE_PASS;
		rec->out = rec->verdict;
		free(rec->reason);
		rec->reason = NULL;
		if (rec->unjudged_counted)
			log_info("rollout %llu: stage %u%%: every member counts traffic now: judged", (unsigned long long)s->run,
				 s->percent);
		if (low[0]) {
			rec->reason = nlow > 1 ? xasprintf("too little traffic to judge on %zu of %zu nodes: %s", nlow,
							   nacked, low)
					       : xasprintf("too little traffic to judge: %s", low);
			g->low_traffic++;
			published = true;
			log_warn("rollout %llu: stage %u%% passes flagged low_traffic: %s", (unsigned long long)s->run,
				 s->percent, rec->reason);
		} else {
			log_info("rollout %llu: stage %u%% passes its gates (%zu members, %zu baseline nodes%s)",
				 (unsigned long long)s->run, s->percent, cnodes, bv.nodes,
				 bv.kept_from ? ", the baseline kept from an earlier stage" : "");
		}
	}
	enum gate_verdict v = rec->out;
	struct stage_rec copy = { 0 };
	if (published) {
		copy = *rec;
		copy.rows = NULL;
		copy.reason = xstrdup(rec->reason);
	}
	pthread_mutex_unlock(&g->lock);
	if (published) {
		publish(g, s->run, &copy);
		free(copy.reason);
	}
	traffic_release(&base);
	traffic_release(&canary);
	return v;
}

/* ---- where it shows --------------------------------------------------------- */

static void side_json(struct buf *out, const struct side *s)
{
	buf_printf(out, "{\"nodes\":%zu,\"requests\":%llu,\"errors\":%llu,\"error_rate\":%.6g,\"p99\":%.3f,"
		   "\"window\":%.3f}", s->nodes, (unsigned long long)s->requests, (unsigned long long)s->errors,
		   rate_of(s->errors, s->requests), s->p99, s->window);
}

static void limit_json(struct buf *out, const char *text, const struct gate_limit *l)
{
	if (l->form == GATE_OFF)
		buf_puts(out, "null");
	else
		buf_json_string(out, text);
}

void gate_json(struct gate *g, uint64_t run, bool live, struct buf *out)
{
	if (!g)
		return;
	pthread_mutex_lock(&g->lock);
	buf_puts(out, ",\"gate\":{\"error_rate\":");
	limit_json(out, g->err_text, &g->err);
	buf_puts(out, ",\"latency_p99\":");
	limit_json(out, g->p99_text, &g->p99);
	buf_printf(out, ",\"min_requests\":%llu,\"unjudged\":\"%s\",\"stages\":[", (unsigned long long)g->min,
		   gate_unjudged_name(g->unjudged));
	for (size_t i = 0; g->have_stage && g->run == run && i < g->nstages; i++) {
		const struct stage_rec *rec = &g->stages[i];
		const char *verdict = rec->verdict == GATE_JUDGING && !live ? "ended" : gate_verdict_name(rec->verdict);
		buf_printf(out, "%s{\"stage\":%zu,\"percent\":%u,\"verdict\":\"%s\",", i ? "," : "",
			   rec->stage + 1, rec->percent, verdict);
		/* held now (unjudged, --gate-unjudged hold, the run in progress) */
		buf_printf(out, "\"held\":%s,\"reason\":",
			   live && rec->verdict == GATE_UNJUDGED && rec->out == GATE_UNJUDGED ? "true" : "false");
		if (rec->reason)
			buf_json_string(out, rec->reason);
		else
			buf_puts(out, "null");
		if (rec->baseline_stage)
			buf_printf(out, ",\"baseline_stage\":%zu", rec->baseline_stage);
		buf_puts(out, ",\"routes\":[");
		for (size_t k = 0; k < rec->nrows; k++) {
			const struct row *row = &rec->rows[k];
			buf_puts(out, k ? ",{\"route\":" : "{\"route\":");
			buf_json_string(out, row->name);
			buf_puts(out, ",\"canary\":");
			side_json(out, &row->canary);
			buf_puts(out, ",\"baseline\":");
			side_json(out, &row->baseline);
			if (row->note) {
				buf_puts(out, ",\"note\":");
				buf_json_string(out, row->note);
			}
			buf_putc(out, '}');
		}
		buf_puts(out, "]}");
	}
	buf_puts(out, "]}");
	pthread_mutex_unlock(&g->lock);
}

void gate_metrics(struct gate *g, struct buf *out)
{
	if (!g)
		return;
	pthread_mutex_lock(&g->lock);
	buf_puts(out, "# HELP tether_gate_failures_total Rollout stages a traffic gate failed.\n"
		      "# TYPE tether_gate_failures_total counter\n");
	buf_printf(out, "tether_gate_failures_total %llu\n", (unsigned long long)g->failures);
	buf_puts(out, "# HELP tether_gate_low_traffic_total Rollout stages that passed flagged: too little traffic "
		      "to judge.\n# TYPE tether_gate_low_traffic_total counter\n");
	buf_printf(out, "tether_gate_low_traffic_total %llu\n", (unsigned long long)g->low_traffic);
	buf_puts(out, "# HELP tether_gate_unjudged_total Rollout stages that could not be judged: members that do not "
		      "count traffic or never reported any.\n# TYPE tether_gate_unjudged_total counter\n");
	buf_printf(out, "tether_gate_unjudged_total %llu\n", (unsigned long long)g->unjudged_total);
	const struct stage_rec *rec =
		atomic_load(&g->running) && g->have_stage && g->nstages ? &g->stages[g->nstages - 1] : NULL;
	static const char *const names[3] = { "tether_gate_requests", "tether_gate_error_rate",
					      "tether_gate_latency_p99_seconds" };
	static const char *const help[3] = {
		"Requests in the current stage's window, per route, on the canary (the stage's members) and the "
		"baseline.",
		"5xx answers per request in the current stage's window, per route, canary and baseline.",
		"The 99th percentile latency in the current stage's window, per route, canary and baseline.",
	};
	for (int m = 0; m < 3; m++) {
		buf_printf(out, "# HELP %s %s\n# TYPE %s gauge\n", names[m], help[m], names[m]);
		for (size_t k = 0; rec && k < rec->nrows; k++) {
			const struct row *row = &rec->rows[k];
			for (int side = 0; side < 2; side++) {
				const struct side *s = side ? &row->baseline : &row->canary;
				double v = m == 0 ? (double)s->requests
					   : m == 1 ? rate_of(s->errors, s->requests)
						    : s->p99 / 1000.0;
				buf_printf(out, "%s{route=\"%s\",group=\"%s\"} %.9g\n", names[m], row->name,
					   side ? "baseline" : "canary", v);
			}
		}
	}
	pthread_mutex_unlock(&g->lock);
}
