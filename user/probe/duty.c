// SPDX-License-Identifier: GPL-2.0
#include "probe/duty.h"

/* The first window's length. */
static uint64_t first_ns(const struct duty_cycle *d)
{
	return d->window_ns > DUTY_FIRST_NS ? DUTY_FIRST_NS : d->window_ns;
}

uint64_t duty__window_ns(const struct duty_cycle *d)
{
	uint64_t ns = first_ns(d);

	for (uint64_t k = 0; k < d->windows && ns < d->window_ns; k++)
		ns *= 2;
	return ns < d->window_ns ? ns : d->window_ns;
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

/* A share lost, from what was lost and what the target would have had: an idle target has
 * nothing to lose. */
static double share(double loss_ns, double cpu_ns)
{
	double s = cpu_ns > 0 ? loss_ns / cpu_ns : 0;

	return s > 1 ? 1 : s < 0 ? 0 : s;
}

/* The pause that brings what the target lost back within the budget's share of every moment
 * since the start, with need more to come. */
static double pause_for(const struct duty_cycle *d, double need)
{
	double credit = d->budget * d->elapsed_ns - d->spent_ns;

	return need > credit ? (need - credit) / d->budget : 0;
}

uint64_t duty__pause_ns(struct duty_cycle *d, double loss_ns, double cpu_ns)
{
	double ran = duty__window_ns(d), pause = 0;

	d->windows++;
	d->window_slowdown = share(loss_ns, cpu_ns);
	d->spent_ns += ran * d->window_slowdown;
	d->elapsed_ns += ran;
	d->traced_ns += ran;
	/* The next window, at this window's slowdown, waits until it fits. */
	if (d->window_slowdown > d->budget)
		pause = pause_for(d, duty__window_ns(d) * d->window_slowdown);
	/* As of this window's end. */
	d->traced = d->traced_ns / d->elapsed_ns;
	d->slowdown = d->spent_ns / d->elapsed_ns;
	d->elapsed_ns += pause;
	d->pause_ns = pause;
	return pause;
}

uint64_t duty__paused(struct duty_cycle *d, uint64_t ran_ns, double loss_ns, double cpu_ns)
{
	double more;

	/* The pause may have run longer than planned (a report, the loop busy): its time
	 * counts as it ran. */
	if (ran_ns > d->pause_ns)
		d->elapsed_ns += ran_ns - d->pause_ns;
	d->spent_ns += ran_ns * share(loss_ns, cpu_ns);
	more = pause_for(d, 0);
	d->slowdown = d->spent_ns / d->elapsed_ns;
	d->elapsed_ns += more;
	d->pause_ns = more;
	return more;
}
