/* SPDX-License-Identifier: GPL-2.0 */
/*
 * --listen: Prometheus metrics over HTTP, served by a thread of their own from the text the
 * latest report rendered, so a scrape never waits on the BPF maps and a slow client never
 * delays a report.
 */
#ifndef HEAPTAP_METRICS_H
#define HEAPTAP_METRICS_H

#include "report.h"

struct metrics;

/* Listens on "[ADDR:]PORT" (127.0.0.1 when ADDR is missing; [::1] for IPv6) and starts
 * serving /metrics. Prints why it cannot; negative errno. */
int metrics__start(const char *where, struct metrics **out);

/* The metrics of this report: what scrapes get from now on. */
int metrics__update(struct metrics *m, const struct report *r);

/* Stops serving and closes the socket; NULL is fine. */
void metrics__stop(struct metrics *m);

#endif
