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
 * slowdown, times the process's CPU time). A new escalation is given half the budget's rest,
 * a share of the work watched; the other half is left for its heaptap's own CPU time, which
 * takes from every process watched, not only its target. Its heaptap's --max-overhead, which
 * bounds the process's loss to a share of the process's own CPU time, is that share of the
 * work turned into one of the process's time: a process that uses a tenth of the work may
 * lose ten times the share of its own time for the host to lose the share of its work. Up to
 * BUDGET_MAX_PROCESS_SHARE: a process that uses little CPU would otherwise be slowed without
 * bound, since what it loses is little beside the host's work. Over the budget all the same
 * (a process that uses more CPU once traced), the agent ends escalations.
 */
#ifndef HEAPTAP_BUDGET_H
#define HEAPTAP_BUDGET_H

#include <stdint.h>

/* Samples kept, at most: the window is shorter when the reports are more frequent. */
#define BUDGET_SAMPLES 128
/* An escalation is not worth starting with less than this share. */
#define BUDGET_MIN_SHARE 0.005
/* The most an escalation may slow its process, a share of the process's CPU time (its work
 * then takes at most 4/3 as long). */
#define BUDGET_MAX_PROCESS_SHARE 0.25

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

/* The share of the work new escalations are given, between them (budget__process_share
 * turns each one's into its --max-overhead): half the rest, 0 when that is below
 * BUDGET_MIN_SHARE. */
double budget__share(const struct budget *b);

/* The --max-overhead (a share of the process's own CPU time) that gives a process that ran
 * proc_rate of a CPU (its CPU time a second over one to two windows: hproc__mark_cpu) share
 * of the work watched over the window: no less than share, and no more than
 * BUDGET_MAX_PROCESS_SHARE unless share is. */
double budget__process_share(const struct budget *b, double share, double proc_rate);

/* The host's busy CPU time and its total (busy and idle) from /proc/stat's text, in ns;
 * -EINVAL when it has no cpu line. */
int budget__parse_stat(const char *text, long ticks_per_s, uint64_t *busy_ns, uint64_t *total_ns);

#endif
