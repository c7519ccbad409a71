// SPDX-License-Identifier: GPL-2.0
/* Where the RSS is: composed once per report, for every format to write out. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "report/analysis_rss.h"
#include "report/text.h"

/* A part leads the growth only past this much over the reports judged: less is a few pages
 * (an arena settling, a buffer grown once), as the host's agent judges a process. */
#define LEAD_MIN_BYTES (1ULL << 20)
/* A part "holds much" at this share of the RSS or more. */
#define MUCH 0.25

static uint64_t min64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/*
 * The live bytes heaptap tracked when the latest full read walked the heap: the timeline's
 * point of that report (its snapshot is taken before the read), or now's when it was this
 * one's.
 */
static double tracked_at_walk(const struct report *r, double tracked)
{
	const struct rss_reading *x = r->rss_reading;
	const struct timeline *t = r->timeline;
	size_t i;

	if (x->full || !t)
		return tracked;
	for (i = t->n; i-- > 0;)
		if (t->points[i].time_ns <= x->full_time_ns)
			return t->points[i].live_bytes;
	return tracked;
}

/* The reading split into parts that add up to VmRSS; tracked: heaptap's live bytes now, and
 * at the walk. */
static void compose(const struct rss_reading *x, double tracked, double at_walk,
		    struct rss_parts *p)
{
	uint64_t alloc = x->allocator, live, unknown, free, measured;
	uint64_t *v = p->v;
	double since;

	v[RSS_TOTAL] = x->vm_rss;
	v[RSS_FILES] = x->rss_file;
	v[RSS_SHMEM] = x->rss_shmem;
	v[RSS_STACKS] = x->stacks;
	if (x->walked) {
		/* The walk's figures, moved by what heaptap saw allocated and freed since, against
		 * the allocator's pages as they are now. */
		unknown = min64(x->unknown, alloc);
		since = (double)x->live + tracked - at_walk;
		live = since > 0 ? min64(llround(since), alloc - unknown) : 0;
		free = alloc - live - unknown;
		v[RSS_FREE_WHOLE_PAGES] = min64(x->free_whole, free);
		p->live_walked = true;
	} else {
		/* Another allocator: heaptap's blocks are live; the rest may be either. */
		live = tracked > 0 ? min64((uint64_t)tracked, alloc) : 0;
		unknown = alloc - live;
		free = 0;
	}
	v[RSS_LIVE] = live;
	v[RSS_ALLOCATOR_FREE] = free;
	v[RSS_ALLOCATOR_UNKNOWN] = unknown;
	measured = alloc + x->stacks;
	v[RSS_ANON_OTHER] = x->rss_anon > measured ? x->rss_anon - measured : 0;
	p->anon_excess = measured > x->rss_anon ? measured - x->rss_anon : 0;
}

/* Each part's growth over the timeline's points and this one, and the part that leads. */
static void growth(const struct report *r, uint64_t now_ns, struct rss_parts *p)
{
	uint64_t times[TIMELINE_POINTS + 1];
	double y[TIMELINE_POINTS + 1];
	const struct timeline *t = r->timeline;
	double best = 0;
	unsigned int n = 0, k;
	size_t i;

	p->leading = -1;
	for (k = 0; k < RSS_PARTS; k++) {
		struct trend tr;

		n = 0;
		for (i = 0; t && i < t->n; i++) {
			if (!t->points[i].parts_known || t->points[i].time_ns >= now_ns)
				continue;
			times[n] = t->points[i].time_ns;
			y[n++] = t->points[i].parts[k];
		}
		times[n] = now_ns;
		y[n++] = p->v[k];
		history__judge(times, y, n, &tr);
		p->growth[k] = n >= 3 ? tr.growth : NAN;
		p->points = n;
		/* The total leads nothing, and whole pages are a share of the free part. */
		if (k == RSS_TOTAL || k == RSS_FREE_WHOLE_PAGES || isnan(p->growth[k]) ||
		    p->growth[k] * tr.span_s < LEAD_MIN_BYTES || p->growth[k] <= best)
			continue;
		best = p->growth[k];
		p->leading = k;
	}
}

/* The arenas' free memory, and whether many threads' arenas share it, each holding a peak
 * of its own (n of them hold 1 MiB or more). */
static bool many_arenas(const struct rss_reading *x, uint64_t *free_sum, unsigned int *n_out)
{
	uint64_t largest = 0, each;
	unsigned int n = 0;
	size_t i;

	*free_sum = 0;
	for (i = 0; i < x->narenas; i++) {
		const struct rss_arena *a = &x->arenas[i];

		each = a->free;
		*free_sum += each;
		largest = each > largest ? each : largest;
		n += !a->main && each >= LEAD_MIN_BYTES;
	}
	*n_out = n;
	return n >= 4 && largest * 2 < *free_sum;
}

/* The name of the function that called the allocator in a stack, into buf ("?" if none). */
static const char *caller(const struct report *r, uint64_t stack_id, char *buf, size_t size)
{
	const struct stack *st = r->stacks ? stacks__get(r->stacks, stack_id) : NULL;
	const struct sym_info *si = st && st->n > 1 ? syms__find(report__syms(r, st), st->ips[1],
								  true)
						    : NULL;
	const struct sym_frame *f = si ? &si->frames[0] : NULL;

	if (f && f->function && f->file)
		snprintf(buf, size, "%s (%s:%d)", f->function, f->file, f->line);
	else
		snprintf(buf, size, "%s", f && f->function ? f->function : "?");
	return buf;
}

/* A site's sparse page: the site's stack, and the page. */
struct pin {
	uint64_t stack_id, page;
};

static int by_site_and_page(const void *a, const void *b)
{
	const struct pin *x = a, *y = b;

	if (x->stack_id != y->stack_id)
		return x->stack_id < y->stack_id ? -1 : 1;
	return x->page < y->page ? -1 : x->page > y->page;
}

/* A site's count of sparse pages into the top RSS_PINNERS, most first. */
static void consider_pinner(struct rss_parts *p, uint64_t stack_id, uint64_t pages)
{
	unsigned int i = p->npinners;

	if (i == RSS_PINNERS) {
		if (p->pinners[i - 1].pages >= pages)
			return;
		i--;
	} else {
		p->npinners++;
	}
	for (; i > 0 && p->pinners[i - 1].pages < pages; i--)
		p->pinners[i] = p->pinners[i - 1];
	p->pinners[i] = (struct rss_pinner){ stack_id, pages, "" };
}

/* The sites whose tracked blocks lie on the most sparsely used pages (each page counted once
 * per site). */
static void pinners(const struct report *r, struct rss_parts *p)
{
	const struct rss_reading *x = r->rss_reading;
	struct pin *pins = NULL;
	size_t n = 0, cap = 0, i, k, run;

	for (i = 0; i < r->nlive_blocks; i++) {
		const struct live_block *b = &r->live_blocks[i];
		uint64_t last = (b->addr + (b->size ? b->size : 1) - 1) & ~4095ULL;

		k = b->addr >= 4096 ? array__first_above(x->sparse_pages, x->nsparse,
							   sizeof(uint64_t), 0, (b->addr & ~4095ULL) - 1)
				    : 0;
		for (; k < x->nsparse && x->sparse_pages[k] <= last; k++) {
			if (array__reserve(&pins, &cap, n, sizeof(*pins)))
				goto out;
			pins[n++] = (struct pin){ b->stack_id, x->sparse_pages[k] };
		}
	}
	array__sort(pins, n, sizeof(*pins), by_site_and_page);
	for (i = 0; i < n; i = k) {
		for (k = i, run = 0; k < n && pins[k].stack_id == pins[i].stack_id; k++)
			run += k == i || pins[k].page != pins[k - 1].page;
		consider_pinner(p, pins[i].stack_id, run);
	}
out:
	free(pins);
	for (i = 0; i < p->npinners; i++)
		caller(r, p->pinners[i].stack_id, p->pinners[i].caller,
		       sizeof(p->pinners[i].caller));
}

/* The function that made a mapping: its stack's first frame out of the C library. */
static void mapper(const struct report *r, struct rss_map_site *ms)
{
	const struct sym_frame *f = report__mapper(r, ms->stack_id);

	if (!f)
		return;
	ms->function = f->function;
	ms->file = f->file;
	ms->line = f->line;
}

static int by_map_growth(const void *a, const void *b)
{
	const struct rss_map_site *x = a, *y = b;
	double gx = isnan(x->growth) ? -INFINITY : x->growth;
	double gy = isnan(y->growth) ? -INFINITY : y->growth;

	if (gx != gy)
		return gx > gy ? -1 : 1;
	return x->bytes > y->bytes ? -1 : x->bytes < y->bytes;
}

/* The map sites: each one's course over the full reads, its name, the fastest first. */
static void map_sites(const struct report *r, struct rss_parts *p)
{
	struct rss_map_site all[RSS_MAP_SITES * 4];
	size_t i, n = r->nmap_sites < RSS_MAP_SITES * 4 ? r->nmap_sites : RSS_MAP_SITES * 4;

	for (i = 0; i < n; i++) {
		const struct map_site *m = &r->map_sites[i];
		struct trend t;

		all[i] = (struct rss_map_site){ m->stack_id, m->bytes, m->size, m->mappings, NAN };
		if (r->map_history && history__trend(r->map_history, m->stack_id, &t) &&
		    t.points >= 3)
			all[i].growth = t.growth;
		mapper(r, &all[i]);
	}
	array__sort(all, n, sizeof(*all), by_map_growth);
	p->nmap_sites = n < RSS_MAP_SITES ? n : RSS_MAP_SITES;
	memcpy(p->map_sites, all, p->nmap_sites * sizeof(*all));
}

/* A mapping site's advice, when other anonymous memory leads the growth or holds much, and
 * a site of the program's made it. */
static bool advise_map_site(struct rss_parts *p, uint64_t total)
{
	const struct rss_map_site *ms = p->nmap_sites ? &p->map_sites[0] : NULL;
	char a[32], g[32], growth[48] = "", where[200];

	if (!ms || !ms->stack_id ||
	    (p->leading != RSS_ANON_OTHER && p->v[RSS_ANON_OTHER] < MUCH * total))
		return false;
	if (ms->file)
		snprintf(where, sizeof(where), "%s (%s:%d)", ms->function ? ms->function : "?",
			 ms->file, ms->line);
	else
		snprintf(where, sizeof(where), "%s", ms->function ? ms->function : "?");
	if (!isnan(ms->growth))
		snprintf(growth, sizeof(growth), ", %s%s/h", ms->growth < 0 ? "-" : "+",
			 bytes(g, sizeof(g), llround(fabs(ms->growth) * 3600)));
	p->advice_kind = "map_site";
	snprintf(p->advice, sizeof(p->advice),
		 "other anonymous memory %s: %s maps %s in %u mapping%s%s (its stack: the map "
		 "sites)",
		 p->leading == RSS_ANON_OTHER ? "grows" : "holds much", where,
		 bytes(a, sizeof(a), ms->bytes), ms->mappings, ms->mappings == 1 ? "" : "s", growth);
	return true;
}

/* One line of what to do, when a part holds much of the RSS or leads its growth. */
static void advise(const struct report *r, struct rss_parts *p)
{
	const struct rss_reading *x = r->rss_reading;
	const uint64_t *v = p->v;
	uint64_t total = v[RSS_TOTAL] ? v[RSS_TOTAL] : 1, pinned, arenas_free;
	unsigned int narenas;
	char a[32], b[128];

	pinned = v[RSS_ALLOCATOR_FREE] - v[RSS_FREE_WHOLE_PAGES];
	p->advice_kind = NULL;
	p->advice[0] = '\0';
	if (p->leading == RSS_ANON_OTHER && advise_map_site(p, total))
		return;
	if (x->walked && v[RSS_ALLOCATOR_FREE] >= MUCH * total &&
	    many_arenas(x, &arenas_free, &narenas) && arenas_free * 2 >= v[RSS_ALLOCATOR_FREE]) {
		p->advice_kind = "arena_max";
		snprintf(p->advice, sizeof(p->advice),
			 "%u threads' arenas each hold free memory (%s in all): "
			 "MALLOC_ARENA_MAX=2 bounds their number; malloc_trim(0) returns %s of "
			 "it now",
			 narenas, bytes(a, sizeof(a), arenas_free),
			 bytes(b, sizeof(b), v[RSS_FREE_WHOLE_PAGES]));
	} else if (x->walked && v[RSS_FREE_WHOLE_PAGES] >= MUCH * total) {
		p->advice_kind = "trim";
		snprintf(p->advice, sizeof(p->advice),
			 "%s of whole free pages in malloc's heaps: malloc_trim(0) returns them",
			 bytes(a, sizeof(a), v[RSS_FREE_WHOLE_PAGES]));
	} else if (x->walked && pinned >= MUCH * total) {
		char site[200], pages[48];

		p->advice_kind = "fragmentation";
		if (p->npinners)
			snprintf(site, sizeof(site), "; %s pins the most, %" PRIu64 " pages",
				 p->pinners[0].caller, p->pinners[0].pages);
		snprintf(pages, sizeof(pages), " on %zu sparsely used pages", x->nsparse);
		snprintf(p->advice, sizeof(p->advice),
			 "%s free between live blocks (fragmentation)%s%s: pool the short-lived "
			 "blocks, or another allocator",
			 bytes(a, sizeof(a), pinned), x->nsparse ? pages : "",
			 p->npinners ? site : "");
	} else if (!x->walked && v[RSS_ALLOCATOR_UNKNOWN] >= MUCH * total) {
		p->advice_kind = "purge";
		snprintf(p->advice, sizeof(p->advice),
			 "%s of the allocator's pages hold no block heaptap saw allocated: free "
			 "(its purge returns them: jemalloc's arena.<i>.purge, tcmalloc's "
			 "ReleaseFreeMemory) or blocks older than the attach",
			 bytes(a, sizeof(a), v[RSS_ALLOCATOR_UNKNOWN]));
	} else if (advise_map_site(p, total)) {
		return;
	} else if (p->leading == RSS_STACKS) {
		p->advice_kind = "stacks";
		snprintf(p->advice, sizeof(p->advice),
			 "threads' stacks grow (%u threads): threads that never end, or deep "
			 "recursion", x->threads);
	}
}

void analysis_rss__make(const struct report *r, double tracked, struct rss_parts *out)
{
	memset(out, 0, sizeof(*out));
	out->leading = -1;
	if (!r->rss_reading)
		return;
	out->known = true;
	compose(r->rss_reading, tracked, tracked_at_walk(r, tracked), out);
	growth(r, r->snap->time_ns, out);
	map_sites(r, out);
	if (r->rss_reading->full && r->rss_reading->nsparse) {
		pinners(r, out);
	} else if (!r->rss_reading->full && r->rss_npinners && r->rss_npinners <= RSS_PINNERS) {
		memcpy(out->pinners, r->rss_pinners, r->rss_npinners * sizeof(*out->pinners));
		out->npinners = r->rss_npinners;
	}
	advise(r, out);
}
