/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A report's analysis (struct report_analysis, report.h), made once where the report is
 * made (session/reporting.c) and handed with it to every format. The computing is private
 * to analysis.c, and no format includes this header: none ranks, judges or sums anything
 * again.
 */
#ifndef HEAPTAP_ANALYSIS_H
#define HEAPTAP_ANALYSIS_H

#include "report/report.h"

/*
 * r->analysis from r's snapshot, the previous one, the history, the leak check and
 * r->figures: the figures estimated where sampled, the sites ranked, the suspects, the
 * changes, what held the peak, the processes. What cannot be had (out of memory) is left
 * empty, and -ENOMEM returned.
 */
int analysis__make(struct report *r);

/* Frees what analysis__make allocated; zeros are fine. */
void analysis__free(struct report_analysis *a);

#endif
