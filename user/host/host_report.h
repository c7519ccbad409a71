/* SPDX-License-Identifier: GPL-2.0 */
/*
 * One report of the host's agent: every process watched ranked by its memory's growth, the
 * host's totals, what the tiers did, what heaptap costs; and its formats (host_text.c,
 * host_json.c, host_prom.c; the merged heap profile, host_pprof.c).
 */
#ifndef HEAPTAP_HOST_REPORT_H
#define HEAPTAP_HOST_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "account/alarm.h"
#include "base/settings.h"
#include "host/census.h"
#include "host/hproc.h"
#include "hostwatch.h"

/* The host's JSON records' schema version (doc/host.schema.json). */
#define HOST_SCHEMA_VERSION 1

struct host_escalations {
	uint64_t started, named, given_up, failed, ended;
};

/* An alarm that fired at this report: a process's (pid, comm), or the host's (pid 0). */
struct host_alert {
	int pid;
	char comm[65];
	struct alarm_event ev;
};

struct host_row {
	struct hproc *p;
	size_t rank; /* from 1, by growth */
};

struct host_report {
	const struct options *opts;
	uint64_t time_ns, start_ns;
	bool final;
	struct census_counts counts;
	struct hostwatch_counters notices;
	/* The processes ranked (tiers.h; host_rank.h), the first --top and every traced one: */
	struct host_row *rows;
	size_t nrows;
	struct hproc **order; /* every process ranked, fastest growth first */
	size_t ranked;
	/* Sums over the processes ranked; growth over those whose course is judged. */
	uint64_t rss, anon, swap;
	double growth; /* bytes per hour */
	unsigned int traced;
	struct host_escalations esc;
	double budget, spent, room;
	double own_cpu_s;    /* heaptap's CPU time since the start (the agent's, its children's) */
	uint64_t own_rss;    /* the agent's */
	uint64_t traced_rss; /* its escalations' heaptaps' */
	const struct host_alert *alerts;
	size_t nalerts;
	uint64_t alerts_total[ALARMS]; /* alarms fired since the start, processes' and host's */
};

/* The unit of a cgroup path (procfs__unit), "" for none; into a buffer of 256. */
const char *host_report__unit(const struct hproc *p, char *buf, size_t size);

int host_report__text(FILE *f, const struct host_report *r);
int host_report__json(FILE *f, const struct host_report *r);
int host_report__prometheus(FILE *f, const struct host_report *r);

#endif
