// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "account/history.h"
#include "base/idmap.h"

struct series {
	uint64_t time_ns[HISTORY_POINTS];
	double bytes[HISTORY_POINTS];
	unsigned int n;
	unsigned int absent; /* consecutive snapshots without the site */
};

struct history {
	struct idmap sites; /* stack id -> struct series */
};

struct history *history__new(void)
{
	return calloc(1, sizeof(struct history));
}

void history__free(struct history *h)
{
	if (!h)
		return;
	idmap__free_values(&h->sites);
	free(h);
}

static void push(struct series *s, uint64_t time_ns, double bytes)
{
	unsigned int i;

	if (s->n == HISTORY_POINTS) {
		/* Keeps points 0, 2, 4...: the first stays, the spacing doubles. */
		for (i = 1; 2 * i < HISTORY_POINTS; i++) {
			s->time_ns[i] = s->time_ns[2 * i];
			s->bytes[i] = s->bytes[2 * i];
		}
		s->n = HISTORY_POINTS / 2;
	}
	s->time_ns[s->n] = time_ns;
	s->bytes[s->n] = bytes;
	s->n++;
}

int history__add(struct history *h, const struct snapshot *snap)
{
	struct idmap kept = {};
	size_t i;
	int err = 0;

	for (i = 0; i < snap->nsites && !err; i++) {
		const struct site *site = &snap->sites[i];
		struct series *s = idmap__get(&h->sites, site->stack_id);

		if (!s) {
			s = calloc(1, sizeof(*s));
			if (!s || idmap__put(&h->sites, site->stack_id, s)) {
				free(s);
				return -ENOMEM;
			}
		}
		s->absent = 0;
		push(s, snap->time_ns, site->est_bytes);
	}
	/* The sites not in the snapshot: a zero, or forgotten after long enough. */
	idmap__for_each(&h->sites, i) {
		struct series *s = h->sites.values[i];

		if (s->time_ns[s->n - 1] != snap->time_ns) {
			push(s, snap->time_ns, 0);
			s->absent++;
		}
		if (s->absent >= HISTORY_POINTS)
			free(s);
		else if (idmap__put(&kept, h->sites.keys[i], s))
			err = -ENOMEM;
	}
	idmap__free(&h->sites);
	h->sites = kept;
	return err;
}

bool history__fit(const double *t, const double *y, unsigned int n, double *slope, double *fit)
{
	double mt = 0, my = 0, stt = 0, sty = 0, syy = 0;
	unsigned int i;

	if (n < 2)
		return false;
	for (i = 0; i < n; i++) {
		mt += t[i];
		my += y[i];
	}
	mt /= n;
	my /= n;
	for (i = 0; i < n; i++) {
		stt += (t[i] - mt) * (t[i] - mt);
		sty += (t[i] - mt) * (y[i] - my);
		syy += (y[i] - my) * (y[i] - my);
	}
	if (stt <= 0)
		return false;
	*slope = sty / stt;
	/* R^2 of a least-squares line: the share of the variance the line explains. */
	*fit = syy > 0 ? sty * sty / (stt * syy) : 0;
	return true;
}

/* Points of a leak's call: growth over the session's whole course, not in a corner of it. */
#define LEAK_FIT 0.8
#define LEAK_STEADINESS 0.5

bool history__judge(const uint64_t *time_ns, const double *bytes, unsigned int n,
		    struct trend *t)
{
	double ts[HISTORY_POINTS], lo = INFINITY, hi = -INFINITY, fit1, fit2, b1, b2, net, mid;
	unsigned int i, half;

	*t = (struct trend){ .kind = TREND_NEW, .growth = NAN };
	if (!n)
		return false;
	/* The latest points, when there are more than a trend is judged on. */
	if (n > HISTORY_POINTS) {
		time_ns += n - HISTORY_POINTS;
		bytes += n - HISTORY_POINTS;
		n = HISTORY_POINTS;
	}
	t->points = n;
	for (i = 0; i < n; i++) {
		ts[i] = (time_ns[i] - time_ns[0]) / 1e9;
		lo = fmin(lo, bytes[i]);
		hi = fmax(hi, bytes[i]);
	}
	t->span_s = ts[n - 1];
	if (n < 3 || !history__fit(ts, bytes, n, &t->growth, &t->fit))
		return true;
	net = bytes[n - 1] - bytes[0];
	t->swing = fabs(net) > 0 ? (hi - lo) / fabs(net) : (hi > lo ? INFINITY : 0);
	/* The halves split at the middle of the time span (points may be spaced unevenly). */
	mid = t->span_s / 2;
	for (half = 0; half < n && ts[half] <= mid; half++)
		;
	if (half >= 2 && n - half + 1 >= 2 && history__fit(ts, bytes, half, &b1, &fit1) &&
	    history__fit(ts + half - 1, bytes + half - 1, n - half + 1, &b2, &fit2) && b1 > 0 &&
	    b2 > 0)
		t->steadiness = fmin(b1, b2) / fmax(b1, b2);
	t->confidence = t->fit * t->steadiness * fmin(1, (n - 2) / 8.0);
	if (n < HISTORY_MIN_POINTS) {
		t->kind = TREND_NEW;
	} else if (t->growth > 0 && t->fit >= LEAK_FIT && t->steadiness >= LEAK_STEADINESS &&
		   net > 0) {
		t->kind = TREND_LEAK;
	} else if (t->swing > 2 && t->fit < 0.5 && hi > lo) {
		t->kind = TREND_CHURN;
	} else if (half >= 2 && b1 > 0 && b2 < b1 * 0.1 && net > 0) {
		t->kind = TREND_PLATEAU;
	} else if (t->growth > 0 && net > 0 && t->fit >= 0.5) {
		t->kind = TREND_GROWING;
	} else if (t->growth < 0 && net < 0 && t->fit >= 0.5) {
		t->kind = TREND_SHRINKING;
	} else {
		t->kind = TREND_STEADY;
	}
	return true;
}

bool history__trend(const struct history *h, uint64_t stack_id, struct trend *t)
{
	const struct series *s = idmap__get(&h->sites, stack_id);

	if (!s) {
		*t = (struct trend){ .kind = TREND_NEW, .growth = NAN };
		return false;
	}
	return history__judge(s->time_ns, s->bytes, s->n, t);
}

const char *history__trend_name(enum trend_kind kind)
{
	static const char *const names[] = {
		[TREND_NEW] = "new",
		[TREND_LEAK] = "leak",
		[TREND_GROWING] = "growing",
		[TREND_PLATEAU] = "plateau",
		[TREND_CHURN] = "churn",
		[TREND_STEADY] = "steady",
		[TREND_SHRINKING] = "shrinking",
	};

	return kind < sizeof(names) / sizeof(names[0]) ? names[kind] : "unknown";
}
