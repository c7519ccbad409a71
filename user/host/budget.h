/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The host's overhead budget (--max-overhead with --all): what heaptap costs the work of the
 * processes watched, over the latest BUDGET_SAMPLES intervals. heaptap's own CPU time (the
 * agent's, and each escalation's heaptap and its helpers') counts in the share of the host's
 * CPUs that were busy meanwhile, as --live counts its own in the share the target kept them
 * busy: time heaptap takes from a CPU nothing else wanted costs nobody. Over the CPU time the
 * processes watched used (the host's, heaptap's own left out; with --cgroup, the cgroups').
 * Each escalation is given the rest of the budget as its own --max-overhead, which bounds the
 * traced process's loss to that share of its own CPU time: the sum of it all stays within
 * the budget, however many are traced.
 */
#ifndef HEAPTAP_BUDGET_H
#define HEAPTAP_BUDGET_H

#include <stdint.h>

#define BUDGET_SAMPLES 12
/* An escalation is not worth starting with less than this share. */
#define BUDGET_MIN_SHARE 0.005

/* Counters read at one report, each since boot (or any fixed origin). */
struct budget_sample {
	uint64_t wall_ns;
	uint64_t own_ns;  /* heaptap's CPU time: the agent's, its children's */
	uint64_t busy_ns; /* every CPU's busy time (/proc/stat) */
	uint64_t work_ns; /* the CPU time of the processes watched */
};

struct budget {
	double limit; /* --max-overhead, a fraction */
	unsigned int ncpus;
	struct budget_sample samples[BUDGET_SAMPLES];
	unsigned int n, head;
};

void budget__add(struct budget *b, const struct budget_sample *s);

/* heaptap's cost over the window, a share of the work watched; 0 before two samples. */
double budget__spent(const struct budget *b);

/* The share a new escalation may be given: the budget's rest, 0 when below
 * BUDGET_MIN_SHARE. */
double budget__room(const struct budget *b);

/* The host's busy CPU time and its total (busy and idle) from /proc/stat's text, in ns;
 * -EINVAL when it has no cpu line. */
int budget__parse_stat(const char *text, long ticks_per_s, uint64_t *busy_ns, uint64_t *total_ns);

#endif
