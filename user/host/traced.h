/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The processes traced now, each by an escalation (escalation.h), and their changes of tier:
 * up when the agent chooses one (tiers.h), down once its growing site is named, its time
 * limit passed, its heaptap failed, the process ended, or the host's budget is spent. Every
 * change is said on stderr and, with --json, as a "tier" record; a process comes down once
 * its heaptap has ended, its probes out.
 */
#ifndef HEAPTAP_TRACED_H
#define HEAPTAP_TRACED_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/settings.h"
#include "host/host_report.h"
#include "host/hproc.h"
#include "report/publish.h"

struct traced;

/* opts and dir must outlive it; records: whose standard output "tier" records go to (NULL:
 * none). */
int traced__new(const struct options *opts, const char *dir, struct publisher *records,
		struct traced **out);
/* Ends every escalation (SIGINT, then SIGKILL after its grace), each process brought down. */
void traced__end(struct traced *t);
/* Ends every escalation left, and frees. NULL is fine. */
void traced__free(struct traced *t);

/* p up a tier, its heaptap given share of its CPU time. Negative errno (said). */
int traced__start(struct traced *t, struct hproc *p, double share, uint64_t now_ns);

/* Escalations tracing now (not those ending). */
size_t traced__active(const struct traced *t);

/* The descriptors to wait on, up to max into fds; how many. */
size_t traced__fds(const struct traced *t, int *fds, size_t max);

/* What waits on fd, taken in: a site named sends its process down. */
void traced__read(struct traced *t, int fd, uint64_t now_ns);

/* At each report: escalations of processes that ended, or past their time limit, end. */
void traced__check(struct traced *t, uint64_t now_ns);

/* The host's budget spent: the latest escalation ends. */
void traced__shed(struct traced *t, double spent, double limit, uint64_t now_ns);

/* Reaps the heaptaps that ended and brings their processes down; whether any is ending
 * still. */
bool traced__reap(struct traced *t, uint64_t now_ns);

/* The census drops p (it ended): forgotten here. */
void traced__drop(struct traced *t, struct hproc *p);

const struct host_escalations *traced__counts(const struct traced *t);
/* The CPU time and RSS of the heaptaps running now. */
uint64_t traced__cpu_ns(const struct traced *t);
uint64_t traced__rss(const struct traced *t);

#endif
