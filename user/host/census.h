/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The processes of the host the agent watches, keyed by PID and start time (a PID handed out
 * again is another process): found by a scan of /proc (with --cgroup, of those cgroups'
 * cgroup.procs) every interval, and by the BPF side's notices of forks, execs and exits in
 * between (lifecycle.h), so that a process that lives less than an interval is counted too.
 * A process that ends stays until the report that follows (census__sweep), for it to say so.
 */
#ifndef HEAPTAP_CENSUS_H
#define HEAPTAP_CENSUS_H

#include <stddef.h>
#include <stdint.h>

#include "base/settings.h"
#include "host/hproc.h"

struct census;

struct census_counts {
	uint64_t seen;	      /* distinct processes, since the start */
	uint64_t started;     /* forks noticed */
	uint64_t execs;	      /* execs noticed */
	uint64_t exited;      /* ended, noticed or missed by a scan */
	uint64_t short_lived; /* ended before any scan read them */
	uint64_t unnoticed;   /* missing from a scan with no notice of their end */
	uint64_t live;	      /* now, kernel threads and heaptap's own processes left out */
	uint64_t kernel;      /* kernel threads now (with --all) */
};

/* Paths are opened later (census__scan says what fails). Negative errno. */
int census__new(const struct host_settings *h, struct census **out);
void census__free(struct census *c);
/* The span a process's CPU rate is read over (hproc__mark_cpu): the host budget's window,
 * CENSUS_RATE_SPAN_NS until told. */
#define CENSUS_RATE_SPAN_NS (60 * 1000000000ULL)
void census__set_rate_span(struct census *c, uint64_t span_ns);

/* The BPF side's notices; start_ns is the process's start in boot-time nanoseconds. */
void census__fork(struct census *c, int pid, int ppid, uint64_t start_ns, const char *comm,
		  uint64_t now_ns);
void census__exec(struct census *c, int pid, uint64_t start_ns, const char *comm, uint64_t now_ns);
void census__exit(struct census *c, int pid, uint64_t start_ns, uint64_t now_ns);

/* Reads every process's figures at now_ns; processes missing are ended. Negative errno when
 * /proc or a --cgroup cannot be read at all (said once). */
int census__scan(struct census *c, uint64_t now_ns);

/* The processes known now (ended ones included until the sweep): an array the census owns,
 * valid until its next call. */
struct hproc *const *census__list(struct census *c, size_t *n);

/* Drops the processes that ended, each given to drop() first (which must not keep it). */
void census__sweep(struct census *c, void (*drop)(struct hproc *p, void *ctx), void *ctx);

const struct census_counts *census__counts(const struct census *c);

/* The process pid is now, if the census knows it. */
struct hproc *census__find(struct census *c, int pid);

#endif
