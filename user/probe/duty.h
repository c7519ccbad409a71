/* SPDX-License-Identifier: GPL-2.0 */
#ifndef HEAPTAP_DUTY_H
#define HEAPTAP_DUTY_H

#include <stdint.h>

/*
 * The duty cycle of --live: windows of tracing, each followed by as long untraced as it takes
 * for what the target lost, from the start, to stay within the budget's share of its CPU time
 * since: as each pause ends (and as each window ends, while windows cost what the one before
 * did), what windows and pauses cost never exceeds budget x the CPU time the target had; the
 * first window alone may cost more, before anything is known, and the pause after it makes
 * up for it. Its CPU time, not the wall clock's: a server that idles between requests runs
 * more CPU time in a window (its probe hits) than in a pause, and what it serves a CPU
 * second is what tracing takes from. What the target loses is its
 * time in probe hits and heaptap's programs, and heaptap's own CPU time where heaptap shares
 * CPUs with it (its threads and helper processes, attaching and detaching included), in
 * windows and pauses alike. The first window is short (DUTY_FIRST_NS at most): until it has
 * been measured, what tracing costs this target is not known, and a target that only
 * allocates would lose most of a whole window (a short benchmark, much of its run); each
 * window after is twice as long as the one before, up to --window.
 */
#define DUTY_FIRST_NS 100000000ULL

struct duty_cycle {
	uint64_t window_ns;
	double budget;		/* the slowdown allowed, a fraction of the target's CPU time */
	double window_slowdown; /* the last window's: time in probe hits / the target's CPU time */
	/* Since the first window began, as of the last one's end (or duty__now): */
	double slowdown; /* what the target has lost, as a share of its CPU time */
	double traced;	 /* the share of the time spent tracing */
	uint64_t windows;
	double spent_ns;     /* the target's CPU time windows and pauses took from it */
	double cpu_ns;	     /* its CPU time (with what heaptap took of it) in them */
	double cpu_now_ns;   /* and as of duty__now */
	double rate;	     /* its CPU time a second in the last pause (0: none seen yet) */
	double window_rate;  /* and in the last window that it ran in */
	double next_cost_ns; /* what the next window will take, at the last one's slowdown */
	double elapsed_ns;   /* windows and pauses since the first window began, as they ran */
	double traced_ns;  /* the windows' */
	double pause_ns;   /* the pause under way, as planned */
};

/* --live: heaptap's own CPU time (its threads' and helpers'), by what it was doing. */
struct live_activities {
	uint64_t attach_ns; /* each window's probes in */
	uint64_t detach_ns; /* and out */
	uint64_t report_ns; /* reports */
	uint64_t other_ns;  /* the rest: rings served (stacks, unwinding), the loop */
	uint64_t own_ns;    /* all of it, since the first window's attach began... */
	uint64_t since_ns;  /* ...when heaptap's own CPU time (overhead.h) was this */
};

/* slowdown and traced as of now: since_ns after the first window began, in_window_ns into a
 * window in progress (0 when paused; what it costs is not known before its end), the target
 * having run cpu_since_ns since the last window's or pause's end. */
void duty__now(struct duty_cycle *d, uint64_t since_ns, uint64_t in_window_ns, uint64_t cpu_since_ns);

/* How long the next window lasts. */
uint64_t duty__window_ns(const struct duty_cycle *d);

/* After a window that ran ran_ns (0: as planned): the pause to take before the next one (0:
 * keep tracing), from what the target lost in it (loss_ns: probe hits, programs, heaptap's
 * own share) and the CPU time it would have had (cpu_ns: its own, and the share heaptap
 * took). */
uint64_t duty__pause_ns(struct duty_cycle *d, uint64_t ran_ns, double loss_ns, double cpu_ns);

/* At a pause's end (ran_ns long): what heaptap cost the target meanwhile, as
 * duty__pause_ns takes it; the pause to add before the next window (0: none). */
uint64_t duty__paused(struct duty_cycle *d, uint64_t ran_ns, double loss_ns, double cpu_ns);

#endif
