/* trust.c: what tetherd checks when it runs with --trust (docs/protocol.md,
 * "Signed state"; docs/security.md):
 *
 *   1. every push carries a statement signed by a trusted key, not expired,
 *      for the push's version and this node's subscription;
 *   2. its version is not below the highest version verified (persisted
 *      with last-good): lower is a rollback, refused;
 *   3. the candidate state's digest, updated from the applied state's in
 *      O(changed), equals the signed digest: a delta that adds, drops,
 *      changes or mixes anything fails, and the node asks for a snapshot.
 *
 * Heartbeats (and a poll's 304) carry fresh statements too. When the
 * newest valid one has expired (or is older than --max-staleness) the node
 * is stale: it says so and keeps serving what it has. */
#include "agent_int.h"
#include "json.h"
#include "lastgood.h"
#include "log.h"
#include "statement.h"
#include "util.h"
#include "xmalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const fail_names[TF_N] = {
	"unsigned", "malformed", "unknown_key", "bad_signature", "expired", "rollback", "mismatch", "digest",
	"approvals",
};

const char *trust_fail_name(enum trust_fail f)
{
	return fail_names[f];
}

static void seed_of(const struct res *r, unsigned char seed[LTHASH_SEED_BYTES])
{
	lthash_seed(r->name, r->body, r->body_len, seed);
}

/* The digest of a whole state: O(resources), at boot and when trust
 * starts. */
static void state_digest(const struct state *s, struct lthash *h)
{
	unsigned char seed[LTHASH_SEED_BYTES];
	lthash_init(h);
	for (size_t i = 0; i < s->cap; i++) {
		if (s->slots[i]) {
			seed_of(s->slots[i], seed);
			lthash_add(h, seed);
		}
	}
}

int trust_init(struct agent *a, char *err, size_t errlen)
{
	char inner[512];
	lthash_init(&a->trust.digest);
	if (sub_parse(a->cfg.sub, &a->trust.sub, inner, sizeof(inner)) < 0) {
		snprintf(err, errlen, "%s", inner);
		return -1;
	}
	if (!a->cfg.trust)
		return 0;
	if (keys_load_trust(a->cfg.trust, &a->trust.keys, err, errlen) < 0)
		return -1;
	a->trust.on = true;
	if (approve_init(a, err, errlen) < 0)
		return -1;
	char kids[TRUST_MAX * (KEY_ID_LEN + 1) + 1] = "";
	for (size_t i = 0; i < a->trust.keys.n; i++) {
		strncat(kids, a->trust.keys.key[i].kid, sizeof(kids) - strlen(kids) - 1);
		if (i + 1 < a->trust.keys.n)
			strncat(kids, ",", sizeof(kids) - strlen(kids) - 1);
	}
	log_info("trust: pushes must carry statements signed by %s (%s)", kids, a->cfg.trust);
	return 0;
}

void trust_release(struct agent *a)
{
	sub_release(&a->trust.sub);
	free(a->trust.statement);
	a->trust.statement = NULL;
}

void trust_reload(struct agent *a)
{
	char err[512];
	struct trust t;
	if (!a->cfg.trust) {
		if (a->trust.on)
			log_warn("SIGHUP: --trust is gone: pushes are no longer verified");
		a->trust.on = false;
		return;
	}
	if (keys_load_trust(a->cfg.trust, &t, err, sizeof(err)) < 0) {
		log_error("SIGHUP: %s (keeping the trusted keys)", err);
		return;
	}
	if (approve_reload(a, &t) < 0)
		return;   /* an approver key would be a statement key too */
	a->trust.keys = t;
	/* a push refused for an untrusted key may verify now: ask again */
	a->trust.behind_since_ms = 0;
	a->retry_at_ms = now_ms();
	if (!a->trust.on) {
		/* not kept while trust was off: from the whole state, once */
		state_digest(&a->state, &a->trust.digest);
		log_info("SIGHUP: pushes are now verified");
	}
	a->trust.on = true;
	log_info("SIGHUP: %zu trusted keys loaded from %s", t.n, a->cfg.trust);
}

static void count(struct agent *a, enum trust_fail f)
{
	a->trust.failures[f]++;
}

/* The statement's word on freshness: until it expires, or --max-staleness
 * after it was issued, whichever comes first. */
static void freshen_at(struct agent *a, int64_t issued, int64_t expires)
{
	int64_t until = expires;
	if (a->cfg.max_staleness > 0 && issued + (int64_t)a->cfg.max_staleness < until)
		until = issued + (int64_t)a->cfg.max_staleness;
	if (until > a->trust.fresh_until)
		a->trust.fresh_until = until;
	if (issued > a->trust.newest_issued)
		a->trust.newest_issued = issued;
}

static void freshen(struct agent *a, const struct statement *st)
{
	freshen_at(a, st->issued, st->expires);
}

/* Verifies a token's signature; counts and describes a failure. */
static int verify(struct agent *a, const char *token, size_t len, struct statement *st, char *err, size_t errlen)
{
	int rc = statement_verify(token, len, &a->trust.keys, st, err, errlen);
	if (rc == 0)
		return 0;
	count(a, rc == STATEMENT_UNKNOWN_KEY ? TF_UNKNOWN_KEY : rc == STATEMENT_BAD_SIGNATURE ? TF_BAD_SIGNATURE
											   : TF_MALFORMED);
	return -1;
}

int trust_check_push(struct agent *a, struct push *p, char *err, size_t errlen)
{
	if (!a->trust.on)
		return 0;
	if (!p->statement) {
		count(a, TF_UNSIGNED);
		snprintf(err, errlen, "unsigned push refused (this node runs with --trust)");
		return -1;
	}
	struct statement st;
	char inner[512];
	if (verify(a, p->statement, strlen(p->statement), &st, inner, sizeof(inner)) < 0) {
		snprintf(err, errlen, "%s", inner);
		return -1;
	}
	int rc = -1;
	int64_t now = wall_seconds();
	if (st.version != p->version) {
		count(a, TF_MISMATCH);
		snprintf(err, errlen, "the statement is for version %llu, the push brings version %llu",
			 (unsigned long long)st.version, (unsigned long long)p->version);
	} else if (strcmp(st.sub, a->trust.sub.canon) != 0) {
		count(a, TF_MISMATCH);
		snprintf(err, errlen, "the statement is for subscription '%.200s', this node's is '%.200s'", st.sub,
			 a->trust.sub.canon);
	} else if (now >= st.expires) {
		count(a, TF_EXPIRED);
		snprintf(err, errlen, "the statement of version %llu expired %llds ago (a replay, or a stalled plane)",
			 (unsigned long long)st.version, (long long)(now - st.expires));
	} else if (st.version < a->trust.hwm) {
		count(a, TF_ROLLBACK);
		snprintf(err, errlen, "rollback refused: version %llu is below the highest version verified (%llu)",
			 (unsigned long long)st.version, (unsigned long long)a->trust.hwm);
	} else if (approve_check(a, p, st.version, st.digest, err, errlen) < 0) {
		count(a, TF_APPROVALS);   /* --approvals: the plane's signature alone is not enough */
	} else {
		rc = 0;
		p->verified.ok = true;
		p->verified.version = st.version;
		memcpy(p->verified.digest, st.digest, sizeof(p->verified.digest));
		memcpy(p->verified.kid, st.kid, sizeof(p->verified.kid));
		p->verified.issued = st.issued;
		p->verified.expires = st.expires;
		p->verified.overridden = st.overridden;
		if (st.version > a->trust.held)
			a->trust.held = st.version;
	}
	statement_release(&st);
	return rc;
}

int trust_check_candidate(struct agent *a, const struct push *m, const struct candidate *c, struct lthash *out,
			  char *err, size_t errlen)
{
	if (!a->trust.on)
		return 0;
	if (!m->verified.ok) {
		count(a, TF_UNSIGNED);
		snprintf(err, errlen, "no verified statement to check the candidate against");
		return -1;
	}
	/* O(changed): what the candidate replaces out, what it brings in */
	*out = a->trust.digest;
	unsigned char seed[LTHASH_SEED_BYTES], d[LTHASH_DIGEST_BYTES];
	for (size_t i = 0; i < c->n; i++) {
		if (c->items[i].old) {
			seed_of(c->items[i].old, seed);
			lthash_sub(out, seed);
		}
		if (c->items[i].new_res) {
			seed_of(c->items[i].new_res, seed);
			lthash_add(out, seed);
		}
	}
	lthash_digest(out, d);
	if (!lthash_digest_equal(d, m->verified.digest)) {
		count(a, TF_DIGEST);
		snprintf(err, errlen, "state digest mismatch: version %llu as pushed is not the state its statement "
			 "signs (a resource changed, dropped, added or mixed in); asking for a snapshot",
			 (unsigned long long)m->verified.version);
		return -1;
	}
	return 0;
}

int trust_check_resumed(struct agent *a, struct push *m, const struct candidate *c, struct lthash *out,
			char *err, size_t errlen)
{
	if (!a->trust.on)
		return 0;
	if (!m->statement) {
		snprintf(err, errlen, "it holds no signed statement (written without --trust)");
		return -1;
	}
	struct statement st;
	char inner[512];
	if (verify(a, m->statement, strlen(m->statement), &st, inner, sizeof(inner)) < 0) {
		snprintf(err, errlen, "%s", inner);
		return -1;
	}
	int rc = -1;
	/* as a push's, but expiry is not required (as for last-good: a
	 * boot after a long outage still finishes what it verified) */
	if (st.version != m->version) {
		count(a, TF_MISMATCH);
		snprintf(err, errlen, "its statement is for version %llu, the candidate is version %llu",
			 (unsigned long long)st.version, (unsigned long long)m->version);
	} else if (strcmp(st.sub, a->trust.sub.canon) != 0) {
		count(a, TF_MISMATCH);
		snprintf(err, errlen, "its statement is for subscription '%.200s', this node's is '%.200s'", st.sub,
			 a->trust.sub.canon);
	} else if (st.version < a->trust.hwm) {
		count(a, TF_ROLLBACK);
		snprintf(err, errlen, "rollback refused: version %llu is below the highest version verified (%llu)",
			 (unsigned long long)st.version, (unsigned long long)a->trust.hwm);
	} else {
		m->verified.ok = true;
		m->verified.version = st.version;
		memcpy(m->verified.digest, st.digest, sizeof(m->verified.digest));
		memcpy(m->verified.kid, st.kid, sizeof(m->verified.kid));
		m->verified.issued = st.issued;
		m->verified.expires = st.expires;
		rc = trust_check_candidate(a, m, c, out, err, errlen);
	}
	statement_release(&st);
	return rc;
}

int trust_check_unvalidated(struct agent *a, struct push *m, char *err, size_t errlen)
{
	if (!a->trust.on || !m->verified.ok)
		return 0;
	/* the push as sent, applied without judging it: is that the signed
	 * state? (A snapshot starts from nothing.) */
	struct lthash h;
	struct buf canon = BUF_INIT;
	unsigned char seed[LTHASH_SEED_BYTES], d[LTHASH_DIGEST_BYTES];
	if (m->full)
		lthash_init(&h);
	else
		h = a->trust.digest;
	for (size_t i = 0; i < m->nup; i++) {
		const struct res *old = m->full ? NULL : state_get(&a->state, m->up[i].name);
		if (old) {
			seed_of(old, seed);
			lthash_sub(&h, seed);
		}
		size_t len = json_encode_canonical_buf(m->up[i].body, &canon);
		lthash_seed(m->up[i].name, canon.data, len, seed);
		lthash_add(&h, seed);
	}
	for (size_t i = 0; !m->full && i < m->nrm; i++) {
		const struct res *old = state_get(&a->state, m->removed[i]);
		if (old) {
			seed_of(old, seed);
			lthash_sub(&h, seed);
		}
	}
	buf_release(&canon);
	lthash_digest(&h, d);
	if (lthash_digest_equal(d, m->verified.digest))
		return 0;
	count(a, TF_DIGEST);
	snprintf(err, errlen, "state digest mismatch: version %llu as pushed is not the state its statement signs "
		 "(and it does not validate either: changed in transit); asking for a snapshot",
		 (unsigned long long)m->verified.version);
	return -1;
}

void trust_applied(struct agent *a, const struct push *m, const struct lthash *digest)
{
	if (!a->trust.on || !m->statement || !m->verified.ok)
		return;
	a->trust.digest = *digest;
	free(a->trust.statement);
	a->trust.statement = xstrdup(m->statement);
	memcpy(a->trust.kid, m->verified.kid, sizeof(a->trust.kid));
	a->trust.issued = m->verified.issued;
	if (m->verified.version > a->trust.hwm)
		a->trust.hwm = m->verified.version;
	freshen_at(a, m->verified.issued, m->verified.expires);
	a->trust.want_snapshot = false;
	a->trust.mismatches = 0;
	a->trust.behind_since_ms = 0;
	a->trust.resyncs = 0;
}

/* A new key signed the state we hold (a rotation): keep its statement in
 * last-good, so the old key can leave --trust without orphaning it. */
static void persist_statement(struct agent *a, const char *token, const struct statement *st)
{
	char err[1024];
	struct candidate c;
	memset(&c, 0, sizeof(c));
	c.version = a->state.version;
	c.statement = token;
	if (lastgood_save(a->lg, &a->state, &c, err, sizeof(err)) < 0) {
		log_warn("trust: cannot keep key %s's statement of version %llu in last-good: %s", st->kid,
			 (unsigned long long)st->version, err);
		return;
	}
	free(a->trust.statement);
	a->trust.statement = xstrdup(token);
	memcpy(a->trust.kid, st->kid, sizeof(a->trust.kid));
	a->trust.issued = st->issued;
	log_info("trust: version %llu is now vouched for by key %s (kept in last-good)",
		 (unsigned long long)st->version, st->kid);
}

void trust_heartbeat(struct agent *a, const char *token, size_t len)
{
	if (!a->trust.on)
		return;
	struct statement st;
	char err[512];
	if (verify(a, token, len, &st, err, sizeof(err)) < 0) {
		log_warn("trust: a heartbeat's statement is refused: %s", err);
		metrics_write(a);
		return;
	}
	if (strcmp(st.sub, a->trust.sub.canon) != 0) {
		count(a, TF_MISMATCH);
		log_warn("trust: a heartbeat's statement is for subscription '%.200s', not ours", st.sub);
	} else if (st.version < a->state.version) {
		/* it vouches for an older state: a replay says nothing new */
		log_debug("trust: a heartbeat's statement is of version %llu, below ours (%llu): ignored",
			  (unsigned long long)st.version, (unsigned long long)a->state.version);
	} else if (wall_seconds() >= st.expires) {
		count(a, TF_EXPIRED);
		log_debug("trust: a heartbeat's statement of version %llu has expired", (unsigned long long)st.version);
	} else if (st.version > a->state.version) {
		/* the plane stands by a newer version: we are behind, and only
		 * a statement of what we run keeps us fresh. A push of it that
		 * never came, or that our trust refused (a key not trusted yet,
		 * a tampered one), is asked for again, a little later each time;
		 * one our consumer refused (held) is not. */
		a->plane_version = st.version;
		if (st.version > a->trust.held && !a->nqueue) {
			int64_t now = now_ms();
			double hb = a->heartbeat_s > 0 ? a->heartbeat_s : 10;
			int64_t grace = (int64_t)(3 * hb * 1000);
			if (grace < 2000)
				grace = 2000;
			if (!a->trust.behind_since_ms) {
				a->trust.behind_since_ms = now;
			} else if (now - a->trust.behind_since_ms > grace && !a->retry_at_ms) {
				unsigned n = a->trust.resyncs < 10 ? a->trust.resyncs : 10;
				double cap = a->cfg.backoff_min * (double)(1u << n);
				if (cap > a->cfg.backoff_max)
					cap = a->cfg.backoff_max;
				a->trust.resyncs++;
				a->trust.behind_since_ms = 0;
				a->retry_at_ms = now + (int64_t)(agent_rand01() * cap * 1000.0);
				log_warn("trust: the plane stands by version %llu, no verified push of it came: asking again",
					 (unsigned long long)st.version);
			}
		}
	} else {
		freshen(a, &st);
		a->plane_version = st.version;
		a->trust.behind_since_ms = 0;
		unsigned char ours[LTHASH_DIGEST_BYTES];
		lthash_digest(&a->trust.digest, ours);
		if (a->state.version > 0) {
			if (!lthash_digest_equal(ours, st.digest)) {
				count(a, TF_DIGEST);
				log_warn("trust: the signed state of version %llu is not ours: asking for a snapshot",
					 (unsigned long long)st.version);
				a->trust.want_snapshot = true;
				a->retry_at_ms = now_ms();
			} else if (strcmp(st.kid, a->trust.kid) != 0 && st.issued > a->trust.issued) {
				/* a newer statement by another trusted key (a rotation;
				 * an older one replayed does not flip it back) */
				persist_statement(a, token, &st);
			}
		}
	}
	statement_release(&st);
	metrics_write(a);   /* counters and how long it vouches (status.json is not rewritten for those) */
}

void trust_tick(struct agent *a, int64_t *wake)
{
	if (!a->trust.on || a->state.version == 0)
		return;
	int64_t now = wall_seconds();
	bool stale = now >= a->trust.fresh_until;
	if (stale != a->trust.stale) {
		a->trust.stale = stale;
		if (stale)
			log_warn("trust: stale: the newest valid statement (issued %llds ago) vouched until %lld; "
				 "serving version %llu as it is", (long long)(now - a->trust.newest_issued),
				 (long long)a->trust.fresh_until, (unsigned long long)a->state.version);
		else
			log_info("trust: fresh again (a valid statement until %lld)", (long long)a->trust.fresh_until);
		agent_write_status(a);
	}
	if (!stale && wake) {
		int64_t at = now_ms() + (a->trust.fresh_until - now) * 1000 + 1;
		if (at < *wake)
			*wake = at;
	}
}

int trust_boot_verify(void *ctx, const struct state *s, const char *statement, char *err, size_t errlen)
{
	struct agent *a = ctx;
	if (!a->trust.on)
		return 0;
	if (!statement || !*statement) {
		snprintf(err, errlen, "it holds no signed statement (written without --trust)");
		return -1;
	}
	struct statement st;
	char inner[512];
	if (verify(a, statement, strlen(statement), &st, inner, sizeof(inner)) < 0) {
		snprintf(err, errlen, "%s", inner);
		return -1;
	}
	int rc = -1;
	struct lthash h;
	unsigned char d[LTHASH_DIGEST_BYTES];
	/* the plane did sign this version: whatever the state beside it, no
	 * lower one may come back (the rollback mark survives a refusal) */
	if (st.version > a->trust.hwm)
		a->trust.hwm = st.version;
	state_digest(s, &h);
	lthash_digest(&h, d);
	if (st.version != s->version) {
		snprintf(err, errlen, "its statement is of version %llu, its state of version %llu",
			 (unsigned long long)st.version, (unsigned long long)s->version);
	} else if (!lthash_digest_equal(d, st.digest)) {
		count(a, TF_DIGEST);
		snprintf(err, errlen, "state digest mismatch: its state is not what version %llu's statement signs "
			 "(tampered with, or damaged)", (unsigned long long)s->version);
	} else {
		a->trust.digest = h;
		free(a->trust.statement);
		a->trust.statement = xstrdup(statement);
		memcpy(a->trust.kid, st.kid, sizeof(a->trust.kid));
		a->trust.issued = st.issued;
		if (st.version > a->trust.hwm)
			a->trust.hwm = st.version;
		freshen(a, &st);
		rc = 0;
	}
	statement_release(&st);
	return rc;
}
