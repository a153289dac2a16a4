/* rollout/order.h: who goes first in a staged rollout. The order is
 * deterministic (the same nodes give the same order) and stratified by
 * labels: the first nodes cover every distinct label value, rarest value
 * first (a minority a canary of the majority would miss), one node each
 * where they can; then the rest follow round-robin over the distinct label
 * sets, so a small stage is as varied as its size allows. */
#ifndef TETHER_ROLLOUT_ORDER_H
#define TETHER_ROLLOUT_ORDER_H

#include <stddef.h>

struct ro_node {
	const char *id;
	const char *labels;   /* canonical JSON object of string values */
};

/* Fills order[0..n) with indexes into nodes: the rollout order. */
void rollout_order(const struct ro_node *nodes, size_t n, size_t *order);

/* The nodes a stage of pct percent holds: ceil(n * pct / 100), at least
 * one, at most n. */
size_t rollout_stage_size(size_t n, unsigned pct);

#endif
