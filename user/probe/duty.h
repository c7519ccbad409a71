/* SPDX-License-Identifier: GPL-2.0 */
#ifndef HEAPTAP_DUTY_H
#define HEAPTAP_DUTY_H

#include <stdint.h>

/*
 * The duty cycle of --live: windows of tracing, each followed by as long untraced as it takes
 * for what the target lost, from the start, to stay within the budget's share of the time
 * since, at every moment: what windows cost (each at its measured slowdown) never exceeds
 * the first window's length plus budget x the time elapsed. The first window is short
 * (DUTY_FIRST_NS at most): until it has been measured, what tracing costs this target is not
 * known, and a target that only allocates would lose most of a whole window (a short
 * benchmark, much of its run).
 */
#define DUTY_FIRST_NS 250000000ULL

struct duty_cycle {
	uint64_t window_ns;
	double budget;		/* the slowdown allowed, a fraction of the target's time */
	double window_slowdown; /* the last window's: time in probe hits / the target's time */
	/* Since the first window began, as of the last one's end (or duty__now): */
	double slowdown; /* what the target has lost, as a share of the time */
	double traced;	 /* the share of the time spent tracing */
	uint64_t windows;
	double spent_ns;   /* what the windows cost the target: length x slowdown */
	double elapsed_ns; /* windows and pauses since the first window began */
	double traced_ns;  /* the windows' */
};

/* slowdown and traced as of now: since_ns after the first window began, in_window_ns into a
 * window in progress (0 when paused; what it costs is not known before its end). */
void duty__now(struct duty_cycle *d, uint64_t since_ns, uint64_t in_window_ns);

/* How long the next window lasts. */
uint64_t duty__window_ns(const struct duty_cycle *d);

/* After a window: the pause to take before the next one (0: keep tracing), from the time
 * the target spent in probe hits and the CPU time it used meanwhile. */
uint64_t duty__pause_ns(struct duty_cycle *d, double trap_ns, uint64_t cpu_ns);

#endif
