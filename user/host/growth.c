// SPDX-License-Identifier: GPL-2.0
#include <string.h>

#include "host/growth.h"

void growth__add(struct growth *g, uint64_t time_ns, double bytes)
{
	unsigned int at;

	if (g->n < GROWTH_POINTS) {
		at = (g->head + g->n++) % GROWTH_POINTS;
	} else {
		at = g->head;
		g->head = (g->head + 1) % GROWTH_POINTS;
	}
	g->time_ns[at] = time_ns;
	g->bytes[at] = bytes;
}

void growth__reset(struct growth *g)
{
	g->n = 0;
	g->head = 0;
}

void growth__judge(const struct growth *g, struct trend *t, uint64_t *since_ns)
{
	uint64_t time_ns[GROWTH_POINTS];
	double bytes[GROWTH_POINTS];
	unsigned int i, low = 0;

	for (i = 0; i < g->n; i++) {
		unsigned int at = (g->head + i) % GROWTH_POINTS;

		time_ns[i] = g->time_ns[at];
		bytes[i] = g->bytes[at];
		/* The last time at the lowest: a tie later in time wins. */
		if (bytes[i] <= bytes[low])
			low = i;
	}
	*since_ns = g->n ? time_ns[low] : 0;
	history__judge(time_ns, bytes, g->n, t);
	if ((t->kind == TREND_LEAK || t->kind == TREND_GROWING) &&
	    t->growth * t->span_s < GROWTH_MIN_NET)
		t->kind = TREND_STEADY;
}
