// SPDX-License-Identifier: GPL-2.0
/*
 * --live's duty cycle (user/duty.c): the pause after a window that cost more than the
 * budget, such that the slowdown spread over window and pause is the budget exactly; none
 * after a window within it, or of an idle target.
 */
#include "duty.h"
#include "unit.h"

#define SECOND 1e9

int main(void)
{
	struct duty_cycle d = { .window_ns = 2 * SECOND, .budget = 0.25 };
	double slowdown, last_pause = 0;
	uint64_t pause;
	int i;

	/* Probes took half the target's time: pause a window long, half the time traced. */
	CHECK_U64(duty__pause_ns(&d, 0.5 * SECOND, 1 * SECOND), 2 * SECOND, "twice the budget");
	CHECK_NEAR(d.window_slowdown, 0.5, 0, "twice the budget: the window's slowdown");
	CHECK_NEAR(d.traced, 0.5, 0, "twice the budget: traced");
	CHECK_NEAR(d.slowdown, 0.25, 0, "twice the budget: the slowdown spread, the budget");
	/* Within the budget, and at it: keep tracing. */
	CHECK_U64(duty__pause_ns(&d, 0.1 * SECOND, 1 * SECOND), 0, "within the budget");
	CHECK_NEAR(d.traced, 1, 0, "within the budget: traced all along");
	CHECK_NEAR(d.slowdown, 0.1, 0, "within the budget: the window's slowdown");
	CHECK_U64(duty__pause_ns(&d, 0.25 * SECOND, 1 * SECOND), 0, "at the budget");
	/* An idle target (no CPU time) loses nothing. */
	CHECK_U64(duty__pause_ns(&d, 0.5 * SECOND, 0), 0, "idle target");
	CHECK_NEAR(d.window_slowdown, 0, 0, "idle target: no slowdown");
	/* More time in probes than the target ran (clocks' granularity): counted as all of it. */
	CHECK_U64(duty__pause_ns(&d, 3 * SECOND, 1 * SECOND), 6 * SECOND, "over 100%%");
	CHECK_NEAR(d.window_slowdown, 1, 0, "over 100%%: clamped");
	CHECK_NEAR(d.traced, 0.25, 0, "over 100%%: traced a quarter");
	CHECK_NEAR(d.slowdown, 0.25, 0, "over 100%%: the budget");
	CHECK_U64(d.windows, 5, "windows counted");

	/* The default budget, 5%: whatever a window cost, the cycle's slowdown is the budget,
	 * and the dearer the window, the longer the pause. */
	d = (struct duty_cycle){ .window_ns = 2 * SECOND, .budget = 0.05 };
	for (i = 6; i <= 100; i++) {
		slowdown = i / 100.0;
		pause = duty__pause_ns(&d, slowdown * SECOND, 1 * SECOND);
		CHECK_NEAR(d.slowdown, 0.05, 1e-9, "%d%% in a window: spread to the budget", i);
		CHECK_NEAR(pause, 2 * SECOND * (slowdown / 0.05 - 1), 1, "%d%%: the pause", i);
		CHECK_TRUE(pause > last_pause, "%d%%: a longer pause than for less", i);
		last_pause = pause;
	}
	CHECK_U64(pause, 38 * SECOND, "100%% at 5%%: 19 windows' pause");
	return unit__done("duty");
}
