/* SPDX-License-Identifier: GPL-2.0 */
/*
 * glibc's malloc as its memory lays it out (x86-64, glibc 2.26 on: malloc/malloc.c and
 * arena.c), read from outside while the program runs: the heaps of the threads' arenas
 * (each starts with a heap_info at a 64 MiB boundary), the chunks of a heap walked by their
 * headers, the chunks it mmapped for large blocks, an arena's state, and the chunks a walk
 * takes for in use that the allocator holds free: each thread's tcache and the arenas'
 * fastbins. Every size and pointer read is checked before it is used; a walk that meets one
 * that does not fit stops there, and what it did not see is counted as unknown.
 */
#ifndef HEAPTAP_GLIBC_HEAP_H
#define HEAPTAP_GLIBC_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/heap_info.h"
#include "target/memory.h"

#define GLIBC_FASTBINS 10

/* The first chunk of the heap at heap, whose arena is ar_ptr (heap_info's first word). */
uint64_t glibc_heap__first_chunk(uint64_t heap, uint64_t ar_ptr);

/* An arena's state (struct malloc_state), as read. */
struct glibc_arena {
	uint64_t address;
	uint64_t fastbins[GLIBC_FASTBINS]; /* each a list's first chunk, or 0 */
	uint64_t top;			   /* the top chunk */
	uint64_t next;			   /* the next arena in glibc's ring of them */
	uint64_t threads;		   /* threads attached to it */
	uint64_t system_mem;		   /* bytes it has from the system */
};

/* The arena at address; false when it cannot be read. */
bool glibc_heap__arena(struct memory *m, uint64_t address, struct glibc_arena *out);

/* Where the chunks of a heap are, resident and in what state; the walks of several heaps add
 * up in one. */
struct chunk_walk {
	uint64_t live;	      /* resident bytes of chunks in use (their usable bytes) */
	uint64_t live_chunks; /* chunks in use */
	uint64_t free_chunks; /* free chunks, the top included */
	/* resident whole pages inside free chunks past their list pointers (what malloc_trim
	 * gives back), bytes */
	uint64_t free_whole;
	uint64_t unknown; /* resident bytes past where a walk derailed */
	unsigned int derailed;
	uint64_t top; /* the latest walk's last chunk, when it ended the heap: its top */
	/* chunks in use of a tcache's size (tcache_perthread_struct): glibc_heap__tcache's */
	uint64_t *tcaches;
	size_t ntcaches, cap;
	/* Pages sparsely used: resident, holding live bytes, less than half a page of them (in
	 * the walk's order; at most GLIBC_SPARSE_MAX); and the page being summed */
	uint64_t *sparse;
	size_t nsparse, sparse_cap;
	uint64_t page, page_live;
};

#define GLIBC_SPARSE_MAX (1U << 20)

/*
 * Walks the chunks of [first, end) (a heap: the brk area, or a thread arena's heap up to its
 * heap_info's size) through m, whose resident runs must cover them. non_main: the heap of a
 * thread arena, whose chunks in use say so. Negative errno only when out of memory.
 */
int glibc_heap__walk(struct memory *m, uint64_t first, uint64_t end, bool non_main,
		     struct chunk_walk *w);
void chunk_walk__free(struct chunk_walk *w);

/*
 * Chunks glibc mmapped for blocks, back to back from start (a mapping, or mappings the kernel
 * merged), up to end: their usable bytes resident into w->live. Returns where they end
 * (start: none there).
 */
uint64_t glibc_heap__mmapped(struct memory *m, uint64_t start, uint64_t end, struct chunk_walk *w);

/* What the bins' readers are told of each chunk they follow: whether it is in a heap walked
 * (valid), and each one they find in a bin (cached). */
struct bin_reader {
	bool (*valid)(uint64_t chunk, void *ctx);
	void (*cached)(uint64_t chunk, uint64_t size, void *ctx);
	void *ctx;
	uint64_t max; /* chunks followed at most, in all; counts down */
};

/*
 * The chunks in the tcache whose structure is the chunk at tc (one of w->tcaches), each
 * told to r->cached: nothing when a list of it does not read as a tcache's (then false).
 */
bool glibc_heap__tcache(struct memory *m, uint64_t tc, struct bin_reader *r);

/* The chunks in arena a's fastbins, each told to r->cached; false when a list derailed or
 * r->max ran out (what was followed before stays told). */
bool glibc_heap__fastbins(struct memory *m, const struct glibc_arena *a, struct bin_reader *r);

/* The main arena, in [start, end) (the C library's data): the malloc_state whose top chunk
 * is top and whose ring of arenas holds it; 0 when none is found. */
uint64_t glibc_heap__find_main(struct memory *m, uint64_t start, uint64_t end, uint64_t top);

#endif
