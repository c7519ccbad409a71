/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Live bytes of each site over the session, bounded, and what their course says: a steady
 * leak, a cache that filled up, churn, or nothing much.
 */
#ifndef HEAPTAP_HISTORY_H
#define HEAPTAP_HISTORY_H

#include <stdbool.h>
#include <stdint.h>

#include "account/snapshot.h"

/* Points kept per site. Past this, every other point is dropped: the whole session stays
 * covered, older parts more sparsely. */
#define HISTORY_POINTS 128
/* Points before a site's course is judged at all. */
#define HISTORY_MIN_POINTS 5

struct history;

struct history *history__new(void);
void history__free(struct history *h);

/* A point per site of the snapshot, and a zero for each site seen before and gone since.
 * Sites gone for HISTORY_POINTS snapshots in a row are forgotten. */
int history__add(struct history *h, const struct snapshot *s);

enum trend_kind {
	TREND_NEW,     /* too few points to say */
	TREND_LEAK,    /* growing, steadily, all along: a suspect */
	TREND_GROWING, /* growing, but not steadily enough to be called a leak */
	TREND_PLATEAU, /* grew, then stopped: a cache that filled up */
	TREND_CHURN,   /* swings up and down around no net growth */
	TREND_STEADY,  /* no growth to speak of */
	TREND_SHRINKING,
};

struct trend {
	enum trend_kind kind;
	unsigned int points;
	double span_s;	   /* time from the first point to the last */
	double growth;	   /* bytes per second: the least-squares slope over all points */
	double fit;	   /* R^2 of that line: 1 when the points lie on it */
	double steadiness; /* the two halves' slopes, the smaller over the larger: 1 for a
			    * straight line, 0 when one half did not grow */
	double confidence; /* that it is a leak, 0 to 1: fit x steadiness x points' weight */
	double swing;	   /* the range of the points over their net change (churn > 2) */
};

/* The course of a site's live bytes; false when it has no history. */
bool history__trend(const struct history *h, uint64_t stack_id, struct trend *t);

/*
 * The course of any series of n points (bytes at time_ns, in time order), judged as a site's
 * is: the sites' and the host's processes' (host/) are called by one rule. Only the latest
 * HISTORY_POINTS points count. False when n is 0.
 */
bool history__judge(const uint64_t *time_ns, const double *bytes, unsigned int n,
		    struct trend *t);

const char *history__trend_name(enum trend_kind kind);

/* The least-squares line through n points (t in seconds): its slope, and R^2 (fit; 0 when
 * the points are all equal). False with fewer than 2 points or a single time. */
bool history__fit(const double *t, const double *y, unsigned int n, double *slope, double *fit);

#endif
