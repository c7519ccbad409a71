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
#include "target/families.h"

/* 1234567 -> "1,234,567" */
static const char *count(char *buf, size_t size, uint64_t v)
{
	char digits[32];
	size_t n, i, o = 0;

	n = snprintf(digits, sizeof(digits), "%" PRIu64, v);
	for (i = 0; i < n && o + 2 < size; i++) {
		if (i && (n - i) % 3 == 0)
			buf[o++] = ',';
		buf[o++] = digits[i];
	}
	buf[o] = '\0';
	return buf;
}

static const char *bytes(char *buf, size_t size, uint64_t v)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB" };
	double x = v;
	int u = -1;

	if (v < 1024) {
		snprintf(buf, size, "%" PRIu64 " B", v);
		return buf;
	}
	while (x >= 1024 && u < 3) {
		x /= 1024;
		u++;
	}
	snprintf(buf, size, "%.1f %s", x, units[u]);
	return buf;
}

static const char *duration(char *buf, size_t size, uint64_t ns)
{
	uint64_t s = ns / 1000000000ULL;

	if (s < 60)
		snprintf(buf, size, "%.1fs", ns / 1e9);
	else if (s < 3600)
		snprintf(buf, size, "%" PRIu64 "m%02" PRIu64 "s", s / 60, s % 60);
	else
		snprintf(buf, size, "%" PRIu64 "h%02" PRIu64 "m", s / 3600, s / 60 % 60);
	return buf;
}

static const char *clock_time(char *buf, size_t size, uint64_t mono_ns)
{
	time_t t = clock__wall_ns(mono_ns) / 1000000000ULL;
	struct tm tm;

	localtime_r(&t, &tm);
	strftime(buf, size, "%H:%M:%S", &tm);
	return buf;
}

/* Whether the program has family i (families__name) and the session does not trace it. */
static bool family_untraced(const struct report *r, size_t i)
{
	return (r->allocator->families >> i & 1) && !(r->opts->families >> i & 1);
}

void report__attached_text(FILE *f, const struct report *r)
{
	char fn[ALLOC_SPEC_NAME_MAX + 1];
	const char *name;
	size_t i, skipped = 0;

	if (r->opts->watch) {
		fprintf(f,
			"heaptap: watching PID %d (%s): new pages of anonymous memory, by the "
			"stack that writes each first\n",
			r->pid, r->comm);
		return;
	}
	fprintf(f, "heaptap: attached to PID %d (%s): %zu probes on %s%s\n", r->pid, r->comm,
		r->links, r->allocator->file.name,
		r->allocator->nown ? " and the program's own allocator" : "");
	fprintf(f, "heaptap: allocator chosen: %s\n", r->allocator->reason);
	for (i = 0; (name = families__name(i, fn, sizeof(fn))); i++)
		if (family_untraced(r, i))
			fprintf(f,
				"heaptap: the program has %s's allocator (%s): --allocator-family %s "
				"traces it\n",
				name, fn, name);
	for (i = 0; i < report__nprobes(r); i++) {
		const struct probe *p = &r->probes->v[i];

		skipped += p->skipped != NULL;
		if (p->own && !p->skipped)
			fprintf(f, "heaptap: the program's own allocator: %s (%s) in %s\n", p->name,
				p->own->option, p->file->name);
	}
	if (!r->opts->verbose) {
		if (skipped)
			fprintf(f,
				"heaptap: %zu functions of the family not probed (-v lists them)\n",
				skipped);
		return;
	}
	for (i = 0; i < report__nprobes(r); i++) {
		const struct probe *p = &r->probes->v[i];

		unsigned int a;
		char where[16];

		if (p->skipped) {
			fprintf(f, "heaptap:   %-40s not probed: %s\n", p->name, p->skipped);
			continue;
		}
		fprintf(f, "heaptap:   %-40s %s at 0x%" PRIx64 " (entry+0x%" PRIx64 ": %s, %s) in %s%s",
			p->name, probes__kind_name(p->kind), p->offset, p->offset - p->start,
			p->site.insn.len ? p->site.insn.text : "?", insn__trap_name(p->site.trap),
			p->file->name, p->returns ? ", and its return" : "");
		for (a = 0; a <= HEAPTAP_COOKIE_ARGS; a++) {
			const char *at = probes__arg_where(p, a, where, sizeof(where));

			if (at)
				fprintf(f, "; %s in %s", probes__slot_name(p, a), at);
		}
		fprintf(f, "\n");
		/* Why a probe costs a single step: where the planner had to stop. */
		if (p->site.trap != INSN_EMULATED)
			fprintf(f, "heaptap:   %-40s   %s\n", "", p->site.why);
	}
}

static void header(FILE *f, const struct report *r)
{
	const struct heaptap_counters *c = &r->snap->counters;
	char a[32], b[32], d[32], e[32], t[32];
	uint64_t inexact = report__inexact(c), peak_ns = report__peak_ns(r);
	const char *sep = ": ", *own = "own        ", *fam = "families   ", *name;
	char fn[ALLOC_SPEC_NAME_MAX + 1];
	double live, blocks;
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
		if (family_untraced(r, i)) {
			fprintf(f, "%s%s", fam, name);
			fam = ", ";
		}
	if (*fam == ',')
		fprintf(f, " (the program has them, not traced: --allocator-family NAME)\n");
	live = report__live(r, &blocks);
	fprintf(f, "live       %s%s in %s blocks", r->opts->sample_bytes ? "~" : "",
		bytes(a, sizeof(a), llround(live)), count(b, sizeof(b), llround(blocks)));
	if (report__live_margin(r) > 0)
		fprintf(f, " (+/- %s)", bytes(a, sizeof(a), llround(report__live_margin(r))));
	if (peak_ns)
		fprintf(f, "   peak %s%s at %s (+%s)", r->opts->sample_bytes ? "~" : "",
			bytes(e, sizeof(e), llround(report__peak(r))),
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
				? " (heaptap was too slow to let some through: see README)"
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
	if (r->duty)
		fprintf(f,
			"live       %s windows, traced %.0f%% of the time; slowdown ~%.1f%% "
			"(budget %.0f%%, %.0f%% while tracing)%s\n",
			duration(a, sizeof(a), r->duty->window_ns), r->duty->traced * 100,
			r->duty->slowdown * 100, r->duty->budget * 100,
			r->duty->window_slowdown * 100, r->traced_now ? "" : "; paused now");
	if (r->opts->watch)
		fprintf(f,
			"watch      no allocator probes: %s new pages of anonymous memory written "
			"since attach, by the stack that wrote each first\n",
			count(a, sizeof(a), c->pages_touched));
	if (r->opts->sample_bytes)
		fprintf(f,
			"sampling   1 block in ~%s allocated: figures marked ~ and the size table "
			"are estimates; %s frees of blocks not sampled\n",
			bytes(a, sizeof(a), r->opts->sample_bytes),
			count(b, sizeof(b), c->untracked_frees));
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

static void size_table(FILE *f, const struct report *r)
{
	struct size_row *rows = calloc(HEAPTAP_SIZE_CLASSES, sizeof(*rows));
	char range[48], v[5][32];
	size_t i, n;

	if (!rows)
		return;
	n = report__size_rows(r, rows);
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
	free(rows);
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

static void stack(FILE *f, const struct report *r, const struct site *site)
{
	const struct stack *st = stacks__get(r->stacks, site->stack_id);
	uint64_t id = site->stack_id;
	size_t i, k;

	if (!st) {
		fprintf(f, "      (stack not stored%s)\n",
			id ? ": stacks map full, raise --max-stacks" : "");
		return;
	}
	for (i = 0; i < st->n; i++) {
		const struct sym_info *si = syms__find(report__syms(r, st), st->ips[i], i > 0);

		for (k = 0; k < si->nframes; k++) {
			const struct sym_frame *fr = &si->frames[k];
			const char *name = i || k ? fr->function : report__site_function(r, site);
			char fn[512], where[256] = "";

			if (!name)
				name = fr->function;
			if (fr->function && fr->inlined)
				snprintf(fn, sizeof(fn), "%s [inlined]", fr->function);
			else if (name && (st->ips[i] & HEAPTAP_PY_FRAME))
				snprintf(fn, sizeof(fn), "%s", name);
			else if (name)
				snprintf(fn, sizeof(fn), "%s+0x%" PRIx64, name, fr->offset);
			else
				snprintf(fn, sizeof(fn), "0x%" PRIx64,
					 si->module ? si->module_offset : st->ips[i]);
			if (fr->file)
				snprintf(where, sizeof(where), "%s:%d", fr->file, fr->line);
			fprintf(f, "      %-44s %-32s %s\n", fn, where,
				k + 1 < si->nframes ? ""
				: si->module	    ? si->module
						    : "[unknown]");
		}
	}
}

static const char *const leak_kind_text[REACH_KINDS] = {
	[REACH_DEFINITE] = "definitely lost",
	[REACH_INDIRECT] = "indirectly lost",
	[REACH_POSSIBLE] = "possibly lost",
	[REACH_REACHABLE] = "still reachable",
};

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
			lc->blocks[k], leak_kind_text[k]);
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
static void sites(FILE *f, const struct report *r)
{
	const struct snapshot *s = r->snap;
	struct trend t;
	char a[32], b[32], d[32];
	double *growth;
	size_t i, n, *order;

	if (!r->opts->top)
		return;
	order = report__site_order(r, &growth, &n);
	fprintf(f, "\nTOP %zu OF %zu %s BY %s", n, s->nsites,
		r->opts->watch ? "STACKS WRITING NEW PAGES" : "SITES",
		r->duty || r->opts->watch ? "GROWTH" : "LIVE BYTES");
	if (r->opts->min_age_ns)
		fprintf(f, " (%s blocks younger than %s hidden)", count(a, sizeof(a), s->young),
			duration(d, sizeof(d), r->opts->min_age_ns));
	fprintf(f, "\n");
	for (i = 0; i < n; i++) {
		const struct site *site = &s->sites[order[i]];

		if (r->opts->watch) {
			fprintf(f, "#%zu  %s in %s new pages", i + 1,
				bytes(a, sizeof(a), site->live_bytes),
				count(b, sizeof(b), site->live));
			if (!isnan(growth[i]))
				fprintf(f, ", %s %s/h", growth[i] >= 0 ? "growing" : "shrinking",
					bytes(a, sizeof(a), fabs(growth[i]) * 3600));
			fprintf(f, "\n");
			stack(f, r, site);
			continue;
		}
		if (r->opts->sample_bytes)
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
		if (!isnan(growth[i]))
			fprintf(f, ", %s %s/h", growth[i] >= 0 ? "growing" : "shrinking",
				bytes(a, sizeof(a), fabs(growth[i]) * 3600));
		if (r->history && history__trend(r->history, site->stack_id, &t))
			fprintf(f, " [%s]", history__trend_name(t.kind));
		fprintf(f, "\n");
		site_processes(f, site);
		if (site->pool)
			fprintf(f, "    in pool 0x%" PRIx64 "%s%s%s\n", site->pool,
				site->pool_name[0] ? " (" : "", site->pool_name,
				site->pool_name[0] ? ")" : "");
		if (site->object_type)
			fprintf(f, "    objects of type %s\n",
				site->object_type_name[0] ? site->object_type_name : "?");
		stack(f, r, site);
		leak_counts(f, r, site);
		dumps(f, site);
	}
	free(order);
	free(growth);
}

static void suspects(FILE *f, const struct report *r)
{
	struct suspect *v;
	char a[32], b[32], d[32], e[32], g[32];
	size_t i, n;

	if (r->opts->watch)
		return;
	n = report__suspects(r, &v);
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
			      r->opts->sample_bytes ? (uint64_t)site->est_bytes : site->live_bytes),
			count(e, sizeof(e), site->live), duration(g, sizeof(g), t->span_s * 1e9));
		stack(f, r, site);
	}
	free(v);
}

static void changes(FILE *f, const struct report *r)
{
	struct changes c;
	char a[32], d[32];
	size_t i;

	if (!report__changes(r, &c))
		return;
	fprintf(f, "\nCHANGES    in %s: live %c%s, %+" PRId64 " blocks; %zu new sites, %zu gone\n",
		duration(d, sizeof(d), c.since_s * 1e9), c.live_bytes < 0 ? '-' : '+',
		bytes(a, sizeof(a), llabs(c.live_bytes)), c.live, c.new_sites, c.gone_sites);
	for (i = 0; i < c.ntop; i++) {
		const struct site_change *sc = &c.top[i];
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

	if (!s->nthreads || r->opts->watch)
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
	struct report_process *v;
	size_t n = report__processes(r, &v), i;
	char a[32], b[32], c[32], d[32];

	if (n > 1 && !r->opts->watch) {
		fprintf(f, "\nPROCESSES  %zu traced\n", n + r->procs->folded.processes);
		fprintf(f, "  %8s %8s  %-16s %12s %12s %12s %12s\n", "PID", "PARENT", "NAME", "ALLOCS",
			"FREES", "LIVE BYTES", "BLOCKS");
	}
	for (i = 0; n > 1 && i < n && !r->opts->watch; i++) {
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
	if (n > 1 && !r->opts->watch && r->procs->folded.processes) {
		const struct procs_folded *fo = &r->procs->folded;

		fprintf(f, "  %8s %8s  %-16s %12s %12s %12s %12s  (%" PRIu64 " more that exited "
			"earlier, summed)\n", "", "", "...", count(a, sizeof(a), fo->end.allocs),
			count(b, sizeof(b), fo->end.frees), count(c, sizeof(c), fo->live_bytes),
			count(d, sizeof(d), fo->live), fo->processes);
	}
	free(v);
}

static void ages(FILE *f, const struct report *r)
{
	const struct snapshot *s = r->snap;
	static const char *const names[AGE_BUCKETS] = { "<1s",	  "1-10s", "10s-1m", "1-10m",
							"10m-1h", "1h-1d", ">1d" };
	char a[32], b[32];
	int i;

	if (r->opts->watch || !(s->counters.allocs - s->counters.frees))
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
	const struct site_total **v;
	char a[32], b[32], t[32], d[32];
	size_t i, n;

	if (strcmp(r->type, "final") || r->opts->watch || r->opts->sample_bytes)
		return;
	n = report__peak_sites(r, &v);
	if (!n)
		return;
	fprintf(f, "\nAT THE PEAK  %s at %s (+%s), held by\n", bytes(a, sizeof(a), c->peak_bytes),
		clock_time(t, sizeof(t), c->peak_ns),
		duration(d, sizeof(d), c->peak_ns - r->attach_ns));
	for (i = 0; i < n; i++) {
		const struct site site = { .stack_id = v[i]->stack_id, .fn = v[i]->fn };

		fprintf(f, "#%zu  %s in %s blocks\n", i + 1,
			bytes(a, sizeof(a), v[i]->peak_live_bytes),
			count(b, sizeof(b), v[i]->peak_live));
		stack(f, r, &site);
	}
	free(v);
}

/* Why a leak check left blocks unsettled, in words. */
static void incomplete_reasons(FILE *f, const struct reach_stats *st)
{
	const char *sep = " (incomplete: ";

	if (st->complete)
		return;
	if (st->incomplete & REACH_OUT_OF_TIME) {
		fprintf(f, "%sstopped at --leak-check-max-pause", sep);
		sep = "; ";
	}
	if (st->incomplete & REACH_THREADS_LATE) {
		fprintf(f, "%s%u %s not stop in time (uninterruptible sleep, vfork?)", sep,
			st->late_threads, st->late_threads == 1 ? "thread did" : "threads did");
		sep = "; ";
	}
	if (st->incomplete & REACH_MEMORY_SKIPPED)
		fprintf(f, "%smemory that could hold pointers not read", sep);
	fprintf(f, ")");
}

/* memcheck's summary lines: "   definitely lost: 1,048 bytes in 11 blocks". */
static void summary_line(FILE *f, const char *what, uint64_t bytes, uint64_t blocks)
{
	char a[32], b[32];

	fprintf(f, "%18s: %s bytes in %s blocks\n", what, count(a, sizeof(a), bytes),
		count(b, sizeof(b), blocks));
}

/* Where the roots were, and whether the allocator's heap was among them, and why. */
static void roots(FILE *f, const struct report *r, const struct reach_stats *st)
{
	uint64_t heap = 0, arenas = 0;
	const char *sep = "";
	char a[32];
	unsigned int i;

	fprintf(f, "  roots            ");
	for (i = 0; i < REACH_ROOT_KINDS; i++) {
		if (!st->root_regions[i])
			continue;
		fprintf(f, "%s%u %s (%s)", sep, st->root_regions[i], reach__root_name(i),
			bytes(a, sizeof(a), st->root_bytes[i]));
		sep = ", ";
	}
	fprintf(f, "%s%s registers of %u thread%s\n", sep, *sep ? "and the" : "the", st->threads,
		st->threads == 1 ? "" : "s");
	if (!st->nheaps)
		return;
	for (i = 0; i < st->nheaps; i++) {
		heap += st->heaps[i].end - st->heaps[i].start;
		arenas += st->heaps[i].arena;
	}
	fprintf(f, "  allocator heap   %s", st->nheaps > arenas ? "[heap]" : "");
	if (arenas)
		fprintf(f, "%s%" PRIu64 " arena%s", st->nheaps > arenas ? " and " : "", arenas,
			arenas == 1 ? "" : "s");
	fprintf(f, " (%s): ", bytes(a, sizeof(a), heap));
	if (st->heap_roots)
		fprintf(f, "scanned as roots: %s\n",
			r->opts->npids ? "blocks allocated before attach are unknown"
				     : "not every block in it is known (sampled, a full map, or an "
				       "allocator whose heap heaptap cannot tell)");
	else
		fprintf(f, "not roots: every block in it is known (traced from the command's "
			   "start)\n");
}

static const char *const leak_trigger_text[] = {
	[LEAK_AT_SIGNAL] = "on SIGUSR1",
	[LEAK_AT_END] = "before detaching",
	[LEAK_AT_EXIT] = "at the target's exit",
};

/* The loss records, largest first: the lost ones all, the reachable ones up to --top. */
static void loss_records(FILE *f, const struct report *r, const struct leak_check *lc)
{
	size_t i, shown = 0, reachable = 0;
	char a[32], b[32], c[32];

	for (i = 0; i < lc->nrecords; i++) {
		const struct leak_record *rec = &lc->records[i];
		const struct site site = { .stack_id = rec->stack_id,
					   .fn = report__stack_fn(r, rec->stack_id) };

		if (rec->kind == REACH_REACHABLE && reachable++ >= r->opts->top)
			continue;
		shown++;
		fprintf(f, "\nLOSS RECORD %zu of %zu  ", i + 1, lc->nrecords);
		if (rec->led_bytes)
			fprintf(f, "%s (%s direct, %s indirect)",
				count(a, sizeof(a), rec->bytes + rec->led_bytes),
				count(b, sizeof(b), rec->bytes), count(c, sizeof(c), rec->led_bytes));
		else
			fprintf(f, "%s", count(a, sizeof(a), rec->bytes));
		fprintf(f, " bytes in %s blocks are %s\n", count(b, sizeof(b), rec->blocks),
			leak_kind_text[rec->kind]);
		stack(f, r, &site);
	}
	if (shown < lc->nrecords)
		fprintf(f,
			"\n(%zu more loss records of still reachable blocks: --top shows more, "
			"--json has them all)\n",
			lc->nrecords - shown);
}

/* memcheck's LEAK SUMMARY, how the check went, and the loss records. */
static void leak_check(FILE *f, const struct report *r)
{
	const struct leak_check *lc = r->leak;
	const struct reach_stats *st;
	char a[32], t[32];
	int k;

	if (!lc) {
		if (r->leak_note)
			fprintf(f, "\nLEAK SUMMARY  none: %s\n", r->leak_note);
		return;
	}
	st = &lc->stats;
	fprintf(f, "\nLEAK SUMMARY  %s", leak_trigger_text[lc->trigger]);
	if (lc->trigger == LEAK_AT_SIGNAL && !strcmp(r->type, "final"))
		fprintf(f, " at %s (the latest check)", clock_time(t, sizeof(t), lc->time_ns));
	fprintf(f, ": target stopped %.1f ms, %s scanned in %.1f ms", st->pause_s * 1e3,
		bytes(a, sizeof(a), st->scanned_bytes), st->scan_s * 1e3);
	incomplete_reasons(f, st);
	fprintf(f, "\n");
	for (k = 0; k < REACH_KINDS; k++) {
		summary_line(f, leak_kind_text[k], lc->total.bytes[k], lc->total.blocks[k]);
		if (k != REACH_REACHABLE)
			continue;
		for (unsigned int h = 0, said = 0; h < REACH_HEURISTICS; h++) {
			if (!st->heur_blocks[h])
				continue;
			if (!said++)
				fprintf(f, "%22sof which reachable via heuristic:\n", "");
			fprintf(f, "%24s%-19s: %s bytes in %" PRIu64 " blocks\n", "",
				reach__heuristic_name(h), count(a, sizeof(a), st->heur_bytes[h]),
				st->heur_blocks[h]);
		}
	}
	if (lc->total.blocks[REACH_KINDS])
		summary_line(f, "not settled", lc->total.bytes[REACH_KINDS],
			     lc->total.blocks[REACH_KINDS]);
	if (r->leak_note)
		fprintf(f, "  note             %s\n", r->leak_note);
	roots(f, r, st);
	if (st->skipped_regions)
		fprintf(f,
			"  not read         %u %s (userfaultfd or device memory: a read could "
			"wait), "
			"%s unreadable\n",
			st->skipped_regions, st->skipped_regions == 1 ? "mapping" : "mappings",
			bytes(a, sizeof(a), st->unreadable_bytes));
	loss_records(f, r, lc);
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
	if (!r->opts->watch)
		size_table(f, r);
	sites(f, r);
	changes(f, r);
	threads(f, r);
	processes(f, r);
	ages(f, r);
	at_peak(f, r);
	leak_check(f, r);
	if (r->target_exited && r->exit_code >= 0)
		fprintf(f, "\ntarget exited with status %d\n", r->exit_code);
	else if (r->target_exited && r->exit_signal)
		fprintf(f, "\ntarget was killed by signal %d\n", r->exit_signal);
	fflush(f);
	return ferror(f) ? -EIO : 0;
}
