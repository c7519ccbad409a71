/* SPDX-License-Identifier: GPL-2.0 */
/*
 * heaptap --all (and --cgroup): the host's agent. Every process is watched at the cheapest
 * tier, its anonymous memory read from /proc every interval and judged; those that grow
 * steadily are traced at the allocator's level (traced.h), within one budget for the whole
 * host (budget.h), until their growing site is named. One report of the host each interval:
 * text or JSON, -o, and with --listen, Prometheus metrics and heap profiles.
 */
#ifndef HEAPTAP_AGENT_H
#define HEAPTAP_AGENT_H

#include "base/settings.h"

/* Runs until a signal on sigfd (SIGUSR1: a report now), -d, or --exit-on-alert; the exit
 * status. */
int agent__run(const struct options *opts, int sigfd);

#endif
