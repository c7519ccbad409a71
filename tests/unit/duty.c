// SPDX-License-Identifier: GPL-2.0
/*
 * --live's duty cycle (user/duty.c): a short first window; after a window that cost more than
 * the budget, a pause long enough that what the target has lost since the start stays within
 * the first window plus the budget's share of the time, at every window's end; none after a
 * window within the budget, or of an idle target.
 */
#include <stdbool.h>
#include <stdlib.h>

#include "probe/duty.h"
#include "unit.h"

#define SECOND 1e9

/*
 * The bound: lost <= the first window + budget x time, as each pause ends (the next window
 * may start); as each window ends too when windows cost what the one before did (steady:
 * the pause was sized by the last window's slowdown).
 */
static void walk(double budget, const double *slowdowns, int n, bool steady, const char *what)
{
	struct duty_cycle d = { .window_ns = 2 * SECOND, .budget = budget };
	double lost = 0, t = 0, first = 0.25 * SECOND, ran;
	uint64_t pause;
	int i;

	for (i = 0; i < n; i++) {
		ran = duty__window_ns(&d);
		lost += ran * slowdowns[i];
		t += ran;
		if (steady)
			CHECK_TRUE(lost <= first + budget * t + 1, "%s: window %d lost %.3f s in %.3f s",
				   what, i + 1, lost / SECOND, t / SECOND);
		pause = duty__pause_ns(&d, slowdowns[i] * SECOND, 1 * SECOND);
		CHECK_NEAR(d.slowdown, lost / t, 1e-9, "%s: the slowdown so far", what);
		t += pause;
		CHECK_TRUE(lost <= first + budget * t + 1, "%s: pause %d: lost %.3f s in %.3f s", what,
			   i + 1, lost / SECOND, t / SECOND);
	}
}

int main(void)
{
	struct duty_cycle d = { .window_ns = 2 * SECOND, .budget = 0.25 };
	double slowdowns[200];
	uint64_t pause, last = 0;
	int i;

	/* The first window: a quarter of a second. Half the target's time in probes: 0.125 s
	 * lost, 0.0625 s earned; the next window would lose 1 s: a pause of 3.25 s first. */
	CHECK_U64(duty__window_ns(&d), 0.25 * SECOND, "the first window");
	CHECK_U64(duty__pause_ns(&d, 0.5 * SECOND, 1 * SECOND), 3.25 * SECOND,
		  "after the first window, twice the budget");
	CHECK_NEAR(d.window_slowdown, 0.5, 0, "its slowdown");
	CHECK_NEAR(d.traced, 1, 0, "traced, as the window ends");
	CHECK_NEAR(d.slowdown, 0.5, 0, "lost so far");
	CHECK_U64(duty__window_ns(&d), 2 * SECOND, "the windows after it");
	CHECK_U64(duty__window_ns(&(struct duty_cycle){ .window_ns = 0.1 * SECOND }), 0.1 * SECOND,
		  "a --window shorter than the first's default: all of it");
	/* Within the budget, and at it: keep tracing. */
	CHECK_U64(duty__pause_ns(&d, 0.1 * SECOND, 1 * SECOND), 0, "within the budget");
	CHECK_NEAR(d.traced, 2.25 / 5.5, 1e-12, "within the budget: traced 2.25 s of 5.5");
	CHECK_NEAR(d.slowdown, (0.125 + 0.2) / 5.5, 1e-12, "lost 0.325 s of 5.5");
	CHECK_U64(duty__pause_ns(&d, 0.25 * SECOND, 1 * SECOND), 0, "at the budget");
	/* As of a report: 10 s after the first window began, 1 s into a window. */
	duty__now(&d, 10 * SECOND, 1 * SECOND);
	CHECK_NEAR(d.slowdown, 0.825 / 10, 1e-12, "as of now: lost, 0.825 s in three windows");
	CHECK_NEAR(d.traced, 5.25 / 10, 1e-12, "as of now: traced, the window so far too");
	/* An idle target (no CPU time) loses nothing. */
	CHECK_U64(duty__pause_ns(&d, 0.5 * SECOND, 0), 0, "idle target");
	CHECK_NEAR(d.window_slowdown, 0, 0, "idle target: no slowdown");
	/* More time in probes than the target ran (clocks' granularity): counted as all of it. */
	duty__pause_ns(&d, 3 * SECOND, 1 * SECOND);
	CHECK_NEAR(d.window_slowdown, 1, 0, "over 100%%: clamped");
	CHECK_U64(d.windows, 5, "windows counted");

	/* The dearer the first window, the longer the pause after it; none while what the first
	 * window earned covers the next (up to 11%% at 5%%). */
	for (i = 6; i <= 100; i++) {
		d = (struct duty_cycle){ .window_ns = 2 * SECOND, .budget = 0.05 };
		pause = duty__pause_ns(&d, i / 100.0 * SECOND, 1 * SECOND);
		CHECK_TRUE(i <= 11 ? !pause : pause > last, "%d%%: a longer pause than for less", i);
		last = pause;
	}
	/* All of the target's time in probes at 5%: the next window's 2 s, less what was earned
	 * (0.0125 s), at 5% a second: 39.75 s. */
	CHECK_NEAR(pause, 39.75 * SECOND, 1, "100%% at 5%%");

	/* The bound, whatever the windows cost: steady, or changing at random. */
	for (i = 0; i < 200; i++)
		slowdowns[i] = 1;
	walk(0.05, slowdowns, 200, true, "all of the time in probes");
	walk(0.02, slowdowns, 200, true, "all of it, at 2%");
	for (i = 0; i < 200; i++)
		slowdowns[i] = 0.3;
	walk(0.05, slowdowns, 200, true, "30%");
	srand(7);
	for (i = 0; i < 200; i++)
		slowdowns[i] = rand() % 101 / 100.0;
	walk(0.05, slowdowns, 200, false, "any slowdown");
	walk(0.01, slowdowns, 200, false, "any slowdown, at 1%");
	return unit__done("duty");
}
