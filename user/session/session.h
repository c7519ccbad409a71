/* SPDX-License-Identifier: GPL-2.0 */
/*
 * One tracing session: its state, and what its stages share. main() drives the stages, each
 * a file of its own: open (the target, its allocator, the plan), load (the BPF object, sized
 * from the options), start (outputs, probes in, the launched command released), run (loop.c:
 * a report every interval until a signal, the duration or the target's exit), finish (leak
 * check, detach, final report), close.
 *
 * What is traced is a tracer's business (struct tracer_ops, tracer.h; a mode a row of
 * tracers.c): the allocator's probes (full mode), the same in paced windows (--live), or the
 * page-fault watcher (--watch). The rest of the session is the same.
 */
#ifndef HEAPTAP_SESSION_H
#define HEAPTAP_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "account/accounting.h"
#include "account/alarm.h"
#include "leak/leak.h"
#include "base/settings.h"
#include "probe/duty.h"
#include "probe/procs.h"
#include "session/tracer.h"
#include "report/report.h"
#include "target/rss.h"
#include "target/target.h"
#include "account/timeline.h"
#include "target/unwind.h"

struct session {
	struct options opts;
	struct tracer *tracer; /* what is traced, and how: the mode's (tracers.h) */
	struct procs procs;	/* every process traced, and their images */
	struct target *target;	/* the first of them: launched, or the first -p */
	char *program;		/* launched: the program file the command runs */
	struct allocator *allocator; /* the first's (its image's), as are probes, syms, unwinder */
	int stack_mode; /* enum heaptap_stack_mode */
	struct heaptap_bpf *skel;
	struct probes *probes;	/* the first image's plan (its tracer's); NULL when it plans none */
	uint32_t attaches;	/* attaches so far: the BPF side's `tracing` while traced */
	struct bpf_link *fork_link, *exec_link; /* forks (--follow), execs and matches */
	/* --follow: when each fork began (a child inherits every probe in by then) */
	struct bpf_link *fork_start_links[4];
	/* mmap, munmap, mremap, brk and madvise of the traced processes (mappings.bpf.h) */
	struct bpf_link *mapping_links[7];
	int epfd;		/* the loop's, once it runs: processes' exits are watched there */
	uint64_t dropped_blocks; /* blocks dropped at exec or exit so far, and their bytes */
	uint64_t dropped_bytes;
	struct heaptap_size_class dropped_classes[HEAPTAP_SIZE_CLASSES]; /* by size class */
	struct unwind_stats unwind; /* every image's, summed at each report */
	uint64_t fixup_failures_said; /* exceptions not let out, already said on stderr */
	struct stacks *stacks;
	struct syms *syms;
	struct unwinder *unwinder;
	struct drain *rings; /* new stacks, samples to unwind, forks and execs */
	struct history *history;
	struct publisher *publisher;
	struct timeline timeline;
	/* Where the first process's RSS is: its reader, made at the first report; or why none
	 * could be made, and the latest read's failure */
	struct rss_reader *rss;
	int rss_err;
	char rss_note[160];
	struct rss_pinner rss_pinners[RSS_PINNERS]; /* the latest full read's */
	unsigned int rss_npinners;
	struct map_site *map_sites; /* the latest full read's, the most bytes first */
	size_t nmap_sites;
	struct history *map_history; /* their bytes over the full reads */
	struct alarms alarms;
	struct leak_hold *hold; /* --leak-check: the target held to its exit, or NULL */
	int hold_err;		 /* why it could not be held (negative errno), or 0 */
	bool exit_held;		 /* the target is held at its exit */
	struct leak_check leak;	 /* the latest leak check, kept for the final report */
	bool have_leak;
	const char *leak_note; /* why the final report has no check made at the end */
	struct snapshot prev;  /* the previous report's */
	bool have_prev;
	uint64_t reports; /* made so far */
	bool started;	    /* tracing began: a final report is due */
	bool attached;	    /* probes in now (--live: within a window) */
	int links_mode;	    /* enum probe_links_mode: how probes are attached, chosen at load */
	bool layout_known;  /* the BPF side knows the trampoline and the allocator's code */
	uint64_t layout_tried_ns; /* when the maps were last read for it */
	uint64_t layout_retry_ns; /* how long until the next read (0: at once) */
	bool pools;		  /* pools are traced: their freed blocks reaped now and then */
	uint64_t reaped_ns;	  /* when they were last */
	uint64_t swept_ns;	  /* when the BPF side's processes were last checked */
	bool alarm_exit;    /* --exit-on-alert, and an alarm fired */
	uint64_t attach_ns; /* CLOCK_MONOTONIC when tracing began */
	uint64_t attach_own_ns; /* heaptap's own CPU time (overhead.h) as the attach began */
	uint64_t start_cpu_ns;	/* the targets' CPU time once it was done */
	/* heaptap's own CPU time, by what it did (--live's reports say it) */
	struct live_activities activities;
};

/* The session's first process: what a single-process session's report is about, its image's
 * allocator, plan, symbols and unwinder the session's. */
void session__primary(struct session *s);
/* Whether the session makes Python objects' stacks (--pyobject-alloc). */
bool session__python_objects(const struct session *s);

/* Attach every process not attached (accounting frozen meanwhile), or detach all. */
int session__attach_all(struct session *s, int stop_fd);
void session__detach_all(struct session *s);
/* A process's probes are in: the first time, how late it is traced is known. */
void session__traced_now(struct process *p);
/* The loop watches p's exit (its pidfd), once it runs. */
void session__watch_exit(struct session *s, struct process *p);

/* The snapshot's rules of ownership (which blocks count, which are dropped). */
void session__snapshot_opts(struct session *s, struct snapshot_opts *o);
/* Every living process's figure of the target's CPU time and RSS, summed. */
uint64_t session__cpu_ns(const struct session *s);
uint64_t session__rss(const struct session *s);
/* A leak check now, kept as the session's latest; negative errno (said) when not made. */
int session__leak_check(struct session *s, enum leak_trigger trigger);

#endif
