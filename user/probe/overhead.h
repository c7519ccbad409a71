/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What heaptap costs the target: what a probe hit costs on this machine (measured at start
 * on a child of heaptap's own), and from it and the calls counted, the slowdown of a window.
 */
#ifndef HEAPTAP_OVERHEAD_H
#define HEAPTAP_OVERHEAD_H

#include <stdbool.h>
#include <stdint.h>

#include "probe/plan.h"

struct heaptap_bpf;

/* CPU nanoseconds a hit costs the traced thread. */
struct probe_costs {
	double emulated;  /* an entry probe the kernel emulates (push, jump, call) */
	double stepped;	  /* an entry probe the kernel single-steps (test, mov, ...) */
	double optimized; /* an entry probe on a 5-byte nop the kernel calls (0: none here) */
	double ret;	  /* a return probe */
};

/* What a hit of probe pr costs the thread that calls it, entry and return. */
double overhead__hit_ns(const struct probe *pr, const struct probe_costs *costs);

/* Measures on a child of heaptap, with the loaded skeleton's programs (they do nothing for
 * a process other than the target). Takes a fraction of a second; negative errno. */
int overhead__calibrate(struct heaptap_bpf *skel, struct probe_costs *out);

/* The time heaptap's programs on the targets' probes have run so far, as the kernel counts
 * it while statistics are on (bpf_enable_stats); 0 while they are off. */
uint64_t overhead__programs_ns(struct heaptap_bpf *skel);

/* The runs of heaptap's programs (any kind) that the kernel skipped since they were loaded:
 * it runs no tracing program on a CPU where one is running already (recursion_misses). */
uint64_t overhead__skipped_runs(struct heaptap_bpf *skel);

/* The target's CPU time so far, all threads, in nanoseconds; 0 if unknown. */
uint64_t overhead__target_cpu_ns(int pid);

/* heaptap's own CPU time so far: its threads', its attacher's as it runs, its closers' once
 * they have ended. */
uint64_t overhead__own_cpu_ns(void);

/* How many CPUs heaptap and process pid may both run on: 0 when heaptap's time is never
 * taken from it. */
unsigned int overhead__shared_cpus(int pid);

/* What heaptap's own CPU time cost a target: its share of own_ns, the target's CPU share
 * (target_ns over ran_ns on the shared CPUs) of it: where the target was idle, heaptap took
 * nothing from it. */
double overhead__own_loss_ns(uint64_t own_ns, uint64_t target_ns, uint64_t ran_ns,
			     unsigned int shared);

/* The target's CPU time spent in probe hits between two readings of the per-function call
 * counters (fn_calls). */
double overhead__trap_ns(const struct probes *p, const struct probe_costs *costs,
			 const uint64_t *calls_before, const uint64_t *calls_after);


#endif
