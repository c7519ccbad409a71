/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What heaptap costs the target: what a probe hit costs on this machine (measured at start
 * on a child of heaptap's own), and from it and the calls counted, the slowdown of a window.
 */
#ifndef HEAPTAP_OVERHEAD_H
#define HEAPTAP_OVERHEAD_H

#include <stdbool.h>
#include <stdint.h>

#include "probes.h"

struct heaptap_bpf;

/* CPU nanoseconds a hit costs the traced thread. */
struct probe_costs {
	double emulated; /* an entry probe the kernel emulates (push, jump, call) */
	double stepped;	 /* an entry probe the kernel single-steps (test, mov, ...) */
	double ret;	 /* a return probe */
};

/* Measures on a child of heaptap, with the loaded skeleton's programs (they do nothing for
 * a process other than the target). Takes a fraction of a second; negative errno. */
int overhead__calibrate(struct heaptap_bpf *skel, struct probe_costs *out);

/* The target's CPU time so far, all threads, in nanoseconds; 0 if unknown. */
uint64_t overhead__target_cpu_ns(int pid);

/* The target's CPU time spent in probe hits between two readings of the per-function call
 * counters (fn_calls). */
double overhead__trap_ns(const struct probes *p, const struct probe_costs *costs,
			 const uint64_t *calls_before, const uint64_t *calls_after);

/*
 * The duty cycle of --live: windows of tracing, then as long untraced as it takes for the
 * slowdown measured in the window, spread over window and pause, to stay within budget.
 */
struct duty_cycle {
	uint64_t window_ns;
	double budget;		/* the slowdown allowed, a fraction of the target's time */
	double window_slowdown; /* the last window's: time in probe hits / the target's time */
	double slowdown;	/* spread over the cycle: what the target loses on the whole */
	double traced;		/* share of the time traced */
	uint64_t windows;
};

/* After a window: the pause to take before the next one (0: keep tracing), from the time
 * the target spent in probe hits and the CPU time it used meanwhile. */
uint64_t duty__pause_ns(struct duty_cycle *d, double trap_ns, uint64_t cpu_ns);

#endif
