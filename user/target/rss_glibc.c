// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "target/glibc_heap.h"
#include "target/rss_glibc.h"

/* Chunks the tcaches' and fastbins' lists are followed for at most, in all, at a read. */
#define BIN_CHUNKS_MAX (1ULL << 20)

enum region_kind {
	REGION_BRK,	/* the main arena's heap */
	REGION_HEAP,	/* a thread arena's heap */
	REGION_MMAPPED, /* chunks mmapped for large blocks */
};

/* A mapping of the allocator's, or the part of one it holds. */
struct region {
	uint64_t start, end;	   /* its pages */
	uint64_t first, walk_end;  /* its chunks (not REGION_MMAPPED's) */
	uint64_t arena;		   /* REGION_HEAP: its arena's state */
	enum region_kind kind;
	size_t vma;		   /* the mapping it is in */
};

/* A mapping judged for mmapped chunks, kept while it stays the same. */
struct mmapped_verdict {
	uint64_t start, end, chunks_end;
};

struct rss_glibc {
	struct region *v; /* in address order */
	size_t n, cap;
	struct page_runs runs; /* their resident pages, as of the latest read */
	struct mmapped_verdict *mm;
	size_t nmm, mm_cap;
};

int rss_glibc__new(struct rss_glibc **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

void rss_glibc__free(struct rss_glibc *g)
{
	if (!g)
		return;
	free(g->v);
	page_runs__free(&g->runs);
	free(g->mm);
	free(g);
}

static int add_region(struct rss_glibc *g, const struct region *r)
{
	if (array__reserve(&g->v, &g->cap, g->n, sizeof(*g->v)))
		return -ENOMEM;
	g->v[g->n++] = *r;
	return 0;
}

/* n words at addr, if its page is resident: a page's state read, then the words. */
static bool read_words(struct pagemap *pm, struct memory *mem, uint64_t addr, uint64_t *w,
		       size_t n)
{
	struct page_runs page = {};
	const void *at;
	bool ok = false;

	if (!pagemap__resident(pm, addr, addr + n * 8, &page)) {
		memory__use(mem, &page);
		at = memory__at(mem, addr, n * 8, n * 8);
		if (at) {
			memcpy(w, at, n * 8);
			ok = true;
		}
		memory__use(mem, NULL);
	}
	page_runs__free(&page);
	return ok;
}

/* The arenas' heaps in mapping i: each starts with a heap_info at a 64 MiB boundary. */
static int find_heaps(struct rss_glibc *g, struct pagemap *pm, struct memory *mem,
		      const struct vmas *v, size_t i, bool *taken)
{
	const struct vma *m = &v->v[i];
	uint64_t at = (m->start + GLIBC_HEAP_MAX - 1) & ~(GLIBC_HEAP_MAX - 1), w[4];
	int err = 0;

	for (; !err && at >= m->start && at < m->end; at += GLIBC_HEAP_MAX) {
		struct region r = { .kind = REGION_HEAP, .start = at, .vma = i };

		if (!read_words(pm, mem, at, w, 4) || !heap_info__is(at, m->end, w))
			continue;
		r.end = at + w[3];
		r.first = glibc_heap__first_chunk(at, w[0]);
		r.walk_end = at + w[2];
		r.arena = w[0];
		taken[i] = true;
		err = add_region(g, &r);
	}
	return err;
}

int rss_glibc__find(struct rss_glibc *g, struct pagemap *pm, struct memory *mem,
		    const struct vmas *v, bool *taken)
{
	size_t i;
	int err = 0;

	g->n = 0;
	for (i = 0; !err && i < v->n; i++) {
		const struct vma *m = &v->v[i];

		if (m->kind == VMA_HEAP && vma__private_anon(m)) {
			taken[i] = true;
			err = add_region(g, &(struct region){ .kind = REGION_BRK, .start = m->start,
							      .end = m->end, .first = m->start,
							      .walk_end = m->end, .vma = i });
		} else if (vma__private_anon(m)) {
			err = find_heaps(g, pm, mem, v, i, taken);
		}
	}
	return err;
}

/* The verdict kept for mapping m, or NULL. */
static const struct mmapped_verdict *kept(const struct mmapped_verdict *mm, size_t n,
					  const struct vma *m)
{
	size_t i = array__first_above(mm, n, sizeof(*mm), offsetof(struct mmapped_verdict, start),
				      m->start - 1);

	return i < n && mm[i].start == m->start && mm[i].end == m->end ? &mm[i] : NULL;
}

/* Where the mmapped chunks back to back from the start of m end: a chunk's header read at a
 * time, its page resident. */
static uint64_t mmapped_end(struct pagemap *pm, struct memory *mem, const struct vma *m)
{
	struct chunk_walk w = {};
	uint64_t p = m->start;

	for (;;) {
		struct page_runs page = {};
		uint64_t next = p;

		if (!pagemap__resident(pm, p, p + 16, &page)) {
			memory__use(mem, &page);
			next = glibc_heap__mmapped(mem, p, m->end, &w);
			memory__use(mem, NULL);
		}
		page_runs__free(&page);
		if (next == p)
			return p;
		p = next;
	}
}

static int by_start(const void *a, const void *b)
{
	const struct region *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

int rss_glibc__find_mmapped(struct rss_glibc *g, struct pagemap *pm, struct memory *mem,
			    const struct vmas *v, bool *taken, const bool *is_stack)
{
	struct mmapped_verdict *mm = calloc(v->n + 1, sizeof(*mm));
	size_t i, n = 0;
	int err = 0;

	if (!mm)
		return -ENOMEM;
	for (i = 0; !err && i < v->n; i++) {
		const struct vma *m = &v->v[i];
		const struct mmapped_verdict *before = kept(g->mm, g->nmm, m);

		if (taken[i] || is_stack[i] || m->kind != VMA_ANON || !vma__private_anon(m))
			continue;
		mm[n] = (struct mmapped_verdict){ m->start, m->end,
						  before ? before->chunks_end
							 : mmapped_end(pm, mem, m) };
		if (mm[n].chunks_end > m->start) {
			taken[i] = true;
			err = add_region(g, &(struct region){ .kind = REGION_MMAPPED,
							      .start = m->start,
							      .end = mm[n].chunks_end, .vma = i });
		}
		n++;
	}
	free(g->mm);
	g->mm = mm;
	g->nmm = n;
	g->mm_cap = v->n + 1;
	array__sort(g->v, g->n, sizeof(*g->v), by_start);
	return err;
}

int rss_glibc__resident(struct rss_glibc *g, struct pagemap *pm, const struct vmas *v,
			uint64_t *bytes, uint64_t *allocator_in)
{
	size_t i;
	int err = 0;

	g->runs.n = 0;
	g->runs.bytes = 0;
	for (i = 0; !err && i < g->n; i++) {
		uint64_t before = g->runs.bytes;

		err = pagemap__resident(pm, g->v[i].start, g->v[i].end, &g->runs);
		if (g->v[i].vma < v->n)
			allocator_in[g->v[i].vma] += g->runs.bytes - before;
	}
	*bytes = g->runs.bytes;
	return err;
}

/* An arena as its heaps are walked. */
struct arena_walk {
	struct chunk_walk w;
	struct rss_arena out;
};

struct walk_state {
	struct rss_glibc *g;
	struct memory *mem;
	struct arena_walk *v;
	size_t n, cap;
};

/* The arena whose state is at address (0 and main: the main one), added when new. */
static struct arena_walk *arena_of(struct walk_state *s, uint64_t address, bool main)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		if (s->v[i].out.main == main && s->v[i].out.address == address)
			return &s->v[i];
	if (array__reserve(&s->v, &s->cap, s->n, sizeof(*s->v)))
		return NULL;
	memset(&s->v[s->n], 0, sizeof(s->v[s->n]));
	s->v[s->n].out.address = address;
	s->v[s->n].out.main = main;
	return &s->v[s->n++];
}

/* The heap region whose chunks hold addr, or NULL. */
static const struct region *chunks_holding(const struct rss_glibc *g, uint64_t addr)
{
	size_t i = array__first_above(g->v, g->n, sizeof(*g->v), offsetof(struct region, start),
				      addr);
	const struct region *r = i ? &g->v[i - 1] : NULL;

	return r && r->kind != REGION_MMAPPED && addr >= r->first && addr < r->walk_end ? r : NULL;
}

static bool valid_chunk(uint64_t chunk, void *ctx)
{
	return chunks_holding(((struct walk_state *)ctx)->g, chunk);
}

/* A chunk in a tcache or a fastbin: free to malloc, so out of its arena's live bytes. */
static void cached_chunk(uint64_t chunk, uint64_t size, void *ctx)
{
	struct walk_state *s = ctx;
	const struct region *r = chunks_holding(s->g, chunk);
	struct arena_walk *a = r ? arena_of(s, r->kind == REGION_BRK ? 0 : r->arena,
					    r->kind == REGION_BRK)
				 : NULL;
	uint64_t end = chunk + size + 8, bytes;

	if (!a)
		return;
	bytes = page_runs__bytes_in(&s->g->runs, chunk + 16, end < r->walk_end ? end : r->walk_end);
	bytes = bytes < a->w.live ? bytes : a->w.live;
	a->w.live -= bytes;
	a->out.cached += bytes;
}

/* The heaps walked, each into its arena's walk; the chunks mmapped into mmapped. */
static int walk_regions(struct walk_state *s, struct chunk_walk *mmapped, uint64_t *main_top)
{
	size_t i;
	int err = 0;

	for (i = 0; !err && i < s->g->n; i++) {
		const struct region *r = &s->g->v[i];
		struct arena_walk *a;

		if (r->kind == REGION_MMAPPED) {
			glibc_heap__mmapped(s->mem, r->start, r->end, mmapped);
			continue;
		}
		a = arena_of(s, r->kind == REGION_BRK ? 0 : r->arena, r->kind == REGION_BRK);
		if (!a)
			return -ENOMEM;
		a->out.heaps++;
		a->out.size += r->walk_end - r->start;
		a->out.resident += page_runs__bytes_in(&s->g->runs, r->start, r->end);
		err = glibc_heap__walk(s->mem, r->first, r->walk_end, r->kind == REGION_HEAP, &a->w);
		if (r->kind == REGION_BRK)
			*main_top = a->w.top;
	}
	return err;
}

/* The C library's data (its writable mapping and the bss after it), where the main arena is. */
static bool libc_data(const struct vmas *v, uint64_t *start, uint64_t *end)
{
	size_t i;

	for (i = 0; i < v->n; i++) {
		const struct vma *m = &v->v[i];
		const char *base = strrchr(m->name, '/');

		if (m->kind != VMA_FILE || !m->write || m->shared || !base ||
		    (strcmp(base, "/libc.so.6") && strncmp(base, "/libc-2.", 8)))
			continue;
		*start = m->start;
		*end = m->end;
		if (i + 1 < v->n && v->v[i + 1].start == m->end && v->v[i + 1].kind == VMA_ANON)
			*end = v->v[i + 1].end;
		return true;
	}
	return false;
}

/* The main arena's state, found in the C library's data by its top chunk. */
static bool main_arena(struct walk_state *s, struct pagemap *pm, const struct vmas *v,
		       uint64_t top, struct glibc_arena *out)
{
	struct page_runs data = {};
	uint64_t start, end, at = 0;

	if (!top || !libc_data(v, &start, &end) || pagemap__resident(pm, start, end, &data)) {
		page_runs__free(&data);
		return false;
	}
	memory__use(s->mem, &data);
	at = glibc_heap__find_main(s->mem, start, end, top);
	if (at && !glibc_heap__arena(s->mem, at, out))
		at = 0;
	memory__use(s->mem, &s->g->runs);
	page_runs__free(&data);
	return at;
}

/* The tcaches found by the walks, and the arenas' fastbins, out of what is live; each arena's
 * threads. Whether every list was read whole. */
static bool read_bins(struct walk_state *s, struct pagemap *pm, const struct vmas *v,
		      uint64_t main_top)
{
	struct bin_reader r = { valid_chunk, cached_chunk, s, BIN_CHUNKS_MAX };
	size_t i, k, n = s->n;
	bool whole = true;

	for (i = 0; i < n; i++)
		for (k = 0; k < s->v[i].w.ntcaches; k++)
			glibc_heap__tcache(s->mem, s->v[i].w.tcaches[k], &r);
	for (i = 0; i < n; i++) {
		struct arena_walk *a = &s->v[i];
		struct glibc_arena st;

		if (a->out.main ? !main_arena(s, pm, v, main_top, &st)
				: !glibc_heap__arena(s->mem, a->out.address, &st))
			continue;
		/* A state whose top is not in its heaps is not one: its lists are not read. */
		if (!chunks_holding(s->g, st.top) && st.top)
			continue;
		a->out.address = st.address;
		a->out.threads = st.threads;
		whole &= glibc_heap__fastbins(s->mem, &st, &r);
	}
	return whole && r.max;
}

static int by_address(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Every arena's sparsely used pages, in address order. */
static int sparse_pages(const struct walk_state *s, struct rss_reading *now)
{
	size_t i, n = 0;

	free(now->sparse_pages);
	now->nsparse = 0;
	for (i = 0; i < s->n; i++)
		n += s->v[i].w.nsparse;
	now->sparse_pages = malloc((n + 1) * sizeof(*now->sparse_pages));
	if (!now->sparse_pages)
		return -ENOMEM;
	/* A heap without sparsely used pages has no list of them to copy. */
	for (i = 0; i < s->n; i++) {
		if (!s->v[i].w.nsparse)
			continue;
		memcpy(now->sparse_pages + now->nsparse, s->v[i].w.sparse,
		       s->v[i].w.nsparse * sizeof(uint64_t));
		now->nsparse += s->v[i].w.nsparse;
	}
	array__sort(now->sparse_pages, now->nsparse, sizeof(uint64_t), by_address);
	return 0;
}

int rss_glibc__walk(struct rss_glibc *g, struct pagemap *pm, struct memory *mem,
		    const struct vmas *v, struct rss_reading *now)
{
	struct walk_state s = { .g = g, .mem = mem };
	struct chunk_walk mmapped = {};
	uint64_t main_top = 0;
	size_t i;
	int err;

	memory__use(mem, &g->runs);
	err = walk_regions(&s, &mmapped, &main_top);
	if (!err)
		now->bins_read = read_bins(&s, pm, v, main_top);
	memory__use(mem, NULL);
	now->walked = !err;
	now->live = now->free_whole = now->unknown = now->cached = 0;
	now->mmapped_chunks = mmapped.live_chunks;
	now->mmapped_live = mmapped.live;
	free(now->arenas);
	now->arenas = err ? NULL : calloc(s.n + 1, sizeof(*now->arenas));
	now->narenas = 0;
	if (!err && !now->arenas)
		err = -ENOMEM;
	for (i = 0; !err && i < s.n; i++) {
		struct rss_arena *a = &now->arenas[now->narenas++];

		*a = s.v[i].out;
		a->live = s.v[i].w.live;
		a->free_whole = s.v[i].w.free_whole;
		a->unknown = s.v[i].w.unknown;
		a->chunks = s.v[i].w.live_chunks;
		a->free_chunks = s.v[i].w.free_chunks;
		a->derailed = s.v[i].w.derailed;
		a->free = a->resident > a->live + a->unknown ? a->resident - a->live - a->unknown : 0;
		now->live += a->live;
		now->free_whole += a->free_whole;
		now->unknown += a->unknown;
		now->cached += a->cached;
	}
	now->live += mmapped.live;
	if (!err)
		err = sparse_pages(&s, now);
	for (i = 0; i < s.n; i++)
		chunk_walk__free(&s.v[i].w);
	free(s.v);
	chunk_walk__free(&mmapped);
	return err;
}
