/* persist/ticket_keys.c: the session-ticket keys' stored form (see
 * ticket_keys.h). */
#include "persist/ticket_keys.h"
#include "util.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define MAGIC "tether-ticket-keys 1 "

static void hex(char *out, const unsigned char *k)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < PERSIST_TICKET_KEY; i++) {
		out[2 * i] = digits[k[i] >> 4];
		out[2 * i + 1] = digits[k[i] & 15];
	}
}

size_t ticket_keys_encode(const struct persist_ticket_keys *k, char out[TICKET_KEYS_TEXT])
{
	int n = snprintf(out, TICKET_KEYS_TEXT, MAGIC "%" PRId64 " ", k->created);
	size_t at = (size_t)n;
	hex(out + at, k->cur);
	at += 2 * PERSIST_TICKET_KEY;
	out[at++] = ' ';
	if (k->has_prev) {
		hex(out + at, k->prev);
		at += 2 * PERSIST_TICKET_KEY;
	} else {
		out[at++] = '-';
	}
	out[at] = '\0';
	return at;
}

/* 2 * PERSIST_TICKET_KEY hex digits at s into k; 0 or -1. */
static int unhex(const char *s, unsigned char *k)
{
	for (size_t i = 0; i < PERSIST_TICKET_KEY; i++) {
		int hi = hex_digit((unsigned char)s[2 * i]), lo = hex_digit((unsigned char)s[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -1;
		k[i] = (unsigned char)(hi << 4 | lo);
	}
	return 0;
}

int ticket_keys_decode(const char *text, size_t len, struct persist_ticket_keys *k)
{
	const size_t ml = sizeof(MAGIC) - 1, kl = 2 * PERSIST_TICKET_KEY;
	memset(k, 0, sizeof(*k));
	if (len < ml || memcmp(text, MAGIC, ml) != 0)
		return -1;
	size_t at = ml;
	/* CREATED: 1 to 19 digits, a positive time */
	int64_t created = 0;
	size_t digits = 0;
	while (at < len && text[at] >= '0' && text[at] <= '9') {
		if (++digits > 18)
			return -1;
		created = created * 10 + (text[at] - '0');
		at++;
	}
	if (!digits || at >= len || text[at] != ' ')
		return -1;
	at++;
	if (len - at < kl + 2 || unhex(text + at, k->cur) < 0 || text[at + kl] != ' ')
		goto bad;
	at += kl + 1;
	if (len - at == 1 && text[at] == '-') {
		k->has_prev = false;
	} else if (len - at == kl && unhex(text + at, k->prev) == 0) {
		k->has_prev = true;
	} else {
		goto bad;
	}
	k->created = created;
	return 0;
bad:
	explicit_bzero(k, sizeof(*k));
	return -1;
}
