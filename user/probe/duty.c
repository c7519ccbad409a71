// SPDX-License-Identifier: GPL-2.0
#include "probe/duty.h"

/* The first window's length: also what the target may lose beyond the budget's share. */
static uint64_t first_ns(const struct duty_cycle *d)
{
	return d->window_ns > DUTY_FIRST_NS ? DUTY_FIRST_NS : d->window_ns;
}

uint64_t duty__window_ns(const struct duty_cycle *d)
{
	return d->windows ? d->window_ns : first_ns(d);
}

void duty__now(struct duty_cycle *d, uint64_t since_ns, uint64_t in_window_ns)
{
	if (!since_ns || !d->windows)
		return;
	d->slowdown = d->spent_ns / since_ns;
	d->traced = (d->traced_ns + in_window_ns) / since_ns;
	if (d->traced > 1)
		d->traced = 1;
}

uint64_t duty__pause_ns(struct duty_cycle *d, double trap_ns, uint64_t cpu_ns)
{
	double ran = duty__window_ns(d), credit, need, pause = 0;

	d->windows++;
	/* An idle target has nothing to lose: its slowdown counts for nothing. */
	d->window_slowdown = cpu_ns ? trap_ns / cpu_ns : 0;
	if (d->window_slowdown > 1)
		d->window_slowdown = 1;
	d->spent_ns += ran * d->window_slowdown;
	d->elapsed_ns += ran;
	d->traced_ns += ran;
	/*
	 * What the target may lose by now: the first window's cost, and the budget's share of
	 * every moment since. The next window, at this window's slowdown, waits until it fits.
	 */
	if (d->window_slowdown > d->budget) {
		credit = first_ns(d) + d->budget * d->elapsed_ns - d->spent_ns;
		need = d->window_ns * d->window_slowdown;
		pause = need > credit ? (need - credit) / d->budget : 0;
	}
	/* As of this window's end. */
	d->traced = d->traced_ns / d->elapsed_ns;
	d->slowdown = d->spent_ns / d->elapsed_ns;
	d->elapsed_ns += pause;
	return pause;
}
