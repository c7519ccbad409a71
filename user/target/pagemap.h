/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Which pages of a process's memory are resident, read from its page tables without
 * faulting anything in and without stopping it: PAGEMAP_SCAN (Linux 6.7 on), which passes
 * over holes in the page tables and returns runs, else /proc/PID/pagemap, a word a page.
 * Either is read in windows of a few MiB of pages: the kernel holds the process's memory map
 * lock while it walks one, and its mmap and munmap wait for it.
 * The environment variable HEAPTAP_NO_PAGEMAP_SCAN=1 takes the second way on any kernel, as
 * one before 6.7 would (the tests use it).
 */
#ifndef HEAPTAP_PAGEMAP_H
#define HEAPTAP_PAGEMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PAGEMAP_PAGE 4096ULL

/* Runs of resident pages, [start, end) each, in address order, none adjacent to another. */
struct page_runs {
	struct page_run {
		uint64_t start, end;
	} *v;
	size_t n, cap;
	uint64_t bytes; /* their sum */
};

struct pagemap;

/* The pages of process pid; -ESRCH when it has gone, -EACCES when it may not be read. */
int pagemap__open(int pid, struct pagemap **out);
void pagemap__close(struct pagemap *pm);

/*
 * Appends to runs the resident pages of [start, end) (page-aligned outwards): present in
 * memory and not the shared zero page (which no process's RSS counts; /proc/PID/pagemap
 * cannot tell it, and counts it). Runs already in the list must lie below start. Negative
 * errno: the process has gone (-ESRCH), or out of memory.
 */
int pagemap__resident(struct pagemap *pm, uint64_t start, uint64_t end, struct page_runs *runs);

/*
 * The bytes of [start, end)'s anonymous pages resident (as smaps' "Anonymous": a private
 * mapping's pages written or never backed by a file; the shared zero page out, but for
 * /proc/PID/pagemap, which counts it). Negative errno as pagemap__resident.
 */
int pagemap__anon(struct pagemap *pm, uint64_t start, uint64_t end, uint64_t *bytes);

/* "pagemap_scan" or "pagemap": how pm reads. */
const char *pagemap__method(const struct pagemap *pm);

/* The run holding addr, or NULL. */
const struct page_run *page_runs__holding(const struct page_runs *runs, uint64_t addr);
/* The resident bytes of runs within [start, end). */
uint64_t page_runs__bytes_in(const struct page_runs *runs, uint64_t start, uint64_t end);
/* Whether every page of [start, end) is resident. */
bool page_runs__all_in(const struct page_runs *runs, uint64_t start, uint64_t end);
void page_runs__free(struct page_runs *runs);

#endif
