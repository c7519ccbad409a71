// SPDX-License-Identifier: GPL-2.0
/*
 * The session's timeline (user/timeline.c): its growth figure over the latest points, and
 * how it stays bounded (every other point dropped, the first and the latest kept).
 */
#include "account/timeline.h"
#include "unit.h"

#define SECOND 1000000000ULL

static void add(struct timeline *t, uint64_t time_ns, uint64_t live)
{
	timeline__add(t, &(struct timeline_point){ .time_ns = time_ns, .live_bytes = live });
}

static void growth(void)
{
	struct timeline *t = calloc(1, sizeof(*t));
	unsigned int i;

	if (!t)
		exit(2);
	CHECK_TRUE(isnan(timeline__growth(t)), "no points: no growth");
	for (i = 0; i < 4; i++)
		add(t, i * SECOND, i << 20);
	CHECK_TRUE(isnan(timeline__growth(t)), "4 points: no growth");
	add(t, 4 * SECOND, 4 << 20);
	CHECK_NEAR(timeline__growth(t), 1 << 20, 0, "5 points, 1 MiB a second");
	/* Only the latest 20 count: 10 s flat, then 100 bytes a second for 30 s. */
	memset(t, 0, sizeof(*t));
	for (i = 0; i < 10; i++)
		add(t, i * SECOND, 5000);
	for (i = 10; i < 40; i++)
		add(t, i * SECOND, 5000 + 100 * (i - 9));
	CHECK_NEAR(timeline__growth(t), 100, 0, "the latest 20 points' slope");
	/* Falling: negative. */
	memset(t, 0, sizeof(*t));
	for (i = 0; i < 6; i++)
		add(t, 10 * i * SECOND, 60000 - 1000 * i);
	CHECK_NEAR(timeline__growth(t), -100, 0, "1000 bytes fewer every 10 s");
	/* All at one time: no slope. */
	memset(t, 0, sizeof(*t));
	for (i = 0; i < 6; i++)
		add(t, SECOND, i);
	CHECK_TRUE(isnan(timeline__growth(t)), "one time: no growth");
	free(t);
}

static void halving(void)
{
	struct timeline *t = calloc(1, sizeof(*t));
	unsigned int i;

	if (!t)
		exit(2);
	for (i = 0; i < TIMELINE_POINTS; i++)
		add(t, i * SECOND, i);
	CHECK_U64(t->n, TIMELINE_POINTS, "full");
	CHECK_U64(t->points[TIMELINE_POINTS - 1].live_bytes, TIMELINE_POINTS - 1,
		  "full: the latest");
	add(t, (uint64_t)TIMELINE_POINTS * SECOND, TIMELINE_POINTS);
	CHECK_U64(t->n, TIMELINE_POINTS / 2 + 1, "halved, then the new point");
	for (i = 0; i < TIMELINE_POINTS / 2; i++)
		if (!CHECK_U64(t->points[i].time_ns, 2 * i * SECOND, "point %u: the old point %u",
			       i, 2 * i))
			break;
	CHECK_U64(t->points[TIMELINE_POINTS / 2].time_ns, (uint64_t)TIMELINE_POINTS * SECOND,
		  "the latest point");
	/* Growth over the last 20 points, spaced 2 s then 1 s: still the line's slope. */
	CHECK_NEAR(timeline__growth(t), 1e-9 * SECOND, 1e-12, "one byte a second");
	for (i = TIMELINE_POINTS + 1; i < 3 * TIMELINE_POINTS; i++)
		add(t, i * (uint64_t)SECOND, i);
	CHECK_TRUE(t->n <= TIMELINE_POINTS, "bounded: %zu points", t->n);
	CHECK_U64(t->points[0].time_ns, 0, "the first point stays");
	CHECK_U64(t->points[t->n - 1].live_bytes, 3 * TIMELINE_POINTS - 1, "the latest is there");
	free(t);
}

int main(void)
{
	growth();
	halving();
	return unit__done("timeline");
}
