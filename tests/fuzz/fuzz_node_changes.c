/* fuzz_node_changes.c: libFuzzer target for a relay's batch of node
 * changes (plane/persist/node_changes.c), what POST /v1/relay/changes
 * decodes. A relay is authenticated, but a broken or lying one must get
 * a clear refusal naming the line and the field, never a crash.
 *
 * Checks on what node_changes_decode accepts: a valid relay id, every
 * change of a known kind with a valid node id, versions and counts in
 * range, labels and reports JSON objects, a key registration of 1 to
 * NODEKEY_REG_MAX bytes, a held NACK's reason, a node's counts (0 or 1,
 * with a reason when 0); and that encoding the decoded
 * changes again decodes to the same changes (the encoder and the decoder
 * agree). */
#include "fuzz.h"
#include "nodekey.h"
#include "persist/node_changes.h"
#include "resource.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool same_str(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct node_changes b;
	char err[400];
	if (node_changes_decode((const char *)data, size, 1000, &b, err, sizeof(err)) < 0) {
		if (!err[0])
			abort();   /* a refusal says why */
		node_changes_release(&b);
		return 0;
	}
	if (!resource_name_valid(b.relay) || b.n > 1000)
		abort();
	struct buf again = BUF_INIT;
	node_changes_begin(&again, b.relay, b.held);
	for (size_t i = 0; i < b.n; i++) {
		const struct node_change *c = &b.ch[i];
		if (!strchr("cansvtkhu", c->kind) || !resource_name_valid(c->node))
			abort();
		if ((c->kind == NC_ACK || c->kind == NC_NACK || c->kind == NC_HELD) && c->version == 0)
			abort();
		if (c->kind == NC_KEY && (!c->reg || !c->reg_len || c->reg_len > NODEKEY_REG_MAX))
			abort();
		if (c->kind == NC_HELD && (!c->error || !c->error[0] || !c->nonce))
			abort();
		if (c->kind == NC_COUNTS && (c->count > 1 || (c->count == 0 && (!c->error || !c->error[0])) ||
					     (c->count == 1 && c->error)))
			abort();
		if (c->kind == NC_CONN && (!c->labels || c->labels[0] != '{' || !c->via || !c->transport))
			abort();
		if (c->kind == NC_TRAFFIC && (!c->report || c->report[0] != '{'))
			abort();
		node_changes_put(&again, c);
	}
	node_changes_end(&again, b.n);
	struct node_changes d;
	if (node_changes_decode(again.data, again.len, 1000, &d, err, sizeof(err)) < 0 || d.n != b.n ||
	    d.held != b.held || strcmp(d.relay, b.relay) != 0)
		abort();
	for (size_t i = 0; i < b.n; i++) {
		const struct node_change *x = &b.ch[i], *y = &d.ch[i];
		if (x->kind != y->kind || strcmp(x->node, y->node) != 0 || x->version != y->version ||
		    x->count != y->count || x->healthy != y->healthy || x->streaming != y->streaming ||
		    x->first_seen != y->first_seen || !same_str(x->sub, y->sub) || !same_str(x->labels, y->labels) ||
		    !same_str(x->via, y->via) || !same_str(x->error, y->error) || !same_str(x->report, y->report) ||
		    !same_str(x->transport, y->transport))
			abort();
		if ((x->kind == NC_NACK || x->kind == NC_HELD) && !same_str(x->nonce, y->nonce))
			abort();
		if (x->kind == NC_KEY && (x->reg_len != y->reg_len || memcmp(x->reg, y->reg, x->reg_len) != 0))
			abort();
	}
	node_changes_release(&d);
	node_changes_release(&b);
	buf_release(&again);
	return 0;
}
