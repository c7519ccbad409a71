// SPDX-License-Identifier: GPL-2.0
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
	/* The final report comes after detach: its rates cover the whole session. */
	bool whole = !r->prev || !strcmp(r->type, "final");
	uint64_t since = whole ? r->attach_ns : r->prev->time_ns;
	double secs = (r->snap->time_ns - since) / 1e9;

	return secs > 0 ? (now - (whole ? 0 : before)) / secs : 0;
}

#define CAUSE(field, text)                                             \
	{                                                              \
#field, text, offsetof(struct heaptap_counters, field) \
	}

const struct inexact_cause report__inexact_causes[] = {
	CAUSE(unknown_frees, "frees of blocks allocated before attach"),
	CAUSE(dropped_allocs, "blocks not tracked: allocs map full, raise --max-allocs"),
	CAUSE(dropped_stacks, "stacks not stored: stacks map full, raise --max-stacks"),
	CAUSE(stack_errors, "stacks unreadable"),
	CAUSE(missed_returns, "returns missed"),
	CAUSE(lost_threads, "calls untraced: no thread state"),
	CAUSE(reused_addresses, "frees missed (address handed out again)"),
};

const size_t report__ninexact_causes =
	sizeof(report__inexact_causes) / sizeof(report__inexact_causes[0]);

uint64_t report__inexact_count(const struct heaptap_counters *c, const struct inexact_cause *cause)
{
	return *(const uint64_t *)((const char *)c + cause->offset);
}

uint64_t report__inexact(const struct heaptap_counters *c)
{
	uint64_t total = 0;
	size_t i;

	for (i = 0; i < report__ninexact_causes; i++)
		total += report__inexact_count(c, &report__inexact_causes[i]);
	return total;
}

const char *report__site_function(const struct report *r, const struct site *site)
{
	if (site->fn >= r->probes->n)
		return NULL;
	return syms__demangle(r->syms, r->probes->v[site->fn].name);
}

double report__live(const struct report *r, double *blocks)
{
	const struct heaptap_counters *c = &r->snap->counters;
	double bytes = c->live_bytes, n = c->allocs - c->frees;
	size_t i;

	if (r->opts->watch) {
		bytes = (double)c->pages_touched * sysconf(_SC_PAGESIZE);
		n = c->pages_touched;
	} else if (r->opts->sample_bytes) {
		/* What the sampled blocks stand for, as the sites show. */
		bytes = n = 0;
		for (i = 0; i < r->snap->nsites; i++) {
			bytes += r->snap->sites[i].est_bytes;
			n += r->snap->sites[i].est_blocks;
		}
	}
	if (blocks)
		*blocks = n;
	return bytes;
}

const char *report__stack_mode(const struct report *r)
{
	switch (r->stack_mode) {
	case HEAPTAP_STACK_DWARF: return "dwarf";
	case HEAPTAP_STACK_COPY: return "copy";
	default: return "fp";
	}
}

struct ranked {
	size_t index;
	double growth;
};

static int by_growth(const void *a, const void *b)
{
	const struct ranked *x = a, *y = b;
	double gx = isnan(x->growth) ? -INFINITY : x->growth;
	double gy = isnan(y->growth) ? -INFINITY : y->growth;

	if (gx != gy)
		return gx > gy ? -1 : 1;
	return x->index < y->index ? -1 : x->index > y->index;
}

size_t *report__site_order(const struct report *r, double **growth, size_t *n)
{
	const struct snapshot *s = r->snap;
	struct ranked *all = calloc(s->nsites + 1, sizeof(*all));
	size_t i, top = s->nsites < r->opts->top ? s->nsites : r->opts->top;
	size_t *order = calloc(top + 1, sizeof(*order));
	double *g = calloc(top + 1, sizeof(*g));

	*n = 0;
	*growth = NULL;
	if (!all || !order || !g) {
		free(all);
		free(order);
		free(g);
		return NULL;
	}
	for (i = 0; i < s->nsites; i++) {
		all[i].index = i;
		if (!r->history || !history__growth(r->history, s->sites[i].stack_id, &all[i].growth))
			all[i].growth = NAN;
	}
	if (r->duty || r->opts->watch)
		qsort(all, s->nsites, sizeof(*all), by_growth);
	for (i = 0; i < top; i++) {
		order[i] = all[i].index;
		g[i] = all[i].growth;
	}
	free(all);
	*n = top;
	*growth = g;
	return order;
}

double report__margin(const struct site *site)
{
	return 1.96 * sqrt(site->est_var);
}
