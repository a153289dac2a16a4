/* persist/node_changes.c: a relay's node changes, one line each, encoded
 * and decoded (see node_changes.h). The decoder trusts nothing: every
 * field is checked where it stands, and a refusal names the line and the
 * field. */
#include "persist/node_changes.h"
#include "json.h"
#include "nodekey.h"
#include "labels.h"
#include "resource.h"
#include "sub.h"
#include "traffic.h"
#include "util.h"
#include "xmalloc.h"

#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VIA_MAX 1024
#define ERROR_MAX 4096
#define REPORT_MAX TRAFFIC_REPORT_MAX
#define VERSION_MAX 9007199254740992ULL
#define TIME_MAX (1ULL << 40)

/* ---- encoding ---------------------------------------------------------------- */

void node_changes_begin(struct buf *out, const char *relay, uint64_t held)
{
	buf_printf(out, NODE_CHANGES_MAGIC "%s %llu\n", relay, (unsigned long long)held);
}

static void put_healthy(struct buf *out, int h)
{
	buf_puts(out, h < 0 ? " -" : h ? " 1" : " 0");
}

/* A reason, the rest of a line: printable (control characters as
 * spaces), never empty ("-"). */
static void put_reason(struct buf *out, const char *e)
{
	e = e ? e : "";
	while (*e && ((unsigned char)*e <= ' ' || *e == 0x7f))
		e++;   /* the decoder takes no empty reason */
	for (e = *e ? e : "-"; *e; e++)
		buf_putc(out, (unsigned char)*e < 0x20 || *e == 0x7f ? ' ' : *e);
}

int node_changes_put(struct buf *out, const struct node_change *c)
{
	/* what the decoder would refuse (and with it the whole batch) is not
	 * sent: the limits are the plane's own, so only a record the plane
	 * could not have taken from a node breaks them */
	if ((c->sub && strlen(c->sub) > SUB_TEXT_MAX) || (c->report && strlen(c->report) > REPORT_MAX) ||
	    ((c->kind == NC_NACK || c->kind == NC_VERIFY || c->kind == NC_HELD || c->kind == NC_COUNTS) && c->error &&
	     strlen(c->error) > ERROR_MAX) ||
	    (c->kind == NC_KEY && (!c->reg || c->reg_len == 0 || c->reg_len > NODEKEY_REG_MAX)))
		return -1;
	buf_putc(out, c->kind);
	buf_putc(out, ' ');
	buf_puts(out, c->node);
	switch (c->kind) {
	case NC_CONN:
		buf_printf(out, " %d %s %lld %s ", c->streaming ? 1 : 0, c->transport[0] ? c->transport : "-",
			   (long long)(c->first_seen > 0 ? c->first_seen : 0), c->via && c->via[0] ? c->via : "-");
		if (c->sub)
			buf_json_string(out, c->sub);
		else
			buf_putc(out, '-');
		buf_putc(out, ' ');
		buf_puts(out, c->labels && c->labels[0] ? c->labels : "{}");
		break;
	case NC_ACK:
		buf_printf(out, " %llu", (unsigned long long)c->version);
		put_healthy(out, c->healthy);
		buf_printf(out, " %llu", (unsigned long long)c->count);
		break;
	case NC_NACK:
		buf_printf(out, " %llu", (unsigned long long)c->version);
		put_healthy(out, c->healthy);
		buf_printf(out, " %llu %s ", (unsigned long long)c->count, c->nonce && c->nonce[0] ? c->nonce : "-");
		buf_json_string(out, c->error ? c->error : "");
		break;
	case NC_STALE:
		buf_printf(out, " %llu", (unsigned long long)c->count);
		break;
	case NC_VERIFY:
		buf_printf(out, " %llu %llu ", (unsigned long long)c->count, (unsigned long long)c->version);
		buf_json_string(out, c->error ? c->error : "");
		break;
	case NC_TRAFFIC:
		buf_putc(out, ' ');
		buf_puts(out, c->report);
		break;
	case NC_KEY: {
		size_t cap = sodium_base64_ENCODED_LEN(c->reg_len, sodium_base64_VARIANT_ORIGINAL);
		char *b64 = xmalloc(cap);
		sodium_bin2base64(b64, cap, (const unsigned char *)c->reg, c->reg_len, sodium_base64_VARIANT_ORIGINAL);
		buf_putc(out, ' ');
		buf_puts(out, b64);
		free(b64);
		break;
	}
	case NC_HELD:
		buf_printf(out, " %llu %s ", (unsigned long long)c->version, c->nonce && c->nonce[0] ? c->nonce : "-");
		put_reason(out, c->error);
		break;
	case NC_COUNTS:
		buf_puts(out, c->count ? " 1 " : " 0 ");
		put_reason(out, c->count ? NULL : c->error);
		break;
	}
	buf_putc(out, '\n');
	return 0;
}

void node_changes_end(struct buf *out, size_t count)
{
	buf_printf(out, "end %zu\n", count);
}

/* ---- decoding ---------------------------------------------------------------- */

struct cursor {
	char *p, *eol;               /* the line's unread part; *eol is its NUL */
	size_t line;
	char kind;
	const char *node;            /* once known and valid */
	char *err;
	size_t errlen;
};

static int fail(struct cursor *c, const char *field, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(struct cursor *c, const char *field, const char *fmt, ...)
{
	char what[300];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (c->node)
		snprintf(c->err, c->errlen, "line %zu ('%c' %s): %s: %s", c->line, c->kind, c->node, field, what);
	else if (c->kind)
		snprintf(c->err, c->errlen, "line %zu ('%c'): %s: %s", c->line, c->kind, field, what);
	else
		snprintf(c->err, c->errlen, "line %zu: %s: %s", c->line, field, what);
	return -1;
}

/* The next space-separated field (NUL-terminated in place), or NULL. */
static char *field(struct cursor *c, const char *name)
{
	if (c->p >= c->eol || *c->p == ' ') {
		fail(c, name, c->p >= c->eol ? "missing" : "empty");
		return NULL;
	}
	char *f = c->p;
	char *sp = memchr(f, ' ', (size_t)(c->eol - f));
	if (sp) {
		*sp = '\0';
		c->p = sp + 1;
		if (c->p >= c->eol) {
			fail(c, name, "a space ends the line");
			return NULL;
		}
	} else {
		c->p = c->eol;
	}
	return f;
}

/* The rest of the line as one field (JSON text). */
static char *rest(struct cursor *c, const char *name)
{
	if (c->p >= c->eol || *c->p == ' ') {
		fail(c, name, c->p >= c->eol ? "missing" : "empty");
		return NULL;
	}
	char *f = c->p;
	c->p = c->eol;
	return f;
}

static int done(struct cursor *c, const char *last)
{
	if (c->p < c->eol)
		return fail(c, last, "an unknown field follows it");
	return 0;
}

static int num(struct cursor *c, const char *name, uint64_t min, uint64_t max, uint64_t *out)
{
	char *f = field(c, name);
	if (!f)
		return -1;
	if (parse_uint_range(f, min, max, out) < 0)
		return fail(c, name, "must be an integer in %llu..%llu", (unsigned long long)min,
			    (unsigned long long)max);
	return 0;
}

static int healthy(struct cursor *c, int *out)
{
	char *f = field(c, "healthy");
	if (!f)
		return -1;
	if (strcmp(f, "-") == 0)
		*out = -1;
	else if (strcmp(f, "0") == 0 || strcmp(f, "1") == 0)
		*out = f[0] - '0';
	else
		return fail(c, "healthy", "must be -, 0 or 1");
	return 0;
}

static char *own(struct node_changes *b, char *s)
{
	b->owned = xrealloc(b->owned, (b->nowned + 1) * sizeof(*b->owned));
	b->owned[b->nowned++] = s;
	return s;
}

/* A JSON string standing as one field (it may hold spaces); last: the
 * line's last field. Decoded into a string the batch owns. */
static const char *jstring(struct node_changes *b, struct cursor *c, const char *name, size_t max, bool last)
{
	char *s = c->p;
	if (s >= c->eol || *s != '"') {
		fail(c, name, s >= c->eol ? "missing" : strcmp(name, "sub") == 0 ? "must be - or a JSON string" :
			      "must be a JSON string");
		return NULL;
	}
	char *q = s + 1;
	while (q < c->eol && *q != '"')
		q += *q == '\\' && q + 1 < c->eol ? 2 : 1;
	if (q >= c->eol) {
		fail(c, name, "an unterminated JSON string");
		return NULL;
	}
	q++;   /* past the closing quote */
	if (q < c->eol && (last || *q != ' ')) {
		fail(c, name, last ? "an unknown field follows it" : "must be followed by a space");
		return NULL;
	}
	if ((size_t)(q - s) > max * 6 + 2) {
		fail(c, name, "longer than %zu bytes", max);
		return NULL;
	}
	cJSON *v = cJSON_ParseWithLength(s, (size_t)(q - s));
	if (!cJSON_IsString(v) || strlen(v->valuestring) > max) {
		cJSON_Delete(v);
		fail(c, name, cJSON_IsString(v) ? "longer than %zu bytes" : "must be a JSON string", max);
		return NULL;
	}
	char *out = own(b, xstrdup(v->valuestring));
	cJSON_Delete(v);
	if (q < c->eol) {
		q++;
		if (q >= c->eol) {
			fail(c, name, "a space ends the line");
			return NULL;
		}
	}
	c->p = q;
	return out;
}

static int node_id(struct cursor *c, const char **out)
{
	char *f = field(c, "node");
	if (!f)
		return -1;
	if (!resource_name_valid(f))
		return fail(c, "node", "must match [A-Za-z0-9._-]{1,200}");
	*out = c->node = f;
	return 0;
}

static int conn(struct node_changes *b, struct cursor *c, struct node_change *ch)
{
	uint64_t v;
	char *f;
	if (!(f = field(c, "streaming")))
		return -1;
	if (strcmp(f, "0") != 0 && strcmp(f, "1") != 0)
		return fail(c, "streaming", "must be 0 or 1");
	ch->streaming = f[0] == '1';
	if (!(f = field(c, "transport")))
		return -1;
	size_t tl = strlen(f);
	if (strcmp(f, "-") == 0)
		f[0] = '\0';
	else if (tl > 7 || strspn(f, "abcdefghijklmnopqrstuvwxyz") != tl)
		return fail(c, "transport", "must be - or [a-z]{1,7}");
	ch->transport = f;
	if (num(c, "first_seen", 0, TIME_MAX, &v) < 0)
		return -1;
	ch->first_seen = (int64_t)v;
	if (!(f = field(c, "via")))
		return -1;
	if (strcmp(f, "-") == 0) {
		f[0] = '\0';
	} else {
		if (strlen(f) > VIA_MAX)
			return fail(c, "via", "longer than %d bytes", VIA_MAX);
		for (char *s = f; *s;) {
			size_t k = strcspn(s, ",");
			char save = s[k];
			s[k] = '\0';
			bool ok = resource_name_valid(s);
			s[k] = save;
			if (!ok)
				return fail(c, "via", "must be - or relay ids ([A-Za-z0-9._-]{1,200}), comma-joined");
			s += k + (save == ',');
			if (save == ',' && !*s)
				return fail(c, "via", "must be - or relay ids ([A-Za-z0-9._-]{1,200}), comma-joined");
		}
	}
	ch->via = f;
	if (c->p < c->eol && *c->p == '-') {
		if (!(f = field(c, "sub")))
			return -1;
		if (strcmp(f, "-") != 0)
			return fail(c, "sub", "must be - or a JSON string");
		ch->sub = NULL;
	} else if (!(ch->sub = jstring(b, c, "sub", SUB_TEXT_MAX, false))) {
		return -1;
	}
	if (!(f = rest(c, "labels")))
		return -1;
	if (f[0] != '{')
		return fail(c, "labels", "must be a JSON object of strings");
	char err[200];
	struct json_limits lim = { 16384, 2 };
	cJSON *o = json_decode(f, strlen(f), &lim, err, sizeof(err));
	if (!cJSON_IsObject(o)) {
		cJSON_Delete(o);
		return fail(c, "labels", "must be a JSON object of strings");
	}
	int count = 0;
	for (const cJSON *it = o->child; it; it = it->next, count++)
		if (!cJSON_IsString(it) || count >= LABELS_MAX) {
			cJSON_Delete(o);
			return fail(c, "labels", "must be a JSON object of at most %d strings", LABELS_MAX);
		}
	json_sort_keys(o);
	char *canon = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	ch->labels = own(b, xstrdup(canon ? canon : "{}"));
	cJSON_free(canon);
	return 0;
}

static int nonce(struct cursor *c, const char **out)
{
	char *f = field(c, "nonce");
	if (!f)
		return -1;
	size_t l = strlen(f);
	if (l > NODE_CHANGES_NONCE_MAX)
		return fail(c, "nonce", "longer than %d bytes", NODE_CHANGES_NONCE_MAX);
	for (size_t i = 0; i < l; i++)
		if ((unsigned char)f[i] <= ' ' || (unsigned char)f[i] >= 0x7f)
			return fail(c, "nonce", "must be printable ASCII without spaces");
	*out = strcmp(f, "-") == 0 ? "" : f;
	return 0;
}

static int report(struct cursor *c, struct node_change *ch)
{
	char *f = rest(c, "report");
	if (!f)
		return -1;
	size_t l = strlen(f);
	if (l > REPORT_MAX)
		return fail(c, "report", "longer than %d bytes", REPORT_MAX);
	if (f[0] != '{')
		return fail(c, "report", "must be a JSON object (a traffic report)");
	char err[200];
	struct json_limits lim = { REPORT_MAX, 8 };
	cJSON *o = json_decode(f, l, &lim, err, sizeof(err));
	bool ok = cJSON_IsObject(o);
	cJSON_Delete(o);
	if (!ok)
		return fail(c, "report", "must be a JSON object (a traffic report)");
	ch->report = f;
	return 0;
}

/* k: the registration, base64 of at most NODEKEY_REG_MAX bytes (its
 * content is the plane's to judge). */
static int registration(struct node_changes *b, struct cursor *c, struct node_change *ch)
{
	char *f = rest(c, "registration");
	if (!f)
		return -1;
	size_t l = strlen(f);
	if (l > sodium_base64_ENCODED_LEN(NODEKEY_REG_MAX, sodium_base64_VARIANT_ORIGINAL))
		return fail(c, "registration", "longer than %d bytes", NODEKEY_REG_MAX);
	char *bin = xmalloc(NODEKEY_REG_MAX + 1);
	size_t len = 0;
	if (sodium_base642bin((unsigned char *)bin, NODEKEY_REG_MAX, f, l, NULL, &len, NULL,
			      sodium_base64_VARIANT_ORIGINAL) != 0 || len == 0 || memchr(bin, '\0', len)) {
		free(bin);
		return fail(c, "registration", "must be standard base64 of a key registration");
	}
	bin[len] = '\0';
	ch->reg = own(b, bin);
	ch->reg_len = len;
	return 0;
}

/* REASON, the rest of the line: printable, at most ERROR_MAX bytes. */
static int reason(struct cursor *c, struct node_change *ch)
{
	char *f = rest(c, "reason");
	if (!f)
		return -1;
	if (strlen(f) > ERROR_MAX)
		return fail(c, "reason", "longer than %d bytes", ERROR_MAX);
	for (const char *s = f; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return fail(c, "reason", "holds a control character");
	ch->error = f;
	return 0;
}

/* h: VERSION NONCE REASON (the rest of the line). */
static int held(struct cursor *c, struct node_change *ch)
{
	if (num(c, "version", 1, VERSION_MAX, &ch->version) < 0 || nonce(c, &ch->nonce) < 0)
		return -1;
	return reason(c, ch);
}

/* u: COUNTS (0 or 1) REASON (the rest of the line; "-" when it counts). */
static int counts(struct cursor *c, struct node_change *ch)
{
	if (num(c, "counts", 0, 1, &ch->count) < 0 || reason(c, ch) < 0)
		return -1;
	if (ch->count)
		ch->error = NULL;
	return 0;
}

static int change(struct node_changes *b, struct cursor *c, struct node_change *ch)
{
	char *k = field(c, "kind");
	if (!k)
		return -1;
	if (strlen(k) != 1 || !strchr("cansvtkhu", k[0]))
		return fail(c, "kind", "unknown (one of c, a, n, s, v, t, k, h, u)");
	c->kind = ch->kind = k[0];
	ch->healthy = -1;
	if (node_id(c, &ch->node) < 0)
		return -1;
	switch (ch->kind) {
	case NC_CONN:
		return conn(b, c, ch);
	case NC_ACK:
		if (num(c, "version", 1, VERSION_MAX, &ch->version) < 0 || healthy(c, &ch->healthy) < 0 ||
		    num(c, "acks", 0, UINT64_MAX / 2, &ch->count) < 0)
			return -1;
		return done(c, "acks");
	case NC_NACK:
		if (num(c, "version", 1, VERSION_MAX, &ch->version) < 0 || healthy(c, &ch->healthy) < 0 ||
		    num(c, "nacks", 0, UINT64_MAX / 2, &ch->count) < 0 || nonce(c, &ch->nonce) < 0)
			return -1;
		return (ch->error = jstring(b, c, "error", ERROR_MAX, true)) ? 0 : -1;
	case NC_STALE:
		if (num(c, "stale", 0, UINT64_MAX / 2, &ch->count) < 0)
			return -1;
		return done(c, "stale");
	case NC_VERIFY:
		if (num(c, "failures", 1, UINT64_MAX / 2, &ch->count) < 0 ||
		    num(c, "version", 0, VERSION_MAX, &ch->version) < 0)
			return -1;
		return (ch->error = jstring(b, c, "error", ERROR_MAX, true)) ? 0 : -1;
	case NC_KEY:
		return registration(b, c, ch);
	case NC_HELD:
		return held(c, ch);
	case NC_COUNTS:
		return counts(c, ch);
	default:
		return report(c, ch);
	}
}

static int header(struct node_changes *b, struct cursor *c)
{
	size_t ml = strlen(NODE_CHANGES_MAGIC);
	if ((size_t)(c->eol - c->p) < ml || memcmp(c->p, NODE_CHANGES_MAGIC, ml) != 0)
		return fail(c, "header", "must start '%s' (a batch of node changes, version 1)", NODE_CHANGES_MAGIC);
	c->p += ml;
	char *r = field(c, "relay");
	if (!r)
		return -1;
	if (!resource_name_valid(r))
		return fail(c, "relay", "must match [A-Za-z0-9._-]{1,200}");
	snprintf(b->relay, sizeof(b->relay), "%s", r);
	if (num(c, "held", 0, VERSION_MAX, &b->held) < 0)
		return -1;
	return done(c, "held");
}

int node_changes_decode(const char *data, size_t len, size_t max, struct node_changes *b, char *err,
			size_t errlen)
{
	memset(b, 0, sizeof(*b));
	b->text = xmalloc(len + 1);
	memcpy(b->text, data, len);
	b->text[len] = '\0';
	struct cursor c = { .err = err, .errlen = errlen };
	char *p = b->text, *end = b->text + len;
	bool ended = false;
	size_t cap = 0;
	err[0] = '\0';
	if (memchr(b->text, '\0', len)) {
		snprintf(err, errlen, "batch: holds a NUL byte");
		return -1;
	}
	while (p < end) {
		char *eol = memchr(p, '\n', (size_t)(end - p));
		c.line++;
		c.kind = 0;
		c.node = NULL;
		if (!eol)
			return fail(&c, "batch", "truncated (the line has no newline; no 'end' line)");
		*eol = '\0';
		c.p = p;
		c.eol = eol;
		p = eol + 1;
		if (ended)
			return fail(&c, "batch", "a line after the 'end' line");
		if (c.line == 1) {
			if (header(b, &c) < 0)
				return -1;
			continue;
		}
		if (strncmp(c.p, "end ", 4) == 0) {
			uint64_t count;
			c.p += 4;
			if (num(&c, "end", 0, max, &count) < 0 || done(&c, "end") < 0)
				return -1;
			if (count != b->n)
				return fail(&c, "end", "says %llu changes, the batch holds %zu", (unsigned long long)count,
					    b->n);
			ended = true;
			continue;
		}
		if (b->n == max) {
			fail(&c, "batch", "more than %zu changes", max);
			return -2;
		}
		if (b->n == cap) {
			cap = cap ? cap * 2 : 256;
			b->ch = xrealloc(b->ch, cap * sizeof(*b->ch));
		}
		struct node_change *ch = &b->ch[b->n];
		memset(ch, 0, sizeof(*ch));
		if (change(b, &c, ch) < 0)
			return -1;
		b->n++;
	}
	if (c.line == 0) {
		snprintf(err, errlen, "batch: empty (needs the header '%s RELAY HELD')", NODE_CHANGES_MAGIC);
		return -1;
	}
	if (!ended) {
		c.kind = 0;
		c.node = NULL;
		return fail(&c, "batch", "truncated (no 'end' line)");
	}
	return 0;
}

void node_changes_release(struct node_changes *b)
{
	for (size_t i = 0; i < b->nowned; i++)
		free(b->owned[i]);
	free(b->owned);
	free(b->ch);
	free(b->text);
	memset(b, 0, sizeof(*b));
}
