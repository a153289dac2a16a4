/* fuzz_tickets.c: libFuzzer target for the two parsers of TLS session
 * resumption: the stored keys (persist/ticket_keys.c) and the ticket name
 * in a ClientHello (http/tickets.c). Each input is:
 *
 *   1. a stored record: ticket_keys_decode never reads past the input; what
 *      it accepts encodes to a record that decodes to the same keys;
 *   2. a ClientHello body: tickets_hello_key_name never reads past it, and
 *      the name it finds is 16 bytes of the input. */
#include "fuzz.h"
#include "http/tickets.h"
#include "persist/ticket_keys.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* a copy of exactly size bytes: a read past it is the sanitizer's */
	char *copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	struct persist_ticket_keys k, again;
	if (ticket_keys_decode(copy, size, &k) == 0) {
		char text[TICKET_KEYS_TEXT];
		size_t len = ticket_keys_encode(&k, text);
		if (ticket_keys_decode(text, len, &again) != 0 || again.created != k.created ||
		    again.has_prev != k.has_prev || memcmp(again.cur, k.cur, sizeof(k.cur)) != 0 ||
		    (k.has_prev && memcmp(again.prev, k.prev, sizeof(k.prev)) != 0))
			abort();
	}
	int v13 = tickets_hello_offers_tls13((const unsigned char *)copy, size);
	if (v13 != 0 && v13 != 1)
		abort();
	unsigned char name[16];
	int found = tickets_hello_key_name((const unsigned char *)copy, size, name);
	if (found != 0 && found != 1)
		abort();
	if (found) {
		/* the name is somewhere in the input */
		int seen = 0;
		for (size_t i = 0; i + 16 <= size && !seen; i++)
			seen = memcmp(copy + i, name, 16) == 0;
		if (!seen)
			abort();
	}
	free(copy);
	return 0;
}
