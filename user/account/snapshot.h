/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What a snapshot of the BPF side's accounting holds (accounting.h takes it): counters, size
 * classes, and the outstanding blocks by site, thread, process and age.
 */
#ifndef HEAPTAP_SNAPSHOT_H
#define HEAPTAP_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>

#include "heaptap.h"

struct dump;
struct syms;

#define SITE_SIZES 8
/* Live blocks kept per site as examples (for dumps): its oldest. */
#define SITE_EXAMPLES 4
/* Processes kept per site, by live bytes. */
#define SITE_PROCS 16
/* Ages of live blocks: under 1 s, 10 s, 1 min, 10 min, 1 h, 1 day, and older. */
#define AGE_BUCKETS 7
extern const uint64_t snapshot__age_limits_s[AGE_BUCKETS - 1];

/* Outstanding blocks that share an allocating stack. */
struct site {
	uint64_t stack_id; /* 0: blocks whose stack was not stored */
	uint64_t live_bytes;
	uint64_t live;
	uint64_t oldest_ns; /* CLOCK_MONOTONIC allocation time of the oldest block */
	uint64_t min_size;
	uint64_t max_size;
	uint64_t sizes[SITE_SIZES]; /* distinct sizes, ascending, the first SITE_SIZES */
	unsigned int nsizes;
	bool more_sizes;
	uint32_t fn; /* allocating function (index of the attach table) */
	struct {
		uint64_t addr;
		uint64_t size;
		uint64_t time_ns;
		uint32_t tgid; /* whose block it is */
	} examples[SITE_EXAMPLES]; /* the oldest live blocks, oldest first */
	/* The processes its blocks are in, most bytes first (a site of a forked service spans
	 * its processes): the first SITE_PROCS, and how many in all */
	struct site_proc {
		uint32_t tgid;
		uint64_t live;
		uint64_t live_bytes;
	} procs[SITE_PROCS];
	unsigned int nprocs;
	unsigned int nexamples;
	/* With sampling, what the sampled blocks stand for: each s-byte block was sampled
	 * with probability p = 1 - exp(-s / interval) and counts 1/p blocks, s/p bytes
	 * (Horvitz-Thompson); est_var is the variance of est_bytes. Without, the same as
	 * live and live_bytes, variance 0. */
	double est_bytes;
	double est_blocks;
	double est_var;
	/* Filled at the report for the top sites: what some of its blocks hold, and the pool
	 * its oldest block is in (0: none), with the pool's name where it has one ("": none) */
	struct dump *dumps;
	size_t ndumps;
	uint64_t pool;
	char pool_name[64];
	/* ...and the type of its objects (a Python class: 0 for none), by name ("": unread) */
	uint64_t object_type;
	char object_type_name[64];
};

/* One process's figures at the snapshot: its counters, and its live blocks. */
struct proc_live {
	uint32_t tgid;
	struct heaptap_proc c;
	uint64_t live;
	uint64_t live_bytes;
};

/* Whose a block is, as the session sees it: a process's current image (counted), an image
 * it left by exec or a process that exited (its blocks are dropped from the map and counted
 * apart), or neither (a process it no longer follows: left alone). */
enum block_owner {
	OWNER_CURRENT,
	OWNER_DROP_EXEC,
	OWNER_DROP_EXIT,
	OWNER_NONE,
};

struct snapshot_opts {
	uint64_t min_age_ns;   /* blocks younger than this are left out of the sites */
	uint64_t sample_bytes; /* the mean sampling interval, 0 when every block is tracked */
	int pid;	       /* the first process, whose threads are named from /proc */
	/* Whose a block is (NULL: every block is current) */
	enum block_owner (*owner)(void *ctx, uint32_t tgid, uint32_t image);
	/* Blocks dropped: told per process, once each */
	void (*dropped)(void *ctx, uint32_t tgid, enum block_owner why, uint64_t blocks,
			uint64_t bytes);
	void *ctx;
	/* Blocks dropped before this snapshot, and their bytes (the session keeps the count),
	 * and by size class (HEAPTAP_SIZE_CLASSES of them; their dropped fields, added to) */
	uint64_t dropped_blocks;
	uint64_t dropped_bytes;
	struct heaptap_size_class *dropped_classes;
};

/* A live block, for a leak check. */
struct live_block {
	uint64_t addr;
	uint64_t size;
	uint64_t stack_id; /* canonical */
};

/* What a stack allocated since attach, freed or not (tracked blocks), and what of it was
 * live at the latest peak of live bytes. */
struct site_total {
	uint64_t stack_id;
	uint64_t allocs;
	uint64_t bytes;
	uint64_t peak_live;
	uint64_t peak_live_bytes;
	uint32_t fn; /* allocating function of its first block (index of the attach table) */
};

/* Live blocks by the thread that allocated them. */
struct thread_live {
	uint32_t tid;
	char comm[4 * 16 + 1]; /* escaped (escape.h); "" when it exited before heaptap
				* could learn it */
	bool exited;
	uint64_t live;
	uint64_t live_bytes;
};

/* --watch: the new pages a stack wrote in the mappings one stack made. */
struct page_origin {
	uint64_t stack_id;     /* canonical: the writer's, a site's */
	uint64_t map_stack_id; /* canonical: the mapping call's; 0: none known */
	uint64_t pages;
};

struct snapshot {
	uint64_t time_ns; /* CLOCK_MONOTONIC */
	struct heaptap_counters counters;
	struct heaptap_fixup_stats fixups; /* C++ exceptions the loader let out */
	struct heaptap_size_class classes[HEAPTAP_SIZE_CLASSES];
	uint64_t fn_calls[HEAPTAP_MAX_FUNCS];		     /* entries, for what probes cost */
	struct heaptap_fn_stats fn_stats[HEAPTAP_MAX_FUNCS]; /* what the calls did */
	/* Every live block, young ones included: what they stand for (as struct site's est_*:
	 * with sampling, Horvitz-Thompson estimates; without, the exact figures). */
	double est_bytes;
	double est_blocks;
	double est_var;
	struct site *sites; /* by live bytes, most first */
	size_t nsites;
	uint64_t young;		   /* blocks hidden by --min-age */
	uint64_t read_ns;	   /* how long reading the blocks took */
	bool blocks_read;	   /* whether they were (not by --watch) */
	struct site_total *totals; /* by canonical stack id, in no order */
	size_t ntotals;
	struct thread_live *threads; /* by live bytes, most first */
	size_t nthreads;
	uint64_t age_blocks[AGE_BUCKETS]; /* live blocks by age (snapshot__age_limits_s) */
	uint64_t age_bytes[AGE_BUCKETS];
	struct live_block *blocks; /* accounting__blocks() only */
	size_t nblocks;
	struct proc_live *procs; /* every process with counters, in no order */
	size_t nprocs;
	struct page_origin *origins; /* --watch: by stack_id, then the most pages first */
	size_t norigins;
	uint64_t dropped_blocks; /* blocks dropped so far (exec, exit): not live, not freed */
	uint64_t dropped_bytes;	 /* (the BPF side's live bytes are kept without them) */
};

void snapshot__free(struct snapshot *s);
/* --watch: the origins of the pages of the site of stack_id (canonical), the most pages first;
 * their number in *n. */
const struct page_origin *snapshot__origins(const struct snapshot *s, uint64_t stack_id,
					    size_t *n);

/* How long before the snapshot time_ns was; 0 for a time during the snapshot itself. */
static inline uint64_t snapshot__age(const struct snapshot *s, uint64_t time_ns)
{
	return time_ns < s->time_ns ? s->time_ns - time_ns : 0;
}

/* Blocks dumped a site: its oldest. */
#define DUMP_BLOCKS 3

/* Where the blocks of a site are read from: the process that holds each. */
struct dump_sources {
	unsigned int max; /* bytes of a block at most (--dump-bytes) */
	/* Whether process tgid still runs, and its symbols (for C++ classes; NULL: no class
	 * looked for). */
	bool (*alive)(void *ctx, uint32_t tgid, struct syms **syms);
	void *ctx;
};

/* The first bytes of a site's oldest live blocks (at most DUMP_BLOCKS), read now from the
 * processes that hold them, into site->dumps; nothing if it has them already. */
void snapshot__dump_site(struct site *site, const struct dump_sources *from);

#endif
