/* persist/etcd/vlog.c: the version log in etcd (persist.h's log_* ops):
 *   vlog/VERSION  (20 digits) one version's record, JSON: author, time,
 *                 message, override (absent: none), emergency (true: an
 *                 emergency revert; absent: not), names, and changes
 *                 [{name, before, after}]
 *   vrev/TO       "FROM BY": versions (FROM, TO] were reverted by BY (a
 *                 rollout's revert)
 *   vlog_floor    the oldest version whose state the log can rebuild
 * written inside the commit's transaction (up to five more operations:
 * the record, a revert's mark, the trim as two range deletes, and the
 * floor). The trim drops the versions past --history-keep and those
 * recorded before now - --history-max-age (oldest first, up to the first
 * younger one); the keeper's log_trim makes the age trim when no commit
 * comes. The floor never moves down: a txn that moves it compares it with
 * the value it was computed on. A record over RECORD_MAX keeps the names
 * only and moves the floor to its version. What the log knows between
 * commits (its floor, and a time no record above it is older than) is
 * cached, so etcd is read for the age trim only when a record is due.
 * Reads scan the vlog/ keys. */
#include "buf.h"
#include "json.h"
#include "log.h"
#include "persist/etcd/etcd.h"
#include "util.h"
#include "xmalloc.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DIGITS 20
/* A record larger than this keeps the names only (see etcd_vlog_ops). */
#define RECORD_MAX ((size_t)256 << 10)
/* Records read a request when looking for the aged ones: one first (the
 * oldest is most often young enough), then more. */
#define AGE_PAGE 16

struct etcd_vlog_cache {
	pthread_mutex_t lock;
	bool known;        /* floor is etcd's as of the last commit, trim or watch event */
	uint64_t floor;
	int64_t oldest;    /* no record above the floor is older (INT64_MIN: unknown) */
};

struct etcd_vlog_cache *etcd_vlog_cache_new(void)
{
	struct etcd_vlog_cache *vc = xcalloc(1, sizeof(*vc));
	pthread_mutex_init(&vc->lock, NULL);
	vc->oldest = INT64_MIN;
	return vc;
}

void etcd_vlog_cache_free(struct etcd_vlog_cache *vc)
{
	if (!vc)
		return;
	pthread_mutex_destroy(&vc->lock);
	free(vc);
}

static void put_body(struct buf *b, const char *body, size_t len)
{
	if (body)
		buf_append(b, body, len);   /* canonical JSON already */
	else
		buf_puts(b, "null");
}

/* Deletes every vlog/ and vrev/ key of a version <= drop, and sets the
 * floor. (etcd refuses a txn that puts a key a range of it deletes: the
 * caller puts nothing at or below drop.) */
static void drop_through(struct persist *p, cJSON *ops, uint64_t drop, uint64_t floor)
{
	static const char *const kinds[] = { "vlog/", "vrev/" };
	for (size_t i = 0; drop && i < 2; i++) {
		char *from = persist_etcd_key(p, "%s", kinds[i]);
		char *to = persist_etcd_key(p, "%s%0*llu", kinds[i], DIGITS, (unsigned long long)drop + 1);
		char *to64 = etcd_b64(to, strlen(to));
		persist_etcd_txn_delete(ops, from, to64);
		free(to64);
		free(to);
		free(from);
	}
	char num[32];
	snprintf(num, sizeof(num), "%llu", (unsigned long long)floor);
	char *k = persist_etcd_key(p, "vlog_floor");
	persist_etcd_txn_put(ops, k, num, strlen(num));
	free(k);
}

/* A record's start: {"author","time","message","names":[...]  (open). */
static void record_head(struct buf *b, const struct persist_commit *c)
{
	buf_puts(b, "{\"author\":");
	buf_json_string(b, c->author ? c->author : "");
	buf_printf(b, ",\"time\":%lld,\"message\":", (long long)c->now);
	buf_json_string(b, c->message ? c->message : "");
	if (c->override)   /* JSON the writer made: {"passed","reason"} */
		buf_printf(b, ",\"override\":%s", c->override);
	if (c->emergency)   /* tetherctl revert --now */
		buf_puts(b, ",\"emergency\":true");
	buf_puts(b, ",\"names\":[");
	for (size_t i = 0; i < c->nchanges; i++) {
		if (i)
			buf_putc(b, ',');
		buf_json_string(b, c->changes[i].name);
	}
	buf_putc(b, ']');
}

/* The version a vlog/ key names (0: not one). */
static uint64_t key_version(const char *t, size_t len);

/* The vlog_floor key's value: 0 or ETCD_UNAVAILABLE/-1 with err. */
static int read_floor(struct persist *p, uint64_t *floor, char *err, size_t errlen)
{
	char *k = persist_etcd_key(p, "vlog_floor"), *v = NULL;
	size_t len;
	int rc = persist_etcd_get(p, k, &v, &len, err, errlen);
	free(k);
	*floor = 0;
	if (rc == 1) {
		char num[32];
		snprintf(num, sizeof(num), "%.*s", (int)(len < 31 ? len : 31), v);
		if (parse_u64(num, floor) < 0) {
			snprintf(err, errlen, "etcd: vlog_floor is not a version");
			rc = -1;
		}
	}
	free(v);
	return rc < 0 ? rc : 0;
}

/* Reads the records in (plan->was, below) oldest first, up to the first
 * recorded at or after cutoff: plan->age gets the version before it,
 * plan->oldest its time (now when every one is older). */
static int scan_aged(struct persist *p, int64_t cutoff, uint64_t below, int64_t now, struct etcd_vlog_plan *plan,
		     char *err, size_t errlen)
{
	char *pre = persist_etcd_key(p, "vlog/");
	size_t plen = strlen(pre);
	char *first = persist_etcd_key(p, "vlog/%0*llu", DIGITS, (unsigned long long)plan->was + 1);
	char *from = etcd_b64(first, strlen(first)), *to;
	free(first);
	if (below == UINT64_MAX) {
		to = etcd_prefix_end_b64(pre);
	} else {
		char *last = persist_etcd_key(p, "vlog/%0*llu", DIGITS, (unsigned long long)below);
		to = etcd_b64(last, strlen(last));
		free(last);
	}
	bool young = false;
	int rc = 0, page = 1;
	while (plan->was + 1 < below) {   /* else no record is in range */
		cJSON *b = cJSON_CreateObject(), *resp = NULL;
		cJSON_AddStringToObject(b, "key", from);
		cJSON_AddStringToObject(b, "range_end", to);
		cJSON_AddNumberToObject(b, "limit", page);
		page = page * 4 < AGE_PAGE ? page * 4 : AGE_PAGE;
		rc = etcd_call(persist_etcd_client(p), "/v3/kv/range", b, &resp, err, errlen);
		if (rc < 0)
			break;
		const cJSON *kvs = cJSON_GetObjectItemCaseSensitive(resp, "kvs"), *kv;
		struct etcd_kv last = { 0 };
		cJSON_ArrayForEach(kv, kvs) {
			struct etcd_kv d;
			if (etcd_kv_decode(kv, false, &d) < 0)
				continue;
			uint64_t v = d.key_len > plen ? key_version(d.key + plen, d.key_len - plen) : 0;
			cJSON *doc = v && d.value ? cJSON_ParseWithLength(d.value, d.value_len) : NULL;
			const cJSON *t = cJSON_GetObjectItemCaseSensitive(doc, "time");
			if (cJSON_IsNumber(t)) {   /* a damaged record decides nothing */
				int64_t when = (int64_t)t->valuedouble;
				if (when < cutoff) {
					plan->age = v;
				} else {
					plan->oldest = when;
					young = true;
				}
			}
			cJSON_Delete(doc);
			etcd_kv_release(&last);
			last = d;
			if (young)
				break;
		}
		bool more = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resp, "more"));
		cJSON_Delete(resp);
		if (young || !more || !last.key) {
			etcd_kv_release(&last);
			break;
		}
		free(from);
		last.key = xrealloc(last.key, last.key_len + 1);
		last.key[last.key_len] = '\0';
		from = etcd_b64(last.key, last.key_len + 1);   /* just past it */
		etcd_kv_release(&last);
	}
	free(pre);
	free(from);
	free(to);
	if (rc == 0 && !young)
		plan->oldest = now;   /* what is recorded from now on is younger */
	return rc;
}

/* The age trim of the records below below at now (max_age 0: none). */
static int plan_at(struct persist *p, int64_t now, int64_t max_age, uint64_t below, struct etcd_vlog_plan *plan,
		   char *err, size_t errlen)
{
	struct etcd_vlog_cache *vc = persist_etcd_vlog_cache(p);
	memset(plan, 0, sizeof(*plan));
	pthread_mutex_lock(&vc->lock);
	bool known = vc->known;
	plan->was = vc->floor;
	plan->oldest = known ? vc->oldest : INT64_MIN;
	pthread_mutex_unlock(&vc->lock);
	if (!known) {
		int rc = read_floor(p, &plan->was, err, errlen);
		if (rc < 0)
			return rc;
	}
	if (max_age <= 0)
		return 0;
	int64_t cutoff = now - max_age;
	if (plan->oldest != INT64_MIN && plan->oldest >= cutoff)
		return 0;   /* nothing is old enough yet: no request */
	return scan_aged(p, cutoff, below, now, plan, err, errlen);
}

int etcd_vlog_plan(struct persist *p, const struct persist_commit *c, struct etcd_vlog_plan *plan, char *err,
		   size_t errlen)
{
	return plan_at(p, c->now, c->log_keep ? c->log_max_age : 0, c->version, plan, err, errlen);
}

void etcd_vlog_landed(struct persist *p, const struct etcd_vlog_plan *plan, bool ok)
{
	struct etcd_vlog_cache *vc = persist_etcd_vlog_cache(p);
	pthread_mutex_lock(&vc->lock);
	if (!ok) {
		/* not known to have landed, or etcd held another floor */
		vc->known = false;
		vc->oldest = INT64_MIN;
	} else {
		uint64_t floor = plan->floor > plan->was ? plan->floor : plan->was;
		if (!vc->known || vc->oldest < plan->oldest)
			vc->oldest = plan->oldest;   /* both bounds hold: the higher */
		if (floor > vc->floor)
			vc->floor = floor;
		vc->known = true;
	}
	pthread_mutex_unlock(&vc->lock);
}

void etcd_vlog_seen_floor(struct persist *p, const char *value, size_t len)
{
	struct etcd_vlog_cache *vc = persist_etcd_vlog_cache(p);
	uint64_t v;
	char num[32];
	snprintf(num, sizeof(num), "%.*s", (int)(len < 31 ? len : 31), value);
	if (parse_u64(num, &v) < 0)
		return;
	pthread_mutex_lock(&vc->lock);
	if (v > vc->floor)
		vc->floor = v;
	pthread_mutex_unlock(&vc->lock);
}

/* Adds to a txn's compares: vlog_floor still holds was; and to its
 * failure ops a range of it (floor_is reads it back). */
static void compare_floor(struct persist *p, cJSON *cmp, cJSON *fail, uint64_t was)
{
	char *k = persist_etcd_key(p, "vlog_floor"), *k64 = etcd_b64(k, strlen(k)), num[32];
	snprintf(num, sizeof(num), "%llu", (unsigned long long)was);
	char *v64 = etcd_b64(num, strlen(num));
	cJSON *cc = cJSON_CreateObject();
	cJSON_AddStringToObject(cc, "key", k64);
	cJSON_AddStringToObject(cc, "result", "EQUAL");
	cJSON_AddStringToObject(cc, "target", "VALUE");
	cJSON_AddStringToObject(cc, "value", v64);
	cJSON_AddItemToArray(cmp, cc);
	if (fail) {
		cJSON *r = cJSON_CreateObject(), *rr = cJSON_CreateObject();
		cJSON_AddStringToObject(rr, "key", k64);
		cJSON_AddItemToObject(r, "request_range", rr);
		cJSON_AddItemToArray(fail, r);
	}
	free(v64);
	free(k64);
	free(k);
}

bool etcd_vlog_floor_is(const cJSON *resp, size_t at, uint64_t was)
{
	const cJSON *rs = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(resp, "responses"), (int)at);
	const cJSON *kvs = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(rs, "response_range"),
							     "kvs");
	struct etcd_kv kv;
	if (cJSON_GetArraySize(kvs) < 1 || etcd_kv_decode(cJSON_GetArrayItem(kvs, 0), false, &kv) < 0)
		return false;
	char num[32];
	uint64_t v;
	snprintf(num, sizeof(num), "%.*s", (int)(kv.value_len < 31 ? kv.value_len : 31), kv.value ? kv.value : "");
	bool same = parse_u64(num, &v) == 0 && v == was;
	etcd_kv_release(&kv);
	return same;
}

/* The record of c (its bodies too when they fit) and its revert mark;
 * versions <= *drop go and the floor moves to *floor. */
static void record_ops(struct persist *p, cJSON *ops, const struct persist_commit *c, uint64_t was, uint64_t *drop,
		       uint64_t *floor)
{
	struct buf b = BUF_INIT;
	record_head(&b, c);
	buf_puts(&b, ",\"changes\":[");
	for (size_t i = 0; i < c->nchanges; i++) {
		const struct persist_change *x = &c->changes[i];
		buf_puts(&b, i ? ",{\"name\":" : "{\"name\":");
		buf_json_string(&b, x->name);
		buf_puts(&b, ",\"before\":");
		put_body(&b, c->before ? c->before[i] : NULL, c->before ? c->before_len[i] : 0);
		buf_puts(&b, ",\"after\":");
		put_body(&b, x->body, x->body_len);
		buf_putc(&b, '}');
	}
	buf_puts(&b, "]}");
	if (b.len > RECORD_MAX) {
		/* etcd takes a request of --max-request-bytes (1.5 MiB by
		 * default), and the bodies before and after would double the
		 * commit: the record keeps the names, and the log can rebuild
		 * no state before this version (the floor moves to it) */
		buf_reset(&b);
		record_head(&b, c);
		buf_puts(&b, ",\"changes\":[],\"bodies\":false}");
		*drop = c->version - 1;
		*floor = c->version;
	}
	char *k = persist_etcd_key(p, "vlog/%0*llu", DIGITS, (unsigned long long)c->version);
	persist_etcd_txn_put(ops, k, b.data, b.len);
	free(k);
	buf_release(&b);
	if (c->reverts_to > *drop && c->reverts_to > was) {
		char v[64];
		snprintf(v, sizeof(v), "%llu %llu", (unsigned long long)c->reverts_from, (unsigned long long)c->version);
		k = persist_etcd_key(p, "vrev/%0*llu", DIGITS, (unsigned long long)c->reverts_to);
		persist_etcd_txn_put(ops, k, v, strlen(v));
		free(k);
	}
}

void etcd_vlog_ops(struct persist *p, cJSON *cmp, cJSON *ops, cJSON *fail, const struct persist_commit *c,
		   struct etcd_vlog_plan *plan)
{
	uint64_t drop, floor;   /* versions <= drop go; the floor moves to floor */
	if (!c->log_keep) {
		/* no history: nothing before this version can be rebuilt */
		drop = c->version - 1;
		floor = c->version;
	} else {
		drop = c->version > c->log_keep ? c->version - c->log_keep : 0;
		if (plan->age > drop)
			drop = plan->age;   /* recorded before now - --history-max-age */
		floor = drop;
		record_ops(p, ops, c, plan->was, &drop, &floor);
	}
	if (floor > plan->was) {
		/* the floor only moves up: compared with what it was */
		compare_floor(p, cmp, fail, plan->was);
		drop_through(p, ops, drop, floor);
		plan->floor = floor;
	}
}

int etcd_vlog_trim(struct persist *p, int64_t now, int64_t max_age, char *err, size_t errlen)
{
	struct etcd_vlog_plan plan;
	if (plan_at(p, now, max_age, UINT64_MAX, &plan, err, errlen) < 0)
		return -1;
	if (plan.age <= plan.was) {
		etcd_vlog_landed(p, &plan, true);   /* what the scan learnt */
		return 0;
	}
	cJSON *body = cJSON_CreateObject(), *resp = NULL;
	cJSON *cmp = cJSON_AddArrayToObject(body, "compare"), *ops = cJSON_AddArrayToObject(body, "success");
	compare_floor(p, cmp, NULL, plan.was);
	drop_through(p, ops, plan.age, plan.age);
	int rc = etcd_call(persist_etcd_client(p), "/v3/kv/txn", body, &resp, err, errlen);
	bool ok = rc == 0 && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resp, "succeeded"));
	cJSON_Delete(resp);
	plan.floor = plan.age;
	etcd_vlog_landed(p, &plan, ok);   /* not ok: read again next time */
	if (ok)
		log_info("history: dropped the versions through %llu, older than %llds", (unsigned long long)plan.age,
			 (long long)max_age);
	return rc < 0 ? -1 : 0;
}

int etcd_vlog_start(struct persist *p, uint64_t version, char *err, size_t errlen)
{
	char *k = persist_etcd_key(p, "vlog_floor"), *v = NULL;
	size_t len;
	int rc = persist_etcd_get(p, k, &v, &len, err, errlen);
	if (rc == 0) {
		/* no log yet: it starts at the version the store holds now */
		char num[32];
		snprintf(num, sizeof(num), "%llu", (unsigned long long)version);
		rc = persist_etcd_put(p, k, num, strlen(num), err, errlen);
	}
	free(v);
	free(k);
	return rc < 0 ? -1 : 0;
}

int etcd_vlog_floor(struct persist *p, uint64_t *floor, char *err, size_t errlen)
{
	return read_floor(p, floor, err, errlen) < 0 ? -1 : 0;
}

/* ---- reading ---------------------------------------------------------------- */

struct rec {
	uint64_t version;
	cJSON *doc;
};
struct mark {
	uint64_t from, to, by;
};
struct scan {
	size_t vlen, rlen;           /* of the vlog/ and vrev/ prefixes */
	uint64_t lo, hi;             /* versions kept: (lo, hi] */
	struct rec *r;
	size_t n, cap;
	struct mark *m;
	size_t nm;
};

static uint64_t key_version(const char *t, size_t len)
{
	if (len != DIGITS)
		return 0;
	uint64_t v = 0;
	for (size_t i = 0; i < DIGITS; i++) {
		if (t[i] < '0' || t[i] > '9' || v > (UINT64_MAX - 9) / 10)
			return 0;
		v = v * 10 + (uint64_t)(t[i] - '0');
	}
	return v;
}

static int collect_vlog(void *ctx, const struct etcd_kv *kv)
{
	struct scan *s = ctx;
	uint64_t v = kv->key_len > s->vlen ? key_version(kv->key + s->vlen, kv->key_len - s->vlen) : 0;
	if (!v || v <= s->lo || v > s->hi)
		return 0;
	cJSON *doc = cJSON_ParseWithLength(kv->value, kv->value_len);
	if (!doc)
		return 0;   /* a damaged record: left out */
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 64;
		s->r = xrealloc(s->r, s->cap * sizeof(*s->r));
	}
	s->r[s->n++] = (struct rec){ v, doc };
	return 0;
}

static int collect_vrev(void *ctx, const struct etcd_kv *kv)
{
	struct scan *s = ctx;
	uint64_t to = kv->key_len > s->rlen ? key_version(kv->key + s->rlen, kv->key_len - s->rlen) : 0;
	unsigned long long from, by;
	char tmp[64];
	snprintf(tmp, sizeof(tmp), "%.*s", (int)(kv->value_len < 63 ? kv->value_len : 63), kv->value);
	if (!to || sscanf(tmp, "%llu %llu", &from, &by) != 2)
		return 0;
	s->m = xrealloc(s->m, (s->nm + 1) * sizeof(*s->m));
	s->m[s->nm++] = (struct mark){ from, to, by };
	return 0;
}

static int by_version(const void *a, const void *b)
{
	const struct rec *x = a, *y = b;
	return x->version < y->version ? -1 : x->version > y->version;
}

static void scan_release(struct scan *s)
{
	for (size_t i = 0; i < s->n; i++)
		cJSON_Delete(s->r[i].doc);
	free(s->r);
	free(s->m);
}

/* The records in (lo, hi], ascending, with the revert marks. */
static int scan(struct persist *p, uint64_t lo, uint64_t hi, bool marks, struct scan *s, char *err, size_t errlen)
{
	memset(s, 0, sizeof(*s));
	s->lo = lo;
	s->hi = hi;
	char *vp = persist_etcd_key(p, "vlog/"), *rp = persist_etcd_key(p, "vrev/");
	s->vlen = strlen(vp);
	s->rlen = strlen(rp);
	int rc = etcd_range_prefix(persist_etcd_client(p), vp, false, 0, collect_vlog, s, NULL, err, errlen);
	if (rc == 0 && marks)
		rc = etcd_range_prefix(persist_etcd_client(p), rp, false, 0, collect_vrev, s, NULL, err, errlen);
	free(vp);
	free(rp);
	if (rc < 0) {
		scan_release(s);
		return -1;
	}
	if (s->n > 1)   /* s->r is NULL when the log is empty: qsort wants an array */
		qsort(s->r, s->n, sizeof(*s->r), by_version);
	return 0;
}

static uint64_t reverted_by(const struct scan *s, uint64_t v)
{
	uint64_t by = 0;
	for (size_t i = 0; i < s->nm; i++)
		if (v > s->m[i].from && v <= s->m[i].to && (!by || s->m[i].by < by))
			by = s->m[i].by;
	return by;
}

static bool touches(const cJSON *doc, const char *name)
{
	const cJSON *names = cJSON_GetObjectItemCaseSensitive(doc, "names");
	for (const cJSON *n = names ? names->child : NULL; n; n = n->next)
		if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0)
			return true;
	return false;
}

static int emit(const struct scan *s, const struct rec *r, persist_version_cb cb, void *ctx)
{
	const char *author = json_get_string(r->doc, "author"), *message = json_get_string(r->doc, "message");
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(r->doc, "time");
	char *names = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(r->doc, "names"));
	const cJSON *ov = cJSON_GetObjectItemCaseSensitive(r->doc, "override");
	char *override = cJSON_IsObject(ov) ? json_encode_canonical((cJSON *)ov) : NULL;
	struct persist_version v = {
		.version = r->version, .author = author ? author : "", .message = message ? message : "",
		.names = names ? names : "[]", .time = cJSON_IsNumber(t) ? (int64_t)t->valuedouble : 0,
		.reverted_by = reverted_by(s, r->version), .override = override,
		.emergency = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r->doc, "emergency")),
	};
	int rc = cb(ctx, &v);
	cJSON_free(names);
	free(override);
	return rc;
}

int etcd_vlog_list(struct persist *p, const char *name, size_t limit, persist_version_cb cb, void *ctx, char *err,
		   size_t errlen)
{
	struct scan s;
	if (scan(p, 0, UINT64_MAX, true, &s, err, errlen) < 0)
		return -1;
	size_t sent = 0;
	int rc = 0;
	for (size_t i = s.n; i-- > 0 && sent < limit && rc == 0;) {
		if (name && !touches(s.r[i].doc, name))
			continue;
		rc = emit(&s, &s.r[i], cb, ctx);
		sent++;
	}
	scan_release(&s);
	return rc;
}

static int emit_change(const cJSON *ch, uint64_t version, persist_vchange_cb cb, void *ctx)
{
	const char *name = json_get_string(ch, "name");
	if (!name)
		return 0;
	const cJSON *b = cJSON_GetObjectItemCaseSensitive(ch, "before");
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(ch, "after");
	char *bt = b && !cJSON_IsNull(b) ? json_encode_canonical((cJSON *)b) : NULL;
	char *at = a && !cJSON_IsNull(a) ? json_encode_canonical((cJSON *)a) : NULL;
	struct persist_vchange c = { version, name, bt, at, bt ? strlen(bt) : 0, at ? strlen(at) : 0 };
	int rc = cb(ctx, &c);
	cJSON_free(bt);
	cJSON_free(at);
	return rc;
}

int etcd_vlog_get(struct persist *p, uint64_t version, persist_version_cb vcb, persist_vchange_cb ccb, void *ctx,
		  char *err, size_t errlen)
{
	struct scan s;
	if (scan(p, version ? version - 1 : 0, version, true, &s, err, errlen) < 0)
		return -1;
	int rc = 0;
	if (s.n == 1) {
		rc = emit(&s, &s.r[0], vcb, ctx);
		const cJSON *chs = cJSON_GetObjectItemCaseSensitive(s.r[0].doc, "changes");
		for (const cJSON *ch = chs ? chs->child : NULL; ch && rc == 0; ch = ch->next)
			rc = emit_change(ch, version, ccb, ctx);
		rc = rc < 0 ? -1 : 1;
	}
	scan_release(&s);
	return rc;
}

int etcd_vlog_after(struct persist *p, uint64_t v, uint64_t upto, const char *name, persist_vchange_cb cb,
		    void *ctx, char *err, size_t errlen)
{
	struct scan s;
	if (scan(p, v, upto, false, &s, err, errlen) < 0)
		return -1;
	/* per name, its first change after v: walk ascending, once a name */
	cJSON *seen = cJSON_CreateObject();
	int rc = 0;
	for (size_t i = 0; i < s.n && rc == 0; i++) {
		const cJSON *chs = cJSON_GetObjectItemCaseSensitive(s.r[i].doc, "changes");
		for (const cJSON *ch = chs ? chs->child : NULL; ch && rc == 0; ch = ch->next) {
			const char *n = json_get_string(ch, "name");
			if (!n || (name && strcmp(n, name) != 0) || cJSON_GetObjectItemCaseSensitive(seen, n))
				continue;
			cJSON_AddTrueToObject(seen, n);
			rc = emit_change(ch, s.r[i].version, cb, ctx);
		}
	}
	cJSON_Delete(seen);
	scan_release(&s);
	return rc;
}
