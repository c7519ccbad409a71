// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/heap_info.h"
#include "base/pagemap_scan.h"
#include "leak/maps.h"
#include "leak/scan.h"
#include "leak/tracer.h"

#define RED_ZONE 128 /* x86-64 ABI: leaf functions may keep data below the stack pointer */


/* What becomes of the bytes of a range that may hold data. */
struct range_use {
	uint32_t id; /* FROM_ROOT, or the block they are part of */
	bool read;   /* read them; else only count them as unreadable (a read could wait) */
	/*
	 * The mapping is not readable now: they are read through its protection, and only the
	 * pages the process wrote are (a page never written would be faulted in by the read;
	 * a file's page holds the file's bytes, not pointers the program stored).
	 */
	bool through;
	uint64_t queued; /* out: bytes queued for reading */
};

/*
 * The bytes of [a, b) that may hold data, read or only counted as unreadable: a mapping
 * skipped because reading it could wait holds data in these bytes all the same.
 */
static int data_range(struct scan *s, uint64_t a, uint64_t b, struct range_use *use)
{
	a &= ~7ULL;
	b &= ~7ULL;
	if (b <= a)
		return 0;
	if (use->read) {
		use->queued += b - a;
		return scan__batch_add(s, a, b - a, use->id, use->through);
	}
	s->st->unreadable_bytes += b - a;
	s->skipped_data = true;
	return 0;
}

/* The pages of [a, b) with data, as /proc/PID/pagemap lists them (before Linux 6.7). */
static int pagemap_ranges(struct scan *s, uint64_t a, uint64_t b, struct range_use *use)
{
	uint64_t entries[4096];
	int err;

	for (uint64_t page = a / TARGET_PAGE, last = (b + TARGET_PAGE - 1) / TARGET_PAGE;
	     page < last && !s->late;) {
		size_t want = last - page < 4096 ? last - page : 4096;
		ssize_t got = pread(s->map_fd, entries, want * 8, page * 8);
		uint64_t run = 0; /* first page of the current run of pages to read, or 0 */

		/* A protected mapping's pages written cannot be told then: none is read. */
		if (got <= 0 && use->through)
			return 0;
		if (got <= 0)
			return data_range(s, page * TARGET_PAGE > a ? page * TARGET_PAGE : a, b,
					  use);
		for (size_t i = 0; i < (size_t)got / 8; i++, page++) {
			bool data = (entries[i] & (PM_PRESENT | PM_SWAP)) &&
				    !(use->through && (entries[i] & PM_FILE));

			if (data && !run)
				run = page;
			if (!data && run) {
				err = data_range(s, run * TARGET_PAGE > a ? run * TARGET_PAGE : a,
						 page * TARGET_PAGE, use);
				if (err)
					return err;
				run = 0;
			}
		}
		if (run) {
			err = data_range(s, run * TARGET_PAGE > a ? run * TARGET_PAGE : a,
					 page * TARGET_PAGE < b ? page * TARGET_PAGE : b, use);
			if (err)
				return err;
		}
		if (s->deadline && clock__now_ns() > s->deadline)
			s->late = true;
	}
	return 0;
}

/*
 * Queues (or counts) the pages of [a, b) that may hold data: present or swapped, not the zero
 * page (through a protection, not a file's page either). Neither PAGEMAP_SCAN nor
 * /proc/PID/pagemap fault a page in: they never wait on the target.
 */
static int add_data(struct scan *s, uint64_t a, uint64_t b, struct range_use *use)
{
	uint64_t skip = PAGE_IS_PFNZERO | (use->through ? PAGE_IS_FILE : 0);
	struct pagemap_scan_region vec[256];
	struct pagemap_scan_arg arg;
	int err;

	/* Without pagemap, a read through a protection would fault in pages never written: such
	 * a mapping is not read (and counts among those never written). */
	if (s->map_fd < 0)
		return use->through ? 0 : data_range(s, a, b, use);
	/* PAGEMAP_SCAN passes over holes in the page tables, not page by page. */
	for (uint64_t at = a & ~(TARGET_PAGE - 1); !s->no_pm_scan && at < b && !s->late;) {
		int r;

		arg = (struct pagemap_scan_arg){
			.size = sizeof(arg),
			.start = at,
			.end = b,
			.vec = (uint64_t)vec,
			.vec_len = sizeof(vec) / sizeof(vec[0]),
			.category_inverted = skip,
			.category_mask = skip,
			.category_anyof_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
			.return_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
		};
		r = ioctl(s->map_fd, PAGEMAP_SCAN_IOCTL, &arg);
		if (r < 0) {
			/* Before Linux 6.7: read the pages from where this walk got to. */
			s->no_pm_scan = true;
			a = at > a ? at : a;
			break;
		}
		for (int i = 0; i < r; i++) {
			err = data_range(s, vec[i].start > a ? vec[i].start : a,
					 vec[i].end < b ? vec[i].end : b, use);
			if (err)
				return err;
		}
		if (arg.walk_end <= at)
			break;
		at = arg.walk_end;
		if (s->deadline && clock__now_ns() > s->deadline)
			s->late = true;
	}
	return s->no_pm_scan ? pagemap_ranges(s, a, b, use) : 0;
}

/* A thread's words (registers) as roots; its stack pointer into sp[] unless it is on a block. */
static void thread_roots(struct scan *s, const struct traced_thread *t, uint64_t *sp, size_t *nsp)
{
	long b;

	s->st->scanned_bytes += t->nwords * 8;
	scan__root_words(s, t->words, t->nwords);
	if (!t->has_sp)
		return;
	/* A thread running on a tracked block (a coroutine's stack) keeps it alive. */
	b = t->sp - s->lo < s->span ? scan__find_block(s, t->sp) : -1;
	if (b >= 0)
		scan__mark(s, b, PTR_START);
	else
		sp[(*nsp)++] = t->sp;
}

void scan__find_heaps(struct scan *s, const struct reach_opts *o)
{
	for (size_t i = 0; i < s->nmaps; i++) {
		struct mapping *m = &s->maps[i];
		uint64_t hi[4];

		if (!m->heap && o->glibc && m->anon && m->root && !m->unsafe &&
		    !(m->start % GLIBC_HEAP_MAX)) {
			scan__read_words(s, &m->start, hi, 1, 4);
			m->heap = heap_info__is(m->start, m->end, hi);
		}
		if (m->heap && s->st->nheaps < REACH_MAX_HEAPS)
			s->st->heaps[s->st->nheaps++] = (struct reach_heap){ .start = m->start,
									     .end = m->end,
									     .arena = m->anon };
	}
}

/* What a root mapping holds, for the statistics. */
static enum reach_root_kind root_kind(const struct mapping *m, bool stack)
{
	if (m->heap)
		return REACH_ROOT_HEAP;
	if (stack)
		return REACH_ROOT_STACK;
	return m->anon ? REACH_ROOT_ANON : REACH_ROOT_DATA;
}

/* The root mappings: read (through a protection where the process took read access away),
 * or counted where a read could wait or nothing was ever written. */
static int read_mappings(struct scan *s, const uint64_t *sp, size_t nsp)
{
	struct reach_stats *st = s->st;
	struct mapping *maps = s->maps;
	int err;

	for (size_t i = 0; i < s->nmaps && !s->late; i++) {
		struct range_use use = { .id = FROM_ROOT, .read = true };
		uint64_t from = maps[i].start, lowest = UINT64_MAX;
		enum reach_root_kind kind;

		if (maps[i].heap && !st->heap_roots)
			maps[i].root = false;
		if (!maps[i].root)
			continue;
		if (maps[i].unsafe) {
			st->skipped_regions++;
			st->skipped_bytes += maps[i].end - maps[i].start;
			use.read = false;
			err = add_data(s, maps[i].start, maps[i].end, &use);
			if (err)
				return err;
			continue;
		}
		/* A stack is live from its lowest stack pointer up; what lies below is stale. */
		for (size_t t = 0; t < nsp && !maps[i].heap; t++)
			if (sp[t] >= maps[i].start && sp[t] < maps[i].end && sp[t] < lowest)
				lowest = sp[t];
		if (lowest != UINT64_MAX && lowest - maps[i].start > RED_ZONE)
			from = lowest - RED_ZONE;
		use.through = maps[i].protected;
		err = add_data(s, from, maps[i].end, &use);
		if (err)
			return err;
		/* Guard pages, reservations: no access, and nothing ever written there. */
		if (use.through && !use.queued) {
			st->unwritten_regions++;
			st->unwritten_bytes += maps[i].end - maps[i].start;
			continue;
		}
		st->protected_regions += use.through;
		st->regions++;
		kind = root_kind(&maps[i], lowest != UINT64_MAX);
		st->root_regions[kind]++;
		st->root_bytes[kind] += maps[i].end - from;
	}
	return 0;
}

/* The blocks outside root mappings (those in them were read with them: the pages not read
 * there hold only zeros). */
static int read_other_blocks(struct scan *s)
{
	const struct mapping *maps = s->maps;
	size_t nmaps = s->nmaps, m = 0;
	int err;

	for (size_t j = 0; j < s->n && !s->late; j++) {
		uint64_t a = (s->blk[j].start + 7) & ~7ULL, b = s->blk[j].end & ~7ULL;
		struct range_use use = { .id = j, .read = true };
		bool unsafe = false;

		while (m < nmaps && maps[m].end <= s->blk[j].start)
			m++;
		if (m < nmaps && maps[m].start <= s->blk[j].start && maps[m].root && !maps[m].unsafe)
			continue;
		/* Blocks do not overlap mappings they do not start in, unless stale. */
		for (size_t k = m; k < nmaps && maps[k].start < s->blk[j].end; k++)
			unsafe |= maps[k].unsafe;
		if (unsafe) {
			s->st->unreadable_bytes += s->blk[j].end - s->blk[j].start;
			s->skipped_data = true;
			continue;
		}
		/* In the allocator's heap, not a root, that the process made unreadable. */
		use.through = m < nmaps && maps[m].start <= s->blk[j].start && maps[m].protected;
		if (use.through)
			err = add_data(s, a, b, &use);
		else
			err = b > a ? scan__batch_add(s, a, b - a, j, false) : 0;
		if (err)
			return err;
	}
	return 0;
}

int scan__read_memory(struct scan *s, struct leak_pause *p, const struct reach_opts *o)
{
	uint64_t *sp = NULL;
	size_t nsp = 0;
	int err;

	sp = calloc(p->n ? p->n : 1, sizeof(*sp));
	if (!sp)
		return -ENOMEM;
	for (size_t i = 0; i < p->n; i++) {
		const struct traced_thread *t = &p->threads[i];

		if (t->state != THREAD_GONE)
			thread_roots(s, t, sp, &nsp);
	}
	s->st->heap_roots = s->st->nheaps && !(o->all_blocks_known && o->glibc);
	err = read_mappings(s, sp, nsp);
	if (!err)
		err = read_other_blocks(s);
	if (!err)
		err = scan__batch_flush(s);
	if (!err && s->nmi && !s->late)
		scan__resolve_mi(s);
	free(sp);
	return err ?: s->err;
}
