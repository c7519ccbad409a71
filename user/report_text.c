// SPDX-License-Identifier: GPL-2.0
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "report.h"

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

void report__attached_text(FILE *f, const struct report *r)
{
	size_t i, skipped = 0;

	if (r->opts->watch) {
		fprintf(f,
			"heaptap: watching PID %d (%s): new pages of anonymous memory, by the "
			"stack that writes each first\n",
			r->pid, r->comm);
		return;
	}
	fprintf(f, "heaptap: attached to PID %d (%s): %zu probes on %s\n", r->pid, r->comm,
		r->probes->links, r->allocator->file.path);
	fprintf(f, "heaptap: allocator chosen: %s\n", r->allocator->reason);
	for (i = 0; i < r->probes->n; i++)
		skipped += r->probes->v[i].skipped != NULL;
	if (!r->opts->verbose) {
		if (skipped)
			fprintf(f,
				"heaptap: %zu functions of the family not probed (-v lists them)\n",
				skipped);
		return;
	}
	for (i = 0; i < r->probes->n; i++) {
		const struct probe *p = &r->probes->v[i];

		if (p->skipped)
			fprintf(f, "heaptap:   %-40s not probed: %s\n", p->name, p->skipped);
		else
			fprintf(f, "heaptap:   %-40s %s at 0x%" PRIx64 "%s in %s%s\n", p->name,
				probes__kind_name(p->kind), p->offset,
				p->offset != p->start ? " (past its test for NULL)" : "",
				p->file->path, p->ret ? ", and its return" : "");
	}
}

static void header(FILE *f, const struct report *r)
{
	const struct heaptap_counters *c = &r->snap->counters;
	char a[32], b[32], d[32], e[32], t[32];
	uint64_t inexact = report__inexact(c);
	const char *sep = ": ";
	size_t i;

	fprintf(f, "\n=== heaptap %s report  %s  PID %d (%s)  %s since attach%s\n", r->type,
		clock_time(t, sizeof(t), r->snap->time_ns), r->pid, r->comm,
		duration(d, sizeof(d), r->snap->time_ns - r->attach_ns),
		r->target_exited ? "  [target exited]" : "");
	fprintf(f, "allocator  %s (%s)\n", r->allocator->file.path, r->allocator->reason);
	fprintf(f, "live       %s in %s blocks", bytes(a, sizeof(a), c->live_bytes),
		count(b, sizeof(b), c->allocs - c->frees));
	if (c->peak_bytes)
		fprintf(f, "   peak %s at %s (+%s)", bytes(e, sizeof(e), c->peak_bytes),
			clock_time(t, sizeof(t), c->peak_ns),
			duration(d, sizeof(d), c->peak_ns - r->attach_ns));
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
			"sampling   1 block in ~%s allocated: sites' live bytes are estimates, "
			"the size table counts sampled blocks\n",
			bytes(a, sizeof(a), r->opts->sample_bytes));
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
			count(v[2], sizeof(v[2]), c->allocs - c->frees),
			count(v[3], sizeof(v[3]), c->alloc_bytes - c->free_bytes),
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
		const struct sym_info *si = syms__find(r->syms, st->ips[i], i > 0);

		for (k = 0; k < si->nframes; k++) {
			const struct sym_frame *fr = &si->frames[k];
			const char *name = i || k ? fr->function : report__site_function(r, site);
			char fn[512], where[256] = "";

			if (!name)
				name = fr->function;
			if (fr->function && fr->inlined)
				snprintf(fn, sizeof(fn), "%s [inlined]", fr->function);
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

static void sites(FILE *f, const struct report *r)
{
	const struct snapshot *s = r->snap;
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
		fprintf(f, "\n");
		stack(f, r, site);
	}
	free(order);
	free(growth);
}

void report__text(FILE *f, const struct report *r)
{
	header(f, r);
	if (!r->opts->watch)
		size_table(f, r);
	sites(f, r);
	if (r->target_exited && r->exit_code >= 0)
		fprintf(f, "\ntarget exited with status %d\n", r->exit_code);
	else if (r->target_exited && r->exit_signal)
		fprintf(f, "\ntarget was killed by signal %d\n", r->exit_signal);
	fflush(f);
}
