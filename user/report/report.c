// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/idmap.h"
#include "probe/sampling.h"
#include "report/report.h"

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
	uint64_t vx = sort_value(x, *(enum sort_key *)key), vy = sort_value(y, *(enum sort_key *)key);

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
		if (r->opts->sample_bytes)
			estimate_row(&rows[n].c, r->opts->sample_bytes);
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
	CAUSE(dropped_sites, "blocks without site totals: site map full, raise --max-stacks"),
	CAUSE(late_procs, "processes traced from after their start (fork, exec): first calls unseen"),
	CAUSE(untraced_procs, "processes forked or matched that ended before their probes were "
			      "in: none of their calls seen"),
	CAUSE(lost_procs, "forks or execs missed: no room for the process or its notice"),
	CAUSE(chain_cut, "chains freed (--free-chain) whose rest was not followed: blocks left live"),
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
	return syms__demangle(r->syms, report__fn_name(r, site->fn));
}

uint32_t report__stack_fn(const struct report *r, uint64_t stack_id)
{
	for (size_t i = 0; i < r->snap->nsites; i++)
		if (r->snap->sites[i].stack_id == stack_id)
			return r->snap->sites[i].fn;
	return UINT32_MAX;
}

/* Live bytes and blocks of a snapshot of this session. */
static double snapshot_live(const struct report *r, const struct snapshot *snap, double *blocks)
{
	const struct heaptap_counters *c = &snap->counters;
	double bytes = c->live_bytes, n = c->allocs - c->frees - snap->dropped_blocks;

	if (r->opts->watch) {
		bytes = (double)c->pages_touched * sysconf(_SC_PAGESIZE);
		n = c->pages_touched;
	} else if (r->opts->sample_bytes) {
		/* What the sampled blocks stand for, young ones included. */
		bytes = snap->est_bytes;
		n = snap->est_blocks;
	}
	if (blocks)
		*blocks = n;
	return bytes;
}

double report__live(const struct report *r, double *blocks)
{
	return snapshot_live(r, r->snap, blocks);
}

double report__live_margin(const struct report *r)
{
	return r->opts->sample_bytes && !r->opts->watch ? 1.96 * sqrt(r->snap->est_var) : 0;
}

double report__peak(const struct report *r)
{
	const struct heaptap_counters *c = &r->snap->counters;
	double live = report__live(r, NULL);

	if (!r->opts->sample_bytes || r->opts->watch)
		return c->peak_bytes;
	/* The BPF side's running estimate weighs blocks by size class; the report's live
	 * figure weighs each by its own size: the peak is never below it. */
	return (double)c->est_peak_bytes > live ? (double)c->est_peak_bytes : live;
}

uint64_t report__peak_ns(const struct report *r)
{
	const struct heaptap_counters *c = &r->snap->counters;

	if (!r->opts->sample_bytes || r->opts->watch)
		return c->peak_ns;
	/* Live now at least as high as the running estimate's peak: the peak is now. */
	if ((double)c->est_peak_bytes < report__live(r, NULL))
		return r->snap->time_ns;
	return c->est_peak_ns;
}

void report__totals(const struct report *r, struct totals *t)
{
	const struct heaptap_counters *c = &r->snap->counters;
	__u32 i;

	*t = (struct totals){ c->allocs, c->frees, c->alloc_bytes, c->free_bytes };
	if (!r->opts->sample_bytes || r->opts->watch)
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
		struct trend t;

		all[i].index = i;
		all[i].growth = r->history && history__trend(r->history, s->sites[i].stack_id, &t)
					? t.growth
					: NAN;
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

static int by_trend_growth(const void *a, const void *b)
{
	const struct suspect *x = a, *y = b;

	if (x->trend.growth != y->trend.growth)
		return x->trend.growth > y->trend.growth ? -1 : 1;
	return x->site < y->site ? -1 : x->site > y->site;
}

size_t report__suspects(const struct report *r, struct suspect **out)
{
	const struct snapshot *s = r->snap;
	struct suspect *v;
	size_t i, n = 0;

	*out = NULL;
	if (!r->history || r->opts->watch || !s->nsites)
		return 0;
	v = calloc(s->nsites, sizeof(*v));
	if (!v)
		return 0;
	for (i = 0; i < s->nsites; i++) {
		if (!history__trend(r->history, s->sites[i].stack_id, &v[n].trend) ||
		    v[n].trend.kind != TREND_LEAK)
			continue;
		v[n++].site = i;
	}
	if (!n) {
		free(v);
		return 0;
	}
	qsort(v, n, sizeof(*v), by_trend_growth);
	*out = v;
	return n;
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

bool report__changes(const struct report *r, struct changes *c)
{
	const struct snapshot *s = r->snap, *p = r->prev;
	struct idmap before = {}, now = {};
	bool ok = true;
	size_t i;

	memset(c, 0, sizeof(*c));
	if (!p || r->opts->watch)
		return false;
	c->since_s = (s->time_ns - p->time_ns) / 1e9;
	{
		double now_blocks, then_blocks;

		c->live_bytes =
			llround(snapshot_live(r, s, &now_blocks) - snapshot_live(r, p, &then_blocks));
		c->live = llround(now_blocks - then_blocks);
	}
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

size_t report__peak_sites(const struct report *r, const struct site_total ***out)
{
	const struct snapshot *s = r->snap;
	const struct site_total **v;
	size_t i, n = 0;

	*out = NULL;
	if (!s->ntotals || !s->counters.peak_bytes)
		return 0;
	v = calloc(s->ntotals, sizeof(*v));
	if (!v)
		return 0;
	for (i = 0; i < s->ntotals; i++)
		if (s->totals[i].peak_live_bytes)
			v[n++] = &s->totals[i];
	qsort(v, n, sizeof(*v), by_peak_bytes);
	if (n > r->opts->top)
		n = r->opts->top;
	*out = v;
	return n;
}

uint64_t report__site_bytes(const struct report *r, const struct site *site)
{
	return r->opts->sample_bytes ? (uint64_t)llround(site->est_bytes) : site->live_bytes;
}

/* A frame handed to frame() by its function's name, else as module+offset, else its address. */
static int frame_name(const struct sym_info *si, const struct sym_frame *fr, uint64_t addr,
		      int (*frame)(const char *name, void *ctx), void *ctx)
{
	const char *base = si->module ? strrchr(si->module, '/') : NULL;
	char *name;
	int err;

	if (fr->function)
		return frame(fr->function, ctx);
	if (si->module) {
		if (asprintf(&name, "%s+0x%" PRIx64, base ? base + 1 : si->module,
			     si->module_offset) < 0)
			return -ENOMEM;
	} else if (asprintf(&name, "0x%" PRIx64, addr) < 0) {
		return -ENOMEM;
	}
	err = frame(name, ctx);
	free(name);
	return err;
}

int report__stack_names(const struct report *r, const struct site *site,
			int (*frame)(const char *name, void *ctx), void *ctx)
{
	const struct stack *st = stacks__get(r->stacks, site->stack_id);
	const char *alias = report__site_function(r, site);
	size_t k, j;
	int err = 0;

	if (!st)
		return frame("[stack not stored]", ctx);
	for (k = st->n; !err && k-- > 0;) {
		const struct sym_info *si = syms__find(report__syms(r, st), st->ips[k], k > 0);

		/* The allocator function goes by the name it was called by, not an alias. */
		for (j = si->nframes; !err && j-- > 0;)
			err = !k && j + 1 == si->nframes && alias
				      ? frame(alias, ctx)
				      : frame_name(si, &si->frames[j], st->ips[k], frame, ctx);
	}
	return err;
}

size_t report__processes(const struct report *r, struct report_process **out)
{
	const struct snapshot *snap = r->snap;
	size_t i, k, n = r->procs ? r->procs->n : 0;

	*out = n ? calloc(n, sizeof(**out)) : NULL;
	if (!*out)
		return 0;
	for (i = 0; i < n; i++) {
		const struct process *p = r->procs->v[i];
		struct report_process *rp = &(*out)[i];

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
	}
	return n;
}

struct syms *report__syms(const struct report *r, const struct stack *st)
{
	struct image *im = r->procs && st ? procs__image(r->procs, st->image) : NULL;

	return im && im->syms ? im->syms : r->syms;
}

int report__site_shares(const struct report *r, const struct site *site,
			int (*share)(const char *root, uint64_t bytes, uint64_t blocks, void *ctx),
			void *ctx)
{
	bool split = r->procs && r->procs->n > 1 && !r->opts->sample_bytes && !r->opts->watch;
	uint64_t bytes = report__site_bytes(r, site), blocks = site->live;
	char root[96];
	unsigned int k;
	int err = 0;

	if (r->opts->sample_bytes)
		blocks = llround(site->est_blocks);
	for (k = 0; split && !err && k < site->nprocs && k < SITE_PROCS; k++) {
		const struct process *p = procs__find(r->procs, site->procs[k].tgid);

		snprintf(root, sizeof(root), "%s [%u]", p ? p->t.comm : "?", site->procs[k].tgid);
		if (site->procs[k].live_bytes)
			err = share(root, site->procs[k].live_bytes, site->procs[k].live, ctx);
		bytes -= site->procs[k].live_bytes;
		blocks -= site->procs[k].live;
	}
	return err || !bytes ? err : share(NULL, bytes, blocks, ctx);
}

bool report__family_untraced(const struct report *r, size_t i)
{
	return (r->allocator->families >> i & 1) && !(r->opts->families >> i & 1);
}
