// SPDX-License-Identifier: GPL-2.0
#include <math.h>
#include <stdlib.h>

#include "base/array.h"
#include "host/tiers.h"

bool tiers__ranked(const struct hproc *p)
{
	return !p->gone && !p->kernel && !p->own && !p->excluded;
}

bool tiers__eligible(const struct hproc *p, uint64_t now_ns)
{
	const struct trend *t = &p->trend;

	if (!tiers__ranked(p) || p->tier != TIER_PROC || now_ns < p->cooldown_until_ns)
		return false;
	/* A zombie has no memory left to trace. */
	if (p->state == 'Z' || p->state == 'X')
		return false;
	return t->kind == TREND_LEAK && t->growth * t->span_s >= GROWTH_MIN_NET;
}

static double growth_of(const struct hproc *p)
{
	return p->trend.kind == TREND_NEW || isnan(p->trend.growth) ? NAN : p->trend.growth;
}

int tiers__by_growth(const void *a, const void *b)
{
	const struct hproc *x = *(struct hproc *const *)a, *y = *(struct hproc *const *)b;
	double gx = growth_of(x), gy = growth_of(y);

	if (isnan(gx) != isnan(gy))
		return isnan(gx) ? 1 : -1;
	if (!isnan(gx) && gx != gy)
		return gx > gy ? -1 : 1;
	if (x->anon + x->swap != y->anon + y->swap)
		return x->anon + x->swap > y->anon + y->swap ? -1 : 1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

size_t tiers__choose(struct hproc *const *procs, size_t n, uint64_t now_ns, size_t room,
		     struct hproc **out)
{
	struct hproc **v = NULL;
	size_t i, k = 0, cap = 0, chosen;

	for (i = 0; i < n; i++) {
		if (!tiers__eligible(procs[i], now_ns))
			continue;
		if (array__reserve(&v, &cap, k, sizeof(*v)))
			break;
		v[k++] = procs[i];
	}
	array__sort(v, k, sizeof(*v), tiers__by_growth);
	chosen = k < room ? k : room;
	for (i = 0; i < chosen; i++)
		out[i] = v[i];
	free(v);
	return chosen;
}
