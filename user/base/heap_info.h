/* SPDX-License-Identifier: GPL-2.0 */
/*
 * glibc's heap_info (malloc/arena.c, x86-64), which begins each heap of a thread's arena:
 * known from its first words by the RSS parts' heap walk (target/glibc_heap) and by the leak
 * check's roots (leak/roots), which must agree on what a heap is.
 */
#ifndef HEAPTAP_HEAP_INFO_H
#define HEAPTAP_HEAP_INFO_H

#include <stdbool.h>
#include <stdint.h>

/* A thread arena's heap: HEAP_MAX_SIZE (64-bit), its alignment and its largest span. */
#define GLIBC_HEAP_MAX (64ULL << 20)

/*
 * Whether the first words of a mapping's memory at a GLIBC_HEAP_MAX boundary, w (ar_ptr,
 * prev, size, mprotect_size), are a heap_info: its arena just after it (its first heap: the
 * structure is 32 or 48 bytes long, by glibc's version) or in an earlier heap, the previous
 * heap aligned, and a size in whole pages that fits the mapping (map_end: where it ends).
 */
static inline bool heap_info__is(uint64_t at, uint64_t map_end, const uint64_t w[4])
{
	uint64_t arena_at = w[0] % GLIBC_HEAP_MAX;

	return (arena_at == 32 || arena_at == 48) && w[0] - arena_at <= at &&
	       !(w[1] % GLIBC_HEAP_MAX) && w[2] && w[2] <= w[3] && at < map_end &&
	       w[3] <= map_end - at && !(w[2] % 4096);
}

#endif
