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

struct reach_pause;

/*
 * Stops every thread of pid: a tracer process of heaptap's own PTRACE_SEIZEs and
 * PTRACE_INTERRUPTs each task of /proc/PID/task, listing it again until no new thread appears
 * and /proc's thread count agrees (threads created meanwhile are stopped in turn; stopped ones
 * create none), so the caller can read heaptap's block map while nothing allocates. A thread
 * found group-stopped (SIGSTOP) is seized and stopped all the same. Blocked system calls
 * restart on resume, as under a debugger. Threads get stop_wait_ns to stop; one that has not
 * by then (an uninterruptible sleep: vfork, a hung NFS read) is late: it stays seized, so it
 * runs no code of the process's until resume, and makes the check incomplete. Negative errno,
 * reach__strerror() tells the user why: -EBUSY already traced (debugger, strace; checked
 * before anything is stopped), -EPERM not allowed, -ESRCH no such process, -ETIMEDOUT the
 * tracer did not answer in time (a request stuck in the kernel). Returns at most 5/4 of
 * stop_wait_ns after the tracer starts, error or not, and on error no thread is left stopped
 * or traced.
 */
int reach__pause(int pid, uint64_t stop_wait_ns, struct reach_pause **out);

/*
 * Holds pid to its exit, for a check there: a tracer process of heaptap's own seizes every
 * thread (PTRACE_SEIZE with PTRACE_O_TRACEEXIT and PTRACE_O_TRACECLONE: threads created later
 * are seized at birth) and stops none, but lets each stop go as if untraced (signals
 * delivered, a group stop kept under PTRACE_LISTEN); a thread's exit stop, when the process
 * exits, it holds, memory and all, and says so (reach__hold_fd turns readable). Checks then go
 * through it (reach__pause_held), the process having one tracer. Negative errno as
 * reach__pause: -EBUSY when already traced. Its end (reach__release, heaptap's own end or a
 * kill) lets every thread go, a held exit included.
 */
struct reach_hold;
int reach__hold(int pid, struct reach_hold **out);
/* Readable when the holder has something to say (the exit), or has ended; -1 once ended. */
int reach__hold_fd(const struct reach_hold *h);
/* Reads what it said; whether the process is held at its exit now. */
bool reach__hold_serve(struct reach_hold *h);
/* Whether the process is held at its exit, and the exit's wait status (as waitpid's). */
bool reach__hold_exiting(const struct reach_hold *h, int *status);
/* As reach__pause, by the holder; -ESRCH once it has ended. */
int reach__pause_held(struct reach_hold *h, uint64_t stop_wait_ns, struct reach_pause **out);
/* Lets every thread go (an exit held goes on), ends the holder, frees h; accepts NULL. */
void reach__release(struct reach_hold *h);

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
int reach__classify(struct reach_pause *p, struct reach_block *blocks, size_t n,
		    const struct reach_opts *opts, struct reach_stats *st);

/*
 * Resumes every thread (PTRACE_DETACH, re-delivering any signal that arrived meanwhile; a
 * group-stopped thread goes back to its stop) and frees p; accepts NULL. Late threads are let
 * go by the tracer's exit, untraced, without waiting for them: each runs on when it wakes.
 * Waits for the tracer at most 200 ms, then kills it, which lets every thread go as well.
 * Fills st->pause_s when st is not NULL.
 */
void reach__resume(struct reach_pause *p, struct reach_stats *st);

/* "stack", "data", "heap", "anonymous". */
const char *reach__root_name(enum reach_root_kind k);
/* "stdstring", "length64", "newarray", "multipleinheritance", by bit number. */
const char *reach__heuristic_name(unsigned int i);

/* "definitely_lost", "indirectly_lost", "possibly_lost", "still_reachable"; "unknown". */
const char *reach__kind_name(enum reach_kind k);
/* "max_pause", "threads_not_stopped", "memory_not_read" for one reason bit. */
const char *reach__reason_name(enum reach_reason r);
/* What a negative errno from this module means to the user, and what to do about it. */
const char *reach__strerror(int err);

#endif
