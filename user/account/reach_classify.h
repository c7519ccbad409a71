/* SPDX-License-Identifier: GPL-2.0 */
/* A check's classification: the steps run on the paused target, in order. */
#ifndef HEAPTAP_REACH_CLASSIFY_H
#define HEAPTAP_REACH_CLASSIFY_H

#include <stddef.h>

#include "account/reach.h"

struct reach_pause;

/*
 * Classifies blocks[0..n) (any order; addresses distinct, else -EINVAL) by scanning the stopped
 * process: its root mappings are read once, in address order, the blocks in them with them.
 * Needs up to 60 bytes a block and 12 a pointer between blocks. budget_ns bounds the time spent
 * (0: no bound); checked after sorting the blocks and every MiB read. 0 on success, even when the
 * budget runs out, a thread was late or memory could not be read safely: then st->complete is
 * false, st->incomplete says why, blocks proven reachable by what was read are
 * REACH_REACHABLE and all others REACH_KINDS (unknown). On error (negative errno) every kind is
 * REACH_KINDS. st may be NULL.
 */
int reach__classify(struct reach_pause *p, struct reach_block *blocks, size_t n,
		    const struct reach_opts *opts, struct reach_stats *st);

#endif
