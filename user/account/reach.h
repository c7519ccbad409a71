/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Memcheck's leak categories on a live process: stop its threads, scan what it can still reach
 * (registers, stacks, writable data), and sort the outstanding heap blocks into definitely,
 * indirectly and possibly lost and still reachable.
 *
 * Roots: each stopped thread's general registers; each thread's stack from 128 bytes below its
 * stack pointer (the x86-64 red zone) to the end of the mapping holding it; every other
 * readable, writable, private mapping (data and bss of every object, [heap], anonymous memory),
 * less the tracked blocks themselves, whose contents count only once the block is reached.
 * Skipped: shared mappings (a pointer into this process's heap means nothing to the other
 * side, and device memory may not bear reading), private mappings of /dev files, read-only
 * memory, and pages that hold nothing (never touched, or the zero page: PAGEMAP_SCAN, else
 * /proc/PID/pagemap, tells). Unreadable pages are counted, never fatal. Blocks missing from the
 * caller's list (allocated before heaptap attached) are ordinary memory, so they count as roots.
 * Never read, because a read could wait without bound on a stopped thread or a device:
 * mappings registered with userfaultfd and device mappings (VmFlags um, uw, ui, ur, io, pf,
 * mm in /proc/PID/smaps). Their pages that may hold data count as unreadable, and leave the
 * check incomplete, as does a thread that could not be stopped (its registers are unknown).
 *
 * Blind spots, where memcheck knows the allocator's state and this module does not: free
 * chunks and the slack after blocks are roots too, so a stale pointer there hides a leak; and
 * glibc's free lists point 16 bytes before a free chunk, which can fall in the last bytes of
 * the block before it, possibly lost then rather than definitely.
 */
/*
 * The steps, each a module: the target paused (reach_pause.h) or held to its exit
 * (reach_hold.h) by a tracer process of heaptap's own (reach_tracer.h); its maps read
 * (reach_maps.h); its memory scanned (reach_scan.h, reach_read.h) from the roots
 * (reach_roots.h), interior pointers judged by memcheck's heuristics (reach_heuristics.h);
 * the categories (reach_categories.h); all run by reach__classify (reach_classify.h).
 */
#ifndef HEAPTAP_REACH_H
#define HEAPTAP_REACH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum reach_kind {
	REACH_DEFINITE, /* lost, and no lost block points to it but its own clique's: it leads it */
	REACH_INDIRECT, /* lost, in the clique of a definitely lost block: its leader */
	REACH_POSSIBLE, /* reached only through interior pointers or through possibly lost blocks */
	REACH_REACHABLE, /* a pointer to its start is reachable from the roots */
	REACH_KINDS,	 /* the number of kinds; also the kind of a block left unsettled */
};

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

/* Why a check left blocks unsettled: the bits of reach_stats.incomplete. */
enum reach_reason {
	REACH_OUT_OF_TIME = 1 << 0,    /* the time budget ran out */
	REACH_THREADS_LATE = 1 << 1,   /* a thread did not stop: its registers are unknown */
	REACH_MEMORY_SKIPPED = 1 << 2, /* memory that may hold pointers was not read */
};
#define REACH_REASONS 3

/* Where root memory lies: the kinds of reach_stats.roots. */
enum reach_root_kind {
	REACH_ROOT_STACK, /* a thread's stack, from its stack pointer */
	REACH_ROOT_DATA,  /* a file's private writable mapping: data of an object */
	REACH_ROOT_HEAP,  /* the allocator's heap (when its blocks are not all known) */
	REACH_ROOT_ANON,  /* other anonymous memory: bss, mmap'd by the program */
	REACH_ROOT_KINDS,
};

/* The allocator's heap regions reach__classify found: glibc's main heap and arenas. */
#define REACH_MAX_HEAPS 64
struct reach_heap {
	uint64_t start, end;
	bool arena; /* a glibc arena's heap (mmap'd), else the main heap ([heap], brk) */
};

/* memcheck's heuristics for interior pointers (--leak-check-heuristics): bits. */
enum reach_heuristic {
	REACH_HEUR_STDSTRING = 1 << 0, /* a std::string's characters, past 3 words */
	REACH_HEUR_LENGTH64 = 1 << 1,  /* past a first word holding the block's size less 8 */
	REACH_HEUR_NEWARRAY = 1 << 2,  /* past new[]'s count of elements */
	REACH_HEUR_MULTIPLE = 1 << 3,  /* a base part of a C++ object (multiple inheritance) */
};
#define REACH_HEURISTICS 4
#define REACH_HEUR_ALL ((1 << REACH_HEURISTICS) - 1)

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

struct reach_stats {
	double pause_s;		   /* first thread stopped to last resumed (reach__resume) */
	double scan_s;		   /* time in reach__classify */
	uint64_t scanned_bytes;	   /* root and block bytes read */
	uint64_t unreadable_bytes; /* root and block bytes that could not be read, or were not */
	unsigned int regions;	   /* root mappings scanned, stacks included */
	unsigned int threads;	   /* threads stopped (their registers are roots) */
	unsigned int late_threads; /* threads that did not stop in time */
	/* root mappings not read: a read could wait on a stopped thread or a device */
	unsigned int skipped_regions;
	unsigned int incomplete; /* enum reach_reason bits; 0 when complete */
	/* false when incomplete: then a kind is either REACH_REACHABLE or REACH_KINDS */
	bool complete;
	/* root mappings scanned, by enum reach_root_kind, and their bytes (address span) */
	unsigned int root_regions[REACH_ROOT_KINDS];
	uint64_t root_bytes[REACH_ROOT_KINDS];
	/* the allocator's heap regions, and whether they were scanned as roots */
	struct reach_heap heaps[REACH_MAX_HEAPS];
	unsigned int nheaps;
	bool heap_roots;
	/* blocks made reachable by an interior pointer a heuristic accepted, by heuristic */
	uint64_t heur_blocks[REACH_HEURISTICS];
	uint64_t heur_bytes[REACH_HEURISTICS];
};

/* "stack", "data", "heap", "anonymous". */
const char *reach__root_name(enum reach_root_kind k);
/* "stdstring", "length64", "newarray", "multipleinheritance", by bit number. */
const char *reach__heuristic_name(unsigned int i);

/* "definitely_lost", "indirectly_lost", "possibly_lost", "still_reachable"; "unknown". */
const char *reach__kind_name(enum reach_kind k);
/* "max_pause", "threads_not_stopped", "memory_not_read" for one reason bit. */
const char *reach__reason_name(enum reach_reason r);
/* What a negative errno from the leak check's steps (reach_*.h) means to the user, and what
 * to do about it. */
const char *reach__strerror(int err);

#endif
