/* SPDX-License-Identifier: GPL-2.0 */
/*
 * --leak-check: the target stopped, its live blocks listed from the BPF map, its memory
 * scanned for pointers to them (reach.h), and resumed; the categories summed per stack.
 */
#ifndef HEAPTAP_LEAK_CHECK_H
#define HEAPTAP_LEAK_CHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "account/reach.h"
#include "base/idmap.h"

struct heaptap_bpf;
struct stacks;

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
	uint64_t max_pause_ns;	 /* the longest the target may stay stopped */
	struct reach_hold *hold; /* the process's holder, or NULL: a tracer for this check */
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

#endif
