/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The table of outstanding blocks (heaptap.h's buckets), mapped into heaptap: read as memory
 * while the program runs on, and changed in place where the loader drops blocks. Mapped once
 * per skeleton.
 */
#ifndef HEAPTAP_BLOCK_TABLE_H
#define HEAPTAP_BLOCK_TABLE_H

#include <stdbool.h>
#include <stdint.h>

#include <linux/types.h>

#include "heaptap.h"

struct heaptap_bpf;

/* skel's table, of *n buckets, or NULL (errno set). */
struct heaptap_bucket *block_table__map(struct heaptap_bpf *skel, uint32_t *n);

/* The table let go (unmapped), before the skeleton is destroyed. */
void block_table__release(void);

/* The bytes of the table mapped into heaptap (resident, as the kernel's pages are from the
 * mapping on: in heaptap's RSS, though they are the map's). */
uint64_t block_table__mapped_bytes(void);

/* key's record out of the table of n buckets t, as the BPF side's table_take does; false if
 * it has none (a thread of the program took it meanwhile). */
bool block_table__take(struct heaptap_bpf *skel, struct heaptap_bucket *t, uint32_t n,
		       const struct heaptap_block *key);

/* each(ctx, key, record) for every block of the table, as it stands while the program runs
 * on: a slot taken or given up meanwhile (its owner, address or time changed while its
 * record was read: a taker clears the time before the address) is passed by. Stops at each's
 * first nonzero return, which it returns. */
int block_table__read(const struct heaptap_bucket *t, uint32_t n,
		      int (*each)(void *ctx, const struct heaptap_block *key,
				  const struct heaptap_alloc *rec),
		      void *ctx);

#endif
