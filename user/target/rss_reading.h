/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What a read of where a process's RSS is holds (rss.h reads it; rss_glibc.h fills glibc's
 * part): plain data, and the parts a report splits it into.
 */
#ifndef HEAPTAP_RSS_READING_H
#define HEAPTAP_RSS_READING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The parts a report splits the RSS into (report/analysis.c makes them from a reading): the
 * total (VmRSS), live blocks, the allocator's free memory (of which whole pages), what of
 * the allocator's is not known to be either, the threads' stacks, other anonymous memory,
 * files and shared memory. Their names are the JSON keys.
 */
enum rss_part {
	RSS_TOTAL,
	RSS_LIVE,
	RSS_ALLOCATOR_FREE,
	RSS_FREE_WHOLE_PAGES, /* of RSS_ALLOCATOR_FREE */
	RSS_ALLOCATOR_UNKNOWN,
	RSS_STACKS,
	RSS_ANON_OTHER,
	RSS_FILES,
	RSS_SHMEM,
	RSS_PARTS,
};

/* A glibc arena: its heaps, walked. */
struct rss_arena {
	uint64_t address; /* its struct malloc_state; 0 for the main one when not found */
	bool main;	  /* the brk heap's */
	unsigned int heaps;
	uint64_t threads; /* attached to it, as its state says (0: not read) */
	uint64_t size;	  /* bytes its heaps span */
	uint64_t resident, live, free_whole, unknown;
	uint64_t free; /* resident and neither live nor unknown */
	uint64_t cached; /* in its threads' tcaches and its fastbins: free to malloc, in use to a
			  * walk (out of live) */
	uint64_t chunks, free_chunks;
	unsigned int derailed; /* heaps whose walk stopped at a header that did not fit */
};

/* A span of addresses, [start, end). */
struct rss_range {
	uint64_t start, end;
};

/* An anonymous mapping that is neither the allocator's nor a stack: its resident bytes. */
struct rss_mapping {
	uint64_t start, end, anon;
	uint64_t allocator; /* resident bytes of the allocator's in it (not in anon) */
};

struct rss_reading {
	uint64_t time_ns; /* CLOCK_MONOTONIC */
	/* The kernel's, at each read (status): VmRSS and its three parts */
	uint64_t vm_rss, rss_anon, rss_file, rss_shmem;
	/* Resident bytes, at each read (pagemap): of the allocator's mappings (glibc: the brk
	 * heap, the arenas' heaps and the chunks it mmapped; another allocator: every private
	 * anonymous mapping not a stack nor the program's own) and of the stacks */
	uint64_t allocator, stacks;
	unsigned int threads, stack_maps, stacks_by_sp, stacks_by_guard;
	/* glibc's chunks at the latest full read: live (tcaches and fastbins out), whole free
	 * pages, unknown (past a derailed walk), cached (in tcaches and fastbins) */
	bool walked;
	uint64_t walk_time_ns;
	uint64_t live, free_whole, unknown, cached;
	uint64_t mmapped_chunks, mmapped_live;
	bool bins_read; /* every tcache and fastbin was read whole */
	/* Pages sparsely used: resident in glibc's heaps, holding live bytes, less than half a
	 * page of them; in address order */
	uint64_t *sparse_pages;
	size_t nsparse;
	struct rss_arena *arenas;
	size_t narenas;
	/* The other anonymous mappings at the latest full read (their anonymous pages), and
	 * their sum */
	struct rss_mapping *others;
	size_t nothers;
	uint64_t others_anon;
	/* What the reads cost */
	bool full;		  /* this read was a full one */
	uint64_t read_ns;	  /* this read's time */
	uint64_t full_ns;	  /* the latest full read's */
	uint64_t full_time_ns;	  /* when that one was made */
	uint64_t memory_read;	  /* bytes of the process's memory that one read */
	const char *pages;	  /* how pages were read: "pagemap_scan" or "pagemap" */
	/* Windows of the process's memory this read found gone (unmapped since their pages were
	 * listed): counted, not an error */
	unsigned int windows_gone;
};

#endif
