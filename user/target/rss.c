// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "base/clock.h"
#include "target/glibc_heap.h"
#include "target/proc.h"
#include "target/rss.h"
#include "target/rss_glibc.h"
#include "target/thread_stacks.h"
#include "target/vmas.h"

/* A full read is due once the time since the last is this many times what it took. */
#define FULL_SPACING 100

const char *rss__part_name(enum rss_part part)
{
	static const char *const names[RSS_PARTS] = {
		[RSS_TOTAL] = "total",
		[RSS_LIVE] = "live",
		[RSS_ALLOCATOR_FREE] = "allocator_free",
		[RSS_FREE_WHOLE_PAGES] = "allocator_free_whole_pages",
		[RSS_ALLOCATOR_UNKNOWN] = "allocator_unknown",
		[RSS_STACKS] = "stacks",
		[RSS_ANON_OTHER] = "anon_other",
		[RSS_FILES] = "files",
		[RSS_SHMEM] = "shmem",
	};

	return part < RSS_PARTS ? names[part] : "?";
}

struct rss_reader {
	int pid;
	bool glibc;
	struct pagemap *pm;
	struct memory mem;
	struct thread_stacks stacks;
	struct rss_glibc *heaps; /* glibc's: its mappings found, its chunks walked */
	struct rss_reading now;
};

int rss_reader__new(int pid, bool glibc, struct rss_reader **out)
{
	struct rss_reader *r = calloc(1, sizeof(*r));
	int err;

	*out = NULL;
	if (!r)
		return -ENOMEM;
	r->pid = pid;
	r->glibc = glibc;
	err = memory__open(pid, &r->mem);
	if (!err)
		err = pagemap__open(pid, &r->pm);
	if (!err && glibc)
		err = rss_glibc__new(&r->heaps);
	if (err) {
		rss_reader__free(r);
		return err;
	}
	*out = r;
	return 0;
}

void rss_reader__free(struct rss_reader *r)
{
	if (!r)
		return;
	memory__close(&r->mem);
	pagemap__close(r->pm);
	thread_stacks__free(&r->stacks);
	rss_glibc__free(r->heaps);
	free(r->now.arenas);
	free(r->now.sparse_pages);
	free(r->now.others);
	free(r);
}

/* VmRSS and its parts, from /proc/PID/status. */
static int read_status(int pid, struct rss_reading *now)
{
	static const struct {
		const char *key;
		size_t offset;
	} keys[] = {
		{ "\nVmRSS:", offsetof(struct rss_reading, vm_rss) },
		{ "\nRssAnon:", offsetof(struct rss_reading, rss_anon) },
		{ "\nRssFile:", offsetof(struct rss_reading, rss_file) },
		{ "\nRssShmem:", offsetof(struct rss_reading, rss_shmem) },
	};
	char path[64], *text, *line;
	size_t i;
	int err;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	err = proc__read_file(path, &text, NULL);
	if (err)
		return err == -ENOENT ? -ESRCH : err;
	/* A zombie, or a kernel thread: no memory of its own. */
	if (!strstr(text, "\nVmRSS:"))
		err = -ESRCH;
	for (i = 0; !err && i < sizeof(keys) / sizeof(keys[0]); i++) {
		uint64_t kb = 0;

		line = strstr(text, keys[i].key);
		if (line)
			sscanf(line + strlen(keys[i].key), "%" SCNu64, &kb);
		*(uint64_t *)((char *)now + keys[i].offset) = kb <= UINT64_MAX / 1024 ? kb * 1024 : 0;
	}
	free(text);
	return err;
}

/* The resident bytes of the mappings marked in which. */
static int resident_of(struct rss_reader *r, const struct vmas *v, const bool *which,
		       uint64_t *bytes)
{
	struct page_runs runs = {};
	size_t i;
	int err = 0;

	for (i = 0; !err && i < v->n; i++)
		if (which[i])
			err = pagemap__resident(r->pm, v->v[i].start, v->v[i].end, &runs);
	*bytes = runs.bytes;
	page_runs__free(&runs);
	return err;
}

/* Whether a mapping starting at addr is one the program made itself. */
static bool own_mapping(const struct rss_range *own, size_t n, uint64_t addr)
{
	size_t i = array__first_above(own, n, sizeof(*own), offsetof(struct rss_range, start),
				      addr);

	return i && addr < own[i - 1].end;
}

/* Another allocator's mappings: every private anonymous one neither a stack nor the
 * program's own. */
static void other_allocator(const struct vmas *v, const bool *is_stack, const struct rss_range *own,
			    size_t nown, bool *taken)
{
	size_t i;

	for (i = 0; i < v->n; i++)
		taken[i] = vma__private_anon(&v->v[i]) && !is_stack[i] &&
			   !own_mapping(own, nown, v->v[i].start);
}

/*
 * The anonymous bytes of mapping m that are not the allocator's (allocator_in of them are):
 * its anonymous pages, read in windows as smaps would count them. Mappings that can hold none
 * are not read: shared ones (their pages are RssShmem), the kernel's, and the allocator's
 * whole (taken, none of it counted in allocator_in: another allocator's).
 */
static int anon_of(struct rss_reader *r, const struct vma *m, bool taken, uint64_t allocator_in,
		   uint64_t *anon)
{
	uint64_t all = 0;
	int err;

	*anon = 0;
	if (m->shared || m->kind == VMA_KERNEL || (taken && !allocator_in))
		return 0;
	err = pagemap__anon(r->pm, m->start, m->end, &all);
	*anon = all > allocator_in ? all - allocator_in : 0;
	return err;
}

/* The anonymous mappings neither the allocator's nor stacks, their anonymous pages read:
 * into others. */
static int others(struct rss_reader *r, const struct vmas *v, const bool *taken,
		  const bool *is_stack, const uint64_t *allocator_in)
{
	struct rss_reading *now = &r->now;
	size_t i, cap = 0;
	int err = 0;

	free(now->others);
	now->others = NULL;
	now->nothers = 0;
	now->others_anon = 0;
	for (i = 0; !err && i < v->n; i++) {
		const struct vma *m = &v->v[i];
		uint64_t anon;

		if (is_stack[i])
			continue;
		err = anon_of(r, m, taken[i], allocator_in[i], &anon);
		now->others_anon += anon;
		if (err || !vma__private_anon(m) || !anon)
			continue;
		if (array__reserve(&now->others, &cap, now->nothers, sizeof(*now->others)))
			return -ENOMEM;
		now->others[now->nothers++] = (struct rss_mapping){ m->start, m->end, anon,
								     allocator_in[i] };
	}
	return err;
}

/* What the mappings hold: the allocator's, the stacks', and with a full read the rest. */
static int where(struct rss_reader *r, const struct vmas *v, bool full,
		 const struct rss_range *own, size_t nown, bool *taken, bool *is_stack,
		 uint64_t *allocator_in)
{
	struct rss_reading *now = &r->now;
	int err = 0;

	if (r->glibc)
		err = rss_glibc__find(r->heaps, r->pm, &r->mem, v, taken);
	if (!err)
		err = thread_stacks__find(&r->stacks, r->pid, v, taken, full, r->pm, &r->mem,
					  is_stack);
	if (!err && r->glibc)
		err = rss_glibc__find_mmapped(r->heaps, r->pm, &r->mem, v, taken, is_stack);
	else if (!err)
		other_allocator(v, is_stack, own, nown, taken);
	if (!err)
		err = resident_of(r, v, is_stack, &now->stacks);
	if (!err && r->glibc)
		err = rss_glibc__resident(r->heaps, r->pm, v, &now->allocator, allocator_in);
	else if (!err)
		err = resident_of(r, v, taken, &now->allocator);
	now->threads = r->stacks.threads;
	now->stacks_by_sp = r->stacks.by_sp;
	now->stacks_by_guard = r->stacks.by_guard;
	now->stack_maps = 0;
	for (size_t i = 0; i < v->n; i++)
		now->stack_maps += is_stack[i];
	if (!err && full && r->glibc)
		err = rss_glibc__walk(r->heaps, r->pm, &r->mem, v, now);
	if (!err && full)
		err = others(r, v, taken, is_stack, allocator_in);
	return err;
}

int rss_reader__read(struct rss_reader *r, bool full, const struct rss_range *own, size_t nown,
		     const struct rss_reading **out)
{
	struct rss_reading *now = &r->now;
	uint64_t start = clock__now_ns(), read_before = r->mem.bytes_read;
	unsigned int failed_before = r->mem.failed;
	bool *taken = NULL, *is_stack = NULL;
	uint64_t *allocator_in = NULL;
	struct vmas v = {};
	int err;

	*out = NULL;
	full = full || !now->full_time_ns || start - now->full_time_ns >= FULL_SPACING * now->full_ns;
	err = read_status(r->pid, now);
	if (!err)
		err = vmas__read(r->pid, &v);
	if (err)
		return err;
	taken = calloc(v.n, sizeof(*taken));
	is_stack = calloc(v.n, sizeof(*is_stack));
	allocator_in = calloc(v.n, sizeof(*allocator_in));
	err = taken && is_stack && allocator_in
		      ? where(r, &v, full, own, nown, taken, is_stack, allocator_in)
		      : -ENOMEM;
	now->time_ns = start;
	now->full = full && !err;
	now->pages = pagemap__method(r->pm);
	now->read_ns = clock__now_ns() - start;
	now->windows_gone = r->mem.failed - failed_before;
	if (now->full) {
		now->full_ns = now->read_ns;
		now->full_time_ns = start;
		now->memory_read = r->mem.bytes_read - read_before;
	}
	free(taken);
	free(is_stack);
	free(allocator_in);
	vmas__free(&v);
	if (!err)
		*out = now;
	return err;
}
