/* SPDX-License-Identifier: GPL-2.0 */
/* The roots of a check: threads' registers and stacks, data, the allocator's heap where not
 * every block is known; read with the blocks in them, then the blocks elsewhere. */
#ifndef HEAPTAP_REACH_ROOTS_H
#define HEAPTAP_REACH_ROOTS_H

#include "account/reach.h"
#include "account/reach_scan.h"

struct reach_pause;

/*
 * The allocator's heap regions among the mappings: the main heap ([heap], grown by brk), and,
 * with glibc, its arenas' heaps: anonymous mappings at a multiple of HEAP_MAX_SIZE (64 MiB)
 * that start with a heap_info (malloc/arena.c): the arena's address (in an arena's first
 * heap, just past that heap_info: 32 or 48 bytes in, as glibc's version has it; in a later
 * heap, the same place in another one), the previous heap (none, or another such address),
 * the size in use and the size made writable, no larger than the mapping.
 */
void scan__find_heaps(struct scan *s, const struct reach_opts *o);

/*
 * Registers of every stopped thread (what is known of late ones), then every root mapping,
 * then the blocks outside them: every pointer from memory the process can reach, or from a
 * block. Nothing is read from a mapping a read may wait on: its bytes that may hold data are
 * counted as unreadable, and the blocks it holds are not read. The allocator's heap is not a
 * root where every block in it is known: only its blocks are read, as they are reached.
 */
int scan__read_memory(struct scan *s, struct reach_pause *p, const struct reach_opts *o);

#endif
