/* freeze.c: a freeze window's rules (see freeze.h): TIME, the checks, the
 * record's JSON and the words of a refusal. */
#define _DEFAULT_SOURCE   /* timegm */
#include "freeze.h"
#include "buf.h"
#include "json.h"
#include "xmalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* n digits at s into *v; false when one is not a digit. */
static bool digits(const char *s, int n, int *v)
{
	*v = 0;
	for (int i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		*v = *v * 10 + (s[i] - '0');
	}
	return true;
}

/* "YYYY-MM-DDTHH:MM:SSZ" (a lower-case t or z too, as RFC 3339 allows). */
static int parse_rfc3339(const char *s, int64_t *out)
{
	int y, mo, d, h, mi, sec;
	if (strlen(s) != 20 || !digits(s, 4, &y) || s[4] != '-' || !digits(s + 5, 2, &mo) || s[7] != '-' ||
	    !digits(s + 8, 2, &d) || (s[10] != 'T' && s[10] != 't') || !digits(s + 11, 2, &h) || s[13] != ':' ||
	    !digits(s + 14, 2, &mi) || s[16] != ':' || !digits(s + 17, 2, &sec) || (s[19] != 'Z' && s[19] != 'z'))
		return -1;
	if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 59)
		return -1;
	struct tm tm = { 0 };
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	time_t t = timegm(&tm);
	struct tm back;
	/* 2026-02-30 normalizes to March: refused */
	if (t == (time_t)-1 || !gmtime_r(&t, &back) || back.tm_mday != d || back.tm_mon != mo - 1)
		return -1;
	*out = (int64_t)t;
	return 0;
}

/* "1h30m": digits and a unit, one or more; at most 10 years in all. */
static int parse_duration(const char *s, int64_t *out)
{
	const int64_t cap = 10LL * 366 * 86400;
	int64_t total = 0;
	if (!*s)
		return -1;
	while (*s) {
		int64_t n = 0;
		const char *start = s;
		while (*s >= '0' && *s <= '9') {
			n = n * 10 + (*s - '0');
			if (n > cap)
				return -1;
			s++;
		}
		if (s == start)
			return -1;
		int64_t unit;
		switch (*s) {
		case 's': unit = 1; break;
		case 'm': unit = 60; break;
		case 'h': unit = 3600; break;
		case 'd': unit = 86400; break;
		default: return -1;
		}
		s++;
		if (n > cap / unit || total + n * unit > cap)
			return -1;
		total += n * unit;
	}
	*out = total;
	return 0;
}

int freeze_parse_time(const char *s, int64_t now, int64_t *out, char *err, size_t errlen)
{
	int64_t d;
	if (!s || !*s) {
		snprintf(err, errlen, "no TIME: give 2026-12-06T18:00:00Z (UTC) or a duration such as 90m, 2h, 1d");
		return -1;
	}
	if (strchr(s, '-')) {
		if (parse_rfc3339(s, out) == 0)
			return 0;
		snprintf(err, errlen, "'%.64s' is not a time: give it as 2026-12-06T18:00:00Z (RFC 3339, UTC, whole "
			 "seconds) or a duration such as 90m, 2h, 1d", s);
		return -1;
	}
	if (parse_duration(s, &d) == 0) {
		*out = now + d;
		return 0;
	}
	snprintf(err, errlen, "'%.64s' is not a duration: give digits and a unit s, m, h or d (90m, 2h, 1d, 1h30m), "
		 "or a time such as 2026-12-06T18:00:00Z", s);
	return -1;
}

void freeze_time_text(int64_t t, char out[32])
{
	time_t tt = (time_t)t;
	struct tm tm;
	if (!gmtime_r(&tt, &tm) || !strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(out, 32, "%lld", (long long)t);
}

int freeze_check(int64_t until, const char *message, int64_t now, char *err, size_t errlen)
{
	char when[32];
	freeze_time_text(until, when);
	if (until <= now) {
		snprintf(err, errlen, "freeze: until %s is not in the future: give a later time", when);
		return -1;
	}
	if (until - now > FREEZE_MAX_AHEAD) {
		snprintf(err, errlen, "freeze: until %s is more than 30 days ahead: give an earlier time (set it again "
			 "later to extend it)", when);
		return -1;
	}
	if (!message || !*message) {
		snprintf(err, errlen, "freeze: message is missing: say why the changes stop (--message TEXT)");
		return -1;
	}
	size_t len = strlen(message);
	if (len > FREEZE_MESSAGE_MAX) {
		snprintf(err, errlen, "freeze: message is %zu bytes: at most %d", len, FREEZE_MESSAGE_MAX);
		return -1;
	}
	for (const char *m = message; *m; m++) {
		if ((unsigned char)*m < 0x20 || *m == 0x7f) {
			snprintf(err, errlen, "freeze: message holds a control character: one line, no control characters");
			return -1;
		}
	}
	return 0;
}

bool freeze_active(const struct freeze_rec *f, int64_t now)
{
	return f && now < f->until;
}

void freeze_rec_json(const struct freeze_rec *f, struct buf *out)
{
	buf_printf(out, "{\"at\":%lld,\"by\":", (long long)f->at);
	buf_json_string(out, f->by);
	buf_puts(out, ",\"message\":");
	buf_json_string(out, f->message);
	buf_printf(out, ",\"until\":%lld}", (long long)f->until);
}

/* A whole number of seconds, 0..2^53-1. */
static bool get_seconds(const cJSON *obj, const char *key, int64_t *out)
{
	uint64_t v;
	if (!json_get_u64(cJSON_GetObjectItemCaseSensitive(obj, key), &v))
		return false;
	*out = (int64_t)v;
	return true;
}

/* A string member into out (cap bytes, NUL included); false when absent,
 * not a string or too long. */
static bool get_text(const cJSON *obj, const char *key, char *out, size_t cap)
{
	const char *s = json_get_string(obj, key);
	if (!s || strlen(s) >= cap)
		return false;
	memcpy(out, s, strlen(s) + 1);
	return true;
}

/* The members of obj are all among names. */
static const char *unknown_member(const cJSON *obj, const char *const *names, size_t n)
{
	for (const cJSON *m = obj->child; m; m = m->next) {
		size_t i = 0;
		while (i < n && strcmp(m->string, names[i]) != 0)
			i++;
		if (i == n)
			return m->string;
	}
	return NULL;
}

int freeze_rec_parse(const char *text, size_t len, struct freeze_rec *f, char *err, size_t errlen)
{
	static const char *const names[] = { "at", "by", "message", "until" };
	struct json_limits lim = { FREEZE_RECORD_MAX, 4 };
	char jerr[128];
	memset(f, 0, sizeof(*f));
	cJSON *v = json_decode(text, len, &lim, jerr, sizeof(jerr));
	if (!v) {
		snprintf(err, errlen, "freeze record: %s", jerr);
		return -1;
	}
	int rc = -1;
	const char *bad;
	if (!cJSON_IsObject(v))
		snprintf(err, errlen, "freeze record: not a JSON object");
	else if ((bad = unknown_member(v, names, 4)))
		snprintf(err, errlen, "freeze record: unknown member '%.64s'", bad);
	else if (!get_seconds(v, "until", &f->until) || !get_seconds(v, "at", &f->at))
		snprintf(err, errlen, "freeze record: until and at must be whole seconds");
	else if (!get_text(v, "message", f->message, sizeof(f->message)) || !f->message[0])
		snprintf(err, errlen, "freeze record: message must be a string of 1..%d bytes", FREEZE_MESSAGE_MAX);
	else if (!get_text(v, "by", f->by, sizeof(f->by)))
		snprintf(err, errlen, "freeze record: by must be a string of at most %d bytes", FREEZE_BY_MAX);
	else
		rc = 0;
	cJSON_Delete(v);
	return rc;
}

int freeze_body_parse(const char *text, size_t len, int64_t now, struct freeze_rec *f, char *err, size_t errlen)
{
	static const char *const names[] = { "until", "message" };
	struct json_limits lim = { FREEZE_RECORD_MAX, 4 };
	char jerr[128];
	memset(f, 0, sizeof(*f));
	cJSON *v = json_decode(text, len, &lim, jerr, sizeof(jerr));
	if (!v) {
		snprintf(err, errlen, "freeze: the body is not JSON: %s", jerr);
		return -1;
	}
	int rc = -1;
	const char *bad;
	const cJSON *msg = cJSON_GetObjectItemCaseSensitive(v, "message");
	if (!cJSON_IsObject(v)) {
		snprintf(err, errlen, "freeze: the body must be an object {\"until\": SECONDS, \"message\": TEXT}");
	} else if ((bad = unknown_member(v, names, 2))) {
		snprintf(err, errlen, "freeze: unknown member '%.64s': the body is {\"until\": SECONDS, \"message\": TEXT}",
			 bad);
	} else if (!cJSON_GetObjectItemCaseSensitive(v, "until")) {
		snprintf(err, errlen, "freeze: until is missing: give the end as Unix seconds (UTC)");
	} else if (!get_seconds(v, "until", &f->until)) {
		snprintf(err, errlen, "freeze: until must be a whole number of Unix seconds (UTC)");
	} else if (msg && !cJSON_IsString(msg)) {
		snprintf(err, errlen, "freeze: message must be a string");
	} else if (freeze_check(f->until, msg ? msg->valuestring : NULL, now, err, errlen) == 0) {
		memcpy(f->message, msg->valuestring, strlen(msg->valuestring) + 1);
		rc = 0;
	}
	cJSON_Delete(v);
	return rc;
}

char *freeze_passed_add(char *passed)
{
	const char *rest = "]";
	if (passed && passed[0] == '[') {
		const char *p = passed + 1;
		while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
			p++;
		if (*p != ']')   /* more names: after a comma */
			rest = p;
	}
	char *out = xasprintf("[\"freeze\"%s%s", *rest == ']' ? "" : ",", rest);
	free(passed);
	return out;
}

void freeze_refusal(const struct freeze_rec *f, char *out, size_t cap)
{
	char when[32];
	freeze_time_text(f->until, when);
	snprintf(out, cap, "frozen until %s by %s: %s (an admin may pass with --override REASON)", when,
		 f->by[0] ? f->by : "unknown", f->message);
}

void freeze_hold_text(const struct freeze_rec *f, char *out, size_t cap)
{
	char when[32];
	freeze_time_text(f->until, when);
	snprintf(out, cap, "held: frozen until %s by %s: %s", when, f->by[0] ? f->by : "unknown", f->message);
}
