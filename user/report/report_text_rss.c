// SPDX-License-Identifier: GPL-2.0
/* Where the RSS is, in the text report: the analysis's parts written out. */
#include <math.h>
#include <stdio.h>

#include "report/report.h"
#include "report/report_text_rss.h"
#include "report/text.h"

/* The parts as the text names them. */
static const char *const words[RSS_PARTS] = {
	[RSS_TOTAL] = "total",
	[RSS_LIVE] = "live",
	[RSS_ALLOCATOR_FREE] = "allocator free",
	[RSS_FREE_WHOLE_PAGES] = "whole free pages",
	[RSS_ALLOCATOR_UNKNOWN] = "allocator's, live or free",
	[RSS_STACKS] = "stacks",
	[RSS_ANON_OTHER] = "other anonymous",
	[RSS_FILES] = "files",
	[RSS_SHMEM] = "shmem",
};

/* "+1.2 MiB/h", "-3.0 KiB/h". */
static const char *per_hour(char *buf, size_t size, double bytes_per_s)
{
	char b[32];
	double h = bytes_per_s * 3600;

	snprintf(buf, size, "%s%s/h", h < 0 ? "-" : "+", bytes(b, sizeof(b), llround(fabs(h))));
	return buf;
}

static void parts(FILE *f, const struct report *r, const struct rss_parts *p)
{
	const uint64_t *v = p->v;
	char a[6][32];

	fprintf(f, "rss        %s: live %s%s", bytes(a[0], sizeof(a[0]), v[RSS_TOTAL]),
		p->live_walked ? "" : ">= ", bytes(a[1], sizeof(a[1]), v[RSS_LIVE]));
	if (p->live_walked)
		fprintf(f, ", allocator free %s (%s in whole pages)",
			bytes(a[2], sizeof(a[2]), v[RSS_ALLOCATOR_FREE]),
			bytes(a[3], sizeof(a[3]), v[RSS_FREE_WHOLE_PAGES]));
	if (v[RSS_ALLOCATOR_UNKNOWN] || !p->live_walked)
		fprintf(f, ", %s %s", p->live_walked ? "not walked" : "allocator's, live or free",
			bytes(a[2], sizeof(a[2]), v[RSS_ALLOCATOR_UNKNOWN]));
	fprintf(f, ", stacks %s (%u threads), other anonymous %s, files %s, shmem %s\n",
		bytes(a[3], sizeof(a[3]), v[RSS_STACKS]), r->rss_reading->threads,
		bytes(a[4], sizeof(a[4]), v[RSS_ANON_OTHER]),
		bytes(a[5], sizeof(a[5]), v[RSS_FILES]), bytes(a[0], sizeof(a[0]), v[RSS_SHMEM]));
}

static void growth(FILE *f, const struct rss_parts *p)
{
	const char *sep = "";
	char a[40];
	int k;

	if (isnan(p->growth[RSS_TOTAL]))
		return;
	fprintf(f, "rss growth ");
	if (p->leading >= 0)
		fprintf(f, "%s leads, %s; ", words[p->leading],
			per_hour(a, sizeof(a), p->growth[p->leading]));
	for (k = 0; k < RSS_PARTS; k++) {
		if (k == p->leading || llround(p->growth[k] * 3600) == 0)
			continue;
		fprintf(f, "%s%s %s", sep, words[k], per_hour(a, sizeof(a), p->growth[k]));
		sep = ", ";
	}
	fprintf(f, "%s(over %u reports)\n", *sep ? " " : "nothing grows ", p->points);
}

void report__text_rss(FILE *f, const struct report *r)
{
	const struct rss_parts *p = &r->analysis.rss;

	if (!p->known) {
		fprintf(f, "rss        not split: %s\n", r->rss_note ? r->rss_note : "not read");
		return;
	}
	parts(f, r, p);
	growth(f, p);
	if (p->advice_kind)
		fprintf(f, "advice     %s\n", p->advice);
}

void report__text_arenas(FILE *f, const struct report *r)
{
	const struct rss_reading *x = r->rss_reading;
	char v[7][32];
	size_t i;

	if (!r->analysis.rss.known || !x || x->narenas < 2)
		return;
	fprintf(f, "\nARENA (glibc)        HEAPS  THREADS     RESIDENT         LIVE         FREE  "
		   "WHOLE PAGES      UNKNOWN\n");
	for (i = 0; i < x->narenas; i++) {
		const struct rss_arena *a = &x->arenas[i];

		if (a->main)
			snprintf(v[0], sizeof(v[0]), "main (brk)");
		else
			snprintf(v[0], sizeof(v[0]), "0x%" PRIx64, a->address);
		fprintf(f, "%-20s %5u %8s %12s %12s %12s %12s %12s\n", v[0], a->heaps,
			a->threads ? count(v[1], sizeof(v[1]), a->threads) : "?",
			bytes(v[2], sizeof(v[2]), a->resident), bytes(v[3], sizeof(v[3]), a->live),
			bytes(v[4], sizeof(v[4]), a->free), bytes(v[5], sizeof(v[5]), a->free_whole),
			bytes(v[6], sizeof(v[6]), a->unknown));
	}
}

void report__text_map_sites(FILE *f, const struct report *r)
{
	const struct rss_parts *p = &r->analysis.rss;
	char a[32], b[32], g[40];
	unsigned int i;

	if (!p->known || !p->nmap_sites)
		return;
	fprintf(f, "\nMAP SITES: the program's anonymous mappings, by the stack that made them\n");
	for (i = 0; i < p->nmap_sites; i++) {
		const struct rss_map_site *ms = &p->map_sites[i];
		struct site site = { .stack_id = ms->stack_id, .fn = UINT32_MAX };

		fprintf(f, "#%u  %s resident in %u mapping%s (%s mapped)%s%s\n", i + 1,
			bytes(a, sizeof(a), ms->bytes), ms->mappings, ms->mappings == 1 ? "" : "s",
			bytes(b, sizeof(b), ms->size), isnan(ms->growth) ? "" : ", ",
			isnan(ms->growth) ? "" : per_hour(g, sizeof(g), ms->growth));
		if (ms->stack_id)
			text__stack(f, r, &site);
		else
			fprintf(f, "      (mapped before the attach, or not seen mapped)\n");
	}
}
