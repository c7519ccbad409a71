/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Which of a process's mappings hold its threads' stacks, found without stopping it: the main
 * thread's ([stack]); the mapping that holds each thread's stack pointer, where
 * /proc/PID/task/TID/syscall gives one (a thread blocked in the kernel: most threads of a
 * server, most of the time); and mappings laid out as glibc lays a thread's stack out, a
 * guard page below and the thread's descriptor at the top, pointing to itself (a thread
 * running as it is read, and the stacks glibc keeps for threads to come). A stack of another
 * layout whose thread runs as it is read is not found, and counts as anonymous memory.
 */
#ifndef HEAPTAP_THREAD_STACKS_H
#define HEAPTAP_THREAD_STACKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "target/memory.h"
#include "target/pagemap.h"
#include "target/vmas.h"

/* Verdicts of the latest search, kept for the next: a mapping judged once is not read again
 * while it stays the same. */
struct thread_stacks {
	struct stack_verdict {
		uint64_t start, end;
		bool stack;
		bool by_sp; /* a thread's stack pointer was in it */
	} *v;
	size_t n, cap;
	unsigned int threads;  /* the process's, at the latest search that read them */
	unsigned int by_sp;    /* mappings holding a thread's stack pointer */
	unsigned int by_guard; /* mappings laid out as glibc's threads' stacks */
};

/*
 * Sets is_stack[i] for each mapping of v holding a stack, but those taken[i] (the
 * allocator's). sps: read each thread's stack pointer (a file per thread); otherwise the
 * latest search's finds stand for the mappings that have not changed. Reads memory through
 * mem and pm (the descriptor's page). Negative errno: out of memory.
 */
int thread_stacks__find(struct thread_stacks *ts, int pid, const struct vmas *v,
			const bool *taken, bool sps, struct pagemap *pm, struct memory *mem,
			bool *is_stack);
void thread_stacks__free(struct thread_stacks *ts);

#endif
