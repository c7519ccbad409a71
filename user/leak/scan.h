/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A check's scan of the paused target (private to user/leak/): the blocks indexed, the memory
 * read, the words read judged, the pointers between blocks kept, the categories made of them.
 *
 * One pass reads the roots (roots.c), and with them the blocks inside root mappings (the heap),
 * in address order and large pieces (read.c): words outside blocks mark what they point to,
 * words inside record a pointer between blocks (scan.c). A second pass reads the few blocks
 * lying elsewhere. memcheck's heuristics judge interior pointers (heuristics.c). The categories
 * then follow from those pointers, in memory (classify.c, which runs the steps in order).
 */
#ifndef HEAPTAP_LEAK_SCAN_H
#define HEAPTAP_LEAK_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "leak/leak.h"
#include "leak/maps.h"

struct leak_pause;

/* A block to classify. */
struct reach_block {
	uint64_t addr;
	uint64_t size;
	enum reach_kind kind; /* out */
	/* out: for REACH_INDIRECT, the index (in the caller's array) of the definitely lost
	 * block whose clique it belongs to; otherwise its own index */
	uint32_t leader;
	/* out: REACH_REACHABLE only through interior pointers a heuristic accepted: its bit
	 * number in enum reach_heuristic; else -1 */
	int heuristic;
};

struct reach_opts {
	uint64_t budget_ns; /* bounds the time spent (0: no bound) */
	/*
	 * blocks[] holds every block of the allocator's heap (a command traced from its start):
	 * the rest of the heap (free chunks, the allocator's own records) is not a root, as
	 * under memcheck, whose allocator is its own.
	 */
	bool all_blocks_known;
	bool glibc;		 /* the allocator is glibc's: its arenas' layout is known */
	unsigned int heuristics; /* enum reach_heuristic bits */
};

/* The unit of the target's memory that pagemap describes and a failed read passes over. */
#define TARGET_PAGE 4096ULL
/* The bytes one read of the target's memory fills at most. */
#define READ_BUF_BYTES (1U << 20)
/* The pieces one read takes at most: UIO_MAXIOV, what process_vm_readv accepts. */
#define READ_MAX_PIECES 1024
/* A /proc/PID/pagemap entry's bits: a page in memory, swapped out, a file's (or shared). */
#define PM_PRESENT (1ULL << 63)
#define PM_SWAP (1ULL << 62)
#define PM_FILE (1ULL << 61)

enum block_state { BLOCK_UNREACHED, BLOCK_POSSIBLE, BLOCK_REACHABLE };

/* What holds a word read: a block's index, or root memory (registers, stacks, data). */
#define FROM_ROOT UINT32_MAX
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
#define SCAN_MAX_BLOCKS PTR_INDEX /* block indexes keep the flags' bits free */
/* scan.heur: the block was reached by a pointer to its start, not by a heuristic. */
#define NO_HEURISTIC 0xff

/* What a block's first words say to the heuristics (scan.head). */
#define HEAD_LENGTH64 (1 << 0)	/* a pointer 8 bytes in is accepted by length64 */
#define HEAD_NEWARRAY (1 << 1)	/* ... by newarray */
#define HEAD_STDSTRING (1 << 2) /* a pointer 24 bytes in, by stdstring */
#define HEAD_VTABLE (1 << 3)	/* its first word points to a vtable: multipleinheritance */

struct sorted_block {
	uint64_t start, end; /* end is clamped to the next block's start */
	uint32_t idx;	     /* in the caller's array */
};

/* An interior pointer multipleinheritance may accept, once the word it points to is read. */
struct mi_candidate {
	uint32_t from; /* FROM_ROOT, or a block */
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
	uint8_t *state;		  /* by sorted block, enum block_state */
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

	/* reading: pieces queued for one read into buf */
	uint64_t *buf;
	struct iovec loc[READ_MAX_PIECES], rem[READ_MAX_PIECES];
	uint64_t addr[READ_MAX_PIECES], len[READ_MAX_PIECES];
	uint32_t id[READ_MAX_PIECES]; /* FROM_ROOT, or the block the piece is part of */
	size_t k, used;
	bool through;	  /* the pieces queued lie where the process may not read now */
	bool no_vm_readv; /* process_vm_readv is not allowed: /proc/PID/mem for all */
	int mem_fd;	  /* /proc/PID/mem: reads through protections, as a debugger's */
	int map_fd;	  /* /proc/PID/pagemap, -1 if it cannot be read */
	bool no_pm_scan;
	uint64_t deadline; /* 0: none */
	bool late;	   /* the budget ran out */
	bool skipped_data; /* memory that may hold pointers was left unread: it could wait */
	struct reach_stats *st;

	/* the process's mappings, in address order */
	struct mapping *maps;
	size_t nmaps;
	/* heuristics: by sorted block, HEAD_* bits (NULL: none enabled), and the heuristic that
	 * made it reachable (NO_HEURISTIC: a pointer to its start did) */
	uint8_t *head, *heur;
	/* glibc: by sorted block, where in it the next chunk's header lies (0: not inside) */
	uint32_t *chunk_end;
	struct mi_candidate *mi;
	size_t nmi, mi_cap;
	uint64_t vt_addr[VTABLE_CACHE]; /* judged vtable addresses, | 1 when one */
};

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
int scan__classify(struct leak_pause *p, struct reach_block *blocks, size_t n,
		   const struct reach_opts *opts, struct reach_stats *st);

/* scan.c: the blocks indexed, the words judged, the pointers kept. */

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
struct scan *scan__new(const struct leak_pause *p, size_t n, struct reach_stats *st,
		       uint64_t deadline);

void scan__free(struct scan *s);

/*
 * read.c: the paused target's memory read, in batches of large pieces, or word by word. Memory
 * the process cannot read now (PROT_NONE, write-only) but may make readable again is read as a
 * debugger reads it, through /proc/PID/mem, which passes over the protection of such a mapping
 * (process_vm_readv does not); only pages the process wrote, since a read of another faults it
 * in.
 */

/* Reads stride words at each addr[i] into out[i * stride..]; 0 where unreadable, or never
 * written where the process may not read. Not counted. */
void scan__read_words(struct scan *s, const uint64_t *addr, uint64_t *out, size_t n, size_t stride);

/* Reads the pieces queued and hands their words to scan__root or scan__block_words. */
int scan__batch_flush(struct scan *s);

/* Queues len bytes at addr (both 8-aligned) for reading and scanning, as part of id; through:
 * they lie where the process may not read now, in pages it wrote. */
int scan__batch_add(struct scan *s, uint64_t addr, uint64_t len, uint32_t id, bool through);

/* roots.c: what the process can reach. */

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
int scan__read_memory(struct scan *s, struct leak_pause *p, const struct reach_opts *o);

/* heuristics.c: memcheck's heuristics for interior pointers, and what glibc's chunks tell. */

/*
 * What the heuristics need of each block, from its first two words: whether a pointer 8 bytes
 * in is accepted (length64: the first word is the size less 8, as sqlite3MemMalloc keeps it;
 * newarray: a count of elements new[] keeps before them, which the rest of the block holds
 * whole), 24 bytes in (stdstring: the characters of an old-ABI std::string, after its length,
 * capacity and reference count: the capacity and those 3 words and a NUL make the block,
 * the length no more than the capacity), and whether the first word is a vtable (a base part
 * of such an object may be pointed to: multipleinheritance).
 */
int scan__read_heads(struct scan *s, const struct reach_opts *o);

/* Interior pointers to base parts of C++ objects: accepted where they point to a vtable too. */
void scan__resolve_mi(struct scan *s);

#endif
