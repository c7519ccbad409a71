// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "base/array.h"
#include "base/env.h"
#include "base/pagemap_scan.h"
#include "base/remote_read.h"
#include "target/pagemap.h"

#define ENTRY_PRESENT (1ULL << 63) /* a /proc/PID/pagemap entry's bit */
#define ENTRY_FILE (1ULL << 61)	   /* a file's page, or shared memory */

/*
 * An ioctl covers at most this much address space, and stops at this many pages found: the
 * page-table walk holds the process's memory map lock for reading, which its mmap and munmap
 * wait for. Holes in the page tables are passed over fast, so the span is wide (a sparse
 * reservation of many GiB takes few ioctls) and the pages found bound the walk of a dense one.
 */
#define SCAN_SPAN (256ULL << 20)
#define SCAN_PAGES 8192
#define SCAN_REGIONS 512
/* /proc/PID/pagemap entries read at once (the kernel takes the lock for 512 at a time). */
#define ENTRIES 4096

struct pagemap {
	int fd;
	bool no_scan; /* PAGEMAP_SCAN refused, or not asked for */
};

int pagemap__open(int pid, struct pagemap **out)
{
	const char *no_scan = env__get(ENV_HEAPTAP_NO_PAGEMAP_SCAN);
	struct pagemap *pm = calloc(1, sizeof(*pm));
	char path[64];

	*out = NULL;
	if (!pm)
		return -ENOMEM;
	snprintf(path, sizeof(path), "/proc/%d/pagemap", pid);
	pm->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (pm->fd < 0) {
		int err = errno == ENOENT ? -ESRCH : -errno;

		free(pm);
		return err;
	}
	pm->no_scan = no_scan && strcmp(no_scan, "0") && *no_scan;
	*out = pm;
	return 0;
}

void pagemap__close(struct pagemap *pm)
{
	if (!pm)
		return;
	close(pm->fd);
	free(pm);
}

const char *pagemap__method(const struct pagemap *pm)
{
	return pm->no_scan ? "pagemap" : "pagemap_scan";
}

/* [a, b) resident: a run of its own, or the last one's continuation. */
static int add_run(struct page_runs *runs, uint64_t a, uint64_t b)
{
	if (b <= a)
		return 0;
	runs->bytes += b - a;
	if (runs->n && runs->v[runs->n - 1].end == a) {
		runs->v[runs->n - 1].end = b;
		return 0;
	}
	if (array__reserve(&runs->v, &runs->cap, runs->n, sizeof(*runs->v)))
		return -ENOMEM;
	runs->v[runs->n++] = (struct page_run){ a, b };
	return 0;
}

/*
 * PAGEMAP_SCAN from *at to end, anonymous pages only when anon; *at is where it got to.
 * -ENOTTY when the kernel has none.
 */
static int scan(struct pagemap *pm, uint64_t *at, uint64_t end, bool anon, struct page_runs *runs)
{
	struct pagemap_scan_region vec[SCAN_REGIONS];
	uint64_t excluded = PAGE_IS_PFNZERO | (anon ? PAGE_IS_FILE : 0);

	while (*at < end) {
		uint64_t stop = end - *at > SCAN_SPAN ? *at + SCAN_SPAN : end;
		struct pagemap_scan_arg arg = {
			.size = sizeof(arg),
			.start = *at,
			.end = stop,
			.vec = (uint64_t)(uintptr_t)vec,
			.vec_len = SCAN_REGIONS,
			.max_pages = SCAN_PAGES,
			.category_inverted = excluded,
			.category_mask = excluded,
			.category_anyof_mask = PAGE_IS_PRESENT,
			.return_mask = PAGE_IS_PRESENT,
		};
		int policy = remote_read__begin(), n, i, err;

		n = ioctl(pm->fd, PAGEMAP_SCAN_IOCTL, &arg);
		err = errno;
		remote_read__end(policy);
		errno = err;
		if (n < 0)
			return errno == ESRCH || errno == ENOENT ? -ESRCH : -ENOTTY;
		for (i = 0; i < n && i < SCAN_REGIONS; i++) {
			err = add_run(runs, vec[i].start, vec[i].end);
			if (err)
				return err;
		}
		/* The walk's end says how far it got when the vector filled up or its pages did. */
		if (arg.walk_end <= *at || arg.walk_end > stop)
			return -ENOTTY;
		*at = arg.walk_end;
	}
	return 0;
}

/* Whether a /proc/PID/pagemap entry is a page counted: resident, anonymous when anon. */
static bool counted(uint64_t entry, bool anon)
{
	return (entry & ENTRY_PRESENT) && !(anon && (entry & ENTRY_FILE));
}

/* /proc/PID/pagemap from at to end, a word a page; anonymous pages only when anon. */
static int read_entries(struct pagemap *pm, uint64_t at, uint64_t end, bool anon,
			struct page_runs *runs)
{
	uint64_t entries[ENTRIES];

	while (at < end) {
		uint64_t pages = (end - at) / PAGEMAP_PAGE, run = 0;
		size_t want = pages < ENTRIES ? pages : ENTRIES, i;
		int policy = remote_read__begin(), err;
		ssize_t got = pread(pm->fd, entries, want * 8, at / PAGEMAP_PAGE * 8);

		err = errno;
		remote_read__end(policy);
		errno = err;

		if (got < 0)
			return errno == ESRCH ? -ESRCH : -errno;
		if (got < 8)
			return -ESRCH; /* the process's memory went with it */
		for (i = 0; i < (size_t)got / 8; i++) {
			uint64_t page = at + i * PAGEMAP_PAGE;

			if (counted(entries[i], anon) && !run)
				run = page + 1; /* + 1: page 0 is a run too */
			if (!counted(entries[i], anon) && run) {
				err = add_run(runs, run - 1, page);
				if (err)
					return err;
				run = 0;
			}
		}
		at += (uint64_t)got / 8 * PAGEMAP_PAGE;
		if (run) {
			err = add_run(runs, run - 1, at);
			if (err)
				return err;
		}
	}
	return 0;
}

/* The pages of [start, end) counted (resident; anonymous too when anon) into runs. */
static int pages(struct pagemap *pm, uint64_t start, uint64_t end, bool anon,
		 struct page_runs *runs)
{
	uint64_t at = start & ~(PAGEMAP_PAGE - 1);
	int err;

	end = (end + PAGEMAP_PAGE - 1) & ~(PAGEMAP_PAGE - 1);
	if (end <= at)
		return 0;
	if (!pm->no_scan) {
		err = scan(pm, &at, end, anon, runs);
		if (err != -ENOTTY)
			return err;
		/* Before Linux 6.7: the rest a word a page, and every range after it. */
		pm->no_scan = true;
	}
	return read_entries(pm, at, end, anon, runs);
}

int pagemap__resident(struct pagemap *pm, uint64_t start, uint64_t end, struct page_runs *runs)
{
	return pages(pm, start, end, false, runs);
}

int pagemap__anon(struct pagemap *pm, uint64_t start, uint64_t end, uint64_t *bytes)
{
	struct page_runs runs = {};
	int err = pages(pm, start, end, true, &runs);

	*bytes = runs.bytes;
	page_runs__free(&runs);
	return err;
}

/* The first run that ends above addr. */
static size_t first_above(const struct page_runs *runs, uint64_t addr)
{
	return array__first_above(runs->v, runs->n, sizeof(*runs->v),
				  offsetof(struct page_run, end), addr);
}

const struct page_run *page_runs__holding(const struct page_runs *runs, uint64_t addr)
{
	size_t i = first_above(runs, addr);

	return i < runs->n && runs->v[i].start <= addr ? &runs->v[i] : NULL;
}

uint64_t page_runs__bytes_in(const struct page_runs *runs, uint64_t start, uint64_t end)
{
	uint64_t sum = 0;
	size_t i;

	for (i = first_above(runs, start); i < runs->n && runs->v[i].start < end; i++) {
		uint64_t a = runs->v[i].start > start ? runs->v[i].start : start;
		uint64_t b = runs->v[i].end < end ? runs->v[i].end : end;

		sum += b - a;
	}
	return sum;
}

bool page_runs__all_in(const struct page_runs *runs, uint64_t start, uint64_t end)
{
	const struct page_run *run = page_runs__holding(runs, start);

	return end <= start || (run && run->end >= end);
}

void page_runs__free(struct page_runs *runs)
{
	free(runs->v);
	memset(runs, 0, sizeof(*runs));
}
