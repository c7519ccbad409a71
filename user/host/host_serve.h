/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What --listen serves with --all, refreshed at each report: the host's metrics at /metrics,
 * the merged heap profile of the processes traced at /debug/pprof/heap (and /allocs), and
 * each one's at /debug/pprof/heap?pid=PID (the latest profile of its latest escalation, while
 * the process lives).
 */
#ifndef HEAPTAP_HOST_SERVE_H
#define HEAPTAP_HOST_SERVE_H

#include <stddef.h>

#include "host/host_report.h"

struct host_serve;

int host_serve__start(const char *where, struct host_serve **out);
int host_serve__report(struct host_serve *s, const struct host_report *r,
		       struct hproc *const *procs, size_t n);
void host_serve__stop(struct host_serve *s);

#endif
