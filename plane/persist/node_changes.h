/* persist/node_changes.h: what a relay's nodes changed, as it sends it up
 * (POST /v1/relay/changes, docs/protocol.md "Relays"): one line a change,
 * fields in a fixed order, both ends here (persist/relay/relay.c encodes,
 * api/relay.c decodes). Only what the upstream cannot know itself goes up:
 * a node's connection (labels, subscription, whether the relay streams to
 * it), its ACKs, NACKs, stale ACKs, verification failures and traffic
 * reports; never the version or nonce the relay sent it.
 *
 *   tether-changes 1 RELAY HELD            (HELD: the version the relay holds)
 *   c NODE STREAMING TRANSPORT FIRST_SEEN VIA SUB LABELS
 *   a NODE VERSION HEALTHY ACKS
 *   n NODE VERSION HEALTHY NACKS NONCE ERROR
 *   s NODE STALE
 *   v NODE FAILURES VERSION ERROR
 *   t NODE REPORT
 *   k NODE REGISTRATION                    (a node's key, sealed secrets)
 *   h NODE VERSION NONCE REASON            (a held NACK, sealed secrets)
 *   u NODE COUNTS REASON                   (whether it counts traffic: gates)
 *   end COUNT                              (COUNT: the change lines above)
 *
 * STREAMING 0 or 1; HEALTHY -, 0 or 1; VIA - or the relays beyond, nearest
 * first, comma-joined; SUB - (unknown) or a JSON string; NONCE printable,
 * no space; ERROR a JSON string; LABELS a JSON object of strings; REPORT a
 * JSON object (a traffic report); REGISTRATION the node's key registration
 * (nodekey.h) as standard base64, as the node sent it; REASON the rest of
 * the line, printable (control characters sent as spaces); COUNTS 1 or 0
 * (then REASON says why, as an 'h' line's). Numbers are decimal. A batch that breaks
 * any of it is refused whole, naming the line and the field. */
#ifndef TETHER_NODE_CHANGES_H
#define TETHER_NODE_CHANGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define NODE_CHANGES_MAGIC "tether-changes 1 "
#define NODE_CHANGES_NONCE_MAX 47

enum node_change_kind {
	NC_CONN = 'c',
	NC_ACK = 'a',
	NC_NACK = 'n',
	NC_STALE = 's',
	NC_VERIFY = 'v',
	NC_TRAFFIC = 't',
	NC_KEY = 'k',
	NC_HELD = 'h',
	NC_COUNTS = 'u',
};

/* One change. Strings are NUL-terminated; decoded, they belong to the
 * batch. */
struct node_change {
	char kind;
	const char *node;
	/* c */
	bool streaming;
	const char *transport;
	int64_t first_seen;
	const char *via;             /* "": none beyond the sender */
	const char *sub;             /* NULL: unknown */
	const char *labels;          /* canonical JSON object */
	/* k: the registration's text (decoded) and its length */
	const char *reg;
	size_t reg_len;
	/* a, n, v, h */
	uint64_t version;
	int healthy;                 /* -1 unknown */
	uint64_t count;              /* a: ACKs, n: NACKs, s: stale ACKs, v: failures; u: counts (1) or not (0) */
	const char *nonce;           /* n, h */
	const char *error;           /* n, v; h, u: the reason */
	const char *report;          /* t: JSON text */
};

struct node_changes {
	char relay[201];
	uint64_t held;
	struct node_change *ch;
	size_t n;
	/* what the changes point into */
	char *text;
	char **owned;
	size_t nowned;
};

/* Appends the header line. */
void node_changes_begin(struct buf *out, const char *relay, uint64_t held);
/* Appends one change's line (its strings as the struct above says): 0; or
 * -1, appending nothing, for a change the decoder would refuse for its
 * size (a subscription over SUB_TEXT_MAX, an error over 4096 bytes, a
 * report over TRAFFIC_REPORT_MAX). */
int node_changes_put(struct buf *out, const struct node_change *c);
/* Appends the end line. */
void node_changes_end(struct buf *out, size_t count);

/* Decodes a batch of at most max changes into b (released by
 * node_changes_release, also after a failure). 0; -1 with err naming the
 * line and the field; -2 (err says so) for more than max changes. */
int node_changes_decode(const char *data, size_t len, size_t max, struct node_changes *b, char *err,
			size_t errlen);
void node_changes_release(struct node_changes *b);

#endif
