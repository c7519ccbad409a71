// SPDX-License-Identifier: GPL-2.0
/* JSON lines: one object per record (its head and version: json.c), documented in doc/outputs.md. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "account/dump.h"
#include "base/clock.h"
#include "report/json.h"
#include "report/report.h"
#include "report/report_json_leak.h"
#include "report/report_json_rss.h"
#include "target/families.h"

/* {"address", "name"} of a thing of the target's (a pool, a type) that a site names, the name
 * null where it has none; null for none (address 0). */
static json_object *named(uint64_t address, const char *name)
{
	json_object *o;

	if (!address)
		return NULL;
	o = json_object_new_object();
	put(o, "address", hex(address));
	put(o, "name", name[0] ? json_object_new_string(name) : NULL);
	return o;
}

static json_object *inexact(const struct report *r)
{
	const struct heaptap_counters *c = &r->snap->counters;
	json_object *o = json_object_new_object();
	size_t i;

	put(o, "total", u64(r->analysis.inexact));
	for (i = 0; i < report__ninexact_causes; i++)
		put(o, report__inexact_causes[i].key,
		    u64(report__inexact_count(c, &report__inexact_causes[i])));
	return o;
}

/* How the loader's threads let C++ exceptions out of operator new (zeros where BPF does). */
static json_object *exception_fixups(const struct heaptap_fixup_stats *f)
{
	json_object *o = json_object_new_object();

	put(o, "asked", u64(f->asked));
	put(o, "acked", u64(f->acked));
	put(o, "timed_out", u64(f->timed_out));
	put(o, "ring_full", u64(f->ring_full));
	put(o, "wait_max_us", num(f->wait_max_ns / 1e3));
	put(o, "wait_mean_us", num(f->acked ? f->wait_sum_ns / 1e3 / f->acked : 0));
	put(o, "received", u64(f->received));
	put(o, "wake_max_us", num(f->wake_max_ns / 1e3));
	put(o, "not_trampoline", u64(f->not_trampoline));
	put(o, "late", u64(f->late));
	put(o, "write_failed", u64(f->write_failed));
	return o;
}

static json_object *stacks(const struct report *r)
{
	const struct heaptap_counters *c = &r->snap->counters;
	json_object *o = json_object_new_object();

	put(o, "mode", json_object_new_string(report__stack_mode(r)));
	put(o, "distinct", u64(c->new_stacks));
	put(o, "samples", u64(c->samples));
	put(o, "lost_samples", u64(c->lost_samples));
	put(o, "stopped_samples", u64(c->stopped_samples));
	put(o, "waits", u64(c->sample_waits));
	put(o, "wait_max_us", num(c->sample_wait_max_ns / 1e3));
	put(o, "truncated", u64(c->truncated_stacks + (r->unwind ? r->unwind->truncated : 0)));
	put(o, "remembered", u64(c->remembered_walks));
	if (r->unwind) {
		put(o, "unwound", u64(r->unwind->samples));
		put(o, "sample_bytes", u64(r->unwind->sample_bytes));
		put(o, "unwind_ns", u64(r->unwind->unwind_ns));
		put(o, "rules", u64(r->unwind->rules));
		put(o, "no_cfi", u64(r->unwind->no_cfi));
		put(o, "cfi_refused", u64(r->unwind->cfi_refused));
	}
	return o;
}

static json_object *functions(const struct report *r)
{
	json_object *a = json_object_new_array();
	size_t i;

	for (i = 0; i < report__nprobes(r) && i < HEAPTAP_MAX_FUNCS; i++) {
		json_object *e;

		if (r->probes->v[i].skipped || r->probes->v[i].kind == PROBE_UNWIND)
			continue;
		e = json_object_new_object();
		put(e, "function", json_object_new_string(r->probes->v[i].name));
		put(e, "calls", u64(r->snap->fn_stats[i].calls));
		put(e, "returned", u64(r->snap->fn_stats[i].returned));
		put(e, "failed", u64(r->snap->fn_stats[i].failed));
		put(e, "freed", u64(r->snap->fn_stats[i].freed));
		json_object_array_add(a, e);
	}
	return a;
}

static json_object *sizes(const struct report *r)
{
	const struct size_row *rows = r->analysis.sizes;
	json_object *a = json_object_new_array();
	size_t i;

	for (i = 0; i < r->analysis.nsizes; i++) {
		const struct heaptap_size_class *c = &rows[i].c;
		json_object *e = json_object_new_object();

		put(e, "min", u64(rows[i].min));
		put(e, "max", u64(rows[i].max));
		put(e, "allocs", u64(c->allocs));
		put(e, "frees", u64(c->frees));
		put(e, "live", u64(heaptap_class_live(c)));
		put(e, "live_bytes", u64(heaptap_class_live_bytes(c)));
		put(e, "total_bytes", u64(c->alloc_bytes));
		json_object_array_add(a, e);
	}
	return a;
}

static json_object *trend(const struct trend *t)
{
	json_object *o = json_object_new_object();

	put(o, "kind", json_object_new_string(history__trend_name(t->kind)));
	put(o, "points", u64(t->points));
	put(o, "span_s", num(t->span_s));
	put(o, "growth_bytes_per_hour", num(t->growth * 3600));
	put(o, "fit", num(t->fit));
	put(o, "steadiness", num(t->steadiness));
	put(o, "confidence", num(t->confidence));
	put(o, "swing", num(t->swing));
	return o;
}

static json_object *dumps(const struct report *r, const struct site *site)
{
	json_object *a = json_object_new_array();
	size_t i, k;

	for (i = 0; i < site->ndumps; i++) {
		const struct dump *d = &site->dumps[i];
		json_object *e = json_object_new_object(), *strs = json_object_new_array();
		char *buf = malloc(2 * d->n + 1);

		put(e, "address", hex(d->addr));
		put(e, "size", u64(d->size));
		put(e, "age_s", seconds(snapshot__age(r->snap, d->time_ns)));
		if (buf)
			dump__hex(d, buf);
		put(e, "bytes", json_object_new_string(buf ? buf : ""));
		free(buf);
		put(e, "error", d->n || !d->size ? NULL : json_object_new_string(strerror(d->error)));
		put(e, "class", d->class_name ? json_object_new_string(d->class_name) : NULL);
		for (k = 0; k < d->nstrings; k++)
			json_object_array_add(strs, json_object_new_string(d->strings[k]));
		put(e, "strings", strs);
		json_object_array_add(a, e);
	}
	return a;
}

/* The processes a site's blocks are in, most bytes first. */
static json_object *site_processes(const struct site *site)
{
	json_object *a = json_object_new_array();
	unsigned int k;

	for (k = 0; k < site->nprocs && k < SITE_PROCS; k++) {
		json_object *e = json_object_new_object();

		put(e, "pid", json_object_new_int(site->procs[k].tgid));
		put(e, "live", u64(site->procs[k].live));
		put(e, "live_bytes", u64(site->procs[k].live_bytes));
		json_object_array_add(a, e);
	}
	return a;
}

/* With --watch, the mapping sites of a site's new pages: the stack that made each mapping,
 * the function that called the mapping call, and the pages. */
static json_object *mapped_by(const struct report *r, const struct site *site)
{
	json_object *a = json_object_new_array();
	const struct page_origin *o;
	size_t i, n;

	o = snapshot__origins(r->snap, site->stack_id, &n);
	for (i = 0; i < n && i < SITE_ORIGINS; i++) {
		struct site mapping = { .stack_id = o[i].map_stack_id, .fn = UINT32_MAX };
		const struct sym_frame *f = report__mapper(r, o[i].map_stack_id);
		json_object *e = json_object_new_object();

		put(e, "function", f && f->function ? json_object_new_string(f->function) : NULL);
		put(e, "file", f && f->file ? json_object_new_string(f->file) : NULL);
		put(e, "line", f && f->file && f->line ? json_object_new_int(f->line) : NULL);
		put(e, "stack_id", hex(o[i].map_stack_id));
		put(e, "stack", o[i].map_stack_id ? json__frames(r, &mapping) : NULL);
		put(e, "pages", u64(o[i].pages));
		json_object_array_add(a, e);
	}
	return a;
}

static json_object *sites(const struct report *r)
{
	const struct snapshot *s = r->snap;
	const struct shown_site *shown = r->analysis.sites;
	json_object *a = json_object_new_array();
	const struct leak_counts *lc;
	unsigned int k;
	size_t i;

	for (i = 0; i < r->analysis.nsites; i++) {
		const struct site *site = shown[i].site;
		json_object *e = json_object_new_object(), *sz = json_object_new_array();

		put(e, "live_bytes", u64(site->live_bytes));
		put(e, "live", u64(site->live));
		put(e, "est_bytes", num(site->est_bytes));
		put(e, "est_blocks", num(site->est_blocks));
		put(e, "est_bytes_margin", num(report__margin(site)));
		put(e, "growth_bytes_per_hour", num(shown[i].growth * 3600));
		for (k = 0; k < site->nsizes; k++)
			json_object_array_add(sz, u64(site->sizes[k]));
		put(e, "sizes", sz);
		put(e, "more_sizes", json_object_new_boolean(site->more_sizes));
		put(e, "min_size", u64(site->min_size));
		put(e, "max_size", u64(site->max_size));
		put(e, "oldest_age_s", seconds(snapshot__age(s, site->oldest_ns)));
		put(e, "function",
		    report__fn_name(r, site->fn)
			    ? json_object_new_string(report__fn_name(r, site->fn))
			    : NULL);
		put(e, "stack_id", hex(site->stack_id));
		put(e, "stack", json__frames(r, site));
		put(e, "processes", site_processes(site));
		put(e, "processes_total", u64(site->nprocs));
		put(e, "pool", named(site->pool, site->pool_name));
		put(e, "object_type", named(site->object_type, site->object_type_name));
		put(e, "trend", shown[i].judged ? trend(&shown[i].trend) : NULL);
		put(e, "blocks", dumps(r, site));
		put(e, "mapped_by", r->figures->pages ? mapped_by(r, site) : NULL);
		lc = r->leak ? leak_check__site(r->leak, site->stack_id) : NULL;
		put(e, "leak_check", lc ? json__counts(lc->blocks, lc->bytes) : NULL);
		json_object_array_add(a, e);
	}
	return a;
}

/* A process's figures (or several processes' summed): its calls, and what it holds. */
static void put_figures(json_object *o, const struct heaptap_proc *c, uint64_t live,
			uint64_t live_bytes)
{
	put(o, "alloc_calls", u64(c->alloc_calls));
	put(o, "free_calls", u64(c->free_calls));
	put(o, "allocs", u64(c->allocs));
	put(o, "frees", u64(c->frees));
	put(o, "alloc_bytes", u64(c->alloc_bytes));
	put(o, "free_bytes", u64(c->free_bytes));
	put(o, "failed_calls", u64(c->failed));
	put(o, "unknown_frees", u64(c->unknown_frees));
	put(o, "inherited_frees", u64(c->inherited_frees));
	put(o, "live", u64(live));
	put(o, "live_bytes", u64(live_bytes));
}

/* The processes folded out of processes[]: their end figures, summed. */
static json_object *processes_folded(const struct report *r)
{
	static const struct procs_folded none;
	const struct procs_folded *f = r->procs ? &r->procs->folded : &none;
	json_object *o = json_object_new_object();

	put(o, "processes", u64(f->processes));
	put_figures(o, &f->end, f->live, f->live_bytes);
	return o;
}

/* Every process traced: who it is, what it did, what it holds (or held at its exit). */
static json_object *processes(const struct report *r)
{
	const struct report_process *v = r->analysis.procs;
	json_object *a = json_object_new_array();
	size_t i;

	for (i = 0; i < r->analysis.nprocs; i++) {
		const struct process *p = v[i].p;
		json_object *e = json_object_new_object();

		put(e, "pid", json_object_new_int(p->t.pid));
		put(e, "comm", json_object_new_string(p->t.comm));
		put(e, "exe", json_object_new_string(p->exe ? p->exe : "?"));
		put(e, "parent", p->parent ? json_object_new_int(p->parent) : NULL);
		put(e, "alive", json_object_new_boolean(!p->exited_ns));
		put(e, "exited_elapsed_s",
		    p->exited_ns ? seconds(p->exited_ns > r->attach_ns ? p->exited_ns - r->attach_ns
									: 0)
				 : NULL);
		put(e, "execs", u64(p->execs));
		put(e, "late_ms", p->late_ns ? num(p->late_ns / 1e6) : NULL);
		put_figures(e, &v[i].c, v[i].live, v[i].live_bytes);
		put(e, "dropped_at_exec", u64(p->dropped_at_exec));
		put(e, "dropped_at_exec_bytes", u64(p->dropped_at_exec_bytes));
		json_object_array_add(a, e);
	}
	return a;
}

static json_object *suspects(const struct report *r)
{
	const struct suspect *v = r->analysis.suspects;
	json_object *a = json_object_new_array();
	size_t i;

	for (i = 0; i < r->analysis.nsuspects && i < r->opts->top; i++) {
		const struct site *site = &r->snap->sites[v[i].site];
		json_object *e = json_object_new_object();

		put(e, "rank", u64(i + 1));
		put(e, "growth_bytes_per_hour", num(v[i].trend.growth * 3600));
		put(e, "projected_24h_bytes", num(v[i].trend.growth * 86400));
		put(e, "fit", num(v[i].trend.fit));
		put(e, "steadiness", num(v[i].trend.steadiness));
		put(e, "confidence", num(v[i].trend.confidence));
		put(e, "span_s", num(v[i].trend.span_s));
		put(e, "live_bytes", u64(site->live_bytes));
		put(e, "live", u64(site->live));
		put(e, "est_bytes", num(site->est_bytes));
		put(e, "function",
		    report__fn_name(r, site->fn)
			    ? json_object_new_string(report__fn_name(r, site->fn))
			    : NULL);
		put(e, "stack_id", hex(site->stack_id));
		put(e, "stack", json__frames(r, site));
		put(e, "blocks", dumps(r, site));
		json_object_array_add(a, e);
	}
	return a;
}

static json_object *changes(const struct report *r)
{
	const struct changes *c = &r->analysis.changes;
	json_object *o, *a;
	size_t i;

	if (!r->analysis.has_changes)
		return NULL;
	o = json_object_new_object();
	a = json_object_new_array();
	put(o, "since_s", num(c->since_s));
	put(o, "live_bytes", json_object_new_int64(c->live_bytes));
	put(o, "live", json_object_new_int64(c->live));
	put(o, "new_sites", u64(c->new_sites));
	put(o, "gone_sites", u64(c->gone_sites));
	for (i = 0; i < c->ntop; i++) {
		json_object *e = json_object_new_object();

		put(e, "stack_id", hex(c->top[i].stack_id));
		put(e, "live_bytes", json_object_new_int64(c->top[i].delta_bytes));
		put(e, "live", json_object_new_int64(c->top[i].delta_blocks));
		put(e, "new", json_object_new_boolean(c->top[i].is_new));
		put(e, "gone", json_object_new_boolean(c->top[i].gone));
		json_object_array_add(a, e);
	}
	put(o, "sites", a);
	return o;
}

static json_object *threads(const struct report *r)
{
	json_object *a = json_object_new_array();
	size_t i;

	for (i = 0; i < r->snap->nthreads; i++) {
		const struct thread_live *t = &r->snap->threads[i];
		json_object *e = json_object_new_object();

		put(e, "tid", u64(t->tid));
		put(e, "name", t->comm[0] ? json_object_new_string(t->comm) : NULL);
		put(e, "live_bytes", u64(t->live_bytes));
		put(e, "live", u64(t->live));
		put(e, "exited", json_object_new_boolean(t->exited));
		json_object_array_add(a, e);
	}
	return a;
}

static json_object *ages(const struct report *r)
{
	json_object *a = json_object_new_array();
	int i;

	for (i = 0; i < AGE_BUCKETS; i++) {
		json_object *e = json_object_new_object();

		put(e, "max_age_s", i < AGE_BUCKETS - 1 ? u64(snapshot__age_limits_s[i]) : NULL);
		put(e, "blocks", u64(r->snap->age_blocks[i]));
		put(e, "bytes", u64(r->snap->age_bytes[i]));
		json_object_array_add(a, e);
	}
	return a;
}

static json_object *peak_sites(const struct report *r)
{
	const struct site_total *const *v = r->analysis.peak_sites;
	json_object *a = json_object_new_array();
	size_t i;

	for (i = 0; i < r->analysis.npeak_sites; i++) {
		const struct site site = { .stack_id = v[i]->stack_id, .fn = v[i]->fn };
		json_object *e = json_object_new_object();

		put(e, "live_bytes", u64(v[i]->peak_live_bytes));
		put(e, "live", u64(v[i]->peak_live));
		put(e, "stack_id", hex(v[i]->stack_id));
		put(e, "stack", json__frames(r, &site));
		json_object_array_add(a, e);
	}
	return a;
}

static json_object *alert(const struct alarm_event *ev)
{
	json_object *o = json_object_new_object();

	put(o, "alert", json_object_new_string(alarms__name(ev->kind)));
	put(o, "option", json_object_new_string(alarms__option(ev->kind)));
	put(o, "value", num(ev->value));
	put(o, "threshold", u64(ev->threshold));
	put(o, "time", json__timestamp(ev->time_ns));
	return o;
}

static json_object *alerts(const struct report *r)
{
	json_object *a = json_object_new_array();
	size_t i;

	for (i = 0; i < r->nalerts; i++)
		json_object_array_add(a, alert(&r->alerts[i]));
	return a;
}

void report__alert_json(FILE *f, const struct report *r, const struct alarm_event *ev)
{
	json_object *o = json__record(r, "alert", ev->time_ns), *a = alert(ev);

	json_object_object_foreach(a, key, val)
	{
		put(o, key, json_object_get(val));
	}
	json_object_put(a);
	put(o, "live_bytes", u64(llround(r->analysis.live)));
	put(o, "rss_bytes", u64(r->rss));
	put(o, "growth_bytes_per_hour", num(r->growth * 3600));
	put(o, "elapsed_s", seconds(r->snap->time_ns - r->attach_ns));
	json__emit(f, o);
}

/* Calls and what they did: the counters since attach. */
static void put_calls(json_object *o, const struct report *r)
{
	const struct heaptap_counters *c = &r->snap->counters;
	const struct totals *t = &r->analysis.totals;

	put(o, "alloc_calls", u64(c->alloc_calls));
	put(o, "free_calls", u64(c->free_calls));
	put(o, "allocs", u64(t->allocs));
	put(o, "frees", u64(t->frees));
	put(o, "alloc_bytes", u64(t->alloc_bytes));
	put(o, "free_bytes", u64(t->free_bytes));
	put(o, "failed_calls", u64(c->failed));
	put(o, "unwound_calls", u64(c->unwound));
	put(o, "fixup_failures", u64(c->fixup_failures));
	put(o, "exception_fixups", exception_fixups(&r->snap->fixups));
	put(o, "lost_events", u64(c->lost_events));
	put(o, "own_frees", u64(c->own_frees));
	{
		json_object *pools = json_object_new_object();

		put(pools, "frees", u64(c->pool_frees));
		put(pools, "resets", u64(c->pool_resets));
		put(pools, "untracked", u64(c->untracked_pools));
		put(pools, "malloc_blocks", u64(c->pool_malloc_live));
		put(pools, "malloc_bytes", u64(c->pool_malloc_bytes));
		put(pools, "malloc_untracked", u64(c->pool_malloc_untracked));
		put(o, "pools", pools);
	}
}

/* How the session traces: stacks, the mode (--live's duty cycle), sampling, rates. */
static void put_mode(json_object *o, const struct report *r)
{
	const struct heaptap_counters *c = &r->snap->counters;
	const struct heaptap_counters *p = r->prev ? &r->prev->counters : NULL;

	put(o, "untracked_frees", u64(c->untracked_frees));
	put(o, "stacks", stacks(r));
	put(o, "mode", json_object_new_string(r->figures->mode));
	put(o, "pages_touched", u64(c->pages_touched));
	put(o, "sample_bytes", u64(r->opts->sample_bytes));
	if (r->duty) {
		json_object *d = json_object_new_object();

		put(d, "window_s", seconds(r->duty->window_ns));
		put(d, "budget", num(r->duty->budget));
		put(d, "windows", u64(r->duty->windows));
		put(d, "traced", num(r->duty->traced));
		put(d, "slowdown", num(r->duty->slowdown));
		put(d, "window_slowdown", num(r->duty->window_slowdown));
		put(d, "target_cpu_s", seconds(r->duty->cpu_now_ns));
		put(d, "tracing_now", json_object_new_boolean(r->traced_now));
		if (r->activities) {
			const struct live_activities *a = r->activities;
			json_object *own = json_object_new_object();
			uint64_t named = a->attach_ns + a->detach_ns + a->report_ns;

			put(own, "total_s", seconds(a->own_ns));
			put(own, "attach_s", seconds(a->attach_ns));
			put(own, "detach_s", seconds(a->detach_ns));
			put(own, "report_s", seconds(a->report_ns));
			put(own, "other_s", seconds(a->own_ns > named ? a->own_ns - named : 0));
			put(d, "own_cpu", own);
		}
		put(o, "live", d);
	}
	put(o, "alloc_rate",
	    num(report__rate(r, c->alloc_calls, p ? p->alloc_calls : 0)));
	put(o, "free_rate",
	    num(report__rate(r, c->free_calls, p ? p->free_calls : 0)));
}

/* What heaptap itself takes, and how far behind its readers were. */
static json_object *self_figures(const struct report *r)
{
	json_object *self = json_object_new_object();

	put(self, "rss_bytes", u64(r->self_rss));
	put(self, "map_bytes", u64(r->self_maps));
	put(self, "reports_dropped", u64(r->reports_dropped));
	put(self, "backlog_max_bytes", u64(r->backlog.backlog_max_bytes));
	put(self, "backlog_max_ms", num(r->backlog.backlog_max_ns / 1e6));
	put(self, "backlog_lost", u64(r->backlog.lost));
	put(self, "blocks_read_ms", r->snap->blocks_read ? num(r->snap->read_ns / 1e6) : NULL);
	return self;
}

json_object *report__json_object(const struct report *r)
{
	const struct heaptap_counters *c = &r->snap->counters;
	const struct report_analysis *an = &r->analysis;
	json_object *o = json__record(r, r->type, r->snap->time_ns);
	uint64_t peak_ns = an->peak_ns;

	put(o, "elapsed_s", seconds(r->snap->time_ns - r->attach_ns));
	put(o, "live_bytes", u64(llround(an->live)));
	put(o, "live_allocs", u64(llround(an->live_blocks)));
	put(o, "live_bytes_margin", u64(llround(an->live_margin)));
	put(o, "peak_bytes", u64(llround(an->peak)));
	put(o, "peak_time", peak_ns ? json__timestamp(peak_ns) : NULL);
	put(o, "peak_elapsed_s",
	    peak_ns ? seconds(peak_ns > r->attach_ns ? peak_ns - r->attach_ns : 0) : NULL);
	put_calls(o, r);
	put_mode(o, r);
	put(o, "rss_bytes", u64(r->rss));
	put(o, "rss_parts", report__json_rss(r));
	put(o, "rss_parts_note", r->rss_note ? json_object_new_string(r->rss_note) : NULL);
	put(o, "heaptap", self_figures(r));
	put(o, "inexact", inexact(r));
	put(o, "processes", processes(r));
	put(o, "processes_folded", processes_folded(r));
	put(o, "dropped_blocks", u64(r->snap->dropped_blocks));
	put(o, "dropped_bytes", u64(r->snap->dropped_bytes));
	put(o, "inherited_frees", u64(c->inherited_frees));
	put(o, "functions", functions(r));
	put(o, "sizes", sizes(r));
	put(o, "sites_total", u64(r->snap->nsites));
	put(o, "young_hidden", u64(r->snap->young));
	put(o, "sites", sites(r));
	put(o, "suspects", suspects(r));
	put(o, "growth_bytes_per_hour", num(r->growth * 3600));
	put(o, "changes", changes(r));
	put(o, "threads", threads(r));
	put(o, "ages", ages(r));
	put(o, "peak_sites", peak_sites(r));
	put(o, "leak_check", report__json_leak_check(r));
	put(o, "leak_check_note", r->leak_note ? json_object_new_string(r->leak_note) : NULL);
	put(o, "alerts", alerts(r));
	if (r->target_exited) {
		json_object *t = json_object_new_object();

		put(t, "exit_code", r->exit_code >= 0 ? json_object_new_int(r->exit_code) : NULL);
		put(t, "signal", r->exit_signal ? json_object_new_int(r->exit_signal) : NULL);
		put(o, "target_exit", t);
	}
	return o;
}

int report__json(FILE *f, const struct report *r)
{
	json__emit(f, report__json_object(r));
	return ferror(f) ? -EIO : 0;
}
