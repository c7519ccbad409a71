// SPDX-License-Identifier: GPL-2.0
#include <stdlib.h>

#include "report.h"

static uint64_t sort_value(const struct size_row *row, enum sort_key key)
{
	switch (key) {
	case SORT_LIVE: return row->c.alloc_bytes - row->c.free_bytes;
	case SORT_CALLS: return row->c.allocs;
	case SORT_BYTES: return row->c.alloc_bytes;
	default: return 0;
	}
}

static int cmp_rows(const void *a, const void *b, void *key)
{
	const struct size_row *x = a, *y = b;
	uint64_t vx = sort_value(x, *(enum sort_key *)key), vy = sort_value(y, *(enum sort_key *)key);

	if (vx != vy)
		return vx > vy ? -1 : 1;
	return x->min < y->min ? -1 : x->min > y->min;
}

size_t report__size_rows(const struct report *r, struct size_row *rows)
{
	size_t n = 0;
	__u32 i;

	for (i = 0; i < HEAPTAP_SIZE_CLASSES; i++) {
		const struct heaptap_size_class *c = &r->snap->classes[i];
		__u64 next = heaptap_size_class_min(i + 1);

		if (!c->allocs && !c->frees)
			continue;
		rows[n].min = heaptap_size_class_min(i);
		rows[n].max = next ? next - 1 : UINT64_MAX;
		rows[n].c = *c;
		n++;
	}
	qsort_r(rows, n, sizeof(*rows), cmp_rows, (void *)&r->opts->sort);
	return n;
}

double report__rate(const struct report *r, uint64_t now, uint64_t before)
{
	uint64_t since = r->prev ? r->prev->time_ns : r->attach_ns;
	double secs = (r->snap->time_ns - since) / 1e9;

	return secs > 0 ? (now - before) / secs : 0;
}

uint64_t report__inexact(const struct heaptap_counters *c)
{
	return c->unknown_frees + c->dropped_allocs + c->dropped_stacks + c->stack_errors +
	       c->missed_returns + c->lost_threads + c->reused_addresses;
}
