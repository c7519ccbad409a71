/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Where a process's resident memory is, read from outside while it runs (it is never
 * stopped): the kernel's figures (/proc/PID/status: RssAnon, RssFile, RssShmem, whose sum is
 * VmRSS), the resident pages of the allocator's mappings and of the threads' stacks
 * (pagemap.h), and, for glibc's malloc, its chunks walked by their headers (glibc_heap.h):
 * live, free in whole pages, or free between live blocks, per arena.
 *
 * Each read takes the kernel's figures, the mappings (/proc/PID/maps) and the pages of the
 * allocator and the stacks. A full read takes the anonymous pages of the other mappings too
 * and walks the chunks, every read in windows of a few MiB (not /proc/PID/smaps, whose walk of
 * a mapping holds the process's memory map lock for the whole of it, however large, and its
 * mmap and munmap wait); its cost grows with the process's memory, so
 * it is made at the first read, when asked (the final report), and otherwise only once the
 * time since the last is 100 times what that one took: full reads take at most 1% of the
 * time. Between them, the live and free figures are the latest full read's.
 */
#ifndef HEAPTAP_RSS_H
#define HEAPTAP_RSS_H

#include "target/rss_reading.h"

/* "total", "live", "allocator_free", "allocator_free_whole_pages", ... */
const char *rss__part_name(enum rss_part part);

struct rss_reader;

/* The reader of process pid, whose allocator is glibc's or not. */
int rss_reader__new(int pid, bool glibc, struct rss_reader **out);
void rss_reader__free(struct rss_reader *r);

/*
 * Reads where the process's memory is now (a full read when full, or when one is due), into
 * *out, valid until the next call. own[]: the mappings the program made itself (not its
 * allocator), in address order, which another allocator's mappings are not. Negative errno:
 * -ESRCH when the process has gone, else why /proc could not be read; nothing is harmed.
 */
int rss_reader__read(struct rss_reader *r, bool full, const struct rss_range *own, size_t nown,
		     const struct rss_reading **out);

#endif
