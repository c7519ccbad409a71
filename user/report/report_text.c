// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "account/dump.h"
#include "base/clock.h"
#include "report/report.h"
#include "report/report_text_leak.h"
#include "report/report_text_rss.h"
#include "report/text.h"
#include "target/families.h"

/* The report's first lines: when, whose, and which allocator's functions are traced. */
static void title(FILE *f, const struct report *r)
{
	const char *own = "own        ", *fam = "families   ", *name;
	char fn[ALLOC_SPEC_NAME_MAX + 1];
	char d[32], t[32];
	size_t i;

	fprintf(f, "\n=== heaptap %s report  %s  PID %d (%s)  %s since attach%s\n", r->type,
		clock_time(t, sizeof(t), r->snap->time_ns), r->pid, r->comm,
		duration(d, sizeof(d), r->snap->time_ns - r->attach_ns),
		r->target_exited ? "  [target exited]" : "");
	fprintf(f, "allocator  %s (%s)\n", r->allocator->file.name, r->allocator->reason);
	for (i = 0; i < report__nprobes(r); i++)
		if (r->probes->v[i].own && !r->probes->v[i].skipped) {
			fprintf(f, "%s%s", own, r->probes->v[i].name);
			own = ", ";
		}
	if (*own == ',')
		fprintf(f, " (the program's own allocator: calls they make to malloc count once, "
			   "as theirs)\n");
	if (r->opts->own_untraced)
		fprintf(f, "level      malloc: the program's own allocator (%zu functions named) not "
			   "traced (--level malloc)\n", r->opts->own_untraced);
	for (i = 0; (name = families__name(i, fn, sizeof(fn))); i++)
		if (report__family_untraced(r, i)) {
			fprintf(f, "%s%s", fam, name);
			fam = ", ";
		}
	if (*fam == ',')
		fprintf(f, " (the program has them, not traced: --allocator-family NAME)\n");
}

/* What is live, the peak, the calls since attach. */
static void figures(FILE *f, const struct report *r)
{
	const struct heaptap_counters *c = &r->snap->counters;
	const struct report_analysis *an = &r->analysis;
	const char *estimated = r->figures->sampled ? "~" : "";
	char a[32], b[32], d[32], e[32], t[32];
	uint64_t peak_ns = an->peak_ns;

	fprintf(f, "live       %s%s in %s blocks", estimated, bytes(a, sizeof(a), llround(an->live)),
		count(b, sizeof(b), llround(an->live_blocks)));
	if (an->live_margin > 0)
		fprintf(f, " (+/- %s)", bytes(a, sizeof(a), llround(an->live_margin)));
	if (peak_ns)
		fprintf(f, "   peak %s%s at %s (+%s)", estimated,
			bytes(e, sizeof(e), llround(an->peak)),
			clock_time(t, sizeof(t), peak_ns),
			duration(d, sizeof(d), peak_ns > r->attach_ns ? peak_ns - r->attach_ns : 0));
	fprintf(f, "\n");
	fprintf(f, "calls      %.0f alloc/s  %.0f free/s   (%s alloc, ",
		report__rate(r, c->alloc_calls, r->prev ? r->prev->counters.alloc_calls : 0),
		report__rate(r, c->free_calls, r->prev ? r->prev->counters.free_calls : 0),
		count(a, sizeof(a), c->alloc_calls));
	fprintf(f, "%s free, %s failed since attach)\n", count(b, sizeof(b), c->free_calls),
		count(d, sizeof(d), c->failed));
	if (c->unwound)
		fprintf(f, "exceptions %s operator new calls ended by an exception%s\n",
			count(a, sizeof(a), c->unwound),
			c->fixup_failures
				? " (heaptap was too slow to let some through: see doc/how-it-works.md, Exceptions)"
				: "");
	if (c->pool_resets || c->pool_malloc_live)
		fprintf(f,
			"pools      %s blocks freed with their pools; %s reset and destroy calls%s\n",
			count(a, sizeof(a), c->pool_frees), count(b, sizeof(b), c->pool_resets),
			c->untracked_pools ? " (some pools untracked: the pools map was full)" : "");
	/* The two levels: the pools' blocks, and the malloc'd memory they are carved from. */
	if (c->pool_malloc_live)
		fprintf(f, "           inside %s in %s blocks the pools took from malloc since "
			"attach%s\n", bytes(a, sizeof(a), c->pool_malloc_bytes),
			count(b, sizeof(b), c->pool_malloc_live),
			c->pool_malloc_untracked ? " (some untracked: the map of them was full)" : "");
}

/* How the session traces: --live's windows, --watch, sampling. */
static void modes(FILE *f, const struct report *r)
{
	const struct heaptap_counters *c = &r->snap->counters;
	char a[32], b[32];

	if (r->duty)
		fprintf(f,
			"live       %s windows, traced %.0f%% of the time; slowdown ~%.1f%% "
			"(budget %.0f%%, %.0f%% while tracing)%s\n",
			duration(a, sizeof(a), r->duty->window_ns), r->duty->traced * 100,
			r->duty->slowdown * 100, r->duty->budget * 100,
			r->duty->window_slowdown * 100, r->traced_now ? "" : "; paused now");
	if (r->figures->pages)
		fprintf(f,
			"watch      no allocator probes: %s new pages of anonymous memory written "
			"since attach, by the stack that wrote each first\n",
			count(a, sizeof(a), c->pages_touched));
	if (r->figures->sampled)
		fprintf(f,
			"sampling   1 block in ~%s allocated: figures marked ~ and the size table "
			"are estimates; %s frees of blocks not sampled\n",
			bytes(a, sizeof(a), r->opts->sample_bytes),
			count(b, sizeof(b), c->untracked_frees));
}

/* Stacks, what heaptap and the target take, and what is not exact. */
static void costs(FILE *f, const struct report *r)
{
	const struct heaptap_counters *c = &r->snap->counters;
	char a[32], b[32], d[32], e[32];
	uint64_t inexact = r->analysis.inexact;
	const char *sep = ": ";
	size_t i;

	fprintf(f, "stacks     %s, %s distinct", report__stack_mode(r),
		count(a, sizeof(a), c->new_stacks));
	if (r->unwind && r->unwind->samples)
		fprintf(f, ", %s unwound from samples (%.1f KiB, %.0f us each)",
			count(b, sizeof(b), r->unwind->samples),
			r->unwind->sample_bytes / 1024.0 / r->unwind->samples,
			r->unwind->unwind_ns / 1e3 / r->unwind->samples);
	if (c->truncated_stacks + (r->unwind ? r->unwind->truncated : 0))
		fprintf(f, ", %s cut short",
			count(d, sizeof(d),
			      c->truncated_stacks + (r->unwind ? r->unwind->truncated : 0)));
	if (c->lost_samples)
		fprintf(f, ", %s samples lost (ring full)", count(e, sizeof(e), c->lost_samples));
	fprintf(f, "\n");
	fprintf(f, "memory     target RSS %s   heaptap RSS %s + BPF maps %s\n",
		bytes(a, sizeof(a), r->rss), bytes(b, sizeof(b), r->self_rss),
		bytes(d, sizeof(d), r->self_maps));
	report__text_rss(f, r);
	fprintf(f, "inexact    %s", count(a, sizeof(a), inexact));
	for (i = 0; i < report__ninexact_causes; i++) {
		const struct inexact_cause *cause = &report__inexact_causes[i];
		uint64_t n = report__inexact_count(c, cause);

		if (!n)
			continue;
		fprintf(f, "%s%s %s", sep, count(a, sizeof(a), n), cause->text);
		sep = ", ";
	}
	fprintf(f, "\n");
}

static void header(FILE *f, const struct report *r)
{
	title(f, r);
	figures(f, r);
	modes(f, r);
	costs(f, r);
}

static void size_table(FILE *f, const struct report *r)
{
	const struct size_row *rows = r->analysis.sizes;
	size_t i, n = r->analysis.nsizes;
	char range[48], v[5][32];

	fprintf(f,
		"\nSIZE (bytes)                 ALLOCS        FREES         LIVE    LIVE BYTES   "
		"TOTAL BYTES   (by %s)\n",
		options__sort_name(r->opts->sort));
	for (i = 0; i < n; i++) {
		const struct heaptap_size_class *c = &rows[i].c;

		if (rows[i].min == rows[i].max)
			snprintf(range, sizeof(range), "%" PRIu64, rows[i].min);
		else if (rows[i].max == UINT64_MAX)
			snprintf(range, sizeof(range), "%" PRIu64 " and up", rows[i].min);
		else
			snprintf(range, sizeof(range), "%" PRIu64 " - %" PRIu64, rows[i].min,
				 rows[i].max);
		fprintf(f, "%-24s %10s   %10s   %10s   %11s   %11s\n", range,
			count(v[0], sizeof(v[0]), c->allocs), count(v[1], sizeof(v[1]), c->frees),
			count(v[2], sizeof(v[2]), heaptap_class_live(c)),
			count(v[3], sizeof(v[3]), heaptap_class_live_bytes(c)),
			count(v[4], sizeof(v[4]), c->alloc_bytes));
	}
	if (!n)
		fprintf(f, "(no allocations since attach)\n");
}

static void site_sizes(FILE *f, const struct site *s)
{
	unsigned int i;

	if (s->nsizes == 1) {
		fprintf(f, "size %" PRIu64, s->sizes[0]);
		return;
	}
	if (s->more_sizes) {
		fprintf(f, "sizes %" PRIu64 "-%" PRIu64 " (more than %d)", s->min_size, s->max_size,
			SITE_SIZES);
		return;
	}
	fprintf(f, "sizes ");
	for (i = 0; i < s->nsizes; i++)
		fprintf(f, "%s%" PRIu64, i ? "," : "", s->sizes[i]);
}

/* A site's blocks by leak category, after a leak check. */
static void leak_counts(FILE *f, const struct report *r, const struct site *site)
{
	const struct leak_counts *lc = r->leak ? leak_check__site(r->leak, site->stack_id) : NULL;
	const char *sep = "";
	char a[32];
	int k;

	if (!lc)
		return;
	fprintf(f, "      leak check: ");
	for (k = 0; k < REACH_KINDS; k++) {
		if (!lc->blocks[k])
			continue;
		fprintf(f, "%s%s in %" PRIu64 " blocks %s", sep, bytes(a, sizeof(a), lc->bytes[k]),
			lc->blocks[k], text__leak_kind(k));
		sep = ", ";
	}
	fprintf(f, "\n");
}

static void dumps(FILE *f, const struct site *site)
{
	char a[32];
	size_t i, k;

	for (i = 0; i < site->ndumps && i < 2; i++) {
		const struct dump *d = &site->dumps[i];
		size_t zeros;

		fprintf(f, "      block 0x%" PRIx64 ", %" PRIu64 " bytes", d->addr, d->size);
		if (d->class_name)
			fprintf(f, ", a %s (its vtable)", d->class_name);
		if (!d->n && d->size)
			fprintf(f, ": unreadable (%s)", strerror(d->error));
		else if (d->n < d->size)
			fprintf(f, ", first %s", bytes(a, sizeof(a), d->n));
		for (zeros = 0; zeros < d->n && !d->bytes[zeros]; zeros++)
			;
		if (d->n && zeros == d->n)
			fprintf(f, ": zeros");
		fprintf(f, "\n");
		if (zeros < d->n)
			dump__text(f, d, "        ");
		for (k = 0; k < d->nstrings; k++)
			fprintf(f, "        string: \"%s\"\n", d->strings[k]);
	}
}

/* A site whose blocks are in several processes (a forked service's): how many in each. */
static void site_processes(FILE *f, const struct site *site)
{
	char a[32];
	unsigned int k;

	if (site->nprocs < 2)
		return;
	fprintf(f, "    in %u processes:", site->nprocs);
	for (k = 0; k < site->nprocs && k < SITE_PROCS; k++)
		fprintf(f, "%s PID %u %s", k ? "," : "", site->procs[k].tgid,
			bytes(a, sizeof(a), site->procs[k].live_bytes));
	fprintf(f, "%s\n", site->nprocs > SITE_PROCS ? ", ..." : "");
}
/* With --watch: the mappings a site's new pages are in, by the function that made each. */
static void mapped_by(FILE *f, const struct report *r, const struct site *site)
{
	const struct page_origin *o;
	size_t i, n;
	char a[32];

	o = snapshot__origins(r->snap, site->stack_id, &n);
	for (i = 0; i < n && i < SITE_ORIGINS; i++) {
		const struct sym_frame *fr = report__mapper(r, o[i].map_stack_id);

		fprintf(f, "%s", i ? ", " : "    in mappings of ");
		if (!o[i].map_stack_id)
			fprintf(f, "no call seen (the heap, or made before the attach)");
		else if (fr && fr->function && fr->file)
			fprintf(f, "%s (%s:%d)", fr->function, fr->file, fr->line);
		else
			fprintf(f, "%s", fr && fr->function ? fr->function : "?");
		fprintf(f, ": %s page%s", count(a, sizeof(a), o[i].pages),
			o[i].pages == 1 ? "" : "s");
	}
	if (n)
		fprintf(f, "%s\n", n > SITE_ORIGINS ? ", ..." : "");
}

static void sites(FILE *f, const struct report *r)
{
	const struct snapshot *s = r->snap;
	const struct shown_site *shown = r->analysis.sites;
	size_t i, n = r->analysis.nsites;
	char a[32], b[32], d[32];

	if (!r->opts->top)
		return;
	fprintf(f, "\nTOP %zu OF %zu %s BY %s", n, s->nsites,
		r->figures->pages ? "STACKS WRITING NEW PAGES" : "SITES",
		r->figures->by_growth ? "GROWTH" : "LIVE BYTES");
	if (r->opts->min_age_ns)
		fprintf(f, " (%s blocks younger than %s hidden)", count(a, sizeof(a), s->young),
			duration(d, sizeof(d), r->opts->min_age_ns));
	fprintf(f, "\n");
	for (i = 0; i < n; i++) {
		const struct site *site = shown[i].site;
		double growth = shown[i].growth;

		if (r->figures->pages) {
			fprintf(f, "#%zu  %s in %s new pages", i + 1,
				bytes(a, sizeof(a), site->live_bytes),
				count(b, sizeof(b), site->live));
			if (!isnan(growth))
				fprintf(f, ", %s %s/h", growth >= 0 ? "growing" : "shrinking",
					bytes(a, sizeof(a), fabs(growth) * 3600));
			fprintf(f, "\n");
			mapped_by(f, r, site);
			text__stack(f, r, site);
			continue;
		}
		if (r->figures->sampled)
			fprintf(f, "#%zu  ~%s (+-%s) live in ~%.0f blocks (%s sampled), ", i + 1,
				bytes(a, sizeof(a), site->est_bytes),
				bytes(b, sizeof(b), report__margin(site)), site->est_blocks,
				count(d, sizeof(d), site->live));
		else
			fprintf(f, "#%zu  %s live in %s blocks, ", i + 1,
				bytes(a, sizeof(a), site->live_bytes),
				count(b, sizeof(b), site->live));
		site_sizes(f, site);
		fprintf(f, ", oldest %s", duration(d, sizeof(d), snapshot__age(s, site->oldest_ns)));
		if (!isnan(growth))
			fprintf(f, ", %s %s/h", growth >= 0 ? "growing" : "shrinking",
				bytes(a, sizeof(a), fabs(growth) * 3600));
		if (shown[i].judged)
			fprintf(f, " [%s]", history__trend_name(shown[i].trend.kind));
		fprintf(f, "\n");
		site_processes(f, site);
		if (site->pool)
			fprintf(f, "    in pool 0x%" PRIx64 "%s%s%s\n", site->pool,
				site->pool_name[0] ? " (" : "", site->pool_name,
				site->pool_name[0] ? ")" : "");
		if (site->object_type)
			fprintf(f, "    objects of type %s\n",
				site->object_type_name[0] ? site->object_type_name : "?");
		text__stack(f, r, site);
		leak_counts(f, r, site);
		dumps(f, site);
	}
}

static void suspects(FILE *f, const struct report *r)
{
	const struct suspect *v = r->analysis.suspects;
	size_t i, n = r->analysis.nsuspects;
	char a[32], b[32], d[32], e[32], g[32];

	if (r->figures->pages)
		return;
	if (!n) {
		fprintf(f,
			"\nSUSPECTS   none: no site's live bytes grew steadily over %u reports "
			"or more\n",
			HISTORY_MIN_POINTS);
		return;
	}
	fprintf(f, "\nSUSPECTS   sites whose live bytes grow steadily: likely leaks\n");
	for (i = 0; i < n && i < r->opts->top; i++) {
		const struct site *site = &r->snap->sites[v[i].site];
		const struct trend *t = &v[i].trend;

		fprintf(f,
			"#%zu  +%s/h (+%s in 24h), fit %.2f, steadiness %.2f, confidence %.2f; "
			"%s live in %s blocks over %s\n",
			i + 1, bytes(a, sizeof(a), t->growth * 3600),
			bytes(b, sizeof(b), t->growth * 86400), t->fit, t->steadiness, t->confidence,
			bytes(d, sizeof(d),
			      r->figures->sampled ? (uint64_t)site->est_bytes : site->live_bytes),
			count(e, sizeof(e), site->live), duration(g, sizeof(g), t->span_s * 1e9));
		text__stack(f, r, site);
	}
}

static void changes(FILE *f, const struct report *r)
{
	const struct changes *c = &r->analysis.changes;
	char a[32], d[32];
	size_t i;

	if (!r->analysis.has_changes)
		return;
	fprintf(f, "\nCHANGES    in %s: live %c%s, %+" PRId64 " blocks; %zu new sites, %zu gone\n",
		duration(d, sizeof(d), c->since_s * 1e9), c->live_bytes < 0 ? '-' : '+',
		bytes(a, sizeof(a), llabs(c->live_bytes)), c->live, c->new_sites, c->gone_sites);
	for (i = 0; i < c->ntop; i++) {
		const struct site_change *sc = &c->top[i];
		const struct stack *st = stacks__get(r->stacks, sc->stack_id);
		const char *where = "?";

		/* Named by the first frame past the allocator. */
		if (st && st->n > 1)
			where = syms__find(report__syms(r, st), st->ips[1], true)->frames[0].function
					?: "?";
		fprintf(f, "  %c%-12s %+8" PRId64 " blocks  %s%s\n", sc->delta_bytes < 0 ? '-' : '+',
			bytes(a, sizeof(a), llabs(sc->delta_bytes)), sc->delta_blocks, where,
			sc->is_new ? " (new)"
			: sc->gone ? " (gone)"
				   : "");
	}
}

static void threads(FILE *f, const struct report *r)
{
	const struct snapshot *s = r->snap;
	char a[32], b[32];
	size_t i;

	if (!s->nthreads || r->figures->pages)
		return;
	fprintf(f, "\nTHREADS    live blocks by the thread that allocated them\n");
	fprintf(f, "  %8s  %-16s %12s %12s\n", "TID", "NAME", "LIVE BYTES", "BLOCKS");
	for (i = 0; i < s->nthreads && i < r->opts->top; i++) {
		const struct thread_live *t = &s->threads[i];

		fprintf(f, "  %8u  %-16s %12s %12s%s\n", t->tid, t->comm[0] ? t->comm : "?",
			count(a, sizeof(a), t->live_bytes), count(b, sizeof(b), t->live),
			t->exited ? "  (exited)" : "");
	}
	if (s->nthreads > r->opts->top)
		fprintf(f, "  (%zu more threads)\n", s->nthreads - r->opts->top);
}

/* With more than one process: each one's figures, those that exited with their end. */
static void processes(FILE *f, const struct report *r)
{
	const struct report_process *v = r->analysis.procs;
	size_t n = r->analysis.nprocs, i;
	bool pages = r->figures->pages;
	char a[32], b[32], c[32], d[32];

	if (n > 1 && !pages) {
		fprintf(f, "\nPROCESSES  %zu traced\n", n + r->procs->folded.processes);
		fprintf(f, "  %8s %8s  %-16s %12s %12s %12s %12s\n", "PID", "PARENT", "NAME", "ALLOCS",
			"FREES", "LIVE BYTES", "BLOCKS");
	}
	for (i = 0; n > 1 && i < n && !pages; i++) {
		const struct process *p = v[i].p;

		fprintf(f, "  %8d %8d  %-16s %12s %12s %12s %12s", p->t.pid, p->parent, p->t.comm,
			count(a, sizeof(a), v[i].c.allocs), count(b, sizeof(b), v[i].c.frees),
			count(c, sizeof(c), v[i].live_bytes), count(d, sizeof(d), v[i].live));
		if (p->execs)
			fprintf(f, "  (%u exec, %" PRIu64 " blocks dropped)", p->execs,
				p->dropped_at_exec);
		if (p->late_ns)
			fprintf(f, "  (traced %.1f ms after its start)", p->late_ns / 1e6);
		fprintf(f, "%s\n", p->exited_ns ? "  (exited: held at its exit)" : "");
	}
	if (n > 1 && !pages && r->procs->folded.processes) {
		const struct procs_folded *fo = &r->procs->folded;

		fprintf(f, "  %8s %8s  %-16s %12s %12s %12s %12s  (%" PRIu64 " more that exited "
			"earlier, summed)\n", "", "", "...", count(a, sizeof(a), fo->end.allocs),
			count(b, sizeof(b), fo->end.frees), count(c, sizeof(c), fo->live_bytes),
			count(d, sizeof(d), fo->live), fo->processes);
	}
}

static void ages(FILE *f, const struct report *r)
{
	const struct snapshot *s = r->snap;
	static const char *const names[AGE_BUCKETS] = { "<1s",	  "1-10s", "10s-1m", "1-10m",
							"10m-1h", "1h-1d", ">1d" };
	char a[32], b[32];
	int i;

	if (r->figures->pages || !(s->counters.allocs - s->counters.frees))
		return;
	fprintf(f, "\nAGES      ");
	for (i = 0; i < AGE_BUCKETS; i++)
		if (s->age_blocks[i])
			fprintf(f, "  %s: %s (%s)", names[i], bytes(a, sizeof(a), s->age_bytes[i]),
				count(b, sizeof(b), s->age_blocks[i]));
	fprintf(f, "\n");
}

/* What held the memory at the peak of live bytes. */
static void at_peak(FILE *f, const struct report *r)
{
	const struct heaptap_counters *c = &r->snap->counters;
	const struct site_total *const *v = r->analysis.peak_sites;
	size_t i, n = r->analysis.npeak_sites;
	char a[32], b[32], t[32], d[32];

	if (strcmp(r->type, "final") || r->figures->pages || r->figures->sampled || !n)
		return;
	fprintf(f, "\nAT THE PEAK  %s at %s (+%s), held by\n", bytes(a, sizeof(a), c->peak_bytes),
		clock_time(t, sizeof(t), c->peak_ns),
		duration(d, sizeof(d), c->peak_ns - r->attach_ns));
	for (i = 0; i < n; i++) {
		const struct site site = { .stack_id = v[i]->stack_id, .fn = v[i]->fn };

		fprintf(f, "#%zu  %s in %s blocks\n", i + 1,
			bytes(a, sizeof(a), v[i]->peak_live_bytes),
			count(b, sizeof(b), v[i]->peak_live));
		text__stack(f, r, &site);
	}
}

static void alerts(FILE *f, const struct report *r)
{
	size_t i;

	for (i = 0; i < r->nalerts; i++)
		fprintf(f, "ALERT      %s: %.0f%s, at or above %s %" PRIu64 "\n",
			alarms__name(r->alerts[i].kind), r->alerts[i].value,
			r->alerts[i].kind == ALARM_GROWTH ? " bytes/h" : " bytes",
			alarms__option(r->alerts[i].kind), r->alerts[i].threshold);
}

int report__text(FILE *f, const struct report *r)
{
	header(f, r);
	alerts(f, r);
	suspects(f, r);
	if (!r->figures->pages)
		size_table(f, r);
	sites(f, r);
	changes(f, r);
	threads(f, r);
	processes(f, r);
	ages(f, r);
	at_peak(f, r);
	report__text_arenas(f, r);
	report__text_map_sites(f, r);
	report__text_leak_check(f, r);
	if (r->target_exited && r->exit_code >= 0)
		fprintf(f, "\ntarget exited with status %d\n", r->exit_code);
	else if (r->target_exited && r->exit_signal)
		fprintf(f, "\ntarget was killed by signal %d\n", r->exit_signal);
	fflush(f);
	return ferror(f) ? -EIO : 0;
}
