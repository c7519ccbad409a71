/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rss.c's part for glibc's malloc: its mappings among a process's (the brk heap, the threads'
 * arenas' heaps, the chunks it mmapped for large blocks), their resident pages, and at a full
 * read their chunks walked, per arena, with the tcaches' and fastbins' chunks taken out of
 * what is live (glibc_heap.h reads each).
 */
#ifndef HEAPTAP_RSS_GLIBC_H
#define HEAPTAP_RSS_GLIBC_H

#include <stdbool.h>
#include <stdint.h>

#include "target/memory.h"
#include "target/pagemap.h"
#include "target/rss_reading.h"
#include "target/vmas.h"

struct rss_glibc;

int rss_glibc__new(struct rss_glibc **out);
void rss_glibc__free(struct rss_glibc *g);

/* The brk heap and the arenas' heaps among v's mappings: taken[i] for each one holding one. */
int rss_glibc__find(struct rss_glibc *g, struct pagemap *pm, struct memory *mem,
		    const struct vmas *v, bool *taken);
/* The chunks mmapped for large blocks, at the start of the private anonymous mappings
 * neither taken nor stacks (each judged once while it stays the same): taken too. */
int rss_glibc__find_mmapped(struct rss_glibc *g, struct pagemap *pm, struct memory *mem,
			    const struct vmas *v, bool *taken, const bool *is_stack);
/* The resident bytes of all of them, and of each mapping's part (allocator_in[i]). */
int rss_glibc__resident(struct rss_glibc *g, struct pagemap *pm, const struct vmas *v,
			uint64_t *bytes, uint64_t *allocator_in);
/* Their chunks walked, the bins read: now's walk figures and arenas. */
int rss_glibc__walk(struct rss_glibc *g, struct pagemap *pm, struct memory *mem,
		    const struct vmas *v, struct rss_reading *now);

#endif
