/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A process's anonymous memory over the latest GROWTH_POINTS intervals, and its course,
 * judged by the rule a site's is (history__judge): the host's agent ranks processes by it
 * and traces those that grow steadily. A window rather than the process's whole life, so that
 * a leak that begins after days of steady memory is seen within that many intervals.
 */
#ifndef HEAPTAP_GROWTH_H
#define HEAPTAP_GROWTH_H

#include <stdint.h>

#include "account/history.h"

#define GROWTH_POINTS HISTORY_POINTS
/* Growth below this over the points judged is a few pages (an allocator's arena settling, a
 * buffer grown once): called steady, not a leak, however straight its line. */
#define GROWTH_MIN_NET (1 << 20)

struct growth {
	uint64_t time_ns[GROWTH_POINTS]; /* a ring: the oldest at head once full */
	double bytes[GROWTH_POINTS];
	unsigned int n, head;
};

void growth__add(struct growth *g, uint64_t time_ns, double bytes);

/* Forgets every point (an exec: another program's memory from now on). */
void growth__reset(struct growth *g);

/*
 * The course of the points kept (less than GROWTH_MIN_NET of growth is steady); *since_ns
 * the time the memory was last at its lowest in them (when its growth began, for one that
 * grows), 0 with no points.
 */
void growth__judge(const struct growth *g, struct trend *t, uint64_t *since_ns);

#endif
