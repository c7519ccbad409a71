// SPDX-License-Identifier: GPL-2.0
#include "duty.h"

uint64_t duty__pause_ns(struct duty_cycle *d, double trap_ns, uint64_t cpu_ns)
{
	double pause;

	d->windows++;
	/* An idle target has nothing to lose: its slowdown counts for nothing. */
	d->window_slowdown = cpu_ns ? trap_ns / cpu_ns : 0;
	if (d->window_slowdown > 1)
		d->window_slowdown = 1;
	pause = d->window_slowdown > d->budget ? d->window_ns * (d->window_slowdown / d->budget - 1)
					       : 0;
	d->traced = d->window_ns / (d->window_ns + pause);
	d->slowdown = d->window_slowdown * d->traced;
	return pause;
}
