/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the agent publishes (report/publish.h), at each report: its report on standard output
 * or --output, and at --listen the host's metrics at /metrics, the merged heap profile of the
 * processes traced at /debug/pprof/heap (and /allocs), and each one's at
 * /debug/pprof/heap?pid=PID (the latest profile of its latest escalation, while the process
 * lives).
 */
#ifndef HEAPTAP_HOST_SERVE_H
#define HEAPTAP_HOST_SERVE_H

#include <stddef.h>

#include "host/host_report.h"
#include "report/outputs.h"
#include "report/serve.h"

/* A report of the agent as it is published: the report, and the processes it ranked. */
struct host_published {
	const struct host_report *r;
	struct hproc *const *procs;
	size_t n;
};

/* The agent's publication: its reports are struct host_published. */
extern const struct publication host_publication;

/* The processes whose own profiles are served. */
struct host_profiles {
	int *pids;
	size_t n, cap;
};

/* What a request of a process's profile gets before it has one; negative errno. */
int host_serve__start(struct serve *s);
/* Each process's own profile served, those of processes gone withdrawn; negative errno. */
int host_serve__profiles(struct serve *s, struct host_profiles *served,
			 struct hproc *const *procs, size_t n);
void host_serve__free(struct host_profiles *served);

#endif
