// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "target/glibc_heap.h"

/* A chunk's header: the previous chunk's size (or its last user bytes), then its own size
 * with three bits. */
#define PREV_INUSE 1ULL
#define IS_MMAPPED 2ULL
#define NON_MAIN_ARENA 4ULL
#define SIZE_BITS 7ULL
#define MINSIZE 32ULL
#define FENCEPOST 16ULL	  /* the chunks closing a heap an arena grew past */
#define LIST_POINTERS 48ULL /* fd, bk and the large bins' two: malloc_trim keeps them */
#define PAGE 4096ULL

/* struct malloc_state (x86-64, glibc 2.26 on): its fields' offsets and size. */
#define STATE_FASTBINS 16
#define STATE_TOP 96
#define STATE_NEXT 2160
#define STATE_THREADS 2176
#define STATE_SYSTEM_MEM 2184
#define STATE_SIZE 2200

/* struct tcache_perthread_struct: 64 lists, their counts (uint16_t since glibc 2.30, a byte
 * before), then their first entries; the chunk that holds it. */
#define TCACHE_BINS 64
#define TCACHE_CHUNK_WIDE (16ULL + 2 * TCACHE_BINS + 8 * TCACHE_BINS)
#define TCACHE_CHUNK_NARROW (16ULL + TCACHE_BINS + 8 * TCACHE_BINS)
/* A tcache list longer than this is no tcache's (glibc's tunable allows 65535; the default
 * is 7). */
#define TCACHE_MAX_COUNT 1024

/* The reads of a walk and of the bins: large windows, most chunks are near the last. A
 * walk's window is 256 KiB, 64 pages: each read switches the thread to SCHED_FIFO and back
 * (base/remote_read.h), and holds the target's lock of its mappings while it finds 64 pages,
 * tens of microseconds. */
#define WALK_WINDOW 262144ULL
#define BIN_WINDOW 512ULL

static uint64_t up(uint64_t a)
{
	return (a + PAGE - 1) & ~(PAGE - 1);
}

static uint64_t down(uint64_t a)
{
	return a & ~(PAGE - 1);
}

uint64_t glibc_heap__first_chunk(uint64_t heap, uint64_t ar_ptr)
{
	uint64_t info = ar_ptr % GLIBC_HEAP_MAX;

	/* The arena's first heap holds its state; a chunk's user bytes are 16-aligned. */
	if (ar_ptr - info == heap)
		return (ar_ptr + STATE_SIZE + 15) & ~15ULL;
	return heap + info;
}

bool glibc_heap__arena(struct memory *m, uint64_t address, struct glibc_arena *out)
{
	const uint64_t *s = address % 8 ? NULL : memory__at(m, address, STATE_SIZE, BIN_WINDOW);

	if (!s)
		return false;
	memset(out, 0, sizeof(*out));
	out->address = address;
	memcpy(out->fastbins, s + STATE_FASTBINS / 8, sizeof(out->fastbins));
	out->top = s[STATE_TOP / 8];
	out->next = s[STATE_NEXT / 8];
	out->threads = s[STATE_THREADS / 8];
	out->system_mem = s[STATE_SYSTEM_MEM / 8];
	return true;
}

/* The resident bytes of [a, b), as m may read them. */
static uint64_t resident(const struct memory *m, uint64_t a, uint64_t b)
{
	return b > a ? page_runs__bytes_in(m->runs, a, b) : 0;
}

/* The free chunk [p, q): its whole pages past the list pointers. */
static void free_chunk(const struct memory *m, uint64_t p, uint64_t q, struct chunk_walk *w)
{
	w->free_chunks++;
	w->free_whole += resident(m, up(p + LIST_POINTERS), down(q));
}

/* Whether a chunk in use, its head (size and bits), fits the heap it is in. */
static bool in_use_fits(uint64_t head, bool non_main)
{
	return !(head & IS_MMAPPED) && !!(head & NON_MAIN_ARENA) == non_main;
}

/* The page being summed is done: kept when sparsely used. */
static void page_done(const struct memory *m, struct chunk_walk *w)
{
	if (w->page_live && w->page_live < PAGE / 2 && w->nsparse < GLIBC_SPARSE_MAX &&
	    resident(m, w->page, w->page + PAGE) == PAGE &&
	    !array__reserve(&w->sparse, &w->sparse_cap, w->nsparse, sizeof(*w->sparse)))
		w->sparse[w->nsparse++] = w->page;
	w->page_live = 0;
}

/* Live bytes [a, b) summed by page: the pages between its first and last are full. */
static void live_range(const struct memory *m, uint64_t a, uint64_t b, struct chunk_walk *w)
{
	uint64_t first = down(a), last = down(b - 1);

	if (first != w->page) {
		page_done(m, w);
		w->page = first;
	}
	if (first == last) {
		w->page_live += b - a;
		return;
	}
	w->page_live += first + PAGE - a;
	page_done(m, w);
	w->page = last;
	w->page_live = b - last;
}

/* Whether a chunk's size can be one: a fencepost, or a chunk within the room left. */
static bool chunk_fits(uint64_t size, uint64_t room)
{
	return !(size % 16) && size <= room && (size == FENCEPOST || size >= MINSIZE);
}

/* The walk stops at p: what lies past it resident is unknown. */
static void derail(const struct memory *m, uint64_t p, uint64_t end, struct chunk_walk *w)
{
	w->derailed++;
	w->unknown += resident(m, p, end);
}

static void walk(struct memory *m, uint64_t first, uint64_t end, bool non_main,
		 struct chunk_walk *w)
{
	uint64_t p = first, head, q;
	const uint64_t *h;

	w->top = 0;
	while (p < end) {
		h = p % 16 ? NULL : memory__at(m, p, 16, WALK_WINDOW);
		if (!h) {
			derail(m, p, end, w);
			return;
		}
		head = h[1];
		/* The last fencepost of a heap its arena grew past: nothing follows. */
		if (!(head & ~SIZE_BITS))
			return;
		if (!chunk_fits(head & ~SIZE_BITS, end - p)) {
			derail(m, p, end, w);
			return;
		}
		q = p + (head & ~SIZE_BITS);
		if (q - p == FENCEPOST) {
			p = q;
			continue;
		}
		/* The chunk that ends the heap is its arena's top: free. */
		if (q == end) {
			free_chunk(m, p, q, w);
			w->top = p;
			return;
		}
		/* Whether p is in use is said by the next chunk's header. */
		h = memory__at(m, q, 16, WALK_WINDOW);
		if (!h || ((h[1] & PREV_INUSE) && !in_use_fits(head, non_main))) {
			derail(m, p, end, w);
			return;
		}
		if (h[1] & PREV_INUSE) {
			w->live_chunks++;
			w->live += resident(m, p + 16, q + 8 < end ? q + 8 : end);
			live_range(m, p + 16, q + 8 < end ? q + 8 : end, w);
			if ((q - p == TCACHE_CHUNK_WIDE || q - p == TCACHE_CHUNK_NARROW) &&
			    !array__reserve(&w->tcaches, &w->cap, w->ntcaches, sizeof(uint64_t)))
				w->tcaches[w->ntcaches++] = p;
		} else {
			free_chunk(m, p, q, w);
		}
		p = q;
	}
}

int glibc_heap__walk(struct memory *m, uint64_t first, uint64_t end, bool non_main,
		     struct chunk_walk *w)
{
	walk(m, first, end, non_main, w);
	page_done(m, w);
	w->page = 0;
	return 0;
}

void chunk_walk__free(struct chunk_walk *w)
{
	free(w->tcaches);
	free(w->sparse);
	memset(w, 0, sizeof(*w));
}

uint64_t glibc_heap__mmapped(struct memory *m, uint64_t start, uint64_t end, struct chunk_walk *w)
{
	uint64_t p = start;

	while (p < end) {
		const uint64_t *h = memory__at(m, p, 16, 16);
		uint64_t size;

		/* An mmapped block's chunk: no previous chunk, its size the mapping's. */
		if (!h || h[0] || (h[1] & SIZE_BITS) != IS_MMAPPED)
			break;
		size = h[1] & ~SIZE_BITS;
		if (size < PAGE || size % PAGE || size > end - p)
			break;
		w->live_chunks++;
		w->live += resident(m, p + 16, p + size);
		p += size;
	}
	return p;
}

/* Whether chunk is one r accepts, of size (a bin's), not mmapped. */
static bool bin_chunk(struct memory *m, struct bin_reader *r, uint64_t chunk, uint64_t size)
{
	uint64_t head;

	return chunk && !(chunk % 16) && r->valid(chunk, r->ctx) &&
	       memory__word(m, chunk + 8, BIN_WINDOW, &head) && (head & ~SIZE_BITS) == size &&
	       !(head & IS_MMAPPED);
}

/*
 * The next entry of a list, from the word at slot: glibc 2.32 on keeps it mangled with the
 * slot's address (safe-linking), earlier ones as is. to: what the pointer points at, from
 * the chunk (the tcache's entries point 16 bytes in, the fastbins' at the chunk).
 */
static uint64_t next_chunk(struct memory *m, struct bin_reader *r, uint64_t slot, uint64_t to,
			   uint64_t size)
{
	uint64_t word, mangled;

	if (!memory__word(m, slot, BIN_WINDOW, &word))
		return UINT64_MAX;
	mangled = word ^ (slot >> 12);
	/* The end of a list: NULL, mangled or not. */
	if (!word || !mangled)
		return 0;
	if (mangled >= to && bin_chunk(m, r, mangled - to, size))
		return mangled - to;
	if (word >= to && bin_chunk(m, r, word - to, size))
		return word - to;
	return UINT64_MAX;
}

/* Chunks a tcache's lists hold, kept until every list has read as one. */
struct found {
	uint64_t *v;
	size_t n, cap;
};

/* One list of the tcache: count chunks of size from entry e; false if it is no tcache's. */
static bool tcache_list(struct memory *m, struct bin_reader *r, uint64_t e, unsigned int count,
			uint64_t size, struct found *f)
{
	unsigned int k;

	for (k = 0; k < count; k++) {
		uint64_t chunk = e - 16;

		if (e < 16 || !r->max || !bin_chunk(m, r, chunk, size) ||
		    array__reserve(&f->v, &f->cap, f->n, sizeof(*f->v)))
			return false;
		r->max--;
		f->v[f->n++] = chunk;
		/* The entry's next, at the start of its user bytes, 16 bytes into the chunk. */
		chunk = next_chunk(m, r, e, 16, size);
		if (chunk == UINT64_MAX || (!chunk) != (k + 1 == count))
			return false;
		e = chunk + 16;
	}
	return true;
}

/* The tcache's lists, each chunk into f: false if one is not a tcache's. */
static bool tcache_lists(struct memory *m, uint64_t tc, struct bin_reader *r, struct found *f)
{
	uint64_t head, entries[TCACHE_BINS];
	uint16_t counts[TCACHE_BINS];
	const uint8_t *s;
	bool wide;
	int i;

	if (!memory__word(m, tc + 8, BIN_WINDOW, &head))
		return false;
	wide = (head & ~SIZE_BITS) == TCACHE_CHUNK_WIDE;
	s = memory__at(m, tc + 16, (wide ? 2 : 1) * TCACHE_BINS + sizeof(entries), BIN_WINDOW);
	if (!s)
		return false;
	for (i = 0; i < TCACHE_BINS; i++)
		counts[i] = wide ? ((const uint16_t *)s)[i] : s[i];
	memcpy(entries, s + (wide ? 2 : 1) * TCACHE_BINS, sizeof(entries));
	for (i = 0; i < TCACHE_BINS; i++)
		if (counts[i] > TCACHE_MAX_COUNT || !counts[i] != !entries[i] ||
		    !tcache_list(m, r, entries[i], counts[i], 32 + 16 * (uint64_t)i, f))
			return false;
	return true;
}

bool glibc_heap__tcache(struct memory *m, uint64_t tc, struct bin_reader *r)
{
	struct found f = {};
	bool ok = tcache_lists(m, tc, r, &f);
	size_t i;

	for (i = 0; ok && i < f.n; i++) {
		uint64_t head;

		if (memory__word(m, f.v[i] + 8, BIN_WINDOW, &head))
			r->cached(f.v[i], head & ~SIZE_BITS, r->ctx);
	}
	free(f.v);
	return ok;
}

bool glibc_heap__fastbins(struct memory *m, const struct glibc_arena *a, struct bin_reader *r)
{
	int i;

	for (i = 0; i < GLIBC_FASTBINS; i++) {
		uint64_t size = 32 + 16 * (uint64_t)i, chunk = a->fastbins[i];

		if (chunk && !bin_chunk(m, r, chunk, size))
			return false;
		while (chunk) {
			if (!r->max)
				return false;
			r->max--;
			r->cached(chunk, size, r->ctx);
			/* fd, 16 bytes in. */
			chunk = next_chunk(m, r, chunk + 16, 0, size);
			if (chunk == UINT64_MAX)
				return false;
		}
	}
	return true;
}

uint64_t glibc_heap__find_main(struct memory *m, uint64_t start, uint64_t end, uint64_t top)
{
	uint64_t at;

	start = (start + 7) & ~7ULL;
	for (at = start + STATE_TOP; at >= start && end >= 8 && at <= end - 8; at += 8) {
		struct glibc_arena a;
		uint64_t word;

		if (!memory__word(m, at, BIN_WINDOW, &word) || word != top)
			continue;
		if (end - (at - STATE_TOP) < STATE_SIZE ||
		    !glibc_heap__arena(m, at - STATE_TOP, &a))
			continue;
		/* glibc's ring of arenas starts and ends at the main one. */
		if (a.next && !(a.next % 8) && a.threads < (1ULL << 32))
			return a.address;
	}
	return 0;
}
