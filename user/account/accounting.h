/* SPDX-License-Identifier: GPL-2.0 */
/* Reading the BPF side's accounting: counters, size classes and outstanding blocks by site. */
#ifndef HEAPTAP_ACCOUNTING_H
#define HEAPTAP_ACCOUNTING_H

#include <stddef.h>
#include <stdint.h>

#include "account/snapshot.h"

struct heaptap_bpf;
struct stacks;

/* Takes the blocks that pools' resets and destroys freed out of the maps (their sites and
 * size classes with them), if any are waiting; snapshots do it first. */
void accounting__reap_pools(struct heaptap_bpf *skel);

/* Takes a snapshot. Sites are keyed by stacks' canonical ids (a sampled block's, once
 * unwound, by its stack's). */
int accounting__snapshot(struct heaptap_bpf *skel, struct stacks *stacks,
			 const struct snapshot_opts *opts, struct snapshot *out);

/* Every live block of process tgid (0: of every process), for a leak check: malloc'd. */
int accounting__blocks(struct heaptap_bpf *skel, struct stacks *stacks, uint32_t tgid,
		       struct live_block **out, size_t *n);

/* --watch: the sites are the stacks that first wrote new pages, a page a block: live and
 * live_bytes count those pages. */
int accounting__watch_snapshot(struct heaptap_bpf *skel, struct stacks *stacks, struct snapshot *out);
/* A slot of the proc_counters array for process tgid, its counters zeroed (heaptap.h: struct
 * heaptap_proc): the slot, or a negative errno (-ENOSPC: every one is taken). */
int accounting__take_proc_slot(struct heaptap_bpf *skel, uint32_t tgid);
/* A process's slot given back, its counters zeroed, once they are read. */
void accounting__give_back_proc_slot(struct heaptap_bpf *skel, uint32_t slot);

/* Kernel memory held by heaptap's BPF maps (their fdinfo "memlock"). */
uint64_t accounting__map_bytes(struct heaptap_bpf *skel);

#endif
