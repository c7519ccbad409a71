// SPDX-License-Identifier: GPL-2.0
/* JSON lines: one object per record, schema version 1, documented in README.md. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <time.h>

#include <json-c/json.h>

#include "clock.h"
#include "report.h"

#define SCHEMA_VERSION 1

static void put(json_object *o, const char *key, json_object *v)
{
	json_object_object_add(o, key, v);
}

static json_object *u64(uint64_t v)
{
	return json_object_new_uint64(v);
}

static json_object *hex(uint64_t v)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "0x%" PRIx64, v);
	return json_object_new_string(buf);
}

/* ISO 8601, UTC, milliseconds. */
static json_object *timestamp(uint64_t mono_ns)
{
	uint64_t wall = clock__wall_ns(mono_ns);
	time_t t = wall / 1000000000ULL;
	char buf[40], out[48];
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out, sizeof(out), "%s.%03uZ", buf, (unsigned int)(wall / 1000000 % 1000));
	return json_object_new_string(out);
}

static json_object *seconds(uint64_t ns)
{
	return json_object_new_double(ns / 1e9);
}

static json_object *record(const struct report *r, const char *type, uint64_t mono_ns)
{
	json_object *o = json_object_new_object(), *alloc = json_object_new_object();

	put(o, "type", json_object_new_string(type));
	put(o, "version", json_object_new_int(SCHEMA_VERSION));
	put(o, "time", timestamp(mono_ns));
	put(o, "pid", json_object_new_int(r->pid));
	put(o, "comm", json_object_new_string(r->comm));
	put(alloc, "path", json_object_new_string(r->allocator->file.path));
	put(alloc, "reason", json_object_new_string(r->allocator->reason));
	put(o, "allocator", alloc);
	return o;
}

static void emit(FILE *f, json_object *o)
{
	fprintf(f, "%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	fflush(f);
	json_object_put(o);
}

void report__attached_json(FILE *f, const struct report *r)
{
	json_object *o = record(r, "attached", r->attach_ns);
	json_object *probes = json_object_new_array(), *skipped = json_object_new_array();
	json_object *settings = json_object_new_object();
	size_t i;

	for (i = 0; i < r->probes->n; i++) {
		const struct probe *p = &r->probes->v[i];
		json_object *e = json_object_new_object();

		put(e, "function", json_object_new_string(p->name));
		if (p->skipped) {
			put(e, "reason", json_object_new_string(p->skipped));
			json_object_array_add(skipped, e);
			continue;
		}
		put(e, "kind", json_object_new_string(probes__kind_name(p->kind)));
		put(e, "path", json_object_new_string(p->file->path));
		put(e, "offset", u64(p->offset));
		put(e, "entry_offset", u64(p->start));
		put(e, "return", json_object_new_boolean(p->ret != NULL));
		json_object_array_add(probes, e);
	}
	put(o, "probes", probes);
	put(o, "skipped", skipped);
	put(settings, "interval_s", seconds(r->opts->interval_ms * 1000000));
	put(settings, "max_allocs", u64(r->opts->max_allocs));
	put(settings, "max_stacks", u64(r->opts->max_stacks));
	put(settings, "stack_depth", u64(r->opts->stack_depth));
	put(settings, "stack_mode", json_object_new_string(report__stack_mode(r)));
	put(settings, "stack_bytes", u64(r->opts->stack_bytes));
	put(settings, "mode",
	    json_object_new_string(r->opts->live    ? "live"
				   : r->opts->watch ? "watch"
						    : "full"));
	put(o, "settings", settings);
	emit(f, o);
}

static json_object *inexact(const struct heaptap_counters *c)
{
	json_object *o = json_object_new_object();

	size_t i;

	put(o, "total", u64(report__inexact(c)));
	for (i = 0; i < report__ninexact_causes; i++)
		put(o, report__inexact_causes[i].key,
		    u64(report__inexact_count(c, &report__inexact_causes[i])));
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
	put(o, "truncated", u64(c->truncated_stacks + (r->unwind ? r->unwind->truncated : 0)));
	if (r->unwind) {
		put(o, "unwound", u64(r->unwind->samples));
		put(o, "sample_bytes", u64(r->unwind->sample_bytes));
		put(o, "unwind_ns", u64(r->unwind->unwind_ns));
		put(o, "rules", u64(r->unwind->rules));
		put(o, "no_cfi", u64(r->unwind->no_cfi));
	}
	return o;
}

static json_object *functions(const struct report *r)
{
	json_object *a = json_object_new_array();
	size_t i;

	for (i = 0; i < r->probes->n && i < HEAPTAP_MAX_FUNCS; i++) {
		json_object *e;

		if (r->probes->v[i].skipped || r->probes->v[i].kind == PROBE_UNWIND)
			continue;
		e = json_object_new_object();
		put(e, "function", json_object_new_string(r->probes->v[i].name));
		put(e, "calls", u64(r->snap->fn_calls[i]));
		json_object_array_add(a, e);
	}
	return a;
}

static json_object *sizes(const struct report *r)
{
	struct size_row *rows = calloc(HEAPTAP_SIZE_CLASSES, sizeof(*rows));
	json_object *a = json_object_new_array();
	size_t i, n;

	if (!rows)
		return a;
	n = report__size_rows(r, rows);
	for (i = 0; i < n; i++) {
		const struct heaptap_size_class *c = &rows[i].c;
		json_object *e = json_object_new_object();

		put(e, "min", u64(rows[i].min));
		put(e, "max", u64(rows[i].max));
		put(e, "allocs", u64(c->allocs));
		put(e, "frees", u64(c->frees));
		put(e, "live", u64(c->allocs - c->frees));
		put(e, "live_bytes", u64(c->alloc_bytes - c->free_bytes));
		put(e, "total_bytes", u64(c->alloc_bytes));
		json_object_array_add(a, e);
	}
	free(rows);
	return a;
}

static json_object *frames(const struct report *r, const struct site *site)
{
	const struct stack *st = stacks__get(r->stacks, site->stack_id);
	json_object *a;
	size_t i, k;

	if (!st)
		return json_object_new_null();
	a = json_object_new_array();
	for (i = 0; i < st->n; i++) {
		const struct sym_info *si = syms__find(r->syms, st->ips[i], i > 0);

		for (k = 0; k < si->nframes; k++) {
			const struct sym_frame *fr = &si->frames[k];
			const char *name = i || k ? NULL : report__site_function(r, site);
			json_object *e = json_object_new_object();

			if (!name)
				name = fr->function;
			put(e, "address", hex(st->ips[i]));
			put(e, "module", si->module ? json_object_new_string(si->module) : NULL);
			put(e, "function", name ? json_object_new_string(name) : NULL);
			put(e, "offset",
			    !si->module || fr->inlined
				    ? NULL
				    : u64(fr->function ? fr->offset : si->module_offset));
			put(e, "file", fr->file ? json_object_new_string(fr->file) : NULL);
			put(e, "line", fr->line ? json_object_new_int(fr->line) : NULL);
			put(e, "inlined", json_object_new_boolean(fr->inlined));
			json_object_array_add(a, e);
		}
	}
	return a;
}

static json_object *sites(const struct report *r)
{
	const struct snapshot *s = r->snap;
	json_object *a = json_object_new_array();
	double *growth;
	size_t i, n, *order = report__site_order(r, &growth, &n);
	unsigned int k;

	for (i = 0; i < n; i++) {
		const struct site *site = &s->sites[order[i]];
		json_object *e = json_object_new_object(), *sz = json_object_new_array();

		put(e, "live_bytes", u64(site->live_bytes));
		put(e, "live", u64(site->live));
		put(e, "est_bytes", json_object_new_double(site->est_bytes));
		put(e, "est_blocks", json_object_new_double(site->est_blocks));
		put(e, "est_bytes_margin", json_object_new_double(report__margin(site)));
		put(e, "growth_bytes_per_hour",
		    isnan(growth[i]) ? NULL : json_object_new_double(growth[i] * 3600));
		for (k = 0; k < site->nsizes; k++)
			json_object_array_add(sz, u64(site->sizes[k]));
		put(e, "sizes", sz);
		put(e, "more_sizes", json_object_new_boolean(site->more_sizes));
		put(e, "min_size", u64(site->min_size));
		put(e, "max_size", u64(site->max_size));
		put(e, "oldest_age_s", seconds(snapshot__age(s, site->oldest_ns)));
		put(e, "function",
		    site->fn < r->probes->n ? json_object_new_string(r->probes->v[site->fn].name)
					    : NULL);
		put(e, "stack_id", hex(site->stack_id));
		put(e, "stack", frames(r, site));
		json_object_array_add(a, e);
	}
	free(order);
	free(growth);
	return a;
}

json_object *report__json_object(const struct report *r)
{
	const struct heaptap_counters *c = &r->snap->counters;
	const struct heaptap_counters *p = r->prev ? &r->prev->counters : NULL;
	json_object *o = record(r, r->type, r->snap->time_ns), *self = json_object_new_object();

	put(o, "elapsed_s", seconds(r->snap->time_ns - r->attach_ns));
	put(o, "live_bytes", u64(c->live_bytes));
	put(o, "live_allocs", u64(c->allocs - c->frees));
	put(o, "peak_bytes", u64(c->peak_bytes));
	put(o, "peak_time", c->peak_ns ? timestamp(c->peak_ns) : NULL);
	put(o, "peak_elapsed_s", c->peak_ns ? seconds(c->peak_ns - r->attach_ns) : NULL);
	put(o, "alloc_calls", u64(c->alloc_calls));
	put(o, "free_calls", u64(c->free_calls));
	put(o, "allocs", u64(c->allocs));
	put(o, "frees", u64(c->frees));
	put(o, "alloc_bytes", u64(c->alloc_bytes));
	put(o, "free_bytes", u64(c->free_bytes));
	put(o, "failed_calls", u64(c->failed));
	put(o, "unwound_calls", u64(c->unwound));
	put(o, "fixup_failures", u64(c->fixup_failures));
	put(o, "lost_events", u64(c->lost_events));
	put(o, "own_frees", u64(c->own_frees));
	put(o, "stacks", stacks(r));
	put(o, "mode",
	    json_object_new_string(r->duty	    ? "live"
				   : r->opts->watch ? "watch"
						    : "full"));
	put(o, "pages_touched", u64(c->pages_touched));
	put(o, "sample_bytes", u64(r->opts->sample_bytes));
	if (r->duty) {
		json_object *d = json_object_new_object();

		put(d, "window_s", seconds(r->duty->window_ns));
		put(d, "budget", json_object_new_double(r->duty->budget));
		put(d, "windows", u64(r->duty->windows));
		put(d, "traced", json_object_new_double(r->duty->traced));
		put(d, "slowdown", json_object_new_double(r->duty->slowdown));
		put(d, "window_slowdown", json_object_new_double(r->duty->window_slowdown));
		put(d, "tracing_now", json_object_new_boolean(r->traced_now));
		put(o, "live", d);
	}
	put(o, "alloc_rate",
	    json_object_new_double(report__rate(r, c->alloc_calls, p ? p->alloc_calls : 0)));
	put(o, "free_rate",
	    json_object_new_double(report__rate(r, c->free_calls, p ? p->free_calls : 0)));
	put(o, "rss_bytes", u64(r->rss));
	put(self, "rss_bytes", u64(r->self_rss));
	put(self, "map_bytes", u64(r->self_maps));
	put(o, "heaptap", self);
	put(o, "inexact", inexact(c));
	put(o, "functions", functions(r));
	put(o, "sizes", sizes(r));
	put(o, "sites_total", u64(r->snap->nsites));
	put(o, "young_hidden", u64(r->snap->young));
	put(o, "sites", sites(r));
	if (r->target_exited) {
		json_object *t = json_object_new_object();

		put(t, "exit_code", r->exit_code >= 0 ? json_object_new_int(r->exit_code) : NULL);
		put(t, "signal", r->exit_signal ? json_object_new_int(r->exit_signal) : NULL);
		put(o, "target_exit", t);
	}
	return o;
}

void report__json(FILE *f, const struct report *r)
{
	emit(f, report__json_object(r));
}
