// SPDX-License-Identifier: GPL-2.0
/*
 * Prometheus' text exposition format, version 0.0.4. Label values are bounded: size classes
 * are grouped by powers of two (at most 65), sites are the top --top, causes are a fixed
 * list; nothing is labelled by address or stack id. Every label value goes through escape.h
 * here, whatever was done where it entered heaptap (escaping is idempotent): Prometheus
 * refuses a whole scrape for one label value that is not UTF-8.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/escape.h"
#include "report/report.h"

/* Where the text goes, and the first failure met on the way. */
struct prom {
	FILE *f;
	int err;
};

/* A label: its value made valid UTF-8 without control characters, then escaped as the
 * format wants (backslash, double quote, newline). */
static void label(struct prom *p, const char *name, const char *value)
{
	char *text = escape__dup(value ? value : "");
	const char *c;

	if (!text)
		p->err = p->err ?: -ENOMEM;
	fprintf(p->f, "%s=\"", name);
	for (c = text ? text : ""; *c; c++) {
		if (*c == '\\' || *c == '"')
			fputc('\\', p->f);
		if (*c == '\n')
			fputs("\\n", p->f);
		else
			fputc(*c, p->f);
	}
	fputc('"', p->f);
	free(text);
}

int report__prom_label(FILE *f, const char *name, const char *value)
{
	struct prom p = { .f = f };

	label(&p, name, value);
	return p.err;
}

static void family(struct prom *p, const char *name, const char *type, const char *help)
{
	fprintf(p->f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void single(struct prom *p, const char *name, const char *type, const char *help, double v)
{
	family(p, name, type, help);
	fprintf(p->f, "%s %.17g\n", name, v);
}

/* Size classes by powers of two: sizes (2^(k-1), 2^k], named "0-1", "2", "3-4", "5-8"... */
struct pow2_class {
	uint64_t allocs, live, live_bytes, total_bytes;
};

static unsigned int pow2_index(uint64_t max)
{
	unsigned int k = 0;

	while (k < 64 && (1ULL << k) < max)
		k++;
	return k;
}

static void size_classes(struct prom *p, const struct report *r)
{
	static const char *const names[] = { "heaptap_size_class_live_bytes",
					     "heaptap_size_class_live_objects",
					     "heaptap_size_class_allocs_total",
					     "heaptap_size_class_allocated_bytes_total" };
	static const char *const helps[] = {
		"Live bytes in blocks of the size class.",
		"Live blocks of the size class.",
		"Blocks of the size class allocated since attach.",
		"Bytes in blocks of the size class allocated since attach.",
	};
	const struct size_row *rows = r->analysis.sizes;
	struct pow2_class c[65] = {};
	size_t n = r->analysis.nsizes, i;
	char name[48];
	unsigned int k;

	for (i = 0; i < n; i++) {
		k = pow2_index(rows[i].max);
		c[k].allocs += rows[i].c.allocs;
		c[k].live += heaptap_class_live(&rows[i].c);
		c[k].live_bytes += heaptap_class_live_bytes(&rows[i].c);
		c[k].total_bytes += rows[i].c.alloc_bytes;
	}
	for (i = 0; i < 4; i++) {
		family(p, names[i], i < 2 ? "gauge" : "counter", helps[i]);
		for (k = 0; k < 65; k++) {
			uint64_t v = i == 0   ? c[k].live_bytes
				     : i == 1 ? c[k].live
				     : i == 2 ? c[k].allocs
					      : c[k].total_bytes;

			if (!c[k].allocs)
				continue;
			if (k <= 1)
				snprintf(name, sizeof(name), k ? "2" : "0-1");
			else if (k == 64)
				snprintf(name, sizeof(name), "%" PRIu64 "-", ((uint64_t)1 << 63) + 1);
			else
				snprintf(name, sizeof(name), "%" PRIu64 "-%" PRIu64,
					 ((uint64_t)1 << (k - 1)) + 1, (uint64_t)1 << k);
			fprintf(p->f, "%s{", names[i]);
			label(p, "class", name);
			fprintf(p->f, "} %" PRIu64 "\n", v);
		}
	}
}

/* The frame a site's blocks are charged to: the allocator's caller (with --watch, the code
 * that wrote the page), innermost inlined call first. */
static const struct sym_frame *site_frame(const struct report *r, const struct site *site)
{
	const struct stack *st = stacks__get(r->stacks, site->stack_id);
	size_t k = r->figures->pages ? 0 : 1;

	if (!st || st->n <= k)
		return NULL;
	return &syms__find(report__syms(r, st), st->ips[k], k > 0)->frames[0];
}

/* A source location as a label shows it: the file's base name and the line, malloc'd; NULL
 * without a file. */
static char *location(struct prom *p, const char *file, int line)
{
	const char *base = file ? strrchr(file, '/') : NULL;
	char *where;

	if (!file)
		return NULL;
	if (asprintf(&where, "%s:%d", base ? base + 1 : file, line) >= 0)
		return where;
	p->err = p->err ?: -ENOMEM;
	return NULL;
}

static void sites(struct prom *p, const struct report *r)
{
	size_t i;

	family(p, "heaptap_site_live_bytes", "gauge",
	       "Live bytes of a top site (by rank, as in heaptap's report), estimated when "
	       "sampled.");
	for (i = 0; i < r->analysis.nsites; i++) {
		const struct site *site = r->analysis.sites[i].site;
		const struct sym_frame *fr = site_frame(r, site);
		char rank[24], *where = fr ? location(p, fr->file, fr->line) : NULL;

		snprintf(rank, sizeof(rank), "%zu", i + 1);
		fputs("heaptap_site_live_bytes{", p->f);
		label(p, "rank", rank);
		fputc(',', p->f);
		label(p, "function", fr && fr->function ? fr->function : "[unknown]");
		fputc(',', p->f);
		label(p, "location", where ? where : "");
		fputc(',', p->f);
		label(p, "allocator", report__site_function(r, site));
		fprintf(p->f, "} %" PRIu64 "\n", report__site_bytes(r, site));
		free(where);
	}
}

static void counters(struct prom *p, const struct report *r)
{
	const struct heaptap_counters *c = &r->snap->counters;
	size_t i;

	single(p, "heaptap_up", "gauge", "1 while the target is traced, 0 once it has exited.",
	       !r->target_exited);
	single(p, "heaptap_live_bytes", "gauge",
	       "Bytes allocated since attach and not freed (estimated when sampled; with "
	       "--watch: bytes of new pages).",
	       round(r->analysis.live));
	single(p, "heaptap_live_objects", "gauge",
	       "Blocks allocated since attach and not freed (estimated when sampled; with "
	       "--watch: new pages).",
	       round(r->analysis.live_blocks));
	single(p, "heaptap_peak_bytes", "gauge", "The highest live bytes since attach.",
	       round(r->analysis.peak));
	single(p, "heaptap_allocs_total", "counter",
	       "Blocks recorded (all, or sampled) since attach.", c->allocs);
	single(p, "heaptap_frees_total", "counter", "Recorded blocks freed since.", c->frees);
	single(p, "heaptap_allocated_bytes_total", "counter",
	       "Bytes of the blocks recorded since attach.", c->alloc_bytes);
	single(p, "heaptap_freed_bytes_total", "counter", "Bytes of recorded blocks freed since.",
	       c->free_bytes);
	single(p, "heaptap_failed_calls_total", "counter",
	       "Allocating calls that returned NULL or threw.", c->failed);
	family(p, "heaptap_calls_total", "counter",
	       "Outermost calls of each allocator function since attach.");
	for (i = 0; i < report__nprobes(r) && i < HEAPTAP_MAX_FUNCS; i++) {
		if (r->probes->v[i].skipped || r->probes->v[i].kind == PROBE_UNWIND)
			continue;
		fputs("heaptap_calls_total{", p->f);
		label(p, "function", r->probes->v[i].name);
		fprintf(p->f, "} %" PRIu64 "\n", r->snap->fn_calls[i]);
	}
}

static void health(struct prom *p, const struct report *r)
{
	const struct heaptap_counters *c = &r->snap->counters;
	size_t i;
	int k;

	family(p, "heaptap_inexact_total", "counter",
	       "Events that make the figures inexact, by cause (see heaptap(8)).");
	for (i = 0; i < report__ninexact_causes; i++) {
		fputs("heaptap_inexact_total{", p->f);
		label(p, "cause", report__inexact_causes[i].key);
		fprintf(p->f, "} %" PRIu64 "\n",
			report__inexact_count(c, &report__inexact_causes[i]));
	}
	if (!isnan(r->growth))
		single(p, "heaptap_growth_bytes_per_hour", "gauge",
		       "Slope of live bytes over the latest 20 reports (what --alert-growth "
		       "checks).",
		       r->growth * 3600);
	single(p, "heaptap_suspects", "gauge",
	       "Sites whose live bytes grow steadily: likely leaks (see heaptap(8)).",
	       r->analysis.nsuspects);
	if (r->alarms) {
		family(p, "heaptap_alerts_total", "counter", "Alarms fired, by alarm.");
		for (k = 0; k < ALARMS; k++) {
			if (!r->alarms->threshold[k])
				continue;
			fputs("heaptap_alerts_total{", p->f);
			label(p, "alert", alarms__name(k));
			fprintf(p->f, "} %" PRIu64 "\n", r->alarms->count[k]);
		}
	}
	single(p, "heaptap_lost_samples_total", "counter",
	       "Stacks heaptap should have unwound but had no room for.", c->lost_samples);
	single(p, "heaptap_target_rss_bytes", "gauge", "The target's resident memory.", r->rss);
	single(p, "heaptap_rss_bytes", "gauge", "heaptap's own resident memory.", r->self_rss);
	single(p, "heaptap_map_bytes", "gauge", "Kernel memory of heaptap's BPF maps.", r->self_maps);
	if (!isnan(r->slowdown))
		single(p, "heaptap_slowdown_ratio", "gauge",
		       "The target's time spent in heaptap's probes, as a fraction of its CPU time "
		       "(estimated from calls and the measured cost of a probe).",
		       r->slowdown);
	single(p, "heaptap_reports_total", "counter", "Reports made; metrics refresh at each.",
	       r->number);
	single(p, "heaptap_elapsed_seconds", "gauge", "Time since attach.",
	       snapshot__age(r->snap, r->attach_ns) / 1e9);
}

/* Processes shown by pid and comm, at most: labels of bounded cardinality, however many
 * workers a service forks. */
#define PROM_PROCESSES 20

/* The processes traced now, the PROM_PROCESSES with the most live bytes, and how many. */
static void processes(struct prom *p, const struct report *r)
{
	static const char *const names[] = { "heaptap_process_live_bytes",
					     "heaptap_process_allocs_total" };
	static const char *const helps[] = {
		"Live bytes of a traced process (the first 20 by live bytes).",
		"Blocks a traced process allocated since it was traced (the same 20).",
	};
	struct report_process *const *v = r->analysis.alive;
	size_t alive = r->analysis.nalive, i, k;

	single(p, "heaptap_processes", "gauge", "Processes traced now.", alive);
	for (k = 0; k < 2; k++) {
		family(p, names[k], k ? "counter" : "gauge", helps[k]);
		for (i = 0; i < alive && i < PROM_PROCESSES; i++) {
			char pid[16];

			snprintf(pid, sizeof(pid), "%d", v[i]->p->t.pid);
			fprintf(p->f, "%s{", names[k]);
			label(p, "pid", pid);
			fputc(',', p->f);
			label(p, "comm", v[i]->p->t.comm);
			fprintf(p->f, "} %" PRIu64 "\n",
				k ? (uint64_t)v[i]->c.allocs : v[i]->live_bytes);
		}
	}
}

/* A map site's labels: its rank in the report, the function that mapped and its file:line
 * ("[unknown]" and "" for the mappings no call seen made). */
static void map_site_labels(struct prom *p, const char *name, unsigned int rank,
			    const struct rss_map_site *ms)
{
	char r[16], *where = location(p, ms->file, ms->line);

	snprintf(r, sizeof(r), "%u", rank);
	fprintf(p->f, "%s{", name);
	label(p, "rank", r);
	fputc(',', p->f);
	label(p, "function", ms->function ? ms->function : "[unknown]");
	fputc(',', p->f);
	label(p, "location", where ? where : "");
	fputc('}', p->f);
	free(where);
}

/* The map sites the report lists (RSS_MAP_SITES at most, in its order): their resident
 * bytes, and their growth where it is known. */
static void map_sites(struct prom *p, const struct rss_parts *rp)
{
	unsigned int i;

	family(p, "heaptap_rss_map_site_bytes", "gauge",
	       "Resident bytes of the program's anonymous mappings made from one stack (the "
	       "report's map sites, at most 8).");
	for (i = 0; i < rp->nmap_sites; i++) {
		map_site_labels(p, "heaptap_rss_map_site_bytes", i + 1, &rp->map_sites[i]);
		fprintf(p->f, " %" PRIu64 "\n", rp->map_sites[i].bytes);
	}
	family(p, "heaptap_rss_map_site_growth_bytes_per_hour", "gauge",
	       "Each map site's growth over the full reads (absent before three).");
	for (i = 0; i < rp->nmap_sites; i++) {
		if (isnan(rp->map_sites[i].growth))
			continue;
		map_site_labels(p, "heaptap_rss_map_site_growth_bytes_per_hour", i + 1,
				&rp->map_sites[i]);
		fprintf(p->f, " %.17g\n", rp->map_sites[i].growth * 3600);
	}
}

/* Where the target's RSS is: each part, its growth when known, the part that leads. */
static void rss_parts(struct prom *p, const struct report *r)
{
	const struct rss_parts *rp = &r->analysis.rss;
	int k;

	if (!rp->known)
		return;
	family(p, "heaptap_rss_part_bytes", "gauge",
	       "Where the target's RSS is, by part; the parts but total add up to total "
	       "(allocator_free_whole_pages is part of allocator_free).");
	for (k = 0; k < RSS_PARTS; k++) {
		fputs("heaptap_rss_part_bytes{", p->f);
		label(p, "part", rss__part_name(k));
		fprintf(p->f, "} %" PRIu64 "\n", rp->v[k]);
	}
	if (!isnan(rp->growth[RSS_TOTAL])) {
		family(p, "heaptap_rss_part_growth_bytes_per_hour", "gauge",
		       "Each part's growth: its slope over the reports.");
		for (k = 0; k < RSS_PARTS; k++) {
			fputs("heaptap_rss_part_growth_bytes_per_hour{", p->f);
			label(p, "part", rss__part_name(k));
			fprintf(p->f, "} %.17g\n", rp->growth[k] * 3600);
		}
	}
	family(p, "heaptap_rss_part_leading", "gauge",
	       "1 for the part that leads the RSS's growth (none when nothing grows).");
	for (k = 0; k < RSS_PARTS; k++) {
		if (k == RSS_TOTAL || k == RSS_FREE_WHOLE_PAGES)
			continue;
		fputs("heaptap_rss_part_leading{", p->f);
		label(p, "part", rss__part_name(k));
		fprintf(p->f, "} %d\n", rp->leading == k);
	}
	if (r->rss_reading)
		single(p, "heaptap_rss_arenas", "gauge", "glibc's arenas (the main one included).",
		       r->rss_reading->narenas);
	map_sites(p, rp);
}

int report__prometheus(FILE *f, const struct report *r)
{
	struct prom p = { .f = f };
	char pid[16];

	snprintf(pid, sizeof(pid), "%d", r->pid);
	family(&p, "heaptap_target_info", "gauge", "The traced process; always 1.");
	fputs("heaptap_target_info{", f);
	label(&p, "pid", pid);
	fputc(',', f);
	label(&p, "comm", r->comm);
	fputc(',', f);
	label(&p, "allocator", r->allocator->file.name);
	fputc(',', f);
	label(&p, "mode", r->figures->mode);
	fputs("} 1\n", f);
	counters(&p, r);
	size_classes(&p, r);
	sites(&p, r);
	processes(&p, r);
	health(&p, r);
	rss_parts(&p, r);
	return p.err ?: ferror(f) ? -EIO : 0;
}
