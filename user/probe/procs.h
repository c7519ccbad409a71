/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The processes a session traces, and their images. An image is an address space's layout as
 * exec made it: the program, its allocator and where its probes go, its symbols and unwind
 * rules. A child made by fork shares its parent's image (the same code at the same
 * addresses) until either execs; a process that execs gets a new one. Processes are found
 * by PID (-p), as descendants (--follow), by program (--comm, --exe), or launched.
 */
#ifndef HEAPTAP_PROCS_H
#define HEAPTAP_PROCS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>

#include "heaptap.h"
#include "probe/probes.h"
#include "target/target.h"

struct allocator;
struct syms;
struct unwinder;
struct bpf_link;

struct image {
	uint32_t id;	/* as the BPF side numbers it (struct heaptap_target) */
	int pid;	/* a process of it, alive if any is: for /proc and its files */
	char *exe;	/* its program, escaped (escape.h), as /proc/PID/exe names it */
	struct allocator *allocator;
	struct probes *plan; /* where its allocator's probes go; NULL with --watch */
	struct syms *syms;
	struct unwinder *unwinder;
	unsigned int processes; /* alive in it */
};

struct process {
	struct target t;	  /* PID, name, pidfd, launch and exit */
	int parent;		  /* the traced process it was forked from; 0: none */
	struct image *image;	  /* NULL once it has exited */
	char *exe;		  /* its program, escaped, as it was last */
	struct probe_links links; /* its probes */
	uint64_t since_ns;  /* traced from (CLOCK_MONOTONIC) */
	uint64_t late_ns;   /* from its fork or exec to its probes in (or, until they are, to
			     * when it was taken in); 0: traced from the session's start */
	uint64_t started_ns; /* its fork or exec, for one taken in after the start; else 0 */
	bool ever_attached;  /* its probes went in once */
	uint64_t exited_ns; /* 0 while alive */
	uint32_t image_id; /* the image it is in (kept once it has exited) */
	unsigned int execs; /* images it went through after the first */
	struct heaptap_proc end; /* its counters when it exited */
	uint64_t end_live;	 /* blocks it held when it exited */
	uint64_t end_live_bytes;
	uint64_t dropped_at_exec; /* blocks of its earlier images, dropped at exec */
	uint64_t dropped_at_exec_bytes;
	bool attached;	  /* its probes are in */
	bool range_known; /* the BPF side knows where its allocator's code is */
	/* --follow's inherited probes (inherit.h): when its own were all in (a child whose fork
	 * began later inherited them all; 0: it has none), whose it inherited at its fork (all
	 * of a set of them: covered), and how many live processes inherited its own. Probes
	 * others inherited stay in until those have exited: kept holds its earlier image's. */
	uint64_t members_ns;
	bool covered;
	struct process **roots;
	size_t nroots;
	unsigned int heirs;
	struct probe_links kept;
	/* Before 6.12, for one that inherited its probes: the perf event that keeps its
	 * children's perf contexts apart from its own (inherit.h); -1: none. */
	int own_context;
};

/* Processes that exited long enough ago to be folded into one line: a service that goes
 * through thousands of workers a day keeps the latest PROCS_EXITED_KEPT listed. */
#define PROCS_EXITED_KEPT 100

struct procs_folded {
	uint64_t processes;
	struct heaptap_proc end; /* their counters at their exits, summed */
	uint64_t live;		 /* what they held at their exits */
	uint64_t live_bytes;
};

struct procs {
	struct process **v;
	size_t n;
	size_t cap;
	struct procs_folded folded;
	struct image **images;
	size_t nimages;
	size_t images_cap;
	uint32_t next_image; /* the loader's next image id (below HEAPTAP_EXEC_IMAGES) */
};

/* A new process in the set (its target t as given); NULL when out of memory. */
struct process *procs__add(struct procs *ps, const struct target *t, int parent);
/* The process with this PID: a live one, else the latest that exited; NULL if none. */
struct process *procs__find(const struct procs *ps, int pid);
/* The image with this id, NULL if none. */
struct image *procs__image(const struct procs *ps, uint32_t id);
/* A new image (id: given, or 0 for the loader's next); NULL when out of memory. */
struct image *procs__new_image(struct procs *ps, uint32_t id);
/* p's own_context closed: it has exited. */
void procs__close_own_context(struct process *p);
/* Processes alive. */
size_t procs__alive(const struct procs *ps);
/* Folds the processes other than the first that exited before before_ns (their blocks
 * dropped since, by a snapshot) beyond the latest PROCS_EXITED_KEPT into ps->folded. */
void procs__fold_exited(struct procs *ps, uint64_t before_ns);
/* The process leaves its image (it exited, or exec'd); an image no process is in stays. */
void procs__leave_image(struct process *p);

/* p, forked by parent, inherited the probes parent inherited, and parent's own if they were
 * all in before the fork began (start_ns); the processes they are of keep them in while p
 * lives. Whether p was covered: traced from its first instruction. */
bool procs__inherit(struct process *p, struct process *parent, uint64_t start_ns);
/* p has exited: it keeps no probe in any more. */
void procs__disinherit(struct process *p);
/* p exec'd a program whose probes are others: what it had and inherited is not its new
 * image's (its children from now on inherit nothing of it). */
void procs__inherit_exec(struct process *p);
/* Every probe is out: nothing is inherited any more. */
void procs__inherit_reset(struct procs *ps);
void procs__free(struct procs *ps);

/*
 * The descendants of pid alive now (children, their children...), from /proc, into *out
 * (malloc'd, *n of them, parents before children).
 */
int procs__descendants(int pid, int **out, size_t *n);

/* Processes alive now whose name (comm) is comm, or whose program is the file exe (the same
 * device and inode), heaptap excepted; malloc'd into *out. */
int procs__matching(const char *comm, const char *exe, int **out, size_t *n);

/* The escaped path of pid's program (/proc/PID/exe), malloc'd; "?" when unknown. */
char *procs__exe(int pid);

#endif
