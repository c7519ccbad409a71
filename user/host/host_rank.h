/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The host's report's analysis, made once where the report is made (agent.c): the processes
 * ranked by growth and the host's totals. The host's formats read it and never include this
 * header, so that none ranks again.
 */
#ifndef HEAPTAP_HOST_RANK_H
#define HEAPTAP_HOST_RANK_H

#include <stddef.h>

#include "host/host_report.h"

/* Ranks procs into r->rows and r->order (malloc'd: host_rank__free) and sums the totals. */
int host_rank__make(struct host_report *r, struct hproc *const *procs, size_t n);
void host_rank__free(struct host_report *r);

#endif
