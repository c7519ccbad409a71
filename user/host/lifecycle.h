/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The host's agent's BPF side (bpf/hostwatch.bpf.c): notices of processes that start, exec
 * and end, on the scheduler's tracepoints, filtered by cgroup with --cgroup. The agent polls
 * descriptor and takes the notices in its loop.
 */
#ifndef HEAPTAP_LIFECYCLE_H
#define HEAPTAP_LIFECYCLE_H

#include <stddef.h>
#include <stdint.h>

#include "hostwatch.h"

struct lifecycle;

/* Loads and attaches, with the cgroups (directories) to filter by, ncgroups at most
 * HOSTWATCH_MAX_CGROUPS; says why it cannot. Negative errno. */
int lifecycle__open(const char *const *cgroups, size_t ncgroups, struct lifecycle **out);

/* A descriptor readable when notices wait. */
int lifecycle__fd(const struct lifecycle *l);

/* Gives each waiting notice to take(); the number taken or negative errno. */
int lifecycle__poll(struct lifecycle *l, void (*take)(const struct hostwatch_event *e, void *ctx),
		    void *ctx);

/* The BPF side's counters (lost: notices the ring had no room for). */
void lifecycle__counters(const struct lifecycle *l, struct hostwatch_counters *out);

/* Detaches and frees; NULL is fine. */
void lifecycle__close(struct lifecycle *l);

#endif
