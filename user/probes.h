/* SPDX-License-Identifier: GPL-2.0 */
/* Attaching heaptap's programs to every allocator function the object defines, and back. */
#ifndef HEAPTAP_PROBES_H
#define HEAPTAP_PROBES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "allocator.h"
#include "fixups.h"
#include "sites.h"

struct heaptap_bpf;
struct bpf_link;

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
	bool emulated;			/* the kernel emulates the instruction probed */
	struct site_fn site; /* the site's instruction, where arguments are read, and why there */
	bool returns;	     /* its return is probed too */
	bool dormant;	     /* --live: not called in the first window, left out */
};

/* Where an allocator's probes go: the plan, the same for every process that maps it. */
struct probes {
	struct probe *v; /* the family table's order, then unwinders; index = cookie */
	size_t n;
	enum fixup_mode fixup; /* how exceptions get out of operator new here */
	bool unwinding;	       /* the unwinder is probed (with FIXUP_LOADER: serve fixups) */
};

/* One process's probes: v[2 * i] the entry of the plan's probe i, v[2 * i + 1] its return. */
struct probe_links {
	const struct probes *plan;
	struct bpf_link **v;
	size_t n;		/* the plan's probes */
	size_t count;		/* links attached */
};

struct probes_plan_opts {
	bool entries; /* every probe at its function's entry (--probe-at entry) */
};

/*
 * Where to probe every function of the allocator family that a defines (sites.h), and why
 * not where it will not; with an operator new that may throw, the C++ unwinder's entries too,
 * unless fixup is FIXUP_NONE (for no_fixup_why), and then operator new is not probed. opts may
 * be NULL.
 */
int probes__plan(const struct allocator *a, enum fixup_mode fixup, const char *no_fixup_why,
		 const struct probes_plan_opts *opts, struct probes **out);

/* --live, after the first window: functions not called in it (calls[i] counts probe i's)
 * are left out of the next windows; so is the unwinder when no operator new was called.
 * Fewer probes, quicker windows: attaching and detaching take time too. */
void probes__retire_unused(struct probes *p, const uint64_t *calls);

/* Before load: loads only the programs the plan uses (of the unwinder's, one or none). */
void probes__choose_programs(const struct probes *p, struct heaptap_bpf *skel);

struct probes_attach_opts {
	int stop_fd; /* readable: stop, detach what is in, return -EINTR; -1: none */
	/* Added while others are traced, so not frozen: returns go in before entries */
	bool late;
	/* On failure, the probe that could not be attached, and whether it was its return */
	const struct probe **failed;
	bool *failed_return;
};

/* Attaches the plan p for process pid only, into l (zeroed the first time; what is in already
 * stays); opts may be NULL. On failure detaches what was attached and returns negative errno
 * (the caller says why: the target may have exited). */
int probes__attach(const struct probes *p, struct probe_links *l, struct heaptap_bpf *skel,
		   int pid, const struct probes_attach_opts *opts);

/* Detaches every probe of the sets (NULL ones skipped), phase by phase (returns, entries,
 * the unwinder's), in parallel: each detach waits for a grace period. Plans stay. */
void probes__detach(struct probe_links **sets, size_t nsets);
/* Detaches what is still attached and frees the set's table (not the set itself). */
void probes__links_free(struct probe_links *l);
/* Frees a plan. */
void probes__free(struct probes *p);

const char *probes__kind_name(int kind);

/* The name of argument arg (0 to HEAPTAP_COOKIE_ARGS - 1) of a function of this kind, if
 * its BPF program reads it; NULL if not. */
const char *probes__arg_name(int kind, unsigned int arg);

#endif
