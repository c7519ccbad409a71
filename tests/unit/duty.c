// SPDX-License-Identifier: GPL-2.0
/*
 * --live's duty cycle (probe/duty.c): a short first window, each one after twice as long up
 * to --window; after a window that cost more than the budget, a pause long enough that what
 * the target has lost since the start stays within the budget's share of its CPU time, at
 * every pause's end, a window counted as long as it ran, the first window's cost made up
 * for, at the CPU rate the target ran in the pause; none after a window within the budget
 * (once made up for), or of an idle target; a pause's own cost (heaptap's CPU) counted.
 */
#include <stdbool.h>
#include <stdlib.h>

#include "probe/duty.h"
#include "unit.h"

#define SECOND 1e9

/*
 * The bound: lost <= budget x the target's CPU time, as each pause ends (the next window may
 * start); as each window after the first ends too, past the first's cost, when windows cost
 * what the one before did (steady: the pause was sized by the last window's slowdown). The
 * target runs window_rate CPUs in a window, pause_rate in a pause (a server that idles between
 * requests runs more while its probes are in).
 */
static void walk(double budget, const double *slowdowns, int n, bool steady, double window_rate,
		 double pause_rate, const char *what)
{
	struct duty_cycle d = { .window_ns = 2 * SECOND, .budget = budget };
	double lost = 0, cpu = 0, ran, first = 0;
	uint64_t pause;
	int i;

	for (i = 0; i < n; i++) {
		ran = duty__window_ns(&d) * window_rate;
		lost += ran * slowdowns[i];
		cpu += ran;
		if (!i)
			first = lost;
		if (steady && i)
			CHECK_TRUE(lost <= first + budget * cpu + 1,
				   "%s: window %d lost %.3f s of %.3f s", what, i + 1,
				   lost / SECOND, cpu / SECOND);
		pause = duty__pause_ns(&d, 0, slowdowns[i] * ran, ran);
		CHECK_NEAR(d.slowdown, lost / cpu, 1e-9, "%s: the slowdown so far", what);
		while (pause) {
			cpu += pause * pause_rate;
			pause = duty__paused(&d, pause, 0, pause * pause_rate);
			if (!pause)
				CHECK_TRUE(lost <= budget * cpu + 1,
					   "%s: pause %d: lost %.3f s of %.3f s", what, i + 1,
					   lost / SECOND, cpu / SECOND);
		}
	}
}

int main(void)
{
	struct duty_cycle d = { .window_ns = 2 * SECOND, .budget = 0.25 };
	double slowdowns[200];
	uint64_t pause, last = 0;
	int i;

	/* The first window: a tenth of a second, then 0.2, 0.4, ... up to --window. One CPU, half
	 * of it in probes: 0.05 s lost, 0.025 s earned; the next window (0.2 s) would lose 0.1 s:
	 * a pause of (0.1 + 0.025) / 0.25 = 0.5 s of the target's CPU time first, at its rate in
	 * the window (one CPU). */
	CHECK_U64(duty__window_ns(&d), 0.1 * SECOND, "the first window");
	CHECK_U64(duty__pause_ns(&d, 0, 0.05 * SECOND, 0.1 * SECOND), 0.5 * SECOND,
		  "after the first window, twice the budget");
	CHECK_NEAR(d.window_slowdown, 0.5, 0, "its slowdown");
	CHECK_NEAR(d.traced, 1, 0, "traced, as the window ends");
	CHECK_NEAR(d.slowdown, 0.5, 0, "lost so far");
	CHECK_U64(duty__window_ns(&d), 0.2 * SECOND, "the second window: twice the first");
	CHECK_U64(duty__window_ns(&(struct duty_cycle){ .window_ns = 0.05 * SECOND }),
		  0.05 * SECOND, "a --window shorter than the first's default: all of it");
	CHECK_U64(duty__window_ns(&(struct duty_cycle){ .window_ns = 2 * SECOND, .windows = 9 }),
		  2 * SECOND, "windows grow up to --window");
	/* The pause ran 0.6 s on one CPU, heaptap's own work in it 2% of the target's time:
	 * 0.062 s lost of 0.7, 0.175 allowed, the next window's 0.1 s within it: no more. */
	CHECK_U64(duty__paused(&d, 0.6 * SECOND, 0.012 * SECOND, 0.6 * SECOND), 0,
		  "a pause's own cost, within the budget");
	CHECK_NEAR(d.slowdown, 0.062 / 0.7, 1e-12, "lost 0.062 s of 0.7");
	/* Within the budget: keep tracing. */
	CHECK_U64(duty__pause_ns(&d, 0, 0.02 * SECOND, 0.2 * SECOND), 0, "within the budget");
	CHECK_NEAR(d.traced, 0.3 / 0.9, 1e-12, "within the budget: traced 0.3 s of 0.9");
	CHECK_NEAR(d.slowdown, 0.082 / 0.9, 1e-12, "lost 0.082 s of 0.9");
	/* As of a report: 10 s after the first window began, 1 s into a window, the target having
	 * run 9.1 s more. */
	duty__now(&d, 10 * SECOND, 1 * SECOND, 9.1 * SECOND);
	CHECK_NEAR(d.slowdown, 0.0082, 1e-12, "as of now: lost, 0.082 s of 10");
	CHECK_NEAR(d.traced, 1.3 / 10, 1e-12, "as of now: traced, the window so far too");
	/* A pause that ran longer than planned counts as long as it ran, at its own cost: all of
	 * the target's time in probes at 5%, a pause of 5.9 s (below) that ran 6.9 s; free, it
	 * earned 0.345 s, the next window's 0.2 s among it; at a tenth of the target's time, it
	 * lost 0.69 s: 0.79 s lost of 7, 0.44 s over 0.35, and 0.2 to come: 12.8 s more. */
	d = (struct duty_cycle){ .window_ns = 2 * SECOND, .budget = 0.05 };
	pause = duty__pause_ns(&d, 0, 0.1 * SECOND, 0.1 * SECOND);
	CHECK_U64(duty__paused(&d, pause + 1 * SECOND, 0, pause + 1 * SECOND), 0,
		  "a second more than planned, at no cost");
	d = (struct duty_cycle){ .window_ns = 2 * SECOND, .budget = 0.05 };
	pause = duty__pause_ns(&d, 0, 0.1 * SECOND, 0.1 * SECOND);
	CHECK_NEAR(duty__paused(&d, pause + 1 * SECOND, 0.69 * SECOND, pause + 1 * SECOND),
		   12.8 * SECOND, 2,
		   "a second more than planned, a tenth of the target's time lost in it");
	/* A target that ran half a CPU in the pause, one in the window, earned half what was
	 * planned: 0.1475 s of the 0.295 needed; the rest at half a CPU, 5.9 s more. */
	d = (struct duty_cycle){ .window_ns = 2 * SECOND, .budget = 0.05 };
	pause = duty__pause_ns(&d, 0, 0.1 * SECOND, 0.1 * SECOND);
	CHECK_NEAR(duty__paused(&d, pause, 0, pause / 2), 5.9 * SECOND, 2,
		   "a pause at half the window's CPU: as long again");
	CHECK_NEAR(d.rate, 0.5, 1e-12, "the rate the pause ran at");
	/* A target all but idle in the pause: planned at its rate, the pause would be 10^12 s,
	 * more than a uint64_t of ns holds; it is bounded, and heaptap looks again sooner. */
	d = (struct duty_cycle){ .window_ns = 2 * SECOND, .budget = 0.05 };
	pause = duty__pause_ns(&d, 0, 0.1 * SECOND, 0.1 * SECOND);
	CHECK_U64(duty__paused(&d, pause, 0, 1e-12 * pause), 1000000000000000000ULL,
		  "a pause at 10^-12 CPUs: 10^18 ns at most");
	/* A first window that ran 0.2 s, not the 0.1 planned (the loop busy at its end), the
	 * target at half a CPU in it: 0.05 s lost of 0.1, 0.025 earned; the next window (0.2 s)
	 * at half a CPU would lose 0.05 s: (0.05 + 0.025) / 0.25 = 0.3 s of the target's CPU
	 * time, 0.6 s at its rate. Taken as planned, it would be 0.5 s at one CPU. */
	d = (struct duty_cycle){ .window_ns = 2 * SECOND, .budget = 0.25 };
	CHECK_U64(duty__pause_ns(&d, 0.2 * SECOND, 0.05 * SECOND, 0.1 * SECOND), 0.6 * SECOND,
		  "a window longer than planned, counted as it ran");
	CHECK_NEAR(d.window_rate, 0.5, 1e-12, "the rate it ran at");
	CHECK_NEAR(d.elapsed_ns, 0.2 * SECOND, 0, "as long as it ran");
	/* An idle target (no CPU time) loses nothing. */
	d = (struct duty_cycle){ .window_ns = 2 * SECOND, .budget = 0.25 };
	CHECK_U64(duty__pause_ns(&d, 0, 0.5 * SECOND, 0), 0, "idle target");
	CHECK_NEAR(d.window_slowdown, 0, 0, "idle target: no slowdown");
	/* More time in probes than the target ran (clocks' granularity): counted as all of it. */
	duty__pause_ns(&d, 0, 3 * SECOND, 1 * SECOND);
	CHECK_NEAR(d.window_slowdown, 1, 0, "over 100%%: clamped");
	CHECK_U64(d.windows, 2, "windows counted");

	/* The dearer the first window, the longer the pause after it; none within the budget. */
	for (i = 1; i <= 100; i++) {
		d = (struct duty_cycle){ .window_ns = 2 * SECOND, .budget = 0.05 };
		pause = duty__pause_ns(&d, 0, i / 100.0 * SECOND, 1 * SECOND);
		CHECK_TRUE(i <= 5 ? !pause : pause > last, "%d%%: a longer pause than for less", i);
		last = pause;
	}
	/* All of the target's time in probes at 5%: 0.1 s lost, 0.005 s earned, the next
	 * window's 0.2 s to come: (0.3 - 0.005) / 0.05 = 5.9 s. */
	CHECK_NEAR(pause, 5.9 * SECOND, 1, "100%% at 5%%");

	/* The bound, whatever the windows cost: steady, or changing at random. */
	for (i = 0; i < 200; i++)
		slowdowns[i] = 1;
	walk(0.05, slowdowns, 200, true, 1, 1, "all of the time in probes");
	walk(0.02, slowdowns, 200, true, 1, 1, "all of it, at 2%");
	walk(0.05, slowdowns, 200, true, 1, 0.2, "all of it, a fifth of a CPU in the pauses");
	for (i = 0; i < 200; i++)
		slowdowns[i] = 0.3;
	walk(0.05, slowdowns, 200, true, 1, 1, "30%");
	walk(0.02, slowdowns, 200, true, 4, 1.5, "30%, four CPUs in windows, 1.5 in pauses");
	srand(7);
	for (i = 0; i < 200; i++)
		slowdowns[i] = rand() % 101 / 100.0;
	walk(0.05, slowdowns, 200, false, 1, 1, "any slowdown");
	walk(0.01, slowdowns, 200, false, 1, 0.3, "any slowdown, at 1%, idler in pauses");
	return unit__done("duty");
}
