// SPDX-License-Identifier: GPL-2.0
/* Where the RSS is: composed once per report, for every format to write out. */
#include <math.h>
#include <stdio.h>
#include <string.h>

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

/* The reading split into parts that add up to VmRSS. */
static void compose(const struct rss_reading *x, double tracked, struct rss_parts *p)
{
	uint64_t alloc = x->allocator, live, unknown, free, measured;
	uint64_t *v = p->v;

	v[RSS_TOTAL] = x->vm_rss;
	v[RSS_FILES] = x->rss_file;
	v[RSS_SHMEM] = x->rss_shmem;
	v[RSS_STACKS] = x->stacks;
	if (x->walked) {
		/* The walk's figures, against the allocator's pages as they are now. */
		live = min64(x->live, alloc);
		unknown = min64(x->unknown, alloc - live);
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

/* One line of what to do, when a part holds much of the RSS or leads its growth. */
static void advise(const struct report *r, struct rss_parts *p)
{
	const struct rss_reading *x = r->rss_reading;
	const uint64_t *v = p->v;
	uint64_t total = v[RSS_TOTAL] ? v[RSS_TOTAL] : 1, pinned, arenas_free;
	unsigned int narenas;
	char a[32], b[32];

	pinned = v[RSS_ALLOCATOR_FREE] - v[RSS_FREE_WHOLE_PAGES];
	p->advice_kind = NULL;
	p->advice[0] = '\0';
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
		p->advice_kind = "fragmentation";
		snprintf(p->advice, sizeof(p->advice),
			 "%s free between live blocks (fragmentation): blocks of different "
			 "lifetimes share pages; pool the short-lived ones, or another allocator",
			 bytes(a, sizeof(a), pinned));
	} else if (!x->walked && v[RSS_ALLOCATOR_UNKNOWN] >= MUCH * total) {
		p->advice_kind = "purge";
		snprintf(p->advice, sizeof(p->advice),
			 "%s of the allocator's pages hold no block heaptap saw allocated: free "
			 "(its purge returns them: jemalloc's arena.<i>.purge, tcmalloc's "
			 "ReleaseFreeMemory) or blocks older than the attach",
			 bytes(a, sizeof(a), v[RSS_ALLOCATOR_UNKNOWN]));
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
	compose(r->rss_reading, tracked, out);
	growth(r, r->snap->time_ns, out);
	advise(r, out);
}
