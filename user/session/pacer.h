/* SPDX-License-Identifier: GPL-2.0 */
/*
 * --live's windows and pauses (probe/duty.h's duty cycle, kept against what the target
 * really lost): a window of tracing, then a pause as long as the budget asks, and again.
 * The loop asks the pacer when to turn next, and turns it then: the pacer attaches or
 * detaches every process through the session, and measures what each window and pause cost.
 */
#ifndef HEAPTAP_PACER_H
#define HEAPTAP_PACER_H

#include <stdbool.h>
#include <stdint.h>

#include "heaptap.h"
#include "probe/duty.h"
#include "probe/overhead.h"

struct session;

struct pacer {
	struct session *s;
	const struct probe_costs *costs;
	struct duty_cycle duty;
	bool started;		     /* the first window began */
	uint64_t next_ns;	     /* when the window or the pause under way ends */
	int stats_fd;		     /* the kernel counts programs' run time while open */
	uint64_t start_ns;	     /* CLOCK_MONOTONIC when the first window began */
	uint64_t window_start_ns;    /* and when the latest one did */
	uint64_t window_cpu_ns;	     /* the targets' CPU time then */
	uint64_t window_programs_ns; /* heaptap's programs' run time then (overhead.h) */
	uint64_t window_calls[HEAPTAP_MAX_FUNCS]; /* fn_calls then */
	/* heaptap's own CPU time (overhead.h) when the window's attach began, and when the
	 * pause began (its detach included), with the targets' CPU time then */
	uint64_t window_own_ns;
	uint64_t pause_start_ns;
	uint64_t pause_own_ns;
	uint64_t pause_cpu_ns;
};

/* Windows of --window, within the budget of --max-overhead; costs: what a probe hit costs
 * here. Asks the kernel to count programs' run time. */
void pacer__init(struct pacer *p, struct session *s, const struct probe_costs *costs);
/* When the loop must turn the pacer next (the first call begins the first window, whose
 * probes went in as heaptap's own CPU time was s->attach_own_ns). */
uint64_t pacer__deadline(struct pacer *p);
/* At a window's end: go on or pause; at a pause's end: attach again. Negative errno. */
int pacer__turn(struct pacer *p);
/* The duty cycle as of now, for a report. */
const struct duty_cycle *pacer__now(struct pacer *p);
void pacer__free(struct pacer *p);

#endif
