// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "base/array.h"
#include "host/host_rank.h"
#include "host/tiers.h"

int host_rank__make(struct host_report *r, struct hproc *const *procs, size_t n)
{
	struct hproc **all = calloc(n ? n : 1, sizeof(*all));
	size_t i, k = 0, top = r->opts->top;

	if (!all)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		const struct hproc *p = procs[i];

		if (!tiers__ranked(p))
			continue;
		all[k++] = procs[i];
		r->rss += p->rss;
		r->anon += p->anon;
		r->swap += p->swap;
		if (p->trend.kind != TREND_NEW && !isnan(p->trend.growth))
			r->growth += p->trend.growth * 3600;
		r->traced += p->tier == TIER_LIVE;
	}
	array__sort(all, k, sizeof(*all), tiers__by_growth);
	r->ranked = k;
	r->rows = calloc(k ? k : 1, sizeof(*r->rows));
	if (!r->rows) {
		free(all);
		return -ENOMEM;
	}
	r->order = all;
	/* The first --top, and every process traced now, wherever it ranks. */
	for (i = 0, n = 0; i < k; i++)
		if (i < top || all[i]->tier == TIER_LIVE)
			r->rows[n++] = (struct host_row){ all[i], i + 1 };
	r->nrows = n;
	return 0;
}

void host_rank__free(struct host_report *r)
{
	free(r->rows);
	free(r->order);
	r->rows = NULL;
	r->order = NULL;
	r->nrows = r->ranked = 0;
}
