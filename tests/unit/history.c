// SPDX-License-Identifier: GPL-2.0
/*
 * Sites' courses (user/history.c): the least-squares fit, and the trend each synthetic
 * history is called (a leak, a cache that filled up, churn, steady, shrinking, growing
 * unevenly, too new to say), with its figures; sites that go away, are forgotten, and
 * histories longer than the points kept.
 */
#include "account/history.h"
#include "unit.h"

#define SECOND 1000000000ULL

static void fits(void)
{
	static const double t[] = { 0, 1, 2, 3, 4 }, same_t[] = { 7, 7, 7 };
	static const double line[] = { 5, 8, 11, 14, 17 }, flat[] = { 9, 9, 9, 9, 9 };
	/* (0,0) (1,1) (2,0) (3,1): slope 1/5, and the line explains a fifth of the variance. */
	static const double zigzag[] = { 0, 1, 0, 1 };
	double slope = -1, fit = -1;

	CHECK_TRUE(history__fit(t, line, 5, &slope, &fit), "a line: fitted");
	CHECK_NEAR(slope, 3, 0, "a line's slope");
	CHECK_NEAR(fit, 1, 0, "a line's fit");
	CHECK_TRUE(history__fit(t, flat, 5, &slope, &fit), "flat: fitted");
	CHECK_NEAR(slope, 0, 0, "flat: slope");
	CHECK_NEAR(fit, 0, 0, "flat: fit 0, nothing to explain");
	CHECK_TRUE(history__fit(t, zigzag, 4, &slope, &fit), "zigzag: fitted");
	CHECK_NEAR(slope, 0.2, 1e-15, "zigzag: slope");
	CHECK_NEAR(fit, 0.2, 1e-15, "zigzag: fit");
	slope = fit = -1;
	CHECK_TRUE(!history__fit(t, line, 1, &slope, &fit), "one point: no line");
	CHECK_TRUE(!history__fit(same_t, line, 3, &slope, &fit), "one time: no line");
	CHECK_TRUE(slope == -1 && fit == -1, "no line: nothing written");
}

/* A snapshot at second time_s with one site per non-negative byte count of bytes[] (stack
 * id: index + 1); negative counts: the site is not in it. */
static void add(struct history *h, uint64_t time_s, const double *bytes, size_t n)
{
	static struct snapshot snap; /* too big for the stack, zeroed once */
	struct site sites[8] = {};
	size_t i, k = 0;

	for (i = 0; i < n; i++)
		if (bytes[i] >= 0)
			sites[k++] = (struct site){ .stack_id = i + 1, .est_bytes = bytes[i] };
	snap.time_ns = time_s * SECOND;
	snap.sites = sites;
	snap.nsites = k;
	CHECK_I64(history__add(h, &snap), 0, "history__add at %" PRIu64 " s", time_s);
}

/* A series judged alone (history__judge, as host/ judges processes) is called as the site
 * with the same course is, with the same figures. */
static void judged_alike(const double *y, unsigned int n, const struct trend *site)
{
	uint64_t time_ns[16];
	struct trend t;
	unsigned int i;

	for (i = 0; i < n && i < 16; i++)
		time_ns[i] = (1000 + i) * SECOND;
	CHECK_TRUE(history__judge(time_ns, y, n, &t), "a series judged");
	CHECK_STR(history__trend_name(t.kind), history__trend_name(site->kind), "series: kind");
	CHECK_U64(t.points, site->points, "series: points");
	CHECK_TRUE(t.growth == site->growth || (isnan(t.growth) && isnan(site->growth)),
		   "series: growth %g, the site's %g", t.growth, site->growth);
	CHECK_TRUE(t.fit == site->fit && t.steadiness == site->steadiness &&
			   t.confidence == site->confidence,
		   "series: fit, steadiness and confidence the site's");
}

/* The trend of one site whose live bytes are y[0], y[1], ... a second apart. */
static struct trend course(const double *y, unsigned int n)
{
	struct history *h = history__new();
	struct trend t;
	unsigned int i;

	for (i = 0; i < n; i++)
		add(h, i, &y[i], 1);
	CHECK_TRUE(history__trend(h, 1, &t), "a history");
	CHECK_U64(t.points, n, "points");
	CHECK_NEAR(t.span_s, n - 1, 0, "span");
	history__free(h);
	judged_alike(y, n, &t);
	return t;
}

static void trends(void)
{
	double y[16];
	struct trend t;
	unsigned int i;

	/* 1000 bytes more every second, 10 s: a leak, as sure as can be. */
	for (i = 0; i < 10; i++)
		y[i] = 1000.0 * i;
	t = course(y, 10);
	CHECK_STR(history__trend_name(t.kind), "leak", "steady growth");
	CHECK_NEAR(t.growth, 1000, 0, "leak: growth");
	CHECK_NEAR(t.fit, 1, 0, "leak: fit");
	CHECK_NEAR(t.steadiness, 1, 0, "leak: both halves grow alike");
	CHECK_NEAR(t.confidence, 1, 0, "leak: confidence, 8 points past the first 2");
	CHECK_NEAR(t.swing, 1, 0, "leak: swing, range over net change");
	/* Five points: a leak, with less confidence (3 of 8 points). */
	t = course(y, 5);
	CHECK_STR(history__trend_name(t.kind), "leak", "5 points of growth");
	CHECK_NEAR(t.confidence, 3 / 8.0, 0, "5 points: confidence");
	/* Four points: too few to call. */
	t = course(y, 4);
	CHECK_STR(history__trend_name(t.kind), "new", "4 points");
	CHECK_NEAR(t.growth, 1000, 0, "4 points: the growth is measured all the same");
	t = course(y, 2);
	CHECK_STR(history__trend_name(t.kind), "new", "2 points");
	CHECK_TRUE(isnan(t.growth), "2 points: no growth figure");

	/* Grows for 5 s, then holds 15 s: a cache that filled up. */
	for (i = 0; i < 15; i++)
		y[i] = 1000.0 * (i < 5 ? i : 5);
	t = course(y, 15);
	CHECK_STR(history__trend_name(t.kind), "plateau", "grew, then held");
	CHECK_NEAR(t.steadiness, 0, 0, "plateau: the second half did not grow");
	CHECK_NEAR(t.confidence, 0, 0, "plateau: no confidence in a leak");

	/* Up and down around nothing: churn. */
	for (i = 0; i < 11; i++)
		y[i] = i % 2 ? 1000 : 0;
	t = course(y, 11);
	CHECK_STR(history__trend_name(t.kind), "churn", "up and down");
	CHECK_NEAR(t.growth, 0, 1e-12, "churn: no growth");
	CHECK_TRUE(isinf(t.swing), "churn: swing with no net change");

	/* The same bytes all along. */
	for (i = 0; i < 8; i++)
		y[i] = 4096;
	t = course(y, 8);
	CHECK_STR(history__trend_name(t.kind), "steady", "unchanged");
	CHECK_NEAR(t.growth, 0, 0, "steady: growth");
	CHECK_NEAR(t.swing, 0, 0, "steady: swing");

	/* 1000 bytes fewer every second. */
	for (i = 0; i < 10; i++)
		y[i] = 9000 - 1000.0 * i;
	t = course(y, 10);
	CHECK_STR(history__trend_name(t.kind), "shrinking", "shrinking");
	CHECK_NEAR(t.growth, -1000, 0, "shrinking: growth");

	/* Nothing for 5 s, then 1000 bytes a second: growing, but only lately, not a leak. */
	for (i = 0; i < 11; i++)
		y[i] = i > 5 ? 1000.0 * (i - 5) : 0;
	t = course(y, 11);
	CHECK_STR(history__trend_name(t.kind), "growing", "growth in the second half only");
	CHECK_NEAR(t.steadiness, 0, 0, "growing: the first half did not grow");
	CHECK_TRUE(t.growth > 0 && t.fit >= 0.5 && t.fit < 0.8, "growing: growth %g, fit %g",
		   t.growth, t.fit);

	CHECK_STR(history__trend_name(99), "unknown", "a kind out of range");
}

/* Sites that leave: zeros while they are away, forgotten after HISTORY_POINTS snapshots. */
static void sites_that_leave(void)
{
	struct history *h = history__new();
	double both[2] = { 100, 200 }, first[2] = { 150, -1 };
	struct trend t;
	unsigned int i;

	add(h, 0, both, 2);
	add(h, 1, first, 2);
	CHECK_TRUE(history__trend(h, 2, &t), "site 2 still known");
	CHECK_U64(t.points, 2, "site 2: a zero for the snapshot it missed");
	CHECK_NEAR(t.span_s, 1, 0, "site 2: its zero is at the snapshot's time");
	CHECK_TRUE(!history__trend(h, 3, &t), "a site never seen: no history");
	CHECK_STR(history__trend_name(t.kind), "new", "a site never seen: new");
	for (i = 2; i < HISTORY_POINTS; i++)
		add(h, i, first, 2);
	CHECK_TRUE(history__trend(h, 2, &t), "site 2 absent %u times: still known",
		   HISTORY_POINTS - 1);
	add(h, HISTORY_POINTS, first, 2);
	CHECK_TRUE(!history__trend(h, 2, &t), "site 2 absent %u times: forgotten", HISTORY_POINTS);
	CHECK_TRUE(history__trend(h, 1, &t), "site 1 kept");
	history__free(h);
	history__free(NULL);
}

/* Past HISTORY_POINTS, every other point goes: the first stays, the latest is added. */
static void long_histories(void)
{
	struct history *h = history__new();
	struct trend t;
	double y;
	unsigned int i;

	for (i = 0; i < 200; i++) {
		y = 1000.0 * i;
		add(h, i, &y, 1);
		if (i + 1 == HISTORY_POINTS) {
			history__trend(h, 1, &t);
			CHECK_U64(t.points, HISTORY_POINTS, "points when full");
		}
	}
	history__trend(h, 1, &t);
	/* Halved to 64 at the 129th, full again at the 192nd, halved at the 193rd, then 7 more. */
	CHECK_U64(t.points, 72, "points after 200 snapshots");
	CHECK_NEAR(t.span_s, 199, 0, "span: the first point to the latest");
	CHECK_STR(history__trend_name(t.kind), "leak", "still a leak");
	CHECK_NEAR(t.growth, 1000, 1e-9, "growth over unevenly spaced points");
	CHECK_NEAR(t.fit, 1, 1e-12, "fit over unevenly spaced points");
	CHECK_NEAR(t.steadiness, 1, 1e-12, "halves split by time, not by points");
	history__free(h);
}

int main(void)
{
	fits();
	trends();
	sites_that_leave();
	long_histories();
	CHECK_TRUE(!history__judge(NULL, NULL, 0, &(struct trend){}), "no points: nothing judged");
	return unit__done("history");
}
