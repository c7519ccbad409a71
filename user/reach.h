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
 *
 * Blind spots, where memcheck knows the allocator's state and this module does not: free
 * chunks and the slack after blocks are roots too, so a stale pointer there hides a leak; and
 * glibc's free lists point 16 bytes before a free chunk, which can fall in the last bytes of
 * the block before it, possibly lost then rather than definitely.
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
};

struct reach_stats {
	double pause_s;		   /* first thread stopped to last resumed (reach__resume) */
	double scan_s;		   /* time in reach__classify */
	uint64_t scanned_bytes;	   /* root and block bytes read */
	uint64_t unreadable_bytes; /* root and block bytes that could not be read */
	unsigned int regions;	   /* root mappings scanned, stacks included */
	unsigned int threads;	   /* threads stopped (their registers are roots) */
	/* false when the time budget ran out: then a kind is either final or REACH_KINDS */
	bool complete;
};

struct reach_pause;

/*
 * Stops every thread of pid: PTRACE_SEIZE and PTRACE_INTERRUPT each task of /proc/PID/task,
 * listing it again until no new thread appears and /proc's thread count agrees (threads created
 * meanwhile are stopped in turn; stopped ones create none), so the caller can read heaptap's
 * block map while nothing allocates. Blocked system calls restart on resume, as under a
 * debugger. Negative errno, reach__strerror() tells the user why: -EBUSY already traced
 * (debugger, strace; checked before anything is stopped), -EPERM not allowed, -ESRCH no such
 * process, -ETIMEDOUT a thread did not stop within 2 s. On error no thread is left stopped or
 * traced (one that has yet to stop is waited for).
 */
int reach__pause(int pid, struct reach_pause **out);

/*
 * Classifies blocks[0..n) (any order; addresses distinct, else -EINVAL) by scanning the stopped
 * process: its root mappings are read once, in address order, the blocks in them with them.
 * Needs up to 60 bytes a block and 12 a pointer between blocks. budget_ns bounds the time spent
 * (0: no bound); checked after sorting the blocks and every MiB read. 0 on success, even when the
 * budget runs out: then st->complete is false, blocks proven reachable by what was read are
 * REACH_REACHABLE and all others REACH_KINDS (unknown). On error (negative errno) every kind is
 * REACH_KINDS. st may be NULL.
 */
int reach__classify(struct reach_pause *p, struct reach_block *blocks, size_t n, uint64_t budget_ns,
		    struct reach_stats *st);

/*
 * Resumes every thread (PTRACE_DETACH, re-delivering any signal that arrived meanwhile) and
 * frees p; accepts NULL. Fills st->pause_s when st is not NULL.
 */
void reach__resume(struct reach_pause *p, struct reach_stats *st);

/* "definitely_lost", "indirectly_lost", "possibly_lost", "still_reachable"; "unknown". */
const char *reach__kind_name(enum reach_kind k);
/* What a negative errno from this module means to the user, and what to do about it. */
const char *reach__strerror(int err);

#endif
