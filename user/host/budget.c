// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "host/budget.h"

void budget__add(struct budget *b, const struct budget_sample *s)
{
	unsigned int at;

	if (b->n < BUDGET_SAMPLES) {
		at = (b->head + b->n++) % BUDGET_SAMPLES;
	} else {
		at = b->head;
		b->head = (b->head + 1) % BUDGET_SAMPLES;
	}
	b->samples[at] = *s;
}

/* The window's first and last samples and its span; false when they say nothing (fewer than
 * two, or out of order: counters only grow). */
static bool window(const struct budget *b, const struct budget_sample **first,
		   const struct budget_sample **last, uint64_t *span)
{
	unsigned int i;

	if (b->n < 2 || !b->ncpus)
		return false;
	*last = &b->samples[(b->head + b->n - 1) % BUDGET_SAMPLES];
	for (i = 0;; i++) {
		*first = &b->samples[(b->head + i) % BUDGET_SAMPLES];
		if (i + 2 >= b->n || !b->window_ns ||
		    (*last)->wall_ns - (*first)->wall_ns <= b->window_ns)
			break;
	}
	if ((*last)->wall_ns <= (*first)->wall_ns || (*last)->own_ns < (*first)->own_ns ||
	    (*last)->work_ns < (*first)->work_ns || (*last)->traced_ns < (*first)->traced_ns)
		return false;
	/* Younger than the window, every sample since the start kept: the time before it counts
	 * as time heaptap spent nothing in, so that its start (the agent's, and each escalation's
	 * object loaded and probes measured at once) is judged over a window as later costs are,
	 * not over the first seconds alone. */
	*span = (*last)->wall_ns - (*first)->wall_ns;
	if (b->n < BUDGET_SAMPLES && *span < b->window_ns)
		*span = b->window_ns;
	return true;
}

double budget__spent(const struct budget *b)
{
	const struct budget_sample *first, *last;
	double wall, own, work, traced;
	uint64_t span;

	if (!window(b, &first, &last, &span))
		return 0;
	wall = (double)span * b->ncpus;
	own = last->own_ns - first->own_ns;
	work = last->work_ns - first->work_ns;
	traced = last->traced_ns - first->traced_ns;
	/* Nothing ran that heaptap could slow down. */
	if (work <= 0)
		return 0;
	/* Its own time in the share of the CPUs the work kept busy, over the work: heaptap's
	 * share of the CPUs' time, however busy they were. */
	return (own * fmin(work / wall, 1) + traced) / work;
}

double budget__room(const struct budget *b)
{
	double room = b->limit - budget__spent(b);

	return room > 0 ? room : 0;
}

double budget__share(const struct budget *b)
{
	double share = budget__room(b) / 2;

	return share >= BUDGET_MIN_SHARE ? share : 0;
}

double budget__process_share(const struct budget *b, double share, double proc_rate)
{
	const struct budget_sample *first, *last;
	double work_rate, max = fmax(share, BUDGET_MAX_PROCESS_SHARE);
	uint64_t span;

	/* Its rate unknown, or the work's: as much as it may, which the host's budget still
	 * bounds. */
	if (!window(b, &first, &last, &span) || !(proc_rate > 0))
		return max;
	work_rate = (double)(last->work_ns - first->work_ns) / (last->wall_ns - first->wall_ns);
	if (!(work_rate > 0))
		return max;
	return fmin(fmax(share * work_rate / proc_rate, share), max);
}

int budget__parse_stat(const char *text, long ticks_per_s, uint64_t *busy_ns, uint64_t *total_ns)
{
	unsigned long long v[10] = {};
	int n;

	if (strncmp(text, "cpu ", 4) || ticks_per_s <= 0)
		return -EINVAL;
	n = sscanf(text + 4, "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
		   &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]);
	if (n < 4)
		return -EINVAL;
	/* user nice system idle iowait irq softirq steal guest guest_nice: guest time is in
	 * user's already; idle and iowait are the CPUs' free time. */
	*busy_ns = (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) * (1000000000ULL / ticks_per_s);
	*total_ns = *busy_ns + (v[3] + v[4]) * (1000000000ULL / ticks_per_s);
	return 0;
}
