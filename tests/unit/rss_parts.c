// SPDX-License-Identifier: GPL-2.0
/*
 * The RSS's parts as the analysis makes them (report/analysis_rss.c) from readings made up
 * here: they add up to VmRSS, glibc's walk or heaptap's blocks for live, each part's growth
 * fitted over the timeline, the part that leads, and the advice each case gives.
 */
#include "report/analysis_rss.h"
#include "unit.h"

#define MIB (1ULL << 20)
#define SECOND 1000000000ULL

static uint64_t sum(const struct rss_parts *p)
{
	return p->v[RSS_LIVE] + p->v[RSS_ALLOCATOR_FREE] + p->v[RSS_ALLOCATOR_UNKNOWN] +
	       p->v[RSS_STACKS] + p->v[RSS_ANON_OTHER] + p->v[RSS_FILES] + p->v[RSS_SHMEM];
}

static void glibc_walked(void)
{
	struct rss_reading x = { .vm_rss = 200 * MIB, .rss_anon = 190 * MIB, .rss_file = 8 * MIB,
				 .rss_shmem = 2 * MIB, .allocator = 170 * MIB, .stacks = MIB,
				 .walked = true, .live = 10 * MIB, .unknown = MIB,
				 .free_whole = 120 * MIB };
	struct snapshot snap = { .time_ns = 10 * SECOND };
	struct report r = { .rss_reading = &x, .snap = &snap };
	struct rss_parts p;

	analysis_rss__make(&r, 0, &p);
	CHECK_TRUE(p.known && p.live_walked, "read, live walked");
	CHECK_U64(sum(&p), 200 * MIB, "the parts add up to VmRSS");
	CHECK_U64(p.v[RSS_ALLOCATOR_FREE], 159 * MIB, "free: the allocator's less live and unknown");
	CHECK_U64(p.v[RSS_ANON_OTHER], 19 * MIB, "other: RssAnon less the allocator and stacks");
	CHECK_TRUE(isnan(p.growth[RSS_TOTAL]) && p.leading == -1, "no growth from one point");
	CHECK_STR(p.advice_kind ? p.advice_kind : "", "trim", "whole pages: trim");
	/* More resident pages measured than RssAnon: clipped, and said. */
	x.rss_anon = 160 * MIB;
	analysis_rss__make(&r, 0, &p);
	CHECK_U64(p.v[RSS_ANON_OTHER], 0, "nothing left for other anonymous memory");
	CHECK_U64(p.anon_excess, 11 * MIB, "the excess said");
}

static void between_walks(void)
{
	struct timeline *t = calloc(1, sizeof(*t));
	struct rss_reading x = { .vm_rss = 60 * MIB, .rss_anon = 60 * MIB, .allocator = 50 * MIB,
				 .walked = true, .live = 10 * MIB, .full_time_ns = 5 * SECOND };
	struct snapshot snap = { .time_ns = 9 * SECOND };
	struct report r = { .rss_reading = &x, .snap = &snap, .timeline = t };
	struct rss_parts p;

	if (!t)
		exit(2);
	/* The walk's report, its snapshot just before the read: 1 MiB tracked then. */
	timeline__add(t, &(struct timeline_point){ .time_ns = 4 * SECOND, .live_bytes = MIB });
	timeline__add(t, &(struct timeline_point){ .time_ns = 7 * SECOND, .live_bytes = 2 * MIB });
	analysis_rss__make(&r, 4.0 * MIB, &p);
	CHECK_U64(p.v[RSS_LIVE], 13 * MIB, "the walk's live and the 3 MiB tracked since");
	analysis_rss__make(&r, 0, &p);
	CHECK_U64(p.v[RSS_LIVE], 9 * MIB, "less what was freed since");
	x.full = true;
	analysis_rss__make(&r, 4.0 * MIB, &p);
	CHECK_U64(p.v[RSS_LIVE], 10 * MIB, "a full read now: the walk's");
	free(t);
}

static void other_allocator(void)
{
	struct rss_reading x = { .vm_rss = 100 * MIB, .rss_anon = 95 * MIB, .rss_file = 5 * MIB,
				 .allocator = 90 * MIB, .stacks = MIB };
	struct snapshot snap = { .time_ns = 10 * SECOND };
	struct report r = { .rss_reading = &x, .snap = &snap };
	struct rss_parts p;

	analysis_rss__make(&r, 30.0 * MIB, &p);
	CHECK_TRUE(!p.live_walked, "live from heaptap's blocks");
	CHECK_U64(p.v[RSS_LIVE], 30 * MIB, "live: the tracked blocks");
	CHECK_U64(p.v[RSS_ALLOCATOR_UNKNOWN], 60 * MIB, "the rest of the allocator's: unknown");
	CHECK_U64(p.v[RSS_ALLOCATOR_FREE], 0, "nothing said free");
	CHECK_U64(sum(&p), 100 * MIB, "the parts add up");
	CHECK_STR(p.advice_kind ? p.advice_kind : "", "purge", "an allocator to purge");
	analysis_rss__make(&r, 200.0 * MIB, &p);
	CHECK_U64(p.v[RSS_LIVE], 90 * MIB, "live never above the allocator's pages");
}

static void growth(void)
{
	struct timeline *t = calloc(1, sizeof(*t));
	struct rss_reading x = { .rss_file = 5 * MIB, .allocator = 20 * MIB, .stacks = MIB,
				 .walked = true, .live = 19 * MIB };
	struct snapshot snap;
	struct report r = { .rss_reading = &x, .snap = &snap, .timeline = t };
	struct rss_parts p;
	unsigned int i;

	if (!t)
		exit(2);
	/* Other anonymous memory grows 1 MiB a second; the rest stays. */
	for (i = 0; i < 10; i++) {
		struct timeline_point pt = { .time_ns = i * SECOND, .parts_known = true };

		x.rss_anon = x.allocator + x.stacks + i * MIB;
		x.vm_rss = x.rss_anon + x.rss_file;
		snap.time_ns = i * SECOND;
		analysis_rss__make(&r, 0, &p);
		memcpy(pt.parts, p.v, sizeof(pt.parts));
		timeline__add(t, &pt);
	}
	snap.time_ns = 10 * SECOND;
	x.rss_anon = x.allocator + x.stacks + 10 * MIB;
	x.vm_rss = x.rss_anon + x.rss_file;
	analysis_rss__make(&r, 0, &p);
	CHECK_U64(p.points, 11, "ten points and this one");
	CHECK_NEAR(p.growth[RSS_ANON_OTHER], (double)MIB, 1, "other anonymous: 1 MiB a second");
	CHECK_NEAR(p.growth[RSS_LIVE], 0, 1e-6, "live: flat");
	CHECK_I64(p.leading, RSS_ANON_OTHER, "other anonymous leads");
	free(t);
}

static void arenas(void)
{
	struct rss_arena a[5] = { { .main = true, .resident = MIB, .live = MIB } };
	struct rss_reading x = { .vm_rss = 100 * MIB, .rss_anon = 100 * MIB, .allocator = 90 * MIB,
				 .walked = true, .live = 10 * MIB, .free_whole = 10 * MIB,
				 .arenas = a, .narenas = 5 };
	struct snapshot snap = { .time_ns = SECOND };
	struct report r = { .rss_reading = &x, .snap = &snap };
	struct rss_parts p;
	int i;

	for (i = 1; i < 5; i++)
		a[i] = (struct rss_arena){ .resident = 22 * MIB, .live = 2 * MIB, .free = 20 * MIB };
	analysis_rss__make(&r, 0, &p);
	CHECK_STR(p.advice_kind ? p.advice_kind : "", "arena_max", "4 arenas each holding a peak");
	CHECK_TRUE(strstr(p.advice, "MALLOC_ARENA_MAX") != NULL, "%s", p.advice);
	/* One arena holding nearly all: not the arenas' number. */
	a[1].free = 70 * MIB;
	analysis_rss__make(&r, 0, &p);
	CHECK_STR(p.advice_kind ? p.advice_kind : "", "fragmentation",
		  "pinned between live blocks instead");
}

int main(void)
{
	glibc_walked();
	between_walks();
	other_allocator();
	growth();
	arenas();
	return unit__done("rss_parts");
}
