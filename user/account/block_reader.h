/* SPDX-License-Identifier: GPL-2.0 */
/*
 * One read of the table of blocks into a snapshot: each block filed by its site, thread,
 * process and age (or listed, for a leak check), or, its process gone or its image left by
 * exec, taken out and counted as dropped.
 */
#ifndef HEAPTAP_BLOCK_READER_H
#define HEAPTAP_BLOCK_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "account/snapshot.h"
#include "base/idmap.h"

struct heaptap_bpf;
struct stacks;

/* A process's share of a site, or of the whole (site SIZE_MAX). */
struct tally {
	size_t site;
	struct site_proc p;
};

/* A block to drop, its size and why. */
struct dropping {
	struct heaptap_block key;
	uint64_t size;
	enum block_owner why;
};

/* What one read of the table of blocks gathers besides the sites; zeroed but for o. */
struct block_reader {
	const struct snapshot_opts *o;
	struct idmap tallies;	  /* (site << 32 | tgid) -> index + 1 in v */
	struct tally *v;	  /* by site, and per process (site SIZE_MAX) */
	size_t n, cap;
	struct dropping *drop;	  /* blocks to drop */
	size_t ndrop, drop_cap;
	struct idmap dropped;	  /* tgid << 2 | why -> index + 1 in dropped_v */
	struct tally *dropped_v;  /* blocks and bytes dropped, by process and why (in p) */
	size_t ndropped, dropped_cap;
};

/* Every block of the table into s (blocks: listed, of process only if not 0). */
int block_reader__read(struct block_reader *rd, struct heaptap_bpf *skel, struct stacks *stacks,
		       bool blocks, uint32_t only, struct snapshot *s);

/* Each site's processes, most bytes first; each process's live blocks. */
void block_reader__file(struct block_reader *rd, struct snapshot *s);

/* Blocks of images left by exec and of processes gone: out of the map, and out of the BPF
 * side's live bytes (its peak follows what is live), told per process. */
void block_reader__drop(struct block_reader *rd, struct heaptap_bpf *skel, struct snapshot *s);

/* Pools of processes gone and of images left by exec: out of the pools map, which holds
 * those alive only; and what they took from malloc, out of the map and of the figures, as
 * their blocks. */
void block_reader__drop_pools(struct heaptap_bpf *skel, const struct snapshot_opts *o);

void block_reader__free(struct block_reader *rd);

#endif
