/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The planner puts each allocator function's probe on the cheapest instruction that every
 * call runs, where what the function's BPF programs read is still readable.
 *
 * A breakpoint on an instruction the kernel emulates (a push, a jump, a call, a conditional
 * jump) costs one trap; on any other the kernel single-steps a copy, a second trap, which in
 * a VM can cost many times as much (doc/probe-sites.md has the figures).
 * Allocators often start with a compare or a move and reach an emulated instruction a few
 * bytes later: the planner walks from the entry along the path every call takes, and stops
 * at the first instruction the kernel emulates, provided that
 *
 *   - every instruction before it runs on every call, once: no branch before it (but a
 *     conditional jump the kernel cannot emulate that only a free(NULL) takes), no branch
 *     anywhere in the object that goes into the instructions walked, and none whose effects
 *     on the registers the decoder does not know for sure (INSN_OTHER, insn.h);
 *   - the stack and frame pointers are still the entry's, so the return address is at the
 *     stack pointer (a return probe takes it there, the stack walk starts from it);
 *   - each argument the BPF program reads is still in a register: its own, or one it was
 *     copied to (64-bit moves are followed; any other write of a register loses what it held).
 *
 * Where none qualifies the probe stays at the entry.
 */
#ifndef HEAPTAP_SITES_H
#define HEAPTAP_SITES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>

#include "heaptap.h"
#include "target/insn.h"

/* The planner looks for a site this far from the entry at most. */
#define SITES_SCAN_BYTES 256
#define SITES_SCAN_INSNS 64

struct site_fn {
	/* The caller fills in the function: */
	uint64_t entry;	 /* its entry's file offset */
	uint64_t size;	 /* bytes of its body, from its symbol; 0 if unknown */
	uint8_t args;	 /* bit i: its BPF programs read argument i (rdi, rsi, rdx) */
	bool null_exits; /* argument 0 is a block, and a NULL one makes the call do nothing heaptap
			  * counts (free, delete), so a jump taken only for NULL may be passed */
	bool at_entry;	 /* not planned: the entry (the unwinder's, --probe-at entry) */
	/* The planner fills in its site: */
	uint64_t offset;		   /* the entry, or an instruction a few bytes past it */
	struct insn insn;		   /* the instruction there; len 0 if undecodable */
	enum insn_trap trap;		   /* what the kernel does with a breakpoint there */
	uint8_t regs[HEAPTAP_COOKIE_ARGS]; /* where each argument is read there (heaptap_gpr) */
	char why[320];			   /* why there, for -v; empty for at_entry */
};

/*
 * Plans fns[0..n) of the object at path, with what kernel version `kernel` emulates
 * (insn__kernel_version()). Negative errno if the object cannot be read; every function
 * then has its entry as its site, and why says so.
 */
int sites__plan(const char *path, struct site_fn *fns, size_t n, unsigned int kernel);

/* A segment holds executable bytes of an object in memory: file offsets [offset, offset +
 * size). */
struct site_segment {
	const uint8_t *bytes;
	uint64_t offset;
	uint64_t size;
};

/* Plans as sites__plan does, over one segment of executable code in memory. */
int sites__plan_code(const struct site_segment *code, struct site_fn *fns, size_t n,
		     unsigned int kernel);

#endif
