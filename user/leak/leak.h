/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The leak check (--leak-check), memcheck's leak categories on a live process: its threads
 * stopped by a tracer process of heaptap's own, its live blocks listed from the BPF map, its
 * memory scanned for pointers to them, the threads let go; the categories summed per stack.
 * With --leak-check the process is also held to its exit (struct leak_hold), for a check there.
 *
 * Roots: each stopped thread's general registers and its stack from 128 bytes below its stack
 * pointer (the x86-64 red zone); every other private mapping the process can write (data and
 * bss of every object, [heap], anonymous memory), or has made unreadable and may make readable
 * again (PROT_NONE: read through the protection, as a debugger reads, the pages it wrote
 * only), less the tracked blocks themselves, whose contents count only once the block is
 * reached. Not read: shared mappings (a pointer into this process's heap means nothing to the
 * other side), code and constants, the kernel's and device mappings, and pages that hold
 * nothing (never touched, or the zero page). Never read, because a read could
 * wait without bound on a stopped thread or a device: mappings registered with userfaultfd and
 * device memory; their pages that may hold data leave the check incomplete, as does a thread
 * that could not be stopped (its registers are unknown).
 *
 * Blind spots, where memcheck knows the allocator's state and the check does not: with blocks
 * allocated before heaptap attached, free chunks and the slack after blocks are roots too, so a
 * stale pointer there hides a leak.
 *
 * This is the folder's one public header; the rest of user/leak/ is private to it (README.md).
 */
#ifndef HEAPTAP_LEAK_H
#define HEAPTAP_LEAK_H

#include <stdbool.h>
#include <stdint.h>

#include "base/idmap.h"

struct heaptap_bpf;
struct stacks;
struct leak_hold;

enum reach_kind {
	REACH_DEFINITE, /* lost, and no lost block points to it but its own clique's: it leads it */
	REACH_INDIRECT, /* lost, in the clique of a definitely lost block: its leader */
	REACH_POSSIBLE, /* reached only through interior pointers or through possibly lost blocks */
	REACH_REACHABLE, /* a pointer to its start is reachable from the roots */
	REACH_KINDS,	 /* the number of kinds; also the kind of a block left unsettled */
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

/* The allocator's heap regions a check found: glibc's main heap and arenas. */
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

struct reach_stats {
	double pause_s;		   /* first thread stopped to last resumed */
	double scan_s;		   /* time spent classifying */
	uint64_t scanned_bytes;	   /* root and block bytes read */
	uint64_t unreadable_bytes; /* root and block bytes that could not be read, or were not */
	unsigned int regions;	   /* root mappings scanned, stacks included */
	unsigned int threads;	   /* threads stopped (their registers are roots) */
	unsigned int late_threads; /* threads that did not stop in time */
	/* root mappings not read: a read could wait on a stopped thread or a device; their span */
	unsigned int skipped_regions;
	uint64_t skipped_bytes;
	/* root mappings the process may not read now (PROT_NONE, write-only) but may make
	 * readable again, read through that protection as a debugger reads them, and the bytes
	 * read there (the pages the process wrote) */
	unsigned int protected_regions;
	uint64_t protected_bytes;
	/* such mappings where the process never wrote a page (guard pages, reservations):
	 * nothing to read; their span */
	unsigned int unwritten_regions;
	uint64_t unwritten_bytes;
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

/* By reach_kind; [REACH_KINDS]: blocks a check cut short by its time limit left unsettled. */
struct leak_counts {
	uint64_t blocks[REACH_KINDS + 1];
	uint64_t bytes[REACH_KINDS + 1];
	/* of the definitely lost blocks: the indirectly lost ones they lead (any stack's) */
	uint64_t led_blocks, led_bytes;
};

/* A loss record, as memcheck's: one stack's blocks of one category. */
struct leak_record {
	uint64_t stack_id;
	enum reach_kind kind;
	uint64_t blocks, bytes;
	uint64_t led_blocks, led_bytes; /* definitely lost: the indirectly lost blocks they lead */
};

/* What asked for a check. */
enum leak_trigger {
	LEAK_AT_SIGNAL, /* SIGUSR1 */
	LEAK_AT_END,	/* the session's end, the target running */
	LEAK_AT_EXIT,	/* the target held at its exit */
};

struct leak_check_opts {
	uint64_t max_pause_ns;	/* the longest the target may stay stopped */
	struct leak_hold *hold; /* the process's holder, or NULL: a tracer for this check */
	enum leak_trigger trigger;
	/* every block the allocator handed out is tracked (a command traced from its start, every
	 * block recorded): the rest of its heap is not a root */
	bool all_blocks_known;
	bool glibc;		 /* the allocator is glibc's malloc */
	unsigned int heuristics; /* enum reach_heuristic bits */
};

struct leak_check {
	enum leak_trigger trigger;
	uint64_t time_ns; /* CLOCK_MONOTONIC, when the target was stopped */
	struct reach_stats stats;
	uint64_t listed_ns; /* of the pause, listing the blocks */
	struct leak_counts total;
	struct idmap sites; /* canonical stack id -> struct leak_counts */
	/* every stack's blocks by category, the largest first (bytes and those led) */
	struct leak_record *records;
	size_t nrecords;
};

/* Runs a leak check of pid; negative errno, said on stderr, when it could not. */
int leak_check__run(struct heaptap_bpf *skel, struct stacks *stacks, int pid,
		    const struct leak_check_opts *opts, struct leak_check *out);

/* "signal", "end", "exit". */
const char *leak_check__trigger_name(enum leak_trigger t);

/* A stack's counts; NULL when it had no live block at the check. */
const struct leak_counts *leak_check__site(const struct leak_check *lc, uint64_t stack_id);

void leak_check__free(struct leak_check *lc);

/*
 * Holds pid to its exit, for a check there: a tracer process of heaptap's own, the holder,
 * seizes every thread (threads created later are seized at birth) and stops none, but lets
 * each stop go as if untraced (signals delivered, a group stop kept); a thread's exit stop,
 * when the process exits, it holds, memory and all, and says so (leak_hold__fd turns
 * readable). Checks then go through it (leak_check_opts.hold), the process having one tracer.
 * Negative errno: -EBUSY when already traced (a debugger, strace), as reach__strerror says.
 * Its end (leak_hold__release, heaptap's own end or a kill) lets every thread go, a held exit
 * included.
 */
int leak_hold__start(int pid, struct leak_hold **out);
/* Readable when the holder has something to say (the exit), or has ended; -1 once ended. */
int leak_hold__fd(const struct leak_hold *h);
/* Reads what it said; whether the process is held at its exit now. */
bool leak_hold__serve(struct leak_hold *h);
/* Whether the process is held at its exit, and the exit's wait status (as waitpid's). */
bool leak_hold__exiting(const struct leak_hold *h, int *status);
/* Lets every thread go (an exit held goes on), ends the holder, frees h; accepts NULL. */
void leak_hold__release(struct leak_hold *h);

/* "stack", "data", "heap", "anonymous". */
const char *reach__root_name(enum reach_root_kind k);
/* "stdstring", "length64", "newarray", "multipleinheritance", by bit number. */
const char *reach__heuristic_name(unsigned int i);
/* "definitely_lost", "indirectly_lost", "possibly_lost", "still_reachable"; "unknown". */
const char *reach__kind_name(enum reach_kind k);
/* "max_pause", "threads_not_stopped", "memory_not_read" for one reason bit. */
const char *reach__reason_name(enum reach_reason r);
/* What a negative errno from the leak check or its holder means to the user, and what to do
 * about it. */
const char *reach__strerror(int err);

#endif
