/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The scan of a check (internal to reach_*.c): the blocks indexed, the words read judged, the
 * pointers between blocks kept.
 *
 * One pass reads the roots, and with them the blocks inside root mappings (the heap),
 * in address order and large pieces: words outside blocks mark what they point to, words
 * inside record a pointer between blocks. A second pass reads the few blocks lying elsewhere.
 * The categories then follow from those pointers, in memory.
 */
#ifndef HEAPTAP_REACH_SCAN_H
#define HEAPTAP_REACH_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "account/reach.h"
#include "account/reach_maps.h"

#define PAGE 4096ULL
#define BUF_SIZE (1U << 20)
#define BATCH 1024 /* UIO_MAXIOV: iovecs one process_vm_readv accepts */

enum block_state { UNREACHED, POSSIBLE, REACHABLE };

#define NONE UINT32_MAX
#define ROOT (NONE - 1) /* a batch entry of root memory */
/*
 * A pointer to a block, as the scan keeps it: the block's index, and what kind of pointer it
 * is: to its start, or to its inside accepted by a heuristic (which one in PTR_HEUR_ID), or
 * else to its inside.
 */
#define PTR_START (1U << 31)
#define PTR_HEUR (1U << 30)
#define PTR_HEUR_SHIFT 28
#define PTR_HEUR_ID (3U << PTR_HEUR_SHIFT)
#define PTR_INDEX ((1U << PTR_HEUR_SHIFT) - 1)
#define MAX_BLOCKS PTR_INDEX /* block indexes keep the flags' bits free */
#define NO_HEUR 0xff

/* What a block's first words say to the heuristics (scan.hflags). */
#define HF_LENGTH64 (1 << 0)  /* a pointer 8 bytes in is accepted by length64 */
#define HF_NEWARRAY (1 << 1)  /* ... by newarray */
#define HF_STDSTRING (1 << 2) /* a pointer 24 bytes in, by stdstring */
#define HF_VTABLE (1 << 3)    /* its first word points to a vtable: multipleinheritance */

struct sorted_block {
	uint64_t start, end; /* end is clamped to the next block's start */
	uint32_t idx;	     /* in the caller's array */
};

/* An interior pointer multipleinheritance may accept, once the word it points to is read. */
struct mi_candidate {
	uint32_t from; /* ROOT, or a block */
	uint32_t to;
	uint64_t addr;
};

#define VTABLE_CACHE 1024 /* addresses judged, a power of two */

struct pointer {
	uint32_t from;
	uint32_t to; /* | PTR_START, or PTR_HEUR and its heuristic */
};

struct scan {
	int pid;
	struct sorted_block *blk; /* in address order */
	uint8_t *state;
	size_t n;
	/* a word w can point into a block only if w - lo < span */
	uint64_t lo, span;
	/* bucket[b]: the first block starting at or after lo + (b << shift) */
	uint32_t *bucket;
	unsigned int shift;

	/* pointers between blocks as read, then by block: those of block i are
	 * to[first[i] .. first[i + 1]) */
	struct pointer *ptrs;
	size_t nptrs, ptrs_cap;
	uint32_t *first, *to;
	/* blocks marked and not yet followed; each enters each stack at most once */
	uint32_t *reach_stack, *loose_stack;
	size_t reach_top, loose_top;
	int err;

	/* reading: entries queued for one process_vm_readv into buf */
	uint64_t *buf;
	struct iovec loc[BATCH], rem[BATCH];
	uint64_t addr[BATCH], len[BATCH];
	uint32_t id[BATCH]; /* ROOT, or the block the entry is part of */
	size_t k, used;
	int mem_fd; /* /proc/PID/mem, when process_vm_readv is not allowed */
	int map_fd; /* /proc/PID/pagemap, -1 if it cannot be read */
	bool no_pm_scan;
	uint64_t deadline; /* 0: none */
	bool late;	   /* the budget ran out */
	bool skipped_data; /* memory that may hold pointers was left unread: it could wait */
	struct reach_stats *st;

	/* the process's mappings, in address order */
	struct mapping *maps;
	size_t nmaps;
	/* heuristics: by sorted block, HF_* bits (NULL: none enabled), and the heuristic that
	 * made it reachable (NO_HEUR: a pointer to its start did) */
	uint8_t *hflags, *heur;
	/* glibc: by sorted block, where in it the next chunk's header lies (0: not inside) */
	uint32_t *chunk_end;
	struct mi_candidate *mi;
	size_t nmi, mi_cap;
	uint64_t vt_addr[VTABLE_CACHE]; /* judged vtable addresses, | 1 when one */
};

struct reach_pause;

/* The last block starting at or before w, if w is its start or inside it; else -1. */
static inline long scan__find_block(const struct scan *s, uint64_t w)
{
	size_t b = (w - s->lo) >> s->shift;
	size_t lo = s->bucket[b], hi = s->bucket[b + 1];

	/* Blocks before the bucket all start before w, those after it all after. */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (s->blk[mid].start <= w)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return -1;
	lo--;
	return w < s->blk[lo].end || w == s->blk[lo].start ? (long)lo : -1;
}

/* Block i reached by a pointer of kind how (PTR_START, PTR_HEUR and its heuristic, or 0). */
void scan__mark(struct scan *s, uint32_t i, uint32_t how);

void scan__root_words(struct scan *s, const uint64_t *w, size_t nw);

void scan__add_pointer(struct scan *s, uint32_t from, uint32_t to);

void scan__block_words(struct scan *s, uint32_t from, const uint64_t *w, size_t nw);

/* Root memory at addr (8-aligned) read into w: words in a block are that block's. */
void scan__root(struct scan *s, uint64_t addr, const uint64_t *w, uint64_t len);

/* Sorted block bounds, and the buckets that narrow the search for a word. */
int scan__index_blocks(struct scan *s, const struct reach_block *blocks);

/*
 * A scan of n blocks in the memory of the paused process p. The memory is read through a
 * stopped thread: at an exit, the leader may have let go of it already (/proc/PID/maps is
 * then empty), while a thread held at its exit stop still has it. /proc/TID and
 * process_vm_readv take any thread's ID. NULL when out of memory.
 */
struct scan *scan__new(const struct reach_pause *p, size_t n, struct reach_stats *st,
			      uint64_t deadline);

void scan__free(struct scan *s);

#endif
