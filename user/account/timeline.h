/* SPDX-License-Identifier: GPL-2.0 */
/* The session's memory over time, one point per report, in bounded space: the HTML
 * report's timeline. */
#ifndef HEAPTAP_TIMELINE_H
#define HEAPTAP_TIMELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "target/rss.h"

/* Points kept at most: past this, every other point is dropped (the first and the latest
 * always stay), so a session of any length is drawn end to end. */
#define TIMELINE_POINTS 1024

struct timeline_point {
	uint64_t time_ns; /* CLOCK_MONOTONIC */
	uint64_t live_bytes;
	uint64_t peak_bytes;
	uint64_t rss; /* the target's */
	bool parts_known; /* where the RSS is, read at this point */
	uint64_t parts[RSS_PARTS];
};

struct timeline {
	struct timeline_point points[TIMELINE_POINTS];
	size_t n;
};

void timeline__add(struct timeline *t, const struct timeline_point *p);

/* Live bytes per second over the latest points (at most 20): the least-squares slope; NAN
 * with fewer than 5. */
double timeline__growth(const struct timeline *t);

#endif
