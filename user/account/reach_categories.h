/* SPDX-License-Identifier: GPL-2.0 */
/* Categories from the pointers a scan read: what is reachable followed, what is possibly
 * lost, the cliques of lost blocks. */
#ifndef HEAPTAP_REACH_CATEGORIES_H
#define HEAPTAP_REACH_CATEGORIES_H

#include <stdint.h>

#include "account/reach.h"
#include "account/reach_scan.h"

/* The pointers read, grouped by the block holding them. */
int scan__index_pointers(struct scan *s);

/* Start pointers from reachable blocks reach, interior ones make possibly lost. */
void scan__follow_reachable(struct scan *s);

/* Whatever possibly lost blocks point to is possibly lost, unless reachable. */
void scan__follow_possible(struct scan *s);

/*
 * Groups the lost blocks into cliques: in address order, a block not yet in a clique leads
 * one, made of every lost block it leads to that has none, and of earlier leaders it reaches,
 * which join it with their own cliques.
 */
void scan__find_cliques(struct scan *s, uint32_t *leader);

/* Each block's category from the scan; a complete scan's leaders (by sorted block) tell
 * lost blocks from those lost with them. */
void scan__file(const struct scan *s, struct reach_block *blocks, const uint32_t *leader);

#endif
