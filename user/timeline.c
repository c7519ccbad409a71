// SPDX-License-Identifier: GPL-2.0
#include "timeline.h"

void timeline__add(struct timeline *t, const struct timeline_point *p)
{
	size_t i;

	if (t->n == TIMELINE_POINTS) {
		/* Keeps points 0, 2, 4, ...: the spacing doubles, evenly. */
		for (i = 1; 2 * i < TIMELINE_POINTS; i++)
			t->points[i] = t->points[2 * i];
		t->n = TIMELINE_POINTS / 2;
	}
	t->points[t->n++] = *p;
}
