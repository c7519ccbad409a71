// SPDX-License-Identifier: GPL-2.0
/* Each piece of the analysis is computed here once per report, and nowhere else. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/array.h"
#include "base/idmap.h"
#include "probe/sampling.h"
#include "report/analysis.h"
#include "report/analysis_rss.h"

static uint64_t sort_value(const struct size_row *row, enum sort_key key)
{
	switch (key) {
	case SORT_LIVE: return heaptap_class_live_bytes(&row->c);
	case SORT_CALLS: return row->c.allocs;
	case SORT_BYTES: return row->c.alloc_bytes;
	default: return 0;
	}
}

static int cmp_rows(const void *a, const void *b, void *key)
{
	const struct size_row *x = a, *y = b;
	enum sort_key k = *(enum sort_key *)key;
	uint64_t vx = sort_value(x, k), vy = sort_value(y, k);

	if (vx != vy)
		return vx > vy ? -1 : 1;
	return x->min < y->min ? -1 : x->min > y->min;
}

/* One count and its bytes scaled by what a block of their mean size stands for. */
static void estimate(__u64 *count, __u64 *bytes, uint64_t sample_bytes)
{
	double p;

	if (!*count)
		return;
	p = sampling__p((double)*bytes / *count, sample_bytes);
	*count = llround(*count / p);
	*bytes = llround(*bytes / p);
}

/* With sampling, a size class's calls and bytes as estimates: in a class, block sizes are
 * within 12.5% of each other, so the class's mean size stands for each. */
static void estimate_row(struct heaptap_size_class *c, uint64_t sample_bytes)
{
	estimate(&c->allocs, &c->alloc_bytes, sample_bytes);
	estimate(&c->frees, &c->free_bytes, sample_bytes);
	/* Never more freed than allocated, whatever the rounding. */
	if (c->frees > c->allocs)
		c->frees = c->allocs;
	if (c->free_bytes > c->alloc_bytes)
		c->free_bytes = c->alloc_bytes;
}

/* The size classes used so far, in --sort order. */
static void size_rows(const struct report *r, struct report_analysis *a)
{
	size_t n = 0;
	__u32 i;

	for (i = 0; i < HEAPTAP_SIZE_CLASSES; i++) {
		const struct heaptap_size_class *c = &r->snap->classes[i];
		__u64 next = heaptap_size_class_min(i + 1);

		if (!c->allocs && !c->frees)
			continue;
		a->sizes[n].min = heaptap_size_class_min(i);
		a->sizes[n].max = next ? next - 1 : UINT64_MAX;
		a->sizes[n].c = *c;
		if (r->figures->sampled)
			estimate_row(&a->sizes[n].c, r->opts->sample_bytes);
		n++;
	}
	qsort_r(a->sizes, n, sizeof(a->sizes[0]), cmp_rows, (void *)&r->opts->sort);
	a->nsizes = n;
}

/* Live bytes and blocks of a snapshot of this session: what the sampled blocks stand for
 * when sampled (every live block, young ones included); with pages, the new pages. */
static double snapshot_live(const struct report *r, const struct snapshot *snap, double *blocks)
{
	const struct heaptap_counters *c = &snap->counters;
	double bytes = c->live_bytes, n = c->allocs - c->frees - snap->dropped_blocks;

	if (r->figures->pages) {
		bytes = (double)c->pages_touched * sysconf(_SC_PAGESIZE);
		n = c->pages_touched;
	} else if (r->figures->sampled) {
		bytes = snap->est_bytes;
		n = snap->est_blocks;
	}
	*blocks = n;
	return bytes;
}

/* Live bytes now, their margin, the peak and when it was. */
static void live_and_peak(const struct report *r, struct report_analysis *a)
{
	const struct heaptap_counters *c = &r->snap->counters;

	a->live = snapshot_live(r, r->snap, &a->live_blocks);
	if (!r->figures->sampled || r->figures->pages) {
		a->peak = c->peak_bytes;
		a->peak_ns = c->peak_ns;
		return;
	}
	a->live_margin = 1.96 * sqrt(r->snap->est_var);
	/* The BPF side's running estimate weighs blocks by size class; the report's live
	 * figure weighs each by its own size: the peak is never below it, and with live as
	 * high, the peak is now. */
	a->peak = (double)c->est_peak_bytes > a->live ? (double)c->est_peak_bytes : a->live;
	a->peak_ns = (double)c->est_peak_bytes < a->live ? r->snap->time_ns : c->est_peak_ns;
}

static void totals(const struct report *r, struct totals *t)
{
	const struct heaptap_counters *c = &r->snap->counters;
	__u32 i;

	*t = (struct totals){ c->allocs, c->frees, c->alloc_bytes, c->free_bytes };
	if (!r->figures->sampled || r->figures->pages)
		return;
	*t = (struct totals){};
	for (i = 0; i < HEAPTAP_SIZE_CLASSES; i++) {
		struct heaptap_size_class sc = r->snap->classes[i];

		estimate_row(&sc, r->opts->sample_bytes);
		t->allocs += sc.allocs;
		t->frees += sc.frees;
		t->alloc_bytes += sc.alloc_bytes;
		t->free_bytes += sc.free_bytes;
	}
}

static uint64_t inexact(const struct heaptap_counters *c)
{
	uint64_t total = 0;
	size_t i;

	for (i = 0; i < report__ninexact_causes; i++)
		total += report__inexact_count(c, &report__inexact_causes[i]);
	return total;
}

static int by_growth(const void *a, const void *b)
{
	const struct shown_site *x = a, *y = b;
	double gx = isnan(x->growth) ? -INFINITY : x->growth;
	double gy = isnan(y->growth) ? -INFINITY : y->growth;

	if (gx != gy)
		return gx > gy ? -1 : 1;
	return x->index < y->index ? -1 : x->index > y->index;
}

static int by_trend_growth(const void *a, const void *b)
{
	const struct suspect *x = a, *y = b;

	if (x->trend.growth != y->trend.growth)
		return x->trend.growth > y->trend.growth ? -1 : 1;
	return x->site < y->site ? -1 : x->site > y->site;
}

/* The sites whose trend is a leak, fastest first (none with pages: a page is not freed). */
static int suspects(const struct report *r, struct report_analysis *a,
		    const struct shown_site *all, size_t n)
{
	size_t i;

	if (r->figures->pages || !n)
		return 0;
	a->suspects = calloc(n, sizeof(*a->suspects));
	if (!a->suspects)
		return -ENOMEM;
	for (i = 0; i < n; i++)
		if (all[i].judged && all[i].trend.kind == TREND_LEAK)
			a->suspects[a->nsuspects++] = (struct suspect){ i, all[i].trend };
	array__sort(a->suspects, a->nsuspects, sizeof(*a->suspects), by_trend_growth);
	return 0;
}

/* Every site judged by its history once: the suspects, and the sites shown (at most --top),
 * by live bytes (the snapshot's order) or by growth. */
static int rank_sites(const struct report *r, struct report_analysis *a)
{
	const struct snapshot *s = r->snap;
	struct shown_site *all = calloc(s->nsites + 1, sizeof(*all));
	size_t i;
	int err;

	if (!all)
		return -ENOMEM;
	for (i = 0; i < s->nsites; i++) {
		all[i].site = &s->sites[i];
		all[i].index = i;
		all[i].judged = r->history &&
				history__trend(r->history, s->sites[i].stack_id, &all[i].trend);
		all[i].growth = all[i].judged ? all[i].trend.growth : NAN;
	}
	err = suspects(r, a, all, s->nsites);
	if (r->figures->by_growth)
		array__sort(all, s->nsites, sizeof(*all), by_growth);
	a->sites = all;
	a->nsites = s->nsites < r->opts->top ? s->nsites : r->opts->top;
	return err;
}

static int by_change(const void *a, const void *b)
{
	const struct site_change *x = a, *y = b;
	uint64_t dx = llabs(x->delta_bytes), dy = llabs(y->delta_bytes);

	if (dx != dy)
		return dx > dy ? -1 : 1;
	return x->stack_id < y->stack_id ? -1 : x->stack_id > y->stack_id;
}

/* The change of one site, kept if among the largest so far. */
static void consider(struct changes *c, const struct site_change *sc)
{
	size_t i = c->ntop;

	if (!sc->delta_bytes && !sc->delta_blocks)
		return;
	if (i == CHANGES_TOP && by_change(sc, &c->top[i - 1]) >= 0)
		return;
	if (i == CHANGES_TOP)
		i--;
	else
		c->ntop++;
	for (; i > 0 && by_change(sc, &c->top[i - 1]) < 0; i--)
		c->top[i] = c->top[i - 1];
	c->top[i] = *sc;
}

/* What changed since the previous report; false for the first one, with pages, or when out
 * of memory. */
static bool changes(const struct report *r, struct changes *c)
{
	const struct snapshot *s = r->snap, *p = r->prev;
	struct idmap before = {}, now = {};
	double now_blocks, then_blocks;
	bool ok = true;
	size_t i;

	memset(c, 0, sizeof(*c));
	if (!p || r->figures->pages)
		return false;
	c->since_s = (s->time_ns - p->time_ns) / 1e9;
	c->live_bytes =
		llround(snapshot_live(r, s, &now_blocks) - snapshot_live(r, p, &then_blocks));
	c->live = llround(now_blocks - then_blocks);
	for (i = 0; ok && i < p->nsites; i++)
		ok = !idmap__put(&before, p->sites[i].stack_id, (void *)&p->sites[i]);
	for (i = 0; ok && i < s->nsites; i++) {
		const struct site *site = &s->sites[i];
		const struct site *then = idmap__get(&before, site->stack_id);
		struct site_change sc = { .stack_id = site->stack_id, .site = site };

		sc.is_new = !then;
		c->new_sites += !then;
		sc.delta_bytes = (int64_t)site->live_bytes - (int64_t)(then ? then->live_bytes : 0);
		sc.delta_blocks = (int64_t)site->live - (int64_t)(then ? then->live : 0);
		consider(c, &sc);
		ok = !idmap__put(&now, site->stack_id, (void *)site);
	}
	for (i = 0; ok && i < p->nsites; i++) {
		const struct site *then = &p->sites[i];
		struct site_change sc = { .stack_id = then->stack_id, .gone = true };

		if (idmap__get(&now, then->stack_id))
			continue;
		c->gone_sites++;
		sc.delta_bytes = -(int64_t)then->live_bytes;
		sc.delta_blocks = -(int64_t)then->live;
		consider(c, &sc);
	}
	idmap__free(&before);
	idmap__free(&now);
	return ok;
}

static int by_peak_bytes(const void *a, const void *b)
{
	const struct site_total *x = *(const struct site_total *const *)a;
	const struct site_total *y = *(const struct site_total *const *)b;

	if (x->peak_live_bytes != y->peak_live_bytes)
		return x->peak_live_bytes > y->peak_live_bytes ? -1 : 1;
	return x->stack_id < y->stack_id ? -1 : x->stack_id > y->stack_id;
}

/* The sites that held the most at the peak of live bytes, most first, at most --top. */
static int peak_sites(const struct report *r, struct report_analysis *a)
{
	const struct snapshot *s = r->snap;
	size_t i, n = 0;

	if (!s->ntotals || !s->counters.peak_bytes)
		return 0;
	a->peak_sites = calloc(s->ntotals, sizeof(*a->peak_sites));
	if (!a->peak_sites)
		return -ENOMEM;
	for (i = 0; i < s->ntotals; i++)
		if (s->totals[i].peak_live_bytes)
			a->peak_sites[n++] = &s->totals[i];
	array__sort(a->peak_sites, n, sizeof(*a->peak_sites), by_peak_bytes);
	a->npeak_sites = n < r->opts->top ? n : r->opts->top;
	return 0;
}

static int by_process_bytes(const void *a, const void *b)
{
	const struct report_process *x = *(struct report_process *const *)a;
	const struct report_process *y = *(struct report_process *const *)b;

	if (x->live_bytes != y->live_bytes)
		return x->live_bytes > y->live_bytes ? -1 : 1;
	return x->p->t.pid - y->p->t.pid;
}

/* Every process traced, in the order they were taken in, and those alive by live bytes. */
static int processes(const struct report *r, struct report_analysis *a)
{
	const struct snapshot *snap = r->snap;
	size_t i, k, n = r->procs ? r->procs->n : 0;

	if (!n)
		return 0;
	a->procs = calloc(n, sizeof(*a->procs));
	a->alive = calloc(n, sizeof(*a->alive));
	if (!a->procs || !a->alive)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		const struct process *p = r->procs->v[i];
		struct report_process *rp = &a->procs[i];

		rp->p = p;
		rp->c = p->end;
		rp->live = p->end_live;
		rp->live_bytes = p->end_live_bytes;
		for (k = 0; k < snap->nprocs; k++) {
			if (snap->procs[k].tgid != (uint32_t)p->t.pid)
				continue;
			if (!p->exited_ns)
				rp->c = snap->procs[k].c;
			/* The first process's blocks at its exit are kept as live sites. */
			if (!p->exited_ns || i == 0) {
				rp->live = snap->procs[k].live;
				rp->live_bytes = snap->procs[k].live_bytes;
			}
		}
		if (!p->exited_ns)
			a->alive[a->nalive++] = rp;
	}
	a->nprocs = n;
	array__sort(a->alive, a->nalive, sizeof(*a->alive), by_process_bytes);
	return 0;
}

/* The allocator function of each leak record's stack: its site's. */
static int leak_fns(const struct report *r, struct report_analysis *a)
{
	const struct snapshot *s = r->snap;
	struct idmap sites = {};
	size_t i;
	int err = 0;

	if (!r->leak || !r->leak->nrecords)
		return 0;
	a->leak_fns = calloc(r->leak->nrecords, sizeof(*a->leak_fns));
	if (!a->leak_fns)
		return -ENOMEM;
	/* The first site of a stack, as the snapshot lists them. */
	for (i = s->nsites; !err && i-- > 0;)
		err = idmap__put(&sites, s->sites[i].stack_id, (void *)&s->sites[i]);
	for (i = 0; i < r->leak->nrecords; i++) {
		uint64_t stack_id = r->leak->records[i].stack_id;
		const struct site *site = err ? NULL : idmap__get(&sites, stack_id);

		a->leak_fns[i] = site ? site->fn : UINT32_MAX;
	}
	idmap__free(&sites);
	return err;
}

int analysis__make(struct report *r)
{
	struct report_analysis *a = &r->analysis;
	int err;

	memset(a, 0, sizeof(*a));
	live_and_peak(r, a);
	totals(r, &a->totals);
	a->inexact = inexact(&r->snap->counters);
	size_rows(r, a);
	err = rank_sites(r, a);
	a->has_changes = changes(r, &a->changes);
	err = peak_sites(r, a) ?: err;
	err = processes(r, a) ?: err;
	err = leak_fns(r, a) ?: err;
	analysis_rss__make(r, r->figures->pages ? 0 : a->live, &a->rss);
	return err;
}

void analysis__free(struct report_analysis *a)
{
	free(a->sites);
	free(a->suspects);
	free(a->peak_sites);
	free(a->procs);
	free(a->alive);
	free(a->leak_fns);
	memset(a, 0, sizeof(*a));
}
