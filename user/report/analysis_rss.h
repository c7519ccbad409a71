/* SPDX-License-Identifier: GPL-2.0 */
/*
 * analysis.c's part for where the target's RSS is (struct rss_parts, report.h): the reading
 * split into parts, each part's growth fitted over the reports as a site's is, the part that
 * leads, and one line of advice. Included by analysis.c alone.
 */
#ifndef HEAPTAP_ANALYSIS_RSS_H
#define HEAPTAP_ANALYSIS_RSS_H

#include "report/report.h"

/* r's rss_parts from r->rss_reading and the timeline's earlier parts; tracked: the live
 * bytes heaptap's own blocks hold (a lower bound of an allocator's it cannot walk). */
void analysis_rss__make(const struct report *r, double tracked, struct rss_parts *out);

#endif
