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

void duty__now(struct duty_cycle *d, uint64_t since_ns, uint64_t in_window_ns, uint64_t cpu_since_ns)
{
	if (!since_ns || !d->windows)
		return;
	d->cpu_now_ns = d->cpu_ns + cpu_since_ns;
	if (d->cpu_now_ns > 0)
		d->slowdown = d->spent_ns / d->cpu_now_ns;
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

/* A pause in ns: at most 10^18 (32 years), a double too large for the type not converted. */
static uint64_t pause_ns(double pause)
{
	return pause < 1e18 ? (uint64_t)pause : 1000000000000000000ULL;
}

/* The pause that brings what the target lost back within the budget's share of its CPU time
 * since the start, with need more to come: the CPU time it must run untraced first, at rate
 * (CPU time a second). */
static double pause_for(const struct duty_cycle *d, double need, double rate)
{
	double credit = d->budget * d->cpu_ns - d->spent_ns;

	if (need <= credit)
		return 0;
	return (need - credit) / d->budget / (rate > 0 ? rate : 1);
}

uint64_t duty__pause_ns(struct duty_cycle *d, uint64_t ran_ns, double loss_ns, double cpu_ns)
{
	/* The window counts as it ran (longer than planned: the loop busy at its end). */
	double ran = ran_ns ? ran_ns : duty__window_ns(d), pause = 0;

	d->windows++;
	d->window_slowdown = share(loss_ns, cpu_ns);
	d->spent_ns += cpu_ns * d->window_slowdown;
	d->cpu_ns += cpu_ns > 0 ? cpu_ns : 0;
	d->elapsed_ns += ran;
	d->traced_ns += ran;
	if (cpu_ns > 0)
		d->window_rate = cpu_ns / ran;
	/* The next window, at this window's slowdown and CPU rate, waits until it fits; the
	 * pause is planned at the lower of the window's rate and the last pause's. */
	d->next_cost_ns = duty__window_ns(d) * (cpu_ns > 0 ? cpu_ns / ran : 0) * d->window_slowdown;
	if (d->window_slowdown > d->budget)
		pause = pause_for(d, d->next_cost_ns,
				  d->rate > 0 && d->rate < d->window_rate ? d->rate : d->window_rate);
	/* As of this window's end. */
	d->traced = d->traced_ns / d->elapsed_ns;
	d->slowdown = d->cpu_ns > 0 ? d->spent_ns / d->cpu_ns : 0;
	d->pause_ns = pause;
	return pause_ns(pause);
}

uint64_t duty__paused(struct duty_cycle *d, uint64_t ran_ns, double loss_ns, double cpu_ns)
{
	double more;

	/* The pause counts as it ran (longer than planned: a report, the loop busy), and what
	 * the target ran in it sets the rate the next pause is planned at. It goes on until the
	 * next window fits: a target that ran less than planned has not earned it yet. */
	d->elapsed_ns += ran_ns;
	d->spent_ns += (cpu_ns > 0 ? cpu_ns : 0) * share(loss_ns, cpu_ns);
	d->cpu_ns += cpu_ns > 0 ? cpu_ns : 0;
	if (cpu_ns > 0 && ran_ns)
		d->rate = cpu_ns / ran_ns;
	more = pause_for(d, d->next_cost_ns, d->rate > 0 ? d->rate : d->window_rate);
	d->slowdown = d->cpu_ns > 0 ? d->spent_ns / d->cpu_ns : 0;
	d->pause_ns = more;
	return pause_ns(more);
}
