/* fresh.c: whether the plane tetherd is on is current, and the move to one
 * that is. A plane (a replica cut off from etcd, a relay whose upstream is
 * gone) says it is stale in its heartbeats and pushes ("stale" member) and
 * poll answers (Tether-Stale header); saying nothing is fresh. While the
 * plane dialled now says stale and --plane lists others, the others'
 * GET /healthz are probed one at a time (after --move-jitter, in list
 * order, planes seen stale lately last) and the agent moves to the first
 * that answers 200 (sync_move_to: a delta from the applied version, as any
 * reconnect). When none does it stays, says so once, and probes again
 * every heartbeat interval while the plane stays stale. Moves off stale
 * planes back off (FRESH_MOVE_*), and the agent never moves back to a plane
 * just because it recovered. The pure decisions are at the top (fresh.h,
 * unit-tested); transfers start and end only in fresh_tick and fresh_done,
 * called from the event loop, never from inside a transfer's callback
 * (fresh_heard runs inside one). */
#include "agent_int.h"
#include "credentials.h"
#include "json.h"
#include "log.h"
#include "util.h"
#include "xmalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFAULT_ROUND_S 10.0     /* between rounds of probes, before a heartbeat said its interval */
#define MIN_ROUND_S 1.0          /* ... and never more often (a plane may beat faster) */
#define PROBE_ANSWER_MS 5000     /* a probe's answer, after its connection */
#define PROBE_BODY_MAX 4096      /* a /healthz answer is short */

/* ---- pure: reading what a plane says, and the decisions ---------------- */

/* The length of the UTF-8 character at s[0..left), or 0 when it is not
 * one (a stray continuation, an overlong form, a surrogate, past U+10FFFF,
 * cut short). */
static size_t utf8_char_len(const unsigned char *s, size_t left)
{
	unsigned char c = s[0];
	size_t n;
	unsigned lo = 0x80, hi = 0xbf;   /* the second byte's range */
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		if (c == 0xe0)
			lo = 0xa0;
		else if (c == 0xed)
			hi = 0x9f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f;
	} else {
		return 0;
	}
	if (left < n || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return n;
}

void fresh_clean_text(char *dst, size_t cap, const char *src, size_t len)
{
	const unsigned char *s = (const unsigned char *)src;
	size_t o = 0, i = 0;
	while (i < len) {
		size_t n = utf8_char_len(s + i, len - i);
		bool ok = n > 1 || (n == 1 && s[i] >= 0x20 && s[i] != 0x7f);
		size_t w = ok ? n : 1;   /* bytes written, and read */
		if (o + w >= cap)
			break;
		if (ok)
			memcpy(dst + o, s + i, n);
		else
			dst[o] = '?';
		o += w;
		i += w;
	}
	dst[o] = '\0';
}

void fresh_stale_from_json(const cJSON *member, struct plane_stale *out)
{
	memset(out, 0, sizeof(*out));
	if (!member || cJSON_IsNull(member) || cJSON_IsFalse(member))
		return;
	out->on = true;
	if (!cJSON_IsObject(member))
		return;
	uint64_t since;
	if (json_get_u64(cJSON_GetObjectItemCaseSensitive(member, "since"), &since))
		out->since = (int64_t)since;
	const char *why = json_get_string(member, "why");
	if (why)
		fresh_clean_text(out->why, sizeof(out->why), why, strlen(why));
}

void fresh_stale_from_header(const char *v, size_t len, struct plane_stale *out)
{
	memset(out, 0, sizeof(*out));
	out->on = true;
	size_t d = 0;
	int64_t since = 0;
	/* 18 digits at most: no overflow */
	while (d < len && d < 18 && v[d] >= '0' && v[d] <= '9')
		since = since * 10 + (v[d++] - '0');
	if (d > 0 && (d == len || v[d] == ' ')) {
		out->since = since;
		if (d < len)
			d++;   /* the space */
	} else {
		d = 0;     /* no SINCE: all of it is the reason */
	}
	fresh_clean_text(out->why, sizeof(out->why), v + d, len - d);
}

enum fresh_verdict fresh_judge(long status, const char *body, size_t len, uint64_t have, struct plane_stale *out)
{
	memset(out, 0, sizeof(*out));
	if (status != 200 && status != 503)
		return FRESH_DOWN;
	char err[128];
	struct json_limits lim = { PROBE_BODY_MAX, 4 };
	cJSON *v = body && len ? json_decode(body, len, &lim, err, sizeof(err)) : NULL;
	const char *st = v ? json_get_string(v, "status") : NULL;
	const cJSON *member = v ? cJSON_GetObjectItemCaseSensitive(v, "stale") : NULL;
	fresh_stale_from_json(member, out);
	if (st && strcmp(st, "stale") == 0)
		out->on = true;
	uint64_t version = 0;
	bool has_version = v && json_get_u64(cJSON_GetObjectItemCaseSensitive(v, "version"), &version);
	bool ok = st && strcmp(st, "ok") == 0;
	cJSON_Delete(v);
	if (out->on)
		return FRESH_STALE;
	/* a candidate says it is a plane ("status":"ok", as a plane from
	 * before staleness does too) at a version not behind ours: a proxy's
	 * page, another service, or a plane still catching up would only
	 * draw us to a failed stream or a snapshot */
	return status == 200 && ok && has_version && version >= have ? FRESH_UP : FRESH_DOWN;
}

size_t fresh_order(size_t n, size_t current, const int64_t *seen_stale_ms, int64_t now_ms, size_t *out)
{
	size_t k = 0;
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < n; i++) {
			if (i == current)
				continue;
			bool recent = seen_stale_ms[i] > 0 && now_ms - seen_stale_ms[i] < FRESH_RECENT_STALE_MS;
			if (recent == (pass == 1))
				out[k++] = i;
		}
	}
	return k;
}

int64_t fresh_backoff_ms(const int64_t *moves_ms, size_t n, int64_t now_ms)
{
	int64_t d = 0;
	for (size_t i = 0; i < n; i++)
		if (moves_ms[i] > 0 && now_ms - moves_ms[i] < FRESH_MOVE_WINDOW_MS)
			d += FRESH_MOVE_PENALTY_MS;
	return d < FRESH_MOVE_PENALTY_MAX_MS ? d : FRESH_MOVE_PENALTY_MAX_MS;
}

int64_t fresh_delay_ms(double base_s, double jitter_s, double r01, int64_t backoff_ms)
{
	if (base_s < 0)
		base_s = 0;
	if (jitter_s < 0)
		jitter_s = 0;
	if (r01 < 0)
		r01 = 0;
	return (int64_t)((base_s + r01 * jitter_s) * 1000.0) + (backoff_ms > 0 ? backoff_ms : 0);
}

/* ---- the agent's view and the probes ------------------------------------ */

/* "2024-05-01T10:00:00Z", or "an unknown time" (the plane did not say). */
static void when_text(int64_t since, char *out, size_t cap)
{
	struct tm tm;
	time_t t = (time_t)since;
	if (since <= 0 || !gmtime_r(&t, &tm) || !strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(out, cap, "an unknown time");
}

static void probe_close(struct agent *a)
{
	if (!a->fresh.h)
		return;
	curl_multi_remove_handle(a->multi, a->fresh.h);
	curl_easy_cleanup(a->fresh.h);
	credentials_free_headers(a->fresh.headers);
	a->fresh.h = NULL;
	a->fresh.headers = NULL;
}

/* The next round of probes after base_s (0: the first of a spell of
 * staleness), plus the jitter and the back-off of recent moves. */
static void schedule(struct agent *a, double base_s)
{
	int64_t now = now_ms();
	int64_t backoff = fresh_backoff_ms(a->fresh.moves_ms, FRESH_MOVES_KEPT, now);
	a->fresh.probe_at_ms = now + fresh_delay_ms(base_s, a->cfg.move_jitter, agent_rand01(), backoff);
	a->fresh.probe_due = true;
}

void fresh_heard(struct agent *a, bool stale, int64_t since, const char *why)
{
	struct plane_stale *st = &a->fresh.now;
	char when[64];
	if (a->cfg.once)
		return;
	if (!stale) {
		if (!st->on)
			return;
		when_text(st->since, when, sizeof(when));
		log_info("plane %s is current again (stale since %s)", sync_plane(a), when);
		memset(st, 0, sizeof(*st));
		a->fresh.probe_due = false;   /* a round under way ends at fresh_tick */
		a->fresh.staying_logged = false;
		agent_write_status(a);
		return;
	}
	if (a->plane_idx < AGENT_MAX_PLANES)
		a->fresh.seen_stale_ms[a->plane_idx] = now_ms();
	char clean[FRESH_WHY_MAX];
	fresh_clean_text(clean, sizeof(clean), why ? why : "", why ? strlen(why) : 0);
	bool news = !st->on;
	if (!news && st->since == since && strcmp(st->why, clean) == 0)
		return;
	st->on = true;
	st->since = since;
	memcpy(st->why, clean, sizeof(st->why));
	if (news) {
		when_text(since, when, sizeof(when));
		log_warn("plane %s is stale since %s (%s); %s", sync_plane(a), when,
			 st->why[0] ? st->why : "no reason given",
			 a->cfg.nplanes > 1 ? "looking for a fresh plane" : "no other plane is listed: staying");
	}
	agent_write_status(a);
}

void fresh_plane_changed(struct agent *a)
{
	memset(&a->fresh.now, 0, sizeof(a->fresh.now));
	a->fresh.round = false;
	a->fresh.probe_due = false;
	a->fresh.staying_logged = false;
	a->fresh.epoch++;   /* a probe in flight is void: fresh_tick ends it */
}

void fresh_carry(struct agent *a, const struct agent_config *nc)
{
	int64_t seen[AGENT_MAX_PLANES] = { 0 };
	for (size_t i = 0; i < nc->nplanes && i < AGENT_MAX_PLANES; i++)
		for (size_t j = 0; j < a->cfg.nplanes && j < AGENT_MAX_PLANES; j++)
			if (strcmp(nc->planes[i], a->cfg.planes[j]) == 0)
				seen[i] = a->fresh.seen_stale_ms[j];
	memcpy(a->fresh.seen_stale_ms, seen, sizeof(seen));
	/* the round's order names indexes of the old list: start over (the
	 * stale view stays with the plane when the new list has it; when it
	 * does not, sync_carry_plane moves and resets it) */
	a->fresh.round = false;
	a->fresh.probe_due = false;
	a->fresh.epoch++;
}

static size_t collect(char *ptr, size_t size, size_t n, void *ud)
{
	struct buf *b = ud;
	size_t len = size * n;
	if (b->len + len > PROBE_BODY_MAX)
		return 0;   /* not a /healthz answer: abort */
	buf_append(b, ptr, len);
	return len;
}

/* GET /healthz of cfg.planes[idx], on the shared multi handle. */
static bool probe_start(struct agent *a, size_t idx)
{
	CURL *h = curl_easy_init();
	if (!h)
		return false;
	buf_reset(&a->fresh.resp);
	char *url = xasprintf("%s/healthz", a->cfg.planes[idx]);
	/* open, but a plane behind mutual TLS wants our certificate: the
	 * same credentials as the stream */
	a->fresh.headers = agent_credentials(a, h, NULL);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, a->fresh.headers);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &a->fresh.resp);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(a->cfg.connect_timeout * 1000));
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(a->cfg.connect_timeout * 1000) + PROBE_ANSWER_MS);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "tetherd/" PACKAGE_VERSION);
	log_debug("fresh: probing %s", url);
	free(url);
	a->fresh.h = h;
	a->fresh.probing = idx;
	curl_multi_add_handle(a->multi, h);
	return true;
}

/* The round found no fresh plane: stay (static stability), say so once a
 * spell, and look again a heartbeat interval later. */
static void round_over(struct agent *a)
{
	a->fresh.round = false;
	if (!a->fresh.staying_logged) {
		log_warn("every plane listed is stale%s; staying on %s at version %llu",
			 a->fresh.round_down ? " or does not answer" : "", sync_plane(a),
			 (unsigned long long)a->state.version);
		a->fresh.staying_logged = true;
	}
	double every = a->heartbeat_s > 0 ? a->heartbeat_s : DEFAULT_ROUND_S;
	schedule(a, every > MIN_ROUND_S ? every : MIN_ROUND_S);
}

/* Probes the round's next candidate; ends the round when none is left. */
static void probe_next(struct agent *a)
{
	while (a->fresh.next < a->fresh.norder) {
		size_t idx = a->fresh.order[a->fresh.next++];
		if (idx < a->cfg.nplanes && probe_start(a, idx))
			return;
		a->fresh.round_down++;
	}
	round_over(a);
}

static void round_start(struct agent *a)
{
	a->fresh.probe_due = false;
	a->fresh.round = true;
	a->fresh.round_epoch = a->fresh.epoch;
	a->fresh.round_down = 0;
	a->fresh.next = 0;
	size_t n = a->cfg.nplanes < AGENT_MAX_PLANES ? a->cfg.nplanes : AGENT_MAX_PLANES;
	a->fresh.norder = fresh_order(n, a->plane_idx, a->fresh.seen_stale_ms, now_ms(), a->fresh.order);
	probe_next(a);
}

void fresh_tick(struct agent *a, int64_t *wake)
{
	bool wanted = a->fresh.now.on && a->cfg.nplanes > 1 && !a->cfg.once;
	bool live = a->fresh.round && a->fresh.round_epoch == a->fresh.epoch;
	if (!wanted || !live) {
		/* the plane is current again, another move came first, or
		 * SIGHUP changed the list: what is in flight is void */
		probe_close(a);
		a->fresh.round = false;
	}
	if (!wanted) {
		a->fresh.probe_due = false;
		return;
	}
	if (a->fresh.round)
		return;   /* a probe is in flight: fresh_done goes on */
	if (!a->fresh.probe_due)
		schedule(a, 0);   /* a spell of staleness starts, or starts over */
	int64_t now = now_ms();
	if (now < a->fresh.probe_at_ms) {
		if (wake && a->fresh.probe_at_ms < *wake)
			*wake = a->fresh.probe_at_ms;
		return;
	}
	round_start(a);
}

/* Moves to cfg.planes[idx], which answered fresh. */
static void move_off(struct agent *a, size_t idx)
{
	char when[64], why[FRESH_WHY_MAX + 1024];
	int64_t now = now_ms();
	when_text(a->fresh.now.since, when, sizeof(when));
	snprintf(why, sizeof(why), "%s is stale since %s (%s)", sync_plane(a), when,
		 a->fresh.now.why[0] ? a->fresh.now.why : "no reason given");
	if (a->plane_idx < AGENT_MAX_PLANES)
		a->fresh.seen_stale_ms[a->plane_idx] = now;
	a->fresh.moves_ms[a->fresh.nmove++ % FRESH_MOVES_KEPT] = now;
	a->m.stale_moves++;
	a->fresh.round = false;
	sync_move_to(a, idx, why);   /* resets the view: the new plane says for itself */
}

void fresh_done(struct agent *a, CURLcode code)
{
	long status = 0;
	curl_easy_getinfo(a->fresh.h, CURLINFO_RESPONSE_CODE, &status);
	size_t idx = a->fresh.probing;
	probe_close(a);
	if (!a->fresh.round || a->fresh.round_epoch != a->fresh.epoch || idx >= a->cfg.nplanes)
		return;   /* void: fresh_tick starts over if it must */
	if (!a->fresh.now.on) {
		/* the plane came back while we looked: no move */
		a->fresh.round = false;
		return;
	}
	struct plane_stale ps;
	enum fresh_verdict v = FRESH_DOWN;
	if (code == CURLE_OK)
		v = fresh_judge(status, a->fresh.resp.data, a->fresh.resp.len, a->state.version, &ps);
	else
		memset(&ps, 0, sizeof(ps));
	if (v == FRESH_UP) {
		move_off(a, idx);
		return;
	}
	if (v == FRESH_STALE) {
		a->fresh.seen_stale_ms[idx] = now_ms();
		log_debug("fresh: %s is stale too (%s)", a->cfg.planes[idx], ps.why);
	} else {
		a->fresh.round_down++;
		log_debug("fresh: %s: %s", a->cfg.planes[idx],
			  code != CURLE_OK ? curl_easy_strerror(code) : "not 200");
	}
	probe_next(a);
}

void fresh_release(struct agent *a)
{
	probe_close(a);
	buf_release(&a->fresh.resp);
}
