// SPDX-License-Identifier: GPL-2.0
#include <math.h>

#include "account/history.h"
#include "account/timeline.h"

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

double timeline__growth(const struct timeline *t)
{
	double x[20], y[20], slope, fit;
	size_t n = t->n < 20 ? t->n : 20, i;

	if (n < 5)
		return NAN;
	for (i = 0; i < n; i++) {
		const struct timeline_point *p = &t->points[t->n - n + i];

		x[i] = p->time_ns / 1e9;
		y[i] = p->live_bytes;
	}
	return history__fit(x, y, n, &slope, &fit) ? slope : NAN;
}
