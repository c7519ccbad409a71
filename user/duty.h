/* SPDX-License-Identifier: GPL-2.0 */
#ifndef HEAPTAP_DUTY_H
#define HEAPTAP_DUTY_H

#include <stdint.h>

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
