/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Which functions of an allocator are probed (the malloc family's, the program's own, the C++
 * unwinder's), and where in each (sites.h), or why not.
 */
#ifndef HEAPTAP_PLAN_H
#define HEAPTAP_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "probe/fixups.h"
#include "target/allocator.h"
#include "target/sites.h"

/* Not an allocator function: an entry of the C++ unwinder (see unwind_enter). */
#define PROBE_UNWIND 0

struct probe {
	const char *name;		/* symbol, as the object exports it */
	int kind;			/* enum heaptap_kind, or PROBE_UNWIND */
	const struct target_file *file; /* the object it is in */
	uint64_t start;			/* file offset of the function's entry */
	uint64_t size;			/* its bytes, from its symbol (0: unknown) */
	uint64_t offset;		/* where it is probed: the entry, or a cheaper site */
	const char *skipped;		/* why it is not probed, or NULL */
	struct site_fn site; /* the site's instruction, where arguments are read, and why there */
	bool returns;	     /* its return is probed too */
	bool dormant;	     /* --live: not called in the first window, left out */
	const struct alloc_spec *own; /* a function of the program's own (--alloc ...): the
				       * arguments it reads, by its spec; NULL: the family's */
	/* --pyobject-alloc's: its entry's link-time address, and where its interpreter keeps
	 * the current thread's state (python.h; 0: unknown, no Python frames) */
	uint64_t entry_addr;
	uint64_t thread_state;
};

/* Where an allocator's probes go: the plan, the same for every process that maps it. */
struct probes {
	struct probe *v; /* the family table's order, then unwinders; index = cookie */
	size_t n;
	enum fixup_mode fixup; /* how exceptions get out of operator new here */
	bool unwinding;	       /* the unwinder is probed (with FIXUP_LOADER: serve fixups) */
};

struct probes_plan_opts {
	bool entries; /* every probe at its function's entry (--probe-at entry) */
};

/*
 * Where to probe every function of the allocator family that a defines (sites.h), and why
 * not where it will not, then the program's own functions a found (a->own); with an operator
 * new that may throw, the C++ unwinder's entries too, unless fixup is FIXUP_NONE (for
 * no_fixup_why), and then operator new is not probed. opts may be NULL.
 */
int probes__plan(const struct allocator *a, enum fixup_mode fixup, const char *no_fixup_why,
		 const struct probes_plan_opts *opts, struct probes **out);

/* --live, after the first window: functions not called in it (calls[i] counts probe i's)
 * are left out of the next windows; so is the unwinder when no operator new was called.
 * Fewer probes, quicker windows: attaching and detaching take time too. */
void probes__retire_unused(struct probes *p, const uint64_t *calls);

/* Frees a plan. */
void probes__free(struct probes *p);

const char *probes__kind_name(int kind);

/* Where probe p's argument slot a is read: a register's name, or "ret[-N]" (into buf) for
 * a pool read before the block returned; NULL for a slot its kind does not read. A realloc
 * whose block is a pool's has slot HEAPTAP_COOKIE_ARGS, "pool". */
const char *probes__arg_where(const struct probe *p, unsigned int a, char *buf, size_t size);
const char *probes__slot_name(const struct probe *p, unsigned int a);

#endif
