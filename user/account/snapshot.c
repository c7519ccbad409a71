// SPDX-License-Identifier: GPL-2.0
#include <stdlib.h>

#include "account/dump.h"
#include "base/array.h"
#include "account/snapshot.h"

const uint64_t snapshot__age_limits_s[AGE_BUCKETS - 1] = { 1, 10, 60, 600, 3600, 86400 };

void snapshot__dump_site(struct site *site, const struct dump_sources *from)
{
	unsigned int want = site->nexamples < DUMP_BLOCKS ? site->nexamples : DUMP_BLOCKS, k;
	struct dump *d;

	if (site->dumps || !want || !(site->dumps = calloc(want, sizeof(*site->dumps))))
		return;
	for (k = 0; k < want; k++) {
		struct dump_opts opts = { .pid = site->examples[k].tgid, .max = from->max };

		/* A block of a process gone: nothing to read. */
		if (!from->alive(from->ctx, site->examples[k].tgid, &opts.syms))
			continue;
		d = &site->dumps[site->ndumps];
		*d = (struct dump){ .addr = site->examples[k].addr,
				    .size = site->examples[k].size,
				    .time_ns = site->examples[k].time_ns };
		if (!dump__read(d, &opts))
			site->ndumps++;
	}
}

void snapshot__free(struct snapshot *s)
{
	size_t i, k;

	for (i = 0; i < s->nsites; i++) {
		for (k = 0; k < s->sites[i].ndumps; k++)
			dump__free(&s->sites[i].dumps[k]);
		free(s->sites[i].dumps);
	}
	free(s->blocks);
	s->blocks = NULL;
	s->nblocks = 0;
	free(s->sites);
	free(s->totals);
	free(s->threads);
	free(s->procs);
	free(s->origins);
	s->origins = NULL;
	s->norigins = 0;
	s->sites = NULL;
	s->totals = NULL;
	s->threads = NULL;
	s->nsites = s->ntotals = s->nthreads = 0;
}

const struct page_origin *snapshot__origins(const struct snapshot *s, uint64_t stack_id, size_t *n)
{
	size_t first = stack_id ? array__first_above(s->origins, s->norigins, sizeof(*s->origins),
						     0, stack_id - 1)
				: 0;
	size_t end = array__first_above(s->origins, s->norigins, sizeof(*s->origins), 0, stack_id);

	*n = end - first;
	return *n ? &s->origins[first] : NULL;
}
