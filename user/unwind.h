/* SPDX-License-Identifier: GPL-2.0 */
/*
 * DWARF stacks: unwinding the samples the BPF side sends, with the objects' CFI (libdw),
 * and teaching it, through the unwind_rules map, the rule at every return address met, so
 * that the next allocation down the same path is walked in the kernel, with no copy.
 */
#ifndef HEAPTAP_UNWIND_H
#define HEAPTAP_UNWIND_H

#include <stddef.h>
#include <stdint.h>

#include "stacks.h"
#include "syms.h"

struct heaptap_sample;
struct unwinder;

struct unwind_stats {
	uint64_t samples;      /* unwound */
	uint64_t sample_bytes; /* stack bytes received */
	uint64_t unwind_ns;    /* time spent unwinding them */
	uint64_t truncated;    /* samples whose unwind stopped before the outermost frame */
	uint64_t rules;	       /* rules taught to the BPF side */
	uint64_t no_cfi;       /* return addresses without CFI, walked by frame pointer */
};

/* rules_fd: the unwind_rules map; depth: frames after the direct caller (--stack-depth). */
struct unwinder *unwinder__new(struct syms *syms, struct stacks *stacks, int rules_fd,
			       unsigned int depth);
void unwinder__free(struct unwinder *u);

/* Unwinds a sample (size bytes of ring buffer record) and files its stack in stacks. */
void unwinder__sample(struct unwinder *u, const struct heaptap_sample *smp, size_t size);

const struct unwind_stats *unwinder__stats(const struct unwinder *u);

#endif
