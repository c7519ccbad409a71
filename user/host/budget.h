/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The host's overhead budget (--max-overhead with --all): what heaptap costs the processes it
 * watches, over a window of the latest reports (window_ns: long enough that an escalation's
 * start, a burst, is paid for over it), over the CPU time they used (the host's
 * busy time, heaptap's own left out; with --cgroup, the cgroups' usage). It costs them two
 * things. Its own CPU time (the agent's, and each escalation's heaptap and helpers') counts in
 * the share of the CPUs they kept busy meanwhile, as --live counts its own in the share the
 * target kept them busy: time heaptap takes from a CPU they did not want costs them nothing.
 * And each traced process loses the time its probes take, which its heaptap estimates (its
 * slowdown, times the process's CPU time). A new escalation is given half the budget's rest
 * as its own --max-overhead, which bounds that loss to that share of the process's own CPU
 * time; the other half is left for its heaptap's own CPU time, which takes from every process
 * watched, not only its target. Over the budget all the same, the agent ends escalations.
 */
#ifndef HEAPTAP_BUDGET_H
#define HEAPTAP_BUDGET_H

#include <stdint.h>

/* Samples kept, at most: the window is shorter when the reports are more frequent. */
#define BUDGET_SAMPLES 128
/* An escalation is not worth starting with less than this share. */
#define BUDGET_MIN_SHARE 0.005

/* Counters read at one report, each since boot (or any fixed origin). */
struct budget_sample {
	uint64_t wall_ns;
	uint64_t own_ns;    /* heaptap's CPU time: the agent's, its children's */
	uint64_t work_ns;   /* the CPU time of the processes watched */
	uint64_t traced_ns; /* the time traced processes lost in probes, as estimated */
};

struct budget {
	double limit; /* --max-overhead, a fraction */
	unsigned int ncpus;
	uint64_t window_ns; /* the span judged: the latest samples within it */
	struct budget_sample samples[BUDGET_SAMPLES];
	unsigned int n, head;
};

void budget__add(struct budget *b, const struct budget_sample *s);

/* heaptap's cost over the window (from the oldest sample within it), a share of the work
 * watched; 0 before two samples. */
double budget__spent(const struct budget *b);

/* The budget's rest: the limit less what is spent, 0 when none. */
double budget__room(const struct budget *b);

/* The share a new escalation is given (its --max-overhead): half the rest, 0 when that is
 * below BUDGET_MIN_SHARE. */
double budget__share(const struct budget *b);

/* The host's busy CPU time and its total (busy and idle) from /proc/stat's text, in ns;
 * -EINVAL when it has no cpu line. */
int budget__parse_stat(const char *text, long ticks_per_s, uint64_t *busy_ns, uint64_t *total_ns);

#endif
