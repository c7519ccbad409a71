/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The unwinder walks DWARF stacks: it unwinds the samples the BPF side sends with the
 * objects' CFI (libdw), and teaches the BPF side, through the unwind_rules map, the rule at
 * every return address met, so that the next allocation down the same path is walked in the
 * kernel, with no copy.
 */
#ifndef HEAPTAP_UNWIND_H
#define HEAPTAP_UNWIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <elfutils/libdw.h>

#include "target/stacks.h"
#include "target/syms.h"

struct heaptap_sample;
struct heaptap_unwind_rule;
struct unwinder;

struct unwind_stats {
	uint64_t samples;      /* unwound */
	uint64_t sample_bytes; /* stack bytes received */
	uint64_t unwind_ns;    /* time spent unwinding them */
	uint64_t truncated;    /* samples whose unwind stopped before the outermost frame */
	uint64_t rules;	       /* rules taught to the BPF side */
	uint64_t no_cfi;       /* return addresses without CFI, walked by frame pointer */
	uint64_t cfi_refused;  /* CFI sections refused before libdw read them (cfi.h) */
};

/* rules_fd is the unwind_rules map, depth the frames after the direct caller (--stack-depth),
 * and image the layout the samples it unwinds come from (struct heaptap_target). */
struct unwinder *unwinder__new(struct syms *syms, struct stacks *stacks, int rules_fd,
			       unsigned int depth, uint32_t image);

/*
 * The ops say where an unwinder's rules come from and go. unwinder__new uses the session's:
 * the objects' CFI through syms, and the unwind_rules map. Tests and fuzzers give their own,
 * to unwind a stack copy with no process and no BPF map behind it.
 */
struct unwind_ops {
	/* The rule at pc (at_ip: pc is the interrupted instruction, not a return address)
	 * from the CFI of its object; false when there is none. */
	bool (*cfi_rule)(void *ctx, uint64_t pc, bool at_ip, struct heaptap_unwind_rule *rule);
	/* Whether addr is in a mapped file (it is then held for naming later). */
	bool (*note)(void *ctx, uint64_t addr);
	/* Teaches a rule learned for key (a return address, | HEAPTAP_RULE_AT_IP); 0 when
	 * taught. */
	int (*teach)(void *ctx, uint64_t key, const struct heaptap_unwind_rule *rule);
	/* Reads up to len bytes of process tgid's memory at addr, now, and returns how many
	 * were read. NULL where there is no process (a copy alone). */
	size_t (*read)(void *ctx, uint32_t tgid, uint64_t addr, void *buf, size_t len);
};

struct unwinder *unwinder__new_ops(const struct unwind_ops *ops, void *ctx, struct stacks *stacks,
				   unsigned int depth);
void unwinder__free(struct unwinder *u);

/* Unwinds a sample (size bytes of ring buffer record) and files its stack in stacks. */
void unwinder__sample(struct unwinder *u, const struct heaptap_sample *smp, size_t size);

const struct unwind_stats *unwinder__stats(const struct unwinder *u);

/* The rule the CFI gives at addr (in the CFI's own address space); false when there is
 * none, or none the BPF side can apply. */
bool unwind__cfi_rule(Dwarf_CFI *cfi, Dwarf_Addr addr, struct heaptap_unwind_rule *rule);

#endif
